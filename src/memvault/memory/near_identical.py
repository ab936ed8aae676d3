"""Near-identical memories: the words two memories share, and the lookup of the stored
memories the rule could call the same as a new one.

Apart from consolidation because it is a question about words in the memory files,
asked without a model or the index: :class:`NearIdentical` finds the candidates by
their rarest words, and :func:`jaccard` over :func:`tokens` measures how alike two
texts are, for the rule (:func:`memvault.memory.nomination.rule_decision`) and the
agent-token checks alike.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from memvault.acting import sees
from memvault.vault.memories import Memory, MemoryFile, normalize_text

NEAR_IDENTICAL = 0.9  # token-set Jaccard at which the rule calls two memories the same
_WORD = re.compile(r"\w+")


def tokens(text: str) -> frozenset[str]:
    """The words of a text, case-folded, as a set."""
    return frozenset(_WORD.findall(text.casefold()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Token-set overlap, 0 (nothing shared) to 1 (the same words)."""
    return len(a & b) / len(a | b) if a or b else 1.0


@dataclass
class _FileWords:
    """Which memories of one parsed memory file hold each word (the first ``count``)."""

    file: MemoryFile
    count: int = 0
    holders: dict[str, list[int]] = field(default_factory=dict)

    def catch_up(self) -> None:
        """List the words of the memories appended to the file since the last call."""
        memories = self.file.memories
        for number in range(self.count, len(memories)):
            for word in tokens(memories[number].text):
                self.holders.setdefault(word, []).append(number)
        self.count = len(memories)


class NearIdentical:
    """The memories the rule could call the same as a new one, read from the memory files.

    A memory nearly the same shares :data:`NEAR_IDENTICAL` of the words of
    the two texts, so it lacks at most a few of the new text's words: it
    holds at least one of the new text's rarest words, one more than it may
    lack. Only the holders of those words are compared, whatever the vault's
    size, and no search runs. Each file's words are listed once and extended
    as lines are appended (a file parsed afresh is listed afresh).
    """

    def __init__(self) -> None:
        self._files: dict[str, _FileWords] = {}
        self._guard = threading.Lock()  # concurrent writers share the lists

    def find(self, new: Memory, files: Sequence[MemoryFile]) -> list[Memory]:
        """The memories of ``files`` whose text is the same as ``new``'s once normalised or
        shares :data:`NEAR_IDENTICAL` of its words, the same first, then the nearest; for a
        token bound to an agent, of that agent's own. Archived and superseded ones are
        left out."""
        words = tokens(new.text)
        if not words:
            return []  # nothing to compare by
        with self._guard:
            listed = [self._listed(file) for file in files]
            self._files = {entry.file.path: entry for entry in listed}
            by_rarity = sorted(
                words, key=lambda word: sum(len(e.holders.get(word, ())) for e in listed)
            )
            # The most words a near-identical memory may lack (Jaccard <= shared / ours).
            size = len(words)
            lacking = max(m for m in range(size) if (size - m) / size >= NEAR_IDENTICAL)
            held = [
                entry.file.memories[number]
                for entry in listed
                for word in by_rarity[: lacking + 1]
                for number in entry.holders.get(word, ())
            ]
        norm = normalize_text(new.text)
        seen: set[str] = set()
        found: list[tuple[bool, float, int, Memory]] = []
        for memory in held:
            if memory.id in seen or memory.retired or not sees(memory.agent):
                continue
            seen.add(memory.id)
            overlap = jaccard(words, tokens(memory.text))
            if overlap >= NEAR_IDENTICAL:
                same = normalize_text(memory.text) == norm
                found.append((not same, -overlap, len(found), memory))
        return [memory for *_, memory in sorted(found)]

    def _listed(self, file: MemoryFile) -> _FileWords:
        entry = self._files.get(file.path)
        if entry is None or entry.file is not file:  # new, or parsed afresh
            entry = _FileWords(file)
        entry.catch_up()
        return entry
