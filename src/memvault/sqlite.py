"""SQLite plumbing shared by memvault's databases (the index and the state database).

Schemas are migrated by ``PRAGMA user_version``; transactions are explicit
(``BEGIN IMMEDIATE`` ... ``COMMIT``, connections in autocommit mode); small
values live in a ``meta`` table. Works with any DB-API SQLite driver (the
stdlib's, or pysqlite3 where extensions must load).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from memvault.errors import VaultError

Connection = Any  # sqlite3.Connection of whichever driver opened it

META_TABLE = """
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
)
"""


def migrate(conn: Connection, migrations: Mapping[int, str], *, newer: str) -> None:
    """Apply every migration above the database's ``user_version``, each in a transaction.

    ``newer`` is the sentence for a database written by a newer memvault.
    """
    latest = max(migrations)
    current = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if current > latest:
        raise VaultError(newer.format(version=current))
    for version in range(current + 1, latest + 1):
        with transaction(conn):
            for statement in _split(migrations[version]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")


def _split(script: str) -> list[str]:
    # The migrations hold no ';' inside statements; executescript() would commit on its own.
    return [part.strip() for part in script.split(";") if part.strip()]


@contextlib.contextmanager
def transaction(conn: Connection) -> Iterator[Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any error; nests by savepoint."""
    if conn.in_transaction:
        # SQLite resolves a repeated savepoint name to the innermost one.
        conn.execute("SAVEPOINT nested")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK TO nested")
            conn.execute("RELEASE nested")
            raise
        conn.execute("RELEASE nested")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def get_meta(conn: Connection, key: str) -> str | None:
    """One value of the ``meta`` table."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: Connection, key: str, value: str) -> None:
    """Set one value of the ``meta`` table."""
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def can_write(path: Path) -> bool:
    """Whether this process may change the database at ``path`` (a read-only vault may not).

    SQLite also writes beside the file (its -wal and -shm files), so the folder
    must be writable too. A folder not made yet counts as writable: creating
    it explains itself if it fails.
    """
    folder = path.parent
    if not folder.is_dir():
        return True
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    return not path.exists() or os.access(path, os.W_OK)


def read_only_uri(path: Path) -> str:
    """A URI that opens ``path`` for reading only, creating no -wal or -shm file beside it."""
    return f"{path.absolute().as_uri()}?mode=ro&immutable=1"


def in_memory(conn: Connection) -> bool:
    """Whether the connection's main database lives in memory (nothing it holds is saved)."""
    for row in conn.execute("PRAGMA database_list").fetchall():
        if row[1] == "main":
            return not row[2]
    return False


def quick_check(conn: Connection) -> str | None:
    """None when SQLite finds the database sound, else what it found."""
    row = conn.execute("PRAGMA quick_check").fetchone()
    verdict = str(row[0]) if row else "no answer"
    return None if verdict == "ok" else verdict
