"""Partial words, on SQLite and PostgreSQL: the word being typed also matches as the start
of a longer one, after every whole-word match; a short one is not expanded; and nothing
typed is read as full-text syntax."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from memvault.index.query import PREFIX_MIN, parse_query
from memvault.runtime import Runtime

pytestmark = pytest.mark.both_backends

VENDOR = "Vendors/Acme.md"
WHOLE = "Notes/Market.md"
OTHER = "Notes/Garden.md"


@pytest.fixture
def typed(runtime: Runtime, write: Callable[[str, str], Path]) -> Runtime:
    write(VENDOR, "# Acme\n\nCall the vendor about the invoice; the vendor ships on Fridays.\n")
    write(WHOLE, "# Market\n\nA sign at the market said: vendo bicicletta, near the bridge.\n")
    write(OTHER, "# Garden\n\nWater the tomatoes; the hose is near the shed.\n")
    for n in range(8):
        write(f"Notes/Filler {n}.md", f"# Filler {n}\n\nNothing to see in filler {n} here.\n")
    runtime.index.sync()
    runtime.index.embed_pending()
    return runtime


def paths(runtime: Runtime, query: str, mode: str = "keyword") -> list[str]:
    """The test's notes found, best first (keyword search: every match, no floor)."""
    floor = 0.0 if mode == "keyword" else None
    hits = runtime.searcher.search(query, limit=50, mode=mode, min_score=floor)
    return list(dict.fromkeys(h.path for h in hits if h.path.startswith(("Notes/", "Vendors/"))))


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_the_word_being_typed_finds_longer_words_after_whole_ones(
    typed: Runtime, mode: str
) -> None:
    found = paths(typed, "vendo", mode)
    assert found[:2] == [WHOLE, VENDOR]  # the word itself first, then words it starts
    assert paths(typed, "invoice vendo", mode)[0] == VENDOR
    assert paths(typed, "ACME VEND", mode)[0] == VENDOR  # any case


def test_a_finished_word_is_not_a_prefix(typed: Runtime) -> None:
    """Followed by a space or a mark, the word was finished: whole words only."""
    assert paths(typed, "vendo?") == [WHOLE]
    assert paths(typed, "vendo.") == [WHOLE]
    assert VENDOR not in paths(typed, '"vendo"')


def test_a_short_prefix_is_not_expanded(typed: Runtime) -> None:
    assert PREFIX_MIN == 3
    assert parse_query("ve", datetime(2026, 1, 1)).prefix is None
    assert parse_query("notes on the", datetime(2026, 1, 1)).prefix is None  # function word
    assert parse_query("ven", datetime(2026, 1, 1)).prefix == "ven"
    # Two letters match whole words only: no note holds "ve" or "ne" alone.
    assert paths(typed, "ve") == []
    assert paths(typed, "ne") == []
    assert sorted(paths(typed, "ven")) == [WHOLE, VENDOR]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("vendo*", [WHOLE]),  # '*' is a mark, not FTS5's prefix operator
        ('"vendo', [WHOLE, VENDOR]),  # an unclosed quote, then the word being typed
        ("NEAR(vendor shed)", [VENDOR, OTHER, WHOLE]),  # NEAR and brackets: plain words
        ("-vendor", [VENDOR]),  # a minus excludes nothing
        ("text:vendor", [VENDOR]),  # no column filter
        ("vendor AND hose", [OTHER, VENDOR]),  # AND is a word: either note answers
        ("vendor OR", [VENDOR]),
        ("^bicicletta", [WHOLE]),
        ("vendor's ship", [VENDOR]),
        ("{text title}: ship", [VENDOR]),
        ("'vendo' *", [WHOLE]),
    ],
)
def test_full_text_syntax_in_the_query_is_plain_text(
    typed: Runtime, query: str, expected: list[str]
) -> None:
    found = paths(typed, query)
    assert sorted(found) == sorted(expected), found
