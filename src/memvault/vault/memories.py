"""Atomic memories: one Markdown bullet per memory in ``Memory/<Category>.md``.

A memory line reads naturally in Obsidian and carries its metadata as
Dataview-style inline fields, its tags as Obsidian tags, and a stable block
id, so ``[[Memory/Preferences#^m-3f9a1c2b]]`` links to it::

    - Prefers dark mode in every app #ui [importance:: 0.8]
      [created:: 2026-11-22 10:31:05] [source:: cli] ^m-3f9a1c2b

(shown on two lines here; it is one line in the file). A memory stored
through a named API token also carries ``[agent:: NAME]``, the token's name
(:mod:`memvault.acting`): ``source`` says by which way it came (cli, api,
mcp, a channel) and is the caller's to give; ``agent`` says who sent it, and
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
import hashlib
import logging
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Any

from memvault.acting import acting_agent, sees
from memvault.clock import Clock
from memvault.errors import (
    ConfigError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    NotTextError,
)
from memvault.text import check_values
from memvault.vault.markdown import normalize_tag
from memvault.vault.notes import content_hash, parse_hash
from memvault.vault.store import Change, Vault, decode_text
from memvault.vocabulary import CATEGORIES, CATEGORY_ALIASES, CONVERSATION

log = logging.getLogger(__name__)

MEMORY_DIR = "Memory"
_TITLE_TO_CATEGORY = {title.casefold(): cat for cat, title in CATEGORIES.items()}
# ``[trust:: low]``: text from someone other than the owner that reads as an order to the
# agent (:mod:`memvault.privacy.trust` marks it; the context builder keeps it in the data).
LOW_TRUST = "low"
DEFAULT_CATEGORY = "fact"
DEFAULT_IMPORTANCE = 0.5
MAX_TEXT_CHARS = 4000
_LOCK = "memory-store"

_BULLET = re.compile(r"^[ \t]*[-*+][ \t]+(?!\[[ xX/-]\][ \t])(.*?)[ \t]*$")
_BLOCK_ID = re.compile(r"(?:^|[ \t])\^([A-Za-z0-9-]+)[ \t]*$")
_FIELD = re.compile(r"[ \t]*\[([A-Za-z_][\w -]*?)::[ \t]*([^\]]*?)[ \t]*\]")
_TRAILING_TAGS = re.compile(r"(?:[ \t]+#[^\s#\[\]]+)+[ \t]*$")
_INLINE_TAG = re.compile(r"(?:(?<=\s)|^)#([^\s#\[\]()!,.;:?\"']+)")


@dataclass
class Memory:
    """One remembered fact, preference, decision ... and where it lives."""

    id: str
    text: str
    category: str
    importance: float
    tags: list[str]
    created: datetime | None
    source: str | None
    path: str
    line: int
    fields: dict[str, str] = field(default_factory=dict)
    explicit_id: bool = True

    @property
    def archived(self) -> bool:
        """Whether the archival job has retired this memory."""
        return "archived" in self.fields

    @property
    def superseded_by(self) -> str | None:
        """The id of the memory that replaced this one (consolidation on write), if any."""
        if "superseded" not in self.fields:
            return None
        return self.fields.get("superseded_by") or ""

    @property
    def when(self) -> date | None:
        """The day the memory tells of when its text counted from the day it was stored
        (``[when:: 2026-11-21]`` for "gestern ..." stored on the 22nd); else None."""
        try:
            return date.fromisoformat(self.fields.get("when", ""))
        except ValueError:
            return None

    @property
    def agent(self) -> str | None:
        """The agent (named API token) that stored this memory; None for the owner."""
        return self.fields.get("agent") or None

    @property
    def trust(self) -> str | None:
        """``low`` for text from someone other than the owner that reads as an instruction
        to the agent (:mod:`memvault.privacy.trust`); None when nothing marks it."""
        return self.fields.get("trust") or None

    @property
    def trust_reason(self) -> str | None:
        """Why the memory is marked ``low`` (where it came from, what it asks)."""
        return self.fields.get("trust_reason") or None

    @property
    def said(self) -> bool:
        """A turn of a conversation (kept by the capture), not something remembered on
        purpose: listings, jobs and duplicate checks leave it out."""
        return self.category == CONVERSATION

    @property
    def retired(self) -> bool:
        """Archived or superseded: left out of default lists, search and context."""
        return self.archived or "superseded" in self.fields

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "text": self.text,
            "category": self.category,
            "importance": self.importance,
            "tags": list(self.tags),
            "created": self.created.isoformat(timespec="seconds") if self.created else None,
            "source": self.source,
            "path": self.path,
            "line": self.line,
            "archived": self.archived,
            "superseded_by": self.superseded_by,
            "agent": self.agent,
            "trust": self.trust,
            "trust_reason": self.trust_reason,
        }


class MemoryFile:
    """One memory file as read: its bytes, its memories and the tables duplicates are checked in.

    The bytes are kept so that the parse is validated by content, never by a
    file's stat: an edit that keeps the size and puts the mtime back (rsync
    -t, sync tools) is still seen. Lines appended after ``data`` are parsed
    on their own (:meth:`Memories.read`), so a growing file is never re-read
    from the top.
    """

    def __init__(self, path: str, data: bytes, category: str) -> None:
        self.path = path
        self.data = data
        self.category = category
        self.memories: list[Memory] = []
        self.line_count = 0
        self.in_frontmatter = data.startswith(b"---")
        self.in_fence = False
        self.by_norm: dict[str, Memory] = {}
        self.by_id: dict[str, Memory] = {}  # a repeated id: its last line

    def take(self, memories: Iterable[Memory]) -> None:
        """Add parsed memories to the lists and lookup tables."""
        for memory in memories:
            self.memories.append(memory)
            self.by_norm.setdefault(normalize_text(memory.text), memory)
            self.by_id[memory.id] = memory

    def find(self, memory_id: str) -> Memory | None:
        """The memory with this id (the last line holding it, if several do)."""
        return self.by_id.get(memory_id)


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


def normalize_text(text: str) -> str:
    """The form two memories are compared in for exact duplicates."""
    return " ".join(text.split()).casefold()


def derived_id(text: str) -> str:
    """The id of a bullet typed by hand without a block id."""
    return "m-" + hashlib.sha1(normalize_text(text).encode("utf-8")).hexdigest()[:8]


def category_path(category: str) -> str:
    """``Memory/<Title>.md`` for a category."""
    return f"{MEMORY_DIR}/{CATEGORIES.get(category, category.title())}.md"


def category_note(category: str) -> str:
    """The text of a new, empty category note."""
    title = CATEGORIES.get(category, category.title())
    return f"---\ncategory: {category}\ntags: [memory]\n---\n# {title}\n\n"


def _format_created(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _format_importance(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value not in (0, 1) else f"{value:.1f}"


def render_line(memory: Memory) -> str:
    """The bullet for a memory, metadata in a fixed order."""
    parts = [f"- {memory.text}"]
    inline = {m.group(1).casefold() for m in _INLINE_TAG.finditer(memory.text)}
    parts.extend(f"#{tag}" for tag in memory.tags if tag.casefold() not in inline)
    parts.append(f"[importance:: {_format_importance(memory.importance)}]")
    if memory.created is not None:
        parts.append(f"[created:: {_format_created(memory.created)}]")
    if memory.source:
        parts.append(f"[source:: {memory.source}]")
    parts.extend(f"[{key}:: {value}]" for key, value in memory.fields.items())
    parts.append(f"^{memory.id}")
    return " ".join(parts)


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
        self._cache: dict[str, MemoryFile] = {}
        self._cache_guard = threading.Lock()
        self._not_text: set[str] = set()  # files already logged as not text
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

    # -- parsing ---------------------------------------------------------------

    def parse_line(self, line: str, *, category: str, path: str, number: int) -> Memory | None:
        """Read one bullet as a memory, or None if the line is not a memory bullet."""
        bullet = _BULLET.match(line)
        if bullet is None:
            return None
        content = bullet.group(1)
        explicit = True
        block = _BLOCK_ID.search(content)
        if block is not None:
            memory_id = block.group(1)
            content = content[: block.start()]
        else:
            memory_id = ""
            explicit = False
        fields: dict[str, str] = {}
        for m in _FIELD.finditer(content):
            fields[m.group(1).strip().lower()] = m.group(2).strip()
        content = _FIELD.sub("", content)
        tags: list[str] = []
        trailing = _TRAILING_TAGS.search(content)
        if trailing is not None:
            tags.extend(t.lstrip("#") for t in trailing.group(0).split())
            content = content[: trailing.start()]
        text = content.strip()
        if not text:
            return None
        tags = [m.group(1) for m in _INLINE_TAG.finditer(text)] + tags
        raw_importance = fields.pop("importance", "")
        try:
            importance = min(1.0, max(0.0, float(raw_importance)))
        except ValueError:
            importance = DEFAULT_IMPORTANCE
        created = self._parse_created(fields.pop("created", ""))
        source = fields.pop("source", None) or None
        return Memory(
            id=memory_id or derived_id(text),
            text=text,
            category=category,
            importance=importance,
            tags=_unique(tags),
            created=created,
            source=source,
            path=path,
            line=number,
            fields=fields,
            explicit_id=explicit,
        )

    def _parse_created(self, raw: str) -> datetime | None:
        if not raw:
            return None
        try:
            return self.clock.localize(datetime.fromisoformat(raw.strip()))
        except ValueError:
            return None

    def _category_of(self, path: str, text: str) -> str:
        match = re.search(r"^category:[ \t]*['\"]?([\w-]+)", text[:400], re.MULTILINE)
        if match and text.startswith("---"):
            return match.group(1).lower()
        stem = path.rsplit("/", 1)[-1][:-3]
        return _TITLE_TO_CATEGORY.get(stem.casefold(), stem.casefold())

    def read_file(self, path: str) -> list[Memory]:
        """Every memory in one file, as the file reads now."""
        return self.read(path).memories

    def read(self, path: str) -> MemoryFile:
        """A file's memories and lookup tables, checked against the file's current bytes.

        The cached parse is used when the bytes are the same; when the file
        only grew (lines appended, by memvault or by hand), just the new lines
        are parsed; anything else is parsed afresh.
        """
        try:
            data = self.vault.read_bytes(path)
        except NotFoundError:
            data = b""
        with self._cache_guard:
            cached = self._cache.get(path)
            if cached is not None and cached.data == data:
                return cached
            if cached is not None and self._extend(cached, data):
                return cached
        text = decode_text(data, path)
        parsed = MemoryFile(path, data, self._category_of(path, text))
        self._parse_into(parsed, text, first=1)
        with self._cache_guard:
            self._cache[path] = parsed
        return parsed

    def _extend(self, cached: MemoryFile, data: bytes) -> bool:
        """Parse only what was appended to ``cached``; False when the file changed otherwise."""
        old = cached.data
        if not old.endswith(b"\n") or len(data) <= len(old) or not data.startswith(old):
            return False
        head = data[:400].decode("utf-8", errors="ignore")
        if len(old) < 400 and self._category_of(cached.path, head) != cached.category:
            return False  # the head the category is read from changed
        tail = decode_text(data[len(old) :], cached.path)
        cached.data = data
        self._parse_into(cached, tail, first=cached.line_count + 1)
        return True

    def parse_text(self, path: str, text: str) -> list[Memory]:
        """Every memory bullet of a memory file's text (frontmatter and code skipped)."""
        parsed = MemoryFile(path, b"", self._category_of(path, text))
        parsed.in_frontmatter = text.startswith("---")
        self._parse_into(parsed, text, first=1)
        return parsed.memories

    def _parse_into(self, parsed: MemoryFile, text: str, *, first: int) -> None:
        """Parse ``text``, the lines of ``parsed`` from line ``first`` on, into ``parsed``."""
        found: list[Memory] = []
        in_frontmatter, fence = parsed.in_frontmatter, parsed.in_fence
        lines = text.splitlines()
        for number, line in enumerate(lines, start=first):
            stripped = line.strip()
            if in_frontmatter:
                if number > 1 and stripped in ("---", "..."):
                    in_frontmatter = False
                continue
            if stripped.startswith(("```", "~~~")):
                fence = not fence
            if fence:
                continue
            memory = self.parse_line(
                line, category=parsed.category, path=parsed.path, number=number
            )
            if memory is not None:
                found.append(memory)
        parsed.in_frontmatter, parsed.in_fence = in_frontmatter, fence
        parsed.line_count = first - 1 + len(lines)
        parsed.take(found)

    def files(self) -> list[str]:
        """Paths of the memory files, category files first."""
        if not self.vault.resolve(MEMORY_DIR).is_dir():
            return []
        return [entry.path for entry in self.vault.list(MEMORY_DIR)]

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
        out: builtins.list[MemoryFile] = []
        for path in self.files():
            try:
                out.append(self.read(path))
            except NotTextError:
                if path not in self._not_text:
                    log.warning("skipping a memory file that is not text", extra={"path": path})
                    self._not_text.add(path)
                continue
            self._not_text.discard(path)
        return out

    # -- queries ---------------------------------------------------------------

    def get(self, memory_id: str) -> Memory:
        """The memory with this id; NotFoundError if none (deleted by hand, perhaps)."""
        wanted = memory_id.strip().lstrip("^")
        files = self.files()
        with self._cache_guard:  # where it was last read: that file alone, as it reads now
            cached = [self._cache.get(path) for path in files]
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
        key = CATEGORY_ALIASES.get(key, _TITLE_TO_CATEGORY.get(key, key))
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
        clean = " ".join(str(text).split())
        clean = _BLOCK_ID.sub("", clean).strip()
        while _FIELD.search(clean):  # "[a::: b]" made "[a:: b]" once: until none is left
            clean = _FIELD.sub(lambda m: m.group(0).replace("::", ":"), clean)
        all_tags = [normalize_tag(t) for t in tags]
        trailing = _TRAILING_TAGS.search(clean)
        if trailing is not None:
            all_tags.extend(normalize_tag(t) for t in trailing.group(0).split())
            clean = clean[: trailing.start()].strip()
        if not clean:
            raise InvalidInputError("A memory needs some text.")
        # The last guard (the edges check first): a line no file or index can keep.
        for name, given in (("text", clean), ("source", source), ("tags", all_tags)):
            check_values(given, name)
        # Inline #tags stay in the text and count as tags, as they will when read back.
        all_tags = [m.group(1) for m in _INLINE_TAG.finditer(clean)] + all_tags
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
            tags=_unique(all_tags),
            created=moment.replace(microsecond=0),  # the line keeps seconds
            source=_clean_value(source, 200) if source else None,
            path=category_path(cat),
            line=0,
            fields={"agent": _clean_value(agent, 100) or ""} if agent else {},
        )
        named = self._named_day(clean, moment)
        if named is not None:
            memory.fields["when"] = named
        _set_fields(memory, marks)
        # What is returned and cached must be what the line reads back as, field for field.
        back = self.parse_line(
            render_line(replace(memory, id="m-0")), category=cat, path=memory.path, number=0
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
                memory.id = _new_id(taken)
                added[norm] = memory
                added_ids.add(memory.id)
                pending.setdefault(memory.path, []).append(memory)
                chosen.append((memory, True))
            # A file that is not text (left out of ``files``) is refused before anything is added.
            for path in pending.keys() - {f.path for f in every}:
                self.read(path)
            stored: dict[str, Memory] = {}
            for path, memories in pending.items():
                stored.update(self._append(path, memories))
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
            _set_fields(memory, dict(fields))
            prepared.append(memory)
        if not prepared:
            return []
        with self.vault.lock(_LOCK):
            self.read(path)  # a file that is not text is refused before anything is added
            taken = {m.id for f in self.readable() for m in f.memories}
            for memory in prepared:
                memory.id = _new_id(taken.__contains__)
                taken.add(memory.id)
            if not self.vault.is_file(path):
                self.vault.create_text(path, header)
            stored = self._append(path, prepared)
        out = [stored.get(m.id, m) for m in prepared]
        for memory in out:
            self._announce("stored", memory)
        return out

    def _append(self, path: str, memories: builtins.list[Memory]) -> dict[str, Memory]:
        """Append bullets to a memory file; returns each memory as its line reads back."""
        if not self.vault.is_file(path):
            self.vault.create_text(path, category_note(memories[0].category))
        self.vault.append_text(path, "\n".join(render_line(m) for m in memories), notify=False)
        # Read back by content: a line typed by hand meanwhile (before or after ours) is
        # parsed too, and our lines get their real numbers. Only the new bytes are parsed.
        parsed = self.read(path)
        stored = {m.id: found for m in memories if (found := parsed.find(m.id)) is not None}
        # Announced only now, so observers (the index) read the current parse.
        self.vault.notify(Change(path, "append"))
        return stored

    def _locate(self, memory: Memory, text: str, lines: builtins.list[str]) -> int | None:
        """The index in ``lines`` of the line that holds ``memory`` now, found by its id.

        The line it was read from is tried first; if the file changed (a line
        typed or removed above it), the whole text is searched.
        """
        index = memory.line - 1
        if 0 <= index < len(lines):
            there = self.parse_line(
                lines[index], category=memory.category, path=memory.path, number=memory.line
            )
            if there is not None and there.id == memory.id:
                return index
        for current in self.parse_text(memory.path, text):
            if current.id == memory.id:
                return current.line - 1
        return None

    def _remove_line(self, memory: Memory) -> None:
        """Delete ``memory``'s bullet from its file (the caller holds the lock);
        NotFoundError when it was removed meanwhile."""

        def drop(text: str | None) -> str | None:
            lines = (text or "").splitlines(keepends=True)
            index = self._locate(memory, text or "", lines)
            if index is None:
                raise NotFoundError(f"No memory with id {memory.id!r}: it was removed meanwhile.")
            del lines[index]
            return "".join(lines)

        self.vault.edit_text(memory.path, drop)

    def forget(self, memory_id: str) -> Memory:
        """Remove a memory's bullet from its file; returns what was removed."""
        with self.vault.lock(_LOCK):
            memory = self.get(memory_id)

            self._remove_line(memory)
        self._announce("forgotten", memory)
        return memory

    def update_fields(self, memory_id: str, **fields: str | None) -> Memory:
        """Set (or, with None, remove) extra inline fields such as ``archived``."""

        def change(memory: Memory) -> Memory:
            _set_fields(memory, fields)
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
                _set_fields(memory, {"when": named})
            memory.text = clean.text
            memory.tags = _unique([*clean.tags, *memory.tags])
            _set_fields(memory, fields)
            return memory

        return self._rewrite(memory_id, change, keep_derived_id=True, expected_hash=expected_hash)

    def add_tags(self, memory_id: str, tags: Iterable[str]) -> Memory:
        """Add tags to a memory (those it has already are kept once)."""
        added = [normalize_tag(t) for t in tags if t.strip().lstrip("#")]
        check_values(added, "tags")
        if not added:
            raise InvalidInputError("Name a tag to add.")

        def change(memory: Memory) -> Memory:
            memory.tags = _unique([*memory.tags, *added])
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

            self._remove_line(found)
            stored = self._append(moved.path, [moved])
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
                    else _new_id({m.id for m in self.all()}.__contains__)
                )
            updated: list[Memory] = []

            expected = parse_hash(expected_hash) if expected_hash is not None else None

            def rewrite(text: str | None) -> str | None:
                if expected is not None and content_hash(text or "") != expected:
                    now = content_hash(text or "")
                    raise ConflictError(
                        f"{found.path} changed since it was read; nothing was written.",
                        hint="Read the memory again and reapply your change.",
                        current_hash=now,
                    )
                lines = (text or "").splitlines(keepends=True)
                index = self._locate(found, text or "", lines)
                current = (
                    None
                    if index is None
                    else self.parse_line(
                        lines[index], category=found.category, path=found.path, number=index + 1
                    )
                )
                if index is None or current is None:
                    raise NotFoundError(
                        f"No memory with id {found.id!r}: it was removed meanwhile."
                    )
                memory = change(
                    replace(current, fields=dict(current.fields), tags=list(current.tags))
                )
                if new_id is not None:
                    memory.id, memory.explicit_id = new_id, True
                ending = "\r\n" if lines[index].endswith("\r\n") else "\n"
                indent = re.match(r"^[ \t]*", lines[index])
                lines[index] = (indent.group(0) if indent else "") + render_line(memory) + ending
                updated[:] = [memory]
                return "".join(lines)

            self.vault.edit_text(found.path, rewrite)
        return updated[0]


def _clean_value(value: str, limit: int) -> str | None:
    """An inline field's value: one line, no ']' or '::' that would end or forge a field."""
    clean = " ".join(value.split()).replace("]", ")")
    while "::" in clean:
        clean = clean.replace("::", ":")
    return clean[:limit].strip() or None


def _new_id(taken: Callable[[str], bool]) -> str:
    while True:
        candidate = "m-" + secrets.token_hex(4)
        if not taken(candidate):
            return candidate


def _unique(tags: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for tag in tags:
        if tag and tag.casefold() not in seen:
            seen.add(tag.casefold())
            out.append(tag)
    return out


def _set_fields(memory: Memory, fields: dict[str, str | None]) -> None:
    """Set a memory's extra inline fields; None removes one."""
    for key, value in fields.items():
        if value is None:
            memory.fields.pop(key, None)
        else:
            memory.fields[key] = _clean_value(value, 200) or ""
