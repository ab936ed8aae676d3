"""Forgetting in the index: a forgotten memory's rows found, checked gone, and the notes
that still hold a trace.

:mod:`memvault.privacy.forgetting` removes the memory from the vault's files; the index
follows those files. Here it is *verified* that it did: no keyword or vector row of the
memory is left (the files are indexed again when one is, as when another process wrote),
SQLite's full-text segments are merged so deleted words leave them too, no graph link
points at it, and the owner's own notes that still hold a trace are named.
"""

from __future__ import annotations

import logging

from memvault.index.index import MemoryIndex
from memvault.index.keywords import keyword_tables
from memvault.privacy.receipts import Place, Receipt
from memvault.privacy.scrub import Scope
from memvault.vocabulary import counted

log = logging.getLogger("memvault.privacy.forgetting")


def memory_chunks(index: MemoryIndex, ids: set[str]) -> list[int]:
    """The index's chunks of these memories now (to check they are gone after)."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    with index.lock:
        rows = index.conn.execute(
            f"SELECT chunk_id FROM memories WHERE id IN ({marks})", sorted(ids)
        ).fetchall()
    return [int(r[0]) for r in rows]


def check_index(index: MemoryIndex, ids: set[str], chunks: list[int], receipt: Receipt) -> None:
    """Verify the index holds no row of the forgotten memories (re-index their files
    when one is left), then that no graph link points at one."""
    marks = ",".join("?" * len(ids)) if ids else "NULL"
    left, vectors = _rows_left(index, ids, chunks)
    if left or vectors:  # the index did not follow (another process wrote): re-index
        index.sync_paths(sorted({m.path for m in receipt.forgotten}))
        left, vectors = _rows_left(index, ids, chunks)
    if left or vectors:
        log.warning("forgetting: index rows left", extra={"rows": left, "vectors": vectors})
    where = "index.db" if index.storage is None else "the index database"
    if ids:
        if left or vectors:
            detail = f"{left} keyword rows and {vectors} vectors could not be removed"
            receipt.places.append(Place(where, "left", detail, left))
        else:
            receipt.places.append(
                Place(
                    where,
                    "verified",
                    f"keyword and vector index: {counted(len(chunks), 'chunk')} and "
                    f"{'its vector' if len(chunks) == 1 else 'their vectors'} gone; "
                    "no row holds the memory",
                    len(chunks),
                )
            )
    if index.storage is None:
        _compact_keywords(index)
    with index.lock:
        links = (
            index.conn.execute(
                f"SELECT DISTINCT n.path FROM links l JOIN notes n ON n.id = l.note_id "
                f"WHERE l.subpath IN ({marks})",
                [f"^{i}" for i in sorted(ids)],
            ).fetchall()
            if ids
            else []
        )
    if links:
        receipt.places.append(
            Place(
                "graph",
                "left",
                "links still point at it from notes of yours: "
                + ", ".join(str(r[0]) for r in links),
                len(links),
            )
        )
    else:
        receipt.places.append(Place("graph", "verified", "no link or relation points at it", 0))


def _rows_left(index: MemoryIndex, ids: set[str], chunks: list[int]) -> tuple[int, int]:
    """The index's rows still holding the memories, and the vectors of their old
    chunks still stored (a chunk id taken since by another chunk is that one's)."""
    if not ids:
        return 0, 0
    wanted = sorted(ids)
    marks = ",".join("?" * len(wanted))
    with index.lock:
        conn = index.conn
        rows = int(
            conn.execute(
                f"SELECT count(*) FROM chunks WHERE memory_id IN ({marks})", wanted
            ).fetchone()[0]
        )
        rows += int(
            conn.execute(f"SELECT count(*) FROM memories WHERE id IN ({marks})", wanted).fetchone()[
                0
            ]
        )
        if not chunks or not index.vectors.exists():
            return rows, 0
        taken = {
            int(r[0])
            for r in conn.execute(
                f"SELECT id FROM chunks WHERE id IN ({','.join('?' * len(chunks))})", chunks
            ).fetchall()
        }
        gone = [c for c in chunks if c not in taken]
        return rows, len(index.vectors.get(gone)) if gone else 0


def _compact_keywords(index: MemoryIndex) -> None:
    """Merge the keyword index's segments, so the words of deleted rows leave SQLite's
    full-text tables too (deleting a row only marks it gone there)."""
    try:
        with index.lock:
            for table in keyword_tables(index.dialect):  # stemmed and as written
                index.conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
    except Exception:  # a read-only index: the rows are gone, the segments stay
        log.debug("forgetting: keyword index not merged", exc_info=True)


def still_found(index: MemoryIndex, scope: Scope) -> list[str]:
    """The notes that still hold a trace: the owner's own text, left as it is (so the
    receipt can name them)."""
    trace = scope.trace
    words = sorted(trace.words)
    paths: set[str] = set()
    patterns = [f"%{w}%" for w in words] + [f"%{i}%" for i in sorted(trace.ids)]
    if scope.person is not None:
        patterns += [f"%{n.casefold()}%" for n in scope.person.names]
    if not patterns:
        return []
    clause = " OR ".join("lower(c.text) LIKE ?" for _ in patterns)
    with index.lock:
        rows = index.conn.execute(
            f"SELECT DISTINCT n.path, c.text FROM chunks c JOIN notes n ON n.id = c.note_id "
            f"WHERE {clause}",
            patterns,
        ).fetchall()
    for row in rows:
        text = str(row[1])
        if trace.strong(text) or (scope.person is not None and scope.person.mentions(text)):
            paths.add(str(row[0]))
    return sorted(paths)
