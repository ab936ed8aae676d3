"""A word as typed before the words it shares a stem with, on SQLite and PostgreSQL.

The keyword index stems (``statue`` and ``status`` are one word there); it also keeps
the words as written, so the one note holding a rare word as typed comes before the
many holding only a common word of its stem. An index written before that view existed
gains it when it is next opened, without losing a row.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memvault.config import Settings
from memvault.index.db import SCHEMA_VERSION
from memvault.runtime import Runtime
from memvault.vault.store import Vault
from support import HashEmbedder, MovableClock

pytestmark = pytest.mark.both_backends

# Many notes with the common word, one with the rare word of the same stem.
STATUS = [
    "# Build {n}\n\nThe status of build {n}: status green, status page updated, status ok.\n",
    "# Ticket {n}\n\nTicket {n} changed its status twice; the status field shows done.\n",
]
STATUE = (
    "# Park walk\n\nWe walked through the old park past the fountain and the benches, "
    "then stopped at the statue near the gate before going home for lunch.\n"
)


@pytest.fixture
def stemmed(runtime: Runtime, write: Callable[[str, str], Path]) -> Runtime:
    for n in range(12):
        write(f"Work/Status {n}.md", STATUS[n % 2].format(n=n))
    write("Journal notes/Park walk.md", STATUE)
    write("Work/Stated.md", "# Stated\n\nAs stated in the contract, the state pays.\n")
    for n in range(6):
        write(f"Work/State {n}.md", f"# State {n}\n\nThe state of item {n}: state one.\n")
    runtime.index.sync()
    runtime.index.embed_pending()
    return runtime


def first(runtime: Runtime, query: str, mode: str) -> str:
    hits = runtime.searcher.search(query, limit=10, mode=mode)
    assert hits, f"no hit for {query!r} ({mode})"
    return hits[0].path


@pytest.mark.parametrize("mode", ["hybrid", "keyword"])
def test_the_rare_word_as_typed_comes_before_its_common_stem(stemmed: Runtime, mode: str) -> None:
    assert first(stemmed, "statue", mode) == "Journal notes/Park walk.md"
    assert first(stemmed, "stated", mode) == "Work/Stated.md"
    # Whatever case, accents or punctuation it is typed with; quoted among other words.
    assert first(stemmed, "Statue?", mode) == "Journal notes/Park walk.md"
    assert first(stemmed, "the státue", mode) == "Journal notes/Park walk.md"
    assert first(stemmed, 'the "statue"', mode) == "Journal notes/Park walk.md"


def test_the_stem_still_finds_every_form(stemmed: Runtime) -> None:
    """A word typed in a form no note holds still finds its stem's notes, as before."""
    hits = stemmed.searcher.search("statues", limit=50, mode="keyword")
    paths = {h.path for h in hits}
    assert {f"Work/Status {n}.md" for n in range(12)} <= paths
    assert "Journal notes/Park walk.md" in paths  # "statue" shares the stem
    # The common word as typed: its own notes first, the rare one after them.
    ranked = [h.path for h in stemmed.searcher.search("status", limit=50, mode="keyword")]
    assert ranked.index("Journal notes/Park walk.md") >= 12


def test_the_word_as_typed_follows_edits_and_deletions(
    stemmed: Runtime, write: Callable[[str, str], Path], vault: Vault
) -> None:
    write("Journal notes/Park walk.md", STATUE.replace("statue", "sculpture"))
    stemmed.index.sync()
    assert first(stemmed, "sculpture", "keyword") == "Journal notes/Park walk.md"
    assert "Journal notes/Park walk.md" not in {
        h.path for h in stemmed.searcher.search("statue", limit=50, mode="keyword")
    }
    (vault.root / "Journal notes/Park walk.md").unlink()
    stemmed.index.sync()
    assert not stemmed.searcher.search("sculpture", limit=10, mode="keyword")


def _forget_the_exact_view(runtime: Runtime) -> None:
    """Make the index look as memvault wrote it before the exact view existed."""
    conn = runtime.index.conn
    if runtime.index.dialect == "sqlite":
        conn.execute("DROP TABLE chunks_exact")
        conn.execute("PRAGMA user_version = 4")  # the exact view came with version 5
    else:
        # The keyword postings (migration 9) came after the exact view and read it.
        conn.execute("DROP TRIGGER chunks_fts_postings ON chunks_fts")
        conn.execute("DROP TABLE chunk_words, chunk_forms")
        conn.execute(
            "DROP FUNCTION postings_changed(), postings_of(bigint, tsvector, tsvector, integer)"
        )
        conn.execute("ALTER TABLE chunks_fts DROP COLUMN own_exact, DROP COLUMN ctx_exact")
        conn.execute("DELETE FROM memvault_schema WHERE version >= 8")


def test_an_index_written_before_migrates_at_the_next_open(
    stemmed: Runtime, vault: Vault, clock: MovableClock, storage_settings: object
) -> None:
    before = stemmed.index.conn.execute("SELECT count(*) FROM chunks_fts").fetchone()[0]
    _forget_the_exact_view(stemmed)
    stemmed.close()
    reopened = Runtime.open(
        Settings(vault=vault.root, timezone="Europe/Berlin", storage=storage_settings),  # type: ignore[arg-type]
        clock=clock,
        embedder=HashEmbedder(),
    )
    try:
        conn = reopened.index.conn
        assert conn.execute("SELECT count(*) FROM chunks_fts").fetchone()[0] == before
        if reopened.index.dialect == "sqlite":
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            exact = conn.execute("SELECT count(*) FROM chunks_exact_docsize").fetchone()[0]
            assert exact == before
        # No sync: the rows were carried over by the migration itself.
        assert first(reopened, "statue", "keyword") == "Journal notes/Park walk.md"
        assert first(reopened, "stated", "hybrid") == "Work/Stated.md"
    finally:
        reopened.close()


@pytest.mark.sqlite_only  # FTS5's own tables (PostgreSQL keeps both views in one row)
def test_a_forgotten_memory_leaves_neither_keyword_table(runtime: Runtime) -> None:
    memory = runtime.memories.remember("The quolloid statue stands by the harbour").memory
    runtime.memories.remember("The status of the harbour crane is fine")
    conn = runtime.index.conn
    tables = ("chunks_fts", "chunks_exact")

    def held(table: str, word: str) -> int:
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_terms"
            f" USING fts5vocab('main', '{table}', 'row')"
        )
        row = conn.execute(f"SELECT doc FROM temp.{table}_terms WHERE term = ?", (word,))
        found = row.fetchone()
        return int(found[0]) if found else 0

    assert [held(table, "quolloid") for table in tables] == [1, 1]
    runtime.forgetter.forget(memory.id)
    assert [held(table, "quolloid") for table in tables] == [0, 0]
    assert held("chunks_exact", "statue") == 0 and held("chunks_exact", "status") == 1
    assert not runtime.searcher.search("quolloid", mode="keyword")
