"""One note's rows in the index: the note, its chunks with their keyword rows and tags,
its memories, and its links, resolved against the indexed notes.

A chunk whose content did not change keeps its row, and so its vector. The links that
notes appearing, vanishing or moving can affect are resolved again (``_restructure``).
:class:`NoteRows` writes, moves and removes; which notes to write is ``sync``'s to say
(and ``appending``'s, for lines appended to a memory file).
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from memvault.index.chunking import (
    ChunkDraft,
    is_digest,
    kind_of,
    memory_chunks,
    note_chunks,
    note_created,
)
from memvault.index.connection import IndexConnection
from memvault.index.keywords import keyword_tables, write_keywords
from memvault.index.stemming import KeywordRow
from memvault.sqlite import get_meta, set_meta, transaction
from memvault.vault.entities import relation_lines, relation_name
from memvault.vault.links import LinkResolver, link_key
from memvault.vault.markdown import Link, aliases, extract_links, note_tags, title_of
from memvault.vault.memories import normalize_text
from memvault.vault.note import Note, plain
from memvault.vault.store import FileEntry

# Up to this many notes appearing or vanishing at once, only the links they can affect
# are re-resolved; beyond it, every link is.
_TARGETED_RELINK = 500
# A frontmatter line that starts a property: ``key:`` at the margin.
_PROPERTY = re.compile(r"^([A-Za-z_][\w -]*?):(?:\s|$)")


class NoteRows(IndexConnection):
    """Writes, moves and removes the rows of the vault's notes."""

    _links_version: str | None

    # -- writing one note --------------------------------------------------------------

    def _drafts(self, path: str, text: str, note: Note, mtime: float) -> list[ChunkDraft]:
        kind = kind_of(path)
        if kind == "memory":
            parsed = self.memories.parse_text(path, text)
            return memory_chunks(
                parsed,
                window=self.settings.neighbour_window,
                max_gap_hours=self.settings.neighbour_hours,
            )
        title = title_of(note.body, path.rsplit("/", 1)[-1].removesuffix(".md"))
        return note_chunks(
            path=path,
            kind=kind,
            title=title,
            body=note.body,
            body_offset=note.body_offset,
            frontmatter=note.frontmatter,
            tags=note_tags(note.frontmatter, note.body),
            created=note_created(path, note.frontmatter, mtime),
            chunk_tokens=self.settings.chunk_tokens,
            overlap_tokens=self.settings.overlap_tokens,
        )

    def _index_note(self, path: str, text: str, entry: FileEntry, digest: str) -> bool:
        """Write one note's rows; True when its aliases changed (links may resolve anew)."""
        note = Note.parse(text)
        kind = kind_of(path)
        title = title_of(note.body, path.rsplit("/", 1)[-1].removesuffix(".md"))
        tags = note_tags(note.frontmatter, note.body)
        mtime = entry.mtime_ns / 1e9
        drafts = self._drafts(path, text, note, mtime)
        alias_json = json_text(aliases(note.frontmatter))
        with transaction(self.conn):
            row = self.conn.execute(
                "SELECT id, aliases FROM notes WHERE path = ?", (path,)
            ).fetchone()
            values = (
                title,
                kind,
                json_text(note.frontmatter),
                json_text(tags),
                alias_json,
                entry.mtime_ns,
                entry.ctime_ns,
                entry.size,
                digest,
                note_created(path, note.frontmatter, mtime),
                time.time(),
            )
            if row is None:
                note_id = int(
                    self.conn.execute(
                        "INSERT INTO notes(title, kind, frontmatter, tags, aliases, mtime_ns,"
                        " ctime_ns, size, hash, created, indexed_at, path)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        (*values, path),
                    ).lastrowid
                )
            else:
                note_id = int(row["id"])
                self.conn.execute(
                    "UPDATE notes SET title=?, kind=?, frontmatter=?, tags=?, aliases=?,"
                    " mtime_ns=?, ctime_ns=?, size=?, hash=?, created=?, indexed_at=? WHERE id=?",
                    (*values, note_id),
                )
            self._store_chunks(note_id, title, drafts, not is_digest(kind, note.frontmatter))
            self._store_links(note_id, path, note)
        return row is not None and row["aliases"] != alias_json

    def _store_chunks(
        self, note_id: int, title: str, drafts: Sequence[ChunkDraft], keyworded: bool = True
    ) -> None:
        """Write a note's chunks, keeping rows (and vectors) whose content did not change.

        Not ``keyworded`` (a digest: its words are its sources', a title from them and
        their embeds), its chunks stay out of the keyword index: counted there, its words
        would count twice and move every other note's keyword score (search finds a
        digest by meaning and shows its sources in its place).
        """
        old: dict[str, list[Any]] = defaultdict(list)
        for row in self.conn.execute(
            "SELECT c.id, c.hash, f.rowid AS frowid, f.title AS ftitle, f.tags AS ftags"
            " FROM chunks c LEFT JOIN chunks_fts f ON f.rowid = c.id"
            " WHERE c.note_id = ? ORDER BY c.ordinal",
            (note_id,),
        ):
            old[str(row["hash"])].append(row)
        self.conn.execute("DELETE FROM memories WHERE note_id = ?", (note_id,))
        for draft in drafts:
            reuse = old[draft.hash].pop(0) if old.get(draft.hash) else None
            tags_text = " ".join(draft.tags)
            chunk_title = "" if draft.kind == "memory" else title
            if reuse is not None:
                chunk_id = int(reuse["id"])
                self.conn.execute(
                    "UPDATE chunks SET ordinal=?, kind=?, start_line=?, end_line=?, heading=?,"
                    " grp=?, memory_id=?, category=?, importance=?, created=?, archived=?"
                    " WHERE id=?",
                    (*_chunk_meta(draft), chunk_id),
                )
                written = (reuse["ftitle"], reuse["ftags"])
                words = KeywordRow.of(draft.text, draft.context, chunk_title, tags_text)
                stale_fts = (reuse["frowid"] is None) == keyworded or (
                    keyworded and written != words.stemmed[2:]
                )
                if stale_fts:
                    self._delete_fts([chunk_id])
                    if keyworded:
                        self._insert_fts(chunk_id, draft, chunk_title, tags_text)
                    self.conn.execute("DELETE FROM chunk_tags WHERE chunk_id = ?", (chunk_id,))
                    self._insert_tags(chunk_id, draft.tags)
            else:
                chunk_id = self._insert_chunk(note_id, draft, chunk_title, tags_text, keyworded)
            if draft.memory_id:
                self._insert_memory(note_id, chunk_id, draft)
        stale = [int(r["id"]) for rows in old.values() for r in rows]
        self._delete_chunks(stale)

    def _insert_chunk(
        self, note_id: int, draft: ChunkDraft, title: str, tags_text: str, keyworded: bool = True
    ) -> int:
        chunk_id = int(
            self.conn.execute(
                "INSERT INTO chunks(ordinal, kind, start_line, end_line, heading, grp, memory_id,"
                " category, importance, created, archived, note_id, text, context, hash, embedded)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0)",
                (*_chunk_meta(draft), note_id, draft.text, draft.context, draft.hash),
            ).lastrowid
        )
        if keyworded:
            self._insert_fts(chunk_id, draft, title, tags_text)
        self._insert_tags(chunk_id, draft.tags)
        return chunk_id

    def _insert_fts(self, chunk_id: int, draft: ChunkDraft, title: str, tags_text: str) -> None:
        # Words in every script, stems by language (memvault.index.stemming).
        words = KeywordRow.of(draft.text, draft.context, title, tags_text)
        write_keywords(self.conn, self.dialect, chunk_id, words)

    def _delete_fts(self, ids: Sequence[int]) -> None:
        for table in keyword_tables(self.dialect):
            self.conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(i,) for i in ids])

    def _insert_tags(self, chunk_id: int, tags: Sequence[str]) -> None:
        self.conn.executemany(
            "INSERT OR IGNORE INTO chunk_tags(chunk_id, tag) VALUES (?, ?)",
            [(chunk_id, t) for t in tags],
        )

    def _insert_memory(self, note_id: int, chunk_id: int, draft: ChunkDraft) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO memories(id, note_id, chunk_id, category, importance, tags,"
            " created, source, archived, text, norm) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                draft.memory_id,
                note_id,
                chunk_id,
                draft.category or "",
                draft.importance,
                json_text(draft.tags),
                draft.created,
                draft.group or None,
                int(draft.archived),
                draft.text,
                normalize_text(draft.text),
            ),
        )

    def _delete_chunks(self, ids: Sequence[int]) -> None:
        if not ids:
            return
        pairs = [(i,) for i in ids]
        self._delete_fts(ids)
        self.conn.executemany("DELETE FROM chunks WHERE id = ?", pairs)
        self.vectors.delete(ids)

    def _store_links(self, note_id: int, path: str, note: Note) -> None:
        self.conn.execute("DELETE FROM links WHERE note_id = ?", (note_id,))
        rows = []
        offset = note.body_offset
        frontmatter = note.frontmatter_text
        for link in extract_links(frontmatter):
            rows.append(
                (
                    note_id,
                    link.target,
                    link.subpath,
                    link.alias,
                    "relation",
                    link.line + 1,
                    _property_at(frontmatter, link.line),
                    None,
                )
            )
        typed = relation_lines(note.body)
        for link in extract_links(note.body):
            relation = typed.get(link.line - 1)
            rows.append(
                (
                    note_id,
                    link.target,
                    link.subpath,
                    link.alias,
                    link_kind(link),
                    link.line + offset,
                    *(relation[::2] if relation and relation[1] == link.target else (None, None)),
                )
            )
        self._insert_links(path, rows)

    def _insert_links(self, path: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Store link rows ``(note_id, target, subpath, alias, kind, line, relation,
        valid_until)``, resolved."""
        resolver = self.resolver()
        self.conn.executemany(
            "INSERT INTO links(note_id, target, subpath, alias, kind, line, relation, valid_until,"
            " target_key, resolved) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [(*r, link_key(r[1]), resolver.resolve(r[1], path) if r[1] else path) for r in rows],
        )

    def resolver(self) -> LinkResolver:
        """The link resolver over the indexed notes, rebuilt when another process changed them."""
        version = get_meta(self.conn, "structure_version")
        if self._links is None or self._links_version != version:
            files = [str(r["path"]) for r in self.conn.execute("SELECT path FROM notes")]
            alias_map: dict[str, list[str]] = {}
            for r in self.conn.execute("SELECT path, aliases FROM notes WHERE aliases != '[]'"):
                alias_map[str(r["path"])] = json.loads(r["aliases"])
            self._links = LinkResolver(files, alias_map)
            self._links_version = version
        return self._links

    def _restructure(self, added: Sequence[str], removed: Sequence[str]) -> None:
        """Re-resolve the links that notes appearing, vanishing or moving can affect.

        Those are links naming one of the notes (by file name or alias),
        links that did not resolve, links that pointed at a vanished note,
        and every link from a note that appeared (a moved note's relative links).
        """
        if not added and not removed:
            return
        resolver = self.resolver()
        keys: set[str] = set()
        for path in removed:
            keys |= {link_key(path), *(a.casefold() for a in resolver.aliases_of(path))}
            resolver.remove(path)
        for path in added:
            row = self.conn.execute("SELECT aliases FROM notes WHERE path = ?", (path,)).fetchone()
            names = json.loads(row["aliases"]) if row is not None else []
            resolver.add(path, names)
            keys |= {link_key(path), *(a.casefold() for a in names)}
        query = (
            "SELECT l.rowid AS rid, l.target, l.resolved, n.path"
            " FROM links l JOIN notes n ON n.id = l.note_id"
        )
        params: list[Any] = []
        if len(added) + len(removed) <= _TARGETED_RELINK:
            query += (
                " WHERE l.resolved IS NULL"
                f" OR l.resolved IN ({','.join('?' * len(removed)) or 'NULL'})"
                f" OR l.target_key IN ({','.join('?' * len(keys)) or 'NULL'})"
                f" OR n.path IN ({','.join('?' * len(added)) or 'NULL'})"
            )
            params = [*removed, *keys, *added]
        updates = []
        for r in self.conn.execute(query, params).fetchall():
            resolved = resolver.resolve(r["target"], r["path"]) if r["target"] else r["path"]
            if resolved != r["resolved"]:
                updates.append((resolved, r["rid"]))
        with transaction(self.conn):
            if updates:
                self.conn.executemany("UPDATE links SET resolved = ? WHERE rowid = ?", updates)
            version = str(int(get_meta(self.conn, "structure_version") or "0") + 1)
            set_meta(self.conn, "structure_version", version)
        self._links_version = version

    def _move(self, old: str, new: str, entry: FileEntry) -> None:
        with transaction(self.conn):
            self.conn.execute(
                "UPDATE notes SET path = ?, kind = ?, mtime_ns = ?, ctime_ns = ?, size = ?"
                " WHERE path = ?",
                (new, kind_of(new), entry.mtime_ns, entry.ctime_ns, entry.size, old),
            )

    def _remove(self, path: str) -> None:
        with transaction(self.conn):
            row = self.conn.execute("SELECT id FROM notes WHERE path = ?", (path,)).fetchone()
            if row is None:
                return
            ids = [
                int(r[0])
                for r in self.conn.execute("SELECT id FROM chunks WHERE note_id = ?", (row["id"],))
            ]
            self._delete_chunks(ids)
            self.conn.execute("DELETE FROM notes WHERE id = ?", (row["id"],))


def json_text(value: Any) -> str:
    """``value`` as the index's JSON columns hold it."""
    return json.dumps(plain(value), ensure_ascii=False, default=str)


def _property_at(frontmatter: str, line: int) -> str | None:
    """The frontmatter property a link on ``line`` (1-based) belongs to, as a relation type."""
    for text in reversed(frontmatter.split("\n")[:line]):
        found = _PROPERTY.match(text)
        if found:
            return relation_name(found.group(1)) or None
    return None


def link_kind(link: Link) -> str:
    """How a link is written: ``embed``, ``markdown`` or ``wikilink``."""
    return "embed" if link.embed else ("markdown" if link.kind == "markdown" else "wikilink")


def _chunk_meta(draft: ChunkDraft) -> tuple[Any, ...]:
    return (
        draft.ordinal,
        draft.kind,
        draft.start_line,
        draft.end_line,
        draft.heading,
        draft.group,
        draft.memory_id,
        draft.category,
        draft.importance,
        draft.created,
        int(draft.archived),
    )
