"""The local model's ONNX graph, built from the weights without torch, gives today's vectors.

The reference is sentence-transformers on torch (the dev extra): the pipeline the
graph replaces. The graph is built in a child process where torch, transformers and
sentence-transformers cannot be imported, as in the default install.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memvault.index.embedders import LocalEmbedder
from memvault.index.local_model import MAX_TOKENS, ModelFile, weights_dir
from memvault.index.onnx_export import BertShape, export

SAMPLE = [
    "tea",
    "The owner drinks oolong every morning before work",
    "Garage door code is XK-4471; the spare key is under the third flowerpot.",
    "Café au lait, naïve façade, Straße, smørrebrød",
    "東京で寿司を食べた。とても美味しかった。",
    "Привет, как дела? Всё хорошо.",
    "emoji 🙂🚀 and symbols: ∑ ≤ → ©",
    "## Heading\n\n- a bullet with [[Wiki Link]] and #tag\n- another\n\n```python\nx = 1\n```",
    # Past the 128-token window: both pipelines cut it at the same place.
    " ".join(f"Meeting {n} about the harbour budget moved to Thursday." for n in range(40)),
    "Ein längerer Satz über das Wetter in München, der Zürich und Genf erwähnt. " * 12,
]

# Imports of these raise ImportError in the child, as where the torch extra is absent.
WITHOUT_TORCH = (
    "import sys\n"
    "for name in ('torch', 'transformers', 'sentence_transformers'):\n"
    "    sys.modules[name] = None\n"
)


def build_without_torch(dest: Path) -> subprocess.CompletedProcess[str]:
    """``python -m memvault.index.onnx_export DEST`` in a child that cannot import torch."""
    code = WITHOUT_TORCH + (
        "from memvault.index.onnx_export import main\n"
        f"code = main([{str(dest)!r}])\n"
        "heavy = [m for m in ('torch', 'transformers') if sys.modules.get(m) is not None]\n"
        "print(heavy)\n"
        "sys.exit(code)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )


def test_the_sample_reaches_past_the_token_window() -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(weights_dir() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    lengths = [len(tokenizer.encode(text).ids) for text in SAMPLE]
    assert max(lengths) > MAX_TOKENS and min(lengths) < 8
    assert any(not text.isascii() for text in SAMPLE)


def test_the_graph_is_built_with_torch_out_of_reach(tmp_path: Path) -> None:
    dest = tmp_path / "model.onnx"
    done = build_without_torch(dest)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", "nothing heavy was imported"
    assert dest.stat().st_size > 80_000_000, "every weight is in the file"
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"], "no temporary file left"


@pytest.mark.slow  # loads torch and sentence-transformers for the reference
def test_the_vectors_equal_sentence_transformers(prepared_model: ModelFile) -> None:
    reference = LocalEmbedder(runtime="torch").embed(SAMPLE)
    onnx = LocalEmbedder(model_cache=prepared_model.cache)
    together = onnx.embed(SAMPLE)  # padded runs of mixed lengths
    alone = np.vstack([onnx.embed([text]) for text in SAMPLE])  # no padding at all

    for vectors in (together, alone):
        assert vectors.shape == reference.shape == (len(SAMPLE), 384)
        cosine = np.sum(vectors * reference, axis=1)
        assert cosine.min() >= 0.9999, cosine
        assert np.abs(vectors - reference).max() < 1e-5
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_checkpoint_the_graph_does_not_build_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    source = tmp_path / "weights"
    source.mkdir()
    config = json.loads((weights_dir() / "config.json").read_text(encoding="utf-8"))
    (source / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    (source / "model.safetensors").symlink_to(weights_dir() / "model.safetensors")
    dest = tmp_path / "out" / "model.onnx"

    with pytest.raises(ValueError, match="not a BERT encoder with GELU"):
        export(dest, source)
    assert not dest.parent.exists() or not any(dest.parent.iterdir())

    (source / "config.json").write_text(json.dumps({**config, "num_attention_heads": 5}))
    with pytest.raises(ValueError, match="do not split in heads"):
        BertShape.read(source / "config.json")


def test_the_shape_is_read_from_the_package_config() -> None:
    shape = BertShape.read(weights_dir() / "config.json")
    assert (shape.layers, shape.hidden, shape.heads, shape.epsilon) == (6, 384, 12, 1e-12)
