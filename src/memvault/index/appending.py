"""Lines appended to a memory file: only the new memories are indexed.

Remembering appends a line to a memory file; reading and cutting the whole file again
for each line would make every new memory slower than the last. When what was indexed
is, byte for byte, how the file starts now (its content hash says so, the hash carried
on from one append to the next) and ends with a whole line, only the lines after it
are parsed: their memories are added, and the chunks whose neighbours they are get
their context again. In every other case the note is indexed whole.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

from memvault.errors import InvalidInputError
from memvault.index.chunking import memory_chunks
from memvault.index.rows import NoteRows, json_text, link_kind
from memvault.sqlite import transaction
from memvault.vault.markdown import extract_links, note_tags


class MemoryAppends(NoteRows):
    """Indexes what was appended to a memory file, or says it cannot."""

    _appended: dict[str, Appended]

    def _append_memories(self, path: str) -> bool:
        """Fast path for lines appended to a memory file: index only the new memories.

        It applies when what was indexed is, byte for byte, how the file
        starts now (its hash says so) and ends with a whole line, whoever
        appended (memvault or a person). Returns False otherwise; the file is
        then re-indexed whole.
        """
        row = self.conn.execute(
            "SELECT id, size, hash, tags FROM notes WHERE path = ?", (path,)
        ).fetchone()
        if row is None or not row["hash"]:
            return False
        note_id, indexed = int(row["id"]), int(row["size"])
        before = self.vault.stat(path)  # taken before the read: a later edit shows a newer mtime
        try:
            appended = self.memories.read(path)
        except InvalidInputError:  # not UTF-8 now: the whole file is looked at
            return False
        data = memoryview(appended.data)
        # Under 400 bytes the appended lines could change the category read from the head.
        if len(data) <= indexed or indexed < 400 or data[indexed - 1] != ord("\n"):
            return False
        last = self._appended.get(path)
        if (
            last is not None
            and last.hexdigest() == row["hash"]
            and len(last.data) == indexed
            and appended.data.startswith(last.data)
        ):
            # The bytes indexed last time are kept: no need to hash or count them again.
            digest, above = last.hasher.copy(), last.lines
        else:
            digest = new_hasher(data[:indexed])
            if digest.hexdigest() != row["hash"]:
                return False
            above = appended.data.count(b"\n", 0, indexed)
        tail = bytes(data[indexed:]).decode("utf-8")
        digest.update(data[indexed:])
        parsed = appended.memories
        known = self.conn.execute(
            "SELECT count(*) AS n, max(ordinal) AS last FROM chunks WHERE note_id = ?", (note_id,)
        ).fetchone()
        count = int(known["n"])
        if len(parsed) < count or (count and known["last"] != count - 1):
            return False
        if count:
            tail_row = self.conn.execute(
                "SELECT memory_id FROM chunks WHERE note_id = ? AND ordinal = ?",
                (note_id, count - 1),
            ).fetchone()
            if tail_row is None or tail_row["memory_id"] != parsed[count - 1].id:
                return False
        window = self.settings.neighbour_window
        start = max(0, count - 2 * window)
        drafts = memory_chunks(
            parsed[start:], window=window, max_gap_hours=self.settings.neighbour_hours
        )
        with transaction(self.conn):
            for offset, draft in enumerate(drafts):
                ordinal = start + offset
                draft.ordinal = ordinal
                if ordinal < count - window:
                    continue  # its neighbours did not change
                tags_text = " ".join(draft.tags)
                if ordinal < count:
                    current = self.conn.execute(
                        "SELECT id, hash FROM chunks WHERE note_id = ? AND ordinal = ?",
                        (note_id, ordinal),
                    ).fetchone()
                    if current is None or current["hash"] == draft.hash:
                        continue
                    chunk_id = int(current["id"])
                    self.conn.execute(
                        "UPDATE chunks SET context = ?, hash = ?, embedded = 0 WHERE id = ?",
                        (draft.context, draft.hash, chunk_id),
                    )
                    self._delete_fts([chunk_id])
                    self._insert_fts(chunk_id, draft, "", tags_text)
                else:
                    chunk_id = self._insert_chunk(note_id, draft, "", tags_text)
                    self._insert_memory(note_id, chunk_id, draft)
            # The appended lines' links and tags join the note's.
            self._insert_links(
                path,
                [
                    (
                        note_id,
                        link.target,
                        link.subpath,
                        link.alias,
                        link_kind(link),
                        link.line + above,
                        None,
                        None,
                    )
                    for link in extract_links(tail)
                ],
            )
            tags = note_tags({"tags": json.loads(row["tags"])}, tail)
            # The hash and size of exactly what was parsed; the times only if the file was
            # that size before the read (else 0: the next sync looks at the file again).
            same = before.size == len(data)
            self.conn.execute(
                "UPDATE notes SET mtime_ns = ?, ctime_ns = ?, size = ?, hash = ?, tags = ?,"
                " indexed_at = ? WHERE id = ?",
                (
                    before.mtime_ns if same else 0,
                    before.ctime_ns if same else 0,
                    len(data),
                    digest.hexdigest(),
                    json_text(tags),
                    time.time(),
                    note_id,
                ),
            )
        self._appended[path] = Appended(appended.data, digest, above + tail.count("\n"))
        return True


@dataclass
class Appended:
    """A memory file as the append fast path last indexed it: bytes, running hash, lines."""

    data: bytes
    hasher: hashlib._Hash
    lines: int

    def hexdigest(self) -> str:
        return self.hasher.hexdigest()


def note_hash(data: bytes) -> str:
    """A note's content hash (notes.hash); _append_memories extends one incrementally."""
    return new_hasher(data).hexdigest()


def new_hasher(data: bytes | memoryview) -> hashlib._Hash:
    """A running content hash of ``data``, to be carried on with the bytes appended next."""
    return hashlib.sha1(data)
