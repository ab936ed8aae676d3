"""Stemming by language, the parts: a text's language from its function words, a stem
that no English word can equal and that both Porter stemmers pass unchanged, what a
query word is looked up as, and a query's function words dropped in its language."""

# ruff: noqa: RUF001 (Cyrillic text, on purpose)

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memvault.index.db import TOKENIZER, sqlite3
from memvault.index.query import parse_query
from memvault.index.scripts import indexed
from memvault.index.stemming import MARK, KeywordRow, lookups, stem, stemmed
from memvault.languages import QUERY_CLUES, language_of


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Die Hochzeit meiner Schwester ist im Mai am Bodensee.", "de"),
        ("Le rendez-vous chez le dentiste est mardi prochain à quinze heures.", "fr"),
        ("La rueda trasera de la bici está pinchada.", "es"),
        ("Моя сестра живёт в Москве с мужем.", "ru"),
        ("The spare key is hidden under the flowerpot by the door.", "en"),
        ("Dinner at La Casa de Pepe", "en"),  # two Spanish words do not outweigh English
        ("Flowerpot", None),  # too little evidence
        ("我下周二要去东京出差", None),
        ("Моя сестра живе у Києві.", None),  # Ukrainian: not stemmed as Russian
        (">>> x = [1, 2, 3]\n>>> y = [9, 8, 7]\n>>> correlation(x, y)", None),  # code
        ("Project home: https://gitlab.com/flufl/public, io.github.com", None),  # addresses
    ],
)
def test_a_text_is_in_the_language_its_function_words_say(text: str, language: str) -> None:
    assert language_of(text) == language


def test_a_query_needs_one_clue_among_the_languages_held() -> None:
    assert language_of("das Ende", QUERY_CLUES) is None  # "das": German or Portuguese
    assert language_of("das Ende", QUERY_CLUES, frozenset({"de"})) == "de"
    assert language_of("the end", QUERY_CLUES, frozenset({"de"})) == "en"


def test_a_stem_is_marked_with_its_language() -> None:
    assert stem("schwestern", "de") == stem("schwester", "de") == f"schwest{MARK}de{MARK}"
    assert stem("ende", "de") != "end"  # not English "end"'s stem
    assert stem("noche", "es") != stem("noch", "de")  # nor another language's
    assert stem("сестры", "ru") == f"сестр{MARK}ru{MARK}"


def test_no_text_can_write_the_mark() -> None:
    """The mark is a separator in any text given, so no word of a note ends so."""
    assert MARK not in indexed(f"Schwest{MARK}de{MARK} ok")
    assert indexed(f"schwest{MARK}de{MARK}").split() == ["schwest", "de"]


def test_both_porter_stemmers_pass_a_stem_unchanged() -> None:
    """FTS5's ``porter`` leaves a marked stem as it is (PostgreSQL's: the search tests)."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize = '{TOKENIZER}')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab('t', 'instance')")
    words = ["schwestern", "ferien", "enden", "chevaux", "hermanas", "сестры"]
    languages = ["de", "de", "de", "fr", "es", "ru"]
    stems = [stem(w, lang) for w, lang in zip(words, languages, strict=True)]
    conn.execute("INSERT INTO t VALUES (?)", (" ".join(stems),))
    held = [r[0] for r in conn.execute("SELECT term FROM v ORDER BY offset")]
    assert held == stems


def test_english_is_written_as_before() -> None:
    row = KeywordRow.of("The end of the road is near the mill.", "Walk", "Walk", "outdoors")
    assert (
        row.stemmed
        == row.written
        == tuple(
            map(indexed, ("The end of the road is near the mill.", "Walk", "Walk", "outdoors"))
        )
    )
    assert not row.languages


def test_each_line_of_a_note_in_two_languages_is_stemmed_by_its_own() -> None:
    text = "We fly to Munich on Friday and stay for the week.\nDie Tante holt uns am Flughafen ab."
    row = KeywordRow.of(text, "", "Trip", "")
    first, second = row.stemmed[0].split("\n")
    assert first == "We fly to Munich on Friday and stay for the week."
    assert second == stemmed("Die Tante holt uns am Flughafen ab.", "de")
    assert row.languages == {"de"}
    assert row.written[0] == indexed(text)  # the exact view: as written


def test_a_query_word_is_looked_up_in_its_language_first_then_every_language_held() -> None:
    held = frozenset({"de", "fr"})
    de, fr = stem("ende", "de"), stem("ende", "fr")
    assert lookups("ende", None, frozenset()) == ("ende",)  # English only: as before
    assert lookups("ende", "de", held) == (de, "ende", fr)
    assert lookups("end", "en", held) == ("end", stem("end", "de"), stem("end", "fr"))
    assert lookups("ende", "es", held) == ("ende", de, fr)  # a language not held: English
    assert lookups("ende", None, held) == ("ende", de, fr)
    assert lookups("2024", None, held) == ("2024",)  # numbers have no language


def test_a_query_drops_the_function_words_of_its_language() -> None:
    now = datetime(2026, 11, 28, tzinfo=UTC)
    parsed = parse_query("Wann ist das Ende der Ferien?", now)
    assert parsed.language == "de"
    assert parsed.terms == ("ende", "ferien")
    english = parse_query("when is the end of the holidays", now)
    assert english.language == "en"
    assert english.terms == ("end", "holidays")
