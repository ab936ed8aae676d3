"""Dates in the owner's language, end to end: a query's date picks the memories of
that time; a memory's "gestern" is resolved to its day when it is stored."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date, datetime

import pytest

from memvault.config import Settings
from memvault.index.filters import SearchFilters
from memvault.runtime import Runtime
from memvault.vault.store import Vault
from support import TZ, HashEmbedder, MovableClock

NOW = datetime(2026, 11, 22, 9, 30, tzinfo=TZ)  # a Sunday

Owner = Callable[[str | None], Runtime]


@pytest.fixture
def owner(vault: Vault, clock: MovableClock, embedder: HashEmbedder) -> Iterator[Owner]:
    """A runtime over the test's vault with the owner's ``locale`` (None: unset)."""
    opened: list[Runtime] = []

    def open_with(locale: str | None) -> Runtime:
        settings = Settings(vault=vault.root, timezone="Europe/Berlin", locale=locale)
        runtime = Runtime.open(settings, clock=MovableClock(clock.moment), embedder=embedder)
        opened.append(runtime)
        return runtime

    yield open_with
    for runtime in opened:
        runtime.close()


def _first(runtime: Runtime, query: str) -> str | None:
    """The id of the first memory a search finds (the vault's own notes left aside)."""
    hits = runtime.searcher.search(
        query, limit=4, min_score=0, filters=SearchFilters(kinds=("memory",))
    )
    return hits[0].id if hits else None


def _remember_at(runtime: Runtime, moment: datetime, text: str) -> str:
    assert isinstance(runtime.clock, MovableClock)
    runtime.clock.set(moment)
    return runtime.memories.remember(text, source="cli").memory.id


@pytest.fixture
def dated(owner: Owner) -> Callable[[str | None], tuple[Runtime, dict[str, str]]]:
    """Four memories alike but for when they were written; the newest is yesterday's."""

    def make(locale: str | None) -> tuple[Runtime, dict[str, str]]:
        runtime = owner(locale)
        ids = {
            "june": _remember_at(
                runtime, datetime(2026, 6, 3, 18, 0, tzinfo=TZ), "Apollo memo one"
            ),
            "last month": _remember_at(
                runtime, datetime(2026, 10, 14, 18, 0, tzinfo=TZ), "Apollo memo two"
            ),
            "last week": _remember_at(
                runtime, datetime(2026, 11, 12, 18, 0, tzinfo=TZ), "Apollo memo three"
            ),
            "yesterday": _remember_at(
                runtime, datetime(2026, 11, 21, 18, 0, tzinfo=TZ), "Apollo memo four"
            ),
        }
        assert isinstance(runtime.clock, MovableClock)
        runtime.clock.set(NOW)
        runtime.index.sync()
        return runtime, ids

    return make


@pytest.mark.parametrize(
    ("query", "locale", "when"),
    [
        ("上周 Apollo", "zh-Hans", "last week"),
        ("Apollo letzte Woche", "de", "last week"),
        ("Apollo le 3 juin", "fr", "june"),
        ("Apollo la semana pasada", "es", "last week"),
        ("Apollo на прошлой неделе", "ru", "last week"),
        ("先月の Apollo", "ja", "last month"),
        ("지난주 Apollo", "ko", "last week"),
        ("上周 Apollo", "de", "last week"),  # the script says Chinese
    ],
)
def test_a_date_in_the_owners_language_finds_that_times_memories(
    dated: Callable[[str | None], tuple[Runtime, dict[str, str]]],
    query: str,
    locale: str,
    when: str,
) -> None:
    runtime, ids = dated(locale)
    assert _first(runtime, query) == ids[when]
    # Without the date (or the locale) the newest comes first: the date is what moved it.
    assert _first(runtime, "Apollo") == ids["yesterday"]


def test_without_a_locale_only_english_dates_move_results(
    dated: Callable[[str | None], tuple[Runtime, dict[str, str]]],
) -> None:
    runtime, ids = dated(None)
    assert _first(runtime, "Apollo letzte Woche") == ids["yesterday"]
    assert _first(runtime, "Apollo last week") == ids["last week"]


@pytest.mark.parametrize(
    ("locale", "text", "day"),
    [
        ("de", "Gestern habe ich Anna im Apollo getroffen", date(2026, 11, 21)),
        ("de", "Vor 3 Tagen war Ben beim Zahnarzt", date(2026, 11, 19)),
        ("fr", "Hier j'ai dîné avec Marie", date(2026, 11, 21)),
        ("fr", "Avant-hier Paul a appelé", date(2026, 11, 20)),
        ("ja", "昨日、歯医者に行った", date(2026, 11, 21)),
        ("ja", "先週、大阪に出張した", date(2026, 11, 15)),
        ("zh-Hans", "昨天和李雷吃饭", date(2026, 11, 21)),
        ("de", "Yesterday I met Bob", date(2026, 11, 21)),  # English is read too
    ],
)
def test_a_relative_day_is_resolved_when_stored(
    owner: Owner, locale: str, text: str, day: date
) -> None:
    runtime = owner(locale)
    memory = runtime.memories.remember(text).memory
    assert memory.when == day
    assert f"[when:: {day.isoformat()}]" in runtime.vault.read_text("Memory/Facts.md")
    # Read back from the file as it was written, the day stays.
    assert runtime.memories.get(memory.id).when == day


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        (None, "Gestern habe ich Anna getroffen"),  # no locale: as before
        (None, "Yesterday I met Bob"),
        ("de", "Schwester Anna mag grünen Tee"),
        ("de", "Heute ist Anna in Berlin"),  # today is the day it is stored
        ("fr", "Marie aime le mois de juin"),  # a month by name is no day that counted from now
        ("ja", "東京の歯医者は高い"),
    ],
)
def test_no_relative_day_no_when(owner: Owner, locale: str | None, text: str) -> None:
    memory = owner(locale).memories.remember(text).memory
    assert memory.when is None and "when" not in memory.fields


def test_a_stored_memory_is_searched_as_from_the_day_it_names(owner: Owner) -> None:
    runtime = owner("de")
    assert isinstance(runtime.clock, MovableClock)
    before = runtime.memories.remember("Apollo Besprechung mit Anna").memory  # today
    told = runtime.memories.remember("Gestern war die Apollo Besprechung mit Ben").memory
    runtime.clock.set(datetime(2026, 11, 30, 9, 0, tzinfo=TZ))
    runtime.index.sync()
    assert _first(runtime, "Apollo Besprechung 2026-11-21") == told.id
    assert _first(runtime, "Apollo Besprechung 2026-11-22") == before.id


def test_an_edited_text_names_its_day_from_when_it_was_stored(owner: Owner) -> None:
    runtime = owner("de")
    assert isinstance(runtime.clock, MovableClock)
    memory = runtime.memories.remember("Anna war beim Zahnarzt").memory
    runtime.clock.set(datetime(2026, 12, 5, 9, 0, tzinfo=TZ))  # edited two weeks on
    edited = runtime.memories.update_text(memory.id, "Anna war vorgestern beim Zahnarzt")
    assert edited.when == date(2026, 11, 20)  # two days before it was stored, not edited
    plain = runtime.memories.update_text(memory.id, "Anna war beim Zahnarzt in Bonn")
    assert plain.when is None and "[when::" not in runtime.vault.read_text("Memory/Facts.md")
