"""A chat message as plain sentences: code, URLs and Markdown syntax stripped, headings and
tables left out, wrapped lines joined, and abbreviations ("e.g.", "Dr. Smith") and
numbers ("3.5") kept whole.

Apart from the summary (:mod:`memvault.memory.summary`) because reading Markdown into
sentences is a question of its own, asked before anything is scored; it uses the
standard library only, so the same message always gives the same sentences.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# Titles before a name ("Dr. Smith"): no sentence ends after them, and the summary's
# names keep them.
TITLES = frozenset("dr mr mrs ms prof st mt".split())
# Never end a sentence after these.
_ABBREVIATIONS = TITLES | frozenset("e.g i.e cf vs approx fig dept".split())
# End a sentence after these only when a capital follows.
_ENDING_ABBREVIATIONS = frozenset("etc inc ltd co jr sr a.m p.m no".split())
_OPENERS = "\"'([\u201c\u2018"
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"`+([^`\n]*)`+")
# Character classes leave out their own opening bracket, so that a long run of
# unclosed brackets costs linear time, not quadratic.
_IMAGE_OR_LINK = re.compile(r"!?\[([^\[\]\n]*)\](?:\([^()\n]*\)|\[[^\[\]\n]*\])")
_AUTOLINK = re.compile(r"<(?:https?|ftp|mailto):[^<>\s]*>", re.IGNORECASE)
_URL = re.compile(r"\b(?:(?:https?|ftp)://|www\.)\S+", re.IGNORECASE)
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>\n]*>")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s+|$)")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_BULLET = re.compile(r"^\s*(?:[-*+•‣◦]|\d{1,3}[.)])\s+")
_EMPHASIS = re.compile(r"\*\*|__|~~|(?<![\w*])[*_](?=\S)|(?<=\S)[*_](?![\w*])")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])")
_EMPTY_BRACKETS = re.compile(r"\(\s*\)|\[\s*\]")
# Only where a run of end marks starts, so "....." is scanned once.
_BOUNDARY = re.compile(r"(?<![.!?…])([.!?…]+)([\"'\u201d\u2019)\]]*)\s+")


def plain_segments(text: str) -> list[str]:
    """Plain-text runs of a message: no code, URLs or Markdown syntax. Headings and
    tables are structure, not sentences, and are left out. A bullet or a blank line
    starts a new run; a wrapped line continues the one before."""
    segments: list[str] = []
    current: list[str] = []
    in_fence = False
    fresh = True  # the next line starts a new run
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if _FENCE.match(raw):
            in_fence = not in_fence
            fresh = True
            continue
        if in_fence:
            continue
        line = _QUOTE.sub("", raw)
        if _is_rule(line) or _HEADING.match(line) or line.count("|") >= 2:
            fresh = True
            continue
        line, bullets = _BULLET.subn("", line)
        line = _inline(line).strip()
        if not line:
            fresh = True
            continue
        joins = (
            current
            and not fresh
            and not bullets
            and line[0].islower()
            and current[-1][-1] not in ".!?…:"
        )
        if joins:
            current.append(line)
        else:
            if current:
                segments.append(" ".join(current))
            current = [line]
        fresh = False
    if current:
        segments.append(" ".join(current))
    return segments


def _inline(line: str) -> str:
    line = _INLINE_CODE.sub(r"\1", line)
    line = _IMAGE_OR_LINK.sub(r"\1", line)
    line = _AUTOLINK.sub("", line)
    line = _URL.sub("", line)
    line = _HTML_TAG.sub(" ", line)
    line = _EMPHASIS.sub("", line)
    line = _EMPTY_BRACKETS.sub("", line)
    return _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(line.split()))


def split_sentences(segment: str) -> Iterator[str]:
    """Sentences of a run (one of :func:`plain_segments`), keeping "e.g.", "Dr. Smith" and
    "3.5" whole."""
    start = 0
    for match in _BOUNDARY.finditer(segment):
        following = segment[match.end() : match.end() + 1]
        # Abbreviations are short: the last few characters tell.
        before = segment[max(start, match.start() - 12) : match.start()]
        if match.group(1) == "." and not _ends_sentence(before, following):
            continue
        yield from _kept(segment[start : match.end()])
        start = match.end()
    yield from _kept(segment[start:])


def _ends_sentence(before: str, following: str) -> bool:
    words = before.rsplit(None, 1)
    if not words:
        return True
    token = words[-1].lstrip(_OPENERS).lower()
    if token in _ABBREVIATIONS:
        return False
    if token in _ENDING_ABBREVIATIONS:
        return following.isupper()
    # An initial: "J. Smith".
    return not (len(token) == 1 and token.isalpha() and following.isupper())


def _is_rule(line: str) -> bool:
    """A thematic break (``---``, ``***``) or a table's header separator (``|---|:--|``)."""
    marks = set(line) - set(" \t")
    if len(marks) == 1 and marks <= set("-*_"):
        return line.count(next(iter(marks))) >= 3
    return bool(marks) and marks <= set("|:-") and "---" in line


def _kept(text: str) -> Iterator[str]:
    text = text.strip()
    if any(c.isalpha() for c in text):
        yield text
