"""``toolbridge conformance app -- COMMAND...``: check an app client against the conformance kit.

The runner and the vectors live in :mod:`broker.conformance`; this module only parses the
command line, prints one line per scenario and the summary, and chooses the exit status
(0 only when every required scenario passed).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

import trio

from ._common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, SubParsers, add_command

__all__ = ["add_parser", "cmd_conformance_app"]


def cmd_conformance_app(args: argparse.Namespace) -> int:
    from ..conformance import Result, load_scenarios, run_all
    from ..conformance.vectors import VectorError

    command = list(args.app_command)
    if command and command[0] == "--":
        command = command[1:]
    try:
        scenarios = load_scenarios(args.only or None, args.max_version)
    except VectorError as exc:
        print(f"toolbridge conformance: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.list:
        for scenario in scenarios:
            optional = "" if scenario.required else " (optional)"
            version = "" if scenario.version == 1 else f" (v{scenario.version})"
            print(f"{scenario.name}{optional}{version}: {scenario.summary}")
        return EXIT_OK
    if not command:
        print("toolbridge conformance app: give the app's command after --, "
              "e.g. `toolbridge conformance app -- python examples/conformance_app.py`", file=sys.stderr)
        return EXIT_USAGE
    stacks_signal = None
    if args.stacks_signal is not None:
        stacks_signal = _signal_number(args.stacks_signal)
        if stacks_signal is None:
            print(f"toolbridge conformance app: --stacks-signal {args.stacks_signal}: not a signal here; give a "
                  "POSIX signal's name, e.g. QUIT (Mono and Java print their threads' stacks on it)", file=sys.stderr)
            return EXIT_USAGE

    def report(result: Result) -> None:
        print(result.line(), flush=True)
        for line in result.stderr_tail:
            print(f"    app stderr: {line}", flush=True)
        for line in result.stdout_tail:
            print(f"    app stdout: {line}", flush=True)

    async def run() -> list[Result] | None:
        # SIGTERM (a CI job's timeout, `kill`) ends the run like Ctrl-C does: cancelled, so that
        # every app process still running is stopped first. Python's default would end the
        # runner at once and leave them running, retrying ports that later runs listen on.
        outcome: list[list[Result]] = []
        async with trio.open_nursery() as nursery:

            async def scenarios_then_done() -> None:
                outcome.append(await run_all(scenarios, command, jobs=args.jobs, report=report,
                                             stacks_signal=stacks_signal))
                nursery.cancel_scope.cancel()

            nursery.start_soon(scenarios_then_done)
            if os.name == "posix":
                with trio.open_signal_receiver(signal.SIGTERM) as signals:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()
                        break
        return outcome[0] if outcome else None

    ran = trio.run(run)
    if ran is None:
        print("toolbridge conformance app: stopped by SIGTERM; the app processes it started were stopped",
              file=sys.stderr)
        return 128 + signal.SIGTERM
    results = ran
    passed = sum(result.passed for result in results)
    required_failed = [r.scenario.name for r in results if not r.passed and r.scenario.required]
    optional_failed = [r.scenario.name for r in results if not r.passed and not r.scenario.required]
    summary = f"{passed} of {len(results)} scenarios passed"
    if required_failed:
        summary += f"; {len(required_failed)} required failed: {', '.join(required_failed)}"
    if optional_failed:
        summary += f"; optional failed: {', '.join(optional_failed)}"
    print(summary)
    return EXIT_ERROR if required_failed else EXIT_OK


def _signal_number(name: str) -> int | None:
    """``QUIT`` or ``SIGQUIT`` as a signal number on POSIX; None elsewhere or for no such signal."""
    if os.name != "posix":
        return None
    upper = name.upper()
    number = getattr(signal, upper if upper.startswith("SIG") else "SIG" + upper, None)
    return int(number) if isinstance(number, signal.Signals) else None


def add_parser(sub: SubParsers) -> None:
    conformance = add_command(sub, "conformance")
    kinds = conformance.add_subparsers(dest="kind", metavar="KIND", required=True)
    app = kinds.add_parser(
        "app",
        help="play the kit's scripted broker against an app command (its fixture app)",
        description="Start COMMAND once per scenario with TOOLBRIDGE_HOME (and TOOLBRIDGE_PORT, "
        "TOOLBRIDGE_TOKEN) pointing at a scripted broker, and report each scenario. The app must "
        "follow the fixture contract in broker/conformance/README.md.",
    )
    app.add_argument("--only", action="append", metavar="NAME", help="run only this scenario (repeatable)")
    app.add_argument("--jobs", type=int, default=4, help="scenarios run at once (default 4)")
    app.add_argument("--max-version", type=int, choices=(1, 2), default=None, metavar="N",
                     help="run only the scenarios of protocol version N or lower (1: a client that offers tools only)")
    app.add_argument("--list", action="store_true", help="list the scenarios and what each checks, then exit")
    app.add_argument("--stacks-signal", metavar="NAME", default=None,
                     help="POSIX: an app that has not connected by its start-up deadline is sent this signal, and "
                     "what it prints on stdout is reported (QUIT: Mono and Java print every thread's stack)")
    app.add_argument("app_command", nargs=argparse.REMAINDER, metavar="-- COMMAND...")
    app.set_defaults(func=cmd_conformance_app)
