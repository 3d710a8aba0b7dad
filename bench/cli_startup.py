"""The CLI's start-up: how long a `toolbridge` command takes from exec to exit (issue 30 item 4).

Usage: ``python bench/cli_startup.py [--runs 15] [--json]``

Targets on this machine: ``toolbridge -V`` and ``--help`` within 150 ms, ``status`` and ``call``
within 300 ms. One daemon (temporary home, port 0) with ``echo_app.py`` connected; each command
runs ``--runs`` times as a fresh process (``python -m broker``, as the ``toolbridge`` script
runs it), and the table shows the median and the worst wall-clock time. Runs are sequential.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from typing import Any

import _harness as h

COMMANDS = {
    "-V": ["-V"],
    "--help": ["--help"],
    "status": ["status"],
    "tools": ["tools"],
    "call": ["call", "BenchApp__echo", "--arg", "text=hi"],
}
TARGET_MS = {"-V": 150, "--help": 150, "status": 300, "tools": 300, "call": 300}


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env, check=True, cwd=h.REPO, timeout=60)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"scenario": "cli_startup", "machine": h.machine(), "runs": args.runs, "commands": {}}
    with h.temp_home() as home, h.Daemon(home) as daemon:
        env = h.child_env(TOOLBRIDGE_HOME=str(home))
        with h.started([h.PYTHON, str(h.BENCH_DIR / "echo_app.py"), "--home", str(home)], env=env,
                       log=home / "app.log"):
            daemon.wait_tools(1)
            for name, command in COMMANDS.items():
                argv = [h.PYTHON, "-m", "broker", *command]
                timed(argv, env)  # warm the file cache
                times = sorted(timed(argv, env) for _ in range(args.runs))
                results["commands"][name] = {"median_ms": h.median(times), "max_ms": times[-1],
                                             "target_ms": TARGET_MS[name]}
    rows = [[f"toolbridge {name}", r["median_ms"], r["max_ms"], f"<= {r['target_ms']}"]
            for name, r in results["commands"].items()]
    h.emit(results, args.json, h.table(["command", "median ms", "max ms", "target ms"], rows))


if __name__ == "__main__":
    main()
