"""Search through the knowledge graph: what an entity links joins the candidates.

The graph's nodes are entity notes (``Contacts/``, ``Projects/``,
``Entities/``); its edges the index's links. An
entity note links memories by block reference (its facts' sources, its
mentions) and other entities by its relations; a memory links an entity by
a wikilink in its text. Search uses that in three steps:

1. *Focus.* The entities the query names (title, file name or alias, as
   whole words) are in focus: their notes' chunks join the candidates.
2. *Neighbours.* For the focused entities and the entities of the best
   candidates, the memories they link (one hop from the entity, two from a
   memory that shares the entity) and the entities they are related to by a
   typed relation (a Relations item, a frontmatter property; not a link in
   passing) join the candidates, scored on their own evidence like every
   other.
3. *Share.* Each candidate then receives a share of its best graph
   neighbour's relevance (``search.graph_boost``: per hop), as lines of a
   conversation do: a note gives to what it links, a memory to the other
   memories of its entities, never to a note (a memory that matches does not
   lift a note into the results in its place). An entity linking more
   than ``search.graph_hub_limit``
   memories (the owner, a speaker named everywhere) passes nothing on: it
   says nothing about which of them a question wants.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from memvault.index.graph import ENTITY_KINDS

# Only entities pass relevance on. Not insights (frontmatter ``type: insight``): a cluster by
# likeness, whose members a search by likeness finds already; passing an insight's relevance
# to its sources lowered LoCoMo recall_any@10 from 0.857 to 0.840 (bench/graph.py).


def _is_node(alias: str) -> str:
    """SQL: the note ``alias`` is an entity (a note of Contacts/, Projects/ or Entities/; a
    frontmatter ``type`` elsewhere is too common in Obsidian vaults to mean one)."""
    return f"{alias}.kind IN ({', '.join(repr(k) for k in ENTITY_KINDS)})"


# Entities the query names, at most: a query listing a whole address book focuses nothing.
_MAX_FOCUS = 5


@dataclass
class Neighbourhood:
    """Graph edges among chunks: chunk id -> {neighbour chunk id: hops}."""

    # chunk id -> {chunk id it takes a share from: hops}
    hops: dict[int, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))
    focus: list[str] = field(default_factory=list)  # the paths of the entities in focus

    def link(self, giver: int, taker: int, hops: int, *, mutual: bool = False) -> None:
        """``taker`` takes a share of ``giver``'s relevance, ``hops`` away (the nearest
        stays); ``mutual``: and the other way round. A note gives to what it links; a
        memory gives to memories only, so a memory does not lift an entity's or an
        insight's note into the results in its place."""
        if giver == taker:
            return
        for x, y in ((taker, giver), (giver, taker)) if mutual else ((taker, giver),):
            if hops < self.hops[x].get(y, 99):
                self.hops[x][y] = hops

    @property
    def chunks(self) -> set[int]:
        """Every chunk the neighbourhood names."""
        out = set(self.hops)
        for others in self.hops.values():
            out.update(others)
        return out


class EntityNames:
    """The names entities are known by, read once per index state."""

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._pattern: re.Pattern[str] | None = None
        self._paths: dict[str, str] = {}

    def named_in(self, conn: Any, query: str) -> list[str] | None:
        """The paths of the entities ``query`` names, longest name first; None when the
        vault has no entity at all (nothing to search through)."""
        self._refresh(conn)
        if self._pattern is None:
            return None
        found: list[str] = []
        for match in self._pattern.finditer(query.casefold()):
            path = self._paths.get(match.group(1))
            if path and path not in found:
                found.append(path)
        return found[:_MAX_FOCUS]

    def _refresh(self, conn: Any) -> None:
        # Any note added, moved or removed bumps the structure; any edit the newest indexed_at.
        row = conn.execute(
            "SELECT (SELECT value FROM meta WHERE key = 'structure_version'),"
            " (SELECT max(indexed_at) FROM notes)"
        ).fetchone()
        key = (row[0], row[1])
        if key == self._key:
            return
        if self._key is not None and key[0] == self._key[0] and self._key[1] is not None:
            # Only edits since: the names change only if an entity note was among them (a
            # memory written between two searches re-read 2,000 names at 10k notes).
            since = conn.execute("SELECT kind FROM notes WHERE indexed_at > ?", (self._key[1],))
            if not any(str(r[0]) in ENTITY_KINDS for r in since):
                self._key = key
                return
        paths: dict[str, str] = {}
        for r in conn.execute(
            f"SELECT path, title, aliases FROM notes n WHERE {_is_node('n')} ORDER BY path"
        ):
            stem = str(r["path"]).rsplit("/", 1)[-1].removesuffix(".md")
            for name in (str(r["title"]), stem, *json.loads(r["aliases"] or "[]")):
                folded = " ".join(str(name).casefold().split())
                if len(folded) >= 2:
                    paths.setdefault(folded, str(r["path"]))
        names = sorted(paths, key=len, reverse=True)
        self._paths = paths
        self._pattern = (
            re.compile(r"(?<!\w)(" + "|".join(re.escape(n) for n in names) + r")(?!\w)")
            if names
            else None
        )
        self._key = key


def neighbourhood(
    conn: Any,
    seeds: Iterable[int],
    focus: list[str],
    query: str,
    *,
    hub_limit: int,
    depth: int = 2,
) -> Neighbourhood:
    """The graph edges around the chunks ``seeds`` and the entity notes ``focus``."""
    out = Neighbourhood(focus=list(focus))
    seed_ids = list(dict.fromkeys(seeds))
    if not seed_ids and not focus:
        return out
    marks = ",".join("?" * len(seed_ids))
    rows = (
        conn.execute(
            "SELECT c.id, c.memory_id, c.start_line, c.end_line, n.id AS note_id, n.path, n.kind"
            f" FROM chunks c JOIN notes n ON n.id = c.note_id WHERE c.id IN ({marks})",
            seed_ids,
        ).fetchall()
        if seed_ids
        else []
    )
    # Entities reached from themselves (in focus, or a seed is their note) and from a memory.
    centres: list[str] = list(focus)
    via_memory: dict[str, set[int]] = defaultdict(set)  # entity path -> seed memories naming it
    for r in rows:
        if r["kind"] in ENTITY_KINDS:
            centres.append(str(r["path"]))
    for chunk_id, entity in _entities_of_memories(conn, [r for r in rows if r["memory_id"]]):
        via_memory[entity].add(chunk_id)
    graph = _Graph(conn, hub_limit)
    graph.load([*centres, *via_memory], related=True)
    graph.load(other for path in centres for other, _ in graph.related(path))
    asked = _words(query)
    for path in dict.fromkeys(centres):
        here = graph.chunks(path)
        for chunk in here:
            out.hops.setdefault(chunk, {})
            for memory in graph.memories(path):
                out.link(chunk, memory, 1)
        for other, relation in graph.related(path):
            # A relation the question names ("Caroline's sister") is what it asks about.
            hops = 1 if relation and _words(relation) & asked else 2
            if hops > depth:
                continue
            for chunk in here:
                for near in [*graph.chunks(other)[:1], *graph.memories(other)]:
                    out.link(chunk, near, hops)
    # Memories of one entity are two hops apart (memory, entity, memory).
    for path, seeds_naming in via_memory.items() if depth >= 2 else ():
        for seed in seeds_naming:
            for memory in graph.memories(path):
                out.link(seed, memory, 2, mutual=True)
    return out


_SMALL_WORDS = frozenset(
    {"of", "at", "in", "on", "to", "the", "a", "an", "is", "has", "with", "for"}
)


def _words(text: str) -> set[str]:
    """The words of a query or a relation type, for telling whether one names the other:
    lower case, without small words, with a plural's or possessive's ending dropped."""
    out = set()
    for word in re.findall(r"[^\W_]+", text.casefold()):
        if word not in _SMALL_WORDS and len(word) > 1:
            out.add(word[:-1] if len(word) > 3 and word.endswith("s") else word)
    return out


class _Graph:
    """The index's entity edges, looked up for many entities at once, once per search."""

    def __init__(self, conn: Any, hub_limit: int) -> None:
        self.conn = conn
        self.hub_limit = hub_limit
        self._chunks: dict[str, list[int]] = {}
        self._memories: dict[str, list[int]] = {}
        self._related: dict[str, list[tuple[str, str | None]]] = {}

    def load(self, paths: Iterable[str], *, related: bool = False) -> None:
        """Look up the chunks and memories (and, with ``related``, the related entities) of
        every entity in ``paths`` not looked up yet: one query for all of them."""
        wanted = [p for p in dict.fromkeys(paths) if p not in self._chunks]
        relating = [p for p in dict.fromkeys(paths) if p not in self._related] if related else []
        for start in range(0, max(len(wanted), len(relating)), 400):
            batch = wanted[start : start + 400]
            also = relating[start : start + 400]
            marks = ",".join("?" * len(batch)) or "NULL"
            others = ",".join("?" * len(also)) or "NULL"
            chunks: dict[str, list[int]] = {p: [] for p in batch}
            memories: dict[str, list[int]] = {p: [] for p in batch}
            found: dict[str, list[tuple[str, str | None]]] = {p: [] for p in also}
            for r in self.conn.execute(
                # 1: the entity note's chunks. 2: what the entity's note links by block
                # reference, and the memories linking it. 3: the related entities, either
                # way, by a typed relation that still holds (a Relations item, a
                # frontmatter property); a plain link in passing relates nothing here.
                "SELECT 1 AS part, n.path, c.id, CAST(NULL AS TEXT) AS other,"
                " CAST(NULL AS TEXT) AS relation, c.ordinal"
                " FROM chunks c JOIN notes n ON n.id = c.note_id"
                f" WHERE n.path IN ({marks}) AND c.archived = 0"
                " UNION ALL SELECT 2, e.path, c.id, NULL, NULL, NULL FROM notes e"
                " JOIN links l ON l.note_id = e.id"
                " JOIN memories m ON m.id = substr(l.subpath, 2) AND l.subpath LIKE '^%'"
                " JOIN chunks c ON c.id = m.chunk_id"
                f" WHERE e.path IN ({marks}) AND c.archived = 0"
                " UNION ALL SELECT 2, at.resolved, c.id, NULL, NULL, NULL FROM ("
                "  SELECT l.resolved, l.line, (SELECT c.id FROM chunks c"
                "   WHERE c.note_id = l.note_id AND c.start_line <= l.line"
                "   ORDER BY c.start_line DESC LIMIT 1) AS chunk"
                "  FROM links l JOIN notes n ON n.id = l.note_id"
                f"  WHERE l.resolved IN ({marks}) AND n.kind = 'memory') AS at"
                " JOIN chunks c ON c.id = at.chunk"
                " WHERE c.memory_id IS NOT NULL AND c.end_line >= at.line AND c.archived = 0"
                " UNION ALL SELECT DISTINCT 3, e.path, CAST(NULL AS BIGINT), o.path, l.relation,"
                " CAST(NULL AS BIGINT) FROM notes e"
                " JOIN links l ON l.note_id = e.id JOIN notes o ON o.path = l.resolved"
                f" WHERE e.path IN ({others}) AND l.relation IS NOT NULL"
                f" AND l.valid_until IS NULL AND o.path != e.path AND {_is_node('o')}"
                " UNION ALL SELECT DISTINCT 3, l.resolved, CAST(NULL AS BIGINT), o.path,"
                " l.relation, CAST(NULL AS BIGINT)"
                " FROM links l JOIN notes o ON o.id = l.note_id"
                f" WHERE l.resolved IN ({others}) AND l.relation IS NOT NULL"
                f" AND l.valid_until IS NULL AND o.path != l.resolved AND {_is_node('o')}"
                " ORDER BY 1, 2, 6",
                [*batch, *batch, *batch, *also, *also],
            ):
                part, path = int(r[0]), str(r[1])
                if part == 1:
                    chunks[path].append(int(r[2]))
                elif part == 2:
                    memories[path].append(int(r[2]))
                else:
                    found[path].append((str(r[3]), r[4]))
            for path in batch:
                self._chunks[path] = chunks[path][:20]
                self._memories[path] = list(dict.fromkeys(memories[path]))
            for path in also:
                self._related[path] = list(dict.fromkeys(found[path]))

    def _load_related(self, paths: list[str]) -> None:
        self.load(paths, related=True)

    def chunks(self, path: str) -> list[int]:
        """The entity note's chunks (the first 20)."""
        self.load([path])
        return self._chunks[path]

    def memories(self, path: str) -> list[int]:
        """The memories an entity links, none for a hub (it tells nothing about any one)."""
        self.load([path])
        linked = self._memories[path]
        return [] if len(linked) > self.hub_limit else linked

    def related(self, path: str) -> list[tuple[str, str | None]]:
        """The entities related to ``path`` either way, with the relation's type."""
        if path not in self._related:
            self._load_related([path])
        return self._related[path]


def _entities_of_memories(conn: Any, rows: list[Any]) -> list[tuple[int, str]]:
    """(memory chunk, entity) for the entity notes linking these memories by block reference,
    and the entities the memories link."""
    if not rows:
        return []
    by_block = {"^" + str(r["memory_id"]): int(r["id"]) for r in rows}
    marks = ",".join("?" * len(rows))
    # Both in one query: by block reference (1), and by the memory's own link (2). The
    # links holding a block reference are found first and their notes looked up one by
    # one: SQLite otherwise walked every entity note (7.7 ms a search at 100k chunks).
    found = [
        (by_block[str(r[1])] if int(r[0]) == 1 else int(r[1]), str(r[2]))
        for r in conn.execute(
            "SELECT 1, held.subpath, held.path FROM (SELECT DISTINCT l.subpath,"
            f" (SELECT e.path FROM notes e WHERE e.id = l.note_id AND {_is_node('e')}) AS path"
            f" FROM links l WHERE l.subpath IN ({','.join('?' * len(by_block))})) AS held"
            " WHERE held.path IS NOT NULL"
            " UNION ALL SELECT DISTINCT 2, CAST(c.id AS TEXT), e.path FROM chunks c"
            " JOIN links l ON l.note_id = c.note_id"
            " AND l.line BETWEEN c.start_line AND c.end_line"
            " JOIN notes e ON e.path = l.resolved"
            f" WHERE c.id IN ({marks}) AND {_is_node('e')}",
            [*by_block, *[int(r["id"]) for r in rows]],
        )
    ]
    return list(dict.fromkeys(found))
