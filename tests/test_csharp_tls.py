"""How the C# client reaches the daemon (issue 29): over TCP with TLS it pins the daemon's own
certificate from runtime.json (SslStream), as app_client does, and refuses any other; the Unix
socket runtime.json names comes first (it is never TLS: protocol.md section 1)."""

from __future__ import annotations

import json
from pathlib import Path

import trio
import trustme

from csharp_testkit import FIXTURE_APP, build, cs_env, mono
from fedkit import start_daemon
from test_tls import server_files
from agentkit import app_process


async def test_the_csharp_app_pins_the_daemons_certificate(tmp_path: Path) -> None:
    build()
    async with trio.open_nursery() as nursery:
        daemon = await start_daemon(nursery, tmp_path / "home", **server_files(tmp_path, trustme.CA()))
        runtime = json.loads((daemon.home / "runtime.json").read_text())
        assert runtime["tls"] is True
        del runtime["socket"]  # TCP, so TLS
        (daemon.home / "runtime.json").write_text(json.dumps(runtime))
        async with app_process([mono(), str(FIXTURE_APP)], cs_env(TOOLBRIDGE_HOME=str(daemon.home))) as (app, stdout, _):
            await stdout.wait_for("connected Conformance\n")
            outcome = await daemon.core.router.call_tool("Conformance__echo", {"text": "over tls"})
            assert outcome.result is not None and outcome.result.data == "over tls"
            app.terminate()
            with trio.fail_after(10):
                assert await app.wait() == 0
        daemon.shutdown.set()


async def test_a_certificate_other_than_the_pinned_one_is_refused(tmp_path: Path) -> None:
    build()
    async with trio.open_nursery() as nursery:
        daemon = await start_daemon(nursery, tmp_path / "home", **server_files(tmp_path, trustme.CA()))
        runtime = json.loads((daemon.home / "runtime.json").read_text())
        other = trustme.CA().issue_cert("127.0.0.1")
        stranger = tmp_path / "stranger.pem"
        stranger.write_bytes(other.cert_chain_pems[0].bytes())
        runtime["tlsCert"] = str(stranger)  # the app would pin a certificate the daemon does not have
        del runtime["socket"]
        (daemon.home / "runtime.json").write_text(json.dumps(runtime))
        async with app_process([mono(), str(FIXTURE_APP)], cs_env(TOOLBRIDGE_HOME=str(daemon.home))) as (app, _, stderr):
            await stderr.wait_for("connect_failed", timeout=30)
            assert daemon.core.registry.lookup("Conformance__echo") is None
            app.terminate()
            with trio.fail_after(10):
                await app.wait()
        daemon.shutdown.set()


async def test_the_unix_socket_in_runtime_json_comes_first(tmp_path: Path) -> None:
    build()
    async with trio.open_nursery() as nursery:
        daemon = await start_daemon(nursery, tmp_path / "home")
        runtime = json.loads((daemon.home / "runtime.json").read_text())
        assert runtime["socket"]
        with trio.socket.socket() as closed:  # a port nobody listens on: only the socket can work
            await closed.bind(("127.0.0.1", 0))
            runtime["port"] = closed.getsockname()[1]
        (daemon.home / "runtime.json").write_text(json.dumps(runtime))
        async with app_process([mono(), str(FIXTURE_APP)], cs_env(TOOLBRIDGE_HOME=str(daemon.home))) as (app, stdout, _):
            await stdout.wait_for("connected Conformance\n")
            outcome = await daemon.core.router.call_tool("Conformance__echo", {"text": "over the socket"})
            assert outcome.result is not None and outcome.result.data == "over the socket"
            app.terminate()
            with trio.fail_after(10):
                assert await app.wait() == 0
        daemon.shutdown.set()
