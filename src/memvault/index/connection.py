"""The index's database on either engine, and what every part of the index shares.

:class:`IndexConnection` is the ground floor of :class:`~memvault.index.index.MemoryIndex`:
where the index lives (a SQLite file, or PostgreSQL), its connection (opened and migrated
on first use; with PostgreSQL, opened again after the server dropped it), the vector
store on that engine, and the lock every thread takes (:func:`locked` takes it for a
method). The index's concerns build on it: ``rows`` writes one note's rows,
``appending`` indexes lines appended to a memory file, ``sync`` holds the index to the
vault, ``embedding`` computes the vectors.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from memvault.clock import Clock
from memvault.config import IndexSettings, SearchSettings
from memvault.index import db as dbmod
from memvault.index.db import Connection
from memvault.index.embedders import Embedder
from memvault.index.vectors import VectorStore
from memvault.sqlite import in_memory
from memvault.vault.links import LinkResolver
from memvault.vault.memories import Memories
from memvault.vault.store import Vault

if TYPE_CHECKING:
    from memvault.index.pg_vectors import PgVectorStore
    from memvault.storage.postgres import PostgresStorage

INDEX_FILE = "index.db"
Progress = Callable[[int, int, str], None]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="IndexConnection")


def locked(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], R]:
    """Run a method (or a function taking the index first) holding the index's lock."""

    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.lock:
            return method(self, *args, **kwargs)

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class IndexConnection:
    """The database of one index, its lock and its vector store.

    What is declared here, :class:`~memvault.index.index.MemoryIndex`'s constructor sets.
    """

    vault: Vault
    memories: Memories
    embedder: Embedder
    clock: Clock
    settings: IndexSettings
    search_settings: SearchSettings
    path: Path
    storage: PostgresStorage | None
    dialect: str
    lock: threading.RLock
    _conn: Connection | None
    _vectors: VectorStore | PgVectorStore | None
    # The link resolver (``NoteRows.resolver``): made again once the connection closed.
    _links: LinkResolver | None

    # -- connection ----------------------------------------------------------------

    @property
    def conn(self) -> Connection:
        """The open database connection (opened, and migrated, on first use; with
        PostgreSQL, opened again after the server dropped it)."""
        if self._conn is not None and self.storage is not None and self._conn.closed:
            with self.lock:
                self._conn, self._vectors = None, None
        if self._conn is None:
            with self.lock:
                if self._conn is None:
                    self.vault.require()
                    if self.storage is not None:
                        self._conn = self.storage.index_connection()
                    else:
                        self._conn = dbmod.connect(self.path)
        return self._conn

    @property
    def vectors(self) -> VectorStore | PgVectorStore:
        """The vector table of this index."""
        if self._vectors is None:
            if self.storage is not None:
                from memvault.index.pg_vectors import PgVectorStore

                self._vectors = PgVectorStore(self.conn)
            else:
                self._vectors = VectorStore(self.conn)
        return self._vectors

    @property
    def location(self) -> str:
        """Where the index lives: its file, or the PostgreSQL database (no password)."""
        return str(self.path) if self.storage is None else self.storage.describe()

    def exists(self) -> bool:
        """Whether an index database is on disk (PostgreSQL's always exists)."""
        return self.storage is not None or self.path.exists()

    @property
    def in_memory(self) -> bool:
        """True when the index could not be written (a read-only vault): a copy in memory
        answers, and nothing it learns is saved."""
        return self.storage is None and in_memory(self.conn)

    def close(self) -> None:
        """Close the database connection, once no thread is inside the index (a write
        still running at shutdown finishes first: closing SQLite under a running
        statement crashes the process)."""
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                self._vectors = None
                self._links = None
