"""An app built on ``app_client`` offering one async ``echo`` tool (benchmark target (a)).

Usage: ``python bench/echo_app.py --home H [--name BenchApp] [--max-concurrency 64]``

It finds the daemon through the home directory like any app and runs until it is stopped.
Logging is limited to warnings so the app's own output costs nothing per call.
"""

from __future__ import annotations

import argparse
import logging

import structlog
import trio

from app_client import App


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--name", default="BenchApp")
    parser.add_argument("--max-concurrency", type=int, default=64)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    app = App(args.name, home=args.home, max_concurrency=args.max_concurrency)

    @app.tool
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    trio.run(app.run)


if __name__ == "__main__":
    main()
