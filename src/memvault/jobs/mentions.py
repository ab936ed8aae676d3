"""The knowledge_graph job's mentions: each entity note lists, between memvault's markers,
the memories that name or tag it (step 2 of :mod:`memvault.jobs.knowledge_graph`).

Apart from the extraction because it needs no model and stands on its own: it finds
names in memories (:class:`MentionIndex`) and writes one block per note; extraction only
shares :func:`pin_id`, which keeps a block reference to a memory valid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memvault.config import KnowledgeGraphJob
from memvault.errors import MemvaultError
from memvault.jobs.engine import JobContext
from memvault.jobs.marked_section import Markers
from memvault.vault.entities import Entity
from memvault.vault.markdown import section_range
from memvault.vault.memories import Memory
from memvault.vault.note import Note

MARKERS = Markers("mentions")
HEADING = "Mentions"
MIN_NAME_CHARS = 2  # a one-letter alias would match everywhere
_SLUG = re.compile(r"[\W_]+")


def pin_id(ctx: JobContext, memory: Memory) -> None:
    """Write out the id of a bullet typed without one (the id it has, derived from its
    text), so a block reference to it holds when the text is edited later."""
    if memory.explicit_id:
        return
    ctx.will_change(memory.path)
    ctx.services.memories.update_text(memory.id, memory.text)
    memory.explicit_id = True


def slug(text: str) -> str:
    """A name or tag as a tag compares: lower case, words joined by ``-``."""
    return _SLUG.sub("-", text.casefold()).strip("-")


def _normal(text: str) -> str:
    return " ".join(text.casefold().split())


@dataclass
class MentionIndex:
    """Finds the entities a memory names (whole words, any case) or tags."""

    pattern: re.Pattern[str] | None
    by_name: dict[str, set[str]]
    by_slug: dict[str, set[str]]

    @classmethod
    def of(cls, entities: list[Entity]) -> MentionIndex:
        """The index of every name, file name and alias of ``entities``."""
        by_name: dict[str, set[str]] = {}
        by_slug: dict[str, set[str]] = {}
        spelled: set[str] = set()  # as written: IGNORECASE matches "Straße" to "STRASSE"
        for entity in entities:
            stem = entity.path.rsplit("/", 1)[-1].removesuffix(".md")
            for name in {entity.name, stem, *entity.aliases}:
                key = _normal(name)
                if len(key) >= MIN_NAME_CHARS:
                    by_name.setdefault(key, set()).add(entity.path)
                    spelled.add(" ".join(name.split()))
                tag = slug(name)
                if len(tag) >= MIN_NAME_CHARS:
                    by_slug.setdefault(tag, set()).add(entity.path)
        # Longest first: at one place in a text, "Acme Corp" wins over "Acme".
        names = sorted(spelled, key=lambda n: (-len(n), n))
        alternatives = "|".join(r"\s+".join(re.escape(w) for w in n.split()) for n in names)
        # A lookahead finds names that overlap ("New York" in "New York Minster").
        pattern = (
            re.compile(rf"(?<!\w)(?=({alternatives})(?!\w))", re.IGNORECASE) if names else None
        )
        return cls(pattern, by_name, by_slug)

    def entities_in(self, memory: Memory) -> set[str]:
        """The paths of the entities ``memory`` names or tags."""
        found: set[str] = set()
        if self.pattern is not None:
            for match in self.pattern.finditer(memory.text):
                found |= self.by_name.get(_normal(match.group(1)), set())
        for tag in memory.tags:
            for part in tag.split("/"):
                found |= self.by_slug.get(slug(part), set())
        return found


def refresh_mentions(ctx: JobContext, settings: KnowledgeGraphJob, memories: list[Memory]) -> int:
    """Write each entity note's Mentions block where its list changed; how many were."""
    runtime = ctx.services
    entities = runtime.entities.list()
    index = MentionIndex.of(entities)
    mentioned: dict[str, list[Memory]] = {}
    for memory in memories:
        for path in index.entities_in(memory):
            mentioned.setdefault(path, []).append(memory)
    written = 0
    for entity in entities:
        found = sorted(mentioned.get(entity.path, []), key=_newest_first)
        try:
            if write_mentions(ctx, entity, found[: settings.max_mentions]):
                written += 1
        except MemvaultError as exc:  # a note broken by hand breaks only itself
            ctx.record(f"could not list mentions in {entity.path}: {exc.message}")
    return written


def _newest_first(memory: Memory) -> tuple[bool, float, str, int]:
    when = memory.created.timestamp() if memory.created is not None else 0.0
    return (memory.created is None, -when, memory.path, memory.line)


def write_mentions(ctx: JobContext, entity: Entity, memories: list[Memory]) -> bool:
    """Put the list in the entity's note when it differs; whether the note was written."""
    vault = ctx.services.vault
    path = entity.path
    text = vault.read_text(path)
    if not memories and MARKERS.span(text, path) is None:
        return False
    for memory in memories:
        pin_id(ctx, memory)
    listing = (
        "\n".join(f"- {mention_embed(m)}" for m in memories)
        if memories
        else f"No memory mentions {entity.name} now."
    )
    if with_mentions(text, listing, path) == text:
        return False
    ctx.will_change(path)
    vault.edit_text(path, lambda now: with_mentions(now or "", listing, path))
    return True


def mention_embed(memory: Memory) -> str:
    """An embed of the memory's block: Obsidian shows the memory's text in its place, while
    the note itself holds only the link (search does not find an entity note by the words
    of every memory that names it)."""
    return f"![[{memory.path.removesuffix('.md')}#^{memory.id}]]"


def with_mentions(text: str, listing: str, where: str) -> str:
    """``text`` with its Mentions block holding ``listing``; everything else as it was.

    A note without the block gets it at the end of its ``## Mentions``
    section, or, with no such section, in a new one at the end.
    """
    note = Note.parse(text)
    body = note.body
    if MARKERS.span(body, where) is not None:
        new_body = MARKERS.put(body, listing, where)
    else:
        found = section_range(body, HEADING)
        if found is None:
            base = body.rstrip("\n")
            new_body = (f"{base}\n\n" if base else "") + f"## {HEADING}\n\n"
            new_body = MARKERS.put(new_body, listing, where)
        else:
            lines = body.split("\n")
            _, start, end = found
            last = next((i + 1 for i in range(end - 1, start - 1, -1) if lines[i].strip()), start)
            offset = sum(len(line) + 1 for line in lines[:last])
            new_body = MARKERS.put(body, listing, where, insert_at=min(offset, len(body)))
    if new_body == body:
        return text
    note.body = new_body
    return note.render()
