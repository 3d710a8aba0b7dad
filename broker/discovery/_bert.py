"""The embedding models of semantic search, BERT encoders run with numpy.

Theory of operation
-------------------
Two small English encoders (hidden size 384, 12 heads) are joined (:class:`JoinedEncoder`):
all-MiniLM-L6-v2 (6 layers; its vector is the mean of the last layer over the text's tokens,
sentence-transformers' recipe) and bge-small-en-v1.5 (12 layers; the first token's vector, the
model's own recipe; no query prefix: it scored alike without). Each vector is L2-normalised. The
weights come from ``_models`` (fetched once by ``toolbridge models fetch``; nothing here touches
the network): MiniLM's as a safetensors file, read here with numpy alone (a JSON header and raw
little-endian arrays, the word table memory-mapped; no pickle, so a weights file can hold no
code), bge's as an 8-bit ONNX graph read by ``_onnx``. The tokenizers are Hugging Face's
``tokenizers`` (the exact WordPiece each model was trained with).

Why two (BENCHMARKS.md, discovery round 9): they err on different requests; their mean cosine,
with the fusion refitted, ranked better on a blind set written after the decision's rule (MRR
0.706 -> 0.730, recall@5 0.800 -> 0.856 on blind9), at about twice the cost of MiniLM alone
(MiniLM was chosen over multilingual-e5-small in round 7; bge-small alone ranks no better than
MiniLM alone).

A query is one forward pass per model over its tokens, without padding: short texts are cheap
(~8 ms for MiniLM, ~16 for bge; the joined query runs bge in a thread of its own meanwhile,
~17 ms in all). Documents are encoded :data:`_DOCUMENT_BATCH` at a time, sorted by length so
that a batch pads little (the padding masked out of attention and of the mean): a short text's
pass is bound by reading the layers (~43 MB for MiniLM, ~85 MB for bge) from memory, which a
batch reads once for all its texts, so a tool costs ~4 + ~8 ms instead of ~9 + ~16 (batches of
4-32 score alike, 8 is the least). Loading a model limits numpy's BLAS to one thread for the
whole process (``threadpoolctl``): by default OpenBLAS spreads each product over every core, at
normal priority, so the background embedding (nice 19) would take the second core from the
daemon's own threads; one thread also spends less CPU per tool.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy as np
    import numpy.typing as npt

    Vector = npt.NDArray[np.float32]

__all__ = ["TOKENIZER_FILE", "BertEncoder", "read_safetensors"]

#: The tokenizer's file in a model directory (``_models`` fetches and checks it).
TOKENIZER_FILE: Final = "tokenizer.json"
#: Encoders of these depths are expected (all-MiniLM-L6-v2: 6; bge-small-en-v1.5: 12).
_LAYERS: Final = (6, 12)
_HIDDEN: Final = 384
_HEADS: Final = 12
#: Longer texts are cut to this many tokens (tool texts are cut to 1,000 characters before).
_MAX_TOKENS: Final = 256
#: Documents are encoded this many at a time (see ``documents``).
_DOCUMENT_BATCH: Final = 8
#: The largest safetensors header accepted (this model's is ~9 KB).
_MAX_HEADER: Final = 1 << 20
_DTYPES: Final = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


def read_safetensors(path: Path) -> dict[str, Any]:
    """The arrays of a safetensors file, memory-mapped read-only (ValueError if malformed)."""
    import numpy as np

    with path.open("rb") as file:
        size_bytes = file.read(8)
        if len(size_bytes) != 8:
            raise ValueError(f"{path} is not a safetensors file (too short)")
        size = int.from_bytes(size_bytes, "little")
        if not 0 < size <= _MAX_HEADER:
            raise ValueError(f"{path} is not a safetensors file (header size {size})")
        try:
            header = json.loads(file.read(size))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path} is not a safetensors file (its header: {exc})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path} is not a safetensors file (its header is no JSON object)")
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    arrays: dict[str, Any] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:  # a header from anywhere: each entry's fields checked before use
            dtype = _DTYPES.get(entry["dtype"])
            start, end = (int(offset) for offset in entry["data_offsets"])
            shape = tuple(int(n) for n in entry["shape"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path} is not a safetensors file (tensor {name!r} is malformed)") from None
        if dtype is None:
            raise ValueError(f"{path}: tensor {name!r} has an unsupported type {entry['dtype']}")
        if (not 0 <= start <= end <= len(data) or min(shape, default=0) < 0
                or end - start != math.prod(shape) * np.dtype(dtype).itemsize):
            raise ValueError(f"{path}: tensor {name!r} does not fit the file")
        arrays[name] = data[start:end].view(dtype).reshape(shape)
    return arrays


def _layer_norm(x: Any, gain: Any, bias: Any) -> Any:
    import numpy as np

    centred = x - x.mean(-1, keepdims=True)
    variance = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(variance + np.float32(1e-12)) * gain + bias


class BertEncoder:
    """A BERT encoder: ``query(text)`` and ``documents(texts)`` give L2-normalised float32 rows.

    ``weights`` are named as in the PyTorch model (a ``bert.`` prefix is dropped); the layer
    count is read from them. ``pooling`` is ``"mean"`` (all-MiniLM-L6-v2) or ``"cls"`` (the
    first token's vector: bge-small-en-v1.5). ``source`` names the file in messages.
    """

    def __init__(self, weights: dict[str, Any], tokenizer_file: Path, model_id: str, *,
                 pooling: str, source: Path) -> None:
        import numpy as np
        from threadpoolctl import threadpool_limits
        from tokenizers import Tokenizer

        threadpool_limits(limits=1, user_api="blas")  # see the module docstring
        #: Which weights these are: the disk cache's vectors are valid for exactly these.
        self.model_id = model_id
        self._cls = pooling == "cls"
        weights = {name.removeprefix("bert."): array for name, array in weights.items()}

        def get(name: str) -> Any:
            try:
                return weights[name]
            except KeyError:
                raise ValueError(f"{source} has no tensor {name!r}: not the expected BERT encoder") from None

        self._words = get("embeddings.word_embeddings.weight")  # paged in (or dequantized) per word
        self._positions = np.array(get("embeddings.position_embeddings.weight"), dtype=np.float32)
        self._token_type = np.array(get("embeddings.token_type_embeddings.weight")[0], dtype=np.float32)
        self._norm = (np.array(get("embeddings.LayerNorm.weight")), np.array(get("embeddings.LayerNorm.bias")))
        if self._words.shape[1] != _HIDDEN:
            raise ValueError(f"{source}: hidden size {self._words.shape[1]}, not {_HIDDEN}")
        layers = sum(1 for name in weights if name.startswith("encoder.layer.") and name.endswith(".output.dense.bias")
                     and ".attention." not in name)
        if layers not in _LAYERS:
            raise ValueError(f"{source}: {layers} layers, not one of {_LAYERS}")
        head = _HIDDEN // _HEADS
        self._layers = []
        for i in range(layers):
            p = f"encoder.layer.{i}."

            def dense(name: str) -> tuple[Any, Any]:
                # (in, out), contiguous: x @ w is one BLAS call
                return (np.ascontiguousarray(get(p + name + ".weight").T, dtype=np.float32),
                        np.array(get(p + name + ".bias"), dtype=np.float32))

            q, k, v = (dense(f"attention.self.{part}") for part in ("query", "key", "value"))
            # The three projections as one matrix, the 1/sqrt(head size) folded into the query's.
            scale = np.float32(1 / math.sqrt(head))
            qkv = np.concatenate([q[0] * scale, k[0], v[0]], axis=1)
            qkv_bias = np.concatenate([q[1] * scale, k[1], v[1]])
            self._layers.append((
                qkv, qkv_bias, *dense("attention.output.dense"),
                np.array(get(p + "attention.output.LayerNorm.weight")), np.array(get(p + "attention.output.LayerNorm.bias")),
                *dense("intermediate.dense"), *dense("output.dense"),
                np.array(get(p + "output.LayerNorm.weight")), np.array(get(p + "output.LayerNorm.bias")),
            ))
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.no_padding()  # the file may ask for padding: one text at a time needs none
        tokenizer.enable_truncation(_MAX_TOKENS)
        self._tokenizer = tokenizer

    def _encode(self, batch: Sequence[Sequence[int]], pause: Callable[[], None] | None = None) -> Vector:
        """The vectors of a batch of token id lists, padded to the longest (padding masked);
        ``pause`` is called before each layer (see :meth:`documents`)."""
        import numpy as np

        size, count = len(batch), max(len(ids) for ids in batch)
        ids = np.zeros((size, count), dtype=np.int64)
        for row, tokens in enumerate(batch):
            ids[row, :len(tokens)] = tokens
        x = _layer_norm(self._words[ids] + self._positions[:count] + self._token_type, *self._norm)
        x = x.reshape(size * count, _HIDDEN)
        lengths = np.array([len(tokens) for tokens in batch])
        padded = np.arange(count)[None, :] >= lengths[:, None]  # (size, count)
        # a padded key gets no attention: -inf before the softmax (none when nothing is padded)
        key_mask = np.where(padded, np.float32(-np.inf), np.float32(0))[:, None, None, :] if padded.any() else None
        half, gelu_a, gelu_b, one = np.float32(0.5), np.float32(0.7978845608028654), np.float32(0.044715), np.float32(1)
        head = _HIDDEN // _HEADS
        for (qkv, qkv_bias, out_w, out_b, norm1_g, norm1_b, mid_w, mid_b, down_w, down_b,
             norm2_g, norm2_b) in self._layers:
            if pause is not None:
                pause()
            h = x @ qkv + qkv_bias
            q = h[:, :_HIDDEN].reshape(size, count, _HEADS, head).transpose(0, 2, 1, 3)
            k = h[:, _HIDDEN:2 * _HIDDEN].reshape(size, count, _HEADS, head).transpose(0, 2, 3, 1)
            v = h[:, 2 * _HIDDEN:].reshape(size, count, _HEADS, head).transpose(0, 2, 1, 3)
            attention = q @ k
            if key_mask is not None:
                attention += key_mask
            attention = np.exp(attention - attention.max(-1, keepdims=True))
            attention /= attention.sum(-1, keepdims=True)
            context = (attention @ v).transpose(0, 2, 1, 3).reshape(size * count, _HIDDEN)
            x = _layer_norm(x + context @ out_w + out_b, norm1_g, norm1_b)
            u = x @ mid_w + mid_b
            u = half * u * (one + np.tanh(gelu_a * (u + gelu_b * u * u * u)))  # GELU, tanh form
            x = _layer_norm(x + u @ down_w + down_b, norm2_g, norm2_b)
        x = x.reshape(size, count, _HIDDEN)
        if self._cls:
            pooled = x[:, 0]
        else:  # the mean over each text's own tokens (its sum: the normalisation below drops the scale)
            pooled = np.where(padded[:, :, None], np.float32(0), x).sum(1)
        vectors: Vector = (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)
        return vectors

    def query(self, text: str) -> Vector:
        vector: Vector = self._encode([self._tokenizer.encode(text).ids])[0]
        return vector

    def documents(self, texts: Sequence[str], pause: Callable[[], None] | None = None) -> Vector:
        """The texts' vectors, one row each. ``pause`` is called before each layer of each batch:
        the background embedding waits there while a query is embedded."""
        import numpy as np

        if not texts:
            return np.zeros((0, _HIDDEN), dtype=np.float32)
        # encode, not encode_batch: the batch form runs the tokenizer's own thread pool beside
        # the daemon's threads, for texts this short no faster
        tokens = [self._tokenizer.encode(text).ids for text in texts]
        # Batches of texts of about one length (sorted by it): each layer's weights are read
        # from memory once per batch instead of once per text, with little padding.
        order = sorted(range(len(tokens)), key=lambda i: len(tokens[i]))
        vectors = np.empty((len(tokens), _HIDDEN), dtype=np.float32)
        for start in range(0, len(order), _DOCUMENT_BATCH):
            chunk = order[start:start + _DOCUMENT_BATCH]
            vectors[chunk] = self._encode([tokens[i] for i in chunk], pause)
        return vectors


class JoinedEncoder:
    """Several encoders as one: each one's vector scaled by ``1/sqrt(n)`` and concatenated, so the
    dot product of two joined vectors is the mean of the encoders' cosines (still L2-normalised).

    See the module docstring for why two.
    """

    def __init__(self, encoders: Sequence[BertEncoder]) -> None:
        self.encoders = tuple(encoders)
        self.model_id = "+".join(encoder.model_id for encoder in self.encoders)

    def _join(self, vectors: list[Vector]) -> Vector:
        import numpy as np

        joined: Vector = np.concatenate(vectors, axis=-1) * np.float32(1 / math.sqrt(len(vectors)))
        return joined

    def _each(self, encode: Callable[[BertEncoder], Vector], thread_name: str) -> Vector:
        """The joined vectors of ``encode`` run with each encoder: the first in the calling
        thread, the others in threads of their own meanwhile (numpy releases the GIL in its
        products), each joined before this returns. A thread inherits its starter's nice value
        (Linux), so the background embedding's stay at its low priority."""
        first, *others = self.encoders
        results: list[Vector | BaseException | None] = [None] * len(others)

        def run(slot: int, encoder: BertEncoder) -> None:
            try:
                results[slot] = encode(encoder)
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread below
                results[slot] = exc

        threads = [threading.Thread(target=run, args=(slot, encoder), name=thread_name, daemon=True)
                   for slot, encoder in enumerate(others)]
        for thread in threads:
            thread.start()
        try:
            vectors = [encode(first)]
        finally:
            for thread in threads:
                thread.join()
        for result in results:
            if isinstance(result, BaseException):
                raise result
            assert result is not None
            vectors.append(result)
        return self._join(vectors)

    def query(self, text: str) -> Vector:
        """The query's joined vector, the encoders side by side (see :meth:`_each`: ~17 ms
        instead of ~24 on the 2-core VM)."""
        return self._each(lambda encoder: encoder.query(text), "toolbridge-embed-query")

    def documents(self, texts: Sequence[str], pause: Callable[[], None] | None = None, *,
                  parallel: bool = False) -> Vector:
        """The texts' joined vectors (``pause``: see :meth:`BertEncoder.documents`); with
        ``parallel``, the encoders side by side (the background embedding, where it runs at low
        priority: 10,000 tools in ~2.7 min instead of ~3.6 while searching)."""
        if parallel:
            return self._each(lambda encoder: encoder.documents(texts, pause), "toolbridge-embed")
        return self._join([encoder.documents(texts, pause) for encoder in self.encoders])
