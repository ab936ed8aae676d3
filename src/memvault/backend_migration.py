"""Moving a vault between storage backends: SQLite files <-> PostgreSQL.

The vault (its Markdown) is the source of truth, so the index is not copied but
rebuilt in the target from the vault, then given its vectors: a chunk whose hash (its
text and context) matches a chunk of the source index takes that chunk's vector
(same input, same embedder, same vector), and only the rest is embedded. The
operational state exists nowhere else: it is copied table by table, every column and
every id kept, in one transaction, so a failure leaves the target's state as it was.

Both sides are :class:`~memvault.runtime.Runtime` objects over the same vault, one
per backend; nothing here knows SQL beyond what both backends run. Nothing is
deleted from the source, so a migration can be repeated or undone. The verification
counts every state table and the index's rows on both sides.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from memvault.config import Settings
from memvault.errors import ConflictError, MemvaultError, StorageError
from memvault.locations import STATE_DB
from memvault.sqlite import set_meta, transaction
from memvault.storage.pg_schema import STATE_TABLES

if TYPE_CHECKING:
    from memvault.index.index import MemoryIndex
    from memvault.memory.state import StateStore
    from memvault.runtime import Runtime

log = logging.getLogger(__name__)

Backend = Literal["sqlite", "postgres"]
BACKENDS: tuple[Backend, ...] = ("sqlite", "postgres")
Progress = Callable[[int, int, str], None]

# The index's rows the verification counts ("vectors": chunks that have one).
INDEX_COUNTS: dict[str, str] = {
    "notes": "SELECT count(*) FROM notes",
    "chunks": "SELECT count(*) FROM chunks",
    "memories": "SELECT count(*) FROM memories",
    "links": "SELECT count(*) FROM links",
    "vectors": "SELECT count(*) FROM chunks WHERE embedded = 1",
}
# Vectors are copied in batches of this many chunks, each batch one transaction.
VECTOR_BATCH = 256
# State rows are inserted this many at a time (all in the one transaction).
STATE_BATCH = 500


class VerificationError(MemvaultError):
    """The target's row counts differ from the source's after a migration."""

    code = "verification_failed"
    exit_code = 1


@dataclass(frozen=True)
class TableCount:
    """One table's rows on both sides, and the count the target should hold."""

    part: Literal["state", "index"]
    table: str
    source: int
    target: int
    expected: int

    @property
    def ok(self) -> bool:
        """Whether the target holds what it should."""
        return self.target == self.expected

    def to_dict(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "table": self.table,
            "source": self.source,
            "target": self.target,
            "expected": self.expected,
            "ok": self.ok,
        }


@dataclass
class MigrationReport:
    """What a migration did and what the verification counted."""

    source: Backend
    target: Backend
    source_location: str
    target_location: str
    copied_vectors: int = 0
    embedded: int = 0
    counts: list[TableCount] = field(default_factory=list)

    @property
    def differences(self) -> list[str]:
        """The tables whose target count is not the expected one."""
        return [
            c.table if c.part == "state" else f"index {c.table}" for c in self.counts if not c.ok
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": {"backend": self.source, "location": self.source_location},
            "target": {"backend": self.target, "location": self.target_location},
            "copied_vectors": self.copied_vectors,
            "embedded": self.embedded,
            "counts": [c.to_dict() for c in self.counts],
            "ok": not self.differences,
        }


def other_backend(backend: str) -> Backend:
    """The backend a vault on ``backend`` can move to."""
    return "postgres" if backend == "sqlite" else "sqlite"


def target_settings(settings: Settings, backend: Backend) -> Settings:
    """The same settings with ``[storage] backend`` set to ``backend``."""
    storage = settings.storage.model_copy(update={"backend": backend})
    return settings.model_copy(update={"storage": storage})


def location(runtime: Runtime) -> str:
    """Where a runtime's index and state live (files, or the database without password)."""
    if runtime.storage is not None:
        return runtime.storage.describe()
    return f"{runtime.index.path} and {runtime.vault.state_dir / STATE_DB}"


def occupied(runtime: Runtime) -> list[str]:
    """The tables of a target that hold rows already: state tables (``meta`` aside, which
    a fresh state database writes itself) and the index's notes."""
    if runtime.storage is None:
        state_file = runtime.vault.state_dir / STATE_DB
        held = state_counts(runtime.state) if state_file.exists() else {}
        notes = index_counts(runtime.index)["notes"] if runtime.index.path.exists() else 0
    else:
        held = state_counts(runtime.state)
        notes = index_counts(runtime.index)["notes"]
    names = [t for t, n in held.items() if n and t != "meta"]
    return names + (["index notes"] if notes else [])


def state_counts(state: StateStore) -> dict[str, int]:
    """Rows per state table."""
    return {t: int(state.query(f"SELECT count(*) FROM {t}")[0][0]) for t in STATE_TABLES}


def index_counts(index: MemoryIndex) -> dict[str, int]:
    """Rows of the index's notes, chunks, memories, links, and chunks with a vector."""
    with index.lock:
        return {
            name: int(index.conn.execute(statement).fetchone()[0])
            for name, statement in INDEX_COUNTS.items()
        }


def migrate(
    source: Runtime,
    target: Runtime,
    *,
    replace: bool = False,
    progress: Progress | None = None,
    embed_progress: Progress | None = None,
) -> MigrationReport:
    """Rebuild the index in ``target`` from the vault, give it the source's vectors (and
    embed the rest), copy the state, then count both sides.

    A target that holds rows already is refused unless ``replace``: then its index is
    rebuilt from nothing and its state tables are emptied in the copy's transaction.
    """
    from_backend: Backend = "postgres" if source.storage is not None else "sqlite"
    to_backend: Backend = "postgres" if target.storage is not None else "sqlite"
    held = occupied(target)
    if held and not replace:
        raise ConflictError(
            f"The {to_backend} target ({location(target)}) already holds "
            f"{', '.join(held[:4])}{' and more' if len(held) > 4 else ''}; add --replace to "
            "empty it first (the source stays as it is)."
        )
    report = MigrationReport(from_backend, to_backend, location(source), location(target))
    source.index.sync()  # derived from the vault: comparable counts, reusable vectors
    if held:
        target.index.rebuild(progress)
    else:
        target.index.sync(progress)
    report.copied_vectors = copy_vectors(source.index, target.index, progress)
    report.embedded = target.index.embed_pending(progress=embed_progress)
    copy_state(source.state, target.state, postgres=target.storage is not None)
    report.counts = verify(source, target)
    log.info(
        "migrated the vault's storage",
        extra={"from": from_backend, "to": to_backend, "vectors": report.copied_vectors},
    )
    return report


def copy_vectors(source: MemoryIndex, target: MemoryIndex, progress: Progress | None) -> int:
    """Give the target's chunks without a vector the source's vector of the chunk with the
    same hash; returns how many were copied.

    Only vectors made by the configured embedder are taken (any, when none is
    configured: they are kept for when one is); the target records who made them.
    """
    built = source.built_with()
    if built is None or not index_counts(source)["vectors"]:
        return 0
    if target.embedder.enabled and built != target.embedder.identity:
        return 0
    with source.lock:
        by_hash = {
            str(r[1]): int(r[0])
            for r in source.conn.execute("SELECT id, hash FROM chunks WHERE embedded = 1")
        }
    with target.lock:
        wanted = [
            (int(r[0]), by_hash[str(r[1])])
            for r in target.conn.execute(
                "SELECT id, hash FROM chunks WHERE embedded = 0 ORDER BY id"
            )
            if str(r[1]) in by_hash
        ]
    copied = 0
    for start in range(0, len(wanted), VECTOR_BATCH):
        batch = wanted[start : start + VECTOR_BATCH]
        with source.lock:
            found = source.vectors.get([s for _, s in batch])
        pairs = [(t, found[s]) for t, s in batch if s in found]
        if pairs:
            _put_vectors(target, built, [t for t, _ in pairs], np.stack([v for _, v in pairs]))
        copied += len(pairs)
        if progress is not None:
            progress(start + len(batch), len(wanted), "vectors")
    return copied


def _put_vectors(index: MemoryIndex, built: str, ids: Sequence[int], matrix: Any) -> None:
    with index.lock, transaction(index.conn):
        if not index.vectors.exists():
            index.vectors.create(int(matrix.shape[1]))
            set_meta(index.conn, "embedder", built)
        index.vectors.put(ids, matrix.astype(np.float32))
        index.conn.executemany("UPDATE chunks SET embedded = 1 WHERE id = ?", [(i,) for i in ids])


def copy_state(source: StateStore, target: StateStore, *, postgres: bool) -> None:
    """Copy every state table, all columns and ids, in one transaction of the target (its
    tables emptied first); PostgreSQL's identity sequences are moved past the copied ids."""
    table = ""
    try:
        with target.transaction() as out:
            for table in reversed(STATE_TABLES):
                out.execute(f"DELETE FROM {table}")
            for table in STATE_TABLES:
                rows = source.query(f"SELECT * FROM {table}")
                if not rows:
                    continue
                columns = list(rows[0].keys())
                insert = (
                    f"INSERT INTO {table} ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' * len(columns))})"
                )
                for start in range(0, len(rows), STATE_BATCH):
                    out.executemany(insert, [tuple(r) for r in rows[start : start + STATE_BATCH]])
                if postgres and "id" in columns and _has_identity(out, table):
                    out.execute(
                        f"SELECT setval(pg_get_serial_sequence(?, 'id'), max(id)) FROM {table}",
                        (table,),
                    )
    except sqlite3.Error as exc:
        raise StorageError(
            f"Copying the state table {table} failed ({str(exc).rstrip('.')}); nothing of the "
            "state was written to the target."
        ) from exc


def _has_identity(conn: Any, table: str) -> bool:
    row = conn.execute("SELECT pg_get_serial_sequence(?, 'id')", (table,)).fetchone()
    return row is not None and row[0] is not None


def verify(source: Runtime, target: Runtime) -> list[TableCount]:
    """Rows per table on both sides; the target's vectors are all its chunks when an
    embedder is configured, else as many as the source's."""
    counts: list[TableCount] = []
    before, after = state_counts(source.state), state_counts(target.state)
    counts += [TableCount("state", t, before[t], after[t], before[t]) for t in STATE_TABLES]
    before, after = index_counts(source.index), index_counts(target.index)
    for name in INDEX_COUNTS:
        expected = before[name]
        if name == "vectors" and target.embedder.enabled:
            expected = after["chunks"]
        counts.append(TableCount("index", name, before[name], after[name], expected))
    return counts
