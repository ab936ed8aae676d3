"""Cutting notes into searchable chunks, Markdown-aware.

- A memory bullet is a chunk of its own. When its source names a
  conversation (``telegram:123``, ``session/7``), its *context* is the
  window of neighbouring memories from that conversation written close in
  time: indexed and embedded alongside it, so "what games did they play at
  the picnic?" finds the reply that names the games, not only the line that
  mentions the picnic.
- Other notes are cut at headings; consecutive small sections share a chunk
  and a long section is split into pieces of about ``chunk_tokens`` with
  ``overlap_tokens`` repeated. Line ranges are kept. The context of a note
  chunk is its title, heading path and (for tasks, contacts, projects ...)
  its frontmatter fields, so those fields are searchable.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from memvault.vault.markdown import headings, mask_code
from memvault.vault.memories import Memory
from memvault.vault.note import plain

CHARS_PER_TOKEN = 4

KIND_FOLDERS: dict[str, str] = {
    "Memory": "memory",
    "Tasks": "task",
    "Contacts": "contact",
    "Projects": "project",
    "Journal": "journal",
    "Insights": "insight",
    "Skills": "skill",
    "Entities": "entity",
}
# An embedded memory: ``![[Memory/Facts#^m-3fa2c1]]`` (the block id is the memory's id).
MEMORY_EMBED = re.compile(r"!\[\[[^\[\]|#]*#\^(m-[0-9a-f]+)(?:\|[^\[\]]*)?\]\]")
# Kinds whose frontmatter fields describe the thing itself and are worth searching.
_FIELD_KINDS = frozenset({"task", "contact", "project", "insight", "skill", "entity"})
_SKIP_FIELDS = frozenset({"tags", "aliases", "cssclasses", "cssclass", "publish", "position"})
_JOURNAL_DAY = re.compile(r"(\d{4}-\d{2}-\d{2})\.md$")


def estimate_tokens(text: str) -> int:
    """The token estimate used everywhere in memvault: four characters a token."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def kind_of(path: str) -> str:
    """The kind of note a vault path holds, from its top-level folder."""
    top = path.split("/", 1)[0] if "/" in path else ""
    return KIND_FOLDERS.get(top, "note")


def is_digest(kind: str, frontmatter: Mapping[str, Any] | str | None) -> bool:
    """Whether a note is a digest: an insight the distill job wrote without a model
    (``digest: true``), a title from its sources' words and their embeds, no words of
    its own. Search shows its sources in its place (:mod:`memvault.index.search`).

    ``frontmatter`` is the note's, parsed or as the index stores it (JSON).
    """
    if kind != "insight" or frontmatter is None:
        return False
    if isinstance(frontmatter, str):
        try:
            frontmatter = json.loads(frontmatter)
        except ValueError:
            return False
    return isinstance(frontmatter, Mapping) and frontmatter.get("digest") is True


@dataclass
class ChunkDraft:
    """One chunk before it is stored."""

    ordinal: int
    kind: str
    start_line: int
    end_line: int
    text: str
    context: str = ""
    heading: str = ""
    group: str = ""
    memory_id: str | None = None
    category: str | None = None
    importance: float = 0.5
    created: float | None = None
    archived: bool = False
    tags: list[str] = field(default_factory=list)

    @property
    def hash(self) -> str:
        """Identifies what the embedding is computed from: reuse it while this is unchanged."""
        digest = hashlib.sha1(f"{self.text}\x1f{self.context}".encode())
        return digest.hexdigest()[:20]


def _timestamp(value: Any) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day).timestamp()
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.strip()).timestamp()
        except ValueError:
            return None
    return None


def note_created(path: str, frontmatter: Mapping[str, Any], mtime: float) -> float:
    """When a note is "from": its journal day, its created/date field, else its mtime."""
    day = _JOURNAL_DAY.search(path)
    if day and kind_of(path) == "journal":
        stamp = _timestamp(day.group(1))
        if stamp is not None:
            return stamp
    for key in ("created", "date"):
        stamp = _timestamp(frontmatter.get(key))
        if stamp is not None:
            return stamp
    return mtime


def field_summary(kind: str, frontmatter: Mapping[str, Any]) -> str:
    """``key: value`` pairs of a typed note's frontmatter, for search."""
    if kind not in _FIELD_KINDS:
        return ""
    parts = []
    for key, value in frontmatter.items():
        if key in _SKIP_FIELDS or value in (None, "", []):
            continue
        shown = plain(value)
        if isinstance(shown, list):
            shown = ", ".join(str(v) for v in shown)
        text = str(shown).replace("[[", "").replace("]]", "")
        parts.append(f"{key}: {text}")
    return "; ".join(parts)


def memory_chunks(
    memories: Sequence[Memory], *, window: int = 2, max_gap_hours: float = 6.0
) -> list[ChunkDraft]:
    """A chunk per memory, with its conversational neighbours as context."""
    drafts: list[ChunkDraft] = []
    for index, memory in enumerate(memories):
        group = memory.source or ""
        neighbours = [
            other.text
            for other in memories[max(0, index - window) : index + window + 1]
            if other is memory or _close(memory, other, group, max_gap_hours)
        ]
        drafts.append(
            ChunkDraft(
                ordinal=index,
                kind="memory",
                start_line=memory.line,
                end_line=memory.line,
                text=memory.text,
                context="\n".join(neighbours) if len(neighbours) > 1 else "",
                group=group,
                memory_id=memory.id,
                category=memory.category,
                importance=memory.importance,
                created=_told_of(memory),
                archived=memory.retired,  # archived or superseded: hidden by default
                tags=list(memory.tags),
            )
        )
    return drafts


def _told_of(memory: Memory) -> float | None:
    """When a memory is "from": the day its text named when stored ("gestern ...":
    ``[when::]``) at the hour it was stored, else the moment it was stored."""
    if memory.created is None:
        return None
    day = memory.when
    if day is None:
        return memory.created.timestamp()
    return datetime.combine(day, memory.created.timetz()).timestamp()


def is_conversation(source: str | None) -> bool:
    """Whether a memory source names one conversation ("telegram:123", "session/7").

    Plain sources ("cli", "mcp") do not: facts stored one by one are not
    each other's context.
    """
    return bool(source) and any(mark in source for mark in ":/")  # type: ignore[operator]


def _close(a: Memory, b: Memory, group: str, max_gap_hours: float) -> bool:
    if not is_conversation(group) or (b.source or "") != group:
        return False
    if a.created is None or b.created is None:
        return a.created is None and b.created is None
    return abs((a.created - b.created).total_seconds()) <= max_gap_hours * 3600


def note_chunks(
    *,
    path: str,
    kind: str,
    title: str,
    body: str,
    body_offset: int,
    frontmatter: Mapping[str, Any],
    tags: Sequence[str],
    created: float,
    chunk_tokens: int = 400,
    overlap_tokens: int = 50,
) -> list[ChunkDraft]:
    """Chunks of an ordinary note: sections packed up to ``chunk_tokens``, long ones split."""
    lines = body.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    max_chars = chunk_tokens * CHARS_PER_TOKEN
    overlap_chars = overlap_tokens * CHARS_PER_TOKEN
    # Lines of code blocks: a `## ...` or `- ` there is code, never a heading or a placeholder.
    masked = mask_code("\n".join(lines)).split("\n") if lines else []
    fenced = [
        bool(line.strip()) and not code.strip() for line, code in zip(lines, masked, strict=True)
    ]
    # Section boundaries: (first line index, heading path).
    starts: list[tuple[int, str]] = [(0, "")]
    trail: list[tuple[int, str]] = []
    for heading in headings(body):
        trail = [(level, text) for level, text in trail if level < heading.level]
        trail.append((heading.level, heading.text))
        path_text = " > ".join(text for _, text in trail)
        if heading.line - 1 == 0:
            starts[0] = (0, path_text)
        else:
            starts.append((heading.line - 1, path_text))
    sections = [
        (start, starts[i + 1][0] if i + 1 < len(starts) else len(lines), heading_path)
        for i, (start, heading_path) in enumerate(starts)
    ]
    pieces: list[tuple[int, int, str]] = []  # (first line, end line exclusive, heading path)
    for start, end, heading_path in sections:
        size = sum(len(line) + 1 for line in lines[start:end])
        if size <= max_chars:
            pieces.append((start, end, heading_path))
            continue
        pieces.extend(_split_long(lines, start, end, heading_path, max_chars, overlap_chars))
    # Pack small consecutive pieces together.
    packed: list[tuple[int, int, str]] = []
    for start, end, heading_path in pieces:
        if packed:
            p_start, p_end, p_heading = packed[-1]
            merged = sum(len(line) + 1 for line in lines[p_start:end])
            if p_end == start and merged <= max_chars:
                packed[-1] = (p_start, end, p_heading or heading_path)
                continue
        packed.append((start, end, heading_path))
    fields = field_summary(kind, frontmatter)
    drafts: list[ChunkDraft] = []
    for start, end, heading_path in packed:
        text = "\n".join(_meaningful(lines[start:end], fenced[start:end])).strip()
        if not text:
            continue
        context_parts = [title]
        if heading_path and heading_path != title:
            context_parts.append(heading_path)
        if fields and not drafts:
            context_parts.append(fields)
        first = start + next((i for i, line in enumerate(lines[start:end]) if line.strip()), 0)
        last = start + max(i for i, line in enumerate(lines[start:end]) if line.strip())
        drafts.append(
            ChunkDraft(
                ordinal=len(drafts),
                kind=kind,
                start_line=first + body_offset + 1,
                end_line=last + body_offset + 1,
                text=text,
                context="\n".join(context_parts),
                heading=heading_path,
                group=path,
                created=created,
                tags=list(tags),
            )
        )
    if not drafts and (title or fields):
        # An empty note is still findable by its title and fields.
        drafts.append(
            ChunkDraft(
                ordinal=0,
                kind=kind,
                start_line=body_offset + 1,
                end_line=body_offset + 1,
                text=title,
                context=fields,
                group=path,
                created=created,
                tags=list(tags),
            )
        )
    return drafts


_PLACEHOLDER = re.compile(r"^\s*(?:[-*+](?:\s+\[[ xX]?\])?|\d+\.|[-*+]\s+\[\[\]\])\s*$")
_ANY_HEADING = re.compile(r"^ {0,3}(#{1,6})\s")


def _meaningful(lines: Sequence[str], fenced: Sequence[bool]) -> list[str]:
    """Lines without a template's scaffolding: placeholder bullets and empty sections' headings.

    A level-1 heading (the note's title) always stays, and so does every line of a code
    block (``fenced``), whatever it looks like.
    """
    kept = [
        (line, code)
        for line, code in zip(lines, fenced, strict=True)
        if code or not _PLACEHOLDER.match(line)
    ]
    out: list[str] = []
    for index, (line, code) in enumerate(kept):
        heading = None if code else _ANY_HEADING.match(line)
        if heading and len(heading.group(1)) > 1:
            following = next(((x, c) for x, c in kept[index + 1 :] if x.strip()), None)
            if following is None or (not following[1] and _ANY_HEADING.match(following[0])):
                continue
        out.append(line)
    return out


def _split_long(
    lines: list[str], start: int, end: int, heading_path: str, max_chars: int, overlap_chars: int
) -> list[tuple[int, int, str]]:
    """Split lines[start:end] into windows of at most ``max_chars`` with overlapping lines."""
    out: list[tuple[int, int, str]] = []
    first = start
    while first < end:
        size = 0
        last = first
        while last < end and (size + len(lines[last]) + 1 <= max_chars or last == first):
            size += len(lines[last]) + 1
            last += 1
        out.append((first, last, heading_path))
        if last >= end:
            break
        back = last
        carried = 0
        while back > first + 1 and carried + len(lines[back - 1]) + 1 <= overlap_chars:
            back -= 1
            carried += len(lines[back]) + 1
        first = back if back > first else last
    return out
