#!/usr/bin/env python3
"""Standalone check of the blind9 set (standard library only; imports nothing from broker): the
same checks as blind8's, on this folder's files."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "blind8"))

from check_blind8 import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(HERE, ("catalogue_field.json", "catalogue_desk.json"), "queries_blind9.json"))
