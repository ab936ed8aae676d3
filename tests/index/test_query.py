from __future__ import annotations

from datetime import datetime

import pytest

from memvault.index.query import parse_query, parse_time, terms_of
from support import TZ

NOW = datetime(2026, 11, 22, 9, 30, tzinfo=TZ)


def test_terms_drop_function_words_and_keep_the_rest() -> None:
    assert terms_of("When did Caroline go to the LGBTQ support group?") == (
        "caroline",
        "go",
        "lgbtq",
        "support",
        "group",
    )
    assert terms_of("What is it?") == ("what", "is", "it")  # nothing else left: keep them
    assert terms_of("café Ñandú 東京") == ("café", "ñandú", "東京")
    assert terms_of("?!") == ()


def test_fts_expression_quotes_every_term() -> None:
    parsed = parse_query('NEAR(a b) "title:x" OR * AND', NOW)
    assert parsed.fts == '"near" OR "b" OR "title" OR "x"'


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("What did Maria say on 3 June, 2023?", "2023-06-03", "2023-06-04"),
        ("painting shown on October 13, 2023", "2023-10-13", "2023-10-14"),
        ("notes from 2024-02-29", "2024-02-29", "2024-03-01"),
        ("volunteering in August 2023", "2023-08-01", "2023-09-01"),
        ("in December 2023 we moved", "2023-12-01", "2024-01-01"),
        ("the week before August 3, 2023", "2023-07-27", "2023-08-03"),
        ("the day after 1 May 2023", "2023-05-02", "2023-05-03"),
        ("what happened in 2022", "2022-01-01", "2023-01-01"),
        ("what did I decide yesterday", "2026-11-21", "2026-11-22"),
        ("today's plan", "2026-11-22", "2026-11-23"),
    ],
)
def test_time_ranges(text: str, start: str, end: str) -> None:
    found = parse_time(text, NOW)
    assert found is not None
    assert (found.start.date().isoformat(), found.end.date().isoformat()) == (start, end)
    assert found.start.tzinfo is TZ


def test_an_impossible_day_falls_back_to_its_month() -> None:
    found = parse_time("31 February, 2023", NOW)
    assert found is not None and found.start.date().isoformat() == "2023-02-01"


@pytest.mark.parametrize("text", ["the 2 cats", "what is 2023-13-45", "no dates"])
def test_no_time_range(text: str) -> None:
    assert parse_time(text, NOW) is None
