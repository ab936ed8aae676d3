"""What was imported before: the ``imports`` table of state.db, by a hash of each item.

Every entry an importer writes has a hash of its kind and normalised text (and its
date, for a daily log: :func:`item_hash`), recorded once the entry is written, so
importing the same files again adds nothing. A dry run only reads the table.
"""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import date
from typing import TYPE_CHECKING

from memvault import sqlite as sql
from memvault.locations import STATE_DB
from memvault.vault.memories import normalize_text

if TYPE_CHECKING:
    from memvault.runtime import Runtime


def item_hash(kind: str, text: str, day: date | None = None) -> str:
    """The identity of an imported item: its kind, normalised text and (daily logs) date."""
    key = f"{kind}\n{day.isoformat() if day else ''}\n{normalize_text(text)}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ImportLedger:
    """The ``imports`` table of state.db: which items were imported, by hash.

    A dry run only reads it (from a read-only connection when no write has
    opened state.db yet), so it creates and changes nothing.
    """

    def __init__(self, runtime: Runtime, *, dry_run: bool) -> None:
        self.runtime = runtime
        self.dry_run = dry_run
        self._known: dict[str, set[str]] = {}

    def known(self, kind: str, digest: str) -> bool:
        """Whether the item was imported before (or earlier in this run)."""
        if kind not in self._known:
            self._known[kind] = self._load(kind)
        return digest in self._known[kind]

    def record(self, kind: str, digest: str, target: str, source: str) -> None:
        """Note an item as imported (a dry run only remembers it for this run)."""
        self._known.setdefault(kind, self._load(kind)).add(digest)
        if self.dry_run:
            return
        with self.runtime.state.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO imports (kind, item_hash, target, source, imported_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (kind, digest, target, source, self.runtime.clock.now().isoformat()),
            )

    def _load(self, kind: str) -> set[str]:
        statement = "SELECT item_hash FROM imports WHERE kind = ?"
        if not self.dry_run or "state" in self.runtime.__dict__:
            return {str(r[0]) for r in self.runtime.state.query(statement, (kind,))}
        path = self.runtime.vault.state_dir / STATE_DB
        if not path.exists():
            return set()
        try:
            conn = sqlite3.connect(sql.read_only_uri(path), uri=True)
            try:
                return {str(r[0]) for r in conn.execute(statement, (kind,))}
            finally:
                conn.close()
        except sqlite3.Error:  # no imports table yet (an older schema): nothing imported
            return set()
