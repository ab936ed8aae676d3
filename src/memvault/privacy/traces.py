"""What identifies forgotten memories in the vault's other text, and how that text is
scrubbed of them.

The method, stated before the code:

1. *A trace.* The memories being forgotten leave three kinds of marks in other
   text: their ids (``^m-3f9a1c2b`` in a block reference, ``m-3f9a1c2b`` in a
   reply), copies of their text (whole, or cut short with an ellipsis, as the
   journal, the contact log and the jobs cut long lines), and their
   *distinctive words*: the words of a memory that no other memory uses
   (function words, words shorter than four letters and numbers shorter than
   three digits left out, and so are the names of the people and projects the
   owner keeps notes on: forgetting a fact about Ada does not forget Ada). A
   model that rewrote a memory in its own words still used those words. When
   a person is being forgotten, their names count as distinctive words.
2. *Two strengths.* Text a job wrote (a block between memvault's markers: an
   insight, an entity note's mentions, MEMORY.md's living summary, a day's
   summary) is derived: a line in it goes when it cites, copies or names the
   memory, and a sentence of prose goes alone when the rest of its paragraph
   does not. Text a person or a conversation wrote (a chat message, a journal
   entry, a contact's interaction line) goes only when it cites or copies the
   memory, so a message that merely shares a word is kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from memvault.index.query import STOPWORDS

MIN_WORD = 4  # letters a distinctive word has at least
MIN_NUMBER = 3  # digits a distinctive number has at least
PREFIX_FROM = 5  # a word this long also matches its longer forms ("zorblax" in "zorblaxes")
COPY_HEAD = 24  # characters of a memory a line cut short must hold to count as its copy
ELLIPSES = ("…", "...")

_WORD = re.compile(r"[^\W_]+")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+")
_HEADING = re.compile(r"^[ \t]*#{1,6}[ \t]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_START = re.compile(r"^[ \t]*<!--[ \t]*memvault:([\w-]+)[ \t]*-->[ \t]*$")
_END = re.compile(r"^[ \t]*<!--[ \t]*/memvault:([\w-]+)[ \t]*-->[ \t]*$")

Matches = Callable[[str], bool]


def normal(text: str) -> str:
    """``text`` as lines are compared: one line, single spaces, case folded."""
    return " ".join(text.split()).casefold()


def words_of(text: str) -> set[str]:
    """The words of ``text``, case folded."""
    return {w.casefold() for w in _WORD.findall(text)}


def distinctive_words(text: str, others: Iterable[str], kept_names: Iterable[str] = ()) -> set[str]:
    """The words of ``text`` that mark it: used by no text of ``others`` and no name of
    ``kept_names`` (see the module docstring)."""
    found = {
        w
        for w in words_of(text)
        if (w.isdigit() and len(w) >= MIN_NUMBER)
        or (not w.isdigit() and len(w) >= MIN_WORD and w not in STOPWORDS)
    }
    for name in kept_names:
        found -= words_of(name)
    for other in others:
        if not found:
            break
        found -= words_of(other)
    return found


@dataclass
class Trace:
    """The marks of what is being forgotten: ids, texts and distinctive words."""

    ids: frozenset[str]
    texts: tuple[str, ...]
    words: frozenset[str]
    _ids: re.Pattern[str] | None = field(init=False, repr=False)
    _words: re.Pattern[str] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.texts = tuple(t for t in (normal(x) for x in self.texts) if t)
        ids = sorted(self.ids, key=len, reverse=True)
        self._ids = (
            re.compile(r"(?<![\w-])\^?(?:" + "|".join(map(re.escape, ids)) + r")(?![\w-])")
            if ids
            else None
        )
        alternatives = [
            re.escape(w) + ("" if len(w) >= PREFIX_FROM and not w.isdigit() else r"(?!\w)")
            for w in sorted(self.words, key=len, reverse=True)
        ]
        self._words = (
            re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + ")", re.IGNORECASE)
            if alternatives
            else None
        )

    @property
    def empty(self) -> bool:
        """Whether there is nothing to look for."""
        return not (self.ids or self.texts or self.words)

    def cites(self, line: str) -> bool:
        """Whether ``line`` names a forgotten memory's id (a block reference, a reply)."""
        return self._ids is not None and self._ids.search(line) is not None

    def copies(self, line: str) -> bool:
        """Whether ``line`` holds a forgotten memory's text, whole or cut short."""
        flat = normal(line)
        for text in self.texts:
            if text in flat:
                return True
            if len(text) <= COPY_HEAD:
                continue
            at = flat.find(text[:COPY_HEAD])
            while at >= 0:
                rest = flat[at:]
                cut = min((i for i in (rest.find(e) for e in ELLIPSES) if i > 0), default=-1)
                if cut >= COPY_HEAD and text.startswith(rest[:cut].rstrip(" ,;:.")):
                    return True
                at = flat.find(text[:COPY_HEAD], at + 1)
        return False

    def names(self, line: str) -> bool:
        """Whether ``line`` uses one of the distinctive words."""
        return self._words is not None and self._words.search(line) is not None

    def exact(self, line: str) -> bool:
        """The rule for what people and conversations wrote: cited or copied."""
        return self.cites(line) or self.copies(line)

    def strong(self, line: str) -> bool:
        """The rule for what jobs derived: cited, copied or named."""
        return self.exact(line) or self.names(line)

    def redact(self, text: str) -> str:
        """``text`` with every id, copy and distinctive word replaced by ``[forgotten]``
        (for logs that must keep their shape, such as a job run's output)."""
        out = text
        if self._ids is not None:
            out = self._ids.sub("[forgotten]", out)
        if self._words is not None:
            out = re.sub(self._words.pattern + r"\w*", "[forgotten]", out, flags=re.IGNORECASE)
        return out


def is_list_item(line: str) -> bool:
    """Whether ``line`` is a Markdown list item."""
    return _LIST_ITEM.match(line) is not None


def _without_sentences(line: str, matches: Matches) -> str | None:
    """A prose line without its sentences that match; None when none is left."""
    ending = line[len(line.rstrip("\r\n")) :]
    body = line[: len(line) - len(ending)]
    sentences = _SENTENCE_END.split(body.strip())
    kept = [s for s in sentences if not matches(s)]
    if len(kept) == len(sentences):
        return line
    if not kept:
        return None
    indent = body[: len(body) - len(body.lstrip())]
    return indent + " ".join(kept) + ending


def scrub_derived(lines: Sequence[str], matches: Matches) -> tuple[list[str], list[str]]:
    """Lines a job wrote, without what ``matches``: a list item goes whole, a prose line
    loses its matching sentences; headings, labels and markers stay. Returns the lines
    kept and those removed (or cut)."""
    kept: list[str] = []
    removed: list[str] = []
    for line in lines:
        stripped = line.strip()
        if not stripped or _HEADING.match(line) or _START.match(line) or _END.match(line):
            kept.append(line)
            continue
        if is_list_item(line):
            if matches(line):
                removed.append(stripped)
            else:
                kept.append(line)
            continue
        left = _without_sentences(line, matches)
        if left is None:
            removed.append(stripped)
        elif left != line:
            removed.append(stripped)
            kept.append(left)
        else:
            kept.append(line)
    return kept, removed


@dataclass(frozen=True)
class Block:
    """A block between memvault's markers: its name and the lines inside (0-based, the
    markers' own lines excluded)."""

    name: str
    first: int
    last: int  # one past the last line inside


def blocks(lines: Sequence[str]) -> list[Block]:
    """The well-formed memvault blocks of a note's lines (a start marker, then its own end
    marker); a broken pair is left alone, as the jobs leave it."""
    found: list[Block] = []
    open_at: tuple[str, int] | None = None
    for number, line in enumerate(lines):
        start = _START.match(line)
        if start is not None:
            open_at = (start.group(1), number)
            continue
        end = _END.match(line)
        if end is not None and open_at is not None and end.group(1) == open_at[0]:
            found.append(Block(open_at[0], open_at[1] + 1, number))
            open_at = None
    return found


def scrub_blocks(
    text: str, matches: Matches, only: Callable[[str], bool] | None = None
) -> tuple[str, list[str]]:
    """``text`` with every memvault block (or those whose name ``only`` accepts) scrubbed
    as derived text; every byte outside the blocks stays. Returns the text and what was
    removed."""
    lines = text.splitlines(keepends=True)
    removed: list[str] = []
    for block in reversed(blocks(lines)):
        if only is not None and not only(block.name):
            continue
        inside = lines[block.first : block.last]
        kept, gone = scrub_derived(inside, matches)
        if gone:
            lines[block.first : block.last] = kept
            removed = gone + removed
    return "".join(lines), removed


def scrub_items(
    text: str,
    matches: Matches,
    within: Callable[[int, list[str]], bool] | None = None,
    *,
    sentences: bool = False,
) -> tuple[str, list[str]]:
    """``text`` without the list items ``matches`` accepts, outside memvault's blocks (and,
    with ``within``, only on lines it accepts: ``within(number, lines)``). With
    ``sentences``, an item loses only its matching sentences (a session's line keeps its
    time when its summary goes)."""
    lines = text.splitlines(keepends=True)
    inside = {n for b in blocks(lines) for n in range(b.first - 1, b.last + 1)}
    kept: list[str] = []
    removed: list[str] = []
    for number, line in enumerate(lines):
        if (
            number not in inside
            and is_list_item(line)
            and (within is None or within(number, lines))
            and matches(line)
        ):
            removed.append(line.strip())
            left = _without_sentences(line, matches) if sentences else None
            if left is not None and _LIST_ITEM.sub("", left).strip():
                kept.append(left)
            continue
        kept.append(line)
    return "".join(kept), removed


def section_of(lines: Sequence[str], number: int) -> str | None:
    """The title of the ``##``-or-deeper heading line ``number`` sits under (None above
    the first one)."""
    for index in range(number, -1, -1):
        heading = re.match(r"^[ \t]*#{2,6}[ \t]+(.*?)[ \t#]*$", lines[index])
        if heading is not None:
            return heading.group(1).strip()
    return None


def prose_of(text: str, matches: Matches) -> str | None:
    """``text`` (a summary, a reply) without its sentences that match; None when nothing
    is left, ``text`` itself when nothing matched."""
    paragraphs = text.split("\n")
    out: list[str] = []
    changed = False
    for paragraph in paragraphs:
        left = _without_sentences(paragraph, matches) if paragraph.strip() else paragraph
        if left != paragraph:
            changed = True
        if left is not None:
            out.append(left)
    if not changed:
        return text
    joined = "\n".join(out).strip()
    return joined or None
