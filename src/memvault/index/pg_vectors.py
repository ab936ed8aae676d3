"""Chunk vectors on PostgreSQL: a pgvector table searched through an HNSW index.

The same interface and answers as :class:`memvault.index.vectors.VectorStore`
(cosines, best first), over ``chunk_vectors(rowid, embedding vector(dim))`` in
the index's schema, made by :meth:`PgVectorStore.create` with an HNSW index
(``vector_cosine_ops``). The server holds the vectors, so there is no warm
copy to keep in this process: ``warm`` does nothing.

- A search of the whole table goes through the HNSW index with ``ef_search``
  raised well above ``k`` (``SET LOCAL``, for that statement's transaction),
  so that the ``k`` found are the exact ``k`` nearest for practical purposes.
- A search over given ids (a filter) is exact: the distances of those rows
  only, sorted; so is a search for more than 500 (the index returns at most
  ``ef_search`` rows, 1,000 at most).
- Vectors of more than 2,000 dimensions (pgvector's limit for an HNSW index
  on ``vector``) are stored and searched exactly, without an index.
- *Warm*, as SQLite's store: once :meth:`PgVectorStore.warm` ran (a process that
  searches often; on its own for an index of up to ``WARM_THRESHOLD`` vectors), the
  vectors are also held here in one NumPy matrix and searched exactly with one matrix
  product, with SQLite's own arithmetic (the same cosines, the same order). A search
  first reads ``vector_version`` and the table's existence (one statement, kept for
  the rest of a search that :meth:`PgVectorStore.pinned` holds); another process's
  write makes the copy load again, this process's writes update it in place.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from pgvector import Vector
from pgvector.psycopg import register_vector

from memvault.index.embedders import Vectors
from memvault.index.read_once import ReadOnce
from memvault.index.vectors import (
    SAMPLE_SIZE,
    WARM_THRESHOLD,
    WarmMatrix,
    cosine_spread,
    next_vector_version,
)
from memvault.sqlite import get_meta, set_meta
from memvault.storage.dialect import PgConnection

TABLE = "chunk_vectors"
HNSW_MAX_DIMENSIONS = 2000
# ef_search for a search of k: this many times k, at least _EF_MIN, at most pgvector's
# ceiling. A search for more than the ceiling allows (the index returns at most ef_search
# rows) is an exact scan.
_EF_FACTOR = 4
_EF_MIN = 100
_EF_MAX = 1000
_EXACT_ABOVE = _EF_MAX // 2


class PgVectorStore:
    """The vectors of one PostgreSQL index (``conn``'s ``search_path`` on its schema)."""

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn
        self._lock = threading.RLock()
        self._sample: Vectors | None = None
        self._sample_of = 0
        self._sample_version: str | None = None  # ``vector_version`` when last counted
        self._registered = False
        self.keep_warm = False  # hold every vector here (else: once warmed, or a small index)
        self._warm: WarmMatrix | None = None
        self._state_read: ReadOnce[tuple[str | None, bool]] = ReadOnce()  # (version, exists)
        self._counted: tuple[str | None, int] | None = None  # (vector_version, count)

    def _register(self) -> None:
        """Read and write ``vector`` columns as numpy arrays (pgvector's adapter)."""
        if not self._registered:
            register_vector(self.conn.raw)
            self._registered = True

    # -- schema ----------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the vector table has been created."""
        return self._state()[1]

    def _state(self) -> tuple[str | None, bool]:
        """``vector_version`` and whether the table exists: one statement (none while a
        search holds :meth:`pinned` and read them already)."""
        return self._state_read.get(self._read_state)

    def _read_state(self) -> tuple[str | None, bool]:
        row = self.conn.execute(
            "SELECT (SELECT value FROM meta WHERE key = 'vector_version'),"
            f" to_regclass('{TABLE}') IS NOT NULL"
        ).fetchone()
        return (None if row is None or row[0] is None else str(row[0]), bool(row and row[1]))

    def pinned(self) -> contextlib.AbstractContextManager[None]:
        """Within the block (one search), the version and the table's existence are read
        once: what a search reads is one state of the index (its writes take the lock)."""
        return self._state_read.pinned()

    def dimension(self) -> int | None:
        """The vector size of the table, or None before the first vector."""
        value = get_meta(self.conn, "vector_dim")
        return int(value) if value else None

    def create(self, dim: int) -> None:
        """Create the table for ``dim``-dimensional vectors (caller holds a transaction)."""
        dim = int(dim)
        self.conn.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE}"
            f" (rowid bigint PRIMARY KEY, embedding vector({dim}) NOT NULL)"
        )
        if dim <= HNSW_MAX_DIMENSIONS:
            self.conn.execute(
                f"CREATE INDEX IF NOT EXISTS {TABLE}_hnsw ON {TABLE}"
                " USING hnsw (embedding vector_cosine_ops)"
            )
        set_meta(self.conn, "vector_dim", str(dim))
        self._bump()

    def drop(self) -> None:
        """Remove every vector (caller holds a transaction)."""
        self.conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        self.conn.execute("DELETE FROM meta WHERE key = 'vector_dim'")
        self._bump()
        with self._lock:
            self._sample = None
            self._sample_version = None
            self._warm = None

    def count(self) -> int:
        """How many vectors are stored (counted again after a write)."""
        version, exists = self._state()
        if not exists:
            return 0
        if self._counted is None or self._counted[0] != version:
            row = self.conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
            self._counted = (version, int(row[0]) if row else 0)
        return self._counted[1]

    # -- writing (callers hold a transaction) ----------------------------------

    def _bump(self) -> None:
        before, version = next_vector_version(self.conn)
        self._state_read.forget()
        with self._lock:
            if self._warm is not None:
                self._warm.follow(before, version)

    def put(self, ids: Sequence[int], matrix: Vectors) -> None:
        """Store (or replace) the vectors of ``ids``."""
        if not len(ids):
            return
        self._register()
        rows = [
            (int(i), np.ascontiguousarray(v, dtype=np.float32))
            for i, v in zip(ids, matrix, strict=True)
        ]
        with self.conn.raw.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {TABLE} (rowid, embedding) VALUES (%s, %s)"
                " ON CONFLICT (rowid) DO UPDATE SET embedding = EXCLUDED.embedding",
                rows,
            )
        self._bump()
        with self._lock:
            if self._warm is not None:
                self._warm.put([r[0] for r in rows], [r[1] for r in rows])

    def delete(self, ids: Iterable[int]) -> None:
        """Forget the vectors of ``ids`` (missing ones are ignored)."""
        keys = [int(i) for i in ids]
        if not keys or not self.exists():
            return
        self.conn.raw.execute(f"DELETE FROM {TABLE} WHERE rowid = ANY(%s::bigint[])", (keys,))
        self._bump()
        with self._lock:
            if self._warm is not None:
                self._warm.delete(keys)

    # -- reading ----------------------------------------------------------------

    def get(self, ids: Sequence[int]) -> dict[int, npt.NDArray[np.float32]]:
        """The stored vectors of ``ids`` (absent ones are left out)."""
        if not len(ids) or not self.exists():
            return {}
        warm = self._fresh_copy()
        if warm is not None:
            return warm.get(ids)
        self._register()
        rows = self.conn.raw.execute(
            f"SELECT rowid, embedding FROM {TABLE} WHERE rowid = ANY(%s::bigint[])",
            ([int(i) for i in ids],),
            binary=True,  # read as bytes, not parsed from text
        ).fetchall()
        return {int(r[0]): _array(r[1]) for r in rows}

    def search(
        self, query: npt.NDArray[np.float32], k: int, allowed: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` chunks most similar to ``query``: ``(chunk id, cosine)``, best first.

        ``allowed`` restricts the search to those chunk ids (a filter), exactly.
        """
        if k <= 0 or (allowed is not None and not len(allowed)) or not self.exists():
            return []
        warm = self._fresh_copy()
        if warm is None and (self.keep_warm or self.count() <= WARM_THRESHOLD):
            self.warm()
            warm = self._fresh_copy()
        if warm is not None:
            return warm.search(query, k, allowed)
        self._register()
        vector = np.ascontiguousarray(query, dtype=np.float32)
        if allowed is not None or k > _EXACT_ABOVE:
            # Materialised: the distances of these rows, never an index scan that would
            # filter (or cut short) an approximate list.
            among = "" if allowed is None else " WHERE rowid = ANY(%s::bigint[])"
            params: tuple[object, ...] = (
                (vector,)
                if allowed is None
                else (
                    vector,
                    [int(i) for i in allowed],
                )
            )
            rows = self.conn.raw.execute(
                "WITH d AS MATERIALIZED (SELECT rowid, embedding <=> %s AS distance"
                f" FROM {TABLE}{among})"
                " SELECT rowid, distance FROM d ORDER BY distance, rowid LIMIT %s",
                (*params, int(k)),
            ).fetchall()
        else:
            ef = min(_EF_MAX, max(_EF_MIN, _EF_FACTOR * int(k)))
            with self.conn.raw.transaction():
                self.conn.raw.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                rows = self.conn.raw.execute(
                    f"SELECT rowid, embedding <=> %s AS distance FROM {TABLE}"
                    " ORDER BY embedding <=> %s LIMIT %s",
                    (vector, vector, int(k)),
                ).fetchall()
        return [(int(r[0]), 1.0 - float(r[1])) for r in rows]

    def begin(self, query: npt.NDArray[np.float32]) -> None:
        """Start ``query``'s product with a large warm copy now, so it runs while the
        keyword search does (see :meth:`WarmMatrix.begin`); nothing without one."""
        warm = self._fresh_copy()
        if warm is not None:
            warm.begin(query)

    def spread(self, query: npt.NDArray[np.float32]) -> tuple[float, float]:
        """Centre and spread of the query's cosines with the stored vectors.

        As :meth:`VectorStore.spread`: median and interquartile range (scaled
        to a standard deviation) over an evenly spaced sample.
        """
        return cosine_spread(self._spread_sample(), query)

    def _spread_sample(self) -> Vectors:
        """Every ``count // SAMPLE_SIZE``-th vector by id, taken again when the number of
        vectors moved by a tenth (counted only after a write: counting takes longer than
        the search it serves)."""
        with self._lock:
            version = self._state()[0]
            if self._sample is not None and version == self._sample_version:
                return self._sample
            warm = self._fresh_copy()
            if warm is not None:  # as SQLite's warm store takes it: no statement
                count = warm.count()
                self._sample_version = version
                if self._sample is None or abs(count - self._sample_of) > count // 10:
                    self._sample = warm.sample(max(1, count // SAMPLE_SIZE), SAMPLE_SIZE)
                    self._sample_of = count
                return self._sample
            count = self.count()
            self._sample_version = version
            if self._sample is not None and abs(count - self._sample_of) <= count // 10:
                return self._sample
            step = max(1, count // SAMPLE_SIZE)
            self._register()
            rows = (
                self.conn.raw.execute(
                    f"SELECT embedding FROM (SELECT embedding, row_number() OVER"
                    f" (ORDER BY rowid) - 1 AS n FROM {TABLE}) s"
                    " WHERE s.n %% %s = 0 ORDER BY s.n LIMIT %s",
                    (step, SAMPLE_SIZE),
                    binary=True,
                ).fetchall()
                if count
                else []
            )
            sample = (
                np.stack([_array(r[0]) for r in rows])
                if rows
                else np.zeros((0, 0), dtype=np.float32)
            )
            self._sample = sample
            self._sample_of = count
            return sample

    def warm(self) -> None:
        """Load every vector into memory (again, if another process changed them)."""
        if self._fresh_copy() is not None:
            return
        with self._lock:
            version, exists = self._state()
            self._register()
            rows = (
                self.conn.raw.execute(
                    f"SELECT rowid, embedding FROM {TABLE} ORDER BY rowid", binary=True
                ).fetchall()
                if exists
                else []
            )
            dim = self.dimension() or 0
            matrix = (
                np.stack([_array(r[1]) for r in rows]).reshape(len(rows), dim)
                if rows
                else np.zeros((0, dim), dtype=np.float32)
            )
            self._warm = WarmMatrix([int(r[0]) for r in rows], matrix, version)

    def _fresh_copy(self) -> WarmMatrix | None:
        """The warm copy, if it holds what the table holds now."""
        with self._lock:
            warm = self._warm
        if warm is None or warm.version != self._state()[0]:
            return None
        return warm


def _array(value: Any) -> npt.NDArray[np.float32]:
    """A stored vector as float32 (pgvector's adapter reads a ``Vector`` or an array)."""
    if isinstance(value, Vector):
        return np.asarray(value.to_numpy(), dtype=np.float32)
    return np.asarray(value, dtype=np.float32)
