"""TLS on the app port and on HTTP, with a test CA made here (trustme), and the bind rules."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import httpx2
import mcp_types as types
import pytest
import trio
import trustme
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from app_client import App, ConnectionState
from app_client.tls import client_context
from broker.config.settings import Settings
from broker.daemon.run import run_daemon
from broker.cli.daemon_client import admin_request
from broker.errors import ConfigError, StartupError
from fedkit import start_daemon, tool_names, wait_until
from mcp_testkit import HTTPX_STREAM_WARNINGS, ScriptedApp
from rawapp import RawApp

pytestmark = [pytest.mark.filterwarnings(w) for w in HTTPX_STREAM_WARNINGS]


def server_files(tmp_path: Path, ca: trustme.CA) -> dict[str, str]:
    """A certificate for 127.0.0.1 and localhost signed by ``ca``: settings for the daemon."""
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_path, key_path = tmp_path / "server.pem", tmp_path / "server.key"
    cert_path.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    cert.private_key_pem.write_to_path(str(key_path))
    return {"tls_cert": str(cert_path), "tls_key": str(key_path)}


def ca_file(tmp_path: Path, ca: trustme.CA, name: str = "ca.pem") -> str:
    path = tmp_path / name
    ca.cert_pem.write_to_path(str(path))
    return str(path)


async def test_uplink_apps_agents_and_cli_over_tls(tmp_path: Path) -> None:
    ca = trustme.CA()
    async with trio.open_nursery() as nursery:
        top = await start_daemon(nursery, tmp_path / "top", http_port=0, **server_files(tmp_path, ca))
        runtime = json.loads((top.home / "runtime.json").read_text())
        assert runtime["tls"] is True and runtime["tlsCert"] == str((tmp_path / "server.pem").resolve())

        desk = await start_daemon(nursery, tmp_path / "desk", uplink=top.address, uplink_name="desk",
                                  uplink_token=top.token, uplink_tls_ca=ca_file(tmp_path, ca))
        app = await ScriptedApp(desk.port, desk.token).start(nursery)
        await wait_until(top.core, lambda: "desk__Demo__echo" in tool_names(top.core))

        # An agent over HTTPS, verifying the server against the test CA.
        verify = client_context(ca_file(tmp_path, ca))
        url = f"https://127.0.0.1:{top.info.http_port}/mcp"
        async with httpx2.AsyncClient(verify=verify, headers={"Authorization": f"Bearer {top.token}"},
                                      timeout=httpx2.Timeout(30.0, read=300.0)) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert "desk__Demo__echo" in names
                result = await client.call_tool("desk__Demo__echo", {"text": "over tls"})
                assert result.structured_content == {"echo": {"text": "over tls"}}
                assert isinstance(result.content[0], types.TextContent)

        # A local app finds the daemon through the home directory and pins its certificate.
        local = App("Local", home=top.home)

        @local.tool
        def hello() -> str:
            return "hi"

        async with local.connected(timeout=10):
            assert local.state is ConnectionState.CONNECTED
            assert (await top.core.router.call_tool("Local__hello", {})).result.data == "hi"
        assert (await admin_request(top.home, "status"))["port"] == top.port  # the CLI, pinned too

        # Plain TCP to a TLS port gets nowhere.
        plain = await RawApp.connect(top.port)
        with pytest.raises((EOFError, trio.BrokenResourceError)):
            await plain.register(top.token)
        await plain.aclose()
        await app.close()
        desk.shutdown.set()
        top.shutdown.set()


async def test_an_uplink_refuses_a_parent_it_cannot_verify(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        top = await start_daemon(nursery, tmp_path / "top", **server_files(tmp_path, trustme.CA()))
        desk = await start_daemon(nursery, tmp_path / "desk", uplink=top.address, uplink_name="desk",
                                  uplink_token=top.token, uplink_tls_ca=ca_file(tmp_path, trustme.CA(), "other.pem"))
        uplink = desk.core.uplink
        with trio.fail_after(10):
            await uplink.changed.wait_until(lambda: "CERTIFICATE_VERIFY_FAILED" in (uplink.app.last_error or ""))
        assert not tool_names(top.core)
        desk.shutdown.set()
        top.shutdown.set()


async def test_non_loopback_needs_tls_or_an_explicit_flag(tmp_path: Path) -> None:
    remote = {"home": tmp_path, "host": "0.0.0.0", "port": 0, "http_port": None}
    with pytest.raises(StartupError, match="--allow-remote"):
        await run_daemon(Settings(**remote))
    with pytest.raises(StartupError, match="without TLS"):
        await run_daemon(Settings(**remote, allow_remote=True))
    with pytest.raises(ConfigError, match="both tls_cert and tls_key"):
        await run_daemon(Settings(**remote, allow_remote=True, tls_cert=str(tmp_path / "x.pem")))
    with pytest.raises(StartupError, match="cannot load the TLS certificate"):
        await run_daemon(Settings(**remote, allow_remote=True, tls_cert=str(tmp_path / "x.pem"),
                                  tls_key=str(tmp_path / "x.key")))
    assert not (tmp_path / "runtime.json").exists()


def test_client_contexts(tmp_path: Path) -> None:
    ca = trustme.CA()
    files = server_files(tmp_path, ca)
    pinned = client_context(pinned_cert=files["tls_cert"])
    assert pinned.check_hostname is False and pinned.verify_mode is ssl.CERT_REQUIRED
    assert pinned.verify_flags & ssl.VERIFY_X509_PARTIAL_CHAIN
    verified = client_context(ca_file(tmp_path, ca))
    assert verified.check_hostname is True
