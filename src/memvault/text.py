"""Text memvault can keep: encodable as UTF-8, free of control characters.

Whatever memvault stores ends up in a UTF-8 file, an SQLite row, a JSON
answer and a tokenizer. A lone surrogate (which a JSON ``"\\ud800"`` escape,
a YAML ``"\\uD800"`` escape, or a terminal's stray byte read through
Python's surrogateescape all put into a ``str``) cannot be encoded in any of
them, and one stored in a note used to break every later index run. NUL and
the other C0 control characters (tab and line breaks aside) make no sense in
Markdown, break YAML and split lines where nobody sees a break.

So such text is refused where it enters, on every surface (the CLI, the HTTP
API, the tool registry and with it MCP), with one sentence naming the field
and the character, before anything is written; and text read back from a
file is checked, so that one bad file breaks only itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from memvault.errors import InvalidInputError

# What no stored text may hold: C0 controls except tab, LF and CR; lone surrogates.
_REFUSED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Python's surrogateescape turns an undecodable byte 0xXY into U+DCXY.
_ESCAPED_BYTES = range(0xDC80, 0xDD00)


def flaw(text: str, *, from_bytes: bool = False) -> str | None:
    """What makes ``text`` unfit to store, in a few words; None when it is fine.

    ``from_bytes``: the text was decoded with surrogateescape (a command
    line, a file name), so U+DC80..U+DCFF stand for bytes that are not UTF-8.
    """
    found = _REFUSED.search(text)
    if found is None:
        return None
    code = ord(found.group())
    if from_bytes and code in _ESCAPED_BYTES:
        return f"the byte 0x{code - 0xDC00:02X}, which is not UTF-8"
    if 0xD800 <= code <= 0xDFFF:
        return f"a lone surrogate U+{code:04X}"
    return f"the control character U+{code:04X}"


def unencodable(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (so UTF-8, SQLite and JSON refuse it)."""
    return _SURROGATE.search(text) is not None


def scrub(text: str) -> str:
    """``text`` with every character no store can keep (a lone surrogate, a control other
    than tab and newlines) replaced by U+FFFD: for text that must be kept, not refused."""
    return _REFUSED.sub("\ufffd", text)


def bad_text(field: str, problem: str) -> InvalidInputError:
    """The error for a field whose text cannot be kept: one sentence naming both."""
    return InvalidInputError(f"{field} contains a character that is not valid text ({problem}).")


def check_text(value: str, field: str) -> str:
    """``value`` unchanged, or InvalidInputError naming ``field`` and the character."""
    problem = flaw(value)
    if problem is not None:
        raise bad_text(field, problem)
    return value


def check_values(value: Any, field: str) -> None:
    """Check every string in ``value`` (dict keys too, at any depth) as :func:`check_text`."""
    for text in strings(value):
        check_text(text, field)


def check_fields(values: Mapping[str, Any]) -> None:
    """Check a mapping of named fields (a request body, tool arguments), naming the field."""
    for key, value in values.items():
        check_text(str(key), "A field name")
        check_values(value, str(key))


def strings(value: Any) -> Iterator[str]:
    """Every string inside ``value``: itself, list items, dict keys and values."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from strings(item)


def first_unencodable(value: Any) -> str | None:
    """The first string inside ``value`` holding a lone surrogate, if any."""
    return next((text for text in strings(value) if unencodable(text)), None)


class TextScreen(Protocol):
    """Checks text about to be stored for secrets, given to the notes and the sessions by
    the runtime (:class:`memvault.privacy.secrets.SecretScreen`): inner layers only call it.

    Returns the text as it may be stored (a secret replaced by a marker), or raises a
    MemvaultError when nothing may be stored. Secrets ``kept`` already holds pass (a note
    being rewritten keeps what it had); ``refuse`` False never refuses, it only redacts.
    """

    def __call__(self, text: str, *, kept: str = "", refuse: bool = True) -> str: ...


def cut(text: str, limit: int) -> str:
    """``text`` as it is when it has at most ``limit`` characters, else its first
    ``limit - 1`` and an ellipsis (so a table cell or a log line keeps its width)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (each run of white space one space), :func:`cut` to ``limit``."""
    return cut(" ".join(text.split()), limit)
