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
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memvault.acting import confined_agent, sees
from memvault.clock import Clock
from memvault.config import MemorySettings
from memvault.errors import InvalidInputError, MemvaultError, NotFoundError, NotTextError
from memvault.index.filters import SearchFilters
from memvault.index.index import MemoryIndex
from memvault.index.search import Searcher
from memvault.llm.base import ChatMessage, Provider
from memvault.llm.untrusted import UNTRUSTED, unfence, wrap_material
from memvault.memory.revisions import Change, Review, RevisionLog
from memvault.vault.journal import Journal
from memvault.vault.memories import HeldBy, Memories, Memory, MemoryFile, normalize_text

log = logging.getLogger(__name__)

ACTIONS = ("add", "update", "supersede", "noop")
JOURNAL_SECTION = "Memory"
CANDIDATES = 5
NEAR_IDENTICAL = 0.9  # token-set Jaccard at which the rule calls two memories the same
ANSWER_TOKENS = 400
_CHARS_PER_TOKEN = 4
_WORD = re.compile(r"\w+")

INSTRUCTIONS = """\
You keep the owner's memory tidy. A new memory is about to be stored; the \
existing memories nearest to it are listed with their ids. Choose one action:
- add: it is new information (choose this when unsure);
- update: it adds detail to one existing memory about the same thing and both \
fit in one sentence: give that memory's id as target and the merged sentence as text;
- supersede: it corrects or replaces one existing memory (a fact or preference \
that changed): give the old memory's id as target;
- noop: one existing memory already says the same: give its id as target.
Answer with one JSON object and nothing else: {"action": "add" | "update" | \
"supersede" | "noop", "target": an id from the list or null, "text": the merged \
sentence for update or null, "reason": one short sentence, "confidence": 0 to 1}."""


@dataclass(frozen=True)
class Decision:
    """What should happen to a new memory, and why."""

    action: str
    target: str | None = None
    text: str | None = None  # the merged text of an update
    reason: str = ""
    confidence: float | None = None
    by: str = "rule"  # rule, model or owner


@dataclass(frozen=True)
class Held:
    """A model answer that may not be applied: what it nominated (if anything) and why not."""

    problem: str
    decision: Decision | None = None


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


@dataclass
class _Candidate:
    memory: Memory
    tokens: frozenset[str] = field(default_factory=frozenset)


def tokens(text: str) -> frozenset[str]:
    """The words of a text, case-folded, as a set."""
    return frozenset(_WORD.findall(text.casefold()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Token-set overlap, 0 (nothing shared) to 1 (the same words)."""
    return len(a & b) / len(a | b) if a or b else 1.0


ADD_BY_RULE = Decision("add", reason="nothing close enough is remembered")


def rule_decision(new: Memory, candidates: Sequence[Memory]) -> Decision:
    """The conservative rule: near-identical text is a no-op, anything else is added."""
    norm, words = normalize_text(new.text), tokens(new.text)
    for candidate in candidates:
        if normalize_text(candidate.text) == norm:
            return Decision("noop", candidate.id, reason="the same text is already remembered")
        overlap = jaccard(words, tokens(candidate.text))
        if overlap >= NEAR_IDENTICAL and candidate.category == new.category:
            return Decision(
                "noop", candidate.id, reason=f"nearly the same words ({overlap:.2f} overlap)"
            )
    return ADD_BY_RULE


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
            decision = self._ask(provider, new, candidates) or rule
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

    def _ask(
        self, provider: Provider, new: Memory, candidates: list[Memory]
    ) -> Decision | Held | None:
        """The model's nomination, a :class:`Held` answer, or None when it could not answer."""
        system = f"{INSTRUCTIONS}\n\n{UNTRUSTED}"
        room = (self.settings.consolidation_max_tokens - ANSWER_TOKENS) * _CHARS_PER_TOKEN
        shown = list(candidates)
        while True:
            material = _material(new, shown)
            if len(system) + len(material) <= room or not shown:
                break
            shown.pop()  # the least relevant candidate goes first
        if not shown or len(system) + len(material) > room:
            log.info("consolidation prompt over its token budget; the rule decides")
            return None
        messages = [ChatMessage("system", system), ChatMessage("user", wrap_material(material))]
        try:
            completion = provider.complete(messages, max_tokens=ANSWER_TOKENS)
        except MemvaultError as exc:
            log.warning("consolidation model failed; the rule decides: %s", exc.message)
            return None
        if completion.stop_reason == "length":
            return Held("the model's answer was cut off at its token limit")
        return self._check(completion.text, new, [m.id for m in shown])

    def _check(self, answer: str, new: Memory, ids: list[str]) -> Decision | Held:
        """The model's answer as a decision that may be applied, or why it may not."""
        text = unfence(answer)
        if not text:
            return Held("the model's answer was empty")
        try:
            parsed = json.loads(text[text.find("{") : text.rfind("}") + 1] or text)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            return Held("the model's answer was not a JSON object")
        action = str(parsed.get("action", "")).strip().lower()
        target = parsed.get("target")
        target = str(target).strip().lstrip("^") if target not in (None, "", "null") else None
        merged = parsed.get("text")
        merged = " ".join(str(merged).split()) if isinstance(merged, str) else None
        reason = " ".join(str(parsed.get("reason") or "").split())[:300]
        try:
            confidence = float(parsed.get("confidence"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            confidence = None
        if action not in ACTIONS:
            return Held(f"the model answered an unknown action {action[:40]!r}")
        if action == "add":  # what happens anyway: no need to be sure of it
            return Decision("add", None, None, reason, confidence, by="model")
        decision = Decision(action, target, merged or None, reason, confidence, by="model")
        if target not in ids:
            named = f"named {target[:40]!r}" if target else "named no memory"
            nominated = Decision(action, None, merged or None, reason, confidence, by="model")
            return Held(f"the model {named}, which was not among the candidates", nominated)
        if action == "update":
            if not merged:
                return Held("the model's update had no merged text", decision)
            try:
                self.memories.prepare(merged, new.category)
            except InvalidInputError as exc:
                return Held(f"the model's merged text is not a memory: {exc.message}", decision)
        if confidence is None or not 0.0 <= confidence <= 1.0:
            return Held("the model gave no confidence between 0 and 1", decision)
        if confidence < self.settings.consolidation_min_confidence:
            limit = self.settings.consolidation_min_confidence
            return Held(f"the model was not sure enough ({confidence:.2f} < {limit:.2f})", decision)
        return decision

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
            line += f': "{_short(old_text or "")}" -> "{_short(new_text or "")}"'
        elif action in ("add", "noop"):
            line += f': "{_short(new_text or memory.text)}"'
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


def _short(text: str, width: int = 120) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _material(new: Memory, candidates: Sequence[Memory]) -> str:
    lines = ["Existing memories:"]
    for memory in candidates:
        lines.append(f"- id {memory.id} ({memory.category}): {memory.text}")
    lines += ["", f"New memory ({new.category}): {new.text}"]
    return "\n".join(lines)
