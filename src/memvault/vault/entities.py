"""The knowledge graph's nodes: one note per entity, its facts and its typed relations.

An entity is a person, project, place, organisation or thing. People are the
notes in ``Contacts/``, projects those in ``Projects/``; every other entity
has a note in ``Entities/`` whose frontmatter ``type`` says what it is. Facts
and relations use basic-memory's list syntax, which reads as plain Markdown
in Obsidian, with Dataview inline fields for when a fact held and where it
came from::

    ---
    type: person
    aliases: [Mel]
    ---
    # Melanie

    ## Observations
    - [favourite player] Ronaldo [valid_from:: 2025-01-02] [valid_until:: 2026-03-01]
    - [favourite player] Messi [valid_from:: 2026-03-01] [source:: [[Memory/Facts#^m-3fa2c1]]]
    - [hobby] paints landscapes #art

    ## Relations
    - friend_of [[Caroline]]
    - works_at [[Acme]] [valid_from:: 2024-05-01]

An observation is ``- [category] text``, with ``#tags`` and the fields
``valid_from``, ``valid_until`` and ``source`` optional; a relation is
``- relation_type [[Target]]`` under a *Relations* heading. A fact that
changed is never deleted: the old one gets ``valid_until`` and both stay
readable. The index stores every relation as a typed edge of its links.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from memvault.errors import InvalidInputError, MemvaultError, NotFoundError
from memvault.text import check_text
from memvault.vault.markdown import (
    aliases,
    append_to_section,
    frontmatter_tags,
    section_range,
    title_of,
)
from memvault.vault.note import Note
from memvault.vault.store import Vault

ENTITIES_DIR = "Entities"
OBSERVATIONS = "Observations"
RELATIONS = "Relations"
# Where each kind of entity is kept: people and projects have their own folders already.
TYPE_FOLDERS = {"person": "Contacts", "project": "Projects"}
FOLDER_TYPES = {folder: kind for kind, folder in TYPE_FOLDERS.items()} | {ENTITIES_DIR: "thing"}
ENTITY_FOLDERS = tuple(FOLDER_TYPES)
MAX_NAME_CHARS = 120
MAX_FACT_CHARS = 500

_ITEM = re.compile(r"^[ \t]*[-*+][ \t]+(.*?)[ \t]*$")
# ``[category] text``; not a task box (``[ ]``, ``[x]``) and not an inline field (``[k:: v]``).
_OBSERVATION = re.compile(r"^\[(?![ xX/-]\])([^\[\]:]+)\][ \t]+(.+)$")
# ``relation_type [[Target]] rest``: the type is the words before the first link.
_RELATION = re.compile(r"^([^\[\]]+?)[ \t]+\[\[([^\[\]|#]+)(?:#[^\[\]|]*)?(?:\|[^\[\]]*)?\]\](.*)$")
_FIELD = re.compile(r"[ \t]*\[([A-Za-z_][\w]*)::[ \t]*((?:\[\[[^\]]*\]\]|[^\]])*?)[ \t]*\]")
_TAG = re.compile(r"(?:(?<=\s)|^)#([^\s#\[\]()!,.;:?\"']+)")
_SLUG = re.compile(r"[^\w]+")


def relation_name(text: str) -> str:
    """A relation type as stored: lower case, words joined by ``_`` ("Works at" -> works_at)."""
    return _SLUG.sub("_", text.strip().casefold()).strip("_")


def _date(value: str | None) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value.strip()[:10])
    except ValueError:
        return None


def _fields(text: str) -> tuple[str, dict[str, str]]:
    """``text`` without its inline fields, and the fields (lower-case keys)."""
    found = {m.group(1).casefold(): m.group(2).strip() for m in _FIELD.finditer(text)}
    return _FIELD.sub("", text).strip(), found


def held(valid_from: date | None, valid_until: date | None, on: date | None = None) -> bool:
    """Whether something valid from ``valid_from`` until (not including) ``valid_until``
    held on ``on``; without ``on``, whether it still holds (has no end)."""
    if on is None:
        return valid_until is None
    return (valid_from is None or valid_from <= on) and (valid_until is None or on < valid_until)


def _when_fields(
    valid_from: date | None, valid_until: date | None, source: str | None
) -> list[str]:
    """The inline fields saying when something held and where it was learnt."""
    fields = []
    if valid_from:
        fields.append(f"[valid_from:: {valid_from.isoformat()}]")
    if valid_until:
        fields.append(f"[valid_until:: {valid_until.isoformat()}]")
    if source:
        fields.append(f"[source:: {source}]")
    return fields


def _when(valid_from: date | None, valid_until: date | None) -> dict[str, str | None]:
    return {
        "valid_from": valid_from.isoformat() if valid_from else None,
        "valid_until": valid_until.isoformat() if valid_until else None,
    }


@dataclass
class Fact:
    """One observation about an entity, and when it held."""

    category: str
    text: str
    tags: list[str] = field(default_factory=list)
    valid_from: date | None = None
    valid_until: date | None = None
    source: str | None = None  # a link to where it was learnt, e.g. [[Memory/Facts#^m-...]]
    line: int = 0  # 0-based line in the note's body

    def current(self, on: date | None = None) -> bool:
        """Whether the fact holds on ``on`` (today's facts: not yet closed)."""
        return held(self.valid_from, self.valid_until, on)

    def render(self) -> str:
        """The list item."""
        parts = [f"- [{self.category}] {self.text}"]
        parts += [f"#{tag}" for tag in self.tags if f"#{tag}" not in self.text]
        return " ".join(parts + _when_fields(self.valid_from, self.valid_until, self.source))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "category": self.category,
            "text": self.text,
            "tags": self.tags,
            **_when(self.valid_from, self.valid_until),
            "current": self.current(),
            "source": self.source,
        }


@dataclass
class Relation:
    """A typed edge from an entity to another note."""

    type: str
    target: str
    context: str = ""
    valid_from: date | None = None
    valid_until: date | None = None
    source: str | None = None
    line: int = 0

    def current(self, on: date | None = None) -> bool:
        """Whether the relation holds on ``on`` (today's: not yet ended)."""
        return held(self.valid_from, self.valid_until, on)

    def render(self) -> str:
        """The list item."""
        parts = [f"- {self.type} [[{self.target}]]"]
        if self.context:
            parts.append(self.context)
        return " ".join(parts + _when_fields(self.valid_from, self.valid_until, self.source))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "type": self.type,
            "target": self.target,
            "context": self.context,
            **_when(self.valid_from, self.valid_until),
            "current": self.current(),
        }


@dataclass
class Entity:
    """An entity's note, read."""

    path: str
    name: str
    type: str
    aliases: builtins.list[str]
    tags: builtins.list[str]
    facts: builtins.list[Fact]
    relations: builtins.list[Relation]

    def to_dict(self, *, history: bool = True) -> dict[str, Any]:
        """JSON-ready form; without ``history`` only the facts that hold today."""
        facts = self.facts if history else [f for f in self.facts if f.current()]
        return {
            "path": self.path,
            "name": self.name,
            "type": self.type,
            "aliases": self.aliases,
            "tags": self.tags,
            "facts": [f.to_dict() for f in facts],
            "relations": [r.to_dict() for r in self.relations],
        }


def entity_type(path: str, frontmatter: Mapping[str, Any]) -> str:
    """What a note describes: its frontmatter ``type``, else what its folder holds."""
    declared = frontmatter.get("type")
    if isinstance(declared, str) and declared.strip():
        return declared.strip().casefold()
    return FOLDER_TYPES.get(path.split("/", 1)[0], "thing")


def relation_lines(body: str) -> dict[int, tuple[str, str, str | None]]:
    """The typed relations in a note's body: 0-based line -> (type, link target, the
    ``valid_until`` date when the relation has ended).

    Only list items under a heading named *Relations* count: elsewhere a line
    like ``- see [[Note]]`` is an ordinary link.
    """
    return {
        r.line: (r.type, r.target, r.valid_until.isoformat() if r.valid_until else None)
        for r in _relations(body)
    }


def _relations(body: str) -> builtins.list[Relation]:
    """The items of the body's Relations section that read as typed relations."""
    where = section_range(body, RELATIONS)
    if where is None:
        return []
    lines = body.split("\n")
    out: builtins.list[Relation] = []
    for number in range(where[1], where[2]):
        item = _ITEM.match(lines[number])
        relation = _RELATION.match(item.group(1)) if item else None
        kind = relation_name(relation.group(1)) if relation else ""
        if relation and kind:
            rest, found = _fields(relation.group(3))
            out.append(
                Relation(
                    type=kind,
                    target=relation.group(2).strip(),
                    context=rest,
                    valid_from=_date(found.get("valid_from")),
                    valid_until=_date(found.get("valid_until")),
                    source=found.get("source") or None,
                    line=number,
                )
            )
    return out


def parse_entity(path: str, text: str) -> Entity:
    """The entity a note describes (a note in any shape: missing sections are empty)."""
    return _entity_of(path, Note.parse(text))


def _entity_of(path: str, note: Note) -> Entity:
    body = note.body
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    named = note.get("name")
    name = named.strip() if isinstance(named, str) and named.strip() else title_of(body, stem)
    lines = body.split("\n")
    facts: builtins.list[Fact] = []
    where = section_range(body, OBSERVATIONS)
    for number in range(where[1], where[2]) if where else ():
        item = _ITEM.match(lines[number])
        observed = _OBSERVATION.match(item.group(1)) if item else None
        if observed is None:
            continue
        rest, found = _fields(observed.group(2))
        tags = [m.group(1) for m in _TAG.finditer(rest)]
        facts.append(
            Fact(
                category=observed.group(1).strip(),
                text=rest,
                tags=tags,
                valid_from=_date(found.get("valid_from")),
                valid_until=_date(found.get("valid_until")),
                source=found.get("source") or None,
                line=number,
            )
        )
    return Entity(
        path=path,
        name=name,
        type=entity_type(path, note.frontmatter),
        aliases=aliases(note.frontmatter),
        tags=frontmatter_tags(note.frontmatter),
        facts=facts,
        relations=_relations(body),
    )


def clean_name(name: str) -> str:
    """An entity's name as a file name allows; InvalidInputError when nothing is left, or
    for a character no text may hold."""
    check_text(name, "The entity's name")
    cleaned = " ".join(re.sub(r'[\\/:*?"<>|#^\[\]]', " ", name).split())[:MAX_NAME_CHARS]
    if not cleaned.strip(" ."):
        raise InvalidInputError(f"{name!r} is not a usable entity name.")
    return cleaned.strip(" .")


def new_entity_path(name: str, kind: str = "thing") -> str:
    """Where :meth:`Entities.ensure` creates the note of a new entity ``name`` of type ``kind``."""
    folder = TYPE_FOLDERS.get(relation_name(kind) or "thing", ENTITIES_DIR)
    return f"{folder}/{clean_name(name)}.md"


def _normal(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".")


@dataclass
class FactChange:
    """What recording a fact did: ``added``, ``unchanged``, and the facts it closed."""

    path: str
    action: str
    closed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"path": self.path, "action": self.action, "closed": self.closed}


class Entities:
    """Finds, reads and extends entity notes; every write is a checked edit of one note."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault

    def paths(self) -> builtins.list[str]:
        """Every note in the entity folders."""
        out: builtins.list[str] = []
        for folder in ENTITY_FOLDERS:
            try:
                out += [e.path for e in self.vault.list(folder) if not e.is_dir]
            except (NotFoundError, InvalidInputError):
                continue
        return sorted(out)

    def list(self) -> builtins.list[Entity]:
        """Every entity, read from its note."""
        out: builtins.list[Entity] = []
        for path in self.paths():
            try:
                out.append(parse_entity(path, self.vault.read_text(path)))
            except MemvaultError:  # gone meanwhile, or not text
                continue
        return out

    def names(self) -> dict[str, str]:
        """Every name and path an entity is known by (see :func:`names_of`), read now."""
        return names_of(self.list())

    def find(self, name: str, known: dict[str, str] | None = None) -> str | None:
        """The note of the entity called ``name`` (file name, title, alias or path), or None;
        ``known`` is :meth:`names` read earlier (else it is read now)."""
        wanted = _normal(name.removeprefix("[[").removesuffix("]]").split("|")[0])
        if not wanted:
            return None
        if known is None and name.endswith(".md") and name in self.paths():
            return name  # an entity note's own path: no need to read every entity
        known = self.names() if known is None else known
        if wanted in known:
            return known[wanted]
        # A path may name its note with the extension ("Contacts/Melanie.md").
        return known.get(wanted.removesuffix(".md")) if "/" in wanted else None

    def get(self, name: str) -> Entity:
        """The entity called ``name``; NotFoundError naming it when there is none."""
        path = self.find(name)
        if path is None:
            raise NotFoundError(
                f"No entity called {name!r}.",
                hint="Entities are the notes in Contacts/, Projects/ and Entities/.",
            )
        return parse_entity(path, self.vault.read_text(path))

    def ensure(self, name: str, kind: str = "thing", known: dict[str, str] | None = None) -> str:
        """The note of ``name``, created (in the folder for its type) when there is none;
        ``known`` as for :meth:`find`, and a note created is added to it."""
        existing = self.find(name, known)
        if existing is not None:
            return existing
        title = clean_name(name)
        kind = relation_name(kind) or "thing"
        path = new_entity_path(name, kind)
        frontmatter: dict[str, Any] = {"type": kind, "tags": ["entity"]}

        def create(text: str | None) -> str | None:
            if text is not None:
                return None  # someone made it meanwhile: theirs stands
            return Note(frontmatter, f"# {title}\n").render()

        self.vault.edit_text(path, create, must_exist=False)
        if known is not None:
            known.update(names_of([Entity(path, title, kind, [], [], [], [])]))
        return path

    def record_fact(
        self,
        path: str,
        fact: Fact,
        *,
        supersedes: bool = False,
    ) -> FactChange:
        """Add ``fact`` to the entity's Observations unless it already holds there.

        With ``supersedes`` the facts of the same category that hold today and
        say something else are closed (``valid_until`` = the new fact's
        ``valid_from``), not removed: both stay readable.
        """
        if not fact.text.strip() or not fact.category.strip():
            raise InvalidInputError("A fact needs a category and some text.")
        check_text(fact.text, "The fact")
        check_text(fact.category, "The fact's category")
        fact.text = " ".join(fact.text.split())[:MAX_FACT_CHARS]
        fact.category = " ".join(re.sub(r"[\[\]:]", " ", fact.category).split())
        change = FactChange(path, "unchanged")

        def apply(text: str | None) -> str | None:
            change.action, change.closed = "unchanged", []
            note = Note.parse(text or "")
            entity = _entity_of(path, note)
            same = [
                f
                for f in entity.facts
                if f.current() and _normal(f.category) == _normal(fact.category)
            ]
            if any(_normal(f.text) == _normal(fact.text) for f in same):
                return None
            lines = note.body.split("\n")
            if supersedes:
                until = fact.valid_from or date.today()
                for old in same:
                    lines[old.line] = f"{lines[old.line].rstrip()} [valid_until:: {until}]"
                    change.closed.append(old.text)
            note.body = append_to_section("\n".join(lines), OBSERVATIONS, fact.render())
            change.action = "added"
            return note.render()

        self.vault.edit_text(path, apply)
        return change

    def record_relation(self, path: str, relation: Relation) -> bool:
        """Add ``relation`` under Relations unless the same one holds; True when added."""
        relation.type = relation_name(check_text(relation.type, "The relation's type"))
        relation.target = clean_name(relation.target)
        if not relation.type:
            raise InvalidInputError("A relation needs a type, e.g. works_at.")
        added = [False]

        def apply(text: str | None) -> str | None:
            added[0] = False
            note = Note.parse(text or "")
            entity = _entity_of(path, note)
            for old in entity.relations:
                if (
                    old.type == relation.type
                    and _normal(old.target) == _normal(relation.target)
                    and old.valid_until is None
                ):
                    return None
            added[0] = True
            note.body = append_to_section(note.body, RELATIONS, relation.render())
            return note.render()

        self.vault.edit_text(path, apply)
        return added[0]


def names_of(entities: Iterable[Entity]) -> dict[str, str]:
    """Every name an entity is known by (file name, title, aliases, its path without the
    extension), normalised, to its path; the first entity to claim a name keeps it."""
    out: dict[str, str] = {}
    for entity in entities:
        stem = entity.path.rsplit("/", 1)[-1].removesuffix(".md")
        for name in (stem, entity.name, *entity.aliases, entity.path.removesuffix(".md")):
            key = _normal(name)
            if key:
                out.setdefault(key, entity.path)
    return out
