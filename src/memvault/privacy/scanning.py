"""Secrets already in the vault: listed on request, replaced only on the owner's word.

Text stored through memvault is screened as it comes in
(:mod:`memvault.privacy.secrets`); what was there before, or typed into a
note by hand, is never rewritten behind the owner's back. ``memvault
privacy scan`` lists it (path, line, kind, the memory's id, a masked
preview: never the secret), and ``--redact`` replaces what it listed by the
same markers. The replacement is one recorded run of the job engine's undo
store (:mod:`memvault.jobs.changes`): the caller hands in ``will_change``,
which keeps each file's bytes before it is touched, so ``memvault privacy
undo`` puts them back, or refuses, naming the file, when it was edited since.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memvault.errors import MemvaultError, NotTextError
from memvault.privacy.secrets import Finding, find_secrets, redact
from memvault.vault.memories import MEMORY_DIR, Memories
from memvault.vault.store import Vault

log = logging.getLogger(__name__)

# Told (files read, files in all) while the vault is scanned.
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Found:
    """A secret in a vault file, as a person is shown it: where, what kind, a masked preview.

    ``value`` is kept to replace exactly what was listed, and never shown.
    """

    path: str
    line: int
    kind: str
    preview: str
    memory: str | None = None  # the memory's id, for a line of a memory file
    value: str = field(default="", repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, without the secret."""
        return {
            "path": self.path,
            "line": self.line,
            "kind": self.kind,
            "preview": self.preview,
            "memory": self.memory,
        }


def scan_vault(
    vault: Vault, memories: Memories, *, progress: Progress | None = None
) -> list[Found]:
    """Every secret in the vault's notes and memories, file by file, in order.

    A file that is not text, or cannot be read, is left out (and logged).
    """
    entries = vault.list("", recursive=True, notes_only=True)
    out: list[Found] = []
    for done, entry in enumerate(entries, start=1):
        try:
            text = vault.read_text(entry.path)
        except (MemvaultError, NotTextError) as exc:
            log.warning("not scanned for secrets", extra={"path": entry.path, "error": str(exc)})
            text = ""
        out.extend(scan_text(entry.path, text, memories))
        if progress is not None:
            progress(done, len(entries))
    return out


def scan_text(path: str, text: str, memories: Memories) -> list[Found]:
    """The secrets of one file's ``text`` (a memory file's lines name their memory)."""
    findings = find_secrets(text)
    if not findings:
        return []
    ids: dict[int, str] = {}
    if path.startswith(f"{MEMORY_DIR}/"):
        ids = {m.line: m.id for m in memories.parse_text(path, text)}
    out = []
    for finding in findings:
        line = finding.line(text)
        out.append(Found(path, line, finding.kind, finding.masked(), ids.get(line), finding.value))
    return out


def redact_found(
    vault: Vault, found: Sequence[Found], will_change: Callable[[str], str]
) -> list[tuple[str, int]]:
    """Replace the secrets ``found`` listed by their markers; returns each file changed with
    how many were replaced.

    Only what was listed is replaced: each file is read again under its lock and a
    secret counts only if it is still there with the same value (one edited away since
    is left to the edit). ``will_change`` is called before a file is touched (the undo
    store keeps its bytes).
    """
    by_path: dict[str, list[Found]] = {}
    for item in found:
        by_path.setdefault(item.path, []).append(item)
    changed: list[tuple[str, int]] = []
    for path, listed in by_path.items():
        wanted = {(item.kind, item.value) for item in listed}
        if not vault.is_file(path) or not _listed_in(vault.read_text(path), wanted):
            continue  # edited away since the scan: nothing of it to replace
        will_change(path)
        count = _redact_file(vault, path, wanted)
        if count:
            changed.append((path, count))
    return changed


def _redact_file(vault: Vault, path: str, wanted: set[tuple[str, str]]) -> int:
    """Replace the listed secrets of one file under its lock; how many were replaced."""
    counted = [0]

    def replace_listed(current: str | None) -> str | None:
        chosen = _listed_in(current or "", wanted)
        counted[0] = len(chosen)
        return redact(current or "", chosen) if chosen else None

    vault.edit_text(path, replace_listed)
    return counted[0]


def _listed_in(text: str, wanted: set[tuple[str, str]]) -> list[Finding]:
    """The secrets of ``text`` that the scan listed (same kind, same value)."""
    return [f for f in find_secrets(text) if (f.kind, f.value) in wanted]


def kinds_in(found: Iterable[Found]) -> list[str]:
    """The kinds listed, each once."""
    return list(dict.fromkeys(item.kind for item in found))
