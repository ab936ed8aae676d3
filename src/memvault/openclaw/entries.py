"""Hand-written Markdown read leniently into entries, and what an entry's words say.

An OpenClaw workspace's files are written by hand and by the agent, in no fixed
shape: :func:`parse_markdown` reads any of them into *entries* (a bullet with its
nested bullets, or a paragraph), each with the headings it stands under and its
checkbox; frontmatter, code blocks, comments and rules are left out, and a table is a
problem noted, never a crash. The rest reads an entry: the memvault category a
heading names, whether a learning is a correction, an ``[importance: 0.9]`` marker,
a TODO item's status. :mod:`memvault.openclaw.importers` turns entries into memories,
tasks and journal entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memvault.vocabulary import CATEGORIES

# Heading words (slugged, singular) -> memvault category, beyond the categories' own names.
_CATEGORY_ALIASES = {
    "people": "person",
    "contact": "person",
    "relationship": "person",
    "decisions-made": "decision",
    "lesson": "pattern",
    "lessons-learned": "pattern",
    "learning": "pattern",
    "known-issue": "issue",
    "problem": "issue",
    "background": "context",
    "about": "context",
    "like": "preference",
    "dislike": "preference",
}
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_BULLET = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,3}[.)])[ \t]+(.*)$")
_CHECKBOX = re.compile(r"^\[(.)\][ \t]+(.*)$")
_RULE = re.compile(r"^[ \t]*([-*_])[ \t]*(?:\1[ \t]*){2,}$")
_IMPORTANCE = re.compile(
    r"[ \t]*[\[(][ \t]*importance[ \t]*(?:::?|=)[ \t]*([0-9]*\.?[0-9]+)[ \t]*[\])]", re.I
)
_CORRECTION = re.compile(
    r"\b(?:don'?t|do not|never|instead|wrong|correction|corrected)\b|\bnot\b.+\bbut\b", re.I
)
_DONE_HEADINGS = frozenset({"done", "completed", "complete", "finished", "archive", "archived"})


@dataclass
class Entry:
    """A bullet (with its nested bullets as ``children``) or a paragraph of a file."""

    text: str
    line: int
    heading: str | None = None  # the nearest heading of level 2 or deeper
    section: str | None = None  # the nearest level-2 heading
    marker: str | None = None  # a checkbox's character: " ", "x", "/" ...
    children: list[str] = field(default_factory=list)
    bullet: bool = True

    def nested(self) -> list[str]:
        """The nested bullets' texts, a checkbox taken off each."""
        return [_CHECKBOX.sub(r"\2", c).strip() for c in self.children if c.strip()]

    def joined(self) -> str:
        """The entry as one sentence: nested bullets follow their parent after a colon."""
        children = self.nested()
        if not children:
            return self.text
        return f"{self.text.rstrip(' :')}: {'; '.join(children)}"


@dataclass
class Parsed:
    """A file's entries and the lines that could not be read."""

    entries: list[Entry]
    problems: list[str]


def parse_markdown(text: str, name: str) -> Parsed:
    """Read hand-written Markdown into entries, leniently.

    Frontmatter, code blocks, HTML comments, rules and the ``#`` title are
    left out; a table is reported as a problem (its rows are not entries).
    """
    entries: list[Entry] = []
    problems: list[str] = []
    lines = text.splitlines()
    current: Entry | None = None  # the open bullet, which nested bullets join
    indent = 0
    paragraph: Entry | None = None
    section: str | None = None
    heading: str | None = None
    fence: str | None = None
    comment = False
    table_at: int | None = None
    start = 0
    if lines and lines[0].strip() == "---":
        closing = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), 0)
        start = closing + 1 if closing else 0

    def close_table(number: int) -> None:
        nonlocal table_at
        if table_at is not None:
            where = (
                f"line {table_at}" if number - 1 == table_at else f"lines {table_at}-{number - 1}"
            )
            problems.append(f"{name} {where}: a table is not imported; write its rows as bullets.")
            table_at = None

    for number, raw in enumerate(lines[start:], start=start + 1):
        line = raw.expandtabs(4).rstrip()
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        if stripped.startswith("|"):
            table_at = number if table_at is None else table_at
            current = paragraph = None
            continue
        close_table(number)
        if comment:
            comment = "-->" not in stripped
            continue
        if stripped.startswith(("```", "~~~")):
            fence, current, paragraph = stripped[:3], None, None
            continue
        if stripped.startswith("<!--"):
            comment = "-->" not in stripped
            continue
        if not stripped:
            paragraph = None
            continue
        if _RULE.match(line):
            current = paragraph = None
            continue
        found = _HEADING.match(stripped)
        if found and not line.startswith(" "):
            level, title = len(found.group(1)), found.group(2).strip()
            if level == 2:
                section = heading = title
            elif level > 2:
                heading = title
            current = paragraph = None
            continue
        bullet = _BULLET.match(line)
        if bullet:
            depth, content = len(bullet.group(1)), bullet.group(2).strip()
            paragraph = None
            if current is not None and depth > indent:
                current.children.append(content)
                continue
            checkbox = _CHECKBOX.match(content)
            marker = checkbox.group(1).lower() if checkbox else None
            body = checkbox.group(2).strip() if checkbox else content
            current = Entry(body, number, heading, section, marker)
            indent = depth
            entries.append(current)
            continue
        text = stripped.lstrip(">").strip() if stripped.startswith(">") else stripped
        if current is not None and line.startswith(" "):
            if current.children:  # a wrapped nested bullet
                current.children[-1] += " " + text
            else:
                current.text += " " + text
            continue
        current = None
        if paragraph is not None:
            paragraph.text += " " + text
            continue
        paragraph = Entry(text, number, heading, section, bullet=False)
        entries.append(paragraph)
    close_table(len(lines) + 1)
    kept = [e for e in entries if e.text.strip() or e.children]
    return Parsed(kept, problems)


def category_for(heading: str | None) -> str | None:
    """The memvault category a MEMORY.md heading names, or None if it names none."""
    if not heading:
        return None
    slug = slug_of(heading)
    for candidate in (slug, slug.removesuffix("s"), slug.removesuffix("es")):
        if candidate in CATEGORIES:
            return candidate
        if candidate in _CATEGORY_ALIASES:
            return _CATEGORY_ALIASES[candidate]
    titles = {title.casefold(): name for name, title in CATEGORIES.items()}
    return titles.get(heading.strip().casefold())


def slug_of(text: str) -> str:
    """``Things I Like!`` -> ``things-i-like``."""
    return re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-")


def is_correction(text: str) -> bool:
    """Whether a learning reads as a correction ("don't ...", "never ...", "not X but Y")."""
    return _CORRECTION.search(text.replace("\u2019", "'")) is not None


def importance_marker(text: str) -> tuple[str, float | None]:
    """The text without an ``[importance: 0.9]`` marker, and the marker's value (clamped)."""
    found = _IMPORTANCE.search(text)
    if found is None:
        return text, None
    clean = " ".join((text[: found.start()] + " " + text[found.end() :]).split())
    return clean, min(1.0, max(0.0, float(found.group(1))))


def task_status(entry: Entry) -> str:
    """A TODO entry's task status: its checkbox's, else done under a heading such as Done."""
    if entry.marker is None:
        done = slug_of(entry.section or "").replace("-", " ") in _DONE_HEADINGS
        return "done" if done else "todo"
    return {"x": "done", "-": "cancelled", "~": "cancelled", "/": "in_progress"}.get(
        entry.marker, "todo"
    )
