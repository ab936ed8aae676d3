"""Stemming by language: a chunk's words stemmed by its own language's Snowball stemmer.

The keyword index stems every word with the Porter stemmer (FTS5's ``porter``,
PostgreSQL's ``porter_all``), which is English: German ``Ende`` became ``end`` and
matched English notes, while ``Schwestern`` never found ``Schwester``. So, before
either backend sees a chunk:

- Its language is guessed cheaply, with no model (:func:`memvault.languages.language_of`):
  Cyrillic is Russian; a Latin text is the language whose function words it holds
  most, with a few letters only one language writes as evidence too. English, a
  tie, too little evidence, or any other script: the Porter path, as before.
- In a chunk of another language each word is replaced, in the *stemmed* view only,
  by its stem from that language's Snowball stemmer (``snowballstemmer``, the
  Snowball project's own pure-Python build) followed by :data:`MARK` and the
  language's code: ``schwesternʭdeʭ`` is ``schwestʭdeʭ``. Ending in a letter of no
  alphabet, such a word passes both backends' Porter stemmers unchanged, and can
  never equal an English stem (:func:`memvault.index.scripts.indexed` takes the
  mark out of any text it is given) nor another language's. The exact view
  (words as written) stays as written; English chunks are written exactly as before.
- A query word is looked up by its stems (:func:`lookups`): as the query's language
  stems it when its function words say which, and also as English and in every other
  language the index holds, so a name or a borrowed word is found in a note of any
  language (a bare ``Schwestern`` finds the German note, ``tomatoes`` the English
  ones, an English question about "Umber" the German note naming it). The languages
  held are a table of a few rows (``keyword_languages``), written with the chunks.

A query in a language drops that language's function words as an English one
drops English ones (:func:`memvault.languages.stop_words`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import snowballstemmer

from memvault.index.scripts import RESERVED, has_cjk, indexed
from memvault.languages import LANGUAGES, language_of

# Closes a word stemmed by another language than English: IPA's "bidental percussive",
# a letter in every locale's tables, without case or decomposition, that no language
# writes (and that the index takes out of every text it is given). A stem is
# ``stem + MARK + code + MARK``: it ends in no ASCII letter, so no Porter rule applies.
MARK = RESERVED
_WORD = re.compile(r"[^\W_]+")
_STEMS_KEPT = 65536


@functools.cache
def _stemmer(language: str) -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer(LANGUAGES[language].snowball)


@functools.lru_cache(maxsize=_STEMS_KEPT)
def stem(word: str, language: str) -> str:
    """``word`` (lower case) as the stemmed view holds it in a chunk of ``language``."""
    return f"{_stemmer(language).stemWord(word)}{MARK}{language}{MARK}"


def _stemmable(word: str) -> bool:
    """Words a language stems: those with a letter, and not CJK (bigrams)."""
    return not word.isdigit() and not has_cjk(word)


def stemmed(text: str, language: str | None) -> str:
    """``text`` (as :func:`~memvault.index.scripts.indexed` wrote it) with each word
    replaced by its stem in ``language`` (None or ``en``: unchanged)."""
    if language not in LANGUAGES:
        return text
    return _WORD.sub(
        lambda m: stem(m.group(0).lower(), language) if _stemmable(m.group(0)) else m.group(0),
        text,
    )


def lookups(word: str, language: str | None, held: frozenset[str]) -> tuple[str, ...]:
    """What a query word is looked up as in the stemmed view (each then goes through the
    index's own tokenizer): first as the query's ``language`` stems it (as English when
    the index does not hold that language, or no language is known), then as English
    and in every other language the index holds. A query's language never narrows where
    its words are found: a name or a borrowed word stands in notes of any language (an
    English question about "Umber" finds the German note naming it); the chunks holding
    any of these forms hold the word."""
    if not held or not _stemmable(word):
        return (word,)
    lowered = word.lower()
    first = stem(lowered, language) if language in held else word
    every = (word, *(stem(lowered, code) for code in sorted(held)))
    return (first, *dict.fromkeys(k for k in every if k != first))


def _own(found: str | None) -> str | None:
    """A language stemmed by its own rules (None: English, or not known)."""
    return found if found in LANGUAGES else None


@dataclass(frozen=True)
class KeywordRow:
    """A chunk's four keyword columns (text, context, title, tags): ``written`` as the
    exact view holds them, ``stemmed`` as the stemmed view does, and the ``languages``
    other than English it holds (none: English, CJK, or not known: Porter as before)."""

    written: tuple[str, str, str, str]
    stemmed: tuple[str, str, str, str]
    languages: frozenset[str] = frozenset()

    @classmethod
    def of(cls, text: str, context: str, title: str, tags: str) -> KeywordRow:
        """The keyword row of a chunk: words in every script, stems by language.

        The chunk's language stems its words; a line of its text that says clearly it
        is in another (a note in two languages) is stemmed by its own.
        """
        written = (indexed(text), indexed(context), indexed(title), indexed(tags))
        language = _own(language_of(f"{text}\n{title}"))
        lines = text.split("\n")
        found = [language_of(line) for line in lines] if len(lines) > 1 else []
        each = [language if f is None else _own(f) for f in found]
        if all(line == language for line in each):
            if language is None:
                return cls(written, written)
            a, b, c, d = (stemmed(column, language) for column in written)
            return cls(written, (a, b, c, d), frozenset({language}))
        own = "\n".join(
            stemmed(indexed(line), lang) for line, lang in zip(lines, each, strict=True)
        )
        _, context, title, tags = (stemmed(column, language) for column in written)
        held = frozenset(lang for lang in [language, *each] if lang is not None)
        return cls(written, (own, context, title, tags), held)
