"""Turning what a person or model typed into a search.

- Keywords: words are extracted with a Unicode-aware pattern and each is
  quoted, so no input can inject FTS5 syntax; common function words are
  dropped (unless nothing else is left) and the rest are OR-ed, because a
  question rarely repeats the exact wording of the answer. The query's
  language, where its function words tell, decides which stems its words are
  looked up as (:mod:`memvault.index.stemming`), and its function words are
  dropped too. Chinese, Japanese
  and Korean have no spaces (or attach particles): a run of them is searched
  as its character bigrams, as the index holds it (:mod:`memvault.index.scripts`).
- Phrases: text in double quotes (straight or curly) is a phrase: its words
  in that order, as typed (not stemmed: a quoted ``"statue"`` is not
  ``status``). The whole query is also tried as a phrase, so words copied
  from a note find it even when each of them is common.
- A word being typed: when the query ends with a search word (no space or
  punctuation after it) of at least ``PREFIX_MIN`` characters, that word also
  matches as the start of a longer one (``vendo`` finds ``vendor``); shorter
  ones are not expanded, as ``a*`` would match most of the index.
- Time: an explicit day, month or year in the query ("on 3 June, 2023",
  "in August 2023", "the week before August 3, 2023", "yesterday") becomes
  a time range that boosts what was written then. With the owner's
  ``locale``, dates in their language (and the query's script) are read
  where the English patterns find none (:mod:`memvault.dates`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo

from memvault.dates import find_date, languages_for
from memvault.index.scripts import searched, words_of
from memvault.languages import ENGLISH_STOP_WORDS, QUERY_CLUES, language_of, stop_words

_LAST_WORD = re.compile(r"[^\W_]+$", re.UNICODE)
# The shortest word being typed that is also matched as a prefix.
PREFIX_MIN = 3
_QUOTED = re.compile(r'["\u201c\u201d\u201e]([^"\u201c\u201d\u201e]+)["\u201c\u201d\u201e]')
# English function words, dropped from a query's search words (a query in another
# language drops its own too: memvault.index.stemming).
STOPWORDS = ENGLISH_STOP_WORDS

_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d{2})"
_DAY_FIRST = re.compile(rf"\b{_DAY}\s+{_MONTH},?\s+{_YEAR}\b", re.I)
_MONTH_FIRST = re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I)
_YEAR_ONLY = re.compile(r"\b(?:in|during|of|since)\s+((?:19|20)\d{2})\b", re.I)
_SHIFT = re.compile(r"\b(?:the\s+)?(day|week|month|year)\s+(before|after)\s*$", re.I)
_RELATIVE = {
    "today": (0, 1),
    "yesterday": (-1, 0),
    "this week": (-6, 1),
    "last week": (-13, -6),
    "past week": (-7, 1),
    "this month": (-30, 1),
    "last month": (-60, -29),
}
_RELATIVE_RE = re.compile(r"\b(" + "|".join(_RELATIVE) + r")\b", re.I)
_AGO = re.compile(r"\b(\d{1,3})\s+(day|week|month)s?\s+ago\b", re.I)


@dataclass(frozen=True)
class TimeRange:
    """A half-open range of moments ``[start, end)``."""

    start: datetime
    end: datetime

    def contains(self, moment: datetime) -> bool:
        """Whether ``moment`` falls inside."""
        return self.start <= moment < self.end


@dataclass(frozen=True)
class ParsedQuery:
    """Keywords and time of a query."""

    text: str
    terms: tuple[str, ...]
    time: TimeRange | None
    words: tuple[str, ...] = ()  # every word, in order (stopwords too): the whole-query phrase
    phrases: tuple[tuple[str, ...], ...] = ()  # quoted phrases (a quoted word is one too)
    prefix: str | None = None  # the word being typed, also matched as a prefix (one of terms)
    # Its language where its function words tell (``en`` or a code of
    # memvault.index.stemming.LANGUAGES), else None: which stems its words are looked up as.
    language: str | None = None

    @property
    def fts(self) -> str | None:
        """An FTS5 MATCH expression safe for any input, or None when there are no words."""
        if not self.terms:
            return None
        return " OR ".join(f'"{term}"' for term in self.terms)

    @property
    def prefix_fts(self) -> str | None:
        """The word being typed as an FTS5 prefix query (``"vendo" *``), if there is one."""
        return None if self.prefix is None else f'"{self.prefix}" *'


def terms_of(text: str, language: str | None = None) -> tuple[str, ...]:
    """Search words of ``text``: lower-cased, de-duplicated, function words dropped (English
    ones, and those of its ``language``; a run of Chinese, Japanese or Korean is its
    character bigrams: :mod:`memvault.index.scripts`)."""
    words = [w.lower() for w in words_of(text)]
    dropped = STOPWORDS | stop_words(language) if language else STOPWORDS
    kept = [w for w in words if w not in dropped]
    chosen = kept or words
    seen: set[str] = set()
    out = []
    for word in chosen:
        if word not in seen:
            seen.add(word)
            out.append(word)
    return tuple(out[:64])


def _day_range(day: date, tz: tzinfo, days: int = 1) -> TimeRange:
    start = datetime(day.year, day.month, day.day, tzinfo=tz)
    return TimeRange(start, start + timedelta(days=days))


def _month_range(year: int, month: int, tz: tzinfo) -> TimeRange:
    start = datetime(year, month, 1, tzinfo=tz)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=tz)
    return TimeRange(start, end)


def _shift(found: TimeRange, before_text: str) -> TimeRange:
    """Apply "the week before" / "the day after" that precedes a date."""
    match = _SHIFT.search(before_text)
    if match is None:
        return found
    span = {"day": 1, "week": 7, "month": 31, "year": 366}[match.group(1).lower()]
    if match.group(2).lower() == "before":
        return TimeRange(found.start - timedelta(days=span), found.start)
    return TimeRange(found.end, found.end + timedelta(days=span))


def parse_time(text: str, now: datetime, locale: str | None = None) -> TimeRange | None:
    """The time range a query names explicitly, if any: in English, else (with the
    owner's ``locale``) in their language or the query's script (:mod:`memvault.dates`)."""
    tz = now.tzinfo or datetime.now().astimezone().tzinfo
    assert tz is not None
    for pattern, order in ((_DAY_FIRST, "dmy"), (_MONTH_FIRST, "mdy")):
        match = pattern.search(text)
        if match:
            groups = match.groups()
            day_s, month_s, year_s = (
                (groups[0], groups[1], groups[2])
                if order == "dmy"
                else (groups[1], groups[0], groups[2])
            )
            try:
                day = date(int(year_s), _MONTHS[month_s.lower()], int(day_s))
            except ValueError:
                continue
            return _shift(_day_range(day, tz), text[: match.start()])
    match = _ISO.search(text)
    if match:
        try:
            iso_day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        except ValueError:
            iso_day = None
        if iso_day is not None:
            return _shift(_day_range(iso_day, tz), text[: match.start()])
    match = _MONTH_YEAR.search(text)
    if match:
        found = _month_range(int(match.group(2)), _MONTHS[match.group(1).lower()], tz)
        return _shift(found, text[: match.start()])
    match = _YEAR_ONLY.search(text)
    if match:
        year = int(match.group(1))
        return TimeRange(datetime(year, 1, 1, tzinfo=tz), datetime(year + 1, 1, 1, tzinfo=tz))
    today = now.date()
    match = _AGO.search(text)
    if match:
        amount = int(match.group(1)) * {"day": 1, "week": 7, "month": 30}[match.group(2).lower()]
        return _day_range(today - timedelta(days=amount + 1), tz, days=3)
    match = _RELATIVE_RE.search(text)
    if match:
        first, last = _RELATIVE[match.group(1).lower()]
        start = datetime(today.year, today.month, today.day, tzinfo=tz) + timedelta(days=first)
        return TimeRange(start, start + timedelta(days=last - first))
    return _spoken_time(text, now, tz, locale)


# The days a relative phrase covers, ending with the day it names: "last week" (a week
# ago) is the seven days up to a week ago, as the English ``_RELATIVE`` ranges are.
_SPANS = {"day": 1, "week": 7, "month": 31, "year": 366}


def _spoken_time(text: str, now: datetime, tz: tzinfo, locale: str | None) -> TimeRange | None:
    """A date in the owner's language: "letzte Woche", "上周", "le 3 juin"."""
    languages = languages_for(text, locale)
    spoken = find_date(text, now, languages) if languages else None
    if spoken is None:
        return None
    day = spoken.moment.date()
    if spoken.relative:
        span = _SPANS[spoken.period]
        return _day_range(day - timedelta(days=span - 1), tz, days=span)
    if spoken.period == "month":
        return _month_range(day.year, day.month, tz)
    if spoken.period == "year":
        return TimeRange(
            datetime(day.year, 1, 1, tzinfo=tz), datetime(day.year + 1, 1, 1, tzinfo=tz)
        )
    return _day_range(day, tz, days=_SPANS[spoken.period])


def phrases_of(text: str) -> tuple[tuple[str, ...], ...]:
    """The quoted phrases of ``text`` (a quoted word is one: that word as typed)."""
    found = (tuple(words_of(m.group(1))) for m in _QUOTED.finditer(text))
    return tuple(dict.fromkeys(words for words in found if words))


def prefix_of(text: str, terms: tuple[str, ...]) -> str | None:
    """The word being typed: the search word ``text`` ends with, if it is long enough."""
    match = _LAST_WORD.search(searched(text))
    if match is None:
        return None
    word = match.group(0).lower()
    return word if len(word) >= PREFIX_MIN and word in terms else None


def parse_query(text: str, now: datetime, locale: str | None = None) -> ParsedQuery:
    """Keywords, phrases, time range (dates in the owner's ``locale`` too) and the word
    being typed of a query."""
    language = language_of(text, QUERY_CLUES)
    terms = terms_of(text, language)
    return ParsedQuery(
        text=text,
        terms=terms,
        time=parse_time(text, now, locale),
        words=tuple(words_of(text))[:64],
        phrases=phrases_of(text),
        prefix=prefix_of(text, terms),
        language=language,
    )
