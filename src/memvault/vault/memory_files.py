"""The memory files: ``Memory/<Category>.md``, how they are read and how they change.

A memory file is a category's note: frontmatter naming its category, a title, and one
bullet a memory (:mod:`memvault.vault.memory_format`); frontmatter and code blocks
hold no memory. :class:`MemoryFile` is one file as parsed, with the tables a duplicate
or an id is looked up in. :class:`MemoryFiles` reads them for
:class:`memvault.vault.memories.Memories`: a file's parse is kept with its bytes and
used again while the bytes are the same, extended when lines were only appended, and
made afresh otherwise (never trusted to a file's stat), so a vault of a hundred
thousand memories is not parsed again at each remember. A file that is not text is
left out and logged once, so one bad file breaks only itself. It also makes the three
changes a memory file sees: bullets appended, one bullet removed, one re-rendered in
place, each found by its id as the file reads now and every other byte kept.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace

from memvault.clock import Clock
from memvault.errors import ConflictError, NotFoundError, NotTextError
from memvault.vault.memory_format import Memory, normalize_text, parse_line, render_line
from memvault.vault.notes import content_hash
from memvault.vault.store import Change, Vault, decode_text
from memvault.vocabulary import CATEGORIES

log = logging.getLogger(__name__)

MEMORY_DIR = "Memory"
TITLE_TO_CATEGORY = {title.casefold(): cat for cat, title in CATEGORIES.items()}


def category_path(category: str) -> str:
    """``Memory/<Title>.md`` for a category."""
    return f"{MEMORY_DIR}/{CATEGORIES.get(category, category.title())}.md"


def category_note(category: str) -> str:
    """The text of a new, empty category note."""
    title = CATEGORIES.get(category, category.title())
    return f"---\ncategory: {category}\ntags: [memory]\n---\n# {title}\n\n"


def category_of(path: str, text: str) -> str:
    """The category a memory file holds: its frontmatter's ``category``, else its name's."""
    match = re.search(r"^category:[ \t]*['\"]?([\w-]+)", text[:400], re.MULTILINE)
    if match and text.startswith("---"):
        return match.group(1).lower()
    stem = path.rsplit("/", 1)[-1][:-3]
    return TITLE_TO_CATEGORY.get(stem.casefold(), stem.casefold())


class MemoryFile:
    """One memory file as read: its bytes, its memories and the tables duplicates are checked in.

    The bytes are kept so that the parse is validated by content, never by a
    file's stat: an edit that keeps the size and puts the mtime back (rsync
    -t, sync tools) is still seen. Lines appended after ``data`` are parsed
    on their own (:meth:`MemoryFiles.read`), so a growing file is never re-read
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

    def parse(self, text: str, clock: Clock, *, first: int) -> None:
        """Parse ``text``, the lines of this file from line ``first`` on, into it."""
        found: list[Memory] = []
        in_frontmatter, fence = self.in_frontmatter, self.in_fence
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
            memory = parse_line(line, clock, category=self.category, path=self.path, number=number)
            if memory is not None:
                found.append(memory)
        self.in_frontmatter, self.in_fence = in_frontmatter, fence
        self.line_count = first - 1 + len(lines)
        self.take(found)


class MemoryFiles:
    """The vault's memory files as read, each parse kept and checked against the bytes."""

    def __init__(self, vault: Vault, clock: Clock) -> None:
        self.vault = vault
        self.clock = clock
        self._cache: dict[str, MemoryFile] = {}
        self._cache_guard = threading.Lock()
        self._not_text: set[str] = set()  # files already logged as not text

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
        parsed = MemoryFile(path, data, category_of(path, text))
        parsed.parse(text, self.clock, first=1)
        with self._cache_guard:
            self._cache[path] = parsed
        return parsed

    def _extend(self, cached: MemoryFile, data: bytes) -> bool:
        """Parse only what was appended to ``cached``; False when the file changed otherwise."""
        old = cached.data
        if not old.endswith(b"\n") or len(data) <= len(old) or not data.startswith(old):
            return False
        head = data[:400].decode("utf-8", errors="ignore")
        if len(old) < 400 and category_of(cached.path, head) != cached.category:
            return False  # the head the category is read from changed
        tail = decode_text(data[len(old) :], cached.path)
        cached.data = data
        cached.parse(tail, self.clock, first=cached.line_count + 1)
        return True

    def parse_text(self, path: str, text: str) -> list[Memory]:
        """Every memory bullet of a memory file's text (frontmatter and code skipped)."""
        parsed = MemoryFile(path, b"", category_of(path, text))
        parsed.in_frontmatter = text.startswith("---")
        parsed.parse(text, self.clock, first=1)
        return parsed.memories

    def paths(self) -> list[str]:
        """Paths of the memory files, category files first."""
        if not self.vault.resolve(MEMORY_DIR).is_dir():
            return []
        return [entry.path for entry in self.vault.list(MEMORY_DIR)]

    def readable(self) -> list[MemoryFile]:
        """Every memory file that reads as text; one that does not is left out (logged),
        so one bad file breaks only itself."""
        out: list[MemoryFile] = []
        for path in self.paths():
            try:
                out.append(self.read(path))
            except NotTextError:
                if path not in self._not_text:
                    log.warning("skipping a memory file that is not text", extra={"path": path})
                    self._not_text.add(path)
                continue
            self._not_text.discard(path)
        return out

    def last_read(self, paths: Iterable[str]) -> list[MemoryFile | None]:
        """Each path's parse as last read (None for one not read yet), without reading."""
        with self._cache_guard:
            return [self._cache.get(path) for path in paths]

    def locate(self, memory: Memory, text: str, lines: list[str]) -> int | None:
        """The index in ``lines`` of the line that holds ``memory`` now, found by its id.

        The line it was read from is tried first; if the file changed (a line
        typed or removed above it), the whole text is searched.
        """
        index = memory.line - 1
        if 0 <= index < len(lines):
            there = parse_line(
                lines[index],
                self.clock,
                category=memory.category,
                path=memory.path,
                number=memory.line,
            )
            if there is not None and there.id == memory.id:
                return index
        for current in self.parse_text(memory.path, text):
            if current.id == memory.id:
                return current.line - 1
        return None

    # -- changing a file (the caller holds the memories' lock) ------------------

    def append(self, path: str, memories: list[Memory]) -> dict[str, Memory]:
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

    def remove_line(self, memory: Memory) -> None:
        """Delete ``memory``'s bullet from its file; NotFoundError when it was removed
        meanwhile."""

        def drop(text: str | None) -> str | None:
            lines = (text or "").splitlines(keepends=True)
            index = self.locate(memory, text or "", lines)
            if index is None:
                raise NotFoundError(f"No memory with id {memory.id!r}: it was removed meanwhile.")
            del lines[index]
            return "".join(lines)

        self.vault.edit_text(memory.path, drop)

    def rewrite_line(
        self,
        found: Memory,
        change: Callable[[Memory], Memory],
        *,
        new_id: str | None,
        expected: str | None,
    ) -> Memory:
        """Re-render ``found``'s line through ``change``, as the line reads now, through
        :meth:`Vault.edit_text`; the file's other bytes stay as they are.

        ``new_id`` is written out for a bullet typed without one. With ``expected`` (the
        hash of the note as it was read) an edit made since is a ConflictError and
        nothing is written.
        """
        updated: list[Memory] = []

        def rewrite(text: str | None) -> str | None:
            if expected is not None and content_hash(text or "") != expected:
                now = content_hash(text or "")
                raise ConflictError(
                    f"{found.path} changed since it was read; nothing was written.",
                    hint="Read the memory again and reapply your change.",
                    current_hash=now,
                )
            lines = (text or "").splitlines(keepends=True)
            index = self.locate(found, text or "", lines)
            current = (
                None
                if index is None
                else parse_line(
                    lines[index],
                    self.clock,
                    category=found.category,
                    path=found.path,
                    number=index + 1,
                )
            )
            if index is None or current is None:
                raise NotFoundError(f"No memory with id {found.id!r}: it was removed meanwhile.")
            memory = change(replace(current, fields=dict(current.fields), tags=list(current.tags)))
            if new_id is not None:
                memory.id, memory.explicit_id = new_id, True
            ending = "\r\n" if lines[index].endswith("\r\n") else "\n"
            indent = re.match(r"^[ \t]*", lines[index])
            lines[index] = (indent.group(0) if indent else "") + render_line(memory) + ending
            updated[:] = [memory]
            return "".join(lines)

        self.vault.edit_text(found.path, rewrite)
        return updated[0]
