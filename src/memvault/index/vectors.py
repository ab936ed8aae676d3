"""Chunk vectors: stored in a sqlite-vec table, searched exactly.

Vectors live in ``chunk_vectors``, a sqlite-vec ``vec0`` table keyed by
chunk id. Searching has two exact paths that give the same answer:

- *cold*: sqlite-vec's own k-nearest-neighbour scan, for a process that
  searches once over a large index (nothing to load);
- *warm*: the vectors held in one NumPy matrix, scanned with a single
  matrix product (about ten times faster at 100k chunks), for processes that
  search often, such as the daemon, or any index small enough to load in a
  few milliseconds.

A counter in ``meta`` changes with every write, so a warm copy notices
writes made by another process and reloads. A large warm copy computes a query's
product on a worker thread while the keyword search runs (:meth:`WarmMatrix.begin`):
SQLite, PostgreSQL's socket and NumPy all let go of the GIL, so on two cores the two
overlap (a hybrid search at 100k chunks: 43.9 ms p50 one after the other, 28.6 ms side by side).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

from memvault.index.db import Connection
from memvault.index.embedders import Vectors
from memvault.sqlite import get_meta, set_meta

if TYPE_CHECKING:
    from memvault.storage.dialect import PgConnection

TABLE = "chunk_vectors"
# Below this many vectors, loading them all costs less than one sqlite-vec scan.
WARM_THRESHOLD = 20_000
# The spread of a query's cosines is measured on this many vectors, spaced evenly.
SAMPLE_SIZE = 2048
# From this many vectors, a search's product starts on a worker thread (see WarmMatrix.begin):
# 1.5 ms less a hybrid search at 10k, 22 ms at 100k; below, the hand-over is most of it.
AHEAD_ROWS = 5_000
# With fewer vectors than this, the spread is a prior: a sentence model's cosines with
# unrelated text (mean 0.1, standard deviation 0.1).
_FEW = 16
PRIOR_SPREAD = (0.1, 0.1)


def cosine_spread(sample: Vectors, query: npt.NDArray[np.float32]) -> tuple[float, float]:
    """Median and interquartile range (scaled to a standard deviation) of the query's
    cosines with a sample of stored vectors; a prior when the sample is too small."""
    if len(sample) < _FEW:
        return PRIOR_SPREAD
    cosines = _product(sample, np.asarray(query, dtype=np.float32))
    low, centre, high = np.percentile(cosines, [25, 50, 75])
    return float(centre), max(float(high - low) / 1.349, 1e-3)


@functools.cache
def _blas() -> ThreadpoolController:
    """The BLAS libraries NumPy loaded, found once (a scan of a few milliseconds)."""
    return ThreadpoolController()


# BLAS's thread count is the process's: one product at a time sets and restores it.
_one_product = threading.Lock()


def _product(matrix: Vectors, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """``matrix @ query`` on one BLAS thread. The product is bound by memory, not by
    arithmetic; OpenBLAS splits it over every core anyway, and on a busy machine its
    threads wait for each other: 53 ms against 1.4 ms p50 at 10k x 384 on two loaded
    cores. Limiting costs about 0.04 ms a call."""
    with _one_product, _blas().limit(limits=1, user_api="blas"):
        return matrix @ query


@functools.cache
def _worker() -> ThreadPoolExecutor:
    """The thread a large product runs on beside the keyword search (one: products are
    bound by memory, two at once only share it)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="memvault-vectors")


def next_vector_version(conn: Connection | PgConnection) -> tuple[str | None, str]:
    """Count one more write to the vectors in ``meta``: ``(before, after)``, for the warm
    copy to :meth:`WarmMatrix.follow`."""
    before = get_meta(conn, "vector_version")
    after = str(int(before or "0") + 1)
    set_meta(conn, "vector_version", after)
    return before, after


class WarmMatrix:
    """Every vector of a store in one NumPy matrix, searched with one product: the warm
    path of both stores (SQLite's and PostgreSQL's), so both give the same cosines in the
    same order. ``version`` is the store's ``vector_version`` the matrix holds."""

    def __init__(self, ids: Sequence[int], matrix: Vectors, version: str | None) -> None:
        self.version = version
        self.ids = np.asarray(ids, dtype=np.int64)
        self.matrix = matrix
        self.alive = np.ones(len(self.ids), dtype=bool)
        self.row_of = {int(chunk_id): row for row, chunk_id in enumerate(ids)}
        # The last query begun (see begin) or searched, and its product with every row.
        self._ahead: tuple[npt.NDArray[np.float32], Future[npt.NDArray[np.float32]]] | None = None

    def begin(self, query: npt.NDArray[np.float32]) -> None:
        """Start ``query``'s product with every row on the worker thread, if there are
        many rows; :meth:`search` of that same array then takes it. The caller keeps
        writers out until its search is done (the index lock)."""
        if len(self.ids) >= AHEAD_ROWS:
            vector = np.asarray(query, dtype=np.float32)
            self._ahead = (query, _worker().submit(_product, self.matrix, vector))

    def _scores(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """``query``'s cosine with every row: begun already, or computed now and kept for
        the search's next look (a filter's deeper one)."""
        ahead = self._ahead
        if ahead is not None and ahead[0] is query:
            return ahead[1].result()
        scores = _product(self.matrix, np.asarray(query, dtype=np.float32))
        done: Future[npt.NDArray[np.float32]] = Future()
        done.set_result(scores)
        self._ahead = (query, done)
        return scores

    def count(self) -> int:
        return int(self.alive.sum())

    def follow(self, before: str | None, after: str) -> None:
        """A write moved the store from ``before`` to ``after``: a copy that held the table
        before holds it after (the writer updates its rows too); one that another process's
        write had outdated stays outdated, so the next search reads the table again."""
        if self.version == before:
            self.version = after

    def sample(self, step: int, size: int) -> Vectors:
        """Every ``step``-th live vector, at most ``size`` of them."""
        return self.matrix[np.flatnonzero(self.alive)[::step][:size]].copy()

    def get(self, ids: Sequence[int]) -> dict[int, npt.NDArray[np.float32]]:
        return {int(i): self.matrix[self.row_of[int(i)]] for i in ids if int(i) in self.row_of}

    def put(self, ids: Sequence[int], vectors: Vectors | Sequence[npt.NDArray[np.float32]]) -> None:
        """Replace the rows of known ids; append the others (a matrix or a list of rows)."""
        self._ahead = None
        new_ids: list[int] = []
        new_rows = []
        for chunk_id, vector in zip(ids, vectors, strict=True):
            row = self.row_of.get(int(chunk_id))
            if row is not None:
                self.matrix[row] = vector
            else:
                new_ids.append(int(chunk_id))
                new_rows.append(vector)
        if new_ids:
            start = len(self.ids)
            block = np.asarray(new_rows, dtype=np.float32).reshape(len(new_ids), -1)
            self.matrix = block if start == 0 else np.vstack([self.matrix, block])
            self.ids = np.concatenate([self.ids, np.asarray(new_ids, dtype=np.int64)])
            self.alive = np.concatenate([self.alive, np.ones(len(new_ids), dtype=bool)])
            for offset, chunk_id in enumerate(new_ids):
                self.row_of[chunk_id] = start + offset

    def delete(self, ids: Sequence[int]) -> None:
        """Mark rows dead; compact once more than a quarter are."""
        self._ahead = None
        for chunk_id in ids:
            row = self.row_of.pop(int(chunk_id), None)
            if row is not None:
                self.alive[row] = False
        dead = int((~self.alive).sum())
        if dead and dead > len(self.alive) // 4:
            keep = self.alive
            self.ids, self.matrix = self.ids[keep], self.matrix[keep]
            self.alive = np.ones(len(self.ids), dtype=bool)
            self.row_of = {int(c): r for r, c in enumerate(self.ids)}

    def search(
        self, query: npt.NDArray[np.float32], k: int, allowed: Sequence[int] | None
    ) -> list[tuple[int, float]]:
        """The ``k`` best ``(chunk id, cosine)``, among ``allowed`` when given."""
        if not len(self.ids):
            return []
        scores = self._scores(query)
        mask = self.alive
        if allowed is not None:
            mask = mask & np.isin(self.ids, np.asarray(list(allowed), dtype=np.int64))
        scores = np.where(mask, scores, -np.inf)
        k = min(k, int(mask.sum()))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return [(int(self.ids[i]), float(scores[i])) for i in top]


class VectorStore:
    """The vectors of one index database."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._lock = threading.RLock()
        self._warm: WarmMatrix | None = None  # every vector, once warmed
        self._sample: Vectors | None = None
        self._sample_of = 0
        self.keep_warm = False

    # -- schema ----------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the vector table has been created."""
        row = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)
        ).fetchone()
        return row is not None

    def dimension(self) -> int | None:
        """The vector size of the table, or None before the first vector."""
        value = get_meta(self.conn, "vector_dim")
        return int(value) if value else None

    def create(self, dim: int) -> None:
        """Create the table for ``dim``-dimensional vectors (caller holds a transaction)."""
        self.conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING vec0("
            f"embedding float[{int(dim)}] distance_metric=cosine)"
        )
        set_meta(self.conn, "vector_dim", str(int(dim)))
        self._bump()

    def drop(self) -> None:
        """Remove every vector (caller holds a transaction)."""
        self.conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        self.conn.execute("DELETE FROM meta WHERE key = 'vector_dim'")
        self._bump()
        self._clear()

    def pinned(self) -> contextlib.AbstractContextManager[None]:
        """A block (one search) that may take the store's state as read once (PostgreSQL's
        store reads it; this one asks SQLite, which costs nothing)."""
        return contextlib.nullcontext()

    def count(self) -> int:
        """How many vectors are stored."""
        if not self.exists():
            return 0
        return int(self.conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0])

    # -- writing (callers hold a transaction) ----------------------------------

    def _bump(self) -> None:
        before, version = next_vector_version(self.conn)
        with self._lock:
            if self._warm is not None:
                self._warm.follow(before, version)

    def put(self, ids: Sequence[int], matrix: Vectors) -> None:
        """Store (or replace) the vectors of ``ids``."""
        if not len(ids):
            return
        rows = [
            (int(i), np.ascontiguousarray(v, dtype=np.float32).tobytes())
            for i, v in zip(ids, matrix, strict=True)
        ]
        self.conn.executemany(f"DELETE FROM {TABLE} WHERE rowid = ?", [(r[0],) for r in rows])
        self.conn.executemany(f"INSERT INTO {TABLE}(rowid, embedding) VALUES (?, ?)", rows)
        self._bump()
        with self._lock:
            if self._warm is not None:
                self._warm.put(ids, matrix)

    def delete(self, ids: Iterable[int]) -> None:
        """Forget the vectors of ``ids`` (missing ones are ignored)."""
        keys = [(int(i),) for i in ids]
        if not keys or not self.exists():
            return
        self.conn.executemany(f"DELETE FROM {TABLE} WHERE rowid = ?", keys)
        self._bump()
        with self._lock:
            if self._warm is not None:
                self._warm.delete([k[0] for k in keys])

    # -- reading ----------------------------------------------------------------

    def get(self, ids: Sequence[int]) -> dict[int, npt.NDArray[np.float32]]:
        """The stored vectors of ``ids`` (absent ones are left out)."""
        if not ids or not self.exists():
            return {}
        warm = self._fresh_copy()
        if warm is not None:
            with self._lock:
                return warm.get(ids)
        out: dict[int, npt.NDArray[np.float32]] = {}
        for start in range(0, len(ids), 500):
            batch = [int(i) for i in ids[start : start + 500]]
            marks = ",".join("?" * len(batch))
            for row in self.conn.execute(
                f"SELECT rowid, embedding FROM {TABLE} WHERE rowid IN ({marks})", batch
            ):
                out[int(row[0])] = np.frombuffer(row[1], dtype=np.float32)
        return out

    def search(
        self, query: npt.NDArray[np.float32], k: int, allowed: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` chunks most similar to ``query``: ``(chunk id, cosine)``, best first.

        ``allowed`` restricts the search to those chunk ids (a filter).
        """
        if not self.exists() or k <= 0:
            return []
        if allowed is not None and not allowed:
            return []
        if self.keep_warm or self._fresh_copy() is not None or self.count() <= WARM_THRESHOLD:
            self.warm()
            return self._search_warm(query, k, allowed)
        return self._search_cold(query, k, allowed)

    def begin(self, query: npt.NDArray[np.float32]) -> None:
        """Start ``query``'s product with a large warm copy now, so it runs while the
        keyword search does (see :meth:`WarmMatrix.begin`); nothing without one."""
        warm = self._fresh_copy()
        if warm is not None:
            warm.begin(query)

    def _search_cold(
        self, query: npt.NDArray[np.float32], k: int, allowed: Sequence[int] | None
    ) -> list[tuple[int, float]]:
        blob = np.ascontiguousarray(query, dtype=np.float32).tobytes()
        if allowed is None:
            rows = self.conn.execute(
                f"SELECT rowid, distance FROM {TABLE} WHERE embedding MATCH ? AND k = ?",
                (blob, int(k)),
            ).fetchall()
            return [(int(r[0]), 1.0 - float(r[1])) for r in rows]
        scored: list[tuple[int, float]] = []
        ids = [int(i) for i in allowed]
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            marks = ",".join("?" * len(batch))
            for row in self.conn.execute(
                f"SELECT rowid, vec_distance_cosine(embedding, ?) FROM {TABLE} "
                f"WHERE rowid IN ({marks})",
                [blob, *batch],
            ):
                scored.append((int(row[0]), 1.0 - float(row[1])))
        scored.sort(key=lambda pair: -pair[1])
        return scored[:k]

    def spread(self, query: npt.NDArray[np.float32]) -> tuple[float, float]:
        """Centre and spread of the query's cosines with the stored vectors.

        Median and interquartile range (scaled to a standard deviation) over
        an evenly spaced sample, so the few chunks that do match do not widen
        the yardstick they are measured with.
        """
        return cosine_spread(self._spread_sample(), query)

    def _spread_sample(self) -> Vectors:
        """The sample, taken again when the number of vectors moved by a tenth."""
        with self._lock:
            warm = self._warm
            count = warm.count() if warm is not None else self.count()
            if self._sample is not None and abs(count - self._sample_of) <= count // 10:
                return self._sample
            step = max(1, count // SAMPLE_SIZE)
            if warm is not None:
                sample = warm.sample(step, SAMPLE_SIZE)
            else:
                ids = [
                    int(r[0])
                    for r in self.conn.execute(f"SELECT rowid FROM {TABLE} ORDER BY rowid")
                ][::step][:SAMPLE_SIZE]
                found = self.get(ids)
                sample = (
                    np.stack([found[i] for i in ids if i in found]).astype(np.float32)
                    if found
                    else np.zeros((0, 0), dtype=np.float32)
                )
            self._sample = sample
            self._sample_of = count
            return sample

    # -- the warm copy -----------------------------------------------------------

    def _clear(self) -> None:
        with self._lock:
            self._warm = None
            self._sample = None

    def _search_warm(
        self, query: npt.NDArray[np.float32], k: int, allowed: Sequence[int] | None
    ) -> list[tuple[int, float]]:
        with self._lock:
            return self._warm.search(query, k, allowed) if self._warm is not None else []

    def _fresh_copy(self) -> WarmMatrix | None:
        """The warm copy, if it holds what the table holds now."""
        with self._lock:
            warm = self._warm
        if warm is None or get_meta(self.conn, "vector_version") != warm.version:
            return None
        return warm

    def warm(self) -> None:
        """Load every vector into memory (again, if another process changed them)."""
        if self._fresh_copy() is not None:
            return
        with self._lock:
            version = get_meta(self.conn, "vector_version")
            dim = self.dimension() or 0
            ids: list[int] = []
            blobs: list[bytes] = []
            if self.exists():
                for row in self.conn.execute(f"SELECT rowid, embedding FROM {TABLE}"):
                    ids.append(int(row[0]))
                    blobs.append(row[1])
            matrix = (
                np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), dim).copy()
                if ids
                else np.zeros((0, dim), dtype=np.float32)
            )
            self._warm = WarmMatrix(ids, matrix, version)
