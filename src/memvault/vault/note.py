"""A note: YAML frontmatter plus a Markdown body, round-tripped faithfully.

Parsing keeps the original text. Rendering a note nobody changed returns
those exact bytes; changing one frontmatter field re-emits the frontmatter
through ruamel.yaml's round-trip mode, so unknown keys, their order, quoting
and comments survive. Line endings (LF or CRLF) and a UTF-8 byte-order mark
are kept as the file had them.
"""

from __future__ import annotations

import copy
import functools
import io
import re
from collections.abc import Iterator, Mapping
from datetime import date, datetime
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from memvault.errors import InvalidInputError
from memvault.text import bad_text, first_unencodable, flaw
from memvault.vault.store import detect_newline

_BOM = "\ufeff"
_OPEN = re.compile(r"\A---[ \t]*\n")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)
_SEQ_ITEM = re.compile(r"^( *)- ", re.MULTILINE)
# Plain scalars that YAML would read as something other than the string we mean,
# or that Obsidian writes double-quoted (wikilinks, ids made of digits).
_NEEDS_QUOTES = re.compile(
    r"""^(?:$|[\[\]{}@`*&!|>%#'",?:\-\s]|.*(?::\s|\s#|:$)|[-+]?[\d._]+(?:[eE][-+]?\d+)?$"""
    r"""|(?i:true|false|yes|no|on|off|null|~)$|\d{4}-\d{2}-\d{2})"""
)


def _yaml(raw: str | None = None) -> YAML:
    """A round-trip YAML instance whose list indentation matches ``raw``."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    offset = 2  # Obsidian writes lists as "  - item"
    if raw is not None:
        match = _SEQ_ITEM.search(raw)
        if match is not None:
            offset = len(match.group(1))
    yaml.indent(mapping=2, sequence=offset + 2, offset=offset)
    return yaml


@functools.lru_cache(maxsize=2048)
def _load_frontmatter(raw: str) -> CommentedMap | str:
    """The fields a frontmatter block holds, or one sentence on why it holds none.

    Kept for the last notes read: listing a folder of contacts or tasks reads the same
    blocks again and again, and ruamel's round-trip parse costs 20 times the copy each
    note then gets. The key is the block's whole text, so an edit is a new entry.
    """
    try:
        loaded = _yaml(raw).load(raw) if raw.strip() else CommentedMap()
    except YAMLError as exc:
        return _describe_yaml_error(exc)
    if loaded is None:
        return CommentedMap()
    if not isinstance(loaded, CommentedMap):
        return "the frontmatter is not a list of key: value pairs"
    if ("\\u" in raw or "\\U" in raw) and first_unencodable(loaded) is not None:
        # A "\uD800" escape: text no file, index or answer can hold. The note
        # reads as if it had no fields, like one whose YAML does not parse.
        return "the frontmatter holds a lone surrogate (a \\uD800 escape)"
    return loaded


def yaml_value(value: Any) -> Any:
    """Convert a Python value into what ruamel should emit for a frontmatter field.

    Strings YAML would misread (``"123456"``, ``"[[Project]]"``, ``"yes"``) are
    double-quoted the way Obsidian writes them; lists become block sequences.
    """
    if isinstance(value, str):
        return DoubleQuotedScalarString(value) if _NEEDS_QUOTES.match(value) else value
    if isinstance(value, (list, tuple)):
        seq = CommentedSeq([yaml_value(v) for v in value])
        return seq
    if isinstance(value, Mapping):
        mapping = CommentedMap()
        for key, item in value.items():
            mapping[key] = yaml_value(item)
        return mapping
    return value


def plain(value: Any) -> Any:
    """Frontmatter value as plain JSON-ready Python (dates become ISO strings)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


class Note:
    """Frontmatter and body of one Markdown file.

    ``body`` is the Markdown after the frontmatter with ``\\n`` line endings.
    Read fields with :meth:`get`; change them with :meth:`set` and
    :meth:`delete`; :meth:`render` gives the file text back.
    """

    def __init__(
        self,
        frontmatter: Mapping[str, Any] | None = None,
        body: str = "",
        *,
        newline: str = "\n",
    ) -> None:
        self._fm: CommentedMap = CommentedMap()
        for key, value in (frontmatter or {}).items():
            _check_storable(key, value)
            self._fm[key] = yaml_value(value)
        self._body = body.replace("\r\n", "\n")
        self.newline = newline
        self.bom = False
        self._has_frontmatter = bool(frontmatter)
        self._raw_frontmatter: str | None = None
        self._frontmatter_error: str | None = None
        self._fm_closing = "---"
        self._fm_dirty = True
        self._body_dirty = True
        self._original: str | None = None

    # -- parsing -------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Note:
        """Parse file text. Invalid YAML is kept verbatim and reported by ``frontmatter_error``."""
        note = cls()
        note._original = text
        note._fm_dirty = note._body_dirty = False
        note.bom = text.startswith(_BOM)
        content = text[1:] if note.bom else text
        note.newline = detect_newline(content)
        content = content.replace("\r\n", "\n")
        opening = _OPEN.match(content)
        closing = _CLOSE.search(content, opening.end()) if opening else None
        if opening is None or closing is None:
            note._body = content
            note._has_frontmatter = False
            return note
        # A closing fence directly after the opening one is an empty frontmatter block.
        raw = content[opening.end() : closing.start()]
        after = content[closing.end() :]
        note._body = after[1:] if after.startswith("\n") else after
        note._has_frontmatter = True
        note._raw_frontmatter = raw
        note._fm_closing = content[closing.start() : closing.end()]
        loaded = _load_frontmatter(raw)
        if isinstance(loaded, str):
            note._frontmatter_error = loaded
        else:
            note._fm = copy.deepcopy(loaded)  # the note's own, to change as it likes
        return note

    # -- frontmatter ---------------------------------------------------------

    @property
    def frontmatter_error(self) -> str | None:
        """Why the frontmatter could not be read, or None when it is valid."""
        return self._frontmatter_error

    @property
    def has_frontmatter(self) -> bool:
        """Whether the note has a frontmatter block (possibly empty)."""
        return self._has_frontmatter

    @property
    def frontmatter(self) -> Mapping[str, Any]:
        """The parsed frontmatter (read-only view; use :meth:`set` to change it)."""
        return self._fm

    def field_names(self) -> Iterator[str]:
        """Frontmatter keys in file order."""
        return iter(str(k) for k in self._fm)

    def get(self, key: str, default: Any = None) -> Any:
        """One frontmatter value as plain Python (a date stays a date)."""
        value = self._fm.get(key, default)
        if isinstance(value, CommentedSeq):
            return list(value)
        if isinstance(value, str):
            return str(value)
        return value

    def _check_writable(self) -> None:
        if self._frontmatter_error is not None:
            raise InvalidInputError(
                f"The note's frontmatter is not valid YAML ({self._frontmatter_error}); "
                "fix it by hand before memvault edits its fields."
            )

    def set(self, key: str, value: Any) -> None:
        """Set one field, keeping every other key, its order and its comments.

        A new key is appended after the existing ones.
        """
        self._check_writable()
        _check_storable(key, value)
        current = self._fm.get(key, _MISSING)
        if current is not _MISSING and _same(current, value):
            return
        if isinstance(current, CommentedSeq) and isinstance(value, (list, tuple)):
            # Edit the list in place so its comments and flow/block style survive.
            current.clear()
            current.extend(yaml_value(v) for v in value)
        else:
            self._fm[key] = yaml_value(value)
        self._fm_dirty = True
        self._has_frontmatter = True

    def delete(self, key: str) -> None:
        """Remove one field if present."""
        self._check_writable()
        if key in self._fm:
            del self._fm[key]
            self._fm_dirty = True

    # -- body ----------------------------------------------------------------

    @property
    def body(self) -> str:
        """Markdown after the frontmatter, with ``\\n`` line endings."""
        return self._body

    @body.setter
    def body(self, value: str) -> None:
        value = value.replace("\r\n", "\n")
        if value != self._body:
            self._body = value
            self._body_dirty = True

    @property
    def frontmatter_text(self) -> str:
        """The frontmatter block's YAML as it will be written (without the fences)."""
        return self._frontmatter_text() if self._has_frontmatter else ""

    @property
    def body_offset(self) -> int:
        """Number of lines before the body starts (frontmatter and its fences)."""
        if not self._has_frontmatter:
            return 0
        return self._frontmatter_text().count("\n") + 2

    # -- rendering -----------------------------------------------------------

    def _frontmatter_text(self) -> str:
        if not self._fm_dirty and self._raw_frontmatter is not None:
            return self._raw_frontmatter
        if not self._fm:
            return ""
        stream = io.StringIO()
        _yaml(self._raw_frontmatter).dump(self._fm, stream)
        return stream.getvalue()

    @property
    def modified(self) -> bool:
        """Whether anything changed since the note was parsed."""
        return self._fm_dirty or self._body_dirty or self._original is None

    def render(self) -> str:
        """The file text: identical to the parsed text when nothing changed."""
        if not self.modified and self._original is not None:
            return self._original
        if self._has_frontmatter and (self._fm or self._raw_frontmatter is not None):
            text = f"---\n{self._frontmatter_text()}{self._fm_closing}\n{self._body}"
        else:
            text = self._body
        if self.newline != "\n":
            text = text.replace("\n", self.newline)
        return (_BOM if self.bom else "") + text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready frontmatter and body."""
        return {
            "frontmatter": plain(self._fm),
            "frontmatter_error": self._frontmatter_error,
            "body": self._body,
        }


_MISSING = object()


def _check_storable(key: str, value: Any) -> None:
    """Refuse a field value YAML would keep only as a ``\\uD800`` escape that no later
    reader can use (the edges refuse such text first; this is the last guard)."""
    found = first_unencodable(value)
    if found is not None:
        raise bad_text(str(key), flaw(found) or "a lone surrogate")


def _kind(value: Any) -> type:
    for base in (bool, str, datetime, date, int, float, Mapping, list, tuple):
        if isinstance(value, base):
            return tuple if base is list else base
    return type(value)


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same kind: "5" and 5 differ, a quoted and a plain string do not."""
    return _kind(a) is _kind(b) and plain(a) == plain(b)


def _describe_yaml_error(exc: YAMLError) -> str:
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        return f"{problem} at frontmatter line {mark.line + 1}"
    return str(problem)
