#!/usr/bin/env python3
"""Standalone check of the add-ons' query set (standard library only; imports nothing from broker):
the same checks as blind8's, on this folder's files."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
for cand in (os.path.join(HERE, "..", "blind8"), "/work/main/bench/discovery/blind8"):
    if os.path.isfile(os.path.join(cand, "check_blind8.py")):
        sys.path.insert(0, cand)
        break

from check_blind8 import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(HERE, ("catalogue_integrations.json",), "queries_integrations.json"))
