"""PgVectorStore against VectorStore (sqlite-vec) on the same random vectors: the same
nearest chunks and cosines, the same spread, and the same bookkeeping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from memvault.index import db
from memvault.index.pg_vectors import PgVectorStore
from memvault.index.vectors import VectorStore
from memvault.sqlite import transaction
from memvault.storage.dialect import PgConnection
from pg_index_support import index_connection, migrate_index

DIM = 48
COUNT = 600


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> npt.NDArray[np.float32]:
    """Unit vectors around 40 centres, as a sentence model's are around topics (evenly
    spread random vectors are the one case no approximate index handles well)."""
    centres = rng.standard_normal((40, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = 0.5 / np.sqrt(dim) * rng.standard_normal((n, dim))
    vectors = (centres[rng.integers(0, 40, n)] + noise).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


@pytest.fixture
def pg_conn(database: str) -> Iterator[PgConnection]:
    conn = index_connection(migrate_index(database))
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def stores(pg_conn: PgConnection, tmp_path: Path) -> Iterator[tuple[VectorStore, PgVectorStore]]:
    """Both stores holding the same ``COUNT`` vectors (ids 1 .. COUNT)."""
    lite_conn = db.connect(tmp_path / "index.db")
    lite, pg = VectorStore(lite_conn), PgVectorStore(pg_conn)
    matrix = unit(np.random.default_rng(5), COUNT)
    ids = list(range(1, COUNT + 1))
    for store, conn in ((lite, lite_conn), (pg, pg_conn)):
        with transaction(conn):
            store.create(DIM)
            store.put(ids, matrix)
    try:
        yield lite, pg
    finally:
        lite_conn.close()


def test_search_finds_the_same_nearest_with_the_same_cosines(
    stores: tuple[VectorStore, PgVectorStore],
) -> None:
    lite, pg = stores
    for query in unit(np.random.default_rng(9), 20):
        for k in (1, 10, 100, 599, 700):
            expected = lite.search(query, k)
            found = pg.search(query, k)
            assert [i for i, _ in found] == [i for i, _ in expected]
            assert [c for _, c in found] == pytest.approx([c for _, c in expected], abs=1e-5)


def test_search_over_given_ids_is_exact(stores: tuple[VectorStore, PgVectorStore]) -> None:
    lite, pg = stores
    allowed = list(range(3, COUNT, 7))
    query = unit(np.random.default_rng(2), 1)[0]
    expected = lite.search(query, 25, allowed)
    found = pg.search(query, 25, allowed)
    assert [i for i, _ in found] == [i for i, _ in expected]
    assert [c for _, c in found] == pytest.approx([c for _, c in expected], abs=1e-5)
    assert pg.search(query, 10, []) == [] == lite.search(query, 10, [])
    assert pg.search(query, 5, [4, 10_000]) == [(4, pytest.approx(expected_cosine(lite, 4, query)))]


def expected_cosine(store: VectorStore, chunk_id: int, query: npt.NDArray[np.float32]) -> float:
    return float(store.get([chunk_id])[chunk_id] @ query)


def test_spread_is_measured_on_the_same_sample(stores: tuple[VectorStore, PgVectorStore]) -> None:
    lite, pg = stores
    query = unit(np.random.default_rng(3), 1)[0]
    assert pg.spread(query) == pytest.approx(lite.spread(query), abs=1e-5)


def test_the_spread_follows_writes_from_any_connection(
    stores: tuple[VectorStore, PgVectorStore], database: str
) -> None:
    """The sample is kept while nothing is written (no count per search), and taken again
    once another connection added more than a tenth: both stores agree after each step."""
    lite, pg = stores
    query = unit(np.random.default_rng(3), 1)[0]
    before = pg.spread(query)
    assert pg.spread(query) == before
    more = unit(np.random.default_rng(8), COUNT) * -1.0  # the other side of every topic
    ids = list(range(COUNT + 1, 2 * COUNT + 1))
    other = index_connection(migrate_index(database))
    try:
        with transaction(other):
            PgVectorStore(other).put(ids, more)
    finally:
        other.close()
    with transaction(lite.conn):
        lite.put(ids, more)
    after = pg.spread(query)
    assert after != pytest.approx(before, abs=1e-3)
    assert after == pytest.approx(lite.spread(query), abs=1e-5)


def test_a_warm_copy_outdated_by_another_connection_stays_outdated_after_a_write(
    stores: tuple[VectorStore, PgVectorStore], database: str, tmp_path: Path
) -> None:
    """Another process writes a vector, then this one writes its own: the warm copy,
    which missed the first write, is read again rather than taken as current (both
    stores find the other's vector)."""
    lite, pg = stores
    others: list[VectorStore | PgVectorStore] = [
        VectorStore(db.connect(tmp_path / "index.db")),
        PgVectorStore(index_connection(migrate_index(database))),
    ]
    theirs, ours = unit(np.random.default_rng(21), 2)
    for store, other in zip((lite, pg), others, strict=True):
        store.warm()
        try:
            with transaction(other.conn):
                other.put([COUNT + 1], theirs[None, :])
        finally:
            other.conn.close()
        with transaction(store.conn):
            store.put([COUNT + 2], ours[None, :])
        assert store.search(theirs, 1) == [(COUNT + 1, pytest.approx(1.0, abs=1e-5))]
        assert store.search(ours, 1) == [(COUNT + 2, pytest.approx(1.0, abs=1e-5))]


def test_get_put_delete_count_and_dimension(
    stores: tuple[VectorStore, PgVectorStore], pg_conn: PgConnection
) -> None:
    lite, pg = stores
    assert pg.exists() and pg.dimension() == DIM == lite.dimension()
    assert pg.count() == COUNT == lite.count()
    got = pg.get([1, 2, 99_999])
    assert set(got) == {1, 2}
    np.testing.assert_allclose(got[2], lite.get([2])[2], atol=1e-7)
    assert got[1].dtype == np.float32
    replacement = unit(np.random.default_rng(11), 1)
    with transaction(pg_conn):
        pg.put([2], replacement)  # replaces
        pg.delete([1, 3, 99_999])
    assert pg.count() == COUNT - 2
    assert set(pg.get([1, 2, 3])) == {2}
    np.testing.assert_allclose(pg.get([2])[2], replacement[0], atol=1e-7)
    assert pg.search(replacement[0], 1) == [(2, pytest.approx(1.0, abs=1e-5))]
    with transaction(pg_conn):
        pg.drop()
    assert not pg.exists()
    assert pg.dimension() is None and pg.count() == 0
    assert pg.search(replacement[0], 5) == [] and pg.get([2]) == {}
    pg.delete([2])  # nothing to delete: no error
    pg.warm()


def test_create_makes_an_hnsw_index_on_cosine(
    stores: tuple[VectorStore, PgVectorStore], pg_conn: PgConnection
) -> None:
    row = pg_conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE tablename = 'chunk_vectors' AND indexdef LIKE ?",
        ("%hnsw%",),
    ).fetchone()
    assert row is not None and "vector_cosine_ops" in str(row[0])
    query = unit(np.random.default_rng(4), 1)[0]
    with pg_conn.raw.transaction():
        pg_conn.raw.execute("SET LOCAL enable_seqscan = off")
        plan = pg_conn.raw.execute(
            "EXPLAIN SELECT rowid FROM chunk_vectors ORDER BY embedding <=> %s LIMIT 10",
            (query,),
        ).fetchall()
    assert any("chunk_vectors_hnsw" in str(r[0]) for r in plan)


def test_high_dimensions_are_searched_without_an_index(pg_conn: PgConnection) -> None:
    store = PgVectorStore(pg_conn)
    matrix = unit(np.random.default_rng(1), 30, dim=2048)
    with transaction(pg_conn):
        store.create(2048)
        store.put(list(range(1, 31)), matrix)
    found = store.search(matrix[7], 3)
    assert found[0] == (8, pytest.approx(1.0, abs=1e-5))
    assert len(found) == 3
