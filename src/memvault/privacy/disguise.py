"""How text hides what it says, and how that is undone before it is judged.

:mod:`memvault.privacy.trust` judges text in the form its patterns are written
for; this module makes that form. Hidden Unicode (tag characters, runs of
variation selectors, zero-width and bidi controls) is found and made visible;
text is normalised (NFKC, invisible characters dropped, look-alike letters of
another script inside a Latin word read as Latin, casefolded); and readable
text carried in base64, hex, percent-encoding, HTML entities or ``\\u``
escapes is decoded. Apart from the judge because it says nothing about what
an instruction is: only how text is disguised.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import contextlib
import html
import re
import unicodedata
import urllib.parse
from dataclasses import dataclass

# -- hidden Unicode ---------------------------------------------------------------------

# Characters that show nothing and have no business in a message: zero-width spaces and
# joiners of words, invisible operators, a BOM inside text, Hangul and Khmer fillers
# used as blanks. (ZWJ and ZWNJ, which emoji and Persian need, and LRM / RLM are left.)
_INVISIBLE = frozenset(
    "\u200b\u2060\u2061\u2062\u2063\u2064\ufeff\u180e\u115f\u1160\u3164\uffa0\u17b4\u17b5"
)
# Bidi embeddings, overrides and isolates: they reorder what is shown (Trojan Source).
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_TAG_RUN = re.compile("[\U000e0000-\U000e007f]+")
_VARIATION_RUN = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]{2,}")
_BLACK_FLAG = "\U0001f3f4"  # a subdivision flag (England, Scotland) is spelled in tag chars
_FLAG_TAGS = re.compile("[\U000e0030-\U000e0039\U000e0061-\U000e007a]{2,6}\U000e007f")


def _tag_text(run: str) -> str:
    """The ASCII a run of tag characters spells (the language tag and cancel tag dropped)."""
    return "".join(chr(ord(c) - 0xE0000) for c in run if 0xE0020 <= ord(c) <= 0xE007E)


def _variation_text(run: str) -> str:
    """The bytes a run of variation selectors encodes (one byte each), as text."""
    data = bytes(ord(c) - 0xFE00 if ord(c) <= 0xFE0F else ord(c) - 0xE0100 + 16 for c in run)
    return data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Hidden:
    """What a text hides: the text its hidden characters spell, and how many there are."""

    payload: tuple[str, ...] = ()  # what tag characters / variation selectors spell
    invisible: int = 0  # zero-width and bidi controls


def find_hidden(text: str) -> Hidden:
    """The hidden Unicode in ``text`` (a subdivision flag's tags are not hidden)."""
    payload: list[str] = []
    for match in _TAG_RUN.finditer(text):
        after_flag = match.start() > 0 and text[match.start() - 1] == _BLACK_FLAG
        if after_flag and _FLAG_TAGS.fullmatch(match.group(0)):
            continue
        spelled = _tag_text(match.group(0))
        payload.append(spelled)
    for match in _VARIATION_RUN.finditer(text):
        payload.append(_variation_text(match.group(0)))
    leading_bom = 1 if text.startswith("\ufeff") else 0
    invisible = sum(1 for c in text if c in _INVISIBLE or c in _BIDI) - leading_bom
    return Hidden(tuple(payload), max(invisible, 0))


# What would make someone else's words a tag, a field, a link or a block id in a note
# (``#share/everyone`` would widen who sees it).
_MARKUP = str.maketrans({"#": "\uff03", "[": "(", "]": ")", "^": "\uff3e"})


def inert(text: str) -> str:
    """Someone else's words as one line a note may hold: what hides in them shown, and
    no tag, field, link or block id they could make."""
    return " ".join(reveal(text).split()).translate(_MARKUP).replace("::", ":")


def reveal(text: str) -> str:
    """``text`` with what hides in it made visible: tag characters and variation selector
    runs decoded as ``⟦hidden: ...⟧``, zero-width and bidi controls removed."""

    def tags(match: re.Match[str]) -> str:
        at = match.start()
        if at > 0 and text[at - 1] == _BLACK_FLAG and _FLAG_TAGS.fullmatch(match.group(0)):
            return match.group(0)
        spelled = _tag_text(match.group(0)).strip()
        return f" ⟦hidden: {spelled}⟧ " if spelled else ""

    shown = _TAG_RUN.sub(tags, text)
    shown = _VARIATION_RUN.sub(
        lambda m: f" ⟦hidden: {_variation_text(m.group(0)).strip()}⟧ ", shown
    )
    shown = "".join(c for c in shown if c not in _INVISIBLE and c not in _BIDI)
    return " ".join(shown.split()) if shown != text else text


# -- normalising ------------------------------------------------------------------------

_LATIN = re.compile(r"[a-z]", re.IGNORECASE)
_WORDS = re.compile(r"\w+")
_OTHER_LOOKALIKE = re.compile(r"[\u0370-\u03ff\u0400-\u04ff\u0500-\u052f]")


def _unconfuse(word: str) -> str:
    """A word mixing Latin letters with Cyrillic or Greek ones that look alike, in Latin."""
    from confusable_homoglyphs import confusables  # loaded only for such words (~0.1 s)

    found = confusables.is_confusable(word, preferred_aliases=["latin"], greedy=True) or []
    swap: dict[str, str] = {}
    for entry in found:
        for glyph in entry["homoglyphs"]:
            if glyph["c"].isascii() and glyph["c"].isalpha():
                swap[entry["character"]] = glyph["c"]
                break
    return "".join(swap.get(c, c) for c in word)


def normalise(text: str) -> str:
    """The form patterns are matched in: NFKC, invisible characters dropped, look-alike
    letters inside Latin words read as Latin, casefolded, spaces collapsed (line breaks
    kept: a role marker counts at the start of a line)."""
    flat = unicodedata.normalize("NFKC", text)
    flat = "".join(
        c for c in flat if unicodedata.category(c) != "Cf" and not ("\ufe00" <= c <= "\ufe0f")
    )
    if _OTHER_LOOKALIKE.search(flat):
        flat = _WORDS.sub(
            lambda m: (
                _unconfuse(m.group(0))
                if _LATIN.search(m.group(0)) and _OTHER_LOOKALIKE.search(m.group(0))
                else m.group(0)
            ),
            flat,
        )
    # Spaces collapsed, line breaks kept: a role marker counts at the start of a line.
    lines = (" ".join(line.split()) for line in flat.casefold().splitlines())
    return "\n".join(line for line in lines if line)


# -- decoding ---------------------------------------------------------------------------

_BASE64 = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{16,}={0,2}(?![\w+/=-])")
_HEX = re.compile(r"(?<![0-9a-fA-F])(?:[0-9a-fA-F]{2}[ :]?){12,}(?![0-9a-fA-F])")
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
_ENTITY = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z]+);")
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|U[0-9a-fA-F]{8})")


def _readable(data: bytes) -> str | None:
    """``data`` as text when it is UTF-8 that reads as words (not a hash or an image)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < 8:
        return None
    printable = sum(1 for c in text if c.isprintable() or c in "\n\t")
    letters = sum(1 for c in text if c.isalpha())
    if printable < 0.95 * len(text) or letters < 0.4 * len(text):
        return None
    return text


def decodings(text: str) -> list[tuple[str, str]]:
    """The readable texts hidden in ``text``, each with what hid it: ``(how, text)``."""
    out: list[tuple[str, str]] = []
    for match in _BASE64.finditer(text):
        token = match.group(0)
        alphabet = "-_" if ("-" in token or "_" in token) else "+/"
        if alphabet == "-_" and ("+" in token or "/" in token):
            continue
        bare = token.rstrip("=")
        padded = bare + "=" * (-len(bare) % 4)
        try:
            data = (
                base64.urlsafe_b64decode(padded)
                if alphabet == "-_"
                else base64.b64decode(padded, validate=True)
            )
        except (binascii.Error, ValueError):
            continue
        readable = _readable(data)
        if readable is not None:
            out.append(("base64", readable))
    for match in _HEX.finditer(text):
        try:
            data = bytes.fromhex(re.sub(r"[ :]", "", match.group(0)))
        except ValueError:
            continue
        readable = _readable(data)
        if readable is not None:
            out.append(("hex", readable))
    if len(_PERCENT.findall(text)) >= 3:
        out.append(("percent-encoding", urllib.parse.unquote(text)))
    if _ENTITY.search(text):
        unescaped = html.unescape(text)
        if unescaped != text:
            out.append(("HTML entities", unescaped))
    if len(_ESCAPE.findall(text)) >= 3:
        raw = text.encode("latin-1", "backslashreplace")
        with contextlib.suppress(UnicodeDecodeError, ValueError):
            out.append(("escapes", codecs.decode(raw, "unicode_escape")))
    return out
