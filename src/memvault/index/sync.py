"""Holding the index to the vault: what is new, changed, moved or gone.

``sync`` compares the vault with the database by modification time and size (a no-op
sync reads no file) and by content hash (a moved note keeps its chunks and vectors);
``sync_paths`` checks just the paths a watcher or a write names; ``on_change`` follows
every write memvault makes (lines appended to a memory file take the fast path of
``appending``). A file that cannot be indexed is left out, and why is kept
(``unreadable``, which the doctor reports).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memvault.errors import InvalidInputError, NotFoundError, UnsafePathError
from memvault.index.appending import MemoryAppends, note_hash
from memvault.index.chunking import kind_of
from memvault.index.connection import Progress, locked
from memvault.sqlite import transaction
from memvault.storage.pg_schema import INDEX_TABLES
from memvault.vault.memories import MEMORY_DIR
from memvault.vault.store import Change, FileEntry

log = logging.getLogger(__name__)

# A larger file named .md is not indexed: it would hold up every sync and fill memory.
MAX_INDEXED_BYTES = 16 * 1024 * 1024
# What a file's content can provoke while it is parsed and stored (a value no
# UTF-8 can encode, say); the index then leaves that one file out and goes on.
# Failures of the database itself still stop the run.
_NOTE_FAULTS = (ValueError, TypeError, OverflowError, RecursionError, LookupError)


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


class VaultSync(MemoryAppends):
    """Brings the index in line with the vault, and follows its changes."""

    unreadable: dict[str, str]

    # -- what is indexed -----------------------------------------------------------

    def _excluded(self, path: str) -> bool:
        return any(path == f or path.startswith(f.rstrip("/") + "/") for f in self.settings.exclude)

    def _scan(self) -> dict[str, FileEntry]:
        return {e.path: e for e in self.vault.list() if not self._excluded(e.path)}

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
            digest = note_hash(data)
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


def _is_markdown(path: str) -> bool:
    return path.lower().endswith(".md")


def _stale(row: Any, entry: FileEntry) -> bool:
    """Whether a note may have changed since it was indexed (read it again if so).

    The ctime is compared too: a same-size edit whose mtime a sync tool put
    back (rsync -t) still changes it.
    """
    indexed = (int(row["mtime_ns"]), int(row["size"]), int(row["ctime_ns"]))
    return indexed != (entry.mtime_ns, entry.size, entry.ctime_ns)
