"""The conformance fixture app of the Python client (broker/conformance/README.md has the contract).

Run the kit against it::

    toolbridge conformance app -- python examples/conformance_app.py

It registers as ``Conformance`` with six tools (echo, progress, slow, image, structured,
fail), finds the daemon as every app does (TOOLBRIDGE_HOME / TOOLBRIDGE_PORT /
TOOLBRIDGE_TOKEN, else runtime.json and token), uses ``TOOLBRIDGE_INSTANCE_ID`` as its
instanceId when set (else a random one per process), and exits 0 after a clean shutdown
(``goodbye``) on SIGTERM or SIGINT, or when its stdin closes (Windows has no SIGTERM).
It exits 1 if the broker refuses the registration for good.
"""

from __future__ import annotations

import base64
import os
import signal
import sys
from typing import Annotated

import msgspec
import trio

from app_client import App, RegistrationRejected, ToolContext, ToolError, ToolResult, image, text

PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)

app = App("Conformance", instance_id=os.environ.get("TOOLBRIDGE_INSTANCE_ID") or None)


@app.tool
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


async def _wait_for_quit() -> None:
    if os.name == "posix":
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                return
    # Windows: quit when stdin closes (the runner closes it instead of sending SIGTERM).
    await trio.to_thread.run_sync(sys.stdin.buffer.read, abandon_on_cancel=True)


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
