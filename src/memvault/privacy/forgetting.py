"""Forgetting everywhere, with a receipt: a memory leaves every place that holds a copy.

``memvault forget ID`` (the ``forget`` tool, ``DELETE /v1/memories/{id}``) removes more
than the memory's line. What the memory left elsewhere is found by its trace
(:mod:`memvault.privacy.traces`: its id, its text, its distinctive words) and removed:

1. *The memory's line* in ``Memory/<Category>.md`` (:meth:`Memories.forget`).
2. *Insights* (the distill job) that embedded it: one that keeps enough other
   sources is *refreshed* (its lines about the memory go, its ``sources`` no longer
   list it, so the job's next run writes it again from the rest); one left with too
   few, or whose title names the memory, is *dropped*, and its other sources wait
   for a cluster again. An insight holding text of the owner's is never dropped.
3. *Entity notes* (the knowledge_graph job): the mentions, facts and relations
   citing the memory; an entity note the job made for a name only this memory used,
   and that holds nothing else, is dropped.
4. *MEMORY.md's* living summary and *the days' summaries*: the lines that cite,
   copy or name it (a sentence of prose alone, when the rest does not).
5. *Captured copies*: journal entries (Commands Received, the consolidation's and
   the agent's lines) and contacts' interaction lines that cite or copy it; chat
   messages in state.db (deleted), the channels' inbox, outbox and approvals
   (their text replaced), sessions' summaries, consolidation's history and reviews,
   the recall and read logs; job runs' output and agent runs' records (their
   context, recalled memories and tool calls) have its words replaced.
6. *The index* follows every file changed here; forgetting then checks that no
   keyword or vector row of the memory is left (and re-indexes when one is), and
   that no link of the graph still points at it.

Every file is changed through :meth:`Vault.edit_text` (a person's concurrent edit is
kept and the change is made again on it) and only memvault's own lines are
touched. The receipt says, for each place, what was found and done; it also names
what is not touched by design (git history, the jobs' undo copies in
``.memvault/jobs/runs/``) and the notes of the owner's own that still hold a trace.

``forget --contact NAME`` and ``--about TEXT`` first make a :class:`Plan`: the
memories about the person (their names as whole words, or a tag) or the topic (what
a search finds), the notes to drop (the contact's note; insights about the topic)
and, for a person, their identities and chats. Applying a plan forgets its memories
as above and removes the rest.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from memvault.acting import acting_as, current_actor
from memvault.config import Settings
from memvault.errors import InvalidInputError, MemvaultError, NotFoundError
from memvault.index.filters import SearchFilters
from memvault.index.index import MemoryIndex
from memvault.index.search import Searcher
from memvault.memory.sessions import JOURNAL_SECTION as SESSIONS_SECTION
from memvault.memory.state import StateStore
from memvault.privacy.forget_index import check_index, memory_chunks, still_found
from memvault.privacy.reads import reading
from memvault.privacy.receipts import Place, Plan, Receipt
from memvault.privacy.scrub import STATE_PLACES, Person, Scope, count_chats, scrub_state
from memvault.privacy.traces import (
    Trace,
    blocks,
    distinctive_words,
    scrub_blocks,
    scrub_items,
    section_of,
    words_of,
)
from memvault.vault.collection import stem
from memvault.vault.contacts import CONTACTS_DIR, Contact, Contacts
from memvault.vault.entities import Entities, parse_entity
from memvault.vault.journal import Journal
from memvault.vault.memories import Memories, Memory
from memvault.vault.note import Note
from memvault.vault.store import Vault
from memvault.vocabulary import counted

log = logging.getLogger(__name__)

UNDO_DIR = Path("jobs") / "runs"  # the jobs' copies from before each run (jobs/changes.py)
ENTITY_TAG = "entity"  # the tag the knowledge_graph job gives the notes it makes
ABOUT_LIMIT = 50  # memories (and insights) a topic's search may name at most
_SCAFFOLD = re.compile(r"^[ \t]*(?:#{1,6}[ \t].*|)$")  # headings and blank lines


@dataclass
class _Scope(Scope):
    """One forgetting pass: what it forgets, and the receipt it writes."""

    receipt: Receipt = field(kw_only=True)


class Forgetter:
    """Forgets memories (and people, and topics) in every place that holds a copy."""

    def __init__(
        self,
        *,
        vault: Vault,
        memories: Memories,
        contacts: Contacts,
        entities: Entities,
        journal: Journal,
        settings: Settings,
        index: Callable[[], MemoryIndex],
        state: Callable[[], StateStore],
        searcher: Callable[[], Searcher],
    ) -> None:
        self.vault = vault
        self.memories = memories
        self.contacts = contacts
        self.entities = entities
        self.journal = journal
        self.settings = settings
        self._index = index
        self._state = state
        self._searcher = searcher
        self._observers: list[Callable[[Receipt], None]] = []

    def observe(self, observer: Callable[[Receipt], None]) -> None:
        """Call ``observer(receipt)`` after each forgetting, before the receipt is returned:
        what holds copies this layer cannot see (a daemon's event buffer) forgets them too
        and adds its place to the receipt."""
        self._observers.append(observer)

    # -- what to forget ----------------------------------------------------------------

    def forget(self, memory_id: str) -> Receipt:
        """Forget one memory everywhere; NotFoundError when there is no such memory."""
        memory = self.memories.get(memory_id)
        return self._forget([memory], None, [])

    def plan_contact(self, name: str) -> Plan:
        """What forgetting the person ``name`` (a contact's name, alias or note) would
        remove: their note, the memories naming or tagging them, their identities and
        the messages captured from them."""
        contact = self.contacts.get(name)
        person = _person(contact)
        memories = [m for m in self.memories.all() if person.tagged(m)]
        return Plan(
            "contact",
            contact.path,
            memories,
            [contact.path],
            {k: list(v) for k, v in person.identities.items()},
            count_chats(self._state(), person),
        )

    def plan_about(self, topic: str) -> Plan:
        """What forgetting everything about ``topic`` would remove: the memories a search
        for it finds, and the insight notes it finds (the distill job's)."""
        if not topic.strip():
            raise InvalidInputError("Say what to forget about: forget --about TOPIC.")
        searcher = self._searcher()
        # Looking up what to forget is neither a recall nor a read: nothing of it is kept.
        quiet = replace(current_actor(), observer=True)
        with acting_as(quiet), reading(collect=[]):
            hits = searcher.search(
                topic, limit=ABOUT_LIMIT, filters=SearchFilters(kinds=("memory",))
            )
            insights = searcher.search(
                topic, limit=ABOUT_LIMIT, filters=SearchFilters(kinds=("insight",))
            )
        by_id = {m.id: m for m in self.memories.all()}
        found = dict.fromkeys(h.id for h in hits if h.id in by_id)  # once each, best first
        memories = [by_id[i] for i in found if i is not None]
        notes = sorted({h.path for h in insights if h.id is None and self._job_insight(h.path)})
        return Plan("about", topic.strip(), memories, notes)

    def apply(self, plan: Plan, memory_ids: Collection[str] | None = None) -> Receipt:
        """Carry out ``plan`` (made just now): of its memories only ``memory_ids`` when
        given (those the person was shown before saying yes)."""
        chosen = [m for m in plan.memories if memory_ids is None or m.id in memory_ids]
        person = _person(self.contacts.get(plan.subject)) if plan.kind == "contact" else None
        receipt = self._forget(chosen, person, plan.notes)
        receipt.subject = f"{plan.kind}:{plan.subject}"
        return receipt

    # -- one pass ----------------------------------------------------------------------

    def _forget(
        self, chosen: Sequence[Memory], person: Person | None, notes: Sequence[str]
    ) -> Receipt:
        """Forget ``chosen`` (and ``person``, and drop ``notes``) everywhere."""
        ids = {m.id for m in chosen}
        others = [m for m in self.memories.all() if m.id not in ids]
        # A turn that said it is a copy (as a journal line is), not another memory.
        rest = [m for m in others if not m.said]
        kept_names = self._kept_names(person)
        words: set[str] = set()
        for memory in chosen:
            words |= distinctive_words(memory.text, (m.text for m in rest), kept_names)
        if person is not None:
            words -= {w for n in person.names for w in words_of(n)}  # the names match whole
        trace = Trace(frozenset(ids), tuple(m.text for m in chosen), frozenset(words))
        receipt = Receipt(list(chosen))
        scope = _Scope(trace, person, receipt=receipt)
        said = [m for m in others if m.said and scope.captured(m.text)]
        ids |= {m.id for m in said}
        chunks = memory_chunks(self._index(), ids)
        self._memory_lines([*chosen, *said], scope)
        self._drop_notes(notes, scope)
        distill = self.settings.jobs.distill.folder
        state = "state.db" if isinstance(self._state().path, Path) else "the state database"
        present = {m.id for m in rest}
        steps: list[tuple[Callable[[], None], str, str]] = [
            (lambda: self._insights(scope, present), f"{distill}/", "no insight"),
            (lambda: self._entity_notes(scope), "entity notes", "no mention, fact or relation"),
            (
                lambda: self._living_summary(scope),
                self.settings.jobs.living_summary.path,
                "no line",
            ),
            (lambda: self._journal(scope), "Journal/", "no day's summary or entry"),
            (lambda: self._state_rows(scope), state, "no chat message, log or job run"),
        ]
        # Each place is named in the receipt, also where nothing held it.
        for step, place, nothing in steps:
            before = len(receipt.places)
            step()
            if len(receipt.places) == before:
                receipt.places.append(Place(place, "checked", f"{nothing} held it"))
        check_index(self._index(), ids, chunks, receipt)
        receipt.holds = scope.derived
        for observer in self._observers:
            try:
                observer(receipt)
            except Exception:  # what the observer holds is said left; forgetting stands
                log.exception("forgetting: an observer failed")
        self._untouched(scope)
        receipt.still_found = still_found(self._index(), scope)
        return receipt

    # -- the vault -------------------------------------------------------------------

    def _memory_lines(self, chosen: Sequence[Memory], scope: _Scope) -> None:
        """Remove each memory's bullet from its file."""
        by_path: dict[str, int] = {}
        for memory in chosen:
            try:
                gone = self.memories.forget(memory.id)
            except NotFoundError:  # removed meanwhile (by hand, by another request)
                continue
            by_path[gone.path] = by_path.get(gone.path, 0) + 1
        for path, count in by_path.items():
            scope.receipt.places.append(
                Place(path, "removed", f"{counted(count, 'memory line')}", count)
            )

    def _drop_notes(self, notes: Sequence[str], scope: _Scope) -> None:
        """Delete the notes a plan drops whole (a contact's note, insights on a topic)."""
        for path in notes:
            if not self.vault.is_file(path):
                continue
            self.vault.delete(path)
            scope.dropped.add(stem(path))
            what = "the person's note" if path.startswith(f"{CONTACTS_DIR}/") else "an insight"
            scope.receipt.places.append(Place(path, "deleted", f"{what}, dropped whole", 1))

    def _insights(self, scope: _Scope, present: set[str]) -> None:
        """Refresh or drop the insight notes that embedded a forgotten memory."""
        distill = self.settings.jobs.distill
        for path in self._notes_in(distill.folder):
            try:
                note = Note.parse(self.vault.read_text(path))
            except MemvaultError:
                continue
            if str(note.get("type", "")) != "insight":
                continue
            sources = [str(s).strip().lstrip("^") for s in (note.get("sources") or [])]
            cited = [s for s in sources if s in scope.trace.ids]
            _, lines = scrub_blocks(note.body, scope.derived)
            if not cited and not lines:
                continue
            left = [s for s in sources if s not in scope.trace.ids and s in present]
            named = scope.derived(stem(path))
            too_few = cited and (len(left) < distill.min_cluster_size or named)
            if (too_few or (named and not left)) and not _owner_text(note.body):
                self._drop_insight(path, left, scope)
                continue
            removed = self._edit(path, lambda text: _refreshed_insight(text, scope))
            scope.receipt.places.append(
                Place(
                    path,
                    "refreshed",
                    f"{counted(len(removed), 'line')} about it removed; the distill job writes "
                    f"it again from the {counted(len(left), 'memory', 'memories')} left",
                    len(removed),
                )
            )

    def _drop_insight(self, path: str, left: list[str], scope: _Scope) -> None:
        """Delete an insight note, and let its other sources wait for a cluster again."""
        self.vault.delete(path)
        scope.dropped.add(stem(path))
        value = path.removesuffix(".md")
        unmarked = 0
        for memory_id in left:
            try:
                memory = self.memories.get(memory_id)
                if memory.fields.get("distilled") == value:
                    self.memories.update_fields(memory_id, distilled=None)
                    unmarked += 1
            except NotFoundError:
                continue
        detail = "an insight that embedded it"
        if unmarked:
            detail += f"; its {counted(unmarked, 'other source')} wait for the distill job"
        scope.receipt.places.append(Place(path, "dropped", detail, 1))

    def _entity_notes(self, scope: _Scope) -> None:
        """Mentions, facts and relations citing the memory; interaction lines copying it;
        entity notes made only for it."""
        person = scope.person
        for path in self.entities.paths():
            if person is not None and path == person.path:
                continue

            def change(text: str, path: str = path) -> tuple[str, list[str]]:
                note = Note.parse(text)
                body, removed = scrub_blocks(note.body, scope.derived)

                def facts(number: int, lines: list[str]) -> bool:
                    return section_of(lines, number) in ("Observations", "Relations")

                def cites(line: str) -> bool:
                    return (
                        scope.trace.cites(line)
                        or scope.links_dropped(line)
                        or (person is not None and person.mentions(line))
                    )

                body, more = scrub_items(body, cites, facts)
                removed += more
                if path.startswith(f"{CONTACTS_DIR}/"):

                    def log_lines(number: int, lines: list[str]) -> bool:
                        return section_of(lines, number) == "Interactions"

                    body, more = scrub_items(body, scope.captured, log_lines)
                    removed += more
                if not removed:
                    return text, []
                note.body = body
                return note.render(), removed

            removed = self._edit(path, change)
            if self._made_for_it(path, scope):
                self.vault.delete(path)
                scope.dropped.add(stem(path))
                scope.receipt.places.append(
                    Place(path, "dropped", "an entity note the knowledge graph made for it", 1)
                )
            elif removed:
                scope.receipt.places.append(
                    Place(
                        path,
                        "removed",
                        f"{counted(len(removed), 'line')}: mentions, facts or interactions",
                        len(removed),
                    )
                )

    def _made_for_it(self, path: str, scope: _Scope) -> bool:
        """Whether ``path`` is an entity note the knowledge_graph job made whose name only
        the forgotten memories used, holding nothing else now."""
        if not scope.trace.names(stem(path)):
            return False
        try:
            text = self.vault.read_text(path)
        except MemvaultError:
            return False
        note = Note.parse(text)
        tags = note.get("tags") or []
        listed = tags if isinstance(tags, list) else [tags]
        if ENTITY_TAG not in [str(t).strip().lstrip("#") for t in listed]:
            return False
        entity = parse_entity(path, text)
        return not entity.facts and not entity.relations and not _owner_text(note.body)

    def _living_summary(self, scope: _Scope) -> None:
        """The lines of MEMORY.md's memvault block that cite, copy or name it."""
        path = self.settings.jobs.living_summary.path
        if not self.vault.is_file(path):
            return
        removed = self._edit(path, lambda text: scrub_blocks(text, scope.derived))
        if removed:
            scope.receipt.places.append(
                Place(
                    path,
                    "removed",
                    f"{counted(len(removed), 'line')} of the living summary",
                    len(removed),
                )
            )

    def _journal(self, scope: _Scope) -> None:
        """Each day's summary lines, and the entries that cite or copy it."""
        for day in self.journal.days():
            path = self.journal.path_for(day)

            def change(text: str) -> tuple[str, list[str]]:
                out, summary = scrub_blocks(text, scope.derived)
                note = Note.parse(out)
                body, entries = scrub_items(note.body, scope.captured, _not_sessions)
                # A session's line ends with its summary: a job's or a model's words.
                body, ended = scrub_items(body, scope.derived, _in_sessions, sentences=True)
                if not summary and not entries and not ended:
                    return text, []
                note.body = body
                return note.render(), summary + entries + ended

            removed = self._edit(path, change)
            if removed:
                scope.receipt.places.append(
                    Place(
                        path,
                        "removed",
                        f"{counted(len(removed), 'line')}: the day's summary and entries",
                        len(removed),
                    )
                )

    def _edit(self, path: str, change: Callable[[str], tuple[str, list[str]]]) -> list[str]:
        """Change one note through the vault's checked edit; what ``change`` removed (from
        the text as it read when the edit succeeded)."""
        removed: list[str] = []

        def apply(text: str | None) -> str | None:
            if text is None:
                return None
            new, gone = change(text)
            removed[:] = gone
            return new if gone else None

        try:
            self.vault.edit_text(path, apply)
        except NotFoundError:
            return []
        return removed

    def _notes_in(self, folder: str) -> list[str]:
        try:
            return [e.path for e in self.vault.list(folder) if not e.is_dir]
        except (NotFoundError, InvalidInputError):
            return []

    def _job_insight(self, path: str) -> bool:
        """Whether ``path`` is an insight note the distill job wrote, with no text of the
        owner's in it (such a note is dropped whole by ``--about``)."""
        try:
            note = Note.parse(self.vault.read_text(path))
        except MemvaultError:
            return False
        return str(note.get("type", "")) == "insight" and not _owner_text(note.body)

    def _kept_names(self, person: Person | None) -> list[str]:
        """The names of the people and projects the owner keeps notes on (not the one being
        forgotten): a fact about them does not make their name the fact's own word."""
        names: list[str] = []
        for entity in self.entities.list():
            if person is not None and entity.path == person.path:
                continue
            if ENTITY_TAG in [t.casefold() for t in entity.tags]:
                continue  # the knowledge graph's: made for a name a memory used
            if entity.path.startswith((f"{CONTACTS_DIR}/", "Projects/")):
                names += [entity.name, stem(entity.path), *entity.aliases]
        return names

    # -- the databases ---------------------------------------------------------------

    def _state_rows(self, scope: _Scope) -> None:
        """The captured copies and logs in state.db (or PostgreSQL's state)."""
        state = self._state()
        where = "state.db" if isinstance(state.path, Path) else "the state database"
        with state.transaction() as conn:
            counts = scrub_state(conn, scope, events=where != "state.db")
        for key, count in counts.items():
            if count:
                action, detail = STATE_PLACES.get(key, ("removed", key))
                scope.receipt.places.append(Place(f"{where}: {key}", action, detail, count))

    # -- the receipt's last lines -----------------------------------------------------

    def _untouched(self, scope: _Scope) -> None:
        """What forgetting leaves alone by design, and whether it holds a trace."""
        receipt = scope.receipt
        if (self.vault.root / ".git").exists():
            receipt.untouched.append(
                Place(
                    "git history",
                    "not touched",
                    "the vault is a git repository: commits made before now still hold it "
                    "(memvault never rewrites history)",
                )
            )
        else:
            receipt.untouched.append(
                Place("git history", "not touched", "the vault is not a git repository")
            )
        runs = self._undo_copies(scope)
        named = f"run {runs[0]}" if len(runs) == 1 else f"runs {', '.join(runs)}"
        detail = (
            f"what {named} kept of files from before changing them still holds it "
            "(memvault never edits those copies; delete the run's folder to drop them)"
            if runs
            else "no copy kept from before a job run holds it"
        )
        receipt.untouched.append(
            Place(".memvault/jobs/runs (the undo store)", "not touched", detail, len(runs))
        )

    def _undo_copies(self, scope: _Scope) -> list[str]:
        """The job runs whose undo copies hold a trace."""
        folder = self.vault.state_dir / UNDO_DIR
        found: list[str] = []
        try:
            runs = sorted(
                (p for p in folder.iterdir() if p.is_dir()),
                key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0),
            )
        except OSError:
            return found
        for run in runs:
            for copy in run.iterdir():
                try:
                    text = copy.read_text("utf-8", errors="replace")
                except OSError:
                    continue
                if scope.derived(text):
                    found.append(run.name)
                    break
        return found


# -- helpers --------------------------------------------------------------------------


def _person(contact: Contact) -> Person:
    identities = {
        channel: [v.strip() for v in value.split(",") if v.strip()]
        for channel, value in contact.identities.items()
    }
    return Person(contact.path, [contact.name, *contact.aliases], identities)


def _in_sessions(number: int, lines: list[str]) -> bool:
    """Whether line ``number`` of a journal note is under its Sessions heading."""
    return section_of(lines, number) == SESSIONS_SECTION


def _not_sessions(number: int, lines: list[str]) -> bool:
    return not _in_sessions(number, lines)


def _owner_text(body: str) -> bool:
    """Whether a job-made note's body holds text besides headings and memvault's blocks."""
    lines = body.splitlines()
    inside = {n for b in blocks(lines) for n in range(b.first - 1, b.last + 1)}
    return any(not _SCAFFOLD.match(line) for n, line in enumerate(lines) if n not in inside)


def _refreshed_insight(text: str, scope: _Scope) -> tuple[str, list[str]]:
    """An insight note without its lines about the forgotten memories, and without them
    in ``sources`` (so the distill job sees its sources changed and writes it again)."""
    note = Note.parse(text)
    body, removed = scrub_blocks(note.body, scope.derived)
    sources = [str(s).strip().lstrip("^") for s in (note.get("sources") or [])]
    kept = [s for s in sources if s not in scope.trace.ids]
    if len(kept) != len(sources):
        note.set("sources", kept)
        removed.append(f"sources: {', '.join(s for s in sources if s not in kept)}")
    if not removed:
        return text, []
    note.body = body
    return note.render(), removed
