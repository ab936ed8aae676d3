"""PgStateDB's transactions against a real PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from memvault.config import StorageSettings
from memvault.storage.pg_state import PgStateDB
from memvault.storage.postgres import PostgresStorage


@pytest.fixture
def state(migrated: str) -> Iterator[PgStateDB]:
    settings = StorageSettings(backend="postgres")
    with PostgresStorage.open(settings, environ={"MEMVAULT_PG_DSN": migrated}) as storage:
        yield PgStateDB(storage)


def test_a_transaction_that_fails_keeps_none_of_its_writes(state: PgStateDB) -> None:
    # Writes first, no read before them: each once committed itself (savepoint blocks
    # psycopg opened on an idle connection), so the failure took back only the last.
    with pytest.raises(sqlite3.IntegrityError), state.transaction() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('a', '1')")
        conn.execute("INSERT INTO sessions (key, channel, started_at) VALUES ('k', 'cli', 'now')")
        conn.execute("INSERT INTO meta (key, value) VALUES ('a', '2')")  # the key is taken
    assert state.query("SELECT count(*) FROM meta")[0][0] == 0
    assert state.query("SELECT count(*) FROM sessions")[0][0] == 0


def test_a_caught_error_inside_a_transaction_leaves_the_rest_standing(state: PgStateDB) -> None:
    with state.transaction() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('a', '1')")
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("INSERT INTO meta (key, value) VALUES ('a', '2')")
        conn.execute("INSERT INTO meta (key, value) VALUES ('b', '3')")
    assert [tuple(r) for r in state.query("SELECT key, value FROM meta ORDER BY key")] == [
        ("a", "1"),
        ("b", "3"),
    ]


def test_lists_of_values_answer_as_sqlite_whatever_their_length(state: PgStateDB) -> None:
    # A list of placeholders goes as one array (one statement for any length); the answers
    # are SQLite's, with NOT IN, NULLs, a list beside other values, a '?' inside a literal
    # and a list of mixed types (sent as written).
    lite = sqlite3.connect(":memory:")
    lite.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    rows = [(f"k{i}", str(i % 3)) for i in range(8)] + [("other", "x")]
    lite.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", rows)
    with state.transaction() as conn:
        conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", rows)
    asked = [
        ("SELECT key FROM meta WHERE key IN (?) ORDER BY key", ("k1",)),
        ("SELECT key FROM meta WHERE key IN (?,?,?) ORDER BY key", ("k1", "k5", "none")),
        ("SELECT key FROM meta WHERE value NOT IN (?, ?) ORDER BY key", ("0", "1")),
        ("SELECT key FROM meta WHERE value NOT IN (?, ?) ORDER BY key", ("0", None)),
        ("SELECT key FROM meta WHERE value IN (?, ?) ORDER BY key", (None, "2")),
        (
            "SELECT key, 'IN (?)' FROM meta WHERE key >= ? AND value IN (?,?) AND key < ?"
            " ORDER BY key",
            ("k2", "1", "2", "k7"),
        ),
        ("SELECT key FROM meta WHERE length(key) IN (?, ?) ORDER BY key", (2, "7")),
    ]
    for sql, params in asked:
        expected = [tuple(r) for r in lite.execute(sql, params)]
        assert [tuple(r) for r in state.query(sql, params)] == expected, sql
        assert expected or "NOT IN (?, ?)" in sql, sql  # each asks something with an answer
