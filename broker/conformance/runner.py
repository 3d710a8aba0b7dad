"""The scripted broker: plays each vector against an app process and reports the first difference.

Theory of operation
-------------------
For each scenario :func:`run_scenario` makes a fresh temporary home directory holding a
``token`` and a ``runtime.json`` laid out as the daemon writes them
(:func:`broker.config.home.write_runtime`), listens on a free loopback port, and starts the
app command with ``TOOLBRIDGE_HOME`` (and, unless the scenario says ``"env": "home"``,
``TOOLBRIDGE_PORT`` and ``TOOLBRIDGE_TOKEN``) set, and ``TOOLBRIDGE_CONFORMANCE_VERSION`` to
the scenario's protocol version (the fixture offers resources and prompts at 2). A fresh process per scenario keeps one
failure from leaking into the next and lets every scenario begin with ``register``.

The steps then run in order (:class:`_Script`). Each wait is bounded (``withinMs``, else
:data:`~broker.conformance.vectors.DEFAULT_WITHIN_MS`) with ``trio.move_on_after``, so the
runner never hangs and tests can drive it with trio's autojump clock. What the app sends is
split into lines by the wire module's bounded :class:`~app_client.wire.LineFramer` in one
reader task per connection, which answers the app's own ``ping`` at once (apps may ping; a
vector never has to mention it) and queues every other line (a bounded channel: a flooding
app is slowed, not buffered without end). The first step that does not hold ends the
scenario with a :class:`Result` naming the step, the expected line and the line received;
the app's last stderr lines (bounded) come with it. At the end the app process is always
stopped: asked first (SIGTERM to its process group on POSIX), killed if it lingers. The
command (``toolbridge conformance app``) turns a SIGTERM of its own into that clean end too.
A runner killed outright cannot stop them; it closes their stdin (a pipe it holds), on which
the fixture contract has them quit (README.md). (Not ``PR_SET_PDEATHSIG``: trio starts
processes from a worker thread, and the kernel would kill the app when that thread exits.)

An app that neither connects nor exits by its start-up deadline is stuck somewhere nobody can
see. With ``stacks_signal`` (``--stacks-signal QUIT``), the runner then sends it that signal
and keeps what it prints on stdout in the next :data:`_STACKS_WAIT` seconds for the report:
Mono and Java print every thread's stack on SIGQUIT and carry on (the C# client's test asks for
it, after one such hang was seen in CI with nothing to go on).

Nothing here is imported by the daemon; it imports only the wire module and the home
directory's file layout, like any client would.
"""

from __future__ import annotations

import base64
import collections
import os
import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec
import trio

from app_client.discovery import ENV_HOME, ENV_PORT, ENV_TOKEN, RUNTIME_FILE, TOKEN_FILE
from app_client.errors import RemoteProtocolError
from app_client.wire import DEFAULT_MAX_LINE_BYTES, LineFramer

from ..config import home as home_files
from ..errors import BrokerError
from ..version import VERSION
from .matching import Mismatch, fill, match, normalize
from .vectors import DEFAULT_WITHIN_MS, EXIT_MS, START_UP_MS, Scenario

__all__ = ["Result", "run_all", "run_scenario"]

#: Lines from the app queued ahead of the script (more slow the app down).
_LINE_QUEUE: Final = 256
#: stderr lines of the app kept for a failure report, and the length each output line (stderr,
#: or stdout with ``stacks_signal``) is cut to.
_STDERR_LINES: Final = 12
_LINE_CHARS: Final = 300
#: stdout lines kept when the app is asked for its stacks (a thread dump runs to hundreds).
_STACK_LINES: Final = 400
#: Seconds the app gets to print its stacks after the signal.
_STACKS_WAIT: Final = 2.0
#: Seconds an app gets to exit after being asked, before it is killed.
_EXIT_GRACE: Final = 3.0
_SHOWN_CHARS: Final = 240
_EOF: Final = object()
#: Tells the fixture app which protocol version the scenario checks (1: tools only; 2: also
#: the resources, templates and prompts of README.md's "Version 2 fixtures").
ENV_FIXTURE_VERSION: Final = "TOOLBRIDGE_CONFORMANCE_VERSION"


@attrs.frozen
class Result:
    """How one scenario went: ``failure`` is ``None`` when it passed."""

    scenario: Scenario
    failure: str | None = None
    stderr_tail: tuple[str, ...] = ()
    #: What a stuck app printed on stdout when asked for its stacks (``stacks_signal``).
    stdout_tail: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.failure is None

    def line(self) -> str:
        """The one-line report: ``pass: NAME`` or ``FAIL: NAME: ...``."""
        optional = "" if self.scenario.required else " (optional)"
        if self.failure is None:
            return f"pass: {self.scenario.name}{optional}"
        return f"FAIL: {self.scenario.name}{optional}: {self.failure}"


class _Failed(BrokerError):
    """A step did not hold; the message is the report line's tail."""


def _show(line: object) -> str:
    if line is _EOF:
        return "the connection closed"
    if isinstance(line, bytes):
        text = line.decode("utf-8", "backslashreplace")
    else:
        text = msgspec.json.encode(line).decode()
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


@attrs.define
class _Link:
    """One connection from the app: its stream, a write lock, and the lines read from it."""

    stream: trio.SocketStream
    lines: trio.MemoryReceiveChannel[object]
    write_lock: trio.Lock = attrs.field(factory=trio.Lock)
    pushed_back: collections.deque[object] = attrs.field(factory=collections.deque)

    async def write(self, data: bytes) -> None:
        async with self.write_lock:
            await self.stream.send_all(data)


class _Script:
    """The scripted broker of one scenario: listener, app process, current connection."""

    def __init__(self, scenario: Scenario, home: Path, nursery: trio.Nursery,
                 stacks_signal: int | None = None) -> None:
        self.scenario = scenario
        self.stacks_signal = stacks_signal
        self.home = home
        self.nursery = nursery
        self.env: dict[str, Any] = {"token": home_files.new_token(), "captures": {}}
        self.port = 0
        self.link: _Link | None = None
        self.process: trio.Process | None = None
        #: Whether the app has connected once (its process has started up).
        self._accepted = False
        self.stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self.stdout: collections.deque[str] = collections.deque(maxlen=_STACK_LINES)
        #: Whether the app was sent ``stacks_signal`` (only then is its stdout reported).
        self.stacks_asked = False
        self._listen_scope: trio.CancelScope | None = None
        self._stderr_done = trio.Event()
        self._incoming_send, self._incoming = trio.open_memory_channel[trio.SocketStream](8)

    # --- set-up ---------------------------------------------------------------------------

    def _write_token(self) -> None:
        (self.home / TOKEN_FILE).write_text(self.env["token"] + "\n", encoding="utf-8")

    async def listen(self) -> None:
        """Listen on a new loopback port and write runtime.json naming it."""
        old = self.port
        while True:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listeners[0].socket.getsockname()[1]
            if port != old:
                break
            for listener in listeners:  # pragma: no cover - the OS gave the same port back
                await listener.aclose()
        self.port = port
        self._listen_scope = await self.nursery.start(self._accept_loop, listeners)
        self._write_token()
        home_files.write_runtime(self.home, host="127.0.0.1", port=port, http_port=None, version=VERSION)

    async def _accept_loop(
        self, listeners: list[trio.SocketListener], task_status: trio.TaskStatus[trio.CancelScope]
    ) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            try:
                while True:
                    stream = await listeners[0].accept()
                    try:
                        self._incoming_send.send_nowait(stream)
                    except trio.WouldBlock:
                        await stream.aclose()  # far more connections than any scenario expects
            finally:
                for listener in listeners:
                    await listener.aclose()

    async def start_app(self, command: Sequence[str]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBRIDGE_")}
        env[ENV_HOME] = str(self.home)
        if self.scenario.env == "port":
            env[ENV_PORT] = str(self.port)
            env[ENV_TOKEN] = self.env["token"]
        env["PYTHONUNBUFFERED"] = "1"
        # Which fixture set the app offers (README.md, "Version 2 fixtures").
        env[ENV_FIXTURE_VERSION] = str(self.scenario.version)
        options: dict[str, Any] = {"start_new_session": True} if os.name == "posix" else {}
        try:
            self.process = await trio.lowlevel.open_process(
                list(command),
                env=env,
                stdin=subprocess.PIPE,
                # read only to show a stuck app's stacks; the protocol runs over the socket
                stdout=subprocess.DEVNULL if self.stacks_signal is None else subprocess.PIPE,
                stderr=subprocess.PIPE,
                **options,
            )
        except OSError as exc:
            raise _Failed(f"cannot start the app command {list(command)!r}: {exc}") from exc
        assert self.process.stderr is not None
        self.nursery.start_soon(self._read_lines, self.process.stderr, self.stderr, self._stderr_done)
        if self.process.stdout is not None:
            self.nursery.start_soon(self._read_lines, self.process.stdout, self.stdout, None)

    @staticmethod
    async def _read_lines(stream: trio.abc.ReceiveStream, into: collections.deque[str],
                          done: trio.Event | None) -> None:
        """Keep the last lines of one of the app's output streams (each cut, and bounded in number)."""
        partial = b""
        try:
            while data := await stream.receive_some(65536):
                lines = (partial + data).split(b"\n")
                partial = lines.pop()[-4096:]
                for line in lines:
                    into.append(line.decode("utf-8", "replace")[:_LINE_CHARS])
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        if partial:
            into.append(partial.decode("utf-8", "replace")[:_LINE_CHARS])
        if done is not None:
            done.set()

    async def stop_app(self) -> None:
        process = self.process
        if process is None:
            return
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                self._ask_to_quit()
                with trio.move_on_after(_EXIT_GRACE):
                    await process.wait()
            if process.returncode is None:
                self._signal_group(signal.SIGKILL if os.name == "posix" else None)
                await process.wait()
            # Let the stderr reader take what the app wrote last (bounded: a child the app
            # started may hold the pipe open).
            with trio.move_on_after(0.5):
                await self._stderr_done.wait()
            if process.stdin is not None:
                await process.stdin.aclose()

    def _signal_group(self, sig: int | None) -> None:
        process = self.process
        assert process is not None
        if process.returncode is not None:
            return
        if sig is None:
            process.kill()
            return
        try:
            os.killpg(process.pid, sig)  # the app and anything it started (npm, a shell)
        except (ProcessLookupError, PermissionError):
            pass

    def _ask_to_quit(self) -> None:
        process = self.process
        assert process is not None
        if os.name == "posix":
            self._signal_group(signal.SIGTERM)
        elif process.stdin is not None:
            # Windows has no SIGTERM for console apps: the fixture contract says "quit when
            # stdin closes".
            self.nursery.start_soon(process.stdin.aclose)

    # --- the app's lines ------------------------------------------------------------------

    async def _read_link(self, stream: trio.SocketStream, link: _Link, send: trio.MemorySendChannel[object]) -> None:
        framer = LineFramer(DEFAULT_MAX_LINE_BYTES)
        async with send:
            try:
                while True:
                    while True:
                        try:
                            line = framer.next_line()
                        except RemoteProtocolError as exc:
                            await send.send(f"<a line over {DEFAULT_MAX_LINE_BYTES} bytes: {exc.message}>".encode())
                            continue
                        if line is None:
                            break
                        if await self._answer_ping(link, line):
                            continue
                        await send.send(line)
                    data = await stream.receive_some(65536)
                    if not data:
                        break
                    framer.receive_data(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            await send.send(_EOF)

    async def _answer_ping(self, link: _Link, line: bytes) -> bool:
        if len(line) > 4096 or b'"ping"' not in line:
            return False
        try:
            value = msgspec.json.decode(line)
        except msgspec.DecodeError:
            return False
        if not (isinstance(value, dict) and value.get("type") == "ping"):
            return False
        pong: dict[str, Any] = {"type": "pong"}
        if "id" in value:
            pong["id"] = value["id"]
        try:
            await link.write(msgspec.json.encode(pong) + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        return True

    async def _next(self, within_ms: float) -> object | None:
        """The app's next line (or _EOF), or None if nothing came within ``within_ms``."""
        link = self._need_link()
        if link.pushed_back:
            return link.pushed_back.popleft()
        with trio.move_on_after(within_ms / 1000):
            try:
                return await link.lines.receive()
            except trio.EndOfChannel:
                return _EOF
        return None

    def _need_link(self) -> _Link:
        if self.link is None:
            raise _Failed("the vector is wrong: a step needs a connection but none is open")
        return self.link

    # --- steps ----------------------------------------------------------------------------

    async def run(self, command: Sequence[str]) -> None:
        await self.listen()
        await self.start_app(command)
        for index, step in enumerate(self.scenario.steps, 1):
            try:
                await self._step(step)
            except _Failed as exc:
                raise _Failed(f"step {index}: {exc}{self._exit_note()}") from None

    def _exit_note(self) -> str:
        code = self.process.returncode if self.process is not None else None
        return "" if code is None else f" (the app exited with code {code})"

    async def _step(self, step: dict[str, Any]) -> None:
        within = float(step.get("withinMs", DEFAULT_WITHIN_MS))
        action = next(key for key in step if key not in ("withinMs", "lineBytes", "note"))
        argument = step[action]
        handler: Callable[[Any, float, dict[str, Any]], Any] = getattr(self, "_do_" + action)
        await handler(argument, within, step)

    async def _next_connection(self, within: float) -> trio.SocketStream | None:
        """The app's next connection within ``within`` ms; None if none came or the app exited."""
        process = self.process
        assert process is not None
        stream: trio.SocketStream | None = None
        with trio.move_on_after(within / 1000):
            async with trio.open_nursery() as nursery:

                async def exited() -> None:
                    await process.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(exited)
                stream = await self._incoming.receive()
                nursery.cancel_scope.cancel()
        if stream is None:  # it may have connected just before it exited
            try:
                stream = self._incoming.receive_nowait()
            except trio.WouldBlock:
                pass
        return stream

    async def _do_accept(self, _: Any, within: float, step: dict[str, Any]) -> None:
        if not self._accepted:  # the first connection: the wait includes the process's start-up
            within = max(within, START_UP_MS)
        stream = await self._next_connection(within)
        if stream is None:
            stuck = not self._accepted and await self._ask_for_stacks()
            raise _Failed(f"expected the app to connect within {within:g} ms, got no connection"
                          + (f"; what it printed on {stuck} follows" if stuck else ""))
        await self._close_link()
        send, receive = trio.open_memory_channel[object](_LINE_QUEUE)
        self.link = _Link(stream, receive)
        self._accepted = True
        self.nursery.start_soon(self._read_link, stream, self.link, send)

    async def _ask_for_stacks(self) -> str | None:
        """Send a stuck app ``stacks_signal`` and give it time to print; the signal's name, or
        None when there is no signal to send or no process left to send it to."""
        process = self.process
        if self.stacks_signal is None or process is None or process.returncode is not None:
            return None
        self.stdout.clear()  # only what the signal brings
        try:
            os.kill(process.pid, self.stacks_signal)
        except ProcessLookupError:
            return None
        self.stacks_asked = True
        with trio.move_on_after(_STACKS_WAIT):  # Mono carries on after its dump; others may exit
            await process.wait()
        return signal.Signals(self.stacks_signal).name

    async def _do_expect(self, pattern: Any, within: float, step: dict[str, Any]) -> None:
        line = await self._next(within)
        if line is None:
            raise _Failed(f"expected {_show(pattern)}, got nothing within {within:g} ms")
        self._check(pattern, line)

    def _check(self, pattern: Any, line: object) -> None:
        if not isinstance(line, bytes):
            raise _Failed(f"expected {_show(pattern)}, got {_show(line)}")
        try:
            match(pattern, normalize(line), self.env)
        except Mismatch as exc:
            raise _Failed(f"expected {_show(pattern)}, got {_show(line)} ({exc})") from None

    async def _do_expectMaybe(self, pattern: Any, within: float, step: dict[str, Any]) -> None:
        line = await self._next(within)
        if line is None:
            return
        try:
            self._check(pattern, line)
        except _Failed:
            self._need_link().pushed_back.appendleft(line)

    async def _do_send(self, message: Any, within: float, step: dict[str, Any]) -> None:
        await self._write(msgspec.json.encode(fill(message, self.env)) + b"\n", message)

    async def _do_sendRaw(self, text: str, within: float, step: dict[str, Any]) -> None:
        await self._write(text.encode("utf-8") + b"\n", text)

    async def _do_sendBase64(self, data: str, within: float, step: dict[str, Any]) -> None:
        await self._write(base64.b64decode(data), data)

    async def _do_sendPadded(self, message: Any, within: float, step: dict[str, Any]) -> None:
        size = int(step["lineBytes"])
        template = msgspec.json.encode(fill(message, self.env))
        if template.count(b'"$pad"') != 1:
            raise _Failed('the vector is wrong: sendPadded needs exactly one "$pad" string')
        filler = size - (len(template) - len(b"$pad"))
        if filler < 0:
            raise _Failed(f"the vector is wrong: the message is longer than {size} bytes already")
        line = template.replace(b"$pad", b"x" * filler)
        assert len(line) == size
        await self._write(line + b"\n", f"{_show(message)} padded to {size} bytes")

    async def _write(self, data: bytes, shown: object) -> None:
        link = self._need_link()
        with trio.move_on_after(DEFAULT_WITHIN_MS * 2 / 1000) as scope:
            try:
                await link.write(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise _Failed(f"the app closed the connection before the runner sent {_show(shown)}") from None
        if scope.cancelled_caught:
            raise _Failed(f"the app did not read {_show(shown)} within {DEFAULT_WITHIN_MS * 2:g} ms")

    async def _do_quiet(self, ms: float, within: float, step: dict[str, Any]) -> None:
        line = await self._next(float(ms))
        if line is not None:
            raise _Failed(f"expected nothing for {ms:g} ms, got {_show(line)}")

    async def _do_sleep(self, ms: float, within: float, step: dict[str, Any]) -> None:
        await trio.sleep(float(ms) / 1000)

    async def _close_link(self) -> None:
        link, self.link = self.link, None
        if link is not None:
            await link.stream.aclose()

    async def _do_drop(self, _: Any, within: float, step: dict[str, Any]) -> None:
        await self._close_link()

    async def _do_rotateToken(self, _: Any, within: float, step: dict[str, Any]) -> None:
        self.env["token"] = home_files.new_token()
        self._write_token()

    async def _do_restart(self, options: dict[str, Any], within: float, step: dict[str, Any]) -> None:
        await self._close_link()
        if self._listen_scope is not None:
            self._listen_scope.cancel()
        (self.home / RUNTIME_FILE).unlink(missing_ok=True)
        await trio.sleep(float(options.get("downMs", 500)) / 1000)
        while True:  # connections that reached the old listener before it closed are gone
            try:
                stale = self._incoming.receive_nowait()
            except trio.WouldBlock:
                break
            await stale.aclose()
        if options.get("rotateToken"):
            self.env["token"] = home_files.new_token()
        await self.listen()

    async def _do_expectClose(self, _: Any, within: float, step: dict[str, Any]) -> None:
        line = await self._next(within)
        if line is None:
            raise _Failed(f"expected the app to close the connection within {within:g} ms; it stayed open")
        if line is not _EOF:
            raise _Failed(f"expected the app to close the connection, got {_show(line)}")
        await self._close_link()

    async def _do_noConnection(self, ms: float, within: float, step: dict[str, Any]) -> None:
        stream = await self._next_connection(float(ms))
        if stream is not None:
            await stream.aclose()
            raise _Failed(f"expected no new connection for {ms:g} ms (the error is fatal), got one")

    async def _do_terminate(self, _: Any, within: float, step: dict[str, Any]) -> None:
        self._ask_to_quit()

    async def _do_expectExit(self, code: int, within: float, step: dict[str, Any]) -> None:
        process = self.process
        assert process is not None
        within = max(within, EXIT_MS)  # see EXIT_MS; an app that exits at once passes at once
        with trio.move_on_after(within / 1000):
            await process.wait()
        if process.returncode is None:
            raise _Failed(f"expected the app to exit with code {code} within {within:g} ms; it is still running")
        if process.returncode != code:
            raise _Failed(f"expected the app to exit with code {code}, got {process.returncode}")


async def run_scenario(scenario: Scenario, command: Sequence[str], *, stacks_signal: int | None = None) -> Result:
    """Play one scenario against a fresh ``command`` process; never raises for an app's fault.
    With ``stacks_signal``, an app stuck before its first connection is sent that signal and
    what it prints is reported (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="toolbridge-conformance-") as tmp:
        home = Path(tmp) / "home"
        home_files.ensure_home(home)
        failure: str | None = None
        script: _Script | None = None
        async with trio.open_nursery() as nursery:
            script = _Script(scenario, home, nursery, stacks_signal)
            try:
                await script.run(command)
            except _Failed as exc:
                failure = str(exc)
            except (KeyError, ValueError, TypeError) as exc:  # a vector the checks let through
                failure = f"the vector is wrong: {exc!r}"
            finally:
                await script.stop_app()
                nursery.cancel_scope.cancel()
        if failure is None:
            return Result(scenario)
        return Result(scenario, failure, tuple(script.stderr), tuple(script.stdout) if script.stacks_asked else ())


async def run_all(
    scenarios: Sequence[Scenario],
    command: Sequence[str],
    *,
    jobs: int = 4,
    report: Callable[[Result], None] = lambda result: None,
    stacks_signal: int | None = None,
) -> list[Result]:
    """Run every scenario (``jobs`` at a time); ``report`` gets each result in scenario order."""
    results: list[Result | None] = [None] * len(scenarios)
    done = [trio.Event() for _ in scenarios]
    limiter = trio.CapacityLimiter(max(1, jobs))

    async def one(index: int) -> None:
        async with limiter:
            results[index] = await run_scenario(scenarios[index], command, stacks_signal=stacks_signal)
        done[index].set()

    async def reporter() -> None:
        for index, event in enumerate(done):
            await event.wait()
            result = results[index]
            assert result is not None
            report(result)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reporter)
        for index in range(len(scenarios)):
            nursery.start_soon(one, index)
    return [result for result in results if result is not None]
