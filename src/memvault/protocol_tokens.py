"""Protocol tokens: words the agent says to memvault that must never reach a person.

The heartbeat asks the model to answer exactly ``HEARTBEAT_OK`` when nothing
needs the owner; ``NO_REPLY`` says a message needs no answer. Models wrap
such a word in Markdown (``**HEARTBEAT_OK**``, `` `HEARTBEAT_OK` ``,
``_HEARTBEAT_OK_``), quote it (``> HEARTBEAT_OK``), fence it, end it with a
full stop, tack it on after a real sentence, or stream it in pieces
(``HEART`` + ``BEAT_OK``); OpenClaw users saw the token leak through the
streamed, the final and the tool-sent path in turn. So every outbound path
passes its text through this one filter.

Only the token as written, with its underscore, counts (in any case):
``heartbeat ok`` in prose is a person's words and stays; ``MY_HEARTBEAT_OK``
or ``HEARTBEAT_OKAY`` are other words. A token is removed with the Markdown,
invisible characters and trailing punctuation around it; a line left with
nothing but markup is dropped; a message left with nothing but punctuation
and markup becomes ``""`` (send nothing). Text without a token is returned
unchanged.
"""

from __future__ import annotations

import re

PROTOCOL_TOKENS = ("HEARTBEAT_OK", "NO_REPLY")

_ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
# Markdown emphasis and code marks, and invisible characters, hugging a token.
_WRAP = f"[*_~`{_ZERO_WIDTH}]"
_SPACE = "[ \t\u00a0\u202f]"
_PUNCT = "[.!?…,;:]"
_ALTERNATIVES = "|".join(re.escape(token) for token in PROTOCOL_TOKENS)
# Spaces before, marks around, punctuation after; never a part of a longer word.
_TOKEN = re.compile(
    rf"{_SPACE}*(?<!\w){_WRAP}*(?:{_ALTERNATIVES}){_WRAP}*(?!\w)(?P<punct>{_PUNCT}*)",
    re.IGNORECASE,
)
# What is left of a line or message that held only tokens: markup, punctuation, space.
_QUOTES_DASHES = "\u201c\u201d\u2018\u2019\u00ab\u00bb\u2013\u2014\u2022\u00b7"
_RESIDUE = re.compile(rf"[\s{_ZERO_WIDTH}{_QUOTES_DASHES}>#\-+*_~`.!?…,;:()\[\]{{}}\"'|/\\]*")
_EMPTY_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(?:[ \t]*\n)*[ \t]*\1[ \t]*$", re.MULTILINE)
_BLANK_LINES = re.compile(r"\n{3,}")
_LEADING_BLANK = re.compile(r"\A(?:[ \t]*\n)+")
_SENTENCE_END = frozenset(".!?…")


def _is_residue(text: str) -> bool:
    return _RESIDUE.fullmatch(text) is not None


def _remove(text: str, start: int = 0) -> str:
    """``text`` from ``start`` on without its tokens; what comes before ``start`` is
    context only (the character before a token decides whether it is a word's end)."""
    out: list[str] = []
    last = start
    for found in _TOKEN.finditer(text, start):
        before = text[last : found.start()]
        out.append(before)
        # "... expires Friday HEARTBEAT_OK." keeps its full stop: "... expires Friday."
        punct = found.group("punct")
        kept = "".join(out).rstrip() or text[:start].rstrip()
        if punct and punct[0] in _SENTENCE_END and kept and (kept[-1].isalnum()):
            out.append(punct[0])
        last = found.end()
    out.append(text[last:])
    return "".join(out)


def contains_protocol_token(text: str) -> bool:
    """Whether ``text`` holds a protocol token anywhere."""
    return _TOKEN.search(text) is not None


def strip_protocol_tokens(text: str) -> str:
    """``text`` without protocol tokens, tidied; ``""`` when nothing else was in it.

    Text without a token comes back unchanged.
    """
    if not contains_protocol_token(text):
        return text
    lines = []
    for line in text.split("\n"):
        cleaned = _remove(line)
        if cleaned == line:
            lines.append(line)
            continue
        if _is_residue(cleaned):
            continue  # the line held a token and markup only ("> HEARTBEAT_OK")
        indent = line[: len(line) - len(line.lstrip())]
        lines.append(indent + cleaned.strip())
    result = _EMPTY_FENCE.sub("", "\n".join(lines))
    result = _LEADING_BLANK.sub("", _BLANK_LINES.sub("\n\n", result)).rstrip()
    return "" if _is_residue(result) else result


def is_only_protocol(text: str) -> bool:
    """Whether ``text`` is a protocol token and nothing a person should read."""
    return contains_protocol_token(text) and strip_protocol_tokens(text) == ""


# A stream's end that may still become a token: space and marks, then the start of a
# token (or a whole one, which punctuation or more letters may yet follow).
_PREFIXES = sorted(
    {re.escape(token[:n]) for token in PROTOCOL_TOKENS for n in range(1, len(token) + 1)},
    key=len,
    reverse=True,
)
_MAYBE_TOKEN = re.compile(
    rf"[\s>{_ZERO_WIDTH}*_~`]*(?:(?<!\w)(?:{'|'.join(_PREFIXES)}){_WRAP}*{_PUNCT}*)?\Z",
    re.IGNORECASE,
)


class StreamFilter:
    """Removes protocol tokens from text that arrives in pieces.

    :meth:`feed` returns what may be shown now; it holds back an end that may
    still turn into a token (``HEART``, then ``BEAT_OK``) and releases it once
    the next piece shows it does not. :meth:`flush` returns the rest when the
    stream ends. Together they emit no token, however the pieces are cut.
    """

    def __init__(self) -> None:
        self._held = ""
        self._before = ""  # the last character emitted: context for a token's start
        self.removed = False  # whether a token was taken out

    def feed(self, chunk: str) -> str:
        """What of the stream so far may be emitted now."""
        text = self._held + chunk
        tail = _MAYBE_TOKEN.search(text)
        cut = tail.start() if tail is not None else len(text)
        self._held = text[cut:]
        return self._emit(text[:cut])

    def flush(self) -> str:
        """The rest of the stream, filtered."""
        text, self._held = self._held, ""
        return self._emit(text)

    def _emit(self, text: str) -> str:
        if not text:
            return ""
        cleaned = _remove(self._before + text, len(self._before))
        if cleaned != text:
            self.removed = True
            if _is_residue(cleaned):
                # Only marks left where a token was; a full stop it ended with is kept
                # when it ends the sentence before it ("Friday HEARTBEAT_OK.").
                kept = cleaned.strip()
                cleaned = kept if kept in _SENTENCE_END and self._before.isalnum() else ""
        if cleaned:
            self._before = cleaned[-1]
        return cleaned
