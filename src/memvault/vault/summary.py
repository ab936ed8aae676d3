"""A summary of a vault: how much of each kind of note, and the latest activity."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memvault.vault.contacts import CONTACTS_DIR
from memvault.vault.journal import JOURNAL_DIR
from memvault.vault.memories import Memories
from memvault.vault.projects import PROJECTS_DIR
from memvault.vault.store import Vault
from memvault.vault.tasks import ACTIVE_DIR, COMPLETED_DIR

KIND_FOLDERS = {
    "tasks_open": ACTIVE_DIR,
    "tasks_closed": COMPLETED_DIR,
    "contacts": CONTACTS_DIR,
    "projects": PROJECTS_DIR,
    "journal_days": JOURNAL_DIR,
    "insights": "Insights",
    "skills": "Skills",
}


@dataclass
class VaultSummary:
    """Counts per kind and the most recent change."""

    root: str
    notes: int
    counts: dict[str, int]
    memories_by_category: dict[str, int] = field(default_factory=dict)
    last_modified_path: str | None = None
    last_modified: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "root": self.root,
            "notes": self.notes,
            "counts": dict(self.counts),
            "memories_by_category": dict(self.memories_by_category),
            "last_activity": {
                "path": self.last_modified_path,
                "modified": self.last_modified.isoformat(timespec="seconds")
                if self.last_modified
                else None,
            },
        }


def summarize(vault: Vault, memories: Memories) -> VaultSummary:
    """Walk the vault once and count what is in it."""
    entries = vault.list()
    per_folder: Counter[str] = Counter(
        e.path.rsplit("/", 1)[0] if "/" in e.path else "" for e in entries
    )
    counts = {kind: per_folder.get(folder, 0) for kind, folder in KIND_FOLDERS.items()}
    active = memories.all(include_archived=False)
    # What was said in conversations shows under its category, not as memories.
    counts["memories"] = sum(1 for m in active if not m.said)
    by_category = Counter(m.category for m in active)
    latest = max(
        (e for e in entries if not e.path.startswith("Templates/")),
        key=lambda e: e.modified,
        default=None,
    )
    return VaultSummary(
        root=str(vault.root),
        notes=len(entries),
        counts=counts,
        memories_by_category=dict(sorted(by_category.items())),
        last_modified_path=latest.path if latest else None,
        last_modified=latest.modified if latest else None,
    )
