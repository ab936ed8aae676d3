"""Ranking properties on generated vaults: what a person types first must come first.

- a word (or code) that occurs in one note of many finds that note first,
  whatever the rest of the vault says and whatever words surround it in the query;
- a quoted phrase, or words copied in order from a note, find that note first;
- nothing relevant is an empty answer, not the least bad of a weak lot.

Vaults are real files indexed by the real index. Most properties run with the
tests' hashing embedder (cheap enough for many generated vaults); the ones
that depend on meaning also run with the real local model.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memvault.config import SearchSettings, Settings
from memvault.errors import InvalidInputError
from memvault.index.embedders import Embedder, LocalEmbedder
from memvault.index.filters import SearchFilters
from memvault.index.local_model import ModelFile
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import TZ, HashEmbedder, MovableClock

# Ordinary words for the surrounding text: notes share them freely.
WORDS = """
the garden needs water before the summer heat arrives and the roses want pruning
our team meets on monday to plan the release schedule for the mobile app and web
remember to call the bank about the mortgage rate and the insurance renewal date
the kitchen tap drips again so buy a new washer from the hardware store downtown
travel plans include a train to the coast a week by the sea and a ferry home
book club reads a novel about a lighthouse keeper who writes letters to the moon
the car needs new tyres and an oil change before the long drive in the autumn
invoice numbers go in the ledger and receipts in the blue folder on the shelf
""".split()
VOCABULARY = sorted(set(WORDS))
# Planted tokens: none of these letters-and-digits shapes occur in WORDS.
TOKENS = st.from_regex(r"[A-Z]{4,8}-[0-9]{2,4}|[a-z]{3}[0-9][a-z]{3}|zq[a-z]{5,9}", fullmatch=True)
FRESH = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def open_vault(root: Path, embedder: Embedder, **search: object) -> Runtime:
    if root.exists():
        shutil.rmtree(root)
    init_vault(Vault(root))
    return Runtime.open(
        Settings(vault=root, search=SearchSettings(**search)),  # type: ignore[arg-type]
        clock=MovableClock(datetime(2026, 11, 22, 9, 30, tzinfo=TZ)),
        embedder=embedder,
    )


def fill(runtime: Runtime, notes: dict[str, str]) -> Runtime:
    for path, text in notes.items():
        target = runtime.vault.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    runtime.index.sync()
    runtime.index.embed_pending()
    return runtime


def sentence(words: list[str]) -> str:
    return " ".join(words).capitalize() + "."


def first_note(runtime: Runtime, query: str, **options: object) -> str | None:
    hits = runtime.searcher.search(query, limit=20, **options)  # type: ignore[arg-type]
    return hits[0].path if hits else None


notes_strategy = st.lists(
    st.lists(st.sampled_from(VOCABULARY), min_size=5, max_size=60), min_size=2, max_size=30
)


@FRESH
@given(
    bodies=notes_strategy,
    token=TOKENS,
    where=st.integers(min_value=0),
)
def test_a_word_in_one_note_finds_that_note_first(
    tmp_path: Path, bodies: list[list[str]], token: str, where: int
) -> None:
    target = where % len(bodies)
    notes = {
        f"Notes/n{i}.md": f"# Note {i}\n\n{sentence(words)}\n" for i, words in enumerate(bodies)
    }
    planted = bodies[target][:]
    planted.insert(len(planted) // 2, token)
    notes[f"Notes/n{target}.md"] = f"# Note {target}\n\n{sentence(planted)}\n"
    runtime = fill(open_vault(tmp_path / "vault", HashEmbedder()), notes)
    try:
        assert first_note(runtime, token) == f"Notes/n{target}.md"
        assert first_note(runtime, token.lower()) == f"Notes/n{target}.md"
        assert first_note(runtime, f'"{token}"') == f"Notes/n{target}.md"
    finally:
        runtime.close()


@FRESH
@given(bodies=notes_strategy, phrase=st.lists(st.sampled_from(VOCABULARY), min_size=3, max_size=5))
def test_a_quoted_phrase_finds_the_note_that_holds_it_in_order(
    tmp_path: Path, bodies: list[list[str]], phrase: list[str]
) -> None:
    assume(len(set(phrase)) == len(phrase))
    text = " ".join(phrase)
    # Every other note holds the phrase's words too, but never in that order.
    scrambled = [*reversed(phrase), "and"]
    notes = {
        f"Notes/n{i}.md": f"# Note {i}\n\n{sentence(words + scrambled)}\n"
        for i, words in enumerate(bodies)
    }
    assume(all(text not in body.lower() for body in notes.values()))
    notes["Notes/target.md"] = f"# Target\n\n{sentence(bodies[0][:3] + phrase + bodies[0][3:])}\n"
    runtime = fill(open_vault(tmp_path / "vault", HashEmbedder()), notes)
    try:
        assert first_note(runtime, f'"{text}"') == "Notes/target.md"
        assert first_note(runtime, f"“{text}”") == "Notes/target.md"  # curly quotes too
        assert first_note(runtime, text) == "Notes/target.md"  # copied without quotes
    finally:
        runtime.close()


def test_a_quoted_phrase_is_found_even_when_its_words_are_everywhere(tmp_path: Path) -> None:
    notes = {
        f"Notes/n{i}.md": f"# Note {i}\n\nThe code for the harbour gate; the dinghy code {i}.\n"
        for i in range(40)
    }
    notes["Notes/secret.md"] = "# Boat\n\nThe secret harbour code for the dinghy is PELICAN-42.\n"
    runtime = fill(open_vault(tmp_path / "vault", HashEmbedder()), notes)
    try:
        assert first_note(runtime, '"harbour code"') == "Notes/secret.md"
        assert first_note(runtime, "PELICAN-42") == "Notes/secret.md"
        assert first_note(runtime, "pelican-42") == "Notes/secret.md"
    finally:
        runtime.close()


def test_keyword_evidence_means_the_same_in_a_small_and_a_large_vault(tmp_path: Path) -> None:
    scores = []
    for size in (3, 300):
        notes = {
            f"Notes/n{i}.md": f"# Note {i}\n\n{sentence(WORDS[i % 50 : i % 50 + 20])}\n"
            for i in range(size)
        }
        notes["Notes/target.md"] = "# Target\n\nThe ferry ticket number is QX-7781.\n"
        runtime = fill(open_vault(tmp_path / f"vault{size}", HashEmbedder()), notes)
        try:
            hit = runtime.searcher.search("QX-7781", limit=1)[0]
            assert hit.path == "Notes/target.md"
            assert hit.text_score == pytest.approx(1.0)
            scores.append(hit.score)
        finally:
            runtime.close()
    # Holding every query word is worth more than any meaning alone, in any vault.
    assert all(score > 1.0 for score in scores)


def test_a_word_written_after_a_search_is_found_by_the_next(tmp_path: Path) -> None:
    runtime = fill(open_vault(tmp_path / "vault", HashEmbedder()), {"Notes/a.md": "# A\n\nKites."})
    try:
        assert runtime.searcher.search("ripstop", mode="keyword") == []
        runtime.notes.write("Notes/b.md", "# B\n\nA delta kite with a ripstop sail.\n")
        assert [h.path for h in runtime.searcher.search("ripstop", mode="keyword")] == [
            "Notes/b.md"
        ]
    finally:
        runtime.close()


def test_vector_mode_ranks_by_cosine_and_keyword_mode_needs_no_vector(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    notes = {
        f"Notes/n{i}.md": f"# N{i}\n\n{sentence(WORDS[i * 7 : i * 7 + 12])}\n" for i in range(12)
    }
    runtime = fill(open_vault(tmp_path / "vault", embedder), notes)
    try:
        query = "train to the coast and a ferry"
        hits = runtime.searcher.search(query, limit=50, mode="vector", min_score=0)
        cosines = [h.vector_score for h in hits]
        assert hits.mode == "vector" and cosines == sorted(cosines, reverse=True)
        calls = embedder.calls
        keyword = runtime.searcher.search(query, mode="keyword")
        assert keyword.mode == "keyword" and embedder.calls == calls
        assert all(h.vector_score == 0 for h in keyword)
        with pytest.raises(InvalidInputError, match="search mode"):
            runtime.searcher.search(query, mode="fuzzy")
    finally:
        runtime.close()


# -- with the real local model -------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm(prepared_model: ModelFile) -> LocalEmbedder:
    embedder = LocalEmbedder(model_cache=prepared_model.cache)
    embedder.warm()
    return embedder


@pytest.fixture
def memories(tmp_path: Path, minilm: LocalEmbedder) -> Iterator[Callable[..., Runtime]]:
    opened: list[Runtime] = []

    def make(*texts: str) -> Runtime:
        runtime = open_vault(tmp_path / f"vault{len(opened)}", minilm)
        for text in texts:
            runtime.memories.remember(text)
        runtime.index.sync()
        runtime.index.embed_pending()
        opened.append(runtime)
        return runtime

    yield make
    for runtime in opened:
        runtime.close()


def test_nothing_relevant_is_an_empty_answer(memories: Callable[..., Runtime]) -> None:
    one = memories("Garage door code is XK-4471")
    recall = {"kinds": ("memory",)}
    assert one.searcher.search("drinks", filters=_filters(recall)) == []
    assert one.searcher.search("boat", filters=_filters(recall)) == []
    # The closest match is still there for whoever asks for it.
    closest = one.searcher.search("drinks", min_score=0, filters=_filters(recall))
    assert [h.snippet for h in closest] == ["Garage door code is XK-4471"]
    assert closest[0].score < one.settings.search.min_score

    many = memories(
        "Garage door code is XK-4471",
        "The owner drinks oolong every morning before work",
        "Evening runs happen on Tuesdays",
        "Lunch is a salad from the deli downstairs",
    )
    found = many.searcher.search("what does the owner like to drink")
    assert found and found[0].snippet == "The owner drinks oolong every morning before work"
    assert many.searcher.search("sailing boat mooring fees") == []


def test_a_planted_word_comes_first_with_the_real_model(
    memories: Callable[..., Runtime],
) -> None:
    texts = [
        "Breakfast is usually porridge with berries",
        "Chamomile before bed helps the owner sleep",
        "The harbour master's office opens at eight",
        "Boats in the marina pay mooring fees monthly",
        "The dinghy needs a new coat of varnish",
        "Sailing lessons start again in April",
    ]
    for token, text in [
        ("PELICAN-42", "The secret harbour code for the dinghy is PELICAN-42"),
        ("quokka", "A quokka photo is the laptop wallpaper"),
        ("Zephyrine", "Aunt Zephyrine visits every second Sunday"),
    ]:
        runtime = memories(*itertools.chain(texts, [text]))
        hits = runtime.searcher.search(token)
        assert hits[0].snippet == text, token


def test_hostile_queries_are_searched_not_crashed_on(memories: Callable[..., Runtime]) -> None:
    runtime = memories("The secret harbour code for the dinghy is PELICAN-42")
    for query in [
        "PELICAN-42 \udcff",  # a lone surrogate, as a stray byte in a terminal arrives
        'PELICAN-42 NEAR(a b) OR code* ^x "',  # FTS5 syntax is only words here
        '"PELICAN 42" """',
        "PELICAN-42 " + "x" * 5000,
    ]:
        hits = runtime.searcher.search(query)
        assert hits.mode == "hybrid" and hits[0].snippet.endswith("PELICAN-42"), query


def _filters(values: dict[str, object]) -> object:
    from memvault.index.filters import SearchFilters

    return SearchFilters(**values)  # type: ignore[arg-type]


def test_a_filtered_search_by_meaning_finds_the_nearest_the_filter_keeps(tmp_path: Path) -> None:
    """Ten candidates among 300 notes and 12 memories: a search kept to memories goes
    deeper than the unfiltered nearest (then deeper still, then over every memory), and
    its candidates are the memories nearest the query, whichever depth found them."""
    embedder = HashEmbedder()
    notes = {
        f"Notes/n{i:03d}.md": f"# N{i}\n\n{sentence(WORDS[i % 60 : i % 60 + 10])}\n"
        for i in range(300)
    }
    runtime = fill(open_vault(tmp_path / "vault", embedder, candidates=10), notes)
    try:
        for i in range(12):
            runtime.memories.remember(sentence(WORDS[i * 5 : i * 5 + 6]))
        runtime.index.embed_pending()
        rows = runtime.index.conn.execute("SELECT id FROM chunks WHERE kind = 'memory'")
        memory_chunks = [int(r[0]) for r in rows]
        vectors = runtime.index.vectors.get(memory_chunks)
        memories_only = SearchFilters(kinds=("memory",))
        for query in ("the garden and the roses", "a train to the coast", "the bank", "oil"):
            qvec, _ = runtime.index.embed_query(query)
            assert qvec is not None
            cosine = {chunk: float(vectors[chunk] @ qvec) for chunk in memory_chunks}
            nearest = sorted(memory_chunks, key=lambda chunk: -cosine[chunk])[:10]
            hits = runtime.searcher.search(
                query, limit=10, mode="vector", filters=memories_only, min_score=-1
            )
            # As cosines: memories as near as each other may stand in for one another.
            found = sorted(round(cosine[h.chunk_id], 5) for h in hits)
            assert found == sorted(round(cosine[chunk], 5) for chunk in nearest), query
    finally:
        runtime.close()
