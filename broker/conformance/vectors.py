"""The conformance vectors: one JSON file per scenario, shipped inside the package.

Theory of operation
-------------------
Each file in ``vectors/`` is one :class:`Scenario`: a name, whether it is required, which
environment variables the app gets, the protocol version it checks, and an ordered list of steps. A step is a JSON object
with exactly one action key (``send``, ``expect``, ``quiet``, ...; see :data:`ACTIONS` and
README.md next to this file) plus its options (``withinMs``). :func:`load_scenarios` reads
and checks them all, so a broken vector fails loudly before any app runs.
"""

from __future__ import annotations

import importlib.resources
from typing import Any, Final, Literal

import msgspec

from ..errors import BrokerError

__all__ = ["ACTIONS", "DEFAULT_WITHIN_MS", "EXIT_MS", "START_UP_MS", "Scenario", "VectorError", "load_scenarios", "vector_files"]

#: How long an ``expect`` or ``accept`` waits unless the step says ``withinMs``.
DEFAULT_WITHIN_MS: Final = 5000
#: The least a scenario's first ``accept`` waits: it includes starting the app's process, which
#: takes seconds for some runtimes (Mono, Node.js, a host program) on a loaded machine.
START_UP_MS: Final = 30000
#: The least an ``expectExit`` waits: ending includes the runtime's own shutdown (Mono's took
#: over 5 s on a loaded 2-core CI machine while the kit ran four scenarios at once).
EXIT_MS: Final = 30000

#: Every step action, with what it does (README.md documents the same list).
ACTIONS: Final = {
    "accept": "wait for the app to connect (every scenario starts with it)",
    "expect": "the app's next line must match the pattern",
    "expectMaybe": "if the app's next line (within withinMs) matches, take it; else leave it",
    "send": "send this object as one line ($token and $ref:NAME filled in)",
    "sendRaw": "send this text as UTF-8, then a newline",
    "sendBase64": "send these bytes exactly (no newline added)",
    "sendPadded": "send the object with its \"$pad\" string grown so the line is lineBytes long",
    "quiet": "the app must send nothing for this many ms (its own pings excepted)",
    "sleep": "wait this many ms; lines that arrive are kept for the next steps",
    "drop": "close the connection, as a broker that went away",
    "rotateToken": "write a new token into the home directory",
    "restart": "drop, stop listening, remove runtime.json; after downMs listen on a new port, "
    "write a new token (rotateToken) and runtime.json",
    "expectClose": "the app must close the connection within withinMs",
    "noConnection": "the app must not connect again for this many ms (exiting is fine)",
    "terminate": "ask the app to quit: SIGTERM (Windows: close its stdin)",
    "expectExit": f"the app process must exit within withinMs (at least {EXIT_MS}) with this exit code",
}

class VectorError(BrokerError, ValueError):
    """A vector file is malformed (a bug in the kit, or a name given to ``--only`` is unknown)."""


class Scenario(msgspec.Struct, rename="camel", forbid_unknown_fields=True, frozen=True):
    """One vector file."""

    name: str
    summary: str
    #: protocol.md sections (and issue 16 items) the scenario checks.
    covers: list[str]
    steps: list[dict[str, Any]]
    #: A required scenario must pass for the run to succeed; others are reported only.
    required: bool = True
    #: ``port``: the app gets TOOLBRIDGE_HOME, TOOLBRIDGE_PORT and TOOLBRIDGE_TOKEN;
    #: ``home``: only TOOLBRIDGE_HOME (it must read runtime.json and token itself).
    env: Literal["port", "home"] = "port"
    #: The protocol version the scenario checks. The runner tells the fixture app with
    #: ``TOOLBRIDGE_CONFORMANCE_VERSION``: at 2 it also offers the version-2 fixtures
    #: (resources, templates, prompts; protocol.md section 11), at 1 it is a tools-only app.
    version: Literal[1, 2] = 1


def vector_files() -> list[importlib.resources.abc.Traversable]:
    """The vector files shipped with the package, by name."""
    folder = importlib.resources.files(__package__).joinpath("vectors")
    return sorted((f for f in folder.iterdir() if f.name.endswith(".json")), key=lambda f: f.name)


def _check(scenario: Scenario, source: str) -> None:
    if not scenario.steps or "accept" not in scenario.steps[0]:
        raise VectorError(f"{source}: the first step must be accept")
    for index, step in enumerate(scenario.steps, 1):
        actions = [key for key in step if key in ACTIONS]
        others = [key for key in step if key not in ACTIONS and key not in ("withinMs", "lineBytes", "note")]
        if len(actions) != 1 or others:
            raise VectorError(
                f"{source}: step {index} must have exactly one action of {sorted(ACTIONS)} "
                f"(and only withinMs, lineBytes, note besides); it has {sorted(step)}"
            )


def load_scenarios(only: list[str] | None = None, max_version: int | None = None) -> list[Scenario]:
    """Every shipped scenario (or those named in ``only``; with ``max_version``, only those of
    that protocol version or lower), checked; raises VectorError."""
    scenarios = []
    for file in vector_files():
        try:
            scenario = msgspec.json.decode(file.read_bytes(), type=Scenario)
        except msgspec.DecodeError as exc:
            raise VectorError(f"vector {file.name} is invalid: {exc}") from exc
        if scenario.name + ".json" != file.name:
            raise VectorError(f"vector {file.name} is named {scenario.name!r}: name and file must agree")
        _check(scenario, file.name)
        scenarios.append(scenario)
    if only:
        known = {s.name for s in scenarios}
        unknown = [name for name in only if name not in known]
        if unknown:
            raise VectorError(f"no scenario named {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        scenarios = [s for s in scenarios if s.name in only]
    if max_version is not None:
        scenarios = [s for s in scenarios if s.version <= max_version]
    return scenarios
