"""Any note in the vault: read, write, append, list, move, delete, and its links.

Typed notes (tasks, contacts ...) have their own services; this one is for
the vault as a whole, the way a person browses it in Obsidian. Paths may
omit ``.md``.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memvault.errors import InvalidInputError, NotFoundError
from memvault.vault.links import LinkResolver
from memvault.vault.markdown import (
    Link,
    aliases,
    block_ids,
    extract_links,
    headings,
    note_tags,
    title_of,
)
from memvault.vault.note import Note
from memvault.vault.paths import ensure_note_suffix, normalize_relpath
from memvault.vault.store import FileEntry, Vault

MAX_NOTE_BYTES = 5 * 1024 * 1024


@dataclass
class NoteView:
    """A note as read: its text and what was parsed from it."""

    path: str
    text: str
    note: Note
    size: int
    modified: datetime

    @property
    def title(self) -> str:
        """First level-1 heading, else the file name."""
        return title_of(self.note.body, self.path.rsplit("/", 1)[-1].removesuffix(".md"))

    @property
    def tags(self) -> list[str]:
        """Frontmatter and inline tags."""
        return note_tags(self.note.frontmatter, self.note.body)

    @property
    def links(self) -> list[Link]:
        """Outgoing links with line numbers relative to the whole file."""
        offset = self.note.body_offset
        return [
            Link(link.target, link.subpath, link.alias, link.embed, link.line + offset, link.kind)
            for link in extract_links(self.note.body)
        ]

    def to_dict(self, *, include_text: bool = True) -> dict[str, Any]:
        """JSON-ready form."""
        data: dict[str, Any] = {
            "path": self.path,
            "title": self.title,
            "size": self.size,
            "modified": self.modified.isoformat(timespec="seconds"),
            "frontmatter": self.note.to_dict()["frontmatter"],
            "frontmatter_error": self.note.frontmatter_error,
            "tags": self.tags,
            "aliases": aliases(self.note.frontmatter),
            "headings": [h.text for h in headings(self.note.body)],
            "block_ids": [b.id for b in block_ids(self.note.body)],
            "links": [link.to_dict() for link in self.links],
        }
        if include_text:
            data["content"] = self.text
        return data


@dataclass(frozen=True)
class ResolvedLink:
    """An outgoing link and the file it points at (None when unresolved)."""

    link: Link
    resolved: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {**self.link.to_dict(), "resolved": self.resolved}


@dataclass(frozen=True)
class Backlink:
    """A link from another note to this one."""

    source: str
    line: int
    link: Link

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "source": self.source,
            "line": self.line,
            "target": self.link.target,
            "embed": self.link.embed,
        }


class Notes:
    """Generic note operations on a vault."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault

    def locate(self, raw: str) -> str:
        """The existing file ``raw`` names, trying it as given and with ``.md``."""
        clean = normalize_relpath(raw)
        if self.vault.is_file(clean):
            return clean
        with_suffix = ensure_note_suffix(clean)
        if with_suffix != clean and self.vault.is_file(with_suffix):
            return with_suffix
        if self.vault.resolve(clean).is_dir():
            raise InvalidInputError(
                f"{clean} is a folder; list it with `memvault note list {clean}`."
            )
        raise NotFoundError(f"No note at {clean}.", hint="List notes with `memvault note list`.")

    def read(self, raw: str) -> NoteView:
        """Read one note."""
        path = self.locate(raw)
        text = self.vault.read_text(path)
        entry = self.vault.stat(path)
        return NoteView(
            path=path, text=text, note=Note.parse(text), size=entry.size, modified=entry.modified
        )

    def _check_content(self, content: str) -> None:
        if len(content.encode("utf-8")) > MAX_NOTE_BYTES:
            raise InvalidInputError(f"A note is at most {MAX_NOTE_BYTES // (1024 * 1024)} MB.")
        if "\x00" in content:
            raise InvalidInputError("Note content contains a NUL character.")

    def write(self, raw: str, content: str, *, overwrite: bool = True) -> str:
        """Write a whole note (``.md`` added when the path has no extension)."""
        self._check_content(content)
        path = ensure_note_suffix(normalize_relpath(raw))
        if content and not content.endswith("\n"):
            content += "\n"
        return self.vault.write_text(path, content, overwrite=overwrite)

    def append(self, raw: str, content: str) -> str:
        """Append lines to a note, creating it if needed."""
        self._check_content(content)
        if not content.strip():
            raise InvalidInputError("Nothing to append: the content is empty.")
        path = ensure_note_suffix(normalize_relpath(raw))
        return self.vault.append_text(path, content)

    def list(
        self, folder: str = "", *, recursive: bool = True, notes_only: bool = True
    ) -> list[FileEntry]:
        """Files under a folder with sizes and modification times."""
        return self.vault.list(folder, recursive=recursive, notes_only=notes_only)

    def delete(self, raw: str) -> str:
        """Delete one note."""
        return self.vault.delete(self.locate(raw))

    def move(self, source: str, destination: str, *, overwrite: bool = False) -> str:
        """Move or rename a note; a destination without extension keeps the source's."""
        src = self.locate(source)
        dst = normalize_relpath(destination)
        if self.vault.resolve(dst).is_dir():
            dst = f"{dst}/{src.rsplit('/', 1)[-1]}"
        elif src.endswith(".md"):
            dst = ensure_note_suffix(dst)
        return self.vault.move(src, dst, overwrite=overwrite)

    # -- links -----------------------------------------------------------------

    def resolver(self) -> LinkResolver:
        """A resolver over every file in the vault, with note aliases."""
        files = [e.path for e in self.vault.list(notes_only=False)]
        alias_map: dict[str, list[str]] = {}
        for path in files:
            if path.endswith(".md"):
                names = aliases(Note.parse(self.vault.read_text(path)).frontmatter)
                if names:
                    alias_map[path] = names
        return LinkResolver(files, alias_map)

    def links(self, raw: str, resolver: LinkResolver | None = None) -> builtins.list[ResolvedLink]:
        """Outgoing links of a note, each resolved the way Obsidian would."""
        view = self.read(raw)
        resolver = resolver or self.resolver()
        return [ResolvedLink(link, resolver.resolve(link.target, view.path)) for link in view.links]

    def backlinks(self, raw: str, resolver: LinkResolver | None = None) -> builtins.list[Backlink]:
        """Links from other notes that resolve to this one."""
        path = self.locate(raw)
        resolver = resolver or self.resolver()
        found: list[Backlink] = []
        for entry in self.vault.list():
            if entry.path == path:
                continue
            other = self.read(entry.path)
            for link in other.links:
                if link.target and resolver.resolve(link.target, entry.path) == path:
                    found.append(Backlink(source=entry.path, line=link.line, link=link))
        return found
