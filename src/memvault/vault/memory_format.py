"""How one memory is written in Markdown: a bullet with its metadata inline.

A memory line reads naturally in Obsidian and carries its metadata as
Dataview-style inline fields, its tags as Obsidian tags, and a stable block
id, so ``[[Memory/Preferences#^m-3f9a1c2b]]`` links to it::

    - Prefers dark mode in every app #ui [importance:: 0.8]
      [created:: 2026-11-22 10:31:05] [source:: cli] ^m-3f9a1c2b

(shown on two lines here; it is one line in the file). A bullet typed without
an id still counts: its id is derived from its text.

This module is the line's format alone: the :class:`Memory` record, reading a bullet
into one (:func:`parse_line`) and writing one back (:func:`render_line`), ids, and the
cleaning that keeps a new memory's text and fields from forging the line's parts.
The files the lines live in are :mod:`memvault.vault.memory_files`; storing and
finding memories in them is :mod:`memvault.vault.memories`.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from memvault.clock import Clock
from memvault.vault.markdown import normalize_tag
from memvault.vocabulary import CONVERSATION

# ``[trust:: low]``: text from someone other than the owner that reads as an order to the
# agent (:mod:`memvault.privacy.trust` marks it; the context builder keeps it in the data).
LOW_TRUST = "low"
DEFAULT_IMPORTANCE = 0.5

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


def normalize_text(text: str) -> str:
    """The form two memories are compared in for exact duplicates."""
    return " ".join(text.split()).casefold()


def derived_id(text: str) -> str:
    """The id of a bullet typed by hand without a block id."""
    return "m-" + hashlib.sha1(normalize_text(text).encode("utf-8")).hexdigest()[:8]


def fresh_id(taken: Callable[[str], bool]) -> str:
    """A fresh random id that ``taken`` does not know."""
    while True:
        candidate = "m-" + secrets.token_hex(4)
        if not taken(candidate):
            return candidate


def _format_created(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _format_importance(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value not in (0, 1) else f"{value:.1f}"


def render_line(memory: Memory) -> str:
    """The bullet for a memory, metadata in a fixed order."""
    parts = [f"- {memory.text}"]
    inline = {tag.casefold() for tag in inline_tags(memory.text)}
    parts.extend(f"#{tag}" for tag in memory.tags if tag.casefold() not in inline)
    parts.append(f"[importance:: {_format_importance(memory.importance)}]")
    if memory.created is not None:
        parts.append(f"[created:: {_format_created(memory.created)}]")
    if memory.source:
        parts.append(f"[source:: {memory.source}]")
    parts.extend(f"[{key}:: {value}]" for key, value in memory.fields.items())
    parts.append(f"^{memory.id}")
    return " ".join(parts)


def parse_line(line: str, clock: Clock, *, category: str, path: str, number: int) -> Memory | None:
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
    tags = inline_tags(text) + tags
    raw_importance = fields.pop("importance", "")
    try:
        importance = min(1.0, max(0.0, float(raw_importance)))
    except ValueError:
        importance = DEFAULT_IMPORTANCE
    created = _parse_created(fields.pop("created", ""), clock)
    source = fields.pop("source", None) or None
    return Memory(
        id=memory_id or derived_id(text),
        text=text,
        category=category,
        importance=importance,
        tags=unique_tags(tags),
        created=created,
        source=source,
        path=path,
        line=number,
        fields=fields,
        explicit_id=explicit,
    )


def _parse_created(raw: str, clock: Clock) -> datetime | None:
    if not raw:
        return None
    try:
        return clock.localize(datetime.fromisoformat(raw.strip()))
    except ValueError:
        return None


def inline_tags(text: str) -> list[str]:
    """The ``#tags`` written inside a memory's text (they stay there and count as tags)."""
    return [m.group(1) for m in _INLINE_TAG.finditer(text)]


def clean_text(text: str, tags: Iterable[str]) -> tuple[str, list[str]]:
    """A new memory's text as one line that cannot forge the parts of its bullet (a block
    id goes, an inline field is defused, trailing ``#tags`` join ``tags``), and its tags."""
    clean = " ".join(str(text).split())
    clean = _BLOCK_ID.sub("", clean).strip()
    while _FIELD.search(clean):  # "[a::: b]" made "[a:: b]" once: until none is left
        clean = _FIELD.sub(lambda m: m.group(0).replace("::", ":"), clean)
    all_tags = [normalize_tag(t) for t in tags]
    trailing = _TRAILING_TAGS.search(clean)
    if trailing is not None:
        all_tags.extend(normalize_tag(t) for t in trailing.group(0).split())
        clean = clean[: trailing.start()].strip()
    return clean, all_tags


def clean_value(value: str, limit: int) -> str | None:
    """An inline field's value: one line, no ']' or '::' that would end or forge a field."""
    clean = " ".join(value.split()).replace("]", ")")
    while "::" in clean:
        clean = clean.replace("::", ":")
    return clean[:limit].strip() or None


def unique_tags(tags: Iterable[str]) -> list[str]:
    """``tags`` in order, each once (compared case-insensitively), empty ones left out."""
    seen: set[str] = set()
    out: list[str] = []
    for tag in tags:
        if tag and tag.casefold() not in seen:
            seen.add(tag.casefold())
            out.append(tag)
    return out


def set_fields(memory: Memory, fields: dict[str, str | None]) -> None:
    """Set a memory's extra inline fields; None removes one."""
    for key, value in fields.items():
        if value is None:
            memory.fields.pop(key, None)
        else:
            memory.fields[key] = clean_value(value, 200) or ""
