"""The text the keyword index holds in every script (memvault.index.scripts): CJK runs as
bigrams with their characters at the end, compatibility forms folded, ASCII untouched; a
query's words the same way, without the single characters."""

# ruff: noqa: RUF001 (full-width forms, on purpose)

from __future__ import annotations

from datetime import datetime

from memvault.index.query import parse_query, terms_of
from memvault.index.scripts import indexed, searched, words_of


def test_ascii_text_is_left_exactly_as_it_was() -> None:
    text = "The vendor's invoice (No. 42) -- due Friday!"
    assert indexed(text) == text
    assert searched(text) == text


def test_a_cjk_run_is_its_bigrams_and_then_its_characters() -> None:
    assert indexed("东京出差").split() == ["东京", "京出", "出差", "东", "京", "出", "差"]
    assert words_of("东京出差") == ["东京", "京出", "出差"]


def test_a_one_character_run_is_one_word_both_ways() -> None:
    assert indexed("猫").split() == ["猫"]
    assert words_of("猫") == ["猫"]
    assert terms_of("猫") == ("猫",)


def test_a_korean_word_with_its_particle_holds_the_word() -> None:
    assert words_of("부산") == ["부산"]
    assert "부산" in indexed("부산으로 갑니다").split()


def test_latin_letters_beside_cjk_are_a_word_of_their_own() -> None:
    assert words_of("iPhone充电器") == ["iphone", "充电", "电器"]
    assert indexed("iPhone充电器").split()[:3] == ["iphone", "充电", "电器"]


def test_full_width_and_half_width_forms_are_folded() -> None:
    assert words_of("ＷｉＦｉ　ＡＢＣ１２３") == ["wifi", "abc123"]
    assert words_of("ｶﾀｶﾅ") == ["カタ", "タカ", "カナ"]


def test_punctuation_beyond_ascii_separates_words() -> None:
    assert words_of("东京。出差「予約」—café…ok") == ["东京", "出差", "予約", "café", "ok"]
    assert words_of("日本・東京") == ["日本", "東京"]


def test_a_query_in_cjk_is_never_a_prefix_and_its_phrase_is_its_bigrams() -> None:
    parsed = parse_query('"东京出差" 酒店', datetime(2026, 11, 27))
    assert parsed.phrases == (("东京", "京出", "出差"),)
    assert parsed.terms == ("东京", "京出", "出差", "酒店")
    assert parsed.prefix is None
