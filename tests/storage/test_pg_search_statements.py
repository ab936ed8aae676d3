"""A search on PostgreSQL: few round trips, nothing but scores over the wire, and the same
answers as SQLite's on the same vault.

Statements are counted at the driver (psycopg's cursor factory on the index's connection),
not by replacing any of memvault's own code: what is counted is what the server was asked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest

from memvault.config import Settings, StorageSettings
from memvault.index.filters import SearchFilters
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import TZ, HashEmbedder, MovableClock

# What a search may ask PostgreSQL at most, by mode, on the small vault below (with every
# stage a search has: keywords, a prefix, phrases, vectors, neighbours, the graph, digests).
# Before the keyword postings, the warm vectors, the state read once per search and the
# graph batched: 39 and 24 a search on bench/scale.py's 10k vault.
MOST_STATEMENTS = {"hybrid": 16, "keyword": 18}
QUERIES = (
    "launch window",
    "apollo",
    "Caroline hangar",
    "who prefers dawn launches",
    "capsu",  # a word being typed
    '"two-person launch capsule"',
)

NOTES = {
    "Projects/Apollo.md": "---\ntags: [project/apollo]\n---\n# Apollo\n\n"
    "The launch was in 1969. See [[Gemini]] and [[Caroline]].\n",
    "Projects/Gemini.md": "# Gemini\n\nTwo-person launch capsule. Back to [[Apollo]].\n",
    "Contacts/Caroline.md": "# Caroline\n\nRuns the hangar.\n\n## Relations\n\n"
    "- works_on [[Apollo]]\n",
    "Notes/Capsules.md": "# Capsules\n\nA capsule holds two. The capsules of Gemini flew in"
    " 1965.\n",
    "Journal/2026-11-20.md": "# Friday\n\nWatched a launch at dawn with Caroline.\n",
}
MEMORIES = (
    "Launch checklist lives in the hangar",
    "Prefers launch windows at dawn",
    "Caroline keeps the keys of the hangar",
    "The capsule smelled of burnt toast",
)


class CountingCursor(psycopg.Cursor[Any]):
    """psycopg's cursor, counting the statements it sends."""

    sent: ClassVar[list[str]] = []

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        CountingCursor.sent.append(query.decode() if isinstance(query, bytes) else str(query))
        return super().execute(query, params, **kwargs)

    def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
        CountingCursor.sent.append(query.decode() if isinstance(query, bytes) else str(query))
        super().executemany(query, params_seq, **kwargs)


def _open(root: Path, storage: StorageSettings, clock: MovableClock) -> Runtime:
    init_vault(Vault(root))
    for path, text in NOTES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    runtime = Runtime.open(
        Settings(vault=root, timezone="Europe/Berlin", storage=storage),
        clock=clock,
        embedder=HashEmbedder(),
    )
    moment = datetime(2026, 11, 20, 9, 0, tzinfo=TZ)
    for i, text in enumerate(MEMORIES):
        clock.set(moment + timedelta(minutes=i))
        runtime.memories.remember(text, source="chat:1")
    runtime.index.sync()
    runtime.index.embed_pending()
    return runtime


@pytest.fixture
def both(
    tmp_path: Path, migrated: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Runtime, Runtime]]:
    """The same vault on SQLite and on PostgreSQL, at the same moment."""
    monkeypatch.setenv("MEMVAULT_PG_DSN", migrated)
    clock = MovableClock(datetime(2026, 11, 24, 12, 0, tzinfo=TZ))
    lite = _open(tmp_path / "lite", StorageSettings(), clock)
    pg = _open(tmp_path / "pg", StorageSettings(backend="postgres"), clock)
    try:
        yield lite, pg
    finally:
        lite.close()
        pg.close()


def _answers(runtime: Runtime, query: str, **kwargs: Any) -> list[tuple[str, int, str, float]]:
    return [
        (h.path, h.start_line, h.kind, round(h.score, 6))
        for h in runtime.searcher.search(query, limit=10, **kwargs)
    ]


@pytest.mark.parametrize("mode", ["hybrid", "keyword"])
def test_a_search_is_a_few_statements_with_sqlites_answers(
    both: tuple[Runtime, Runtime], mode: str
) -> None:
    lite, pg = both
    pg.index.conn.raw.cursor_factory = CountingCursor
    for query in QUERIES:
        _answers(pg, query, mode=mode)  # the first search reads the counts it keeps
        CountingCursor.sent = []
        answers = _answers(pg, query, mode=mode)
        sent = CountingCursor.sent
        assert answers, query
        assert answers == _answers(lite, query, mode=mode), query
        assert len(sent) <= MOST_STATEMENTS[mode], (query, len(sent), sent)
        # Scores travel, never the chunks' vectors or keyword vectors.
        assert not [s for s in sent if "ts_filter" in s or "embedding FROM" in s], query
        # A list of ids is one array: the statement reads the same for any number of them.
        assert not [s for s in sent if re.search(r"IN \(%s,", s)], query


def test_filtered_searches_answer_as_sqlite(both: tuple[Runtime, Runtime]) -> None:
    lite, pg = both
    for filters in (
        SearchFilters(kinds=("memory",)),
        SearchFilters(folder="Projects"),
        SearchFilters(tags=("project",)),
    ):
        for query in QUERIES:
            assert _answers(pg, query, filters=filters) == _answers(lite, query, filters=filters)


def test_a_write_is_seen_by_the_next_search(both: tuple[Runtime, Runtime]) -> None:
    lite, pg = both
    pg.searcher.search("zeppelin", limit=5)  # counts kept, vectors warm
    for runtime in (lite, pg):
        runtime.memories.remember("The zeppelin hangar opens at noon", source="cli")
        runtime.index.embed_pending()
    assert _answers(pg, "zeppelin") == _answers(lite, "zeppelin")
    assert _answers(pg, "zeppelin")[0][0] == "Memory/Facts.md"
