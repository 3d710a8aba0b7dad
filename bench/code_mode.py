"""Scenario 6 — code mode: a task that needs 20 tool calls, as one ``run_code`` vs 20 ``tools/call``.

Usage: ``python bench/code_mode.py --items 20 --repeats 5 [--json]``

The task: read ``--items`` items (``Shop__get_item``, each ~400 bytes of JSON with a long
description) and sum their prices. Both ways go through the same daemon process
(``bench_daemon.py``) and the same app (``app_client``, in this process), with the MCP SDK as the
agent over ``toolbridge stdio``:

* direct: a plain session, ``--items`` sequential ``tools/call``s, the sum computed by the agent;
* code: a ``toolbridge stdio --code`` session, one ``run_code`` whose program loops and returns
  only the sum.

Reported per way: wall time for the task (median of ``--repeats``), and the *agent-visible bytes*:
what the model would write (arguments, or the program) plus what it would read back (the text
content of each result) — the context an agent carries. Also the sandbox start-up: a
``run_code`` of ``return 1`` (every run is a fresh Deno process with a fresh cache: there is no
warm pool, so cold is the only case), and ``deno run`` of an empty module for comparison.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from typing import Any

import trio
from mcp import Client, StdioServerParameters

import _harness as h
from app_client import App
from broker.codemode import find_deno

PROGRAM = """
let total = 0;
for (let id = 1; id <= %d; id++) {
  const item = (await apps.Shop.getItem({ id })) as { price: number };
  total += item.price;
}
return total;
"""


def item(id: int) -> dict[str, Any]:
    return {"id": id, "name": f"item {id}", "price": id * 1.25,
            "description": "A very ordinary item with a long description " * 8}


def text_bytes(result: Any) -> int:
    return sum(len(getattr(block, "text", "").encode()) for block in result.content)


async def measure(daemon: h.Daemon, args: argparse.Namespace) -> dict[str, Any]:
    app = App("Shop", host="127.0.0.1", port=daemon.port, token=daemon.token, max_concurrency=8)

    @app.tool
    async def get_item(id: int) -> dict[str, Any]:
        """Read one item of the shop: name, price, description."""
        return item(id)

    expected = sum(item(i)["price"] for i in range(1, args.items + 1))
    argv = daemon.stdio_argv()
    env = daemon.env
    direct_times, code_times, start_times = [], [], []
    direct_bytes = code_bytes = 0
    async with app.connected(timeout=30):
        plain = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(h.REPO))
        coded = StdioServerParameters(command=argv[0], args=[*argv[1:], "--code"], env=env, cwd=str(h.REPO))
        async with Client(plain, mode="legacy") as direct, Client(coded, mode="legacy") as code:
            await direct.call_tool("Shop__get_item", {"id": 1})  # warm both sessions up
            await code.call_tool("run_code", {"code": "return 1"})
            program = PROGRAM % args.items
            for _ in range(args.repeats):
                started = time.perf_counter()
                total, seen = 0.0, 0
                for id in range(1, args.items + 1):
                    arguments = {"id": id}
                    result = await direct.call_tool("Shop__get_item", arguments)
                    total += json.loads(result.content[0].text)["price"]
                    seen += len(json.dumps(arguments)) + text_bytes(result)
                direct_times.append(time.perf_counter() - started)
                assert abs(total - expected) < 1e-9, total
                direct_bytes = seen

                started = time.perf_counter()
                result = await code.call_tool("run_code", {"code": program})
                code_times.append(time.perf_counter() - started)
                assert result.structured_content and result.structured_content["result"] == expected, result
                code_bytes = len(program.encode()) + text_bytes(result)

                started = time.perf_counter()
                await code.call_tool("run_code", {"code": "return 1"})
                start_times.append(time.perf_counter() - started)
    deno_times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        subprocess.run([find_deno(), "run", "--no-config", "data:application/javascript,"], check=True,
                       capture_output=True)
        deno_times.append(time.perf_counter() - started)
    return {
        "direct_ms": h.median(direct_times) * 1000, "code_ms": h.median(code_times) * 1000,
        "direct_bytes": direct_bytes, "code_bytes": code_bytes,
        "empty_run_code_ms": h.median(start_times) * 1000, "deno_empty_ms": h.median(deno_times) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with h.temp_home() as home, h.Daemon(home / "home") as daemon:
        numbers = trio.run(measure, daemon, args)
    result = {"scenario": "code_mode", "machine": h.machine(), "items": args.items, **numbers}
    text = h.table(
        ["way", f"wall ms ({args.items} reads + sum)", "agent-visible bytes"],
        [["20 × tools/call" if args.items == 20 else f"{args.items} × tools/call", numbers["direct_ms"],
          numbers["direct_bytes"]],
         ["1 × run_code", numbers["code_ms"], numbers["code_bytes"]]],
    ) + "\n\n" + h.table(
        ["sandbox start (cold; no warm pool)", "ms"],
        [["run_code of `return 1`, end to end", numbers["empty_run_code_ms"]],
         ["`deno run` of an empty module", numbers["deno_empty_ms"]]],
    )
    h.emit(result, args.json, text)


if __name__ == "__main__":
    main()
