"""Who may connect: the token on every kind of connection, the token file, the HTTP gate
(bearer token, Origin, Host), other protocols knocking on the app port, non-loopback binds.

Several threats are also covered elsewhere (SECURITY.md lists every test):
``test_protocol_raw.py::test_register_rejections_are_fatal_and_clear`` (register without or
with a wrong token), ``test_daemon_process.py::test_first_start_creates_a_private_token_and_runtime_file``,
``test_mcp_http.py::test_a_token_is_required`` / ``test_a_foreign_origin_is_forbidden`` /
``test_a_foreign_host_is_misdirected``, ``test_daemon_process.py::test_non_loopback_bind_needs_an_explicit_flag``.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
import structlog
import trio

from broker.config import home as home_files
from broker.config.settings import Settings
from broker.daemon.run import DaemonInfo, run_daemon
from broker.mcp.gate import host_allowed, origin_allowed
from faultkit import RawAgent
from mcp_testkit import HTTPX_STREAM_WARNINGS, mcp_url, running_daemon
from rawapp import RawApp

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]

POST = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "sec"}}}


def near_misses(token: str) -> list[str]:
    """Wrong tokens an attacker might try: prefixes, case, padding, one character off, huge."""
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    return ["", token[:-1], token[:8], token.upper() if token.upper() != token else token.lower(),
            token + " ", " " + token, token + "x", flipped, "\u0000" + token, token * 2, "x" * 100_000]


# --- the token on the app port: apps, agent links, admin ---------------------------------------


async def test_every_kind_of_connection_needs_the_exact_token(daemon: DaemonInfo) -> None:
    for wrong in near_misses(daemon.token):
        app = await RawApp.connect(daemon.port)
        reply = await app.register(wrong)
        assert (reply["type"], reply["code"], reply["fatal"]) == ("error", "unauthorized", True), wrong[:20]
        assert await app.closed()

        agent = await RawApp.connect(daemon.port)
        await agent.send({"type": "agentConnect", "token": wrong})
        reply = await agent.recv()
        assert (reply["type"], reply["code"]) == ("error", "unauthorized"), wrong[:20]
        assert await agent.closed()

        admin = await RawApp.connect(daemon.port)
        await admin.send({"type": "admin", "token": wrong, "command": "status"})
        reply = await admin.recv()
        assert reply["type"] == "adminResult" and reply["ok"] is False and "result" not in reply
        assert await admin.closed()
    assert daemon.core.registry.instances() == [] and daemon.core.agent_sessions == 0
    # ... and the right one works for each.
    assert (await (await RawApp.connect(daemon.port)).register(daemon.token))["type"] == "registered"
    admin = await RawApp.connect(daemon.port)
    await admin.send({"type": "admin", "token": daemon.token, "command": "status"})
    assert (await admin.recv())["ok"] is True
    async with trio.open_nursery() as nursery:
        agent_link = await RawAgent.connect(nursery, daemon.port, daemon.token)
        await agent_link.aclose()


async def test_a_token_is_not_an_agent_id_or_a_type_confusion(daemon: DaemonInfo) -> None:
    for token in (None, 0, True, [daemon.token], {"token": daemon.token}):
        app = await RawApp.connect(daemon.port)
        await app.send({"type": "register", "appName": "A", "token": token})
        reply = await app.recv()
        assert reply["type"] == "error" and reply["fatal"] is True, token
        assert reply["code"] in {"invalid_message", "unauthorized"}
        assert await app.closed()


async def test_other_protocols_knocking_on_the_app_port_are_turned_away(daemon: DaemonInfo) -> None:
    """A browser (form POST, fetch) or any other client speaking HTTP/TLS to the NDJSON port."""
    probes = [
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 60\r\n\r\n"
        b'{"type":"register","appName":"Evil","token":"guess"}\n',
        b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(32) + b"\n",  # a TLS ClientHello
    ]
    for probe in probes:
        stream = await trio.open_tcp_stream("127.0.0.1", daemon.port)
        await stream.send_all(probe)
        app = RawApp(stream)
        reply = await app.recv()
        assert reply["type"] == "error" and reply["fatal"] is True
        assert await app.closed()
    assert daemon.core.registry.instances() == []


# --- the token file ----------------------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
async def test_the_token_file_is_private_even_if_it_was_not(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    token = home_files.load_or_create_token(home)
    assert stat.S_IMODE((home / "token").stat().st_mode) == 0o600
    os.chmod(home / "token", 0o644)  # restored from a backup, edited by hand, ...
    os.chmod(home, 0o755)
    with structlog.testing.capture_logs() as logs:
        async with running_daemon(home, http_port=None) as info:
            assert info.token == token
            assert stat.S_IMODE((home / "token").stat().st_mode) == 0o600
            assert stat.S_IMODE(home.stat().st_mode) == 0o700
            assert stat.S_IMODE((home / "runtime.json").stat().st_mode) == 0o600
    assert any(entry["event"] == "token_file_permissions_tightened" for entry in logs)
    rotated = subprocess.run([sys.executable, "-m", "broker", "token", "--home", str(home), "--rotate"],
                             capture_output=True, text=True, timeout=60)
    assert rotated.returncode == 0
    assert stat.S_IMODE((home / "token").stat().st_mode) == 0o600
    assert rotated.stdout.strip() == (home / "token").read_text().strip() != token


# --- HTTP: token, Origin, Host -------------------------------------------------------------------


async def post(http: httpx2.AsyncClient, url: str, body: Any, **headers: str) -> httpx2.Response:
    return await http.post(url, content=json.dumps(body).encode(), headers={**POST, **headers})


async def test_http_needs_the_token_even_with_a_valid_session_id(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, httpx2.AsyncClient(timeout=30) as http:
        url = mcp_url(info)
        good = {"authorization": f"Bearer {info.token}"}
        started = await post(http, url, INITIALIZE, **good)
        assert started.status_code == 200
        session = started.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert (await post(http, url, listing, **good, **{"mcp-session-id": session})).status_code == 200
        for authorization in [None, "Bearer", f"Bearer {info.token[:-1]}", f"bearer  {info.token}x",
                              f"Token {info.token}", f"Basic {info.token}", info.token]:
            headers = {"mcp-session-id": session}
            if authorization is not None:
                headers["authorization"] = authorization
            response = await post(http, url, listing, **headers)
            assert response.status_code == 403, authorization
            assert "result" not in response.json()
        # A token in the URL is not a token.
        response = await http.post(f"{url}?token={info.token}", content=json.dumps(INITIALIZE), headers=POST)
        assert response.status_code == 403
        # GET and DELETE of the session need it too.
        assert (await http.get(url, headers={"mcp-session-id": session, "accept": "text/event-stream"})).status_code == 403
        assert (await http.delete(url, headers={"mcp-session-id": session})).status_code == 403
        assert (await post(http, url, listing, **good, **{"mcp-session-id": session})).status_code == 200


async def test_origin_and_host_are_checked_before_the_token(tmp_path: Path) -> None:
    async with running_daemon(tmp_path / "home") as info, httpx2.AsyncClient(timeout=30) as http:
        url = mcp_url(info)
        for origin in ("http://localhost.evil.example", "http://127.0.0.1@evil.example", "HTTPS://EVIL.EXAMPLE",
                       "http://[::1].evil.example", "chrome-extension://abcdef", "http://0.0.0.0"):
            for authorization in (f"Bearer {info.token}", "Bearer wrong"):
                response = await post(http, url, INITIALIZE, origin=origin, authorization=authorization)
                assert response.status_code == 403, origin
        for host in ("localhost.", "127.0.0.1.nip.io", "[::ffff:127.0.0.1]", "evil.example:80@127.0.0.1",
                     f"127.0.0.1:{info.http_port}:80", "localhost:abc"):
            response = await post(http, url, INITIALIZE, host=host, authorization=f"Bearer {info.token}")
            assert response.status_code in (400, 421), host


@pytest.mark.parametrize(("origin", "ok"), [
    ("http://localhost.evil.example", False), ("http://127.0.0.1@evil.example", False), ("null", False),
    ("http://localhost:8080", True), ("http://127.0.0.2", True), ("https://[::1]", True),
])
def test_origin_rule_extra_cases(origin: str, ok: bool) -> None:
    assert origin_allowed(origin) is ok


@pytest.mark.parametrize(("host", "ok"), [
    ("localhost.", False), ("127.0.0.1.nip.io", False), ("[::ffff:127.0.0.1]", False), ("0.0.0.0", False),
    ("evil.example:80@127.0.0.1", False), ("127.0.0.1:47701:80", False), ("[::1]:47701", True),
])
def test_host_rule_extra_cases(host: str, ok: bool) -> None:
    assert host_allowed(host) is ok


# --- binding to a non-loopback address ------------------------------------------------------------


def remote_settings(home: Path, **extra: Any) -> Settings:
    fields = {f.name for f in attrs.fields(Settings)}
    options: dict[str, Any] = {"host": "0.0.0.0", "port": 0, "http_port": 0, "allow_remote": True, **extra}
    if "allow_insecure_remote" in fields:  # a TLS-less remote bind needs this second opt-in too
        options["allow_insecure_remote"] = True
    return Settings(home=home, **options)


async def test_a_non_loopback_bind_needs_the_flag_and_is_logged_as_a_warning(tmp_path: Path) -> None:
    from broker.errors import StartupError

    with pytest.raises(StartupError, match="--allow-remote"):
        await run_daemon(Settings(home=tmp_path / "refused", host="0.0.0.0", port=0, http_port=None))

    shutdown = trio.Event()
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            info: DaemonInfo = await nursery.start(
                lambda task_status: run_daemon(remote_settings(tmp_path / "home"), shutdown=shutdown,
                                               task_status=task_status))
            # Reachable on every interface now, but still only with the token, and HTTP still
            # refuses Host names it was not told about (DNS rebinding).
            app = await RawApp.connect(info.port)
            assert (await app.register("wrong"))["code"] == "unauthorized"
            async with httpx2.AsyncClient(timeout=30) as http:
                response = await http.post(f"http://127.0.0.1:{info.http_port}/mcp", content=json.dumps(INITIALIZE),
                                           headers={**POST, "authorization": f"Bearer {info.token}",
                                                    "host": "192.168.1.20"})
                assert response.status_code == 421
            await app.aclose()
            shutdown.set()
    warnings = [e for e in logs if e["event"] == "listening_on_non_loopback"]
    assert warnings and warnings[0]["log_level"] == "warning" and warnings[0]["host"] == "0.0.0.0"
