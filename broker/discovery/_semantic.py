"""Optional semantic ranking of ``search_tools`` results with a small embedding model.

Theory of operation
-------------------
BM25 only matches words that occur; "fast forward to 2 minutes" shares none with ``Seek``. With
``discovery_rerank = "semantic"``, or ``"auto"`` (the default) when this extra is installed, a
search is *hybrid*: its candidates are the union of BM25's
best :data:`CANDIDATES` tools and the :data:`DENSE` tools whose embedding (of
:func:`tool_text`: the name split into words, the description, the title) is closest to the
query's, over every tool whose vector is cached. Each candidate's score is
``bm25 / max_bm25 + SEMANTIC_WEIGHT * cos01``, where ``bm25`` is the tool's BM25 score (0 when
it shares no word with the query, even through the thesaurus), and ``cos01`` is the cosine
similarity min-max scaled over the candidates, plus ``APP_WEIGHT * app01``: the cosine of the
query and the candidate's app as a whole (the normalised sum of the app's tool vectors, kept
per app label as rows come and go), min-max scaled likewise (:func:`with_app`). So a tool
BM25 cannot find at all can still be found when its meaning is close enough, and of two tools
equally close the one in the app the query is about comes first. The blend, N, M and the weight were chosen on the
tuning queries only (bench/discovery, BENCHMARKS.md section 6; reciprocal-rank fusion was
tried there and scored lower). ``dense=0`` gives the earlier re-ranking of BM25's candidates
only.

A tool with parameters has a second vector, of :func:`params_text` (its name and each
parameter's name, description and values), and a candidate's cosine is the higher of its two
(round 11: requests that name what only a parameter holds, "at 120 bpm", were passed by tools
whose descriptions sound closer; MRR 0.782 -> 0.832 on blind10). The dense candidates are
still chosen by the tool texts' vectors alone (one matrix; choosing by both scored alike).

The cached vectors are also rows of one float32 matrix, so the dense half of a search is one
matrix-vector product (about 1 ms for 10,000 tools). The matrix is append-only: a new or
re-embedded tool is appended (the array doubles when full), a forgotten one is only marked
dead (O(1), on the trio thread), and dead rows are compacted away, into a new array, once they
outnumber the live ones. A search copies the row count and the row names under the short
cache lock and reads the rows outside it: rows it read are never written again.

The embedding is two small English encoders joined (``_bert.JoinedEncoder``: their cosines
averaged), all-MiniLM-L6-v2 and bge-small-en-v1.5, run with numpy (``_bert``; the optional extra
``toolbridge[semantic]`` brings numpy and the tokenizer). Their files are fetched once with
``toolbridge models fetch`` (``_models``); the daemon never downloads anything.
:func:`load_embedder` raises :class:`SemanticUnavailable`, whose message says which command
fixes it, when the extra is missing or a model was not fetched.

Costs (2-core VM): loading takes ~0.2 s, then a query embeds in ~17 ms (the two models at once,
see ``_bert``; ~22-36 ms when the machine was idle before it) and a tool in ~12 ms (one
thread; eight texts at a time); in the background at 10,000 tools, while searching, ~16-20 ms a
tool, all their texts in 2.6-3.3 min, then their params texts (longer) in ~4.5 more
(bench/discovery/scale.py, BENCHMARKS.md discovery rounds 10 and 11).
Tool vectors are cached per tool (by agent-facing name and text), dropped when
the tool leaves the index, and, with ``cache_path`` (the daemon's home), kept on disk by model
identity and text (``_vector_cache``), so a restart reads them back instead of embedding again.
The daemon warms the model and embeds newly registered tools (their texts, then, once no
text is queued, their params texts) in a background thread
(:meth:`SemanticReranker.warm_up`, :meth:`SemanticReranker.schedule`; numpy releases the GIL,
so the trio thread keeps running) at the lowest CPU priority where the OS sets it per thread
(Linux; there the two encoders run side by side, a thread each at that priority), in batches
of :data:`_BATCH`. Before each layer it waits while a query is being embedded (at most
:data:`_MAX_PAUSE`), so the query has the cores to itself. A search never waits for it: queries are embedded by a
model instance of their own (when the reranker loads the model itself), and a BM25 candidate
not embedded yet gets no similarity (ordered by BM25 among the others) and is moved to the
front of the background queue. The dense half only sees tools already embedded: until the
background thread is done (or, without it, in tests and the benchmark, until
:meth:`SemanticReranker.embed` ran), a search is hybrid over fewer tools. Without a background
thread (tests, benchmarks) a search embeds its missing candidates itself.
One lock serialises the documents model's use, another the queries'.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..errors import ConfigError
from ..extras import EXTRAS, extra_installed, install_hint
from ._bert import TOKENIZER_FILE, BertEncoder, JoinedEncoder, read_safetensors
from ._models import MODELS, model_dir, models_missing, models_root
from ._onnx import read_quantized_bert
from ._text import MAX_QUERY_CHARS, split_words
from ._vector_cache import VectorCache

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vector = npt.NDArray[np.float32]

__all__ = [
    "CANDIDATES",
    "DENSE",
    "SEMANTIC_WEIGHT",
    "FUSION",
    "FUSIONS",
    "RRF_K",
    "damping",
    "fuse",
    "fused_scores",
    "with_app",
    "APP_WEIGHT",
    "RERANK_MODES",
    "SemanticUnavailable",
    "Embedder",
    "SemanticReranker",
    "load_embedder",
    "semantic_available",
    "params_text",
    "tool_text",
]

#: How many of BM25's best tools are candidates (chosen on the tuning queries: 20-50 score alike).
CANDIDATES: Final = 30
#: How many of the tools closest to the query by embedding are candidates too (chosen on the
#: tuning queries: 20, 30 and 50 score alike, 10 and 0 a little lower; the smallest is cheapest).
DENSE: Final = 20
#: Weight of the embedding side in the fusion (see :func:`fuse`; fitted by bench/discovery/fit.py:
#: 4 since round 12, refitted on the development sets with blind6-10 and chosen by blind11, with
#: :data:`APP_WEIGHT` and :data:`MARGIN_DAMPING` (MRR 0.743 -> 0.769 there; BENCHMARKS.md,
#: discovery round 12); it was 3 for the two models joined (round 9), 1.5 for all-MiniLM-L6-v2
#: alone, 0.75 for multilingual-e5-small).
SEMANTIC_WEIGHT: Final = 4.0
#: Weight of the query's similarity to the candidate's *app* (the normalised sum of the app's
#: tool vectors), min-max scaled over the candidates and added to the fused score (0: off).
#: The embedding side's counterpart of the BM25 app prior: "louder vocals" is about the DAW
#: even when another app's tool shares a word. Fitted with the blend by bench/discovery/fit.py
#: (round 6: MRR 0.813 -> 0.822 on 558 development queries at 0.5; 0.3-1.0 score alike; refitted
#: with all-MiniLM-L6-v2 in round 7: 0.5 and 0.75 tie at MRR 0.858, 0.5 has the better recall@1;
#: round 9, the two models joined: 1.0, with 0.5-1.0 within 0.003; round 12, refitted with the
#: other two: 0.75).
APP_WEIGHT: Final = 0.75
#: How much the BM25 winner's margin damps both embedding terms (see :func:`damping`; 0: not at
#: all). Round 9: a tool found by a word only its parameters hold ("bpm") was passed by tools
#: whose descriptions sound closer, since parameters are not in the embedded text (round 7:
#: putting them there costs the paraphrases more); a clear BM25 winner now keeps more of its
#: lead. 0.5 on the development sets (BENCHMARKS.md, discovery round 9); 0.25 since round 12,
#: once round 11 gave the parameters a vector of their own (:func:`params_text`) and the fusion
#: was refitted with it (weight 4, app weight 0.75; chosen by blind11, discovery round 12).
MARGIN_DAMPING: Final = 0.25
#: Agent-facing names are ``<app label>__<tool>`` (``broker.core.names.SEPARATOR``; not
#: imported: this layer does not depend on the core).
_APP_SEPARATOR: Final = "__"
#: How BM25 and the embedding are fused, one of :data:`FUSIONS` (see :func:`fuse`). The fit
#: (BENCHMARKS.md, discovery round 5) found the blend and reciprocal-rank fusion within 0.01
#: MRR of each other on 558 development queries, the blend at weight 0.75 first.
FUSION: Final = "blend"
FUSIONS: Final = ("rrf", "blend")
#: Reciprocal-rank fusion's k: larger flattens the difference between neighbouring ranks.
RRF_K: Final = 10.0
#: Values of the ``discovery_rerank`` setting: BM25 only; hybrid (refused at start-up without
#: the extra); hybrid when the extra is installed, else BM25 only (the default).
RERANK_MODES: Final = ("off", "semantic", "auto")
#: Tool texts are cut to this many characters before embedding.
_MAX_TOOL_TEXT: Final = 1000
#: A tool's typical requests (``exampleRequests``) in its embedded text: at most this many
#: characters of them, the first ones (all of them are indexed for BM25).
_MAX_REQUESTS_TEXT: Final = 300
#: A parameter's enum values in :func:`params_text`: at most this many.
_MAX_ENUM_VALUES: Final = 20
#: The background thread embeds this many tools per turn (searches embed queries with a model
#: instance of their own, so they never wait for a batch).
_BATCH: Final = 32
#: The background thread's nice value where threads have their own (Linux): below the daemon.
_BACKGROUND_NICE: Final = 19
#: The longest the background embedding waits between two layers for queries being embedded.
_MAX_PAUSE: Final = 0.25
#: The matrix of tool vectors starts with this many rows.
_FIRST_ROWS: Final = 64
#: Dead rows are compacted away once there are more of them than this and than live rows.
_MIN_DEAD: Final = 256

#: ``pool(agent_name)``: the tool's current text and BM25 score when it may be a dense
#: candidate of this search (still indexed, of the wanted app), else None.
Pool = Callable[[str], "tuple[str, float] | None"]


class SemanticUnavailable(ConfigError, RuntimeError):
    """The semantic extra is not installed (the message says how to install it).

    A :class:`~broker.errors.ConfigError` (``discovery_rerank = "semantic"`` asks for something
    this install lacks); still a ``RuntimeError``, as it was before it joined the broker's tree.
    """


class Embedder(Protocol):
    """Turns text into L2-normalised vectors (rows), queries and documents separately."""

    def query(self, text: str) -> Vector: ...
    def documents(self, texts: Sequence[str], pause: Callable[[], None] | None = None, *,
                  parallel: bool = False) -> Vector: ...


def model_id(embedder: Embedder) -> str | None:
    """The embedder's model identity for the disk cache (None: not cacheable)."""
    value = getattr(embedder, "model_id", None)
    return value if isinstance(value, str) else None


def semantic_available() -> bool:
    """Whether the extra's packages are installed and the models were fetched (nothing is imported)."""
    return extra_installed("semantic") and not models_missing()


def _missing_message(detail: str) -> str:
    return (f"semantic re-ranking (discovery_rerank = \"semantic\") needs the optional extra and its model: "
            f"{detail}")


#: The loaded model, per folder: one copy serves every reranker and thread of the process
#: (its forward pass only reads the weights, and the tokenizer is safe to share), so the
#: queries' own instance costs no second ~45 MB of layers.
_LOADED: dict[Path, Embedder] = {}
_LOADING = threading.Lock()


def load_embedder() -> Embedder:
    """The models from the models directory, joined; :class:`SemanticUnavailable` if they cannot load."""
    packages = [name for name in EXTRAS["semantic"][1] if importlib.util.find_spec(name) is None]
    if packages:
        raise SemanticUnavailable(_missing_message(
            f"{install_hint('semantic')}, then `toolbridge models fetch` (not installed: {', '.join(packages)})"))
    missing = models_missing()
    if missing:
        raise SemanticUnavailable(_missing_message(
            "run `toolbridge models fetch` once (not in " + ", ".join(str(model_dir(m)) for m in missing) + ")"))
    directory = models_root()
    with _LOADING:
        loaded = _LOADED.get(directory)
        if loaded is not None:
            return loaded
        encoders = []
        for model in MODELS:
            folder = model_dir(model)
            weights_file = folder / model.weights
            try:
                weights = (read_quantized_bert(weights_file) if weights_file.suffix == ".onnx"
                           else read_safetensors(weights_file))
                encoders.append(BertEncoder(weights, folder / TOKENIZER_FILE, model.identity,
                                            pooling=model.pooling, source=weights_file))
            except (ImportError, OSError, ValueError) as exc:  # a broken install or file: say so, same fix
                raise SemanticUnavailable(_missing_message(
                    f"the model in {folder} did not load ({exc}); delete that folder and run `toolbridge models fetch`"
                )) from exc
        loaded = _LOADED[directory] = JoinedEncoder(encoders)
        return loaded


def _lower_priority() -> bool:
    """Run the calling thread at the lowest CPU priority where the OS allows it per thread
    (Linux: a thread is a task with its own nice value); elsewhere it keeps the daemon's.
    Whether it was lowered."""
    if sys.platform.startswith("linux") and hasattr(os, "setpriority"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _BACKGROUND_NICE)
        except OSError:  # not allowed: embedding still runs, at normal priority
            return False
        return True
    return False


def tool_text(name: str, description: str, title: str | None, requests: Sequence[str] | None = None) -> str:
    """The text a tool is embedded as: ``"export as pdf: <description> (<title>) Typical
    requests: save it for printing; send it as a pdf."``, the requests being the tool's
    ``exampleRequests`` (written by its app's author; BENCHMARKS.md, discovery round 13)."""
    text = " ".join(split_words(name)) + ": " + description
    if title:
        text += f" ({title})"
    if requests:
        text += " Typical requests: " + _requests_text(requests) + "."
    return text[:_MAX_TOOL_TEXT]


def _requests_text(requests: Sequence[str]) -> str:
    """The first requests, whole, within :data:`_MAX_REQUESTS_TEXT` characters (the first one cut
    if it alone is longer): the embedding's cost grows with the text, and four typical requests
    (~160 characters) gave the gain measured (BENCHMARKS.md, discovery round 13)."""
    taken: list[str] = []
    length = 0
    for request in requests:
        length += len(request) + 2 * bool(taken)
        if length > _MAX_REQUESTS_TEXT:
            break
        taken.append(request)
    return "; ".join(taken) if taken else requests[0][:_MAX_REQUESTS_TEXT]


def params_text(name: str, title: str | None, schema: Any) -> str | None:
    """A tool's second text, its name and parameters: ``"set tempo (Tempo): bpm: Beats per
    minute; key: The key (major, minor)"``, each top-level parameter's name split into words,
    its description and its enum values; None when it has no parameters.

    Why a text of its own: a request may name what a parameter holds ("at 120 bpm"), which the
    tool's description does not say. In the tool's own text the parameters drowned out the
    description (round 7: paraphrases were found less often), so the tool is embedded twice and
    its similarity to a query is the higher of the two (:meth:`SemanticReranker.gather`;
    BENCHMARKS.md, discovery round 11).
    """
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return None
    head = " ".join(split_words(name)) + (f" ({title})" if title else "")
    parts: list[str] = []
    length = len(head)
    for key, sub in properties.items():
        part = " ".join(split_words(str(key)))
        if isinstance(sub, dict):
            if isinstance(sub.get("description"), str):
                part += ": " + sub["description"]
            enum = sub.get("enum")
            if isinstance(enum, list):
                part += " (" + ", ".join(str(v) for v in enum[:_MAX_ENUM_VALUES] if isinstance(v, (str, int))) + ")"
        parts.append(part)
        length += len(part) + 2
        if length >= _MAX_TOOL_TEXT:  # the rest would be cut anyway (a schema may be large)
            break
    return (head + ": " + "; ".join(parts))[:_MAX_TOOL_TEXT]


class SemanticReranker:
    """Ranks search candidates by BM25 and embedding similarity; caches one vector per tool
    and a second for a tool with parameters (:func:`params_text`).

    Thread-safe: a search (in a worker thread) and the background embedding share the model
    under ``_model_lock``; the vector cache and its matrix have their own short ``_lock``, so
    the trio thread, which only schedules and forgets tools, never waits for the model.
    """

    def __init__(self, embedder: Embedder | None = None, *, weight: float = SEMANTIC_WEIGHT,
                 candidates: int = CANDIDATES, dense: int = DENSE, background: bool = False,
                 fusion: str = FUSION, rrf_k: float = RRF_K, cache_path: Path | None = None,
                 query_embedder: Embedder | None = None, app_weight: float = APP_WEIGHT,
                 margin_damping: float = MARGIN_DAMPING) -> None:
        self._embedder = embedder
        #: Queries get a model instance of their own (when this reranker loads the model), so a
        #: search never waits for the background thread's batch; an embedder given by the
        #: caller is shared, under the one model lock.
        self._own_model = embedder is None or query_embedder is not None
        self._query_embedder: Embedder | None = query_embedder
        self._query_lock = threading.Lock()
        #: Queries being embedded now; the background embedding pauses between layers meanwhile.
        self._querying = 0
        self._queries_done = threading.Condition()
        #: Where tool vectors are kept across restarts (see ``_vector_cache``); None: memory only.
        self._cache_path = cache_path
        self._cache: VectorCache | None = None
        #: How BM25 and the embedding are fused (see :func:`fuse`).
        self.fusion = fusion
        self.rrf_k = rrf_k
        #: The index hands new tools to :meth:`schedule` when it syncs (the daemon does; tests
        #: and the benchmark embed on demand).
        self.background = background
        self.weight = weight
        #: Weight of the query's similarity to a candidate's app (see :data:`APP_WEIGHT`).
        self.app_weight = app_weight
        #: How much a clear BM25 winner damps the embedding terms (see :func:`damping`).
        self.margin_damping = margin_damping
        #: How many of BM25's best hits are candidates.
        self.candidates = candidates
        #: How many of the tools closest by embedding are candidates too (0: re-rank BM25's only).
        self.dense = dense
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        #: Each embedded tool's text; its vector is its row of the matrix (kept once: ~3 KB a tool).
        self._texts: dict[str, str] = {}
        self._pending: dict[str, str] = {}
        #: Each tool's second vector, of its :func:`params_text`: (the tool text it goes with,
        #: the params text, the vector). Embedded after every queued tool text: until then a
        #: tool is ranked by its text alone.
        self._params: dict[str, tuple[str, str, Vector]] = {}
        self._pending_params: dict[str, tuple[str, str]] = {}
        self._worker: threading.Thread | None = None
        # The matrix of cached vectors (see the module docstring), all under _lock: rows
        # [0, _used) are written once; _names[i] is row i's tool, None once it is dead.
        self._matrix: Vector | None = None
        self._used = 0
        self._names: list[str | None] = []
        self._row: dict[str, int] = {}
        self._dead = 0
        #: Per app label: the sum of its live tools' vectors and how many (see APP_WEIGHT).
        self._app_sum: dict[str, Vector] = {}
        self._app_count: dict[str, int] = {}

    def _model(self) -> Embedder:  # with self._model_lock held
        if self._embedder is None:
            self._embedder = load_embedder()
        identity = model_id(self._embedder)
        if self._cache is None and self._cache_path is not None and identity is not None:
            self._cache = VectorCache(self._cache_path, identity)
        return self._embedder

    def _embed_query(self, text: str) -> Vector:
        """The query's vector: on the queries' own model instance when there is one."""
        if not self._own_model:
            with self._model_lock:
                return self._model().query(text)
        with self._queries_done:
            self._querying += 1
        try:
            with self._query_lock:
                if self._query_embedder is None:
                    self._query_embedder = load_embedder()
                return self._query_embedder.query(text)
        finally:
            with self._queries_done:
                self._querying -= 1
                if not self._querying:
                    self._queries_done.notify_all()

    def _yield_to_queries(self) -> None:
        """Wait (the background thread, between two layers) while a query is being embedded, at
        most :data:`_MAX_PAUSE`: a query then has the cores to itself."""
        with self._queries_done:
            self._queries_done.wait_for(lambda: not self._querying, timeout=_MAX_PAUSE)

    # --- the tool vectors ---------------------------------------------------------------------

    def warm_up(self) -> None:
        """Load the model and run it once (the first embedding is the slow one)."""
        with self._model_lock:
            self._model().query("warm up")
        self._embed_query("warm up")

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
            self._texts.pop(agent_name, None)
            self._pending.pop(agent_name, None)
            self._params.pop(agent_name, None)
            self._pending_params.pop(agent_name, None)
            self._kill_row(agent_name)

    def cached(self) -> int:
        """How many tools have their text's vector."""
        with self._lock:
            return len(self._texts)

    def cached_params(self) -> int:
        """How many tools have their params text's vector (see :func:`params_text`)."""
        with self._lock:
            return len(self._params)

    def embed(self, tools: Iterable[tuple[str, str]], params: Mapping[str, str] | None = None) -> None:
        """Compute and cache the vectors of ``(agent_name, text)`` not cached yet, now, and of
        ``params[agent_name]``, the tool's :func:`params_text` (absent: it has none)."""
        wanted = dict(tools)
        self._embed(wanted)
        if params:
            self._embed_params({name: (text, params[name]) for name, text in wanted.items() if name in params})

    def schedule(self, tools: Iterable[tuple[str, str]], params: Mapping[str, str] | None = None) -> None:
        """:meth:`embed` in a background thread (started when needed, ends when done): every
        queued tool text first, then the params texts."""
        with self._lock:
            for name, text in tools:
                if self._texts.get(name) != text:
                    self._pending[name] = text
                second = params.get(name) if params else None
                if second is not None and self._params.get(name, ("", ""))[:2] != (text, second):
                    self._pending_params[name] = (text, second)
            if not (self._pending or self._pending_params) or (self._worker is not None and self._worker.is_alive()):
                return
            self._worker = threading.Thread(target=self._drain, name="toolbridge-embed", daemon=True)
            self._worker.start()

    def _prioritise(self, tools: dict[str, str]) -> None:
        """Put ``tools`` first in the background queue (they are a search's candidates)."""
        with self._lock:
            rest = {name: text for name, text in self._pending.items() if name not in tools}
            self._pending = {**tools, **rest}
        self.schedule([])

    def _drain(self) -> None:
        # At low priority the two encoders may each take a core: the daemon's threads come
        # first anyway. At the daemon's own priority (not Linux) they take one core between them.
        parallel = _lower_priority()
        while True:
            with self._lock:
                batch = dict(itertools.islice(self._pending.items(), _BATCH))
                second = {} if batch else dict(itertools.islice(self._pending_params.items(), _BATCH))
                if not batch and not second:
                    return
                for name in batch:
                    del self._pending[name]
                for name in second:
                    del self._pending_params[name]
            try:
                if batch:
                    self._embed(batch, self._yield_to_queries, parallel=parallel)
                else:
                    self._embed_params(second, self._yield_to_queries, parallel=parallel)
            except SemanticUnavailable:
                with self._lock:
                    self._pending.clear()
                    self._pending_params.clear()
                return

    def _embed(self, wanted: dict[str, str], pause: Callable[[], None] | None = None, *,
               parallel: bool = False) -> None:
        with self._lock:
            todo = [(name, text) for name, text in wanted.items() if self._texts.get(name) != text]
        if not todo:
            return
        rows = self._rows([text for _, text in todo], pause, parallel)
        with self._lock:
            for (name, text), row in zip(todo, rows, strict=True):
                self._texts[name] = text
                self._pending.pop(name, None)
                self._append_row(name, row)

    def _embed_params(self, wanted: dict[str, tuple[str, str]], pause: Callable[[], None] | None = None, *,
                      parallel: bool = False) -> None:
        """Embed ``{agent_name: (tool text, params text)}``, the params texts (see :attr:`_params`)."""
        with self._lock:
            todo = [(name, pair) for name, pair in wanted.items() if self._params.get(name, ("", ""))[:2] != pair]
        if not todo:
            return
        rows = self._rows([second for _, (_, second) in todo], pause, parallel)
        with self._lock:
            for (name, (text, second)), row in zip(todo, rows, strict=True):
                self._params[name] = (text, second, row)
                self._pending_params.pop(name, None)

    def _rows(self, texts: list[str], pause: Callable[[], None] | None, parallel: bool) -> list[Vector]:
        """The vectors of ``texts``: from the disk cache where it has them, else embedded (and
        put there)."""
        with self._model_lock:
            model = self._model()
        cache = self._cache
        stored = cache.get_many(texts) if cache is not None else {}
        missing = [text for text in texts if text not in stored]
        if missing:
            with self._model_lock:
                rows = list(model.documents(missing, pause, parallel=parallel))
            if cache is not None:
                cache.put_many(list(zip(missing, rows, strict=True)))
            stored = {**stored, **dict(zip(missing, rows, strict=True))}
        return [stored[text] for text in texts]

    # --- the matrix (every method here with self._lock held) ----------------------------------

    def _row_vector(self, name: str) -> Vector:
        """An embedded tool's vector: a view of its row, which is never written again."""
        assert self._matrix is not None
        row: Vector = self._matrix[self._row[name]]
        return row

    def _kill_row(self, name: str) -> None:
        row = self._row.pop(name, None)
        if row is not None:
            self._names[row] = None
            self._dead += 1
            assert self._matrix is not None
            app = _app_of(name)
            left = self._app_count.get(app, 0) - 1
            if left > 0:
                self._app_count[app] = left
                self._app_sum[app] = self._app_sum[app] - self._matrix[row]
            else:
                self._app_count.pop(app, None)
                self._app_sum.pop(app, None)

    def _append_row(self, name: str, vector: Vector) -> None:
        import numpy as np

        self._kill_row(name)
        if self._dead > _MIN_DEAD and self._dead > len(self._row):
            self._compact()
        if self._matrix is None or self._used == len(self._matrix):
            rows = max(_FIRST_ROWS, 2 * self._used)
            grown = np.empty((rows, vector.shape[0]), dtype=np.float32)
            if self._matrix is not None:
                grown[: self._used] = self._matrix[: self._used]
            self._matrix = grown  # a search still reading the old array keeps it
        self._matrix[self._used] = vector
        app = _app_of(name)
        total = self._app_sum.get(app)
        self._app_sum[app] = vector.astype(np.float32) if total is None else total + vector
        self._app_count[app] = self._app_count.get(app, 0) + 1
        self._names.append(name)
        self._row[name] = self._used
        self._used += 1

    def _compact(self) -> None:
        assert self._matrix is not None
        live = [i for i, name in enumerate(self._names) if name is not None]
        self._matrix = self._matrix[live]  # a copy: a search still reading the old array keeps it
        self._names = [self._names[i] for i in live]
        self._row = {name: i for i, name in enumerate(self._names) if name is not None}
        self._used = len(self._names)
        self._dead = 0

    def _closest(self, query_vector: Vector) -> Iterator[tuple[str, float]]:
        """``(agent_name, cosine)`` of the cached tools, most similar first (lazily sorted)."""
        import numpy as np

        with self._lock:
            matrix, used, names = self._matrix, self._used, self._names[: self._used]
        if matrix is None or used == 0:
            return
        cosine = matrix[:used] @ query_vector
        first = min(used, 4 * self.dense + 16)
        if first < used:
            top = np.argpartition(-cosine, first - 1)[:first]
            top = top[np.argsort(-cosine[top], kind="stable")]
        else:
            top = np.argsort(-cosine, kind="stable")
        for i in top:
            name = names[i]
            if name is not None:
                yield name, float(cosine[i])
        if first < used:  # the app filter left too few: the rest, in order
            seen = set(top.tolist())
            for i in np.argsort(-cosine, kind="stable"):
                name = names[i]
                if name is not None and int(i) not in seen:
                    yield name, float(cosine[i])

    # --- ranking ------------------------------------------------------------------------------

    def rerank(self, query: str, candidates: Sequence[tuple[str, str, float]]) -> list[tuple[int, float]]:
        """``(index into candidates, blended score)`` for ``(agent_name, text, bm25)``, best first.

        :meth:`hybrid` without dense candidates: only ``candidates`` are re-ordered.
        """
        where = {name: i for i, (name, _, _) in enumerate(candidates)}
        return [(where[name], score) for name, score in self.hybrid(query, candidates)]

    def hybrid(self, query: str, candidates: Sequence[tuple[str, str, float]],
               pool: Pool | None = None) -> list[tuple[str, float]]:
        """``(agent_name, fused score)`` of the candidates, best first (see :meth:`hybrid_detail`)."""
        return [(name, score) for name, score, _ in self.hybrid_detail(query, candidates, pool)]

    def embed_query(self, query: str) -> Vector:
        """The query's vector (thread-safe): to embed it alongside BM25, in another thread, and
        hand it to :meth:`hybrid_detail`."""
        return self._embed_query(query[:MAX_QUERY_CHARS])

    def hybrid_detail(self, query: str, candidates: Sequence[tuple[str, str, float]],
                      pool: Pool | None = None, query_vector: Vector | None = None,
                      ) -> list[tuple[str, float, float | None]]:
        """``(agent_name, fused score, cosine)`` of the candidates, best first (cosine None: the
        tool is not embedded yet).

        ``candidates`` are BM25's best ``(agent_name, text, bm25)``, best first, with positive
        scores (may be empty). With ``pool`` (see :data:`Pool`) and ``dense > 0``, the
        :attr:`dense` cached tools most similar to the query that ``pool`` accepts are
        candidates too, with the BM25 score ``pool`` gives (0 if none). The fused score is
        :func:`fused_scores`'; ties keep BM25's order, then similarity order. The cosine is the raw
        similarity of query and tool (what "nothing fits" is calibrated on, see ``_calibration``).
        """
        if query_vector is None:
            query_vector = self._embed_query(query[:MAX_QUERY_CHARS])
        names, bm25, cosines = self.gather(query, candidates, pool, query_vector)
        if not names:
            return []
        apps = self.app_similarities(names, query_vector) if self.app_weight > 0 else None
        fused = fused_scores(bm25, cosines, apps, fusion=self.fusion, weight=self.weight, rrf_k=self.rrf_k,
                             app_weight=self.app_weight, margin_damping=self.margin_damping)
        order = sorted(range(len(names)), key=lambda i: -fused[i])
        return [(names[i], fused[i], None if math.isnan(cosines[i]) else cosines[i]) for i in order]

    def app_similarities(self, names: Sequence[str], query_vector: Vector) -> list[float]:
        """Each name's app's cosine similarity to the query: the query against the normalised
        sum of the app's embedded tool vectors (NaN: none of its tools is embedded yet)."""
        import numpy as np

        out: dict[str, float] = {}
        with self._lock:
            for app in {_app_of(name) for name in names}:
                total = self._app_sum.get(app)
                if total is None:
                    out[app] = math.nan
                    continue
                norm = float(np.linalg.norm(total))
                out[app] = float(total @ query_vector) / norm if norm > 0 else math.nan
        return [out[_app_of(name)] for name in names]

    def gather(self, query: str, candidates: Sequence[tuple[str, str, float]],
               pool: Pool | None = None, query_vector: Vector | None = None,
               ) -> tuple[list[str], list[float], list[float]]:
        """The candidates' names, BM25 scores and cosine similarities to ``query`` (embeds it)."""
        import numpy as np

        wanted = {name: text for name, text, _ in candidates}
        if wanted and not self.background:  # tests and benchmarks: embed now
            self._embed(wanted)
        if query_vector is None:
            query_vector = self._embed_query(query[:MAX_QUERY_CHARS])
        with self._lock:
            vectors = {name: self._row_vector(name) for name in wanted if name in self._texts}
            params = self._params_vectors(wanted.items())
        missing = [name for name in wanted if name not in vectors]
        if missing and self.background:
            # Not embedded yet: a search never waits for that. These candidates count at the
            # lowest similarity of the others (BM25 orders them), and go to the queue's front.
            self._prioritise({name: wanted[name] for name in missing})
        elif missing:  # forgotten meanwhile (its app left): embedded again for this search
            with self._model_lock:
                rows = self._model().documents([wanted[name] for name in missing])
            vectors.update(zip(missing, rows, strict=True))
        names = [name for name, _, _ in candidates]
        # NaN: not embedded yet (fuse counts it at the others' lowest; its similarity is unknown)
        cosines = [_similarity(float(vectors[name] @ query_vector), params.get(name), query_vector)
                   if name in vectors else math.nan for name in names]
        bm25 = [score for _, _, score in candidates]
        if pool is not None and self.dense > 0:
            taken = 0
            for name, similarity in self._closest(query_vector):
                found = pool(name)
                if found is None:
                    continue
                text, score = found
                with self._lock:  # a vector of an earlier text: the tool changed, skip it
                    current = self._texts.get(name) == text
                    second = self._params_vectors([(name, text)]).get(name)
                if not current:
                    continue
                if name not in wanted:
                    names.append(name)
                    cosines.append(_similarity(similarity, second, query_vector))
                    bm25.append(score)
                taken += 1
                if taken == self.dense:
                    break
        return names, bm25, cosines

    def _params_vectors(self, tools: Iterable[tuple[str, str]]) -> dict[str, Vector]:
        """The params vectors of ``(agent_name, tool text)`` that go with that text (with
        self._lock held)."""
        out = {}
        for name, text in tools:
            second = self._params.get(name)
            if second is not None and second[0] == text:
                out[name] = second[2]
        return out


def _similarity(cosine: float, params: Vector | None, query_vector: Vector) -> float:
    """A tool's similarity to the query: its text's ``cosine``, or its params text's when higher."""
    return cosine if params is None else max(cosine, float(params @ query_vector))


def _app_of(agent_name: str) -> str:
    return agent_name.split(_APP_SEPARATOR, 1)[0]


def with_app(fused: Sequence[float], app_similarities: Sequence[float], weight: float = APP_WEIGHT) -> list[float]:
    """``fused`` plus ``weight`` times each candidate's app similarity, min-max scaled over the
    candidates (NaN, an app with no tool embedded yet: as the lowest)."""
    known = [a for a in app_similarities if not math.isnan(a)]
    if not known:
        return list(fused)
    low, high = min(known), max(known)
    spread = high - low
    if spread <= 0:
        return list(fused)
    return [f + weight * ((low if math.isnan(a) else a) - low) / spread
            for f, a in zip(fused, app_similarities, strict=True)]


def fused_scores(bm25: Sequence[float], cosines: Sequence[float], app_similarities: Sequence[float] | None, *,
                 fusion: str, weight: float, rrf_k: float, app_weight: float, margin_damping: float) -> list[float]:
    """Each candidate's final score in a search (and in ``bench/discovery/fit.py``'s grid, so the
    fit scores exactly what the search does): :func:`fuse`'s, plus the app term
    (:func:`with_app`) when ``app_similarities`` are given, both embedding terms scaled by
    :func:`damping`."""
    damp = damping(bm25, margin_damping)
    fused = fuse(bm25, cosines, fusion, weight * damp, rrf_k)
    if app_similarities is not None and app_weight > 0:
        fused = with_app(fused, app_similarities, app_weight * damp)
    return fused


def damping(bm25: Sequence[float], strength: float = MARGIN_DAMPING) -> float:
    """The factor on both embedding terms of a search: ``1 - strength * margin``, the margin being
    how far BM25's best score is ahead of its second, relative to the best (0..1; 1 when BM25
    matched one candidate only). 1 when BM25 matched nothing."""
    positive = sorted((b for b in bm25 if b > 0), reverse=True)
    if not positive:
        return 1.0
    second = positive[1] if len(positive) > 1 else 0.0
    return 1.0 - strength * (positive[0] - second) / positive[0]


def fuse(bm25: Sequence[float], cosines: Sequence[float], fusion: str = FUSION, weight: float = SEMANTIC_WEIGHT,
         rrf_k: float = RRF_K) -> list[float]:
    """Each candidate's fused score from its BM25 score (0: no word matched) and cosine.

    ``"blend"`` (the default): ``bm25 / best_bm25 + weight * cos01``, the cosine min-max
    scaled over the candidates, so both sides are on a 0..1 scale relative to this query's
    candidates. ``"rrf"`` (reciprocal-rank fusion): ``1 / (k + bm25 rank) + weight / (k +
    cosine rank)``, ranks from 1 over the candidates, no BM25 term for a tool BM25 did not
    match. The form, k and the weight were fitted on the development sets by
    ``bench/discovery/fit.py`` (a grid; a logistic model over both sides' scores and ranks
    did no better).
    """
    n = len(bm25)
    if n == 0:
        return []
    if any(math.isnan(c) for c in cosines):  # not embedded yet: as similar as the least similar
        floor = min((c for c in cosines if not math.isnan(c)), default=0.0)
        cosines = [floor if math.isnan(c) else c for c in cosines]
    if fusion == "blend":
        low, high = min(cosines), max(cosines)
        spread = high - low
        best = max(bm25)
        return [(b / best if best > 0 else b) + weight * ((c - low) / spread if spread > 0 else 0.0)
                for b, c in zip(bm25, cosines, strict=True)]
    by_bm25 = sorted(range(n), key=lambda i: -bm25[i])  # stable: BM25's order among ties
    by_cosine = sorted(range(n), key=lambda i: -cosines[i])
    fused = [0.0] * n
    for rank, i in enumerate(by_bm25, 1):
        if bm25[i] > 0:
            fused[i] += 1.0 / (rrf_k + rank)
    for rank, i in enumerate(by_cosine, 1):
        fused[i] += weight / (rrf_k + rank)
    return fused
