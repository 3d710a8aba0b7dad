"""Running the daemon: bind the listeners, write the runtime file, serve, shut down cleanly.

The listeners: the app port (TCP, loopback by default) and, where the platform has one, the
Unix socket in the home (``broker.daemon.local_socket``); both are served by the same
``BrokerCore.handle_connection``.

``run_daemon`` is a ``nursery.start``-able task (hypercorn's pattern): it reports a
:class:`DaemonInfo` with the bound ports once it is ready, so tests and callers can use port 0.
``shutdown`` (an event the caller may set) or SIGINT/SIGTERM (when ``handle_signals``) starts a
graceful stop: listeners close, calls in flight fail with a shutdown error that still reaches
their agents, and after a short drain every connection is cancelled.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from typing import Any
from pathlib import Path

import attrs
import structlog
import trio

from ..config import home as home_files
from ..config import tls
from ..config.fdlimit import raise_descriptor_limit
from ..core.calllog import open_call_log
from ..config.settings import Settings
from . import admin
from .broker_core import Addresses, AdminHandler, BrokerCore
from ..errors import StartupError
from ..federation.rules import FederationState, load_or_create_broker_id
from .local_socket import bind_local_listener
from ..config.logsetup import flush_periodically
from ..config.net import is_loopback, port_in_use, port_taken_error
from ..federation.uplink import Uplink, uplink_options
from ..mcp.front_door import install as install_mcp
from ..mcp.server import McpServer
from ..version import VERSION

log = structlog.get_logger("toolbridge.daemon")

#: How long connections get to deliver shutdown errors before they are cancelled.
SHUTDOWN_DRAIN_SECONDS = 1.0


@attrs.frozen
class DaemonInfo:
    host: str
    port: int
    http_port: int | None
    token: str
    core: BrokerCore
    #: Its NATS membership (``broker.federation.nats_link.NatsFederation``) with ``--nats``.
    nats: Any = None


async def _bind(host: str, port: int, what: str, flag: str, home: Path) -> trio.SocketListener:
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        if port_in_use(exc):
            raise port_taken_error(host, port, what, flag, home) from None
        raise StartupError(f"cannot listen on {host}:{port} for {what}: {exc.strerror}") from None
    return listeners[0]


async def run_daemon(
    settings: Settings,
    *,
    shutdown: trio.Event | None = None,
    handle_signals: bool = False,
    extra_admin: Mapping[str, AdminHandler] | None = None,
    task_status: trio.TaskStatus[DaemonInfo] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until ``shutdown`` is set (or a signal arrives). Raises StartupError.

    ``extra_admin``: admin commands to serve besides the built-in ones (the bench's
    ``bench.memory``), by command name.
    """
    home_files.ensure_home(settings.home)
    with home_files.lock_home(settings.home):  # one daemon per home, for this one's whole life
        await _run_daemon(settings, shutdown=shutdown, handle_signals=handle_signals, extra_admin=extra_admin,
                          task_status=task_status)


async def _run_daemon(
    settings: Settings,
    *,
    shutdown: trio.Event | None,
    handle_signals: bool,
    extra_admin: Mapping[str, AdminHandler] | None,
    task_status: trio.TaskStatus[DaemonInfo],
) -> None:
    if not is_loopback(settings.host) and not settings.allow_remote:
        raise StartupError(
            f"refusing to listen on the non-loopback address {settings.host}: anyone who can "
            "reach it could try to drive your apps. Pass --allow-remote if you really mean it."
        )
    # Room for many connections: the common soft limit of 1,024 is far below the hard one.
    raise_descriptor_limit()
    ssl_context = tls.server_context(settings)
    tls.check_exposure(settings, ssl_context, is_loopback(settings.host))
    uplink_config = uplink_options(settings)
    nats_config = _nats_options(settings)
    home_files.ensure_home(settings.home)
    home_files.check_not_owned(settings.home)
    token = home_files.load_or_create_token(settings.home)
    broker_id = load_or_create_broker_id(settings.home)

    app_listener = await _bind(settings.host, settings.port, "app", "--port", settings.home)
    port = app_listener.socket.getsockname()[1]
    listener: trio.abc.Listener[trio.abc.Stream] = app_listener
    if ssl_context is not None:
        listener = trio.SSLListener(app_listener, ssl_context, https_compatible=False)
    if not is_loopback(settings.host):
        log.warning("listening_on_non_loopback", host=settings.host, hint="anyone on the network can try the token")
    # The Unix socket in the 0700 home, which local clients prefer: other users cannot reach it.
    local = await bind_local_listener(settings.home) if settings.unix_socket else None
    listeners: list[trio.abc.Listener[trio.abc.Stream]] = [listener] if local is None else [listener, local.listener]

    shutdown = shutdown if shutdown is not None else trio.Event()
    async with open_call_log(settings) as call_log:
        # Ours: the HTTP port is filled in below, once it is bound.
        addresses = Addresses(port=port, socket=None if local is None else str(local.path))
        core = BrokerCore(
            settings, token, call_log,
            federation=FederationState(broker_id),
            addresses=addresses,
            admin_handlers={admin.TOOLS_COMMAND: admin.admin_tools, admin.STOP_COMMAND: admin.stop_handler(shutdown),
                            **(extra_admin or {})},
        )
        mcp_server = McpServer.of(core)
        mcp_server.metrics_collectors.append(core.watchdog)  # the event-loop stall histogram
        agent_handler, http_server, mcp_admin = install_mcp(mcp_server)
        # Built now, started below (its name was checked by uplink_options before binding).
        uplink = None
        if uplink_config is not None:
            uplink = Uplink(core.router, core.registry, core.federation, settings, **uplink_config)
        core.attach(agent_handler=agent_handler, uplink=uplink, admin_handlers=mcp_admin)
        nats = _nats_federation(core, nats_config)
        core.nats = nats
        async with trio.open_nursery() as nursery:
            listeners_scope = trio.CancelScope()

            async def serve_listeners() -> None:
                try:
                    with listeners_scope:
                        await trio.serve_listeners(core.handle_connection, listeners, handler_nursery=nursery)
                finally:
                    if local is not None:  # also when the start-up fails after this (HTTP port taken)
                        local.remove()

            nursery.start_soon(serve_listeners)
            http_port = None
            if settings.http_port is not None:
                http_port = await nursery.start(http_server, settings.host, settings.http_port)
                addresses.http_port = http_port
            if handle_signals:
                # Started (its handlers installed) before runtime.json says we are up: a SIGTERM
                # sent the moment a client sees the file must stop us cleanly, not kill us.
                await nursery.start(_watch_signals, shutdown)
            nursery.start_soon(core.auth.watch)
            nursery.start_soon(flush_periodically)
            nursery.start_soon(core.watchdog.run)
            nursery.start_soon(core.router.serve_checks)
            nursery.start_soon(mcp_server.paused.run)  # 2026-07-28 calls paused for an elicitation
            if uplink is not None:
                nursery.start_soon(uplink.run)
            if nats is not None:
                nursery.start_soon(nats.run)
            home_files.write_runtime(settings.home, host=settings.host, port=port, http_port=http_port, version=VERSION,
                                     tls_cert=settings.tls_cert if ssl_context is not None else None,
                                     socket=addresses.socket, daemon_instance=core.auth.instance)
            log.info("daemon_started", host=settings.host, port=port, http_port=http_port, home=str(settings.home), version=VERSION)
            try:
                task_status.started(DaemonInfo(settings.host, port, http_port, token, core, nats))
                await shutdown.wait()
                failed = core.begin_shutdown()
                listeners_scope.cancel()
                log.info("daemon_stopping", failed_calls=failed)
                nursery.cancel_scope.deadline = trio.current_time() + SHUTDOWN_DRAIN_SECONDS
                if not failed:
                    nursery.cancel_scope.cancel()
            finally:
                home_files.remove_runtime(settings.home)
    log.info("daemon_stopped")


def _nats_options(settings: Settings) -> Any:
    """``--nats``: checked before binding. nats-py is imported only when it is used (an extra)."""
    if not settings.nats_url:
        return None
    from ..federation.nats_link import nats_options

    return nats_options(settings)


def _nats_federation(core: BrokerCore, options: Any) -> Any:
    if options is None:
        return None
    from ..federation.nats_link import NatsFederation

    return NatsFederation(core.router, core.registry, core.federation, options,
                          default_timeout=core.settings.default_timeout,
                          max_result_bytes=core.settings.max_line_bytes)


async def _watch_signals(shutdown: trio.Event, *,
                         task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    signals = [signal.SIGINT, signal.SIGTERM]
    with trio.open_signal_receiver(*signals) as received:
        task_status.started()
        async for signum in received:
            log.info("signal_received", signal=signal.Signals(signum).name)
            shutdown.set()
            return
