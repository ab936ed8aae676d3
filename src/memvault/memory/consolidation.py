"""Consolidation on write: a new memory is weighed against its nearest ones before it is stored.

The method (mem0's add / update / delete / no-op, without its traps: the
model only nominates, code applies, and nothing is deleted):

1. **Candidates**: with a model, one index search for the new text,
   memories only (archived and superseded ones are left out), the best
   five above the search's relevance floor, each checked against its file
   (the vault is the truth, the index may lag). Without one, the rule can
   only call a near-identical memory the same, so only those are looked
   up, by their rarest words (:class:`NearIdentical`), in the memory files
   as the store reads them under its lock: no search, and two writers of
   one fact store it once.
2. **Nomination**: by the model when one is configured (one call with a
   hard token budget and a short timeout, no retries; the candidates and
   the new text are handed over as data, never as instructions), else by a
   conservative rule: text that is the same once normalised, or nearly the
   same (token-set Jaccard >= 0.9) in the same category, is a no-op;
   anything else is added. A memory marked ``[trust:: low]`` (text from
   someone other than the owner that reads as an order, see
   :mod:`memvault.privacy.trust`) is always left to the rule: it never
   rewrites nor retires another memory.
3. **Checks**: an update or supersede or no-op must name one of the
   candidates, an update's merged text must be a valid memory. A model
   answer that is cut off, malformed, names another memory, or is less sure
   than ``memory.consolidation_min_confidence`` is not applied: the new
   memory is added as it is and the decision waits in ``memvault memory
   review``. A model that cannot be reached leaves the decision to the rule.
4. **Application**: *add* stores the memory; *update* rewrites the target's
   text in place (same id, ``[updated:: date]``, every other byte of the
   file as it was); *supersede* stores the new memory and marks the old
   bullet ``[superseded:: date] [superseded_by:: id]`` (kept, hidden from
   default search and context like an archived one); *no-op* writes nothing
   and names the memory that already holds it.

Each decision that changes, keeps back or declines something is written to
the day's journal (a "Memory" section) and to ``memory_changes``, which
``memvault memory history ID`` reads. A plain add by the rule writes neither:
it costs a lookup of a few words on top of the store. Bulk imports store through
:meth:`Memories.remember_many` directly and are not consolidated.

The nomination (the rule, the model's answer and its checks) lives in
:mod:`memvault.memory.nomination`, the near-identical lookup in
:mod:`memvault.memory.near_identical`; this module applies, holds and records.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memvault.acting import confined_agent
from memvault.clock import Clock
from memvault.config import MemorySettings
from memvault.errors import InvalidInputError, MemvaultError, NotFoundError, NotTextError
from memvault.index.filters import SearchFilters
from memvault.index.index import MemoryIndex
from memvault.index.search import Searcher
from memvault.llm.base import Provider
from memvault.memory.near_identical import NEAR_IDENTICAL, NearIdentical, jaccard, tokens
from memvault.memory.nomination import ADD_BY_RULE, Decision, Held, ask_model, rule_decision
from memvault.memory.revisions import Change, Review, RevisionLog
from memvault.text import cut
from memvault.vault.journal import Journal
from memvault.vault.memories import HeldBy, Memories, Memory, MemoryFile, normalize_text

# The names the rest of memvault imports from here (the rule's among them).
__all__ = [
    "NEAR_IDENTICAL",
    "Consolidated",
    "Consolidator",
    "Decision",
    "Held",
    "NearIdentical",
    "jaccard",
    "rule_decision",
    "tokens",
]

log = logging.getLogger(__name__)

JOURNAL_SECTION = "Memory"
CANDIDATES = 5


@dataclass(frozen=True)
class Consolidated:
    """What :meth:`Consolidator.remember` did.

    ``memory`` holds the fact now: the one stored, updated, or already
    holding it. ``action`` is add, update, supersede, noop or review (added
    as it was; the decision waits as review ``review``).
    """

    memory: Memory
    created: bool
    action: str
    reason: str = ""
    target: str | None = None
    review: int | None = None

    def note(self) -> str:
        """One sentence for whoever asked to remember."""
        target = self.target or self.memory.id
        return {
            "add": "stored",
            "update": f"merged into the existing memory {target}",
            "supersede": f"stored; it supersedes {target}",
            "noop": f"already remembered as {target}; nothing was added",
            "review": (
                f"stored as it was; consolidation was unsure, see `memvault memory review "
                f"{self.review}`"
            ),
        }.get(self.action, "stored")

    def to_dict(self) -> dict[str, Any]:
        """The consolidation fields a surface adds to the memory it returns."""
        return {
            "action": self.action,
            "target": self.target,
            "reason": self.reason,
            "review": self.review,
            "note": self.note(),
        }

    def response(self) -> dict[str, Any]:
        """What a surface answers a remember with: the memory, whether it is new, and what
        consolidation decided (the HTTP route and the CLI alike)."""
        return {
            **self.memory.to_dict(),
            "created_new": self.created,
            "consolidation": self.to_dict(),
        }


class Consolidator:
    """Stores single memories with consolidation; see the module docstring."""

    def __init__(
        self,
        memories: Memories,
        index: Callable[[], MemoryIndex],
        revisions: Callable[[], RevisionLog],
        journal: Journal,
        clock: Clock,
        settings: MemorySettings,
        provider: Callable[[], Provider | None],
    ) -> None:
        self.memories = memories
        self._index = index
        self._revisions = revisions
        self.journal = journal
        self.clock = clock
        self.settings = settings
        self._provider = provider
        self._searcher: Searcher | None = None
        self.near = NearIdentical()

    @property
    def revisions(self) -> RevisionLog:
        """The change log and review list (state.db, opened on first use)."""
        return self._revisions()

    # -- remember ----------------------------------------------------------------

    def remember(
        self,
        text: str,
        category: str | None = None,
        importance: float | None = None,
        tags: Iterable[str] = (),
        source: str | None = None,
    ) -> Consolidated:
        """Store one memory as consolidation decides (see the module docstring)."""
        tags = tuple(tags)
        mode = self.settings.consolidation
        provider = self._provider() if mode in ("auto", "model") else None
        if mode == "off" or (mode == "model" and provider is None):
            return self._add(text, category, importance, tags, source, Decision("add"))
        if provider is None:
            return self._by_rule(text, category, importance, tags, source)
        new = self.memories.prepare(text, category, importance, tags, source)
        if new.trust == "low":
            # Text that reads as an order from someone else never rewrites nor retires a
            # memory: it is added beside them, or declined as a near-identical duplicate.
            return self._by_rule(text, category, importance, tags, source)
        candidates = self._candidates(new)
        rule = rule_decision(new, candidates)
        decision: Decision | Held = rule
        if candidates and rule.action != "noop":
            decision = ask_model(provider, new, candidates, self.settings, self.memories) or rule
        if isinstance(decision, Held):
            return self._hold(text, category, importance, tags, source, decision, candidates)
        return self._apply(decision, text, category, importance, tags, source, new)

    def _by_rule(
        self,
        text: str,
        category: str | None,
        importance: float | None,
        tags: Sequence[str],
        source: str | None,
    ) -> Consolidated:
        """The rule without a model. It acts on near-identical memories only, so only those
        are looked for (no search), in the files the store reads under its lock: two writers
        of one fact store it once."""
        ruled: list[tuple[Decision, Memory]] = []

        def held_by(new: Memory, files: Sequence[MemoryFile]) -> Memory | None:
            candidates = self.near.find(new, files)
            decision = rule_decision(new, candidates)
            holder = next((c for c in candidates if c.id == decision.target), None)
            if decision.action == "noop" and holder is not None:
                ruled.append((decision, new))
            return holder

        added = self._add(text, category, importance, tags, source, ADD_BY_RULE, held_by)
        if not ruled:
            return added
        decision, new = ruled[0]  # applied as before: named, and journaled if worded otherwise
        return self._apply(decision, text, category, importance, tags, source, new)

    def _candidates(self, new: Memory) -> list[Memory]:
        """The nearest memories to ``new`` now in the vault (at most :data:`CANDIDATES`); for
        a token bound to an agent, of that agent's own (another's is never shown or changed)."""
        agent = confined_agent()
        own = None if agent is None else frozenset(self.memories.of_agent(agent))
        try:
            if self._searcher is None:
                self._searcher = Searcher(self._index())  # its own: these are not recalls
            hits = self._searcher.search(
                new.text,
                limit=CANDIDATES,
                filters=SearchFilters(kinds=("memory",), memory_ids=own),
                mode="hybrid",
                wait_for_model=False,
            )
        except (MemvaultError, sqlite3.Error):
            log.warning("consolidation could not search; the memory is added", exc_info=True)
            return []
        found: list[Memory] = []
        seen: set[str] = set()
        files: dict[str, MemoryFile] = {}  # the hits mostly share a category's file: read once
        for hit in hits:
            if not hit.id:
                continue
            try:
                if hit.path not in files:
                    files[hit.path] = self.memories.read(hit.path)
                memory = files[hit.path].find(hit.id)
            except (MemvaultError, NotTextError):
                continue
            if memory is None or memory.said:  # said in a chat, not remembered
                continue
            if not memory.retired and memory.id not in seen:
                seen.add(memory.id)
                found.append(memory)
        return found

    # -- applying ----------------------------------------------------------------

    def _add(
        self,
        text: str,
        category: str | None,
        importance: float | None,
        tags: Sequence[str],
        source: str | None,
        decision: Decision,
        held_by: HeldBy | None = None,
    ) -> Consolidated:
        result = self.memories.remember(text, category, importance, tags, source, held_by=held_by)
        if not result.created:
            reason = "the same text is already remembered"
            return Consolidated(result.memory, False, "noop", reason, result.memory.id)
        return Consolidated(result.memory, True, "add", decision.reason)

    def _apply(
        self,
        decision: Decision,
        text: str,
        category: str | None,
        importance: float | None,
        tags: Sequence[str],
        source: str | None,
        new: Memory,
    ) -> Consolidated:
        try:
            return self._apply_to_target(decision, new)
        except NotFoundError:  # the target was removed meanwhile: the memory is added
            pass
        added = self._add(text, category, importance, tags, source, decision)
        if decision.action == "supersede" and decision.target and added.created:
            try:
                old = self._supersede(decision.target, added.memory.id)
            except NotFoundError:
                return added
            self._log(old, "superseded", decision, related=added.memory.id)
            return Consolidated(added.memory, True, "supersede", decision.reason, old.id)
        if decision.by == "model" and added.created:
            self._log(added.memory, "add", decision, new_text=added.memory.text)
        return added

    def _apply_to_target(self, decision: Decision, new: Memory) -> Consolidated:
        """An update or no-op, which store nothing new; NotFoundError to add instead."""
        if decision.action == "noop" and decision.target is not None:
            target = self.memories.get(decision.target)
            if normalize_text(target.text) == normalize_text(new.text):
                # The plain duplicate remember always declined: nothing to journal.
                return Consolidated(target, False, "noop", decision.reason, target.id)
            self._log(target, "noop", decision, new_text=new.text)
            return Consolidated(target, False, "noop", decision.reason, target.id)
        if decision.action == "update" and decision.target and decision.text:
            after = self._update(decision.target, decision.text, decision)
            return Consolidated(after, False, "update", decision.reason, after.id)
        raise NotFoundError("This decision stores a new memory.")

    def _update(self, target_id: str, text: str, decision: Decision) -> Memory:
        """Merge ``text`` into the memory ``target_id`` (its id kept) and log the change."""
        before = self.memories.get(target_id)
        after = self.memories.update_text(before.id, text, updated=self._today())
        self._log(after, "update", decision, old_text=before.text, new_text=after.text)
        return after

    def _supersede(self, old_id: str, new_id: str) -> Memory:
        return self.memories.update_fields(old_id, superseded=self._today(), superseded_by=new_id)

    def _hold(
        self,
        text: str,
        category: str | None,
        importance: float | None,
        tags: Sequence[str],
        source: str | None,
        held: Held,
        candidates: list[Memory],
    ) -> Consolidated:
        added = self._add(text, category, importance, tags, source, Decision("add"))
        if not added.created:
            return added
        nominated = held.decision
        review = self._safely(
            lambda: self.revisions.hold(
                memory_id=added.memory.id,
                text=added.memory.text,
                action=nominated.action if nominated else None,
                target=nominated.target if nominated else None,
                merged_text=nominated.text if nominated else None,
                reason=nominated.reason if nominated else "",
                confidence=nominated.confidence if nominated else None,
                problem=held.problem,
                candidates=[m.id for m in candidates],
                when=self.clock.now(),
            )
        )
        self._journal(
            f"held for review{f' #{review}' if review else ''}: {_link(added.memory)} "
            f"was added as it was; {held.problem}"
        )
        return Consolidated(added.memory, True, "review", held.problem, None, review)

    # -- reviews -----------------------------------------------------------------

    def reviews(self) -> list[Review]:
        """The decisions waiting for the owner, oldest first."""
        return self.revisions.reviews(tz=self.clock.tz)

    def apply_review(self, review_id: int) -> Review:
        """Apply a held decision as the owner: nothing is deleted, the added copy is
        marked superseded when the decision makes it redundant."""
        review = self.revisions.review(review_id, tz=self.clock.tz)
        if review.status != "pending":
            raise InvalidInputError(f"Memory review {review_id} was already {review.status}.")
        if not review.applicable:
            raise InvalidInputError(
                f"Memory review {review_id} holds no decision that can be applied "
                f"({review.problem or 'nothing was nominated'}); dismiss it with --dismiss."
            )
        decision = Decision(
            str(review.action), review.target, review.merged_text, review.reason, by="owner"
        )
        if review.action == "update" and review.target and review.merged_text:
            after = self._update(review.target, review.merged_text, decision)
            self._retire_copy(review, after.id, decision)
        elif review.action == "supersede" and review.target:
            self.memories.get(review.memory_id)  # the new memory must still be there
            old = self._supersede(review.target, review.memory_id)
            self._log(old, "superseded", decision, related=review.memory_id)
        elif review.action == "noop" and review.target:
            self.memories.get(review.target)
            self._retire_copy(review, review.target, decision)
        self.revisions.resolve(review_id, "applied", self.clock.now())
        return self.revisions.review(review_id, tz=self.clock.tz)

    def dismiss_review(self, review_id: int) -> Review:
        """Drop a held decision; the memory added as it was stays."""
        self.revisions.resolve(review_id, "dismissed", self.clock.now())
        return self.revisions.review(review_id, tz=self.clock.tz)

    def _retire_copy(self, review: Review, holder: str, decision: Decision) -> None:
        """Mark the copy added while the decision waited as superseded by ``holder``."""
        copy = self.memories.get(review.memory_id)
        if copy.id == holder:
            return
        retired = self._supersede(copy.id, holder)
        self._log(retired, "superseded", decision, related=holder)

    # -- the record ----------------------------------------------------------------

    def history(self, memory_id: str) -> list[Change]:
        """What consolidation and reviews changed in a memory, oldest first."""
        return self.revisions.history(memory_id.strip().lstrip("^"), tz=self.clock.tz)

    # -- the owner's own changes ------------------------------------------------------

    def edit(self, memory_id: str, text: str, *, expected_hash: str) -> Memory:
        """The owner's new text for a memory (its id and fields kept), written only if its
        note still holds what the owner read (``expected_hash``, the note's hash): an edit
        made since, in Obsidian say, is a ConflictError and nothing is written."""
        before = self.memories.get(memory_id)
        after = self.memories.update_text(
            before.id, text, expected_hash=expected_hash, updated=self._today()
        )
        if after.text != before.text:
            self._log(after, "update", _BY_OWNER, old_text=before.text, new_text=after.text)
        return after

    def recategorize(self, memory_id: str, category: str) -> Memory:
        """Move a memory to another category (its id and text kept), logged in its history."""
        before = self.memories.get(memory_id)
        after = self.memories.recategorize(before.id, category)
        if after.category != before.category:
            moved = Decision(
                "recategorize", reason=f"{before.category} -> {after.category}", by="owner"
            )
            self._log(after, "recategorize", moved)
        return after

    def tag(self, memory_id: str, tags: Sequence[str]) -> Memory:
        """Add tags to a memory, logged in its history."""
        before = self.memories.get(memory_id)
        after = self.memories.add_tags(before.id, tags)
        added = [t for t in after.tags if t not in before.tags]
        if added:
            why = "added " + " ".join(f"#{t}" for t in added)
            self._log(after, "tag", Decision("tag", reason=why, by="owner"))
        return after

    def _log(
        self,
        memory: Memory,
        action: str,
        decision: Decision,
        *,
        old_text: str | None = None,
        new_text: str | None = None,
        related: str | None = None,
    ) -> None:
        """Record a change in state.db and the journal (the vault write already happened,
        so a failure here is logged, never raised)."""
        change = Change(
            memory_id=memory.id,
            action=action,
            old_text=old_text,
            new_text=new_text,
            related_id=related,
            reason=decision.reason,
            decided_by=decision.by,
            at=self.clock.now(),
        )
        self._safely(lambda: self.revisions.record(change))
        words = {
            "add": "added",
            "update": "updated",
            "superseded": f"superseded by {related}:",
            "noop": "already holds",
        }
        line = f"{words.get(action, action)} {_link(memory)}"
        if action == "update":
            line += f': "{cut(old_text or "", 120)}" -> "{cut(new_text or "", 120)}"'
        elif action in ("add", "noop"):
            line += f': "{cut(new_text or memory.text, 120)}"'
        why = f" ({decision.by}: {decision.reason})" if decision.reason else f" ({decision.by})"
        self._journal(line + why)

    def _journal(self, line: str) -> None:
        self._safely(lambda: self.journal.append(JOURNAL_SECTION, line))

    def _safely(self, write: Callable[[], Any]) -> Any:
        try:
            return write()
        except (MemvaultError, sqlite3.Error, OSError):
            log.warning("consolidation could not record a decision", exc_info=True)
            return None

    def _today(self) -> str:
        return self.clock.now().date().isoformat()


_BY_OWNER = Decision("update", reason="edited by the owner", by="owner")


def _link(memory: Memory) -> str:
    return f"[[{memory.path[:-3]}#^{memory.id}|{memory.id}]]"
