"""``toolbridge stdio``: what agents launch. A thin relay between stdin/stdout and the daemon.

Theory of operation
-------------------
The relay speaks no MCP itself. It finds the daemon through the home directory
(``runtime.json`` for the port, ``token`` for the secret), opens a connection (its Unix socket
when ``runtime.json`` names one, else TCP: ``app_client.transport``), sends
``{"type":"agentConnect","token":...}`` (``"discovery":true`` too for ``--discovery``,
``"code":true`` for ``--code``, ``"app":NAME`` for ``--app NAME``: one app's tools under
their own names), waits
for ``agentConnected``, and from then on copies lines: each stdin line to the daemon, each
daemon line to stdout. stdout carries nothing but MCP messages; logs go to stderr, starting
with the home used and where it came from (``--home``, ``TOOLBRIDGE_HOME`` or the default: MCP
clients pass few environment variables on) and, on each connect, the daemon joined. If no
daemon answers, the relay starts one in the background (``python -m broker serve --home H``,
detached, its output appended to ``<home>/daemon.log``, created 0600) and waits for it to come
up (``--port`` / ``--http-port`` are passed on to that ``serve``). When two relays start daemons at once, the home's lock (``broker.config.home.lock_home``) lets
one run; the other exits at once and its relay waits, while the lock names a live daemon, for
that daemon to answer.

It peeks at each message just enough to keep the promises the daemon cannot keep once it is
gone: it remembers the requests the daemon has not answered yet (by id), the ``initialize``
request and whether ``notifications/initialized`` was sent. When the connection drops, every
unanswered request gets a JSON-RPC error at once (never silence), and the next message
opens a new connection, first replaying the cached ``initialize`` (under an id of the
relay's own, whose answer is swallowed) and ``notifications/initialized``, so the new daemon
knows the session. On stdin EOF the relay waits for the answers still owed (not for
``subscriptions/listen`` streams, which never end by themselves), then exits — at once if
nobody reads stdout any more (the agent is gone), so the daemon cancels those calls.

stdin and stdout are trio streams: ``FdStream`` over pipes on POSIX; threads elsewhere
(Windows consoles and pipes, regular files), which works everywhere.

Per message the relay makes as few scheduler passes as it can (an agent at concurrency 1
waits for every one): a pipe or socket is read once it is readable and written at once
(``app_client.channel``'s straight reads and writes); what one read of stdin brought goes to
the daemon in one write from the reading task, and what one read from the daemon brought goes
to stdout at once when stdout's writer is idle (``LineWriter.write_nowait``), else through it.
A large response (a result line still unfinished after 256 KiB) is not waited for: its bytes go
to stdout as they arrive, stdout reserved for it until its newline (``relay_stream``, issue 33).
"""

from __future__ import annotations

import argparse
import itertools
import os
import select
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, Final

import msgspec
import structlog
import trio

from app_client.channel import READ_SIZE as _READ_SIZE
from app_client.channel import LineChannel, LineReader, LineWriter
from app_client.discovery import ENV_HOME
from app_client.protocol import ConnectionClosed, RemoteProtocolError

from ..config import home as home_files
from ..mcp.scope import check_app_name
from ..errors import BrokerError
from ._common import SubParsers, add_command, add_home, home_from
from .relay_stream import DaemonReader, Piece
from .daemon_client import CONNECT_TIMEOUT, DAEMON_LINE_LIMIT, DaemonUnavailable, agent_connect
from ..config.tls import open_runtime_stream

log = structlog.get_logger("toolbridge.stdio")

__all__ = ["Relay", "DaemonUnavailable", "run_relay", "start_daemon", "cmd_stdio", "register"]

#: The longest line accepted from the agent (stdin); lines from the daemon: DAEMON_LINE_LIMIT.
MAX_LINE_BYTES: Final = 16 * 1024 * 1024
#: How long to wait for a daemon we started (or found starting) to answer.
START_TIMEOUT: Final = 20.0
LOG_FILE: Final = "daemon.log"
SERVER_ERROR: Final = -32000
_REINIT_PREFIX: Final = "toolbridge-relay-reinit-"
_NO_ANSWER_METHODS: Final = frozenset({"subscriptions/listen"})
#: Requests that change nothing anywhere: lost with the daemon's connection, they are sent once
#: more on the next one (the session replayed first) instead of failing. A call, a read or a
#: completion reaches an app and is never repeated: it may have run.
_SAFE_TO_REPEAT: Final = frozenset({"ping", "tools/list", "resources/list", "resources/templates/list",
                                    "prompts/list", "server/discover"})
#: After stdin's EOF, how often to check that someone still reads stdout.
_READER_POLL_SECONDS: Final = 0.2
_decoder: Final = msgspec.json.Decoder()
_encoder: Final = msgspec.json.Encoder()


def _key(request_id: Any) -> tuple[bool, Any]:
    # 1 and "1" are different ids; True is not an id at all (filtered before).
    return (isinstance(request_id, str), request_id)


def _is_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _peek(line: bytes) -> dict[str, Any] | None:
    try:
        value = _decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class _Envelope(msgspec.Struct):
    """The fields the relay routes by; everything else in a line is skipped, not built."""

    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET
    error: Any = msgspec.UNSET


_envelope_decoder: Final = msgspec.json.Decoder(_Envelope)


def _peek_envelope(line: bytes) -> _Envelope | None:
    """Like :func:`_peek`, for daemon lines: a large result is parsed, never copied into objects."""
    try:
        return _envelope_decoder.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # includes ValidationError
        return None


def start_daemon(home: Path, serve_args: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """Start ``python -m broker serve --home HOME [serve_args]`` detached, output appended to daemon.log."""
    home_files.ensure_home(home)
    kwargs: dict[str, Any] = {"stdin": subprocess.DEVNULL, "close_fds": True}
    if os.name == "nt":
        kwargs["creationflags"] = (
            getattr(subprocess, "DETACHED_PROCESS", 0)
            | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
            | getattr(subprocess, "CREATE_NO_WINDOW", 0)
        )
    else:
        kwargs["start_new_session"] = True
    # Owner-only: the log may name tools, apps and hosts (home.create_private: 0600 on POSIX).
    with open(home_files.create_private(home / LOG_FILE), "ab") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "broker", "serve", "--home", str(home), *serve_args],
            stdout=log_file, stderr=log_file, **kwargs,
        )


def _daemon_alive(home: Path) -> bool:
    """Whether the home's lock file names a live process (the daemon that owns the home)."""
    pid = home_files.lock_owner(home)
    if pid is None:
        return False
    if os.name != "posix":
        return True  # the daemon empties the file when it lets go; a crash leaves a stale pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _log_tail(home: Path, lines: int = 3) -> str:
    try:
        text = (home / LOG_FILE).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])[-600:]


class _Link:
    """One connection to the daemon."""

    _ids = itertools.count(1)

    def __init__(self, channel: LineChannel) -> None:
        self.id = next(self._ids)
        #: Read with ``relay_stream.DaemonReader``; written with ``channel.send_direct`` under ``lock``
        #: (the relay's writers batch on their own, so the channel's writer task is not used).
        self.channel = channel
        self.stream = channel.stream
        self.lock = trio.Lock()
        self.closed = False


class Relay:
    def __init__(
        self, home: Path, *, auto_start: bool = True, start_timeout: float = START_TIMEOUT, discovery: bool = False,
        serve_args: Sequence[str] = (),
        code: bool = False, app: str | None = None,
    ) -> None:
        self.home = home
        #: Ask the daemon for the one-app scope of this label (``broker.mcp.scope``).
        self.app = app
        #: Passed on to ``toolbridge serve`` when the relay starts the daemon (``--port`` ...).
        self.serve_args = tuple(serve_args)
        #: Ask the daemon for code mode (search_tools and run_code are listed).
        self.code = code
        #: Ask the daemon for discovery mode (only the meta-tools are listed).
        self.discovery = discovery
        self.auto_start = auto_start
        self.start_timeout = start_timeout
        #: What goes to the agent (its stdout): set by :meth:`run`.
        self._stdout: LineWriter | None = None
        #: Requests the daemon has not answered: id key -> method.
        self._pending: dict[tuple[bool, Any], str] = {}
        #: The lines of those that are safe to send once more if the connection is lost.
        self._repeatable: dict[tuple[bool, Any], bytes] = {}
        #: How many of them will be answered (``subscriptions/listen`` streams never end).
        self._answers_owed = 0
        self._owed = trio.Event()  # set whenever nothing but listen streams is pending
        self._owed.set()
        self._init_request: dict[str, Any] | None = None
        self._client_initialized = False
        self._reinit_ids: set[str] = set()
        self._reinit_counter = itertools.count(1)
        self._link: _Link | None = None
        #: Held while a large response streams to stdout (nothing else is written meanwhile).
        self._stdout_lock = trio.Lock()
        self._connect_lock = trio.Lock()
        self._links: trio.Nursery | None = None
        self._exiting = False
        self._daemon_process: subprocess.Popen[bytes] | None = None

    # --- the main loop -------------------------------------------------------------------

    async def run(self, stdin: trio.abc.ReceiveStream, stdout: trio.abc.SendStream) -> None:
        """Relay until stdin ends and every answer still owed has been written."""
        # The one writer (bounded, batching what is ready into one write; no write timeout:
        # an agent slow to read holds back the relay, not the other way round).
        self._stdout = writer = LineWriter(stdout, outbound_queue=256)
        async with trio.open_nursery() as outer:
            outer.start_soon(self._write_stdout, writer, outer.cancel_scope)
            async with trio.open_nursery() as links:
                self._links = links
                await self._read_stdin(stdin)
                await self._wait_owed(stdout)
                self._exiting = True
                links.cancel_scope.cancel()
            writer.finish_sending()

    async def _wait_owed(self, stdout: trio.abc.SendStream) -> None:
        """After stdin's EOF: wait for the answers still owed, unless nobody reads them.

        An agent that closed stdin but still reads stdout gets its answers. One that is gone
        altogether (its end of our stdout pipe closed too) cannot use them: the relay leaves
        at once, so the daemon cancels those calls at their apps instead of running them on.
        """
        fileno = getattr(stdout, "fileno", None)
        async with trio.open_nursery() as nursery:

            async def owed() -> None:
                await self._owed.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(owed)
            if fileno is not None and hasattr(select, "poll"):
                nursery.start_soon(self._watch_reader, fileno(), nursery.cancel_scope)

    async def _watch_reader(self, fd: int, done: trio.CancelScope) -> None:
        poller = select.poll()
        poller.register(fd, 0)  # POLLERR / POLLHUP are always reported: the reader is gone
        while True:
            if any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0)):
                log.info("agent_gone", unanswered=len(self._pending))
                done.cancel()
                return
            await trio.sleep(_READER_POLL_SECONDS)

    @staticmethod
    async def _write_stdout(writer: LineWriter, everything: trio.CancelScope) -> None:
        await writer.run_writer()
        if writer.closed_reason is not None:
            log.info("stdout_closed")  # the agent is gone: nothing left to relay for
            everything.cancel()

    async def _read_stdin(self, stdin: trio.abc.ReceiveStream) -> None:
        reader = LineReader(stdin, max_line_bytes=MAX_LINE_BYTES)
        while True:
            try:
                lines = await reader.receive_batch(last_line_at_eof=True)
            except ConnectionClosed:
                return
            # What one read brought goes to the daemon in one write (a pipelining agent sends
            # many requests at once): one syscall and one wake-up of the daemon, not one each.
            batch: list[bytes] = []
            batch_link: _Link | None = None
            for line in lines:
                if isinstance(line, RemoteProtocolError):
                    await self._emit_error(None, -32600, f"Invalid Request: {line.message}")
                    continue
                link = await self._from_client(line)
                if link is None:
                    continue
                if link is not batch_link:
                    if batch_link is not None:
                        await self._send(batch_link, batch)
                    batch, batch_link = [], link
                batch.append(line)
            if batch_link is not None:
                await self._send(batch_link, batch)

    # --- client -> daemon ----------------------------------------------------------------

    async def _from_client(self, line: bytes) -> _Link | None:
        """Note what ``line`` means for the answers owed; the link to send it on, or None."""
        message = _peek(line)
        key = None
        request_id = None
        method = message.get("method") if message is not None else None
        if message is not None and isinstance(method, str):
            if "id" in message and _is_id(message["id"]):
                request_id = message["id"]
                key = _key(request_id)
                self._add_pending(key, method)
                if method in _SAFE_TO_REPEAT:
                    self._repeatable[key] = line
            elif method == "notifications/cancelled":
                params = message.get("params")
                cancelled = params.get("requestId") if isinstance(params, dict) else None
                if _is_id(cancelled):
                    self._drop_pending(_key(cancelled))  # the daemon will not answer it
                if self._link is None:
                    return None  # that request already got its error when the connection dropped
        try:
            link = await self._ensure_link()
        except DaemonUnavailable as exc:
            log.warning("daemon_unavailable", reason=str(exc))
            if key is not None:
                self._drop_pending(key)
                await self._emit_error(request_id, SERVER_ERROR, str(exc))
            return None
        if method == "initialize" and message is not None:
            self._init_request = message
        elif method == "notifications/initialized":
            self._client_initialized = True
        return link

    async def _send(self, link: _Link, lines: list[bytes]) -> None:
        lines.append(b"")  # each line ends with a newline
        try:
            # A free lock is taken without the scheduler pass ``async with`` makes, and what
            # fits in the socket goes at once (send_direct): one call at a time, fewer wake-ups.
            try:
                link.lock.acquire_nowait()
            except trio.WouldBlock:
                await link.lock.acquire()
            try:
                await link.channel.send_direct(b"\n".join(lines))
            finally:
                link.lock.release()
        except (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            # Lines noted as pending before the loss get their errors from _lost.
            await self._lost(link)

    async def _ensure_link(self) -> _Link:
        link = self._link
        if link is not None and not link.closed:
            return link  # the usual case, without a checkpoint
        async with self._connect_lock:
            if self._link is not None and not self._link.closed:
                return self._link
            link = _Link(await self._connect())
            self._link = link
            assert self._links is not None
            self._links.start_soon(self._read_link, link)
            if self._init_request is not None:
                await self._replay_initialize(link)
            return link

    async def _replay_initialize(self, link: _Link) -> None:
        assert self._init_request is not None
        request = dict(self._init_request)
        request["id"] = f"{_REINIT_PREFIX}{next(self._reinit_counter)}"
        self._reinit_ids.add(request["id"])
        log.info("session_replayed", link=link.id)
        replay = [_encoder.encode(request)]
        if self._client_initialized:
            replay.append(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        await self._send(link, replay)

    # --- daemon -> client ----------------------------------------------------------------

    async def _read_link(self, link: _Link) -> None:
        reader = DaemonReader(link.channel, max_line_bytes=DAEMON_LINE_LIMIT)
        try:
            while True:
                try:
                    items = await reader.receive(streamable=self._streamable)
                except ConnectionClosed:
                    return
                out: list[bytes] = []  # what one read brought goes to stdout in one write
                for item in items:
                    if isinstance(item, Piece):  # a large response, passed on as it arrives
                        if out:
                            await self._output(self._joined(out))
                            out = []
                        await self._stream_piece(item)
                    elif isinstance(item, RemoteProtocolError):
                        log.warning("daemon_line_too_long", detail=item.message)
                    elif self._from_daemon(item):
                        out.append(item)
                if out:
                    await self._output(self._joined(out))
        finally:
            if reader.streaming and self._streams_now():  # the daemon went mid-line: end the line
                # (the request it answered is still owed: _lost gives it its error next)
                log.warning("daemon_lost_mid_response", link=link.id)
                with trio.CancelScope(shield=True):
                    await self._stream_piece(Piece(b"\n", None, first=False, last=True), lost=True)
            if not self._exiting:
                with trio.move_on_after(5) as cleanup:
                    cleanup.shield = True
                    await self._lost(link)

    @staticmethod
    def _joined(out: list[bytes]) -> bytes:
        out.append(b"")
        return b"\n".join(out) if len(out) > 2 else out[0] + b"\n"

    def _streamable(self, request_id: Any) -> bool:
        """A response may be streamed unless it answers the relay's own replayed initialize."""
        return not (isinstance(request_id, str) and request_id in self._reinit_ids)

    def _streams_now(self) -> bool:
        return self._stdout_lock.statistics().owner is trio.lowlevel.current_task()

    async def _stream_piece(self, piece: Piece, *, lost: bool = False) -> None:
        """Write a piece of a streamed response; stdout is reserved from its first to its last."""
        if piece.first:
            await self._stdout_lock.acquire()
        try:
            await self._write_out(piece.data)
        finally:
            if piece.last and self._streams_now():
                self._stdout_lock.release()
                if not lost:
                    self._drop_pending(_key(piece.request_id))

    def _from_daemon(self, line: bytes) -> bool:
        """Note an answer in ``line``; False if the line is the relay's own (not for stdout)."""
        message = _peek_envelope(line)
        if message is not None and message.method is msgspec.UNSET and _is_id(message.id):
            request_id = message.id
            if isinstance(request_id, str) and request_id in self._reinit_ids:
                self._reinit_ids.discard(request_id)
                if message.error is not msgspec.UNSET:
                    log.warning("session_replay_failed", error=message.error)
                return False
            self._drop_pending(_key(request_id))
        return True

    async def _output(self, data: bytes) -> None:
        # stdout is reserved while a response streams through (see relay_stream); a free lock
        # is taken without a scheduler pass.
        try:
            self._stdout_lock.acquire_nowait()
        except trio.WouldBlock:
            await self._stdout_lock.acquire()
        try:
            await self._write_out(data)
        finally:
            self._stdout_lock.release()

    async def _write_out(self, data: bytes) -> None:
        assert self._stdout is not None, "only while run() relays"
        try:
            try:
                # What one read brought, in one write: at once when the writer is idle.
                self._stdout.write_nowait(data)
            except trio.WouldBlock:
                await self._stdout.send_bytes(data)
        except ConnectionClosed:
            pass  # stdout is gone

    async def _lost(self, link: _Link) -> None:
        if link.closed:
            return
        link.closed = True
        if self._link is link:
            self._link = None
        await trio.aclose_forcefully(link.stream)
        lost = list(self._pending.items())
        self._pending.clear()
        self._answers_owed = 0
        repeat = [(key, method, self._repeatable[key]) for key, method in lost if key in self._repeatable]
        failed = [(key, method) for key, method in lost if key not in self._repeatable]
        self._repeatable.clear()  # each is repeated once at most
        for key, method, _ in repeat:
            self._add_pending(key, method)  # still owed: the next connection answers it
        self._update_owed()
        log.warning("daemon_connection_lost", link=link.id, unanswered=len(lost), repeated=len(repeat))
        if repeat:
            assert self._links is not None
            self._links.start_soon(self._send_again, repeat)
        for (_, request_id), method in failed:
            await self._emit_error(
                request_id,
                SERVER_ERROR,
                f"the connection to the toolbridge daemon was lost before it answered {method} "
                "(the daemon stopped or restarted); the request may or may not have run. "
                "toolbridge stdio reconnects on the next request.",
            )

    async def _send_again(self, requests: list[tuple[tuple[bool, Any], str, bytes]]) -> None:
        """Send requests safe to repeat on a new connection (see :data:`_SAFE_TO_REPEAT`)."""
        try:
            link = await self._ensure_link()  # replays the session's initialize first
        except DaemonUnavailable as exc:
            for key, _, _ in requests:
                if key in self._pending:  # (not cancelled meanwhile)
                    self._drop_pending(key)
                    await self._emit_error(key[1], SERVER_ERROR, str(exc))
            return
        lines = [line for key, _, line in requests if key in self._pending]
        if lines:  # (all cancelled meanwhile: nothing to send)
            await self._send(link, lines)

    async def _emit_error(self, request_id: Any, code: int, message: str) -> None:
        error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        await self._output(_encoder.encode(error) + b"\n")

    def _add_pending(self, key: tuple[bool, Any], method: str) -> None:
        if key in self._pending:
            self._drop_pending(key)  # a reused id: the daemon refuses it, we track it once
        self._pending[key] = method
        if method not in _NO_ANSWER_METHODS:
            self._answers_owed += 1
        self._update_owed()

    def _drop_pending(self, key: tuple[bool, Any]) -> None:
        self._repeatable.pop(key, None)
        method = self._pending.pop(key, None)
        if method is not None and method not in _NO_ANSWER_METHODS:
            self._answers_owed -= 1
        self._update_owed()

    def _update_owed(self) -> None:
        if self._answers_owed:
            if self._owed.is_set():
                self._owed = trio.Event()
        else:
            self._owed.set()

    # --- finding (or starting) the daemon ------------------------------------------------

    async def _connect(self) -> LineChannel:
        stream = await self._open_existing()
        if stream is None:
            if not self.auto_start:
                raise DaemonUnavailable(
                    f"no toolbridge daemon is running for {self.home}: start it with `toolbridge serve`"
                )
            stream = await self._start_and_open()
        try:
            joined = await self._hello(stream)
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        # On stderr, which agents show in their MCP logs: which daemon this session reached.
        info = home_files.read_runtime(self.home) or {}
        started = self._daemon_process is not None
        log.info("daemon_joined", home=str(self.home), pid=info.get("pid"), port=info.get("port"),
                 http_port=info.get("httpPort"), version=info.get("version"), started_by_relay=started,
                 **({"note": "--port/--http-port apply only to a daemon the relay starts"}
                    if self.serve_args and not started else {}))
        return joined

    async def _open_existing(self) -> trio.abc.Stream | None:
        info = home_files.read_runtime(self.home)
        if not info or not isinstance(info.get("port"), int):
            return None
        host = info.get("host")
        if not isinstance(host, str):
            host = "127.0.0.1"
        with trio.move_on_after(CONNECT_TIMEOUT):
            try:
                return await open_runtime_stream(info, host)  # TLS when runtime.json says so
            except OSError:
                return None
        return None

    async def _start_and_open(self) -> trio.abc.Stream:
        log.info("daemon_starting", home=str(self.home), log=str(self.home / LOG_FILE))
        try:
            process = start_daemon(self.home, self.serve_args)
        except (OSError, BrokerError) as exc:
            raise DaemonUnavailable(f"the toolbridge daemon is not running and could not be started: {exc}") from None
        self._daemon_process = process
        exited_at: float | None = None
        with trio.move_on_after(self.start_timeout):
            while True:
                stream = await self._open_existing()
                if stream is not None:
                    log.info("daemon_started", pid=process.pid)
                    return stream
                if process.poll() is not None:
                    # It may have lost a race to another relay's daemon: while the home's lock
                    # names a live daemon, that one is still starting; else give it a moment.
                    if exited_at is None:
                        exited_at = trio.current_time()
                    elif trio.current_time() - exited_at > 2.0 and not _daemon_alive(self.home):
                        break
                await trio.sleep(0.05)
        tail = _log_tail(self.home)
        # The daemon's own message names serve's flags; say that the relay has them too.
        hint = (" (`toolbridge stdio --port N --http-port N` pass other ports on to the daemon it starts; "
                "0 picks a free one)" if "already in use" in tail else "")
        raise DaemonUnavailable(
            "the toolbridge daemon is not running and could not be started"
            + (f" (exit code {process.returncode})" if process.returncode is not None else " in time")
            + f"; see {self.home / LOG_FILE}" + (f": {tail}" if tail else "") + hint
        )

    async def _hello(self, stream: trio.abc.Stream) -> LineChannel:
        try:
            token = (self.home / home_files.TOKEN_FILE).read_text().strip()
        except OSError as exc:
            raise DaemonUnavailable(f"cannot read the token in {self.home}: {exc.strerror}") from None
        channel = LineChannel(stream, max_line_bytes=DAEMON_LINE_LIMIT)
        await agent_connect(channel, token, discovery=self.discovery, timeout=CONNECT_TIMEOUT, code=self.code,
                            app=self.app)
        # The same channel goes on reading (lines the daemon sent right after agentConnected,
        # already read with it, are not lost).
        return channel


# --- standard streams ----------------------------------------------------------------------


class _ThreadReader(trio.abc.ReceiveStream):
    """Blocking reads in a worker thread: portable (Windows, regular files)."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        read = getattr(self._file, "read1", self._file.read)
        return await trio.to_thread.run_sync(read, max_bytes or _READ_SIZE, abandon_on_cancel=True)

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


class _ThreadWriter(trio.abc.SendStream):
    def __init__(self, file: BinaryIO) -> None:
        self._file = file

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.to_thread.run_sync(self._write, bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def _pollable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _stdin() -> trio.abc.ReceiveStream:
    if os.name == "posix" and _pollable(0):
        return trio.lowlevel.FdStream(os.dup(0))
    return _ThreadReader(sys.stdin.buffer)


def _stdout() -> trio.abc.SendStream:
    if os.name == "posix" and _pollable(1):
        return trio.lowlevel.FdStream(os.dup(1))
    return _ThreadWriter(sys.stdout.buffer)


async def run_relay(
    home: Path, auto_start: bool = True, discovery: bool = False, serve_args: Sequence[str] = (),
    code: bool = False, app: str | None = None,
) -> None:
    stdin, stdout = _stdin(), _stdout()
    try:
        await Relay(home, auto_start=auto_start, discovery=discovery, serve_args=serve_args,
                    code=code, app=app).run(stdin, stdout)
    finally:
        with trio.CancelScope(shield=True):
            await stdin.aclose()
            await stdout.aclose()


# --- the command ---------------------------------------------------------------------------


def cmd_stdio(args: argparse.Namespace) -> int:
    from ..config.logsetup import configure_logging

    app: str | None = getattr(args, "app", None)
    if app is not None:  # refused here, before any daemon is started or joined
        problem = check_app_name(app)
        if problem is None and (args.discovery or args.code):
            mode = "--discovery" if args.discovery else "--code"
            problem = (f"--app and {mode} cannot be combined: an app's scope already lists only "
                       "its tools; use one or the other")
        if problem is not None:
            print(f"toolbridge stdio: --app: {problem}", file=sys.stderr)
            return 2
    configure_logging(os.environ.get("TOOLBRIDGE_LOG_FORMAT", "auto"), level="info")
    home = home_from(args)
    # MCP clients pass few environment variables to the servers they launch, so a
    # TOOLBRIDGE_HOME set in a shell may not arrive: say which home this is and why (stderr).
    source = "--home" if args.home else (ENV_HOME if os.environ.get(ENV_HOME) else "default")
    runtime = home_files.read_runtime(home) or {}
    log.info("relay_home", home=str(home), home_from=source,
             daemon=f"pid {runtime.get('pid')} on port {runtime.get('port')}" if runtime else "none running yet")
    serve_args: list[str] = []
    if args.port is not None:
        serve_args += ["--port", str(args.port)]
    if args.http_port is not None:
        serve_args += ["--http-port", str(args.http_port)]
    trio.run(run_relay, home, args.auto_start, args.discovery, serve_args, args.code, app)
    return 0


def add_parser(sub: SubParsers) -> None:
    parser = add_command(sub, "stdio")
    add_home(parser)
    parser.add_argument("--port", type=int, metavar="PORT",
                        help="app port for the daemon this starts when none runs (default 47700; 0 = any free port)")
    parser.add_argument("--http-port", type=int, metavar="PORT",
                        help="MCP HTTP port for the daemon this starts when none runs (default 47701; 0 = any)")
    parser.add_argument(
        "--no-start", dest="auto_start", action="store_false",
        help="fail requests instead of starting the daemon when none is running",
    )
    parser.add_argument(
        "--discovery", action="store_true",
        help="discovery mode: list only search_tools and call_tool instead of every app tool",
    )
    parser.add_argument(
        "--code", action="store_true",
        help="code mode: list search_tools and run_code (programs that call app tools in a Deno sandbox; "
        "needs the code extra: `toolbridge doctor` prints the command that installs it here)",
    )
    parser.add_argument(
        "--app", metavar="NAME",
        help="only the app labelled NAME (as `toolbridge status` shows it, case-sensitive), its tools "
        "under their own names; not with --discovery or --code",
    )
    parser.set_defaults(func=cmd_stdio)
