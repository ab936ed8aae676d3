"""The operational state in PostgreSQL: what ``state.db`` holds, shared by several daemons.

It answers as :class:`memvault.memory.state.StateStore` does (``transaction``, ``query``,
``get_meta``, ``set_meta``, ``check``, ``close``) and runs the same statements (through
:class:`~memvault.storage.dialect.PgConnection`). Each transaction borrows a connection
from the pool, so threads no longer queue behind one lock: PostgreSQL's own locking
orders their writes. A transaction opened inside another on the same thread joins it
(a savepoint), as SQLite's nested transactions do.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from memvault import sqlite as sql
from memvault.storage.dialect import PgConnection, Row
from memvault.storage.postgres import PostgresStorage


class PgStateDB:
    """The state database's tables in the ``memvault_state`` schema of a PostgreSQL."""

    def __init__(self, storage: PostgresStorage) -> None:
        self.storage = storage
        self.path = storage.describe()
        self._local = threading.local()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PgConnection]:
        """A connection inside one transaction: committed at the end of the block, rolled
        back if it raises (a savepoint when the thread is in a transaction already)."""
        current: PgConnection | None = getattr(self._local, "conn", None)
        if current is not None:
            with current.raw.transaction():
                yield current
            return
        # The block is one explicit transaction: without it, a write that comes first runs
        # in a savepoint block psycopg opens and commits on its own (the connection is idle),
        # and a later failure could not take it back.
        with self.storage.connection() as raw, raw.transaction():
            conn = PgConnection(raw, savepoints=True)
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    def query(self, statement: str, params: tuple[Any, ...] = ()) -> list[Row]:
        """Rows of a read-only statement."""
        with self.transaction() as conn:
            return conn.execute(statement, params).fetchall()

    def get_meta(self, key: str) -> str | None:
        """A value of the ``meta`` table."""
        with self.transaction() as conn:
            return sql.get_meta(conn, key)

    def set_meta(self, key: str, value: str) -> None:
        """Store a value in the ``meta`` table."""
        with self.transaction() as conn:
            sql.set_meta(conn, key, value)

    def check(self) -> str | None:
        """None when the server answers (PostgreSQL checks its own pages)."""
        with self.transaction() as conn:
            conn.execute("SELECT 1")
        return None

    def close(self) -> None:
        """Nothing to release: the pool belongs to the storage (the runtime closes it)."""
