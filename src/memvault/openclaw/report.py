"""What an OpenClaw import did, or with ``--dry-run`` would do: :class:`ImportReport`.

Each importer (:mod:`memvault.openclaw.importers`) fills one: what was written by
target (memories, tasks, journal entries, sessions, conversation turns), what was
skipped as already imported or already in the vault, the problems met (one sentence
each) and the kinds of secret kept out. A workspace import holds one report a file
kind; the CLI prints its one-sentence summary and the problems, or its JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memvault.vocabulary import counted


@dataclass
class ImportReport:
    """What one import did (or, with ``dry_run``, would do).

    ``items`` counts what was written by target (``memories``, ``tasks``,
    ``journal entries``, ``sessions``); ``skipped`` counts entries already
    imported or already in the vault; ``problems`` are one sentence each.
    A workspace import holds one report per file kind in ``parts``.
    """

    kind: str
    path: str
    dry_run: bool = False
    imported: int = 0
    skipped: int = 0
    items: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    parts: list[ImportReport] = field(default_factory=list)
    secrets_removed: list[str] = field(default_factory=list)  # kinds, each once

    def add(self, target: str, number: int = 1) -> None:
        """Count ``number`` items written to ``target``."""
        self.items[target] = self.items.get(target, 0) + number

    def secrets(self, kinds: list[str]) -> None:
        """Note the kinds of secret replaced by a marker in what is imported."""
        self.secrets_removed.extend(k for k in kinds if k not in self.secrets_removed)

    def absorb(self, part: ImportReport) -> None:
        """Take a file kind's report into this workspace report."""
        self.parts.append(part)
        self.imported += part.imported
        self.skipped += part.skipped
        for target, number in part.items.items():
            self.add(target, number)
        self.problems.extend(part.problems)
        self.secrets(part.secrets_removed)

    def counts(self) -> dict[str, int]:
        """Counts as the summary names them (learnings apart from other memories)."""
        if self.parts:
            out: dict[str, int] = {}
            for part in self.parts:
                for name, number in part.counts().items():
                    out[name] = out.get(name, 0) + number
            return out
        if self.kind == "learnings":
            return {"learnings": self.items.get("memories", 0)}
        return dict(self.items)

    def summary(self) -> str:
        """One sentence: what was (or would be) imported and what was skipped."""
        counts = self.counts()
        nouns = (
            ("memories", "memory"),
            ("journal entries", "journal entry"),
            ("sessions", "session"),
            ("conversation turns", "conversation turn"),
            ("tasks", "task"),
            ("learnings", "learning"),
        )
        said = [counted(counts[name], noun) for name, noun in nouns if counts.get(name)]
        verb = "Would import" if self.dry_run else "Imported"
        head = f"{verb} {', '.join(said)}" if said else f"{verb} nothing"
        if self.skipped:
            head += (
                f"; {'would skip' if self.dry_run else 'skipped'} {self.skipped} already imported"
            )
        return head + "."

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "path": self.path,
            "dry_run": self.dry_run,
            "imported": self.imported,
            "skipped": self.skipped,
            "items": dict(self.items),
            "problems": list(self.problems),
            "summary": self.summary(),
        }
        if self.secrets_removed:  # kinds replaced by a marker in what was imported
            out["secrets_removed"] = list(self.secrets_removed)
        if self.kind == "openclaw":
            out["missing"] = list(self.missing)
            out["parts"] = [part.to_dict() for part in self.parts]
        return out
