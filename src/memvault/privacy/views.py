"""What a narrowed audience sees: its context, its search, and its own place to remember.

A contact or a group (:mod:`memvault.privacy.audiences`) never gets the
owner's context. Their agent is given, within the same token budget:

1. what is relevant to the request among what is shared with them (memories
   and notes), found by the same hybrid search, filtered here;
2. the other memories shared with them, most important first.

No core note, task, journal, last session or other memory is read for them.
What they ask the agent to remember goes to their own place, attributed and
marked ``[trust:: low]``: the contact's note (section *Told by them*), or the
group's note ``Groups/NAME.md`` (shared with the group, so it sees it back);
never into the owner's memory categories.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from memvault.clock import Clock
from memvault.errors import MemvaultError, NotFoundError, NotTextError
from memvault.index.filters import SearchFilters
from memvault.index.search import Hit, Searcher
from memvault.memory.context import (
    ContextResult,
    Recalled,
    Section,
    Underway,
    fit_sections,
    rank_memories,
    worth_attention,
)
from memvault.privacy.audiences import CONTACT_KIND, SHARE_FIELD, Audience
from memvault.privacy.reads import recorded_context
from memvault.privacy.trust import REASON_FIELD, inert, judge
from memvault.vault.collection import Collection
from memvault.vault.contacts import CONTACTS_DIR
from memvault.vault.markdown import append_to_section
from memvault.vault.memories import Memories, Memory
from memvault.vault.note import Note
from memvault.vault.notes import Notes
from memvault.vault.paths import safe_filename
from memvault.vocabulary import CONVERSATION, KINDS

GROUPS_DIR = "Groups"
TOLD_SECTION = "Told by them"
_SEARCH_LIMIT = 200
_NOTE_KINDS = tuple(kind for kind in KINDS if kind != "memory")
_MAX_RELEVANT = 10
_MAX_TEXT = 1000
_RECENCY_BIAS = 0.3


def _flat(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Found:
    """One search hit an audience may see, with the memory it is, if it is one."""

    hit: Hit
    memory: Memory | None


class AudienceView:
    """Search, context and remembering for one narrowed audience."""

    def __init__(
        self,
        audience: Audience,
        *,
        memories: Memories,
        notes: Notes,
        searcher: Searcher,
        clock: Clock,
        record: Callable[[Iterable[str], str], Any] | None = None,
    ) -> None:
        self.audience = audience
        self._record = record
        self.memories = memories
        self.notes = notes
        self.searcher = searcher
        self.clock = clock
        self._own = Collection(notes.vault, (CONTACTS_DIR, GROUPS_DIR), "note")

    # -- what they may see ---------------------------------------------------------

    def shared_memories(self, *, said: bool = False) -> list[Memory]:
        """The memories shared with this audience (none archived or superseded); with
        ``said``, the turns of their conversations too (:mod:`memvault.privacy.capture`)."""
        listed = self.memories.list()
        if said:
            listed += self.memories.list(category=CONVERSATION)
        return [m for m in listed if self.audience.sees_memory(m)]

    def sees_path(self, path: str) -> bool:
        """Whether the note at ``path`` is theirs to see."""
        if path == self.audience.contact_path:
            return True
        try:
            note = self.notes.read(path).note
        except (NotFoundError, NotTextError):
            return False
        return self.audience.sees_note(path, note)

    def search(self, query: str, limit: int = 10, *, wait_for_model: bool = True) -> list[Found]:
        """The best hits for ``query`` among what is shared with them, best first."""
        shared = {m.id: m for m in self.shared_memories(said=True)}
        found: list[Found] = []
        if shared:
            hits = self.searcher.search(
                query,
                limit=min(limit, _SEARCH_LIMIT),
                filters=SearchFilters(memory_ids=frozenset(shared)),
                wait_for_model=wait_for_model,
            )
            found.extend(Found(h, shared[h.id]) for h in hits if h.id in shared)
        checked: dict[str, bool] = {}
        # Notes only (a memory is never returned here, so none is read that is not theirs).
        notes = SearchFilters(kinds=_NOTE_KINDS)
        hits = self.searcher.search(
            query, limit=_SEARCH_LIMIT, filters=notes, wait_for_model=wait_for_model
        )
        for hit in hits:
            if hit.id is not None:
                continue
            if hit.path not in checked:
                checked[hit.path] = self.sees_path(hit.path)
            if checked[hit.path]:
                found.append(Found(hit, None))
        found.sort(key=lambda f: -f.hit.score)
        return found[:limit]

    # -- context -------------------------------------------------------------------

    def context(
        self,
        query: str | None,
        budget_tokens: int,
        *,
        wait_for_model: bool = True,
        underway: Underway | None = None,
    ) -> ContextResult:
        """What their agent is told at the start of a run, within ``budget_tokens``; every
        memory it searched for or shows is recorded as read (path ``context``). The turns
        of the conversation ``underway`` are not shown: the model has them already."""
        return recorded_context(
            self._record, lambda: self._context(query, budget_tokens, wait_for_model, underway)
        )

    def _context(
        self,
        query: str | None,
        budget_tokens: int,
        wait_for_model: bool,
        underway: Underway | None,
    ) -> ContextResult:
        used: set[str] = set()
        sections: list[Section] = []
        recalled: list[Recalled] = []
        if query and query.strip():
            found = [
                f
                for f in self.search(query.strip(), _SEARCH_LIMIT, wait_for_model=wait_for_model)
                if underway is None or not underway.holds(f.hit)
            ]
            worth = {id(h) for h in worth_attention([f.hit for f in found])}
            lines = []
            for item in found:
                if id(item.hit) not in worth:
                    continue
                if item.memory is not None:
                    used.add(item.memory.id)
                    lines.append(self._memory_line(item.memory))
                else:
                    lines.append(self._note_line(item.hit))
                recalled.append(Recalled.of(item.hit))
                if len(lines) >= _MAX_RELEVANT:
                    break
            sections.append(Section(f"Relevant to: {_flat(query)[:80]}", lines))
        rest = rank_memories(
            [m for m in self.shared_memories() if m.id not in used],
            now=self.clock.now(),
            recency_bias=_RECENCY_BIAS,
        )
        sections.append(
            Section(f"Shared with {self.audience.display}", [self._memory_line(m) for m in rest])
        )
        result = fit_sections(sections, budget_tokens)
        result.recalled = recalled
        return result

    @staticmethod
    def _memory_line(memory: Memory) -> str:
        return f"- {_flat(memory.text)} ({memory.category}, ^{memory.id})"

    @staticmethod
    def _note_line(hit: Hit) -> str:
        link = hit.path.removesuffix(".md")
        body = _flat(" ".join(x for x in hit.snippet.split("\n") if not x.startswith("#")))
        return f"- [[{link}]]: {body[:200]}" if body else f"- [[{link}]]"

    # -- remembering ---------------------------------------------------------------

    def remember(self, text: str, *, by: str, channel: str | None) -> str:
        """Keep what they asked to remember in their own place; returns the note's path.

        The words are theirs: attributed, marked low trust (with the reason, when they
        read as an instruction to the agent), hidden characters made visible, and defused
        so they cannot become a tag, a field or a link (``#share/...`` would widen who
        sees the note).
        """
        verdict = judge(text)
        clean = inert(text)
        if self.notes.screen is not None:  # secrets stay out, as from anyone ([privacy] secrets)
            clean = self.notes.screen(clean)
        clean = clean[:_MAX_TEXT]
        if not clean:
            raise MemvaultError("There is nothing to remember; say it in a sentence.")
        when = self.clock.now().strftime("%Y-%m-%d %H:%M")
        where = f" on {channel}" if channel else ""
        line = f"- {when} {_flat(by)}{where}: {clean} [trust:: low]"
        if verdict.instruction:
            why = inert(verdict.reason)
            line += f" [{REASON_FIELD}:: {why}]"
        path = self._own_note()

        def add(note: Note) -> None:
            note.body = append_to_section(note.body, TOLD_SECTION, line)

        self._own.update(path, add)
        return path

    def _own_note(self) -> str:
        """The contact's note, or the group's (created the first time, shared with it)."""
        if self.audience.kind == CONTACT_KIND:
            if self.audience.contact_path is None:
                raise NotFoundError(
                    "They have no contact note to remember in; the owner can make one "
                    "with `memvault contacts add`."
                )
            return self.audience.contact_path
        path = f"{GROUPS_DIR}/{safe_filename(self.audience.name)}.md"
        note = Note.parse(f"# {self.audience.name}\n")
        note.set(SHARE_FIELD, [self.audience.name])
        self.notes.vault.create_text(path, note.render())  # False: it is there already
        return path
