"""Words in every script: the text the keyword index holds, and a query's words the same way.

FTS5's ``unicode61`` tokenizer (and PostgreSQL's parser) cut text into words at
spaces and punctuation. Chinese and Japanese put no spaces between words, and
Korean attaches its particles to the word (``부산으로``, "to Busan"): a whole run
of Han, Kana or Hangul would be one token, and a word inside it never matches.
So, before either backend sees a text, :func:`indexed` rewrites it:

- Compatibility forms become their plain letters (NFKC: full-width ``ＡＢＣ１`` is
  ``abc1``, half-width ``ｶﾀｶﾅ`` is ``カタカナ``), letters lower case, and non-ASCII
  punctuation, symbols and invisible marks become spaces (FTS5 does both already;
  PostgreSQL under the ``C`` locale lower-cases ASCII only, and its parser calls every
  non-ASCII character a letter).
- Each run of Han, Hiragana, Katakana and Hangul becomes its overlapping character
  bigrams (``东京出差`` is ``东京 京出 出差``): every word of two characters or more a
  person types is a run of bigrams of the text, wherever it stands and whatever is
  attached to it, with no dictionary (a segmenter such as jieba or MeCab ships a
  dictionary per language, tens of megabytes, and still misses new names). A
  one-character run stays one token.
- The characters of every longer run are added once more, one by one, at the end of
  the text, so that a one-character query (a word in Chinese: ``猫``, ``茶``) finds the
  texts holding that character anywhere. At the end, they never stand between the
  bigrams of a phrase.

A query's words go the same way (:func:`words_of`): bigrams for a run, the
character for a one-character run, and no single characters added (each bigram of
a longer word is the better clue). ASCII text is left exactly as it was, so English
is indexed and ranked as before.
"""

# ruff: noqa: RUF002, RUF003 (the text of other scripts, on purpose)

from __future__ import annotations

import functools
import operator
import re
import unicodedata

# Han (with its extensions and compatibility ideographs, and the iteration marks 々 〆 〇 〻),
# Hiragana, Katakana, Hangul (syllables and jamo).
_CJK_CLASS = (
    "\u1100-\u11ff\u3005-\u3007\u303b\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff"
    "\uf900-\ufaff\U0001b000-\U0001b16f\U00020000-\U0003134f"
)
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_WORD = re.compile(r"[^\W_]+")
# The letter closing a stem of another language than English in the stemmed view
# (memvault.index.stemming): a separator in any text given, so no word can end so.
RESERVED = "\u02ad"
# Unicode categories that separate words for FTS5's unicode61 (it keeps letters, numbers
# and private-use characters): punctuation, symbols, separators, controls and formats.
_SEPARATING = ("P", "S", "Z", "Cc", "Cf", "Cs", "Cn")


@functools.cache
def _separating(char: str) -> bool:
    """Whether FTS5's ``unicode61`` ends a word at ``char``."""
    return unicodedata.category(char).startswith(_SEPARATING)


def _normal(text: str) -> str:
    """``text`` in NFKC with every non-ASCII separator a space (ASCII text: itself)."""
    if text.isascii():
        return text
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    text = text.lower()  # PostgreSQL under the C locale lower-cases ASCII only
    for char in set(text):
        if char > "\x7f" and (_separating(char) or char == RESERVED):
            text = text.replace(char, " ")
    return text


def _bigrams(run: str) -> str:
    return " ".join(map(operator.add, run, run[1:])) if len(run) > 1 else run


def indexed(text: str) -> str:
    """The text the keyword index holds for ``text`` (a chunk's text, context, title or
    tags): CJK runs as bigrams, their characters added at the end (see the module's doc)."""
    text = _normal(text)
    if text.isascii():
        return text
    single: list[str] = []

    def spaced(match: re.Match[str]) -> str:
        run = match.group(0)
        if len(run) > 1:
            single.extend(run)
        return f" {_bigrams(run)} "

    spread = _CJK_RUN.sub(spaced, text)
    return spread + " " + " ".join(single) if single else spread


def searched(text: str) -> str:
    """What a query's text is searched as: :func:`indexed` without the single characters."""
    text = _normal(text)
    if text.isascii():
        return text
    return _CJK_RUN.sub(lambda m: f" {_bigrams(m.group(0))} ", text)


def words_of(text: str) -> list[str]:
    """The words of a query as the keyword index holds them, in order."""
    return _WORD.findall(searched(text))


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a Han, Kana or Hangul character."""
    return _CJK_RUN.search(text) is not None
