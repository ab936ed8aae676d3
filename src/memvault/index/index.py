"""The index over a vault: notes, chunks, links, memories, keywords and vectors.

The vault is the truth; this is a cache of it that can be deleted and
rebuilt with nothing lost. It is kept current three ways: ``sync`` compares
the vault with the database by modification time and size (a no-op sync
reads no file) and by content hash (a moved note keeps its chunks and
vectors); every write memvault makes goes through the vault's change hook
(:meth:`MemoryIndex.on_change`); and ``memvault watch`` / the daemon follow
edits made in Obsidian.

Keyword rows are written at once; vectors are computed later in batches
(:meth:`MemoryIndex.embed_pending`), so a write never waits for a model.

:class:`MemoryIndex` is one class a concern, each in a module of its own and each built
on the one below: ``connection`` (the database on either engine, its lock, its vector
store), ``rows`` (one note's rows), ``appending`` (lines appended to a memory file) and
``sync`` (the index held to the vault); beside them ``embedding`` (the vectors). This
module adds the index's health (``check``, ``status``), and the names the rest of
memvault imports from here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memvault.clock import Clock
from memvault.config import IndexSettings, SearchSettings
from memvault.index import db as dbmod
from memvault.index.connection import INDEX_FILE, locked
from memvault.index.embedders import Embedder
from memvault.index.embedding import MODEL_LOADING, Embeddings, IndexMismatchError
from memvault.index.sync import SyncReport, VaultSync
from memvault.sqlite import quick_check
from memvault.vault.memories import Memories
from memvault.vault.store import Vault

if TYPE_CHECKING:
    from memvault.storage.postgres import PostgresStorage

__all__ = ["MODEL_LOADING", "IndexMismatchError", "IndexStatus", "MemoryIndex", "SyncReport"]


@dataclass
class IndexStatus:
    """How big and how current the index is."""

    path: str
    notes: int
    chunks: int
    memories: int
    links: int
    pending: int
    embedder: str
    built_with: str | None
    dimension: int | None
    mismatch: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


class MemoryIndex(VaultSync, Embeddings):
    """The derived SQLite index of one vault."""

    def __init__(
        self,
        vault: Vault,
        memories: Memories,
        embedder: Embedder,
        clock: Clock,
        *,
        settings: IndexSettings | None = None,
        search: SearchSettings | None = None,
        path: Path | None = None,
        storage: PostgresStorage | None = None,
    ) -> None:
        self.vault = vault
        self.memories = memories
        self.embedder = embedder
        self.clock = clock
        self.settings = settings or IndexSettings()
        self.search_settings = search or SearchSettings()
        self.path = path or vault.state_dir / INDEX_FILE
        # PostgreSQL (``[storage] backend = "postgres"``) instead of the file at ``path``.
        self.storage = storage
        self.dialect = "sqlite" if storage is None else "postgres"
        self._conn = None
        self._vectors = None
        self._links = None
        self._links_version = None
        # The connection is shared by every thread of a process (a watcher, request
        # handlers); its transactions must not interleave.
        self.lock = threading.RLock()
        self._warm_lock = threading.Lock()
        self._warming = None
        # The last query embedded: the context builder searches twice with one request.
        self._last_query = None
        # The memory files last indexed by appending, their bytes kept (_append_memories).
        self._appended = {}
        # Files named .md the last syncs could not index, and why (doctor reports them).
        self.unreadable = {}

    # -- status -------------------------------------------------------------------------

    def check(self) -> str | None:
        """None when SQLite finds the index database sound, else what it found.

        On a connection of its own (read-only), so a long check on a large index
        does not hold up searches and writes on the shared one.
        """
        if self.storage is not None or not self.path.exists():
            return None  # PostgreSQL checks its own pages
        checker = dbmod.sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True, timeout=30.0)
        try:
            return quick_check(checker)
        finally:
            checker.close()

    @locked
    def status(self) -> IndexStatus:
        """Counts, pending embeddings and the embedder bookkeeping."""

        def count(sql: str) -> int:
            return int(self.conn.execute(sql).fetchone()[0])

        return IndexStatus(
            path=self.location,
            notes=count("SELECT count(*) FROM notes"),
            chunks=count("SELECT count(*) FROM chunks"),
            memories=count("SELECT count(*) FROM memories"),
            links=count("SELECT count(*) FROM links"),
            pending=self.pending() if self.embedder.enabled else 0,
            embedder=self.embedder.identity,
            built_with=self.built_with(),
            dimension=self.vectors.dimension(),
            mismatch=self.mismatch(),
        )
