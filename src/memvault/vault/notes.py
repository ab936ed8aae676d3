"""Any note in the vault: read, write, append, list, move, delete, and its links.

Typed notes (tasks, contacts ...) have their own services; this one is for
the vault as a whole, the way a person browses it in Obsidian. Paths may
omit ``.md``.
"""

from __future__ import annotations

import builtins
import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memvault.errors import ConflictError, InvalidInputError, MemvaultError, NotFoundError
from memvault.text import TextScreen
from memvault.vault.links import LinkResolver
from memvault.vault.markdown import (
    Link,
    aliases,
    block_ids,
    extract_links,
    headings,
    note_tags,
    rewrite_wikilinks,
    title_of,
)
from memvault.vault.note import Note
from memvault.vault.paths import ensure_note_suffix, normalize_relpath
from memvault.vault.store import FileEntry, Vault

MAX_NOTE_BYTES = 5 * 1024 * 1024
_HASH = re.compile(r"[0-9a-f]{64}")


def content_hash(text: str) -> str:
    """The version of a note: sha256 (64 hex digits) of its bytes, as ``sha256sum`` prints it.

    Notes are read as strict UTF-8 (BOM and CRLF kept), so encoding the
    text gives back the file's bytes exactly.
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_hash(raw: str) -> str:
    """A hash a caller sends back (an ETag's quotes allowed), checked and lower-cased."""
    value = raw.strip().strip('"').lower()
    if not _HASH.fullmatch(value):
        raise InvalidInputError(
            f"{raw.strip()[:80]!r} is not a note hash: pass the 64 hex digits a read returned."
        )
    return value


@dataclass
class NoteView:
    """A note as read: its text and what was parsed from it."""

    path: str
    text: str
    note: Note
    size: int
    modified: datetime

    @property
    def hash(self) -> str:
        """The note's :func:`content_hash`: pass it back to a write to detect a change since."""
        return content_hash(self.text)

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
        """Outgoing links, from frontmatter properties and the body, with file line numbers."""
        offset = self.note.body_offset
        in_properties = [
            Link(link.target, link.subpath, link.alias, link.embed, link.line + 1, link.kind)
            for link in extract_links(self.note.frontmatter_text)
            if link.kind == "wikilink"
        ]
        return in_properties + [
            Link(link.target, link.subpath, link.alias, link.embed, link.line + offset, link.kind)
            for link in extract_links(self.note.body)
        ]

    def to_dict(self, *, include_text: bool = True) -> dict[str, Any]:
        """JSON-ready form."""
        data: dict[str, Any] = {
            "path": self.path,
            "title": self.title,
            "hash": self.hash,
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

    def __init__(self, vault: Vault, *, screen: TextScreen | None = None) -> None:
        self.vault = vault
        # Keeps secrets out of what a person or a tool writes ([privacy] secrets; the
        # runtime gives it). Typed notes and jobs write through the vault, not here.
        self.screen = screen

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
        self.vault.check_regular(clean)  # a named pipe or socket: say so, never open it
        self.vault.check_regular(with_suffix)
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

    def write(
        self,
        raw: str,
        content: str,
        *,
        overwrite: bool = True,
        allow_empty: bool = False,
        expected_hash: str | None = None,
    ) -> str:
        """Write a whole note (``.md`` added when the path has no extension).

        Empty content is refused unless ``allow_empty``: an empty pipe must
        not wipe a note by accident. With ``expected_hash`` (the ``hash`` a
        read returned) the note is replaced only if it still holds what was
        read: a change made since, by a person or another agent, is a
        ConflictError and nothing is written.
        """
        self._check_content(content)
        if not content.strip() and not allow_empty:
            raise InvalidInputError("The content is empty; nothing was written.")
        path = ensure_note_suffix(normalize_relpath(raw))
        if content and not content.endswith("\n"):
            content += "\n"
        if expected_hash is None:
            if self.screen is not None:
                # A secret the note already holds is the owner's to keep: only new ones go.
                content = self.screen(content, kept=self._current(path))
            return self.vault.write_text(path, content, overwrite=overwrite)
        if not overwrite:
            raise InvalidInputError(
                "An expected hash replaces a note that exists; it cannot go with no-overwrite."
            )
        expected = parse_hash(expected_hash)

        def replace_if_as_read(current: str | None) -> str:
            # Runs under the note's lock, on what the file holds now; edit_text
            # replaces it only if it still holds exactly this text.
            if current is None:
                raise ConflictError(
                    f"{path} is gone since it was read; nothing was written.",
                    hint="List notes to see where it went, or write without the hash to create it.",
                )
            now = content_hash(current)
            if now != expected:
                raise ConflictError(
                    f"{path} changed since it was read (hash {expected[:12]}… now {now[:12]}…); "
                    "nothing was written: read it again and reapply your change.",
                    current_hash=now,
                )
            return content if self.screen is None else self.screen(content, kept=current)

        self.vault.edit_text(path, replace_if_as_read, must_exist=False)
        return path

    def _current(self, path: str) -> str:
        """The note's text now ("" when there is none, or it is not text)."""
        try:
            return self.vault.read_text(path) if self.vault.is_file(path) else ""
        except MemvaultError:
            return ""

    def append(self, raw: str, content: str) -> str:
        """Append lines to a note, creating it if needed."""
        self._check_content(content)
        if not content.strip():
            raise InvalidInputError("Nothing to append: the content is empty.")
        path = ensure_note_suffix(normalize_relpath(raw))
        if self.screen is not None:
            content = self.screen(content)
        return self.vault.append_text(path, content)

    def list(
        self, folder: str = "", *, recursive: bool = True, notes_only: bool = True
    ) -> list[FileEntry]:
        """Files under a folder with sizes and modification times."""
        return self.vault.list(folder, recursive=recursive, notes_only=notes_only)

    def delete(self, raw: str) -> str:
        """Delete one note."""
        return self.vault.delete(self.locate(raw))

    def move(
        self, source: str, destination: str, *, overwrite: bool = False, update_links: bool = True
    ) -> str:
        """Move or rename a note; a destination without extension keeps the source's.

        A destination that is a folder (existing, or written with a trailing
        '/') receives the note under its current name.

        Like Obsidian, links elsewhere that would stop resolving are rewritten
        to point at the new place (``update_links``).
        """
        src = self.locate(source)
        dst = normalize_relpath(destination)
        if destination.strip().endswith("/") or self.vault.resolve(dst).is_dir():
            dst = f"{dst}/{src.rsplit('/', 1)[-1]}"
        elif src.endswith(".md"):
            dst = ensure_note_suffix(dst)
        before = self._catalog() if update_links else None
        moved = self.vault.move(src, dst, overwrite=overwrite)
        if before is not None and moved != src:
            self._relink(src, moved, *before)
        return moved

    # -- links -----------------------------------------------------------------

    def _read_or_none(self, path: str) -> str | None:
        """A note's text, or None for a file that is not UTF-8 (it cannot hold links)."""
        try:
            return self.vault.read_text(path)
        except (InvalidInputError, NotFoundError):
            return None

    def _catalog(self) -> tuple[builtins.list[str], dict[str, builtins.list[str]]]:
        """Every file in the vault and the aliases of each note."""
        files = [e.path for e in self.vault.list(notes_only=False)]
        alias_map: dict[str, builtins.list[str]] = {}
        for path in files:
            if path.endswith(".md"):
                text = self._read_or_none(path)
                names = aliases(Note.parse(text).frontmatter) if text is not None else []
                if names:
                    alias_map[path] = names
        return files, alias_map

    def resolver(self) -> LinkResolver:
        """A resolver over every file in the vault, with note aliases."""
        return LinkResolver(*self._catalog())

    def _relink(
        self,
        old: str,
        new: str,
        files: builtins.list[str],
        alias_map: dict[str, builtins.list[str]],
    ) -> builtins.list[str]:
        """Rewrite links that resolved to ``old`` and would no longer reach ``new``."""
        before = LinkResolver(files, alias_map)
        renamed = [new if p == old else p for p in files]
        after = LinkResolver(renamed, {new if p == old else p: a for p, a in alias_map.items()})
        new_target = after.shortest_link(new)
        # A link to ``old`` names its file or one of its aliases: notes without those are skipped.
        needles = [old.rsplit("/", 1)[-1].removesuffix(".md").casefold()]
        needles += [a.casefold() for a in alias_map.get(old, [])]
        changed: builtins.list[str] = []
        for path in renamed:
            if not path.endswith(".md"):
                continue
            source_before = old if path == new else path

            def retarget(
                link: Link, source_before: str = source_before, path: str = path
            ) -> str | None:
                if not link.target or before.resolve(link.target, source_before) != old:
                    return None
                return None if after.resolve(link.target, path) == new else new_target

            def rewrite(text: str | None) -> str | None:
                return None if text is None else rewrite_wikilinks(text, retarget)

            original = self._read_or_none(path)
            if original is None or not any(n in original.casefold() for n in needles):
                continue
            if self.vault.edit_text(path, rewrite) != original:
                changed.append(path)
        return changed

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
            text = self._read_or_none(entry.path) if entry.path != path else None
            if text is None:
                continue
            other = NoteView(entry.path, text, Note.parse(text), entry.size, entry.modified)
            for link in other.links:
                if link.target and resolver.resolve(link.target, entry.path) == path:
                    found.append(Backlink(source=entry.path, line=link.line, link=link))
        return found
