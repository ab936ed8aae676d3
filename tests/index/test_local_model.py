"""The bundled model under ONNX Runtime: its file, its sessions, no torch.

Real model, real files, real child processes. The session's model cache
(tests/conftest.py) holds the one export most tests share; the tests about
a missing, damaged or concurrently prepared file use caches of their own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from memvault.config import EmbedderSettings
from memvault.index.embedders import LocalEmbedder, make_embedder
from memvault.index.local_model import ModelFile
from memvault.locations import MODEL_CACHE_ENV
from waiting import WAIT

TEXTS = [
    "The owner drinks oolong every morning before work",
    "",
    " ",
    "?",
    "Garage door code is XK-4471",
    "Café au lait, naïve façade, Straße, smørrebrød",
    "東京で寿司を食べた。とても美味しかった。",
    "Привет, как дела? Всё хорошо.",
    "emoji 🙂🚀 and symbols: ∑ ≤ → ©",
    "word " * 400,  # far past the 128-token limit
    "## Heading\n\n- a bullet with [[Wiki Link]] and #tag\n- another\n\n```python\nx = 1\n```",
    "mixedCaseTokens_and-hyphens 12345 3.14159 2026-11-22T09:30",
]


@pytest.fixture(scope="module")
def onnx(prepared_model: ModelFile) -> LocalEmbedder:
    embedder = LocalEmbedder(model_cache=prepared_model.cache)
    embedder.warm()
    return embedder


def child(code: str, cache: Path) -> subprocess.Popen[str]:
    """``python -c CODE`` with the model cache at ``cache``, output captured."""
    env = {**os.environ, MODEL_CACHE_ENV: str(cache)}
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(process: subprocess.Popen[str], timeout: float = 300) -> str:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    return out + err


# Equality with sentence-transformers' vectors: tests/index/test_onnx_torchfree.py.


def test_order_is_kept_when_lengths_are_mixed(onnx: LocalEmbedder) -> None:
    texts = [f"note {n}: " + "alpha beta gamma " * (n * 7 % 45) for n in range(24)]
    together = onnx.embed(texts)
    alone = np.vstack([onnx.embed([text]) for text in texts])
    assert np.abs(together - alone).max() < 1e-5
    shuffled = onnx.embed(texts[::-1])
    assert np.abs(shuffled[::-1] - together).max() < 1e-5


def test_a_lone_surrogate_is_embedded_not_a_crash(onnx: LocalEmbedder) -> None:
    # A terminal's stray byte reaches a query as a lone surrogate (surrogateescape).
    hostile = onnx.embed(["harbour \udcff code", "a\ud800b"])
    assert np.abs(hostile - onnx.embed(["harbour ? code", "a?b"])).max() < 1e-6


def test_loaded_only_once_the_session_is_ready(prepared_model: ModelFile) -> None:
    embedder = LocalEmbedder(model_cache=prepared_model.cache)
    assert embedder.loaded is False
    assert embedder.embed([]).shape == (0, 384)
    assert embedder.loaded is False, "nothing to embed loads nothing"
    embedder.embed(["now it loads"])
    assert embedder.loaded is True


def test_threads_asking_at_once_share_one_load(
    prepared_model: ModelFile, onnx: LocalEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = LocalEmbedder(model_cache=prepared_model.cache)
    with (
        caplog.at_level("INFO", logger="memvault.index.embedders"),
        ThreadPoolExecutor(max_workers=6) as pool,
    ):
        results = list(pool.map(lambda n: embedder.embed([TEXTS[n]]), range(6)))
    assert caplog.text.count("local embedding model loaded") == 1
    assert np.abs(np.vstack(results) - onnx.embed(TEXTS[:6])).max() < 1e-5


def test_the_settings_choose_the_runtime_and_the_cache(tmp_path: Path) -> None:
    default = make_embedder(EmbedderSettings())
    assert isinstance(default, LocalEmbedder) and default.runtime == "onnx"
    settings = EmbedderSettings(runtime="torch", model_cache=tmp_path, batch_size=16)
    chosen = make_embedder(settings)
    assert isinstance(chosen, LocalEmbedder)
    assert (chosen.runtime, chosen.model_cache, chosen.batch_size) == ("torch", tmp_path, 16)
    assert chosen.model_file().path.parent == tmp_path
    assert chosen.identity == default.identity == "local:all-MiniLM-L6-v2", "same vectors"


def test_a_process_embedding_with_the_default_runtime_never_imports_torch(
    prepared_model: ModelFile,
) -> None:
    code = (
        "import json, sys\n"
        "from memvault.config import EmbedderSettings\n"
        "from memvault.index.embedders import make_embedder\n"
        "embedder = make_embedder(EmbedderSettings())\n"
        "vectors = embedder.embed(['a dog runs in the park', 'notes about tea'])\n"
        "heavy = ['torch', 'transformers', 'sentence_transformers']\n"
        "print(json.dumps({'shape': list(vectors.shape),"
        " 'imported': [m for m in heavy if m in sys.modules]}))\n"
    )
    out = finish(child(code, prepared_model.cache))
    facts = json.loads(out.splitlines()[0])
    assert facts == {"shape": [2, 384], "imported": []}


@pytest.mark.slow  # an export of its own
def test_a_damaged_file_is_exported_again(
    tmp_path: Path, prepared_model: ModelFile, onnx: LocalEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    damaged = ModelFile(tmp_path)
    damaged.cache.mkdir(parents=True, exist_ok=True)
    good = prepared_model.path.read_bytes()
    damaged.path.write_bytes(good[: len(good) // 3])  # a copy cut short
    embedder = LocalEmbedder(model_cache=tmp_path)

    with caplog.at_level("INFO", logger="memvault.index.local_model"):
        vectors = embedder.embed(TEXTS[:4])

    assert "does not load" in caplog.text and "preparing the local embedding model" in caplog.text
    assert damaged.path.stat().st_size == len(good)
    assert np.abs(vectors - onnx.embed(TEXTS[:4])).max() < 1e-6
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [damaged.path.name, damaged.path.name + ".lock"]
    ), "no partial files left behind"


@pytest.mark.slow  # an export of its own
def test_two_processes_first_using_a_missing_file_export_it_once(
    tmp_path: Path, onnx: LocalEmbedder
) -> None:
    cache = tmp_path / "fresh"
    code = (
        "import json, logging\n"
        "logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
        "from memvault.index.embedders import LocalEmbedder\n"
        "print(json.dumps(LocalEmbedder().embed(['notes about tea']).tolist()))\n"
    )
    first, second = child(code, cache), child(code, cache)
    outputs = [finish(first), finish(second)]

    assert sum(out.count("preparing the local embedding model once") for out in outputs) == 1
    expected = onnx.embed(["notes about tea"])
    for out in outputs:
        vector = np.asarray(json.loads(out.splitlines()[0]), dtype=np.float32)
        assert np.abs(vector - expected).max() < 1e-6
    onnx_files = sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock"))
    assert onnx_files == [ModelFile(cache).path.name], "one file, no partial ones"
    assert ModelFile(cache).prepare().exported is False, "and it loads"


@pytest.mark.slow  # exports of its own
def test_an_export_killed_midway_leaves_no_file_that_passes_for_the_model(
    tmp_path: Path, onnx: LocalEmbedder
) -> None:
    model_file = ModelFile(tmp_path)
    model_file.cache.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "memvault.index.onnx_export", str(model_file.path)]
    for kill_when in ("the temporary file appears", "the weights are loading"):
        export = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + WAIT
        while export.poll() is None and time.monotonic() < deadline:
            written = list(tmp_path.glob(f".{model_file.path.name}.*.tmp"))
            if kill_when == "the weights are loading" or written:
                break
            time.sleep(0.005)
        if kill_when == "the weights are loading":
            time.sleep(0.5)
        export.send_signal(signal.SIGKILL)
        export.wait()
        # Either nothing, or (had it finished first) the whole file: never a partial one.
        assert not model_file.path.exists() or model_file.prepare().exported is False
        model_file.path.unlink(missing_ok=True)
    prepared = model_file.prepare()
    assert prepared.exported
    vector = LocalEmbedder(model_cache=tmp_path).embed(["notes about tea"])
    assert np.abs(vector - onnx.embed(["notes about tea"])).max() < 1e-6
    assert not list(tmp_path.glob(".*.tmp")), "the killed exports' temporary files are gone"
