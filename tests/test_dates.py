"""Dates in the owner's language (memvault.dates): read in queries with the owner's
locale and the query's script, English unchanged, nothing loaded without a date word."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime

import pytest
from pydantic import ValidationError

from memvault.clock import Clock
from memvault.config import Settings
from memvault.dates import find_date, languages_for
from memvault.errors import ConfigError
from memvault.index.query import parse_time
from support import TZ

NOW = datetime(2026, 11, 22, 9, 30, tzinfo=TZ)  # a Sunday


@pytest.mark.parametrize(
    ("text", "locale", "start", "end"),
    [
        # "Last week": the seven days up to a week ago, as English "last week" is.
        ("上周我和谁开会了", "zh-Hans", "2026-11-09", "2026-11-16"),
        ("was habe ich letzte Woche gekauft", "de", "2026-11-09", "2026-11-16"),
        ("qué hice la semana pasada", "es", "2026-11-09", "2026-11-16"),
        ("что я делал на прошлой неделе", "ru", "2026-11-09", "2026-11-16"),
        ("지난주 회의", "ko", "2026-11-09", "2026-11-16"),
        ("先月の会議", "ja", "2026-09-22", "2026-10-23"),
        ("qu'ai-je fait le 3 juin", "fr", "2026-06-03", "2026-06-04"),
        ("Urlaub im Juni 2023", "de", "2023-06-01", "2023-07-01"),
        ("vor 3 Tagen beim Arzt", "de", "2026-11-19", "2026-11-20"),
        ("was war am Montag", "de", "2026-11-16", "2026-11-17"),  # the last Monday
        ("6月3日の会議", "ja", "2026-06-03", "2026-06-04"),
        ("el 3 de junio de 2023", "es", "2023-06-03", "2023-06-04"),
        ("2023年6月的旅行", "zh", "2023-06-01", "2023-07-01"),
        # The script says the language when the locale does not.
        ("上周的会议", "de", "2026-11-09", "2026-11-16"),
        ("на прошлой неделе", "fr", "2026-11-09", "2026-11-16"),
    ],
)
def test_dates_in_the_owners_language(text: str, locale: str, start: str, end: str) -> None:
    found = parse_time(text, NOW, locale)
    assert found is not None
    assert (found.start.date().isoformat(), found.end.date().isoformat()) == (start, end)
    assert found.start.tzinfo is TZ


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("What did Maria say on 3 June, 2023?", "2023-06-03", "2023-06-04"),
        ("the week before August 3, 2023", "2023-07-27", "2023-08-03"),
        ("what happened in 2022", "2022-01-01", "2023-01-01"),
        ("what did I decide yesterday", "2026-11-21", "2026-11-22"),
        ("last week", "2026-11-09", "2026-11-16"),
        ("3 days ago", "2026-11-18", "2026-11-21"),
    ],
)
@pytest.mark.parametrize("locale", [None, "en", "de", "fr", "ja"])
def test_english_dates_read_as_before_whatever_the_locale(
    text: str, start: str, end: str, locale: str | None
) -> None:
    found = parse_time(text, NOW, locale)
    assert found is not None
    assert (found.start.date().isoformat(), found.end.date().isoformat()) == (start, end)


@pytest.mark.parametrize(
    "text",
    [
        "the 2 cats",
        "what is 2023-13-45",
        "Schwester Anna mag Tee",
        "qwzx vbnm plokij",
        "vacaciones en el mar",  # "mar" is March only as an abbreviation
        "Montagsmaler und Sonntagsbraten",
        "東京の歯医者",
    ],
)
@pytest.mark.parametrize("locale", ["de", "es", "ja"])
def test_no_date_no_range(text: str, locale: str) -> None:
    assert parse_time(text, NOW, locale) is None


@pytest.mark.parametrize("text", ["上周的会议", "letzte Woche", "le 3 juin", "지난주", "先月"])
def test_without_a_locale_only_english_dates_are_read(text: str) -> None:
    assert parse_time(text, NOW) is None
    assert parse_time(text, NOW, None) is None


def test_the_script_names_the_languages() -> None:
    assert languages_for("letzte Woche", None) == ()
    assert languages_for("letzte Woche", "de-DE") == ("de",)
    assert languages_for("先週の会議", "de") == ("ja", "zh")  # kana: Japanese; Han: either
    assert languages_for("上周", "zh_Hant_TW") == ("zh-Hant",)
    assert languages_for("지난주", "fr") == ("ko",)
    assert languages_for("вчера", "uk") == ("uk",)
    assert languages_for("вчера", "de") == ("ru",)
    assert languages_for("yesterday", "en") == ()  # English has its own patterns
    assert languages_for("yesterday", "de", english=True) == ("de", "en")


@pytest.mark.parametrize("locale", ["xx", "not a locale", "de-"])
def test_an_unknown_locale_is_one_sentence(locale: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Clock(TZ, locale=locale)
    assert caught.value.message.endswith(".") and "\n" not in caught.value.message
    with pytest.raises(ValidationError, match="locale"):
        Settings(locale=locale)
    assert Settings(locale="fr-FR").locale == "fr-FR"
    assert Settings(locale="").locale is None


def test_dateparser_is_loaded_only_for_a_month_or_weekday_name() -> None:
    """The check before dateparser is cheap: a query without a date word (in the
    locale's language or its script's) does not import it, nor does a phrase that
    counts from now ("letzte Woche", "vor 3 Tagen", "上周": dateparser's own table of
    them is read as data); a month by name ("im Juni 2023") is dateparser's to read."""
    script = (
        "import sys\n"
        "from datetime import datetime, timezone\n"
        "from memvault.index.query import parse_query\n"
        "now = datetime(2026, 11, 22, tzinfo=timezone.utc)\n"
        "for q in ('Schwester Anna', '東京の歯医者', 'Apollo rehearsal notes'):\n"
        "    assert parse_query(q, now, 'de').time is None\n"
        "for q in ('letzte Woche', 'vor 3 Tagen', '上周'):\n"
        "    assert parse_query(q, now, 'de').time is not None\n"
        "print('dateparser' in sys.modules)\n"
        "assert parse_query('im Juni 2023', now, 'de').time is not None\n"
        "print('dateparser' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "True"]


@pytest.mark.parametrize("language", ["de", "fr", "es", "ru", "zh", "ja", "ko", "en"])
def test_relative_phrases_count_as_dateparser_counts_them(language: str) -> None:
    """memvault counts dateparser's relative phrases itself (so that they never load
    it): every one of the language's phrases gives the moment dateparser gives, also
    on a month's last day."""
    import importlib

    import dateparser

    table = importlib.import_module(f"dateparser.data.date_translation_data.{language}")
    base = datetime(2026, 3, 31, 9, 30)
    phrases = [
        phrase
        for key, listed in table.info["relative-type"].items()
        if key.split()[-1] in ("day", "week", "month", "year")
        or key.split()[-2] in ("day", "week", "month", "year")
        for phrase in listed
    ]
    phrases += ["vor 3 Tagen", "il y a 3 jours", "hace 3 días", "3 дня назад", "3天前"]
    phrases += ["3日前", "3일 전", "3 days ago", "in 2 Wochen", "vor 2 Monaten"]
    compared = 0
    for phrase in phrases:
        found = find_date(phrase, base, [language], relative=True)
        theirs = dateparser.parse(phrase, languages=[language], settings={"RELATIVE_BASE": base})
        if found is None:
            continue  # another language's phrase
        assert found.phrase == phrase
        assert found.moment == theirs, phrase
        compared += 1
    assert compared >= 10


def test_dateparser_reads_dates_with_no_network() -> None:
    """Everything dateparser needs ships in its wheel: with every socket refused, a month
    name in three languages is still read (nothing is downloaded at run time)."""
    script = (
        "import socket\n"
        "def refuse(*args, **kwargs):\n"
        "    raise OSError('no network in this test')\n"
        "socket.socket = refuse\n"
        "socket.create_connection = refuse\n"
        "socket.getaddrinfo = refuse\n"
        "from datetime import datetime, timezone\n"
        "from memvault.index.query import parse_time\n"
        "now = datetime(2026, 11, 22, tzinfo=timezone.utc)\n"
        "for text, locale in (('im Juni 2023', 'de'), ('le 3 juin', 'fr'), ('6月3日', 'ja')):\n"
        "    print(parse_time(text, now, locale).start.date())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["2023-06-01", "2026-06-03", "2026-06-03"]
