"""Atomic memories: :class:`Memories` stores and finds them in ``Memory/<Category>.md``.

Each memory is one Markdown bullet: :mod:`memvault.vault.memory_format` is the line
(the record, parsing and rendering it, ids), :mod:`memvault.vault.memory_files` the
files (read through a cache checked against their bytes, appended to, one line changed
in place). This module decides what happens to them, under one lock: a new memory
checked and screened, remembered unless the files already hold it, a conversation's
turns recorded, a memory found by id, listed by category and tag, forgotten,
rewritten or moved to another category's file; observers hear what was stored and
forgotten. The rest of memvault imports the memory names from here.

A memory stored through a named API token also carries ``[agent:: NAME]``, the
token's name (:mod:`memvault.acting`): ``source`` says by which way it came (cli,
api, mcp, a channel) and is the caller's to give; ``agent`` says who sent it, and
only the token decides that.

A memory whose text counts from the day it is stored ("gestern habe ich
...", "yesterday", "先週") carries that day, resolved when stored, as
``[when:: 2026-11-21]`` (with the owner's ``locale``: :mod:`memvault.dates`);
the index searches it as from that day.

The file is the truth: a bullet edited by hand is read back as edited, a
deleted one is gone, and a bullet typed without an id still counts (its id
is derived from its text). Exact duplicates are not stored twice.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from memvault.acting import acting_agent, sees
from memvault.clock import Clock
from memvault.errors import (
    ConfigError,
    InvalidInputError,
    NotFoundError,
    NotTextError,
)
from memvault.text import check_values
from memvault.vault.markdown import normalize_tag
from memvault.vault.memory_files import (
    MEMORY_DIR,
    TITLE_TO_CATEGORY,
    MemoryFile,
    MemoryFiles,
    category_note,
    category_path,
)
from memvault.vault.memory_format import (
    DEFAULT_IMPORTANCE,
    LOW_TRUST,
    Memory,
    clean_text,
    clean_value,
    derived_id,
    fresh_id,
    inline_tags,
    normalize_text,
    parse_line,
    render_line,
    set_fields,
    unique_tags,
)
from memvault.vault.notes import parse_hash
from memvault.vault.store import Vault
from memvault.vocabulary import CATEGORIES, CATEGORY_ALIASES, CONVERSATION

# The names the rest of memvault imports from here (the format's among them).
__all__ = [
    "CATEGORIES",
    "DEFAULT_CATEGORY",
    "LOW_TRUST",
    "MAX_TEXT_CHARS",
    "MEMORY_DIR",
    "HeldBy",
    "Memories",
    "Memory",
    "MemoryFile",
    "MemoryObserver",
    "Remembered",
    "Screen",
    "category_note",
    "category_path",
    "derived_id",
    "normalize_text",
]

log = logging.getLogger(__name__)

DEFAULT_CATEGORY = "fact"
MAX_TEXT_CHARS = 4000
_LOCK = "memory-store"


@dataclass(frozen=True)
class Remembered:
    """The result of :meth:`Memories.remember`: the memory and whether it is new."""

    memory: Memory
    created: bool


# Told ``("stored" | "forgotten", memory)`` after the vault has changed.
MemoryObserver = Callable[[str, Memory], None]
# Asked, under the store's lock, for a memory that already holds what a new one says (the
# files as read there); the one it names is returned and nothing is added.
HeldBy = Callable[[Memory, Sequence[MemoryFile]], Memory | None]
# Asked with a new memory's text and source before it is stored: the text to store and the
# inline fields to add (``trust`` ...). The runtime wires :mod:`memvault.privacy` here, so
# this layer never imports it.
Screen = Callable[[str, str | None], tuple[str, dict[str, str]]]


class Memories:
    """Stores and reads memories in the vault's ``Memory/`` folder."""

    def __init__(
        self,
        vault: Vault,
        clock: Clock,
        *,
        default_category: str = DEFAULT_CATEGORY,
        default_importance: float = DEFAULT_IMPORTANCE,
    ) -> None:
        self.vault = vault
        self.clock = clock
        try:
            self.default_category = self.check_category(default_category)
        except InvalidInputError as exc:
            raise ConfigError(f"Setting memory.default_category: {exc.message}") from None
        self.default_importance = default_importance
        self._files = MemoryFiles(vault, clock)
        self._observers: builtins.list[MemoryObserver] = []
        self._screens: builtins.list[Screen] = []

    def screen(self, screen: Screen) -> None:
        """Pass every new memory's text through ``screen`` before it is stored (in the
        order added); what it returns is stored, with the fields it adds."""
        self._screens.append(screen)

    def observe(self, observer: MemoryObserver) -> None:
        """Call ``observer(event, memory)`` after a memory is ``stored`` or ``forgotten``."""
        self._observers.append(observer)

    def _announce(self, event: str, memory: Memory) -> None:
        for observer in self._observers:
            try:
                observer(event, memory)
            except Exception:
                log.exception("memory observer failed", extra={"memory": memory.id})

    # -- reading -------------------------------------------------------------

    def read_file(self, path: str) -> list[Memory]:
        """Every memory in one file, as the file reads now."""
        return self.read(path).memories

    def read(self, path: str) -> MemoryFile:
        """A file's memories and lookup tables, checked against the file's current bytes
        (:meth:`MemoryFiles.read`)."""
        return self._files.read(path)

    def parse_text(self, path: str, text: str) -> list[Memory]:
        """Every memory bullet of a memory file's text (frontmatter and code skipped)."""
        return self._files.parse_text(path, text)

    def files(self) -> list[str]:
        """Paths of the memory files, category files first."""
        return self._files.paths()

    def all(self, *, include_archived: bool = True) -> list[Memory]:
        """Every memory in the vault, file by file, in file order (without
        ``include_archived``, archived and superseded ones are left out)."""
        out: list[Memory] = []
        for read in self.readable():
            out.extend(m for m in read.memories if include_archived or not m.retired)
        return out

    def of_agent(self, agent: str) -> dict[str, Memory]:
        """The memories ``agent`` stored, by id (what a token bound to it may see)."""
        return {m.id: m for m in self.all() if m.agent == agent}

    def readable(self) -> builtins.list[MemoryFile]:
        """Every memory file that reads as text; one that does not is left out (logged),
        so one bad file breaks only itself."""
        return self._files.readable()

    # -- queries ---------------------------------------------------------------

    def get(self, memory_id: str) -> Memory:
        """The memory with this id; NotFoundError if none (deleted by hand, perhaps)."""
        wanted = memory_id.strip().lstrip("^")
        files = self.files()
        # Where it was last read: that file alone, as it reads now.
        cached = self._files.last_read(files)
        seen = next((read.path for read in cached if read and read.find(wanted)), None)
        if seen is not None:
            try:
                found = self.read(seen).memories
            except NotTextError:
                found = []
            memory = next((m for m in found if m.id == wanted), None)
            if memory is not None:
                return memory
        for memory in self.all():
            if memory.id == wanted:
                return memory
        raise NotFoundError(
            f"No memory with id {wanted!r}.", hint="List memories with `memvault memories`."
        )

    def list(
        self,
        *,
        category: str | None = None,
        tag: str | None = None,
        include_archived: bool = False,
    ) -> list[Memory]:
        """Memories filtered by category and tag, oldest first. What was said in
        conversations (category ``conversation``) is listed only when asked for by name:
        it is found by search, and would drown everything else here."""
        wanted_category = self.check_category(category) if category else None
        wanted_tag = tag.lstrip("#").casefold() if tag else None
        out = [
            m
            for m in self.all(include_archived=include_archived)
            if (m.category == wanted_category if wanted_category else not m.said)
            and (wanted_tag is None or wanted_tag in (t.casefold() for t in m.tags))
        ]
        out.sort(
            key=lambda m: (
                m.created is None,
                m.created or datetime.min.replace(tzinfo=self.clock.tz),
                m.path,
                m.line,
            )
        )
        return out

    # -- writing ---------------------------------------------------------------

    @staticmethod
    def check_category(category: str) -> str:
        """A known category name (case-insensitive; a file's title, or an earlier
        design's name such as ``contact``), or a clear error listing them."""
        key = category.strip().lower()
        key = CATEGORY_ALIASES.get(key, TITLE_TO_CATEGORY.get(key, key))
        if key not in CATEGORIES:
            raise InvalidInputError(
                f"Unknown memory category {category!r}; use one of {', '.join(CATEGORIES)}."
            )
        return key

    def prepare(
        self,
        text: str,
        category: str | None = None,
        importance: float | None = None,
        tags: Iterable[str] = (),
        source: str | None = None,
    ) -> Memory:
        """The memory ``remember`` would store for these values (checked; no id yet)."""
        return self._prepare(text, category, importance, tags, source, None)

    def _prepare(
        self,
        text: str,
        category: str | None,
        importance: float | None,
        tags: Iterable[str],
        source: str | None,
        created: datetime | None,
    ) -> Memory:
        marks: dict[str, str | None] = {}
        for screen in self._screens:
            text, added = screen(str(text), source)
            marks.update(added)
        clean, all_tags = clean_text(text, tags)
        if not clean:
            raise InvalidInputError("A memory needs some text.")
        # The last guard (the edges check first): a line no file or index can keep.
        for name, given in (("text", clean), ("source", source), ("tags", all_tags)):
            check_values(given, name)
        # Inline #tags stay in the text and count as tags, as they will when read back.
        all_tags = inline_tags(clean) + all_tags
        if len(clean) > MAX_TEXT_CHARS:
            raise InvalidInputError(
                f"A memory is at most {MAX_TEXT_CHARS} characters; store longer text as a note."
            )
        value = self.default_importance if importance is None else importance
        if not 0.0 <= float(value) <= 1.0:
            raise InvalidInputError(f"Importance must be between 0 and 1, not {value}.")
        cat = self.check_category(category) if category else self.default_category
        moment = self.clock.localize(created) if created else self.clock.now()
        agent = acting_agent()
        memory = Memory(
            id="",
            text=clean,
            category=cat,
            importance=round(float(value), 2),
            tags=unique_tags(all_tags),
            created=moment.replace(microsecond=0),  # the line keeps seconds
            source=clean_value(source, 200) if source else None,
            path=category_path(cat),
            line=0,
            fields={"agent": clean_value(agent, 100) or ""} if agent else {},
        )
        named = self._named_day(clean, moment)
        if named is not None:
            memory.fields["when"] = named
        set_fields(memory, marks)
        # What is returned and cached must be what the line reads back as, field for field.
        back = parse_line(
            render_line(replace(memory, id="m-0")),
            self.clock,
            category=cat,
            path=memory.path,
            number=0,
        )
        if back is None or back.text != memory.text:
            raise InvalidInputError(
                f"{clean[:60]!r} would not read back as the same memory "
                "(a leading checkbox such as '[ ]' makes a line a task); reword it."
            )
        return replace(back, id="", line=0)

    def _named_day(self, text: str, moment: datetime | None) -> str | None:
        """The day ``text`` counts from ``moment`` ("gestern", "yesterday", "先週"), when
        it is another day than ``moment``'s: resolved when stored, while "now" is known
        (the owner's locale and English; nothing without a locale)."""
        if moment is None:
            return None
        named = self.clock.day_named(text, moment)
        local = self.clock.localize(moment).date()
        return named.isoformat() if named is not None and named != local else None

    def remember(
        self,
        text: str,
        category: str | None = None,
        importance: float | None = None,
        tags: Iterable[str] = (),
        source: str | None = None,
        created: datetime | None = None,
        *,
        held_by: HeldBy | None = None,
    ) -> Remembered:
        """Store one memory; an exact duplicate (or the one ``held_by`` names) returns the
        existing one instead."""
        item = (text, category, importance, tuple(tags), source, created)
        return self.remember_many([item], held_by=held_by)[0]

    def remember_many(
        self,
        items: Sequence[
            tuple[str, str | None, float | None, Sequence[str], str | None, datetime | None]
        ],
        *,
        held_by: HeldBy | None = None,
    ) -> builtins.list[Remembered]:
        """Store several memories under one lock, one append per category file.

        Each item is ``(text, category, importance, tags, source, created)``.
        Duplicates are found through each file's cached lookup tables, so a
        single ``remember`` costs the same with ten memories or a hundred thousand.
        ``held_by`` is asked first, with the files as read under the lock, so two
        writers of one fact cannot both add it.
        """
        prepared = [self._prepare(*item) for item in items]
        chosen: list[tuple[Memory, bool]] = []
        with self.vault.lock(_LOCK):
            every = self.readable()
            # What was said in a conversation is never what a memory repeats ("ok" twice).
            files = [f for f in every if f.category != CONVERSATION]
            added: dict[str, Memory] = {}
            added_ids: set[str] = set()

            def known(norm: str) -> Memory | None:
                found = added.get(norm) or next(
                    (f.by_norm[norm] for f in files if norm in f.by_norm), None
                )
                if found is None or sees(found.agent):
                    return found
                # A token bound to an agent: only that agent's own copy is a duplicate.
                return next(
                    (
                        m
                        for f in files
                        for m in f.memories
                        if sees(m.agent) and normalize_text(m.text) == norm
                    ),
                    None,
                )

            def taken(candidate: str) -> bool:
                return candidate in added_ids or any(candidate in f.by_id for f in every)

            pending: dict[str, list[Memory]] = {}
            for memory in prepared:
                norm = normalize_text(memory.text)
                duplicate = (held_by(memory, files) if held_by else None) or known(norm)
                if duplicate is not None:
                    chosen.append((duplicate, False))
                    continue
                memory.id = fresh_id(taken)
                added[norm] = memory
                added_ids.add(memory.id)
                pending.setdefault(memory.path, []).append(memory)
                chosen.append((memory, True))
            # A file that is not text (left out of ``files``) is refused before anything is added.
            for path in pending.keys() - {f.path for f in every}:
                self.read(path)
            stored: dict[str, Memory] = {}
            for path, memories in pending.items():
                stored.update(self._files.append(path, memories))
        results = [Remembered(stored.get(m.id, m) if new else m, new) for m, new in chosen]
        for result in results:
            if result.created:
                self._announce("stored", result.memory)
        return results

    def record(
        self,
        path: str,
        items: Sequence[tuple[str, datetime, str | None, dict[str, str]]],
        *,
        header: str,
        category: str = CONVERSATION,
        importance: float | None = None,
    ) -> builtins.list[Memory]:
        """Append ``items`` to the memory file at ``path`` as they are, duplicates too:
        what was said in a conversation, where "ok" said twice is two turns.

        Each item is ``(text, created, source, fields)``; the file is created with
        ``header`` (its frontmatter names ``category``), each at ``importance`` (None:
        the default). Screens run as for any memory.
        """
        if not path.startswith(f"{MEMORY_DIR}/") or not path.endswith(".md"):
            raise InvalidInputError(f"{path} is not a memory file (Memory/....md).")
        prepared: builtins.list[Memory] = []
        for text, created, source, fields in items:
            prepared_one = self._prepare(text, category, importance, (), source, created)
            memory = replace(prepared_one, path=path)
            set_fields(memory, dict(fields))
            prepared.append(memory)
        if not prepared:
            return []
        with self.vault.lock(_LOCK):
            self.read(path)  # a file that is not text is refused before anything is added
            taken = {m.id for f in self.readable() for m in f.memories}
            for memory in prepared:
                memory.id = fresh_id(taken.__contains__)
                taken.add(memory.id)
            if not self.vault.is_file(path):
                self.vault.create_text(path, header)
            stored = self._files.append(path, prepared)
        out = [stored.get(m.id, m) for m in prepared]
        for memory in out:
            self._announce("stored", memory)
        return out

    def forget(self, memory_id: str) -> Memory:
        """Remove a memory's bullet from its file; returns what was removed."""
        with self.vault.lock(_LOCK):
            memory = self.get(memory_id)

            self._files.remove_line(memory)
        self._announce("forgotten", memory)
        return memory

    def update_fields(self, memory_id: str, **fields: str | None) -> Memory:
        """Set (or, with None, remove) extra inline fields such as ``archived``."""

        def change(memory: Memory) -> Memory:
            set_fields(memory, fields)
            return memory

        return self._rewrite(memory_id, change, keep_derived_id=False)

    def update_text(
        self,
        memory_id: str,
        text: str,
        *,
        expected_hash: str | None = None,
        **fields: str | None,
    ) -> Memory:
        """Replace a memory's text in place, keeping its id, metadata and every other line.

        ``fields`` are set as :meth:`update_fields` sets them (e.g. ``updated``).
        A bullet typed without an id keeps the id it had, now written out. With
        ``expected_hash`` (the hash of the memory's note as it was read) the line is
        rewritten only if the note still holds exactly that: an edit made since (in
        Obsidian, say) is a ConflictError and nothing is written.
        """
        found = self.get(memory_id)
        clean = self._prepare(text, found.category, found.importance, (), None, None)

        def change(memory: Memory) -> Memory:
            # "gestern" in the new text counts from the day the memory was stored; a
            # ``when`` the old text named (and the new one does not) goes.
            named = self._named_day(clean.text, memory.created)
            if named is not None or self._named_day(memory.text, memory.created) is not None:
                set_fields(memory, {"when": named})
            memory.text = clean.text
            memory.tags = unique_tags([*clean.tags, *memory.tags])
            set_fields(memory, fields)
            return memory

        return self._rewrite(memory_id, change, keep_derived_id=True, expected_hash=expected_hash)

    def add_tags(self, memory_id: str, tags: Iterable[str]) -> Memory:
        """Add tags to a memory (those it has already are kept once)."""
        added = [normalize_tag(t) for t in tags if t.strip().lstrip("#")]
        check_values(added, "tags")
        if not added:
            raise InvalidInputError("Name a tag to add.")

        def change(memory: Memory) -> Memory:
            memory.tags = unique_tags([*memory.tags, *added])
            return memory

        return self._rewrite(memory_id, change, keep_derived_id=True)

    def recategorize(self, memory_id: str, category: str) -> Memory:
        """Move a memory to another category's file, keeping its id, text and fields.

        Its line leaves its file (every other byte stays) and is appended to
        the new category's file; a memory already there is returned as it is.
        """
        target = self.check_category(category)
        with self.vault.lock(_LOCK):
            found = self.get(memory_id)
            if found.category == target:
                return found
            moved = replace(
                found,
                category=target,
                path=category_path(target),
                id=found.id,
                explicit_id=True,
                fields=dict(found.fields),
                tags=list(found.tags),
            )
            self.read(moved.path)  # a file that is not text is refused before anything moves

            self._files.remove_line(found)
            stored = self._files.append(moved.path, [moved])
        return stored.get(moved.id, moved)

    def _rewrite(
        self,
        memory_id: str,
        change: Callable[[Memory], Memory],
        *,
        keep_derived_id: bool,
        expected_hash: str | None = None,
    ) -> Memory:
        """Re-render one memory's line through ``change``; the file's other bytes stay as they are.

        The line is changed as it reads now (edited by hand, perhaps), through
        :meth:`Vault.edit_text`. A bullet typed without an id gets one written
        out: its own (``keep_derived_id``) or a new one (its text may stay the
        same elsewhere, so the derived id would collide).
        """
        with self.vault.lock(_LOCK):
            found = self.get(memory_id)
            new_id = None
            if not found.explicit_id:
                new_id = (
                    found.id
                    if keep_derived_id
                    else fresh_id({m.id for m in self.all()}.__contains__)
                )
            expected = parse_hash(expected_hash) if expected_hash is not None else None
            return self._files.rewrite_line(found, change, new_id=new_id, expected=expected)
