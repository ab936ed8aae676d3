"""Indexing lines appended to a memory file costs the new lines, not the file (issue 11, 11).

Work is counted, never timed: the statements the index runs (SQLite's trace)
and the texts the embedding model is asked for (a counting stand-in model).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from memvault.config import Settings
from memvault.runtime import Runtime
from memvault.vault.store import Vault
from support import TZ, HashEmbedder, MovableClock

pytestmark = pytest.mark.both_backends

SIZE = 2000


class CountingEmbedder(HashEmbedder):
    """The hashing stand-in model, keeping every text it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        return super().embed(texts)


@pytest.fixture
def counting() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def big(vault: Vault, clock: MovableClock, counting: CountingEmbedder) -> Iterator[Runtime]:
    """A runtime whose Memory/Facts.md holds SIZE memories, indexed and embedded."""
    runtime = Runtime.open(
        Settings(vault=vault.root, timezone="Europe/Berlin"), clock=clock, embedder=counting
    )
    start = datetime(2026, 1, 1, 9, 0, tzinfo=TZ)
    runtime.memories.remember_many(
        [
            (f"Seed fact {i} about apples", "fact", 0.5, (), "cli", start + timedelta(minutes=i))
            for i in range(SIZE)
        ]
    )
    runtime.index.sync()
    runtime.index.embed_pending()
    counting.texts.clear()
    yield runtime
    runtime.close()


def _statements(runtime: Runtime) -> list[str]:
    seen: list[str] = []
    runtime.index.conn.set_trace_callback(seen.append)
    return seen


def _memories_indexed(runtime: Runtime) -> int:
    return int(runtime.index.conn.execute("SELECT count(*) FROM memories").fetchone()[0])


def test_remember_indexes_and_embeds_only_the_new_bullet(
    big: Runtime, counting: CountingEmbedder
) -> None:
    statements = _statements(big)
    stored = big.memories.remember("A brand new fact about pears").memory
    assert len(statements) < 40, "the file's other bullets were not touched"
    assert big.index.embed_pending() == 1
    assert counting.texts == ["A brand new fact about pears"]
    assert _memories_indexed(big) == SIZE + 1
    hits = big.searcher.search("pears", mode="keyword")
    assert [h.id for h in hits] == [stored.id]


def test_a_bullet_typed_by_hand_is_indexed_on_its_own(
    big: Runtime, counting: CountingEmbedder
) -> None:
    path = big.vault.root / "Memory/Facts.md"
    with open(path, "a") as handle:
        handle.write("- Typed by hand about quinces in the [[Orchard]] #garden\n")
    statements = _statements(big)
    report = big.index.sync_paths(["Memory/Facts.md"])  # what the watcher does
    assert report.changed == ["Memory/Facts.md"]
    assert len(statements) < 40
    assert big.index.embed_pending() == 1
    assert counting.texts == ["Typed by hand about quinces in the [[Orchard]]"]
    assert [h.path for h in big.searcher.search("quinces", mode="keyword")] == ["Memory/Facts.md"]
    # The appended line's link and tag are the note's too.
    link = big.index.conn.execute(
        "SELECT l.line FROM links l JOIN notes n ON n.id = l.note_id"
        " WHERE n.path = 'Memory/Facts.md' AND l.target = 'Orchard'"
    ).fetchone()
    assert link is not None and link["line"] == len(path.read_text().splitlines())
    tags = big.index.conn.execute(
        "SELECT tags FROM notes WHERE path = 'Memory/Facts.md'"
    ).fetchone()["tags"]
    assert "garden" in tags
    assert big.index.sync().touched == 0  # and the index agrees with the file


def test_a_hand_edit_above_an_append_is_not_missed(big: Runtime) -> None:
    path = big.vault.root / "Memory/Facts.md"
    path.write_text(path.read_text().replace("Seed fact 7 about apples", "Seed fact 7 about plums"))
    big.memories.remember("Appended after the edit")  # before any watcher saw the edit
    assert [h.snippet for h in big.searcher.search("plums", mode="keyword")] == [
        "Seed fact 7 about plums"
    ]
    big.index.sync()
    assert [h.snippet for h in big.searcher.search("plums", mode="keyword")] == [
        "Seed fact 7 about plums"
    ]
    assert _memories_indexed(big) == SIZE + 1


def test_a_linked_memory_is_in_the_link_graph(vault: Vault, runtime: Runtime) -> None:
    runtime.index.sync()
    runtime.memories.remember("Met [[Ada Lovelace]] at the workshop")
    runtime.memories.remember("Ada wrote the first program, see [[Notes/Engine]]")
    rows = runtime.index.conn.execute(
        "SELECT l.target FROM links l JOIN notes n ON n.id = l.note_id"
        " WHERE n.path = 'Memory/Facts.md' ORDER BY l.line"
    ).fetchall()
    assert [r["target"] for r in rows] == ["Ada Lovelace", "Notes/Engine"]
    assert isinstance(vault.root, Path)
