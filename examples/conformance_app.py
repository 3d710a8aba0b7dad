"""The conformance fixture app of the Python client (broker/conformance/README.md has the contract).

Run the kit against it::

    toolbridge conformance app -- python examples/conformance_app.py

It registers as ``Conformance`` with six tools (echo, progress, slow, image, structured,
fail), finds the daemon as every app does (TOOLBRIDGE_HOME / TOOLBRIDGE_PORT /
TOOLBRIDGE_TOKEN, else runtime.json and token), uses ``TOOLBRIDGE_INSTANCE_ID`` as its
instanceId when set (else a random one per process), and exits 0 after a clean shutdown
(``goodbye``) on SIGTERM or SIGINT, or when its stdin closes (on Windows, which has no SIGTERM,
and on POSIX when stdin is a pipe: a runner killed outright closes it too).
It exits 1 if the broker refuses the registration for good.
"""

from __future__ import annotations

import base64
import os
import signal
import stat
import sys
from typing import Annotated, Any

import msgspec
import trio

from app_client import App, ElicitationError, RegistrationRejected, ToolContext, ToolError, ToolResult, image, text

PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)

app = App("Conformance", instance_id=os.environ.get("TOOLBRIDGE_INSTANCE_ID") or None)


@app.tool(example_requests=["say this back to me", "repeat what I typed"])
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool
async def progress(steps: Annotated[int, msgspec.Meta(ge=1, le=100)], ctx: ToolContext) -> str:
    """Report progress 1..steps, then return "done"."""
    if ctx.progress_requested:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return "done"


@app.tool
async def slow(seconds: float) -> str:
    """Wait, unless cancelled (then the library sends nothing for the call)."""
    await trio.sleep(seconds)
    return "finished"


@app.tool(name="image")
async def image_tool() -> list[dict[str, str]]:
    """A fixed 1x1 PNG with a caption."""
    return [text("1x1 pixel"), image(PIXEL_PNG, "image/png")]


SUM_SCHEMA = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}


@app.tool(output_schema=SUM_SCHEMA)
async def structured(a: int, b: int) -> ToolResult:
    """Add two integers; the result is structured content (and the same object as data)."""
    total = {"sum": a + b}
    return ToolResult(success=True, data=total, structured_content=total)


@app.tool
async def fail(message: str) -> None:
    """Fail with the message (an app error)."""
    raise ToolError(message)


# --- protocol v2 (broker/conformance/README.md, "Version 2 fixtures"): offered only when the
# runner sets TOOLBRIDGE_CONFORMANCE_VERSION=2, so the version-1 scenarios see a tools-only app.

PAGE_TEXT = "hello from Conformance"


def _offer_v2() -> None:
    @app.resource("conformance://text", name="text", mime_type="text/plain", description="A fixed text")
    async def text_resource() -> str:
        return PAGE_TEXT

    @app.resource("conformance://pixel.png", name="pixel", mime_type="image/png")
    async def pixel_resource() -> bytes:
        return PIXEL_PNG

    @app.resource("conformance://big", name="big", mime_type="text/plain")
    async def big_resource() -> str:
        return "x" * 100_000

    def page_names(value: str) -> dict[str, Any]:
        if value == "fail":
            raise ToolError(f"no suggestions for {value!r}")
        return {"values": [f"{value}-notes", f"{value}-plan"], "total": 5, "hasMore": True}

    async def slow_names(value: str) -> list[str]:
        await trio.sleep(int(value) / 1000)
        return ["finished"]

    @app.resource_template("conformance://pages/{name}", name="page", mime_type="text/markdown",
                           complete={"name": page_names})
    async def page(name: str) -> str:
        if name == "private":
            raise ToolError(f"the page {name!r} is private")
        return f"# {name}"

    @app.resource_template("conformance://slow/{ms}", name="slow", complete={"ms": slow_names})
    async def slow_resource(ms: str) -> str:
        await trio.sleep(int(ms) / 1000)
        return "finished"

    @app.prompt(name="greet", description="Greet someone", complete={"name": ["Alice", "Alfred", "Bob"]})
    async def greet(name: str) -> str:
        return f"Say hello to {name}."

    @app.prompt(name="picture")
    async def picture() -> list[dict[str, object]]:
        return [{"role": "user", "content": {"type": "image", "mimeType": "image/png",
                                             "data": base64.b64encode(PIXEL_PNG).decode()}},
                {"role": "assistant", "content": {"type": "resource", "resource": {
                    "uri": "conformance://text", "mimeType": "text/plain", "text": PAGE_TEXT}}}]

    @app.prompt(name="fail")
    async def fail_prompt(message: str) -> str:
        raise ToolError(message)

    @app.tool
    async def touch(uri: str) -> str:
        """Announce that the resource uri changed (resourceUpdated), then answer."""
        app.resource_updated(uri)
        return "touched"

    @app.tool
    async def offer(uri: str) -> str:
        """Offer the resource uri at runtime (setResources)."""

        async def offered() -> str:
            return "offered"

        app.add_resource(offered, uri, name="offered", mime_type="text/plain")
        return "offered"

    @app.tool
    async def withdraw(uri: str) -> str:
        """Withdraw the resource uri (setResources)."""
        app.remove_resource(uri)
        return "withdrawn"

    @app.tool
    async def offer_prompt(name: str) -> str:
        """Offer a prompt at runtime (setPrompts)."""

        async def offered() -> str:
            return "offered"

        app.add_prompt(offered, name=name)
        return "offered"

    @app.tool(name="log")
    async def log_tool(level: str, ctx: ToolContext) -> str:
        """Send an app-wide log message and one tied to this call."""
        app.log(level, "app-wide message", logger="conformance")
        ctx.log(level, {"call": "log"})
        return "logged"

    @app.tool
    async def ask(ctx: ToolContext, mode: str = "form", delayMs: int = 0) -> dict[str, Any]:  # noqa: N803
        """Ask the user (a form, or a URL), after delayMs (not cancellable), and answer what came back."""
        if delayMs > 0:
            with trio.CancelScope(shield=True):  # deliberately deaf to the cancel
                await trio.sleep(delayMs / 1000)
        try:
            if mode == "url":
                answer = await ctx.elicit("Sign in to the print service", url="https://print.example.com/login")
            else:
                answer = await ctx.elicit("Overwrite report.txt?", {
                    "type": "object", "properties": {"overwrite": {"type": "boolean"}}, "required": ["overwrite"]})
        except ElicitationError as exc:
            if exc.code == "call_not_running":
                raise
            return {"errorCode": exc.code}
        return {"action": answer.action, "content": answer.content}

    @app.tool
    async def withdraw_prompt(name: str) -> str:
        """Withdraw the prompt (setPrompts)."""
        app.remove_prompt(name)
        return "withdrawn"


if os.environ.get("TOOLBRIDGE_CONFORMANCE_VERSION") == "2":
    _offer_v2()


def _stdin_is_a_pipe() -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):  # no stdin at all
        return False


async def _wait_for_quit() -> None:
    """Until SIGTERM or SIGINT (POSIX), or until stdin closes: on Windows, which has no SIGTERM
    (the runner closes stdin instead), and on POSIX when stdin is a pipe, as the runner gives
    it: a runner killed outright closes it too, so the app never outlives it. (Not a terminal
    or /dev/null: those say nothing about the runner.)"""
    async with trio.open_nursery() as nursery:
        if os.name == "posix":
            async def on_signal() -> None:
                with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()

            nursery.start_soon(on_signal)
            if not _stdin_is_a_pipe():
                await trio.sleep_forever()
        await trio.to_thread.run_sync(_read_stdin_to_the_end, abandon_on_cancel=True)
        nursery.cancel_scope.cancel()


def _read_stdin_to_the_end() -> None:
    # os.read, not sys.stdin.buffer: the thread is abandoned while it reads, and at exit Python
    # aborts (exit -6) on a buffered reader's lock still held by such a thread
    while os.read(0, 65536):
        pass


async def main() -> int:
    refused: list[RegistrationRejected] = []

    async def run_app(cancel_scope: trio.CancelScope) -> None:
        try:
            await app.run()
        except RegistrationRejected as exc:  # refused for good: retrying cannot help
            refused.append(exc)
            cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_app, nursery.cancel_scope)
        await _wait_for_quit()
        nursery.cancel_scope.cancel()  # App.run sends goodbye as it stops
    if refused:
        print(f"conformance app: registration refused: {refused[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main))
