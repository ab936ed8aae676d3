"""Hybrid search with the real local embedding model (loaded once for the module)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from memvault.config import Settings
from memvault.index.embedders import LocalEmbedder
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import TZ, MovableClock

pytestmark = pytest.mark.both_backends

RELEVANT_BY_MEANING = "The owner drinks oolong every morning before work"
RELEVANT_BY_KEYWORD = "Garage door code is XK-4471"
DISTRACTORS = [
    "Breakfast is usually porridge with berries",
    "Chamomile before bed helps the owner sleep",
    "Matcha lattes are a weekend treat",
    "Earl Grey with milk is the afternoon ritual",
    "Green sencha leaves are kept in the blue tin",
    "The owner walks the dog at seven",
    "Lunch is a salad from the deli downstairs",
    "Evening runs happen on Tuesdays",
    "Weekend mornings start slowly with the newspaper",
]
QUERY = "tea habits and the XK-4471 code"


@pytest.fixture(scope="module")
def semantic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    root: Path = tmp_path_factory.mktemp("semantic") / "vault"
    init_vault(Vault(root))
    runtime = Runtime.open(
        Settings(vault=root),
        clock=MovableClock(datetime(2026, 11, 22, 9, 0, tzinfo=TZ)),
        embedder=LocalEmbedder(),
    )
    for text in [RELEVANT_BY_MEANING, RELEVANT_BY_KEYWORD, *DISTRACTORS]:
        runtime.memories.remember(text)
    runtime.index.sync()
    runtime.index.embed_pending()
    yield runtime
    runtime.close()


def _top(runtime: Runtime, k: int, *, semantic: bool) -> list[str]:
    return [
        h.snippet
        for h in runtime.searcher.search(QUERY, limit=k, mode="hybrid" if semantic else "keyword")
    ]


def test_keyword_only_and_vector_only_each_miss_what_hybrid_finds(semantic: Runtime) -> None:
    keyword = _top(semantic, 2, semantic=False)
    assert RELEVANT_BY_KEYWORD in keyword and RELEVANT_BY_MEANING not in keyword
    query_vector = semantic.embedder.embed([QUERY])[0]
    ids = [chunk_id for chunk_id, _ in semantic.index.vectors.search(query_vector, 2)]
    texts = [
        str(semantic.index.conn.execute("SELECT text FROM chunks WHERE id = ?", (i,)).fetchone()[0])
        for i in ids
    ]
    assert RELEVANT_BY_MEANING in texts and RELEVANT_BY_KEYWORD not in texts
    assert set(_top(semantic, 2, semantic=True)) == {RELEVANT_BY_MEANING, RELEVANT_BY_KEYWORD}


def test_meaning_finds_what_shares_no_word(semantic: Runtime) -> None:
    hits = semantic.searcher.search("what does the owner like to drink", limit=3)
    assert hits[0].snippet == RELEVANT_BY_MEANING
    assert hits[0].vector_score > 0.3
    assert semantic.index.status().pending == 0


def test_local_model_runs_offline_and_is_recorded(semantic: Runtime) -> None:
    import os

    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert semantic.index.built_with() == "local:all-MiniLM-L6-v2"
    assert semantic.index.vectors.dimension() == 384
