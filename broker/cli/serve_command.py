"""``toolbridge serve``: run the daemon in the foreground.

The only command that imports the daemon (``broker.daemon``), and only once it runs: every
other command is a client of a running daemon and starts without it.
"""

from __future__ import annotations

import argparse

from ._common import EXIT_OK, SubParsers, add_command, add_home, home_from

__all__ = ["add_parser", "cmd_serve"]


def cmd_serve(args: argparse.Namespace) -> int:
    import structlog
    import trio

    from ..config.logsetup import configure_logging
    from ..config.settings_file import env_deprecations, load_settings
    from ..daemon.gc_policy import freezing_after_long_passes
    from ..daemon.run import run_daemon

    settings = load_settings(args, home_from(args))
    # --log-level was parsed but never applied (issue 19 item 11).
    configure_logging(settings.log_format, getattr(args, "log_level", "info"), batched=True)  # run_daemon flushes it
    for note in env_deprecations():
        structlog.get_logger("toolbridge").warning("deprecated_variable", note=note)
    with freezing_after_long_passes():  # no long garbage-collection pauses of the loop (gc_policy)
        trio.run(lambda: run_daemon(settings, handle_signals=True))
    return EXIT_OK


def add_parser(sub: SubParsers) -> None:
    serve = add_command(sub, "serve")
    add_home(serve)
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="TCP port for apps (default 47700; 0 = any free port)")
    serve.add_argument("--http-port", type=int, help="TCP port for MCP over HTTP (default 47701; 0 = any)")
    serve.add_argument("--no-http", action="store_true", help="do not serve MCP over HTTP")
    serve.add_argument("--no-unix-socket", action="store_true",
                       help="do not listen on <home>/toolbridge.sock (local clients then use TCP)")
    serve.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    serve.add_argument("--tls-cert", help="PEM certificate (chain): TLS on the app and HTTP ports")
    serve.add_argument("--tls-key", help="PEM private key of --tls-cert")
    serve.add_argument("--allow-insecure-remote", action="store_true",
                       help="allow a non-loopback --host (or --uplink) without TLS (not recommended)")
    serve.add_argument("--uplink", metavar="HOST:PORT", help="appear as one app in the broker at HOST:PORT")
    serve.add_argument("--uplink-name", metavar="NAME", help="the name to appear under (default: host name)")
    serve.add_argument("--uplink-token-file", metavar="PATH", help="file holding the token the parent issued")
    serve.add_argument("--uplink-tls-ca", metavar="PEM", help="connect to the parent over TLS, trusting this CA")
    serve.add_argument("--uplink-tls", action="store_true", help="connect to the parent over TLS (system CAs)")
    serve.add_argument("--nats", dest="nats_url", metavar="URL",
                       help="join a NATS cluster (nats://HOST:PORT or tls://...; several seeds separated by commas): "
                            "offer this broker's tools, see others'")
    serve.add_argument("--broker-name", metavar="NAME", help="this broker's name in the NATS cluster (default: host name)")
    serve.add_argument("--nats-credentials", metavar="PATH", help="NATS .creds file (JWT + NKey) from your operator")
    serve.add_argument("--nats-nkey-seed", metavar="PATH", help="file holding this broker's NATS user NKey seed (SU...)")
    serve.add_argument("--nats-user", metavar="NAME",
                       help="NATS user name, sent to every server of the cluster; its password from "
                            "--nats-password-file or the environment variable TOOLBRIDGE_NATS_PASSWORD")
    serve.add_argument("--nats-password-file", metavar="PATH", help="file holding the password of --nats-user")
    serve.add_argument("--nats-token-file", metavar="PATH",
                       help="file holding a NATS token (or the environment variable TOOLBRIDGE_NATS_TOKEN)")
    serve.add_argument("--nats-tls-ca", metavar="PEM", help="verify the NATS server's certificate against this CA")
    serve.add_argument("--log-format", choices=["auto", "console", "json"], help="log style on stderr")
    serve.add_argument("--discovery-rerank", choices=["off", "semantic", "auto"],
                       help="search_tools ranking: BM25 only (off), hybrid with a small embedding model "
                            "(semantic; needs the semantic extra: `toolbridge doctor` says how to add it), or semantic when that extra "
                            "is installed (auto, the default)")
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info",
                       help="least important log lines to show on stderr (default info)")
    serve.set_defaults(func=cmd_serve)
