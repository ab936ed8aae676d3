"""Dates in the owner's language: "letzte Woche", "上周", "le 3 juin", "gestern".

English dates have their own patterns (:mod:`memvault.index.query`), which
stay first; this module is the fallback for the owner's ``locale``, on the
well-kept ``dateparser`` and its data. The method:

1. The languages: the owner's locale, and what the text's own script says
   (kana is Japanese, Hangul Korean, Han Chinese or Japanese, Cyrillic the
   locale's Cyrillic language or Russian). A locale that is not set means
   no languages: memvault behaves as it did before.
2. Each language's date words are read once from dateparser's own data
   files, as data (without importing dateparser): its relative phrases
   ("letzte Woche" is "1 week ago"), its numbered ones ("vor 3 Tagen", a
   prefix, a number and a suffix) and its month and weekday names. A cheap
   check (does a word that starts one, or a number, stand in the text?)
   comes before the whole pattern.
3. A relative or numbered phrase is counted from now as dateparser counts
   it (a test holds the two to the same answer), so it never loads
   dateparser; nor does text without a date word.
4. Only a month or weekday name is given to dateparser (about a third of a
   second to import, a few milliseconds a parse), restricted to the
   language the name belongs to: it reads the phrase around the name
   ("le 3 juin 2023", "im Juni 2023").

Nothing is downloaded: dateparser's data ships in its wheel, and its optional
language detectors (fastText, langdetect) are not used.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import re
import threading
from calendar import monthrange
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# The units a date phrase is resolved to; dateparser's hours, minutes and seconds are left out.
PERIODS = ("day", "week", "month", "year")
_ENGLISH = "en"
_CYRILLIC_LANGUAGES = frozenset({"ru", "uk", "be", "bg", "sr", "mk", "kk", "ky", "mn", "tg"})
_CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})
_KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9d]")
_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
_LOCALE = re.compile(r"^([A-Za-z]{2,3})(?:[-_]([A-Za-z]{4}))?(?:[-_][A-Za-z0-9]{2,8})*$")
_MONTHS = (
    "january february march april may june july august september october november december"
).split()
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_KEY = re.compile(r"^(in )?(\\1|\d+) (day|week|month|year)(?: ago)?$")
_TOKEN = re.compile(r"\w+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
# dateparser's numbered phrases: "vor (\d++[.,]?\d*+) tagen", plain words around the number.
_NUMBERED = re.compile(
    r"^([^()\\\[\]?*+{}|^$.]*)\(\\d\+\+\[\.,\]\?\\d\*\+\)([^()\\\[\]?*+{}|^$.]*)$"
)
_LOCK = threading.Lock()


@dataclass(frozen=True)
class SpokenDate:
    """A date phrase found in text and what it means."""

    phrase: str  # as it stands in the text
    language: str  # dateparser's name of its language ("de", "zh", "zh-Hant")
    moment: datetime  # naive, on the owner's wall clock
    period: str  # one of PERIODS: how much time the phrase names
    relative: bool  # named from now ("letzte Woche", "vor 3 Tagen"), not by the calendar


def _data_dir() -> Path | None:
    """dateparser's language data, found without importing dateparser."""
    spec = importlib.util.find_spec("dateparser")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder / "data" / "date_translation_data"


@cache
def known_languages() -> frozenset[str]:
    """Every language dateparser has data for (empty when it is not installed)."""
    folder = _data_dir()
    if folder is None or not folder.is_dir():
        return frozenset()
    return frozenset(p.stem for p in folder.glob("*.py") if p.stem != "__init__")


def language_of(locale: str) -> str:
    """dateparser's language for a locale tag ("de-DE" -> "de", "zh_Hant_TW" -> "zh-Hant").

    Raises ValueError with a sentence a person can act on.
    """
    match = _LOCALE.match(locale.strip())
    if match is None:
        raise ValueError(
            f"{locale!r} is not a locale; use a language tag such as 'de', 'fr-FR' or 'zh-Hans'."
        )
    base = match.group(1).lower()
    known = known_languages()
    if match.group(2):
        scripted = f"{base}-{match.group(2).title()}"
        if scripted in known:
            return scripted
    if base in known or base == _ENGLISH:
        return base
    raise ValueError(
        f"memvault knows no dates in {locale!r}; use a language tag such as 'de', 'fr' or 'ja'."
    )


def languages_for(text: str, locale: str | None, *, english: bool = False) -> tuple[str, ...]:
    """The languages to read ``text``'s dates in: the locale's (where the text's script
    fits it) and what the script says. None without a locale. English only when asked
    (queries have their own English patterns)."""
    if not locale:
        return ()
    own = language_of(locale)
    base = own.split("-")[0]
    found: list[str] = []
    if _KANA.search(text):
        found.append("ja")
    if _HANGUL.search(text):
        found.append("ko")
    if _HAN.search(text):
        found.extend([own] if base in ("zh", "ja") else ["zh", "ja"])
    if _CYRILLIC.search(text):
        found.append(own if base in _CYRILLIC_LANGUAGES else "ru")
    if _LATIN.search(text) and base not in _CYRILLIC_LANGUAGES | _CJK_LANGUAGES:
        found.append(own)
    if english and _LATIN.search(text):
        found.append(_ENGLISH)
    wanted = [lang for lang in dict.fromkeys(found) if english or lang != _ENGLISH]
    return tuple(lang for lang in wanted if lang in known_languages())


@dataclass(frozen=True)
class _Word:
    language: str
    period: str | None  # the unit a relative phrase counts in; None for a month or weekday
    count: int = 0  # how many of them: -1 "ago", +1 "in" ("gestern": -1 day)

    @property
    def calendar(self) -> bool:
        """A month or weekday name: dateparser reads the phrase around it."""
        return self.period is None


@dataclass(frozen=True)
class DateWord:
    """Where a date word stands in a text, and what kind it is."""

    start: int
    end: int
    phrase: str
    word: _Word

    def before(self, other: DateWord | None) -> bool:
        """Earlier in the text (the longer one where both start alike)."""
        return other is None or (self.start, other.end) < (other.start, self.end)


class _Vocabulary:
    """One language's date words (one pattern, and a cheaper check before it) and its
    numbered phrases ("vor 3 Tagen": a prefix, the number, a suffix)."""

    def __init__(self, language: str, info: dict[str, Any]) -> None:
        self.language = language
        words: dict[str, _Word] = {}
        numbered: list[tuple[str, str, _Word]] = []
        for key, phrases in (info.get("relative-type") or {}).items():
            unit = _KEY.match(key)
            if unit is not None:
                word = _Word(language, unit.group(3), _count(unit))
                for phrase in phrases:
                    words.setdefault(phrase.casefold(), word)
        for key, patterns in (info.get("relative-type-regex") or {}).items():
            unit = _KEY.match(key)
            if unit is None or unit.group(2) != "\\1":
                continue
            for pattern in patterns:
                # Each is "prefix (number) suffix" in plain words: matched as such, which is
                # far cheaper than trying a hundred patterns at every letter.
                shape = _NUMBERED.match(pattern)
                if shape is not None:
                    prefix, suffix = shape.group(1).lower(), shape.group(2).lower()
                    numbered.append((prefix, suffix, _Word(language, unit.group(3), _count(unit))))
        for key in (*_MONTHS, *_WEEKDAYS):
            names = [str(n) for n in info.get(key) or ()]
            longest = max((len(n) for n in names), default=0)
            for name in names:
                # Short forms ("mar", "so", "月") are ordinary words too often.
                if len(name) == longest or len(name) >= (4 if _bounded(name) else 2):
                    words.setdefault(name.casefold(), _Word(language, None))
        self.words = words
        self.numbered = numbered
        ordered = sorted(words, key=len, reverse=True)
        every = [_bound(re.escape(w), w) for w in ordered]
        relative = [_bound(re.escape(w), w) for w in ordered if not words[w].calendar]
        self.pattern = re.compile("|".join(every), re.IGNORECASE) if every else None
        self.relative = re.compile("|".join(relative), re.IGNORECASE) if relative else None
        # The cheap check: a word that starts a date phrase, or a date word of a script
        # without spaces. Only then is the whole pattern tried.
        self.first_words = frozenset(
            _TOKEN.findall(w)[0] for w in words if _bounded(w) and _TOKEN.findall(w)
        )
        unspaced = [re.escape(w) for w in ordered if not _bounded(w)]
        self.unspaced = re.compile("|".join(unspaced)) if unspaced else None

    def _may_hold(self, text: str) -> bool:
        """Whether ``text`` may hold a date word (never False when it does)."""
        if self.unspaced is not None and self.unspaced.search(text):
            return True
        return not self.first_words.isdisjoint(_TOKEN.findall(text.casefold()))

    def find(self, text: str, *, relative: bool = False) -> DateWord | None:
        """The first date word in ``text`` (only relative phrases when ``relative``)."""
        best = self._numbered(text) if self.numbered else None
        pattern = self.relative if relative else self.pattern
        if pattern is None or not self._may_hold(text):
            return best
        match = pattern.search(text)
        word = self.words.get(match.group(0).casefold()) if match is not None else None
        if match is None or word is None:
            return best
        found = DateWord(match.start(), match.end(), match.group(0), word)
        return found if found.before(best) else best

    def _numbered(self, text: str) -> DateWord | None:
        """The first "vor 3 Tagen", "3天前", "il y a 2 semaines" of ``text``."""
        best: DateWord | None = None
        for number in _NUMBER.finditer(text):
            try:
                amount = float(number.group(0).replace(",", "."))
            except ValueError:
                continue
            if amount >= 10000:
                continue
            for prefix, suffix, word in self.numbered:
                start, end = number.start() - len(prefix), number.end() + len(suffix)
                if (
                    start < 0
                    or text[start : number.start()].lower() != prefix
                    or text[number.end() : end].lower() != suffix
                    or (start > 0 and _bounded(prefix[:1] or "0") and text[start - 1].isalnum())
                    or (end < len(text) and _bounded(suffix[-1:] or "0") and text[end].isalnum())
                ):
                    continue
                found = DateWord(
                    start,
                    end,
                    text[start:end],
                    _Word(word.language, word.period, word.count * int(amount)),
                )
                if found.before(best):
                    best = found
            if best is not None:
                return best
        return best


def _count(unit: re.Match[str]) -> int:
    """-N for "N ... ago", +N for "in N ..." (a pattern's own number counts once)."""
    number = 1 if unit.group(2) == "\\1" else int(unit.group(2))
    return number if unit.group(1) else -number


def _bounded(word: str) -> bool:
    """Whether a word is written between spaces (not in a Han, kana or Hangul run)."""
    return not any(p.search(word) for p in (_KANA, _HANGUL, _HAN))


def _bound(pattern: str, word: str) -> str:
    return rf"(?<!\w)(?:{pattern})(?!\w)" if _bounded(word) else f"(?:{pattern})"


@cache
def _vocabulary(language: str) -> _Vocabulary | None:
    folder = _data_dir()
    source = folder / f"{language}.py" if folder is not None else None
    if source is None or not source.is_file():
        return None
    try:
        # The file is ``info = {...}``, a literal: read as data, never run.
        info = ast.literal_eval(source.read_text(encoding="utf-8").split("=", 1)[1].strip())
        return _Vocabulary(language, info)
    except (ValueError, SyntaxError, re.error, IndexError):
        log.warning("dateparser data not readable", extra={"language": language})
        return None


def date_word(text: str, languages: Iterable[str], *, relative: bool = False) -> DateWord | None:
    """The earliest date word of ``text`` in any of ``languages`` (cheap; no dateparser);
    only phrases that count from now ("gestern", "vor 3 Tagen") when ``relative``."""
    best: DateWord | None = None
    for language in languages:
        vocabulary = _vocabulary(language)
        found = vocabulary.find(text, relative=relative) if vocabulary is not None else None
        if found is not None and found.before(best):
            best = found
    return best


def _settings(now: datetime) -> dict[str, Any]:
    return {
        "RELATIVE_BASE": now,
        "PREFER_DATES_FROM": "past",
        "RETURN_TIME_AS_PERIOD": True,
        "PARSERS": ["relative-time", "custom-formats", "absolute-time"],
    }


def counted(now: datetime, period: str, count: int) -> datetime:
    """``now`` moved by ``count`` periods, as dateparser counts them ("letzten Monat":
    the same day a month before, or that month's last day)."""
    if period in ("day", "week"):
        return now + timedelta(days=count * (7 if period == "week" else 1))
    months = now.month - 1 + count * (12 if period == "year" else 1)
    year, month = now.year + months // 12, months % 12 + 1
    return now.replace(year=year, month=month, day=min(now.day, monthrange(year, month)[1]))


def find_date(
    text: str, now: datetime, languages: Iterable[str], *, relative: bool = False
) -> SpokenDate | None:
    """The first date ``text`` names in one of ``languages``, read from ``now`` (only
    phrases that count from now when ``relative``).

    A relative phrase is counted from dateparser's own table of them ("letzte
    Woche": one week ago), without loading dateparser; a month or weekday name
    is read by dateparser with the words around it ("le 3 juin 2023").
    """
    found = date_word(text, languages, relative=relative)
    if found is None:
        return None
    word = found.word
    local = now.replace(tzinfo=None)
    if word.period is not None:
        return SpokenDate(
            phrase=found.phrase,
            language=word.language,
            moment=counted(local, word.period, word.count),
            period=word.period,
            relative=True,
        )
    from dateparser.date import DateDataParser  # import-outside-toplevel: ~0.3 s, on need
    from dateparser.search import search_dates

    settings = _settings(local)
    phrases = [found.phrase]
    with _LOCK:  # dateparser's caches are shared module state
        for candidate, _ in search_dates(text, languages=[word.language], settings=settings) or ():
            start = text.find(candidate)
            if start <= found.start and found.end <= start + len(candidate):
                phrases.insert(0, candidate)
                break
        parser = DateDataParser(languages=[word.language], settings=settings)
        # The phrase around the name ("le 3 juin"), else the name alone ("am Montag" is
        # found but not read; "Montag" is).
        for phrase in phrases:
            data = parser.get_date_data(phrase)
            if data.date_obj is not None:
                break
    if data.date_obj is None:
        return None
    return SpokenDate(
        phrase=phrase,
        language=word.language,
        moment=data.date_obj.replace(tzinfo=None),
        period=data.period if data.period in PERIODS else "day",
        relative=False,
    )
