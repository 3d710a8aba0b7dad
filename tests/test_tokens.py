"""Scoped tokens: the file, the command, and what each scope lets a connection do."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import httpx2
import pytest
import trio

from app_client.wire import AgentConnect, encode_message
from broker.config import tokens
from broker.cli import main
from broker.cli.daemon_client import DaemonUnavailable, admin_request
from fedkit import start_daemon, tool_names, wait_until
from mcp_testkit import ScriptedApp
from rawapp import ECHO_TOOL, RawApp

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


# --- the file and the command --------------------------------------------------------------


def test_scopes_parse_and_match() -> None:
    grant = tokens.Grant("t", (tokens.parse_scope("app:Watch*"), tokens.parse_scope("uplink:desk")), "x")
    assert grant.allows_register("WatchTower", uplink=False)
    assert not grant.allows_register("watchtower", uplink=False)  # case-sensitive
    assert not grant.allows_register("WatchTower", uplink=True)
    assert grant.allows_register("desk", uplink=True)
    assert not grant.allows_register("laptop", uplink=True)
    assert not grant.allows_agent
    assert grant.describe() == "app:Watch*, uplink:desk"
    assert str(tokens.parse_scope("uplink")) == "uplink"
    for bad in ("apps:x", "app", "app:", "agent:", "admin"):
        with pytest.raises(tokens.TokenError):
            tokens.parse_scope(bad)


def test_issue_list_revoke_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    assert main(["token", "--home", str(home), "--issue", "desk", "--scope", "uplink", "--scope", "agent"]) == 0
    secret = capsys.readouterr().out.strip()
    assert secret.startswith(tokens.TOKEN_PREFIX) and len(secret) > 40
    path = home / tokens.TOKENS_FILE
    text = path.read_text()
    assert secret not in text  # only its hash is kept
    assert json.loads(text)["tokens"][0]["sha256"] == tokens.hash_secret(secret)
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600

    assert main(["token", "--home", str(home), "--issue", "ci", "--scope", "app:Build*"]) == 0
    capsys.readouterr()
    assert main(["token", "--home", str(home), "--list"]) == 0
    listed = capsys.readouterr().out
    assert "desk" in listed and "uplink, agent" in listed and "app:Build*" in listed
    assert secret not in listed and tokens.hash_secret(secret) not in listed

    assert main(["token", "--home", str(home), "--issue", "desk", "--scope", "agent"]) == 1  # name taken
    assert "exists" in capsys.readouterr().err
    assert main(["token", "--home", str(home), "--issue", "x", "--scope", "root"]) == 1
    assert "unknown scope" in capsys.readouterr().err
    assert main(["token", "--home", str(home), "--issue", "x"]) == 1
    assert main(["token", "--home", str(home), "--revoke", "desk"]) == 0
    assert main(["token", "--home", str(home), "--revoke", "desk"]) == 1
    assert "no token named 'desk'" in capsys.readouterr().err
    assert [e.name for e in tokens.read_entries(home)] == ["ci"]


def test_the_authenticator_follows_the_file(tmp_path: Path) -> None:
    home = tmp_path
    auth = tokens.Authenticator("default-secret", home)
    assert auth.check("default-secret") == tokens.Grant("default", tokens.DEFAULT_GRANT_SCOPES)
    assert auth.check("") is None and auth.check("nope") is None
    secret = tokens.issue(home, "desk", ["uplink"])
    grant = auth.check(secret)
    assert grant is not None and grant.name == "desk" and not grant.is_default

    class Conn:
        reason: str | None = None

        def abort(self, reason: str) -> None:
            self.reason = reason

    conn = Conn()
    auth.track(grant, conn)
    tokens.revoke(home, "desk")
    assert auth.check(secret) is None  # at once, without waiting for the watcher
    assert conn.reason == "the token 'desk' was revoked"
    (home / tokens.TOKENS_FILE).write_text("{not json")
    assert auth.check(secret) is None and auth.check("default-secret") is not None  # fails closed


# --- what a daemon lets each token do ------------------------------------------------------


async def test_app_scope_allows_only_matching_names(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        daemon = await start_daemon(nursery, tmp_path / "home")
        secret = tokens.issue(daemon.home, "builds", ["app:Build*"])

        wrong = await RawApp.connect(daemon.port)
        reply = await wrong.register(secret, app_name="WatchTower")
        assert reply["type"] == "error" and reply["code"] == "forbidden" and reply["fatal"] is True
        assert "'builds' may not register the app name 'WatchTower'" in reply["message"]
        assert await wrong.closed()

        as_uplink = await RawApp.connect(daemon.port)
        reply = await as_uplink.register(secret, app_name="BuildBot", via=["abcdef"])
        assert reply["code"] == "forbidden" and "an uplink named" in reply["message"]

        right = await RawApp.connect(daemon.port)
        reply = await right.register(secret, app_name="BuildBot", tools=[ECHO_TOOL])
        assert reply["type"] == "registered"
        assert reply["chain"] == [daemon.core.broker_id]

        uplink_secret = tokens.issue(daemon.home, "laptop", ["uplink:laptop"])
        plain = await RawApp.connect(daemon.port)
        reply = await plain.register(uplink_secret, app_name="laptop")
        assert reply["code"] == "forbidden"  # an uplink token does not register plain apps
        for conn in (wrong, as_uplink, right, plain):
            await conn.aclose()
        daemon.shutdown.set()


async def test_agent_scope_for_stdio_http_and_admin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with trio.open_nursery() as nursery:
        daemon = await start_daemon(nursery, tmp_path / "home", http_port=0)
        agent_secret = tokens.issue(daemon.home, "claude", ["agent"])
        app_secret = tokens.issue(daemon.home, "app", ["app:*"])
        url = f"http://127.0.0.1:{daemon.info.http_port}/mcp"
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        async with httpx2.AsyncClient() as http:
            ok = await http.post(url, json=INIT, headers={**headers, "Authorization": f"Bearer {agent_secret}"})
            assert ok.status_code == 200
            scoped = await http.post(url, json=INIT, headers={**headers, "Authorization": f"Bearer {app_secret}"})
            assert scoped.status_code == 403 and "may not connect agents" in scoped.text
            unknown = await http.post(url, json=INIT, headers={**headers, "Authorization": "Bearer tbk_nope"})
            assert unknown.status_code == 403 and "no valid token" in unknown.text

        for secret, expected in ((agent_secret, "agentConnected"), (app_secret, "error")):
            conn = await RawApp.connect(daemon.port)
            await conn.send(encode_message(AgentConnect(token=secret)))
            assert (await conn.recv())["type"] == expected
            await conn.aclose()

        # The admin channel needs the daemon's own token.
        with monkeypatch.context() as patch:
            patch.setenv("TOOLBRIDGE_TOKEN", agent_secret)
            with pytest.raises(DaemonUnavailable, match="admin needs the daemon's own token"):
                await admin_request(daemon.home, "status")
        assert (await admin_request(daemon.home, "status"))["brokerId"] == daemon.core.broker_id
        daemon.shutdown.set()


async def test_revoking_drops_live_connections_and_refuses_new_ones(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        top = await start_daemon(nursery, tmp_path / "top", reconnect_grace=0.3)
        secret = tokens.issue(top.home, "desk", ["uplink"])
        token_file = tmp_path / "desk.token"
        token_file.write_text(secret)
        desk = await start_daemon(nursery, tmp_path / "desk", uplink=top.address, uplink_name="desk",
                                  uplink_token_file=str(token_file))
        app = await ScriptedApp(desk.port, desk.token).start(nursery)
        await wait_until(top.core, lambda: "desk__Demo__echo" in tool_names(top.core))

        agent_secret = tokens.issue(top.home, "agent", ["agent"])
        agent = await RawApp.connect(top.port)
        await agent.send(encode_message(AgentConnect(token=agent_secret)))
        assert (await agent.recv())["type"] == "agentConnected"

        tokens.revoke(top.home, "desk")
        tokens.revoke(top.home, "agent")
        # The watcher drops both live links within about a second; the uplink cannot come back.
        assert await agent.closed(timeout=5)
        await wait_until(top.core, lambda: not tool_names(top.core), timeout=10)
        uplink = desk.core.uplink
        uplink_app = uplink.app
        with trio.fail_after(10):
            await uplink.changed.wait_until(lambda: "refused the token" in (uplink_app.last_error or ""))
        assert desk.core.status()["uplink"]["state"] == "unauthorized"
        await agent.aclose()
        await app.close()
        desk.shutdown.set()
        top.shutdown.set()
