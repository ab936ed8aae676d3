"""The vault as a graph: notes and memories by tag, links into a note, related notes.

Tags and links are read from the index (nested tags: ``#project`` also
finds ``#project/apollo``); related notes combine links either way, shared
tags and, when vectors exist, similar meaning.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from memvault.errors import InvalidInputError, NotFoundError
from memvault.index.connection import locked
from memvault.index.filters import like_prefix
from memvault.index.index import MemoryIndex
from memvault.vault.entities import entity_type
from memvault.vault.paths import normalize_relpath


@dataclass
class TaggedItem:
    """A note or memory carrying a tag."""

    path: str
    kind: str
    title: str
    id: str | None = None
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class LinkRef:
    """A link into a note from another."""

    source: str
    line: int
    kind: str
    target: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class RelatedNote:
    """A note related to another, with the reasons."""

    path: str
    title: str
    score: float
    reasons: list[str]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": self.path,
            "title": self.title,
            "score": round(self.score, 4),
            "reasons": self.reasons,
        }


@locked
def search_by_tag(
    index: MemoryIndex, tag: str, *, include_archived: bool = False
) -> list[TaggedItem]:
    """Notes and memories with ``tag``; ``#project`` also finds ``#project/apollo``."""
    wanted = tag.strip().lstrip("#")
    if not wanted:
        raise InvalidInputError("Name a tag, e.g. 'project'.")
    rows = index.conn.execute(
        "SELECT DISTINCT n.path, n.kind AS note_kind, n.title, c.kind, c.memory_id, c.start_line"
        " FROM chunk_tags t JOIN chunks c ON c.id = t.chunk_id JOIN notes n ON n.id = c.note_id"
        " WHERE (t.tag = ? OR t.tag LIKE ? ESCAPE '\\')"
        + ("" if include_archived else " AND c.archived = 0")
        + " ORDER BY n.path, c.start_line",
        (wanted, like_prefix(wanted) + "/%"),
    ).fetchall()
    out: list[TaggedItem] = []
    seen_notes: set[str] = set()
    for r in rows:
        if r["memory_id"]:
            out.append(TaggedItem(r["path"], "memory", r["title"], r["memory_id"], r["start_line"]))
        elif r["path"] not in seen_notes:
            seen_notes.add(r["path"])
            out.append(TaggedItem(r["path"], r["note_kind"], r["title"]))
    return out


@locked
def backlinks(index: MemoryIndex, path: str) -> list[LinkRef]:
    """Links from other notes that resolve to ``path``."""
    target = _known_path(index, path)
    rows = index.conn.execute(
        "SELECT n.path, l.line, l.kind, l.target FROM links l JOIN notes n ON n.id = l.note_id"
        " WHERE l.resolved = ? AND n.path != ? ORDER BY n.path, l.line",
        (target, target),
    ).fetchall()
    return [LinkRef(r["path"], int(r["line"]), r["kind"], r["target"]) for r in rows]


@dataclass
class BlockLink:
    """A link into one block of a note (``[[Memory/Facts#^m-1]]``: a memory), from another
    note or from a memory (``memory``: its id; ``text``: its text)."""

    source: str
    line: int
    memory: str | None = None
    text: str = ""


@locked
def block_links(index: MemoryIndex, path: str, block: str) -> list[BlockLink]:
    """Links from notes and memories into the block ``^block`` of ``path``."""
    rows = index.conn.execute(
        "SELECT n.path, n.kind, l.line FROM links l JOIN notes n ON n.id = l.note_id"
        " WHERE l.resolved = ? AND l.subpath = ? ORDER BY n.path, l.line",
        (path, f"^{block}"),
    ).fetchall()
    found = []
    for r in rows:
        source, line = str(r["path"]), int(r["line"])
        memory = _memory_on_line(index.conn, source, line) if r["kind"] == "memory" else None
        if memory is None or memory[0] != block:  # a memory's link to itself is no link in
            found.append(BlockLink(source, line, *(memory or (None, ""))))
    return found


@locked
def resolve_links(index: MemoryIndex, source: str, targets: Iterable[str]) -> dict[str, str | None]:
    """The indexed note each link target written in ``source`` leads to (None: no note)."""
    resolver = index.resolver()
    return {target: resolver.resolve(target, source) for target in targets}


def _known_path(index: MemoryIndex, path: str) -> str:
    clean = normalize_relpath(path)
    for candidate in (clean, clean + ".md"):
        if index.conn.execute("SELECT 1 FROM notes WHERE path = ?", (candidate,)).fetchone():
            return candidate
    raise NotFoundError(f"No indexed note at {clean}.", hint="Run `memvault index` if it is new.")


@locked
def related(index: MemoryIndex, path: str, limit: int = 10) -> list[RelatedNote]:
    """Notes related to ``path``: linked either way, sharing tags, or similar in meaning."""
    source = _known_path(index, path)
    note = index.conn.execute("SELECT id, tags FROM notes WHERE path = ?", (source,)).fetchone()
    scores: dict[str, float] = defaultdict(float)
    reasons: dict[str, list[str]] = defaultdict(list)

    def add(other: str, amount: float, reason: str) -> None:
        if other and other != source and reason not in reasons[other]:
            scores[other] += amount
            reasons[other].append(reason)

    for r in index.conn.execute(
        "SELECT DISTINCT resolved FROM links WHERE note_id = ? AND resolved IS NOT NULL",
        (note["id"],),
    ):
        add(str(r[0]), 1.0, "links to it")
    for ref in backlinks(index, source):
        add(ref.source, 1.0, "links here")
    for tag in json.loads(note["tags"] or "[]"):
        for r in index.conn.execute(
            "SELECT DISTINCT n.path FROM chunk_tags t JOIN chunks c ON c.id = t.chunk_id"
            " JOIN notes n ON n.id = c.note_id WHERE t.tag = ? AND c.kind != 'memory'",
            (tag,),
        ):
            add(str(r[0]), 0.3, f"#{tag}")
    if index.semantic:
        ids = [
            int(r[0])
            for r in index.conn.execute("SELECT id FROM chunks WHERE note_id = ?", (note["id"],))
        ]
        vectors = list(index.vectors.get(ids).values())
        if vectors:
            centre = np.mean(np.stack(vectors), axis=0)
            centre = centre / (np.linalg.norm(centre) or 1.0)
            best: dict[str, float] = {}
            hits = index.vectors.search(centre.astype(np.float32), 50)
            rows = {int(r["id"]): str(r["path"]) for r in _paths_of(index, [h[0] for h in hits])}
            for chunk_id, cosine in hits:
                other = rows.get(chunk_id)
                if other and other != source and cosine > best.get(other, 0.0):
                    best[other] = cosine
            for other, cosine in best.items():
                if cosine >= 0.3:
                    add(other, cosine, f"similar ({cosine:.2f})")
    titles = (
        {
            str(r["path"]): str(r["title"])
            for r in index.conn.execute(
                f"SELECT path, title FROM notes WHERE path IN ({','.join('?' * len(scores))})",
                list(scores),
            )
        }
        if scores
        else {}
    )
    ranked = sorted(scores, key=lambda p: -scores[p])[:limit]
    return [RelatedNote(p, titles.get(p, p), scores[p], reasons[p]) for p in ranked if p in titles]


def _paths_of(index: MemoryIndex, ids: Iterable[int]) -> list[Any]:
    chosen = list(ids)
    if not chosen:
        return []
    rows: list[Any] = index.conn.execute(
        "SELECT c.id, n.path FROM chunks c JOIN notes n ON n.id = c.note_id"
        f" WHERE c.id IN ({','.join('?' * len(chosen))})",
        chosen,
    ).fetchall()
    return rows


# -- the knowledge graph --------------------------------------------------------

ENTITY_KINDS = ("contact", "project", "entity")


@dataclass
class GraphNode:
    """A node: an entity note, another note, a memory or a tag."""

    id: str
    name: str
    type: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class GraphEdge:
    """A directed edge: a typed relation, or a plain link (``links_to``)."""

    source: str
    target: str
    relation: str
    current: bool = True

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class KnowledgeGraph:
    """Nodes and edges, around one entity or for the whole vault."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]
    center: str | None = None
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "center": self.center,
            "nodes": [n.to_dict() for n in self.nodes],
            "edges": [e.to_dict() for e in self.edges],
            "truncated": self.truncated,
        }


def _node_type(path: str, kind: str, frontmatter: str) -> str:
    """An entity's type as its note says (vault.entities.entity_type), another note's
    frontmatter ``type``, else its kind."""
    fields = json.loads(frontmatter or "{}")
    declared = fields.get("type")
    if kind in ENTITY_KINDS or (isinstance(declared, str) and declared.strip()):
        return entity_type(path, fields)
    return kind


@locked
def entity_path(index: MemoryIndex, name: str) -> str:
    """The indexed note an entity name (path, file name, title or alias) stands for."""
    wanted = name.strip().removeprefix("[[").removesuffix("]]").split("|")[0].strip()
    if not wanted:
        raise InvalidInputError("Name an entity, e.g. 'Caroline'.")
    with contextlib.suppress(NotFoundError, InvalidInputError):
        return _known_path(index, wanted)
    found = index.resolver().resolve(wanted)
    if found is None:
        folded = wanted.casefold()
        for r in index.conn.execute(
            "SELECT path FROM notes WHERE lower(title) = ? ORDER BY kind != 'entity', path",
            (folded,),
        ):
            return str(r[0])
        raise NotFoundError(
            f"No entity or note called {wanted!r}.",
            hint="Entities are the notes in Contacts/, Projects/ and Entities/.",
        )
    return found


@locked
def knowledge_graph(
    index: MemoryIndex,
    entity: str | None = None,
    *,
    depth: int = 1,
    max_nodes: int = 500,
    include_ended: bool = True,
) -> KnowledgeGraph:
    """The graph around ``entity`` up to ``depth`` hops, or of every entity in the vault.

    Nodes are notes (entities are the notes of ``Contacts/``, ``Projects/`` and
    ``Entities/``), memories and tags; edges are
    the index's links, typed where the note says how (a Relations item, a
    frontmatter property), and ``mentions`` from a memory linking a note. Only
    entities are walked through: a note or memory at the edge is a leaf, so a
    hub like ``Memory/Facts.md`` does not pull in the whole vault.
    """
    if not 0 <= depth <= 5:
        raise InvalidInputError("The depth must be between 0 and 5.")
    conn = index.conn
    notes = {
        str(r["path"]): r
        for r in conn.execute("SELECT id, path, title, kind, frontmatter, tags FROM notes")
    }

    def is_entity(path: str) -> bool:
        row = notes.get(path)
        return row is not None and row["kind"] in ENTITY_KINDS

    nodes: dict[str, GraphNode] = {}
    edges: dict[tuple[str, str, str], GraphEdge] = {}
    truncated = False

    def node(path: str) -> str:
        nonlocal truncated
        if path not in nodes:
            if len(nodes) >= max_nodes:
                truncated = True
                return ""
            row = notes[path]
            nodes[path] = GraphNode(
                path, str(row["title"]), _node_type(path, row["kind"], row["frontmatter"])
            )
        return path

    def memory_node(memory_id: str, text: str) -> str:
        key = f"memory:{memory_id}"
        if key not in nodes and len(nodes) < max_nodes:
            nodes[key] = GraphNode(key, text if len(text) <= 160 else text[:159] + "…", "memory")
        return key if key in nodes else ""

    def edge(source: str, target: str, relation: str, current: bool = True) -> None:
        if source and target and source != target:
            edges.setdefault(
                (source, target, relation), GraphEdge(source, target, relation, current)
            )

    def neighbours(path: str) -> list[str]:
        """Add the edges out of and into ``path``; the entities found, to walk on."""
        row = notes[path]
        found: list[str] = []
        for r in conn.execute(
            "SELECT l.target, l.resolved, l.subpath, l.relation, l.valid_until FROM links l"
            " WHERE l.note_id = ? AND (l.kind != 'embed' OR l.subpath LIKE '^%')"
            " AND (l.resolved IS NOT NULL OR l.relation IS NOT NULL) ORDER BY l.line, l.rowid",
            (row["id"],),
        ):
            if r["valid_until"] and not include_ended:
                continue
            target = str(r["resolved"] or "")
            if target not in notes:
                # A relation to what has no note yet (Obsidian draws it too, greyed).
                missing = str(r["target"]).strip()
                unknown = r["resolved"] is None and missing and missing not in nodes
                if unknown and len(nodes) < max_nodes:
                    nodes[missing] = GraphNode(missing, missing, "missing")
                if r["resolved"] is None and missing in nodes:
                    edge(path, missing, str(r["relation"]), not r["valid_until"])
                continue
            block = str(r["subpath"] or "")
            memory = _memory_at(conn, target, block) if block.startswith("^") else None
            to = memory_node(*memory) if memory else node(target)
            edge(path, to, str(r["relation"] or "links_to"), not r["valid_until"])
            if not memory and is_entity(target):
                found.append(target)
        for r in conn.execute(
            "SELECT n.path, l.line, l.relation, l.valid_until, n.kind FROM links l"
            " JOIN notes n ON n.id = l.note_id WHERE l.resolved = ? AND n.path != ?"
            " AND (l.kind != 'embed' OR l.subpath LIKE '^%') ORDER BY n.path, l.line, l.rowid",
            (path, path),
        ):
            other = str(r["path"])
            if r["valid_until"] and not include_ended:
                continue
            if r["kind"] == "memory":
                memory = _memory_on_line(conn, other, int(r["line"]))
                if memory:
                    edge(memory_node(*memory), path, "mentions")
                continue
            edge(node(other), path, str(r["relation"] or "links_to"), not r["valid_until"])
            if is_entity(other):
                found.append(other)
        for tag in json.loads(row["tags"] or "[]"):
            key = f"#{tag}"
            if key not in nodes and len(nodes) < max_nodes:
                nodes[key] = GraphNode(key, key, "tag")
            edge(path, key if key in nodes else "", "tagged")
        return found

    if entity is None:
        frontier = sorted(p for p in notes if is_entity(p))
        for path in frontier:
            node(path)
        for path in frontier:
            neighbours(path)
        # Whole-vault view: edges between entities and tags only; notes and memories
        # they reach are left out (``entity=...`` shows them).
        keep = {p for p in nodes if p in notes and is_entity(p)} | {
            k for k in nodes if k.startswith("#")
        }
        nodes = {k: v for k, v in nodes.items() if k in keep}
        kept = [e for e in edges.values() if e.source in keep and e.target in keep]
        return KnowledgeGraph(list(nodes.values()), kept, None, truncated)
    start = entity_path(index, entity)
    node(start)
    seen = {start}
    frontier = [start]
    for _ in range(depth):
        following: list[str] = []
        for path in frontier:
            for other in neighbours(path):
                if other not in seen:
                    seen.add(other)
                    following.append(other)
        frontier = following
    return KnowledgeGraph(list(nodes.values()), list(edges.values()), start, truncated)


def _memory_at(conn: Any, path: str, block: str) -> tuple[str, str] | None:
    """The memory ``[[path#^id]]`` points at, as (id, text)."""
    memory_id = block.lstrip("^")
    row = conn.execute(
        "SELECT m.id, m.text FROM memories m JOIN notes n ON n.id = m.note_id"
        " WHERE m.id = ? AND n.path = ?",
        (memory_id, path),
    ).fetchone()
    return (str(row[0]), str(row[1])) if row else None


def _memory_on_line(conn: Any, path: str, line: int) -> tuple[str, str] | None:
    """The memory written on ``line`` of a memory file, as (id, text)."""
    row = conn.execute(
        "SELECT c.memory_id, c.text, c.end_line FROM chunks c JOIN notes n ON n.id = c.note_id"
        " WHERE n.path = ? AND c.start_line <= ? ORDER BY c.start_line DESC LIMIT 1",
        (path, line),
    ).fetchone()
    if row is None or row[0] is None or int(row[2]) < line:
        return None
    return str(row[0]), str(row[1])
