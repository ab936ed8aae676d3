"""Reading Obsidian Markdown: links, tags, aliases, headings, block ids, sections.

All extraction ignores code (fenced blocks and inline spans) and comments
(``%% ... %%`` and ``<!-- ... -->``), as Obsidian does, and reports 1-based
line numbers within the text it was given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from memvault.errors import InvalidInputError

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
_COMMENT = re.compile(r"%%.*?%%|<!--.*?-->", re.DOTALL)
_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
_MDLINK = re.compile(r"(!?)\[([^\]\n]*)\]\(<?([^)<>\n]+?)>?(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_TAG = re.compile(r"(?:(?<=[\s>])|^)#([^\s#!@$%^&*(),.?\":{}|<>\[\]`'+=;~\\]+)")
_BLOCK_ID = re.compile(r"(?:^|\s)\^([A-Za-z0-9-]+)[ \t]*$")
_URL_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True)
class Link:
    """One link in a note: ``[[target#subpath|alias]]``, an embed, or a Markdown link."""

    target: str  # note name or path as written, without '#...' and '|...'; "" = same note
    subpath: str | None  # heading text, or '^blockid'
    alias: str | None
    embed: bool
    line: int
    kind: str = "wikilink"  # wikilink | markdown

    @property
    def is_block_ref(self) -> bool:
        """Whether the link points at a block (``#^id``)."""
        return bool(self.subpath and self.subpath.startswith("^"))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "target": self.target,
            "subpath": self.subpath,
            "alias": self.alias,
            "embed": self.embed,
            "line": self.line,
            "kind": self.kind,
        }


@dataclass(frozen=True)
class Heading:
    """An ATX heading."""

    level: int
    text: str
    line: int


@dataclass(frozen=True)
class BlockId:
    """An Obsidian block id (``^id`` at the end of a line)."""

    id: str
    line: int


def mask_code(text: str) -> str:
    """Blank out code and comments, keeping every newline and character offset.

    The result has the same length and line structure as ``text``, so
    positions found in it are positions in the original.
    """
    lines = text.split("\n")
    fence: str | None = None
    for i, line in enumerate(lines):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            lines[i] = " " * len(line)
        elif fence is not None:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            lines[i] = " " * len(line)
    masked = "\n".join(lines)

    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    masked = _COMMENT.sub(blank, masked)
    return _INLINE_CODE.sub(blank, masked)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def extract_links(text: str) -> list[Link]:
    """Wikilinks, embeds and internal Markdown links outside code, in order."""
    masked = mask_code(text)
    found: list[tuple[int, Link]] = []
    for m in _WIKILINK.finditer(masked):
        inner = text[m.start(2) : m.end(2)].replace("\\|", "|")
        target_part, _, alias = inner.partition("|")
        target, _, subpath = target_part.partition("#")
        found.append(
            (
                m.start(),
                Link(
                    target=target.strip(),
                    subpath=subpath.strip() or None,
                    alias=alias.strip() or None,
                    embed=m.group(1) == "!",
                    line=_line_of(text, m.start()),
                ),
            )
        )
    for m in _MDLINK.finditer(masked):
        href = text[m.start(3) : m.end(3)].strip()
        if not href or href == "#" or _URL_SCHEME.match(href):
            continue
        target, _, subpath = unquote(href).partition("#")
        found.append(
            (
                m.start(),
                Link(
                    target=target.strip(),
                    subpath=subpath.strip() or None,
                    alias=text[m.start(2) : m.end(2)].strip() or None,
                    embed=m.group(1) == "!",
                    line=_line_of(text, m.start()),
                    kind="markdown",
                ),
            )
        )
    found.sort(key=lambda pair: pair[0])
    return [link for _, link in found]


def rewrite_wikilinks(text: str, retarget: Callable[[Link], str | None]) -> str:
    """Rewrite the target of wikilinks outside code, keeping subpath, alias and embed.

    ``retarget`` gets each link and returns its new target, or None to keep it.
    """
    masked = mask_code(text)
    out: list[str] = []
    last = 0
    for m in _WIKILINK.finditer(masked):
        inner = text[m.start(2) : m.end(2)]
        target_part, pipe, alias = inner.replace("\\|", "|").partition("|")
        target, hash_, subpath = target_part.partition("#")
        link = Link(
            target.strip(), subpath.strip() or None, alias.strip() or None, m.group(1) == "!", 0
        )
        new_target = retarget(link)
        if new_target is None or new_target == link.target:
            continue
        escaped_pipe = "\\|" if "\\|" in inner else "|"
        rebuilt = (
            new_target
            + (f"#{subpath}" if hash_ else "")
            + (f"{escaped_pipe}{alias}" if pipe else "")
        )
        out.append(text[last : m.start(2)])
        out.append(rebuilt)
        last = m.end(2)
    out.append(text[last:])
    return "".join(out)


def _as_list(value: Any) -> list[str]:
    """A frontmatter list field given as a YAML list or a comma/space separated string."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in re.split(r"[,\s]+", value) if v]
    if isinstance(value, Iterable):
        return [str(v) for v in value if v is not None and str(v).strip()]
    return [str(value)]


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.casefold()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _valid_tag(tag: str) -> bool:
    return bool(tag) and not tag.replace("/", "").replace("-", "").replace("_", "").isdigit()


_TAG_TEXT = re.compile(r"^[^\s#!@$%^&*(),.?\":{}|<>\[\]`'+=;~\\]+$")


def normalize_tag(tag: str) -> str:
    """A tag as memvault stores it: no leading '#', spaces become '-'; invalid tags are refused."""
    clean = re.sub(r"\s+", "-", str(tag).strip().lstrip("#").strip())
    if not clean or not _TAG_TEXT.match(clean) or not _valid_tag(clean):
        raise InvalidInputError(
            f"{tag!r} is not a valid tag; use letters, digits, '-', '_' and '/', "
            "with at least one character that is not a digit."
        )
    return clean


def frontmatter_tags(frontmatter: Mapping[str, Any]) -> list[str]:
    """Tags from the ``tags`` (or ``tag``) field, without a leading '#'."""
    raw = frontmatter.get("tags", frontmatter.get("tag"))
    return _dedupe(t.lstrip("#") for t in _as_list(raw) if _valid_tag(t.lstrip("#")))


def inline_tags(body: str) -> list[str]:
    """``#tags`` in the body, outside code, comments, links and heading lines."""
    masked = _WIKILINK.sub(lambda m: " " * len(m.group(0)), mask_code(body))
    tags: list[str] = []
    for line in masked.split("\n"):
        if _HEADING.match(line):
            continue
        for m in _TAG.finditer(line):
            tag = m.group(1).rstrip("/-")
            if _valid_tag(tag):
                tags.append(tag)
    return _dedupe(tags)


def note_tags(frontmatter: Mapping[str, Any], body: str) -> list[str]:
    """All tags of a note: frontmatter first, then inline, de-duplicated case-insensitively."""
    return _dedupe([*frontmatter_tags(frontmatter), *inline_tags(body)])


def aliases(frontmatter: Mapping[str, Any]) -> list[str]:
    """Alternative names from ``aliases`` (or ``alias``), as a list or a comma-separated string."""
    raw = frontmatter.get("aliases", frontmatter.get("alias"))
    if isinstance(raw, str):
        return _dedupe(a.strip() for a in raw.split(",") if a.strip())
    return _dedupe(a.strip() for a in _as_list(raw))


def headings(body: str) -> list[Heading]:
    """ATX headings outside code blocks."""
    masked = mask_code(body)
    out: list[Heading] = []
    original = body.split("\n")
    for i, line in enumerate(masked.split("\n")):
        if _HEADING.match(line):
            real = _HEADING.match(original[i])
            if real:
                out.append(Heading(len(real.group(1)), real.group(2).strip(), i + 1))
    return out


def block_ids(body: str) -> list[BlockId]:
    """Block ids (``^id`` ending a line) outside code blocks."""
    masked = mask_code(body)
    out: list[BlockId] = []
    for i, line in enumerate(masked.split("\n")):
        m = _BLOCK_ID.search(line)
        if m:
            out.append(BlockId(m.group(1), i + 1))
    return out


def title_of(body: str, fallback: str) -> str:
    """The first level-1 heading, else ``fallback`` (the file name)."""
    for heading in headings(body):
        if heading.level == 1:
            return heading.text
    return fallback


# -- sections ---------------------------------------------------------------


def section_range(body: str, heading: str) -> tuple[int, int, int] | None:
    """Locate a section by heading text (case-insensitive).

    Returns ``(heading_index, content_start, content_end)`` as 0-based line
    indexes into ``body.split("\\n")``; the section ends before the next
    heading of the same or a higher level.
    """
    wanted = heading.strip().casefold()
    found = headings(body)
    for n, h in enumerate(found):
        if h.text.casefold() != wanted:
            continue
        end = len(body.split("\n"))
        for later in found[n + 1 :]:
            if later.level <= h.level:
                end = later.line - 1
                break
        return h.line - 1, h.line, end
    return None


def section_text(body: str, heading: str) -> str | None:
    """The text under a heading (without the heading line), trimmed; None if absent."""
    where = section_range(body, heading)
    if where is None:
        return None
    lines = body.split("\n")
    return "\n".join(lines[where[1] : where[2]]).strip("\n")


def append_to_section(body: str, heading: str, text: str, *, level: int = 2) -> str:
    """Add ``text`` as the last line(s) of a section, creating the section if needed.

    The text goes after the section's last non-blank line, so entries stay in
    the order they were written and the blank line before the next heading
    is kept.
    """
    lines = body.split("\n")
    new_lines = text.rstrip("\n").split("\n")
    where = section_range(body, heading)
    if where is None:
        while lines and lines[-1].strip() == "":
            lines.pop()
        prefix = [*lines, ""] if lines else []
        return "\n".join([*prefix, f"{'#' * level} {heading.strip()}", *new_lines, ""])
    _, start, end = where
    insert_at = start
    for i in range(end - 1, start - 1, -1):
        if lines[i].strip():
            insert_at = i + 1
            break
    # Placeholder bullets from templates ("- " or "- [ ] ") give way to real entries.
    if insert_at > start and lines[insert_at - 1].strip() in ("-", "- [ ]", "*"):
        insert_at -= 1
        del lines[insert_at]
    lines[insert_at:insert_at] = new_lines
    result = "\n".join(lines)
    if not result.endswith("\n"):
        result += "\n"
    return result


def replace_section(body: str, heading: str, text: str, *, level: int = 2) -> str:
    """Replace a section's content (keeping its heading); append the section if missing."""
    where = section_range(body, heading)
    if where is None:
        return append_to_section(body, heading, text, level=level)
    lines = body.split("\n")
    _, start, end = where
    content = text.strip("\n").split("\n") if text.strip() else []
    trailing = [""] if end < len(lines) else []
    lines[start:end] = [*content, *trailing]
    result = "\n".join(lines)
    return result if result.endswith("\n") else result + "\n"
