"""The hand-written ONNX messages are the bytes ``onnx`` writes (the dev extra has it), and
the local model's file built with them is a valid ONNX model that ONNX Runtime runs, built
where ``onnx`` cannot be imported, as in the default install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from memvault.index import onnx_proto
from memvault.index.local_model import INPUTS, OUTPUT

ARRAYS = [
    np.array(0.5, dtype=np.float32),  # a scalar: no dims
    np.arange(6, dtype=np.int64).reshape(2, 3) - 3,  # negative int64s
    np.array([True, False]),
    np.arange(12, dtype=np.uint8).reshape(3, 4),
    np.linspace(-1, 1, 5).astype(np.float16),
    np.arange(4, dtype=np.float32).reshape(2, 2).T,  # not contiguous
    np.zeros((0, 3), dtype=np.float32),  # an axis of length 0
]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_a_tensor_is_onnx_s_bytes(array: np.ndarray[Any, Any]) -> None:
    theirs = numpy_helper.from_array(array, "w").SerializeToString()
    assert onnx_proto.from_array(array, "w").SerializeToString() == theirs


ATTRIBUTES: list[dict[str, Any]] = [
    {},
    {"axis": -1, "epsilon": 1e-12},
    {"perm": [0, 2, 1, 3]},
    {"to": onnx.TensorProto.BOOL, "keepdims": 0, "axes": [1]},
    {"mode": "constant", "alpha": 0.25, "beta": None},
    {"scales": [0.5, 2.0]},
]


@pytest.mark.parametrize("attributes", ATTRIBUTES, ids=lambda a: ",".join(a) or "none")
def test_a_node_is_onnx_s_bytes(attributes: dict[str, Any]) -> None:
    args = ("LayerNormalization", ["x", "scale", "bias"], ["y"])
    theirs = helper.make_node(*args, **attributes).SerializeToString()
    assert onnx_proto.make_node(*args, **attributes).SerializeToString() == theirs


def test_a_model_is_onnx_s_bytes() -> None:
    def model(h: Any, n: Any) -> bytes:
        nodes = [
            h.make_node("Gather", ["table", INPUTS[0]], ["rows"]),
            h.make_node("ReduceSum", ["rows", "axis"], [OUTPUT], keepdims=0),
        ]
        table = np.arange(20, dtype=np.float32).reshape(10, 2)
        inputs = [h.make_tensor_value_info(INPUTS[0], 7, ["batch", "sequence"])]
        outputs = [h.make_tensor_value_info(OUTPUT, 1, ["batch", 2])]
        initializers = [n.from_array(table, "table"), n.from_array(np.array([1]), "axis")]
        graph = h.make_graph(nodes, "g", inputs, outputs, initializer=initializers)
        made = h.make_model(
            graph, opset_imports=[h.make_opsetid("", 17)], producer_name="memvault", ir_version=8
        )
        return bytes(made.SerializeToString())

    ours = model(onnx_proto, onnx_proto)
    assert ours == model(helper, numpy_helper)
    onnx.checker.check_model(onnx.load_from_string(ours), full_check=True)


def test_an_attribute_it_cannot_encode_is_refused() -> None:
    with pytest.raises(ValueError, match="no ONNX encoding"):
        onnx_proto.make_node("Op", ["x"], ["y"], odd={"a": 1})
    with pytest.raises(ValueError, match="no ONNX element type"):
        onnx_proto.from_array(np.array(["text"]), "words")


@pytest.mark.slow  # builds the 90 MB file
def test_the_local_model_s_file_is_built_without_onnx_and_is_valid(tmp_path: Path) -> None:
    dest = tmp_path / "model.onnx"
    code = (
        "import sys\n"
        "sys.modules['onnx'] = None  # as in the default install\n"
        "from memvault.index.onnx_export import main\n"
        f"sys.exit(main([{str(dest)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    data = dest.read_bytes()
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model)
    assert model.SerializeToString() == data, "onnx reads it and writes back the same bytes"
    assert [i.name for i in model.graph.input] == list(INPUTS)

    import onnxruntime

    session = onnxruntime.InferenceSession(str(dest), providers=["CPUExecutionProvider"])
    ids = np.array([[101, 2023, 102, 0]], dtype=np.int64)
    mask = np.array([[1, 1, 1, 0]], dtype=np.int64)
    (vectors,) = session.run(
        [OUTPUT], dict(zip(INPUTS, (ids, mask, np.zeros_like(ids)), strict=True))
    )
    assert vectors.shape == (1, 384) and abs(float(np.linalg.norm(vectors)) - 1.0) < 1e-5
