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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from memvault.clock import Clock
from memvault.config import IndexSettings, SearchSettings
from memvault.errors import InvalidInputError, MemvaultError, NotFoundError, UnsafePathError
from memvault.index import db as dbmod
from memvault.index.chunking import (
    MEMORY_EMBED,
    ChunkDraft,
    is_digest,
    kind_of,
    memory_chunks,
    note_chunks,
    note_created,
)
from memvault.index.db import Connection
from memvault.index.embedders import Embedder, EmbeddingError, normalize_rows
from memvault.index.keywords import keyword_tables
from memvault.index.scripts import indexed
from memvault.index.vectors import VectorStore
from memvault.sqlite import get_meta, in_memory, quick_check, set_meta, transaction
from memvault.storage.pg_schema import INDEX_TABLES
from memvault.vault.entities import relation_lines, relation_name
from memvault.vault.links import LinkResolver, link_key
from memvault.vault.markdown import Link, aliases, extract_links, note_tags, title_of
from memvault.vault.memories import MEMORY_DIR, Memories, normalize_text
from memvault.vault.note import Note, plain
from memvault.vault.store import Change, FileEntry, Vault

if TYPE_CHECKING:
    from memvault.index.pg_vectors import PgVectorStore
    from memvault.storage.postgres import PostgresStorage

log = logging.getLogger(__name__)

# A larger file named .md is not indexed: it would hold up every sync and fill memory.
MAX_INDEXED_BYTES = 16 * 1024 * 1024
# What a file's content can provoke while it is parsed and stored (a value no
# UTF-8 can encode, say); the index then leaves that one file out and goes on.
# Failures of the database itself still stop the run.
_NOTE_FAULTS = (ValueError, TypeError, OverflowError, RecursionError, LookupError)

INDEX_FILE = "index.db"
# Up to this many notes appearing or vanishing at once, only the links they can affect
# are re-resolved; beyond it, every link is.
_TARGETED_RELINK = 500
# A frontmatter line that starts a property: ``key:`` at the margin.
_PROPERTY = re.compile(r"^([A-Za-z_][\w -]*?):(?:\s|$)")
Progress = Callable[[int, int, str], None]
MODEL_LOADING = (
    "The embedding model is still loading; these results come from keywords only "
    "(search again in a moment for meaning too)."
)


class IndexMismatchError(MemvaultError):
    """The index's vectors were made by another embedder than the configured one."""

    code = "embedder_changed"
    exit_code = 6
    http_status = 409


@dataclass
class SyncReport:
    """What a sync changed."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    moved: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def touched(self) -> int:
        """How many notes were (re)indexed, moved or removed."""
        return len(self.added) + len(self.changed) + len(self.moved) + len(self.deleted)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "added": self.added,
            "changed": self.changed,
            "moved": [{"from": a, "to": b} for a, b in self.moved],
            "deleted": self.deleted,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "seconds": round(self.seconds, 3),
        }


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


P = ParamSpec("P")
R = TypeVar("R")
K = TypeVar("K")


def locked(
    method: Callable[Concatenate[MemoryIndex, P], R],
) -> Callable[Concatenate[MemoryIndex, P], R]:
    """Run a method (or a function taking the index first) holding the index's lock."""

    def wrapper(self: MemoryIndex, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.lock:
            return method(self, *args, **kwargs)

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


def show_embeds(conn: Connection, texts: Mapping[K, str]) -> dict[K, str]:
    """``texts`` with each embedded memory (``![[Memory/Facts#^m-1]]``: an entity's
    mentions, an insight's evidence) shown as Obsidian shows it, by its text."""
    wanted = {m.group(1) for text in texts.values() for m in MEMORY_EMBED.finditer(text)}
    if not wanted:
        return dict(texts)
    said = {
        str(r[0]): " ".join(str(r[1]).split())
        for r in conn.execute(
            f"SELECT id, text FROM memories WHERE id IN ({','.join('?' * len(wanted))})",
            sorted(wanted),
        )
    }
    return {
        key: MEMORY_EMBED.sub(lambda m: said.get(m.group(1), m.group(0)), text)
        for key, text in texts.items()
    }


def _json(value: Any) -> str:
    return json.dumps(plain(value), ensure_ascii=False, default=str)


class MemoryIndex:
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
        self._conn: Connection | None = None
        self._vectors: VectorStore | PgVectorStore | None = None
        self._links: LinkResolver | None = None
        self._links_version: str | None = None
        # The connection is shared by every thread of a process (a watcher, request
        # handlers); its transactions must not interleave.
        self.lock = threading.RLock()
        self._warm_lock = threading.Lock()
        self._warming: threading.Thread | None = None
        # The last query embedded: the context builder searches twice with one request.
        self._last_query: tuple[str, np.ndarray[Any, np.dtype[np.float32]]] | None = None
        # The memory files last indexed by appending, their bytes kept (_append_memories).
        self._appended: dict[str, _Appended] = {}
        # Files named .md the last syncs could not index, and why (doctor reports them).
        self.unreadable: dict[str, str] = {}

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

    # -- what is indexed -----------------------------------------------------------

    def _excluded(self, path: str) -> bool:
        return any(path == f or path.startswith(f.rstrip("/") + "/") for f in self.settings.exclude)

    def _scan(self) -> dict[str, FileEntry]:
        return {e.path: e for e in self.vault.list() if not self._excluded(e.path)}

    # -- embedder bookkeeping --------------------------------------------------------

    @locked
    def built_with(self) -> str | None:
        """The embedder identity the stored vectors were made with."""
        return get_meta(self.conn, "embedder")

    @locked
    def mismatch(self) -> str | None:
        """A sentence explaining a change of embedder, or None when vectors are usable."""
        if not self.embedder.enabled:
            return None
        built = self.built_with()
        if built is None or built == self.embedder.identity:
            return None
        return (
            f"The index's vectors were made with {built}, but the configured embedder is "
            f"{self.embedder.identity}; run `memvault index --reembed` to re-embed "
            "(keyword search works meanwhile)."
        )

    @property
    def semantic(self) -> bool:
        """Whether vector search can be used now."""
        with self.lock:
            return self.embedder.enabled and self.mismatch() is None and self.vectors.exists()

    # -- sync ------------------------------------------------------------------------

    @locked
    def sync(self, progress: Progress | None = None) -> SyncReport:
        """Bring the index in line with the vault: new, changed, moved and deleted notes."""
        started = time.perf_counter()
        entries = self._scan()
        rows = {
            str(r["path"]): r
            for r in self.conn.execute("SELECT id, path, mtime_ns, ctime_ns, size, hash FROM notes")
        }
        candidates = [p for p, e in entries.items() if p not in rows or _stale(rows[p], e)]
        report = SyncReport(unchanged=len(entries) - len(candidates))
        gone = {p: rows[p] for p in rows if p not in entries}
        for path in [p for p in self.unreadable if p not in entries]:
            del self.unreadable[path]
        return self._reconcile(sorted(candidates), entries, rows, gone, report, started, progress)

    @locked
    def rebuild(self, progress: Progress | None = None) -> SyncReport:
        """Drop everything and index the vault from scratch (vectors included)."""
        if self.storage is not None:
            with transaction(self.conn):
                self.vectors.drop()
                self.conn.execute(f"TRUNCATE {', '.join(INDEX_TABLES)} RESTART IDENTITY CASCADE")
            self._links = None
            self.unreadable.clear()
            self._appended.clear()
            return self.sync(progress)
        self.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
        return self.sync(progress)

    @locked
    def sync_paths(self, paths: Iterable[str]) -> SyncReport:
        """Re-check just these vault paths (what a file watcher or a write reports)."""
        started = time.perf_counter()
        wanted = sorted({p for p in paths if _is_markdown(p) and not self._excluded(p)})
        entries: dict[str, FileEntry] = {}
        for path in wanted:
            with contextlib.suppress(NotFoundError, UnsafePathError, InvalidInputError, OSError):
                if self._is_note(path):
                    entries[path] = self.vault.stat(path)
        rows = {
            str(r["path"]): r
            for r in self.conn.execute(
                "SELECT id, path, mtime_ns, size, hash FROM notes"
                f" WHERE path IN ({','.join('?' * len(wanted)) or 'NULL'})",
                wanted,
            )
        }
        gone = {p: rows[p] for p in wanted if p not in entries and p in rows}
        for path in wanted:
            if path not in entries:
                self.unreadable.pop(path, None)
        return self._reconcile(sorted(entries), entries, rows, gone, SyncReport(), started)

    def _reconcile(
        self,
        candidates: Sequence[str],
        entries: dict[str, FileEntry],
        rows: dict[str, Any],
        gone: dict[str, Any],
        report: SyncReport,
        started: float,
        progress: Progress | None = None,
    ) -> SyncReport:
        """Index the candidates (telling edits from moves by content hash), drop the gone."""
        gone_by_hash: dict[str, list[str]] = defaultdict(list)
        for path, row in gone.items():
            if row["hash"]:
                gone_by_hash[str(row["hash"])].append(path)
        appeared: list[str] = []
        for n, path in enumerate(candidates, start=1):
            if progress is not None:
                progress(n, len(candidates), path)
            entry = entries[path]
            row = rows.get(path)
            if entry.size > MAX_INDEXED_BYTES:
                self._skip(report, path, row, f"larger than {MAX_INDEXED_BYTES >> 20} MB")
                continue
            try:
                data = self.vault.read_bytes(path)
            except (NotFoundError, UnsafePathError, InvalidInputError, OSError) as exc:
                self._skip(report, path, None, f"cannot be read ({exc})")
                continue
            digest = _hash(data)
            if row is not None and row["hash"] == digest:
                with transaction(self.conn):
                    self.conn.execute(
                        "UPDATE notes SET mtime_ns = ?, ctime_ns = ?, size = ? WHERE id = ?",
                        (entry.mtime_ns, entry.ctime_ns, entry.size, row["id"]),
                    )
                report.unchanged += 1
                continue
            if row is not None and kind_of(path) == "memory" and self._append_memories(path):
                report.changed.append(path)  # lines were appended: only they were indexed
                continue
            if row is None and gone_by_hash.get(digest):
                old = gone_by_hash[digest].pop(0)
                del gone[old]
                self._move(old, path, entry)
                report.moved.append((old, path))
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                self._skip(report, path, row, "not UTF-8 text")
                continue
            if "\x00" in text:
                self._skip(report, path, row, "binary (it holds NUL bytes)")
                continue
            try:
                aliases_changed = self._index_note(path, text, entry, digest)
            except _NOTE_FAULTS as exc:  # rolled back: this file alone is left out
                log.warning("cannot index a note", extra={"path": path}, exc_info=exc)
                self._skip(report, path, row, f"cannot be indexed ({type(exc).__name__}: {exc})")
                continue
            self.unreadable.pop(path, None)
            if aliases_changed or row is None:
                appeared.append(path)  # new, or its aliases changed
            (report.changed if row is not None else report.added).append(path)
        for path in gone:
            self._remove(path)
            report.deleted.append(path)
        moved_to = [new for _, new in report.moved]
        moved_from = [old for old, _ in report.moved]
        self._restructure([*appeared, *moved_to], [*report.deleted, *moved_from])
        report.seconds = time.perf_counter() - started
        return report

    def _skip(self, report: SyncReport, path: str, row: Any, why: str) -> None:
        """Leave one file out of the index (and its rows from an earlier, readable version)."""
        report.skipped.append(path)
        if path not in self.unreadable:
            log.warning("skipping a note the index cannot read", extra={"path": path, "why": why})
        self.unreadable[path] = why
        if row is not None:
            self._remove(path)

    def _is_note(self, path: str) -> bool:
        try:
            return self.vault.is_file(path)
        except UnsafePathError:
            return False

    @locked
    def on_change(self, change: Change) -> None:
        """Vault observer: keep the keyword index current after each write memvault makes."""
        paths = [change.path] + ([change.new_path] if change.new_path else [])
        if not any(_is_markdown(p) and not self._excluded(p) for p in paths):
            return
        memory_append = change.kind == "append" and change.path.startswith(f"{MEMORY_DIR}/")
        if memory_append and self._append_memories(change.path):
            return
        self.sync_paths(paths)

    # -- writing one note --------------------------------------------------------------

    def _drafts(self, path: str, text: str, note: Note, mtime: float) -> list[ChunkDraft]:
        kind = kind_of(path)
        if kind == "memory":
            parsed = self.memories.parse_text(path, text)
            return memory_chunks(
                parsed,
                window=self.settings.neighbour_window,
                max_gap_hours=self.settings.neighbour_hours,
            )
        title = title_of(note.body, path.rsplit("/", 1)[-1].removesuffix(".md"))
        return note_chunks(
            path=path,
            kind=kind,
            title=title,
            body=note.body,
            body_offset=note.body_offset,
            frontmatter=note.frontmatter,
            tags=note_tags(note.frontmatter, note.body),
            created=note_created(path, note.frontmatter, mtime),
            chunk_tokens=self.settings.chunk_tokens,
            overlap_tokens=self.settings.overlap_tokens,
        )

    def _index_note(self, path: str, text: str, entry: FileEntry, digest: str) -> bool:
        """Write one note's rows; True when its aliases changed (links may resolve anew)."""
        note = Note.parse(text)
        kind = kind_of(path)
        title = title_of(note.body, path.rsplit("/", 1)[-1].removesuffix(".md"))
        tags = note_tags(note.frontmatter, note.body)
        mtime = entry.mtime_ns / 1e9
        drafts = self._drafts(path, text, note, mtime)
        alias_json = _json(aliases(note.frontmatter))
        with transaction(self.conn):
            row = self.conn.execute(
                "SELECT id, aliases FROM notes WHERE path = ?", (path,)
            ).fetchone()
            values = (
                title,
                kind,
                _json(note.frontmatter),
                _json(tags),
                alias_json,
                entry.mtime_ns,
                entry.ctime_ns,
                entry.size,
                digest,
                note_created(path, note.frontmatter, mtime),
                time.time(),
            )
            if row is None:
                note_id = int(
                    self.conn.execute(
                        "INSERT INTO notes(title, kind, frontmatter, tags, aliases, mtime_ns,"
                        " ctime_ns, size, hash, created, indexed_at, path)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        (*values, path),
                    ).lastrowid
                )
            else:
                note_id = int(row["id"])
                self.conn.execute(
                    "UPDATE notes SET title=?, kind=?, frontmatter=?, tags=?, aliases=?,"
                    " mtime_ns=?, ctime_ns=?, size=?, hash=?, created=?, indexed_at=? WHERE id=?",
                    (*values, note_id),
                )
            self._store_chunks(note_id, title, drafts, not is_digest(kind, note.frontmatter))
            self._store_links(note_id, path, note)
        return row is not None and row["aliases"] != alias_json

    def _store_chunks(
        self, note_id: int, title: str, drafts: Sequence[ChunkDraft], keyworded: bool = True
    ) -> None:
        """Write a note's chunks, keeping rows (and vectors) whose content did not change.

        Not ``keyworded`` (a digest: its words are its sources', a title from them and
        their embeds), its chunks stay out of the keyword index: counted there, its words
        would count twice and move every other note's keyword score (search finds a
        digest by meaning and shows its sources in its place).
        """
        old: dict[str, list[Any]] = defaultdict(list)
        for row in self.conn.execute(
            "SELECT c.id, c.hash, f.rowid AS frowid, f.title AS ftitle, f.tags AS ftags"
            " FROM chunks c LEFT JOIN chunks_fts f ON f.rowid = c.id"
            " WHERE c.note_id = ? ORDER BY c.ordinal",
            (note_id,),
        ):
            old[str(row["hash"])].append(row)
        self.conn.execute("DELETE FROM memories WHERE note_id = ?", (note_id,))
        for draft in drafts:
            reuse = old[draft.hash].pop(0) if old.get(draft.hash) else None
            tags_text = " ".join(draft.tags)
            chunk_title = "" if draft.kind == "memory" else title
            if reuse is not None:
                chunk_id = int(reuse["id"])
                self.conn.execute(
                    "UPDATE chunks SET ordinal=?, kind=?, start_line=?, end_line=?, heading=?,"
                    " grp=?, memory_id=?, category=?, importance=?, created=?, archived=?"
                    " WHERE id=?",
                    (*_chunk_meta(draft), chunk_id),
                )
                written = (reuse["ftitle"], reuse["ftags"])
                stale_fts = (reuse["frowid"] is None) == keyworded or (
                    keyworded and written != (indexed(chunk_title), indexed(tags_text))
                )
                if stale_fts:
                    self._delete_fts([chunk_id])
                    if keyworded:
                        self._insert_fts(chunk_id, draft, chunk_title, tags_text)
                    self.conn.execute("DELETE FROM chunk_tags WHERE chunk_id = ?", (chunk_id,))
                    self._insert_tags(chunk_id, draft.tags)
            else:
                chunk_id = self._insert_chunk(note_id, draft, chunk_title, tags_text, keyworded)
            if draft.memory_id:
                self._insert_memory(note_id, chunk_id, draft)
        stale = [int(r["id"]) for rows in old.values() for r in rows]
        self._delete_chunks(stale)

    def _insert_chunk(
        self, note_id: int, draft: ChunkDraft, title: str, tags_text: str, keyworded: bool = True
    ) -> int:
        chunk_id = int(
            self.conn.execute(
                "INSERT INTO chunks(ordinal, kind, start_line, end_line, heading, grp, memory_id,"
                " category, importance, created, archived, note_id, text, context, hash, embedded)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0)",
                (*_chunk_meta(draft), note_id, draft.text, draft.context, draft.hash),
            ).lastrowid
        )
        if keyworded:
            self._insert_fts(chunk_id, draft, title, tags_text)
        self._insert_tags(chunk_id, draft.tags)
        return chunk_id

    def _insert_fts(self, chunk_id: int, draft: ChunkDraft, title: str, tags_text: str) -> None:
        # Words in every script: CJK runs as bigrams (memvault.index.scripts).
        values = (chunk_id, *map(indexed, (draft.text, draft.context, title, tags_text)))
        for table in keyword_tables(self.dialect):
            self.conn.execute(
                f"INSERT INTO {table}(rowid, text, context, title, tags) VALUES (?,?,?,?,?)",
                values,
            )

    def _delete_fts(self, ids: Sequence[int]) -> None:
        for table in keyword_tables(self.dialect):
            self.conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(i,) for i in ids])

    def _insert_tags(self, chunk_id: int, tags: Sequence[str]) -> None:
        self.conn.executemany(
            "INSERT OR IGNORE INTO chunk_tags(chunk_id, tag) VALUES (?, ?)",
            [(chunk_id, t) for t in tags],
        )

    def _insert_memory(self, note_id: int, chunk_id: int, draft: ChunkDraft) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO memories(id, note_id, chunk_id, category, importance, tags,"
            " created, source, archived, text, norm) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                draft.memory_id,
                note_id,
                chunk_id,
                draft.category or "",
                draft.importance,
                _json(draft.tags),
                draft.created,
                draft.group or None,
                int(draft.archived),
                draft.text,
                normalize_text(draft.text),
            ),
        )

    def _delete_chunks(self, ids: Sequence[int]) -> None:
        if not ids:
            return
        pairs = [(i,) for i in ids]
        self._delete_fts(ids)
        self.conn.executemany("DELETE FROM chunks WHERE id = ?", pairs)
        self.vectors.delete(ids)

    def _append_memories(self, path: str) -> bool:
        """Fast path for lines appended to a memory file: index only the new memories.

        It applies when what was indexed is, byte for byte, how the file
        starts now (its hash says so) and ends with a whole line, whoever
        appended (memvault or a person). Returns False otherwise; the file is
        then re-indexed whole.
        """
        row = self.conn.execute(
            "SELECT id, size, hash, tags FROM notes WHERE path = ?", (path,)
        ).fetchone()
        if row is None or not row["hash"]:
            return False
        note_id, indexed = int(row["id"]), int(row["size"])
        before = self.vault.stat(path)  # taken before the read: a later edit shows a newer mtime
        try:
            appended = self.memories.read(path)
        except InvalidInputError:  # not UTF-8 now: the whole file is looked at
            return False
        data = memoryview(appended.data)
        # Under 400 bytes the appended lines could change the category read from the head.
        if len(data) <= indexed or indexed < 400 or data[indexed - 1] != ord("\n"):
            return False
        last = self._appended.get(path)
        if (
            last is not None
            and last.hexdigest() == row["hash"]
            and len(last.data) == indexed
            and appended.data.startswith(last.data)
        ):
            # The bytes indexed last time are kept: no need to hash or count them again.
            digest, above = last.hasher.copy(), last.lines
        else:
            digest = _new_hasher(data[:indexed])
            if digest.hexdigest() != row["hash"]:
                return False
            above = appended.data.count(b"\n", 0, indexed)
        tail = bytes(data[indexed:]).decode("utf-8")
        digest.update(data[indexed:])
        parsed = appended.memories
        known = self.conn.execute(
            "SELECT count(*) AS n, max(ordinal) AS last FROM chunks WHERE note_id = ?", (note_id,)
        ).fetchone()
        count = int(known["n"])
        if len(parsed) < count or (count and known["last"] != count - 1):
            return False
        if count:
            tail_row = self.conn.execute(
                "SELECT memory_id FROM chunks WHERE note_id = ? AND ordinal = ?",
                (note_id, count - 1),
            ).fetchone()
            if tail_row is None or tail_row["memory_id"] != parsed[count - 1].id:
                return False
        window = self.settings.neighbour_window
        start = max(0, count - 2 * window)
        drafts = memory_chunks(
            parsed[start:], window=window, max_gap_hours=self.settings.neighbour_hours
        )
        with transaction(self.conn):
            for offset, draft in enumerate(drafts):
                ordinal = start + offset
                draft.ordinal = ordinal
                if ordinal < count - window:
                    continue  # its neighbours did not change
                tags_text = " ".join(draft.tags)
                if ordinal < count:
                    current = self.conn.execute(
                        "SELECT id, hash FROM chunks WHERE note_id = ? AND ordinal = ?",
                        (note_id, ordinal),
                    ).fetchone()
                    if current is None or current["hash"] == draft.hash:
                        continue
                    chunk_id = int(current["id"])
                    self.conn.execute(
                        "UPDATE chunks SET context = ?, hash = ?, embedded = 0 WHERE id = ?",
                        (draft.context, draft.hash, chunk_id),
                    )
                    self._delete_fts([chunk_id])
                    self._insert_fts(chunk_id, draft, "", tags_text)
                else:
                    chunk_id = self._insert_chunk(note_id, draft, "", tags_text)
                    self._insert_memory(note_id, chunk_id, draft)
            # The appended lines' links and tags join the note's.
            self._insert_links(
                path,
                [
                    (
                        note_id,
                        link.target,
                        link.subpath,
                        link.alias,
                        _link_kind(link),
                        link.line + above,
                        None,
                        None,
                    )
                    for link in extract_links(tail)
                ],
            )
            tags = note_tags({"tags": json.loads(row["tags"])}, tail)
            # The hash and size of exactly what was parsed; the times only if the file was
            # that size before the read (else 0: the next sync looks at the file again).
            same = before.size == len(data)
            self.conn.execute(
                "UPDATE notes SET mtime_ns = ?, ctime_ns = ?, size = ?, hash = ?, tags = ?,"
                " indexed_at = ? WHERE id = ?",
                (
                    before.mtime_ns if same else 0,
                    before.ctime_ns if same else 0,
                    len(data),
                    digest.hexdigest(),
                    _json(tags),
                    time.time(),
                    note_id,
                ),
            )
        self._appended[path] = _Appended(appended.data, digest, above + tail.count("\n"))
        return True

    def _store_links(self, note_id: int, path: str, note: Note) -> None:
        self.conn.execute("DELETE FROM links WHERE note_id = ?", (note_id,))
        rows = []
        offset = note.body_offset
        frontmatter = note.frontmatter_text
        for link in extract_links(frontmatter):
            rows.append(
                (
                    note_id,
                    link.target,
                    link.subpath,
                    link.alias,
                    "relation",
                    link.line + 1,
                    _property_at(frontmatter, link.line),
                    None,
                )
            )
        typed = relation_lines(note.body)
        for link in extract_links(note.body):
            relation = typed.get(link.line - 1)
            rows.append(
                (
                    note_id,
                    link.target,
                    link.subpath,
                    link.alias,
                    _link_kind(link),
                    link.line + offset,
                    *(relation[::2] if relation and relation[1] == link.target else (None, None)),
                )
            )
        self._insert_links(path, rows)

    def _insert_links(self, path: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Store link rows ``(note_id, target, subpath, alias, kind, line, relation,
        valid_until)``, resolved."""
        resolver = self.resolver()
        self.conn.executemany(
            "INSERT INTO links(note_id, target, subpath, alias, kind, line, relation, valid_until,"
            " target_key, resolved) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [(*r, link_key(r[1]), resolver.resolve(r[1], path) if r[1] else path) for r in rows],
        )

    def resolver(self) -> LinkResolver:
        """The link resolver over the indexed notes, rebuilt when another process changed them."""
        version = get_meta(self.conn, "structure_version")
        if self._links is None or self._links_version != version:
            files = [str(r["path"]) for r in self.conn.execute("SELECT path FROM notes")]
            alias_map: dict[str, list[str]] = {}
            for r in self.conn.execute("SELECT path, aliases FROM notes WHERE aliases != '[]'"):
                alias_map[str(r["path"])] = json.loads(r["aliases"])
            self._links = LinkResolver(files, alias_map)
            self._links_version = version
        return self._links

    def _restructure(self, added: Sequence[str], removed: Sequence[str]) -> None:
        """Re-resolve the links that notes appearing, vanishing or moving can affect.

        Those are links naming one of the notes (by file name or alias),
        links that did not resolve, links that pointed at a vanished note,
        and every link from a note that appeared (a moved note's relative links).
        """
        if not added and not removed:
            return
        resolver = self.resolver()
        keys: set[str] = set()
        for path in removed:
            keys |= {link_key(path), *(a.casefold() for a in resolver.aliases_of(path))}
            resolver.remove(path)
        for path in added:
            row = self.conn.execute("SELECT aliases FROM notes WHERE path = ?", (path,)).fetchone()
            names = json.loads(row["aliases"]) if row is not None else []
            resolver.add(path, names)
            keys |= {link_key(path), *(a.casefold() for a in names)}
        query = (
            "SELECT l.rowid AS rid, l.target, l.resolved, n.path"
            " FROM links l JOIN notes n ON n.id = l.note_id"
        )
        params: list[Any] = []
        if len(added) + len(removed) <= _TARGETED_RELINK:
            query += (
                " WHERE l.resolved IS NULL"
                f" OR l.resolved IN ({','.join('?' * len(removed)) or 'NULL'})"
                f" OR l.target_key IN ({','.join('?' * len(keys)) or 'NULL'})"
                f" OR n.path IN ({','.join('?' * len(added)) or 'NULL'})"
            )
            params = [*removed, *keys, *added]
        updates = []
        for r in self.conn.execute(query, params).fetchall():
            resolved = resolver.resolve(r["target"], r["path"]) if r["target"] else r["path"]
            if resolved != r["resolved"]:
                updates.append((resolved, r["rid"]))
        with transaction(self.conn):
            if updates:
                self.conn.executemany("UPDATE links SET resolved = ? WHERE rowid = ?", updates)
            version = str(int(get_meta(self.conn, "structure_version") or "0") + 1)
            set_meta(self.conn, "structure_version", version)
        self._links_version = version

    def _move(self, old: str, new: str, entry: FileEntry) -> None:
        with transaction(self.conn):
            self.conn.execute(
                "UPDATE notes SET path = ?, kind = ?, mtime_ns = ?, ctime_ns = ?, size = ?"
                " WHERE path = ?",
                (new, kind_of(new), entry.mtime_ns, entry.ctime_ns, entry.size, old),
            )

    def _remove(self, path: str) -> None:
        with transaction(self.conn):
            row = self.conn.execute("SELECT id FROM notes WHERE path = ?", (path,)).fetchone()
            if row is None:
                return
            ids = [
                int(r[0])
                for r in self.conn.execute("SELECT id FROM chunks WHERE note_id = ?", (row["id"],))
            ]
            self._delete_chunks(ids)
            self.conn.execute("DELETE FROM notes WHERE id = ?", (row["id"],))

    # -- embeddings ------------------------------------------------------------------

    @locked
    def pending(self) -> int:
        """How many chunks wait for a vector."""
        return int(
            self.conn.execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchone()[0]
        )

    def embed_pending(
        self, *, limit: int | None = None, batch: int = 128, progress: Progress | None = None
    ) -> int:
        """Compute vectors for chunks that have none; returns how many were stored.

        The lock is released while the model works, so searches are not held up.
        """
        if not self.embedder.enabled:
            return 0
        with self.lock:
            problem = self.mismatch()
            if problem:
                raise IndexMismatchError(problem)
            waiting = self.pending()
        total = waiting if limit is None else min(limit, waiting)
        done = 0
        while done < total:
            with self.lock:
                rows = self.conn.execute(
                    "SELECT c.id, c.text, c.context, c.hash, c.kind,"
                    " CASE WHEN c.kind = 'insight' THEN n.frontmatter END AS frontmatter"
                    " FROM chunks c JOIN notes n ON n.id = c.note_id WHERE c.embedded = 0"
                    " ORDER BY c.id LIMIT ?",
                    (min(batch, total - done),),
                ).fetchall()
                if not rows:
                    break
                texts = self._embeddable(rows)
            vectors = self._embed_rows(texts)
            with self.lock:
                self._store_vectors(rows, vectors)
            done += len(rows)
            if progress is not None:
                progress(done, total, "embedding")
        return done

    def _store_vectors(self, rows: Sequence[Any], vectors: np.ndarray[Any, Any]) -> None:
        """Keep the vectors of chunks whose content did not change while they were computed."""
        with transaction(self.conn):
            if not self.vectors.exists():
                self.vectors.create(vectors.shape[1])
                set_meta(self.conn, "embedder", self.embedder.identity)
            current = {
                int(r["id"]): str(r["hash"])
                for r in self.conn.execute(
                    f"SELECT id, hash FROM chunks WHERE id IN ({','.join('?' * len(rows))})",
                    [int(r["id"]) for r in rows],
                )
            }
            keep = [i for i, r in enumerate(rows) if current.get(int(r["id"])) == str(r["hash"])]
            ids = [int(rows[i]["id"]) for i in keep]
            self.vectors.put(ids, vectors[keep])
            self.conn.executemany(
                "UPDATE chunks SET embedded = 1 WHERE id = ?", [(i,) for i in ids]
            )

    def _embeddable(self, rows: Sequence[Any]) -> list[tuple[str, str]]:
        """Each chunk's text and context as its vector should mean them.

        A digest (see ``is_digest``) is its text with its embedded memories shown by their
        text, as Obsidian shows them, and no context: it means what its sources say, not
        its links' or its fields' ids, hashes and dates.
        """
        texts = [(str(r["text"]), str(r["context"] or "")) for r in rows]
        digests = {
            i: texts[i][0]
            for i, r in enumerate(rows)
            if is_digest(str(r["kind"]), r["frontmatter"])
        }
        for i, shown in show_embeds(self.conn, digests).items():
            texts[i] = (shown, "")
        return texts

    def _embed_rows(
        self, texts: Sequence[tuple[str, str]]
    ) -> np.ndarray[Any, np.dtype[np.float32]]:
        """One vector per chunk: its text, plus its context when it has one."""
        own = self.embedder.embed([text for text, _ in texts])
        with_context = [i for i, (_, context) in enumerate(texts) if context]
        if with_context:
            context = self.embedder.embed([texts[i][1] for i in with_context])
            own = own.copy()
            own[with_context] = own[with_context] + context
        return normalize_rows(own)

    def reembed(self, progress: Progress | None = None) -> int:
        """Replace every vector with one from the configured embedder.

        The embedder is tried first: if it cannot answer, the old vectors stay.
        """
        if not self.embedder.enabled:
            raise InvalidInputError("No embedder is configured (embedder.provider = 'none').")
        self.embedder.embed(["memvault checks the embedder before re-embedding"])
        with self.lock, transaction(self.conn):
            self.vectors.drop()
            self.conn.execute("DELETE FROM meta WHERE key = 'embedder'")
            self.conn.execute("UPDATE chunks SET embedded = 0")
        return self.embed_pending(progress=progress)

    def embed_query(
        self, text: str, *, wait: bool = True
    ) -> tuple[np.ndarray[Any, np.dtype[np.float32]] | None, str | None]:
        """The query's vector, or None and why vector search cannot be used now.

        With ``wait=False`` a model that is not loaded yet is not waited for:
        it starts loading in the background and the search goes on with
        keywords (a long-running process answers at once, and fully later).
        The reason is None when there is nothing to explain (no embedder is
        configured, or nothing is embedded yet).
        """
        if not self.embedder.enabled:
            return None, None
        problem = self.mismatch()
        if problem is not None:
            return None, f"Keyword search only: {problem}"
        if not self.vectors.exists():  # nothing embedded yet (what ``semantic`` adds)
            return None, None
        if not wait and not self.embedder.loaded:
            self.warm_in_background()
            return None, MODEL_LOADING
        last = self._last_query
        if last is not None and last[0] == text:
            return last[1].copy(), None
        try:
            vector: np.ndarray[Any, np.dtype[np.float32]] = self.embedder.embed_query([text])[0]
            self._last_query = (text, vector.copy())
            return vector, None
        except EmbeddingError as exc:
            log.warning("query embedding failed; keyword search only", extra={"error": str(exc)})
            return None, f"Keyword search only: the embedder failed ({exc.message})"

    def warm_in_background(self) -> None:
        """Start loading the embedding model in a thread of its own (once)."""
        with self._warm_lock:
            if self._warming is not None or self.embedder.loaded:
                return
            self._warming = threading.Thread(
                target=self._warm, name="memvault-model-load", daemon=True
            )
            self._warming.start()

    def _warm(self) -> None:
        try:
            self.embedder.warm()
        except MemvaultError as exc:
            log.warning("the embedding model could not be loaded", extra={"error": exc.message})
        finally:
            with self._warm_lock:
                self._warming = None

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


def _is_markdown(path: str) -> bool:
    return path.lower().endswith(".md")


@dataclass
class _Appended:
    """A memory file as the append fast path last indexed it: bytes, running hash, lines."""

    data: bytes
    hasher: hashlib._Hash
    lines: int

    def hexdigest(self) -> str:
        return self.hasher.hexdigest()


def _property_at(frontmatter: str, line: int) -> str | None:
    """The frontmatter property a link on ``line`` (1-based) belongs to, as a relation type."""
    for text in reversed(frontmatter.split("\n")[:line]):
        found = _PROPERTY.match(text)
        if found:
            return relation_name(found.group(1)) or None
    return None


def _link_kind(link: Link) -> str:
    return "embed" if link.embed else ("markdown" if link.kind == "markdown" else "wikilink")


def _stale(row: Any, entry: FileEntry) -> bool:
    """Whether a note may have changed since it was indexed (read it again if so).

    The ctime is compared too: a same-size edit whose mtime a sync tool put
    back (rsync -t) still changes it.
    """
    indexed = (int(row["mtime_ns"]), int(row["size"]), int(row["ctime_ns"]))
    return indexed != (entry.mtime_ns, entry.size, entry.ctime_ns)


def _hash(data: bytes) -> str:
    """A note's content hash (notes.hash); _append_memories extends one incrementally."""
    return _new_hasher(data).hexdigest()


def _new_hasher(data: bytes | memoryview) -> hashlib._Hash:
    return hashlib.sha1(data)


def _chunk_meta(draft: ChunkDraft) -> tuple[Any, ...]:
    return (
        draft.ordinal,
        draft.kind,
        draft.start_line,
        draft.end_line,
        draft.heading,
        draft.group,
        draft.memory_id,
        draft.category,
        draft.importance,
        draft.created,
        int(draft.archived),
    )
