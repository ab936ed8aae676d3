"""The few ONNX protobuf messages the local model's graph is made of, written by hand.

An ONNX file is one ``ModelProto`` (onnx/onnx.proto) in protobuf's wire format.
The graph :mod:`memvault.index.onnx_export` builds uses six of its messages
(model, operator set, graph, node with its attributes, tensor, value info),
so they are encoded here rather than installing ``onnx`` (31 MB, and 5 more
for ``ml_dtypes``) to build one file once. The functions keep ``onnx.helper``'s
and ``onnx.numpy_helper``'s names and arguments for the part that is used, and
write the bytes ``onnx`` writes for the same calls, field by field in number
order (tests/index/test_onnx_proto.py holds them to ``onnx``'s own, byte for byte).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

# Wire types: a varint, a 32-bit fixed value, a length-prefixed run of bytes.
_VARINT, _FIXED32, _BYTES = 0, 5, 2


class TensorProto:
    """Element types of ``TensorProto.DataType``, as ``onnx.TensorProto`` names them."""

    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13


_ELEMENT_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.uint64): TensorProto.UINT64,
}

# AttributeProto.AttributeType
_FLOAT, _INT, _STRING, _FLOATS, _INTS = 1, 2, 3, 6, 7


@dataclass(frozen=True)
class Message:
    """One encoded message; ``SerializeToString`` as protobuf's own messages have it."""

    data: bytes

    def SerializeToString(self) -> bytes:  # noqa: N802 - protobuf's name, for export()
        """The message's bytes."""
        return self.data


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int64 is its ten-byte two's complement
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _key(field, _VARINT) + _varint(value)


def _bytes(field: int, value: bytes) -> bytes:
    return _key(field, _BYTES) + _varint(len(value)) + value


def _text(field: int, value: str) -> bytes:
    return _bytes(field, value.encode("utf-8"))


def _float(field: int, value: float) -> bytes:
    return _key(field, _FIXED32) + struct.pack("<f", value)


def _all(field: int, messages: Iterable[Message]) -> bytes:
    return b"".join(_bytes(field, message.data) for message in messages)


def _attribute(name: str, value: Any) -> bytes:
    """An ``AttributeProto``: name (1), its value (f 2, i 3, s 4, floats 7, ints 8), type (20)."""
    if isinstance(value, bool | int | np.integer):
        body, kind = _int(3, int(value)), _INT
    elif isinstance(value, float | np.floating):
        body, kind = _float(2, float(value)), _FLOAT
    elif isinstance(value, str | bytes):
        raw = value.encode("utf-8") if isinstance(value, str) else value
        body, kind = _bytes(4, raw), _STRING
    elif isinstance(value, Sequence) and value and all(isinstance(v, int) for v in value):
        body, kind = b"".join(_int(8, int(v)) for v in value), _INTS
    elif isinstance(value, Sequence) and value and all(isinstance(v, float) for v in value):
        body, kind = b"".join(_float(7, float(v)) for v in value), _FLOATS
    else:
        raise ValueError(f"attribute {name!r}: no ONNX encoding here for {value!r}")
    return _text(1, name) + body + _int(20, kind)


def make_node(
    op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attributes: Any
) -> Message:
    """A ``NodeProto``: inputs (1), outputs (2), op_type (4), attributes by name (5)."""
    data = b"".join(_text(1, name) for name in inputs)
    data += b"".join(_text(2, name) for name in outputs)
    data += _text(4, op_type)
    data += b"".join(
        _bytes(5, _attribute(name, value))
        for name, value in sorted(attributes.items())
        if value is not None
    )
    return Message(data)


def from_array(array: npt.NDArray[Any], name: str) -> Message:
    """A ``TensorProto`` holding ``array``: dims (1), data_type (2), name (8), raw_data (9)."""
    kind = _ELEMENT_TYPES.get(array.dtype)
    if kind is None:
        raise ValueError(f"tensor {name!r}: no ONNX element type here for {array.dtype}")
    data = b"".join(_int(1, int(size)) for size in array.shape)
    data += _int(2, kind) + _text(8, name)
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))  # no copy on x86
    return Message(data + _bytes(9, little.tobytes()))


def make_tensor_value_info(name: str, elem_type: int, shape: Sequence[int | str]) -> Message:
    """A ``ValueInfoProto``: name (1) and a tensor type (2) of ``elem_type`` whose axes are
    sizes (``dim_value``) or names left open (``dim_param``)."""
    dims = b"".join(
        _bytes(1, _text(2, size) if isinstance(size, str) else _int(1, size)) for size in shape
    )
    tensor = _int(1, elem_type) + _bytes(2, dims)
    return Message(_text(1, name) + _bytes(2, _bytes(1, tensor)))


def make_graph(
    nodes: Sequence[Message],
    name: str,
    inputs: Sequence[Message],
    outputs: Sequence[Message],
    initializer: Sequence[Message] = (),
) -> Message:
    """A ``GraphProto``: nodes (1), name (2), initializers (5), inputs (11), outputs (12)."""
    data = _all(1, nodes) + _text(2, name) + _all(5, initializer)
    return Message(data + _all(11, inputs) + _all(12, outputs))


def make_opsetid(domain: str, version: int) -> Message:
    """An ``OperatorSetIdProto``: domain (1), version (2)."""
    return Message(_text(1, domain) + _int(2, version))


def make_model(
    graph: Message,
    *,
    opset_imports: Sequence[Message],
    producer_name: str,
    ir_version: int,
) -> Message:
    """A ``ModelProto``: ir_version (1), producer_name (2), graph (7), opset_import (8)."""
    data = _int(1, ir_version) + _text(2, producer_name) + _bytes(7, graph.data)
    return Message(data + _all(8, opset_imports))
