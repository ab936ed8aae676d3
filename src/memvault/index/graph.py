"""The vault as a graph: notes and memories by tag, links into a note, related notes.

Tags and links are read from the index (nested tags: ``#project`` also
finds ``#project/apollo``); related notes combine links either way, shared
tags and, when vectors exist, similar meaning.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from memvault.errors import InvalidInputError, NotFoundError
from memvault.index.filters import like_prefix
from memvault.index.index import MemoryIndex, locked
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
