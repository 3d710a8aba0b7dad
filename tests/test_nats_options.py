"""``--nats`` seeds and credentials (issue 27 items 2 and 7): checked before the daemon starts,
sent to every server, never shown; connection errors logged once per reason and minute."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

pytest.importorskip("nats")

from broker.cli import build_parser  # noqa: E402
from broker.config.settings import Settings  # noqa: E402
from broker.config.settings_file import load_settings  # noqa: E402
from broker.errors import ConfigError  # noqa: E402
from broker.federation.nats_auth import REPEAT_SECONDS, RepeatFilter, redacted  # noqa: E402
from broker.federation.nats_link import nats_options  # noqa: E402


def test_several_seed_urls_are_accepted_and_each_is_checked(tmp_path: Path) -> None:
    options = nats_options(Settings(home=tmp_path, broker_name="A",
                                    nats_url="nats://127.0.0.1:4222, 127.0.0.1:4223,nats://localhost:4224"))
    assert options is not None
    assert options.servers == ["nats://127.0.0.1:4222", "nats://127.0.0.1:4223", "nats://localhost:4224"]
    for bad in ("nats://127.0.0.1:4222,http://x:1", "nats://127.0.0.1:notaport", ",", "tls://a:1,nats://127.0.0.1:2"):
        with pytest.raises(ConfigError, match="nats_url"):
            nats_options(Settings(home=tmp_path, broker_name="A", nats_url=bad))


def test_a_user_and_password_apply_to_every_server_and_are_never_shown(tmp_path: Path) -> None:
    secret = "s3cret-pw"
    (tmp_path / "pw").write_text(secret + "\n")
    args = build_parser("serve").parse_args(["serve", "--nats", "nats://127.0.0.1:1,nats://127.0.0.1:2", "--broker-name", "A",
                                      "--nats-user", "A", "--nats-password-file", str(tmp_path / "pw")])
    options = nats_options(load_settings(args, tmp_path, environ={}))
    assert options is not None and options.auth.connect_options() == {"user": "A", "password": secret}
    assert secret not in repr(options) and secret not in options.url
    # From the environment, as well.
    from_env = nats_options(load_settings(build_parser().parse_args(
        ["serve", "--nats", "nats://127.0.0.1:1", "--nats-user", "A"]), tmp_path,
        environ={"TOOLBRIDGE_NATS_PASSWORD": secret}))
    assert from_env is not None and from_env.auth.password == secret
    # In the URL (the old way): taken out of every URL, used for every server.
    old = nats_options(Settings(home=tmp_path, broker_name="A", nats_url=f"nats://A:{secret}@127.0.0.1:1,127.0.0.1:2"))
    assert old is not None and old.url == "nats://127.0.0.1:1,nats://127.0.0.1:2"
    assert old.auth.connect_options() == {"user": "A", "password": secret}
    assert redacted(f"nats://A:{secret}@h:1,nats://tok@h:2") == "nats://***@h:1,nats://***@h:2"


def test_nats_credentials_are_refused_with_the_fix_when_they_cannot_work(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("t0k")
    (tmp_path / "empty").write_text("")
    (tmp_path / "seed").write_text("SAnotauserseed")
    url = "nats://127.0.0.1:4222"
    for settings, match in (
        ({"nats_user": "A"}, "TOOLBRIDGE_NATS_PASSWORD"),
        ({"nats_user": "A", "nats_password": "x", "nats_token_file": str(tmp_path / "tok")}, "one way"),
        ({"nats_password_file": str(tmp_path / "empty"), "nats_user": "A"}, "empty"),
        ({"nats_password": "x"}, "needs --nats-user"),
        ({"nats_nkey_seed": str(tmp_path / "seed")}, "user NKey seed"),
        ({"nats_token_file": str(tmp_path / "missing")}, "cannot read"),
    ):
        with pytest.raises(ConfigError, match=match):
            nats_options(Settings(home=tmp_path, broker_name="A", nats_url=url, **settings))
    token = nats_options(Settings(home=tmp_path, broker_name="A", nats_url=url, nats_token_file=str(tmp_path / "tok")))
    assert token is not None and token.auth.connect_options() == {"token": "t0k"}


def test_alternating_connection_errors_are_logged_once_per_reason_and_minute() -> None:
    now = [0.0]
    errors = RepeatFilter(lambda: now[0])
    refused, violation = ("ConnectionRefusedError", "refused"), ("Error", "Authorization Violation")
    logged = []
    for tick in range(240):  # 8 a second for 30 s, two reasons alternating (issue 27 item 7)
        now[0] = tick / 8
        reason = refused if tick % 2 else violation
        if errors.admit(reason) is not None:
            logged.append(reason)
    assert logged == [violation, refused]
    now[0] = REPEAT_SECONDS + 1
    assert errors.admit(violation) == 119  # logged again, saying how many were held back


@pytest.mark.skipif(sys.platform == "win32", reason="ps")
async def test_a_daemon_process_joins_with_several_seeds_and_its_password_shows_nowhere(tmp_path: Path) -> None:
    import nats

    from broker.federation.nats_bridge import open_asyncio_thread
    from faultkit import DaemonProcess
    from natscluster import cluster_auth
    from natskit import nats_cluster

    auth = cluster_auth("user", tmp_path, ["A", "watch"])
    password = auth.secrets[0]
    async with nats_cluster(2, auth.config) as nodes, open_asyncio_thread("test-nats") as aio:
        watch_password = Path(auth.logins["watch"]["nats_password_file"]).read_text().strip()
        nc = await aio.run(nats.connect(nodes[1].url, user="watch", password=watch_password))
        announced = trio.Event()
        token = trio.lowlevel.current_trio_token()

        async def on_announce(msg: object) -> None:
            token.run_sync_soon(announced.set)

        daemon = DaemonProcess(tmp_path / "A", 0, "--no-http", "--broker-name", "A",
                               "--nats", f"{nodes[0].url},{nodes[1].url}", "--nats-user", "A",
                               "--nats-password-file", auth.logins["A"]["nats_password_file"])
        try:
            await aio.run(nc.subscribe("toolbridge.tools.A", cb=on_announce))
            await aio.run(nc.flush())
            await daemon.start()
            with trio.fail_after(20):
                await announced.wait()  # it logged in and announced itself
            assert daemon.process is not None
            shown = subprocess.run(["ps", "-ww", "-o", "args=", "-p", str(daemon.process.pid)],
                                   capture_output=True, text=True, check=True).stdout
            assert "--nats-user" in shown and password not in shown
            daemon.process.terminate()  # a clean stop writes out the whole log
            daemon.process.wait(10)
            assert password not in daemon.log() and "nats_joined" in daemon.log()
        finally:
            daemon.stop()
            await aio.run(nc.close())
