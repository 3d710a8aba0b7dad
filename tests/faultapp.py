"""A real app process built on app_client, for fault tests: it says what happens on stdout.

Usage: ``python tests/faultapp.py --home H --name NAME [--instance-id ID] [--backoff-cap S]``

Tools: ``echo(text)`` returns the text; ``hang()`` runs until cancelled; ``slow(seconds)``
sleeps, then answers. Each event is one line on stdout, flushed at once, so the test can wait
for it: ``registered <label>``, ``invoked <tool> <correlationId>``, ``cancelled <correlationId>``,
``disconnected``. Logs (warnings and up) go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys

import structlog
import trio

from app_client import App, Backoff, ConnectionState, ToolContext


def say(*words: object) -> None:
    print(*words, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", required=True)
    parser.add_argument("--name", default="Faulty")
    parser.add_argument("--instance-id")
    parser.add_argument("--backoff-cap", type=float, default=5.0)
    parser.add_argument("--max-concurrency", type=int, default=16)
    args = parser.parse_args()
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    )
    app: App

    def on_state(state: ConnectionState) -> None:
        if state is ConnectionState.CONNECTED:
            registration = app.registration
            say("registered", registration.app_label if registration else "?")
        elif state is ConnectionState.RECONNECTING:
            say("disconnected")

    app = App(
        args.name,
        home=args.home,
        instance_id=args.instance_id,
        max_concurrency=args.max_concurrency,
        on_state_change=on_state,
        backoff=Backoff(initial=0.05, cap=args.backoff_cap),
    )

    @app.tool
    async def echo(text: str, ctx: ToolContext) -> str:
        """Return the text."""
        say("invoked", "echo", ctx.correlation_id)
        return text

    @app.tool
    async def hang(ctx: ToolContext) -> str:
        """Run until cancelled."""
        say("invoked", "hang", ctx.correlation_id)
        try:
            await trio.sleep_forever()
        finally:
            say("cancelled", ctx.correlation_id)
        return "unreachable"  # pragma: no cover

    @app.tool
    async def slow(seconds: float, ctx: ToolContext) -> str:
        """Sleep, then answer."""
        say("invoked", "slow", ctx.correlation_id)
        await trio.sleep(seconds)
        return f"slept {seconds}"

    trio.run(app.run)


if __name__ == "__main__":
    main()
