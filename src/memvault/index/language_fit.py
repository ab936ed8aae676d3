"""Does the vault's writing suit its embedder? Script counts over a sample of chunks.

An English-only model (all-MiniLM-L6-v2, memvault's default) gives vectors that mean
little for Japanese, Chinese, Korean, Russian or Arabic text: semantic search then ranks
unrelated sentences. Telling the writing of a text apart needs no language detector: each
letter's Unicode block says its script, and kana say Japanese where Han alone says
Chinese. Latin letters are not told apart (English, German, Spanish): an English model
still shares words with those, and a detector would cost more than this check is worth.

:func:`writing_of` names the writing of one text (the script with the most letters, a
CJK character weighing as two Latin letters, about what it carries); :func:`mix` counts
a sample; :func:`verdict` says when most of it is in a writing the model cannot read.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

LATIN = "Latin"
# Unicode name prefixes of letters, and the writing they count for.
_SCRIPTS = (
    ("CJK", "Chinese"),  # CJK UNIFIED IDEOGRAPH-, CJK COMPATIBILITY IDEOGRAPH-
    ("HIRAGANA", "Japanese"),
    ("KATAKANA", "Japanese"),
    ("HALFWIDTH KATAKANA", "Japanese"),
    ("HANGUL", "Korean"),
    ("CYRILLIC", "Cyrillic"),
    ("GREEK", "Greek"),
    ("ARABIC", "Arabic"),
    ("HEBREW", "Hebrew"),
    ("THAI", "Thai"),
    ("DEVANAGARI", "Devanagari"),
    ("BENGALI", "Bengali"),
    ("TAMIL", "Tamil"),
    ("GEORGIAN", "Georgian"),
    ("ARMENIAN", "Armenian"),
    ("LATIN", LATIN),
    ("FULLWIDTH LATIN", LATIN),
)
_WIDE = {"Chinese", "Japanese", "Korean"}  # one character is about a word's syllable
# Share of kana among a text's CJK characters above which it is Japanese, not Chinese.
KANA_SHARE = 0.05
SAMPLE = 300  # chunks read
WARN_SHARE = 0.3  # of the sample in writings the model cannot read


def _script(char: str) -> str | None:
    name = unicodedata.name(char, "")
    for prefix, script in _SCRIPTS:
        if name.startswith(prefix):
            return script
    return None


def writing_of(text: str) -> str | None:
    """The writing most of ``text`` is in (``Latin`` for every Latin-script language),
    or None when it holds no letters."""
    counts: Counter[str] = Counter()
    for char in text:
        if char.isalpha():
            script = _script(char)
            if script is not None:
                counts[script] += 2 if script in _WIDE else 1
    if not counts:
        return None
    kana, han = counts["Japanese"], counts["Chinese"]
    if kana and kana >= KANA_SHARE * (kana + han):  # Japanese writes Han among its kana
        counts["Japanese"] += han
        del counts["Chinese"]
    return counts.most_common(1)[0][0]


@dataclass(frozen=True)
class Mix:
    """How many sampled chunks are in each writing."""

    counts: dict[str, int]
    sampled: int

    def share(self, writing: str) -> float:
        """The share of the sample in ``writing``."""
        return self.counts.get(writing, 0) / self.sampled if self.sampled else 0.0

    def unreadable(self, reads: frozenset[str]) -> list[tuple[str, int]]:
        """Writings outside ``reads``, the largest first."""
        return sorted(
            ((w, n) for w, n in self.counts.items() if w not in reads), key=lambda x: -x[1]
        )


def mix(texts: Iterable[str]) -> Mix:
    """The writings of ``texts`` (texts without letters are not counted)."""
    counts: Counter[str] = Counter()
    for text in texts:
        writing = writing_of(text)
        if writing is not None:
            counts[writing] += 1
    return Mix(dict(counts), sum(counts.values()))


def verdict(found: Mix, reads: frozenset[str]) -> str | None:
    """``Most of your notes are in Japanese``-style words when a large share of the sample
    is in writings outside ``reads``; None when the model suits the vault."""
    if not found.sampled:
        return None
    outside = found.unreadable(reads)
    total = sum(n for _, n in outside)
    if total < WARN_SHARE * found.sampled:
        return None
    names = [_named(w) for w, _ in outside]
    share = total / found.sampled
    amount = "most" if share > 0.5 else "many"
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"{amount} of your notes are in {listed} ({total} of {found.sampled} sampled chunks)"


def _named(writing: str) -> str:
    """A writing as a sentence names it: Japanese, or Cyrillic script."""
    return writing if writing in _WIDE else f"{writing} script"


def sample(conn: Any, size: int = SAMPLE) -> list[str]:
    """Up to ``size`` chunk texts spread over the whole index (every n-th id), on SQLite
    or PostgreSQL."""
    row = conn.execute("SELECT MAX(id) FROM chunks").fetchone()
    top = int(row[0] or 0) if row else 0
    if not top:
        return []
    step = max(1, top // size)
    rows = conn.execute(
        "SELECT text FROM chunks WHERE id % ? = 0 ORDER BY id LIMIT ?", (step, size)
    ).fetchall()
    return [str(r[0]) for r in rows]
