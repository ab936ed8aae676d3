"""A folder of one kind of typed note (tasks, contacts, projects ...).

People and models refer to a note loosely: "fix-login-bug.md", "Fix login
bug", "[[Fix login bug]]", a path, an alias, or a unique part of the name.
:meth:`Collection.find` accepts all of those and explains an ambiguous or
missing reference instead of guessing.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from memvault.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    NotTextError,
    UnsafePathError,
)
from memvault.text import TextScreen
from memvault.vault import templates
from memvault.vault.markdown import aliases
from memvault.vault.note import Note
from memvault.vault.paths import ensure_note_suffix, normalize_relpath, safe_filename
from memvault.vault.store import Vault

log = logging.getLogger(__name__)


def slug(text: str) -> str:
    """Lower-case words joined by '-': how "Fix login bug" and "fix-login-bug" meet."""
    return "-".join(re.findall(r"[^\W_]+", text.casefold()))


def strip_link(ref: str) -> str:
    """``[[Note|alias]]`` or ``[[Note#heading]]`` -> ``Note``; plain text unchanged."""
    text = ref.strip()
    if text.startswith("[[") and text.endswith("]]"):
        text = text[2:-2].split("|", 1)[0].split("#", 1)[0]
    return text.strip()


def stem(path: str) -> str:
    """File name without folder and extension."""
    name = posixpath.basename(path)
    return name[:-3] if name.lower().endswith(".md") else name


class Collection:
    """Typed notes living in ``folders`` of a vault."""

    def __init__(
        self,
        vault: Vault,
        folders: Iterable[str],
        kind: str,
        *,
        by_alias: bool = False,
        screen: TextScreen | None = None,
    ) -> None:
        self.vault = vault
        self.folders = tuple(folders)
        self.kind = kind
        self.by_alias = by_alias
        # Keeps secrets out of what is written ([privacy] secrets; wired by the runtime).
        self.screen = screen

    def paths(self, folders: Iterable[str] | None = None) -> list[str]:
        """Every note path in the collection's folders (not recursive)."""
        out: list[str] = []
        for folder in folders if folders is not None else self.folders:
            if self.vault.resolve(folder).is_dir():
                out.extend(e.path for e in self.vault.list(folder, recursive=False))
        return out

    def load(self, path: str) -> Note:
        """Parse one note of the collection."""
        return Note.parse(self.vault.read_text(path))

    def each(self, folders: Iterable[str] | None = None) -> Iterator[tuple[str, Note]]:
        """Every note of the collection, parsed; one that is not text (or went away
        meanwhile) is left out, so a bad file breaks only itself."""
        for path in self.paths(folders):
            try:
                yield path, self.load(path)
            except NotTextError:
                log.warning("skipping a note that is not text", extra={"path": path})
            except NotFoundError:
                continue

    def _aliases(self, path: str) -> list[str]:
        try:
            return [a.casefold() for a in aliases(self.load(path).frontmatter)]
        except (NotTextError, NotFoundError):
            return []

    def find(self, ref: str) -> str:
        """The path of the note ``ref`` names; NotFoundError or a list of candidates."""
        wanted = strip_link(ref)
        if not wanted:
            raise InvalidInputError(f"Name the {self.kind} to use.")
        if "/" in wanted:
            try:
                clean = ensure_note_suffix(normalize_relpath(wanted))
            except UnsafePathError:
                clean = ""
            if clean and self.vault.is_file(clean):
                return clean
        paths = self.paths()
        key = wanted[:-3] if wanted.lower().endswith(".md") else wanted
        key = posixpath.basename(key).casefold()
        stages: list[Callable[[str], bool]] = [
            lambda p: stem(p).casefold() == key,
            lambda p: bool(slug(key)) and slug(stem(p)) == slug(key),
        ]
        if self.by_alias:
            stages.append(lambda p: key in self._aliases(p))
        for stage in stages:
            matches = [p for p in paths if stage(p)]
            if len(matches) == 1:
                return matches[0]
            if matches:
                # Same name in several folders: the first folder wins (active over completed).
                for folder in self.folders:
                    in_folder = [p for p in matches if posixpath.dirname(p) == folder]
                    if len(in_folder) == 1:
                        return in_folder[0]
                return self._ambiguous(ref, matches)
        partial = [p for p in paths if key in stem(p).casefold()]
        if len(partial) == 1:
            return partial[0]
        if partial:
            return self._ambiguous(ref, partial)
        raise NotFoundError(
            f"No {self.kind} named {ref!r}.", hint=f"List them with `memvault {self.kind} list`."
        )

    def _ambiguous(self, ref: str, matches: list[str]) -> str:
        stems = [stem(p) for p in matches]
        # The same name in two folders (a recurring task, open and done) is told apart by path.
        shown = matches if len(set(stems)) < len(stems) else stems
        names = ", ".join(sorted(shown)[:5])
        raise InvalidInputError(
            f"{ref!r} matches several {self.kind}s ({names}); be more specific."
        )

    def start(self, name: str, moment: datetime, *, advice: str) -> tuple[str, Note]:
        """A free path and a template note for a new note called ``name``. When a note
        of that file name exists already (case aside), ConflictError instead: ``advice``
        says what to do rather than start a second one beside it as "NAME 2"."""
        try:
            existing: str | None = self.find(name)
        except (NotFoundError, InvalidInputError):
            existing = None
        if existing is not None and stem(existing).casefold() == name.casefold():
            raise ConflictError(
                f"A {self.kind} named {name!r} already exists ({existing}); "
                f"{advice} or choose another name."
            )
        return self.new_path(name), self.blank(name, moment)

    def blank(self, title: str, moment: datetime) -> Note:
        """A new note of this kind from its template (the vault's own, else the built-in)."""
        return Note.parse(
            templates.render(templates.load(self.vault, self.kind), title=title, moment=moment)
        )

    def new_path(self, title: str, folder: str | None = None) -> str:
        """A free path for a new note titled ``title`` (adds " 2", " 3" ... on a clash)."""
        if self.screen is not None:  # a file name is stored text too
            title = self.screen(title)
        base = safe_filename(title)
        where = folder if folder is not None else self.folders[0]
        taken = {stem(p).casefold() for p in self.paths()}
        candidate, n = base, 1
        while candidate.casefold() in taken:
            n += 1
            candidate = f"{base} {n}"
        return f"{where}/{candidate}.md"

    def create(self, path: str, note: Note) -> str:
        """Write a new note; never replaces an existing file."""
        text = note.render()
        if self.screen is not None:
            text = self.screen(text)
        if not self.vault.create_text(path, text):
            raise ConflictError(f"{path} already exists; choose another name.")
        return path

    def update(self, path: str, change: Callable[[Note], None]) -> Note:
        """Parse, change and write back one note under its lock."""
        result: list[Note] = []

        def apply(text: str | None) -> str | None:
            assert text is not None
            note = Note.parse(text)
            change(note)
            rendered = note.render()
            if self.screen is not None:  # what the note already held is kept as it was
                screened = self.screen(rendered, kept=text)
                if screened != rendered:
                    rendered, note = screened, Note.parse(screened)
            result.append(note)
            return rendered

        self.vault.edit_text(path, apply)
        return result[0]
