"""The language-neutral conformance kit: vectors and a scripted broker that plays them to an app.

``vectors/`` holds one JSON file per scenario (README.md documents the format, the
placeholders and the fixture app contract); :mod:`.vectors` loads and checks them,
:mod:`.matching` compares an app's lines with their patterns, and :mod:`.runner` is the
scripted broker behind ``toolbridge conformance app -- COMMAND...``.

May import ``app_client.wire`` (the message shapes), ``app_client.discovery`` (file and
variable names) and ``broker.config``; the daemon never imports this package.
"""

from __future__ import annotations

from .runner import Result, run_all, run_scenario
from .vectors import Scenario, load_scenarios

__all__ = ["Result", "Scenario", "load_scenarios", "run_all", "run_scenario"]
