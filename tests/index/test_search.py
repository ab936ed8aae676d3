from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memvault.errors import InvalidInputError, NotFoundError
from memvault.index.filters import SearchFilters
from memvault.index.graph import backlinks, related, search_by_tag
from memvault.runtime import Runtime
from support import HIT_KEYS, TZ, MovableClock

pytestmark = pytest.mark.both_backends


@pytest.fixture
def filled(runtime: Runtime, write: Callable[[str, str], Path], clock: MovableClock) -> Runtime:
    clock.set(datetime(2023, 5, 8, 14, 0, tzinfo=TZ))
    runtime.memories.remember(
        "Launch checklist lives in the hangar", tags=["project/apollo"], source="cli"
    )
    clock.set(datetime(2026, 11, 20, 9, 0, tzinfo=TZ))
    runtime.memories.remember(
        "Prefers launch windows at dawn", category="preference", tags=["project"]
    )
    runtime.tasks.create(
        "Launch rehearsal", "Walk through the launch", priority="high", tags=["project"]
    )
    write(
        "Projects/Apollo.md",
        "---\ntags: [project/apollo]\n---\n# Apollo\n\nThe launch was in 1969. See [[Gemini]].\n",
    )
    write("Projects/Gemini.md", "# Gemini\n\nTwo-person launch capsule. Back to [[Apollo]].\n")
    write("Archive/Old launch.md", "# Old launch\n\nA launch long ago.\n" + "filler words " * 200)
    runtime.index.sync()
    runtime.index.embed_pending()
    return runtime


def test_hits_have_the_openclaw_compatible_shape(filled: Runtime) -> None:
    hits = filled.searcher.search("launch", limit=20)
    assert hits and all(set(h.to_dict()) == HIT_KEYS for h in hits)
    assert all(len(h.snippet) <= 700 for h in hits)
    memory = next(h for h in hits if h.kind == "memory")
    assert memory.source == "memory" and memory.id is not None and memory.id.startswith("m-")
    assert memory.path.startswith("Memory/") and memory.start_line == memory.end_line
    note = next(h for h in hits if h.path == "Projects/Apollo.md")
    assert note.source == "vault" and note.id is None and note.title == "Apollo"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_filters(filled: Runtime) -> None:
    def paths(**kwargs: object) -> set[str]:
        return {
            h.path
            for h in filled.searcher.search("launch", limit=50, filters=SearchFilters(**kwargs))
        }  # type: ignore[arg-type]

    assert paths(folder="Projects") == {"Projects/Apollo.md", "Projects/Gemini.md"}
    assert paths(kinds=("task",)) == {"Tasks/active/Launch rehearsal.md"}
    assert paths(kinds=("memory",)) == {"Memory/Facts.md", "Memory/Preferences.md"}
    assert paths(category="preference") == {"Memory/Preferences.md"}
    assert paths(tags=("project/apollo",)) == {"Memory/Facts.md", "Projects/Apollo.md"}
    assert paths(tags=("project",)) == {
        "Memory/Facts.md",
        "Memory/Preferences.md",
        "Tasks/active/Launch rehearsal.md",
        "Projects/Apollo.md",
    }  # nested tags count
    assert paths(kinds=("memory",), until=datetime(2024, 1, 1, tzinfo=TZ)) == {"Memory/Facts.md"}
    assert paths(kinds=("memory",), since=datetime(2024, 1, 1, tzinfo=TZ)) == {
        "Memory/Preferences.md"
    }


def test_archived_memories_need_asking(filled: Runtime) -> None:
    memory = filled.memories.list(category="preference")[0]
    filled.memories.update_fields(memory.id, archived="2026-11-22")
    assert memory.id not in {h.id for h in filled.searcher.search("dawn")}
    found = filled.searcher.search("dawn", filters=SearchFilters(include_archived=True))
    assert memory.id in {h.id for h in found}


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        (SearchFilters(kinds=("bogus",)), "Unknown kind"),
        (SearchFilters(category="gossip"), "Unknown memory category"),
        (SearchFilters(folder="../x"), "not allowed"),
        (
            SearchFilters(
                since=datetime(2026, 2, 1, tzinfo=TZ), until=datetime(2026, 1, 1, tzinfo=TZ)
            ),
            "ends before",
        ),
    ],
)
def test_bad_filters_are_explained(filled: Runtime, filters: SearchFilters, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        filled.searcher.search("launch", filters=filters)


def test_bad_queries_are_explained(filled: Runtime) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        filled.searcher.search("   ")
    with pytest.raises(InvalidInputError, match="limit"):
        filled.searcher.search("launch", limit=0)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(min_size=1, max_size=300))
def test_any_query_string_is_safe(filled: Runtime, query: str) -> None:
    if not query.strip():
        return
    hits = filled.searcher.search(query, mode="keyword")
    assert isinstance(hits, list)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "AND",
        "a OR",
        "NEAR(x y)",
        "*",
        "title:foo",
        "(((",
        "'; DROP TABLE notes; --",
        "\x00",
        "🚀 launch",
        "打ち上げ",
    ],
)
def test_fts_syntax_is_never_interpreted(filled: Runtime, query: str) -> None:
    filled.searcher.search(query)
    assert filled.index.conn.execute("SELECT count(*) FROM notes").fetchone()[0] > 0


def test_importance_and_recency_break_ties(runtime: Runtime, clock: MovableClock) -> None:
    clock.set(datetime(2026, 1, 1, 9, 0, tzinfo=TZ))
    old = runtime.memories.remember("Door code is four digits", importance=0.5).memory
    clock.set(datetime(2026, 11, 21, 9, 0, tzinfo=TZ))
    new = runtime.memories.remember("Gate code is four digits", importance=0.5).memory
    important = runtime.memories.remember("Safe code is four digits", importance=1.0).memory
    clock.set(datetime(2026, 11, 22, 9, 0, tzinfo=TZ))
    ranked = [h.id for h in runtime.searcher.search("code four digits", mode="keyword")]
    assert ranked.index(important.id) < ranked.index(new.id) < ranked.index(old.id)


def test_a_date_in_the_query_boosts_what_was_written_then(
    runtime: Runtime, clock: MovableClock
) -> None:
    clock.set(datetime(2023, 6, 3, 12, 0, tzinfo=TZ))
    then = runtime.memories.remember("Started a pottery class", source="chat").memory
    clock.set(datetime(2023, 9, 1, 12, 0, tzinfo=TZ))
    later = runtime.memories.remember(
        "Started a pottery class again after summer", source="chat"
    ).memory
    clock.set(datetime(2026, 11, 22, 9, 0, tzinfo=TZ))
    plain = [h.id for h in runtime.searcher.search("pottery class started", mode="keyword")]
    dated = [
        h.id
        for h in runtime.searcher.search("pottery class started on 3 June, 2023", mode="keyword")
    ]
    assert dated[0] == then.id
    assert set(plain) == {then.id, later.id}


def test_mmr_diversifies(runtime: Runtime) -> None:
    for n in range(3):
        runtime.memories.remember(
            f"Coffee beans from the roaster number {n} taste great coffee beans"
        )
    varied = runtime.memories.remember("Roaster closes at noon on Sundays")
    runtime.index.embed_pending()
    plain = [h.id for h in runtime.searcher.search("coffee roaster", limit=2)]
    diverse = [h.id for h in runtime.searcher.search("coffee roaster", limit=2, mmr_lambda=0.3)]
    assert varied.memory.id not in plain
    assert varied.memory.id in diverse


def test_search_works_before_any_embedding(runtime: Runtime) -> None:
    memory = runtime.memories.remember("Vectors are not needed to find this").memory
    assert not runtime.index.vectors.exists()
    assert [h.id for h in runtime.searcher.search("vectors needed")] == [memory.id]


def test_tags_backlinks_related(filled: Runtime) -> None:
    tagged = {(i.kind, i.path) for i in search_by_tag(filled.index, "#project")}
    assert ("project", "Projects/Apollo.md") in tagged
    assert ("task", "Tasks/active/Launch rehearsal.md") in tagged
    assert ("memory", "Memory/Facts.md") in tagged and ("memory", "Memory/Preferences.md") in tagged
    assert [(b.source, b.line) for b in backlinks(filled.index, "Projects/Gemini")] == [
        ("Projects/Apollo.md", 6)
    ]
    found = {r.path: r.reasons for r in related(filled.index, "Projects/Apollo.md")}
    assert (
        "links to it" in found["Projects/Gemini.md"] and "links here" in found["Projects/Gemini.md"]
    )
    with pytest.raises(NotFoundError):
        related(filled.index, "Projects/Nothing.md")
    with pytest.raises(InvalidInputError):
        search_by_tag(filled.index, "#")


@pytest.mark.sqlite_only  # sqlite-vec's table against the index's copy in memory
def test_cold_and_warm_vector_search_agree(filled: Runtime) -> None:
    store = filled.index.vectors
    query = filled.embedder.embed(["launch capsule"])[0]
    allowed = [
        int(r[0]) for r in filled.index.conn.execute("SELECT id FROM chunks WHERE kind = 'memory'")
    ]
    for subset in (None, allowed):
        cold = store._search_cold(query, 5, subset)
        store.warm()
        warm = store._search_warm(query, 5, subset)
        # Same scores in the same order (equal scores may come in either order).
        assert np.allclose([s for _, s in cold], [s for _, s in warm], atol=1e-5)
        everything = dict(store._search_warm(query, 100, subset))
        assert all(abs(everything[i] - s) < 1e-5 for i, s in cold)


def test_warm_copy_follows_writes(filled: Runtime) -> None:
    store = filled.index.vectors
    store.warm()
    memory = filled.memories.remember("Zeppelin hangar smells of diesel").memory
    filled.index.embed_pending()
    query = filled.embedder.embed(["zeppelin diesel hangar"])[0]
    assert filled.index.conn.execute("SELECT 1").fetchone()
    top = store.search(query, 1)[0][0]
    chunk = filled.index.conn.execute(
        "SELECT id FROM chunks WHERE memory_id = ?", (memory.id,)
    ).fetchone()
    assert top == int(chunk[0])
    filled.memories.forget(memory.id)
    assert int(chunk[0]) not in {i for i, _ in store.search(query, 50)}


def test_task_and_contact_fields_are_searchable(runtime: Runtime) -> None:
    runtime.tasks.create("Quarterly filing", priority="urgent", due="2026-12-01", project="Taxes")
    runtime.contacts.create(
        "Ada Lovelace", email="ada@example.org", identities={"telegram": "424242"}
    )
    top = runtime.searcher.search("urgent taxes", mode="keyword")[0]
    assert top.path == "Tasks/active/Quarterly filing.md"
    assert [h.path for h in runtime.searcher.search("424242", mode="keyword")] == [
        "Contacts/Ada Lovelace.md"
    ]
    top = runtime.searcher.search("ada@example.org", mode="keyword")[0]
    assert top.path == "Contacts/Ada Lovelace.md"


def test_a_chunk_waiting_for_its_vector_is_judged_on_keywords(filled: Runtime) -> None:
    # Everything else is embedded; the new memory's vector is still pending.
    memory = filled.memories.remember("Prefers window seats on long flights").memory
    assert filled.index.pending() == 1 and filled.index.semantic
    assert filled.searcher.search("window seats", limit=1)[0].id == memory.id


def test_identifiers_addresses_and_versions_are_found_by_their_parts(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    """Words joined by punctuation are words, and accents are not needed: FTS5 cuts them
    apart and drops diacritics, and so must PostgreSQL (whose parser would keep
    ``os.path.join`` or an address as one token)."""
    write("Notes/Paths.md", "# Paths\n\nJoin them with os.path.join, never by hand.\n")
    write("Notes/Mail.md", "# Mail\n\nWrite to quokka.keeper@zoo.example about v2.7.1.\n")
    write("Notes/Case.md", "# Case\n\nThe helper is called parse_quokka_config.\n")
    runtime.index.sync()

    def first(query: str) -> str:
        hits = runtime.searcher.search(query, mode="keyword")
        assert hits, f"nothing found for {query!r}"
        return hits[0].path

    assert first("os.path.join") == "Notes/Paths.md"
    assert first("path join") == "Notes/Paths.md"
    assert first("quokka keeper") == "Notes/Mail.md"
    assert first("zoo.example") == "Notes/Mail.md"
    assert first("v2.7.1") == "Notes/Mail.md"
    assert first("parse_quokka_config") == "Notes/Case.md"
    assert first("quokka config") == "Notes/Case.md"
    write("Notes/Quote.md", "# Quote\n\nShe said \u00abwombat\u00bb\u2014then left\u2026\n")
    runtime.index.sync()
    assert first("wombat then") == "Notes/Quote.md"
    write(
        "Notes/Dessert.md",
        "# Dessert\n\nThe cr\u00e8me br\u00fbl\u00e9e at Caf\u00e9 Z\u00fcrich.\n",
    )
    runtime.index.sync()
    assert first("creme brulee") == "Notes/Dessert.md"  # accents are not needed to find it
    assert first("z\u00fcrich") == "Notes/Dessert.md"


def test_the_warm_product_gives_numpys_scores_and_leaves_blas_as_it_was() -> None:
    """The warm search runs its product on one BLAS thread (see vectors._product) and
    puts the process's thread count back afterwards."""
    from threadpoolctl import threadpool_info

    from memvault.index.vectors import WarmMatrix

    rng = np.random.default_rng(4)
    matrix = rng.standard_normal((3000, 64)).astype(np.float32)
    query = rng.standard_normal(64).astype(np.float32)
    before = [pool["num_threads"] for pool in threadpool_info()]
    found = WarmMatrix(list(range(3000)), matrix, "1").search(query, 5, None)
    expected = np.argsort(-(matrix @ query))[:5]
    assert [i for i, _ in found] == [int(i) for i in expected]
    assert [s for _, s in found] == pytest.approx([float(matrix[i] @ query) for i in expected])
    assert [pool["num_threads"] for pool in threadpool_info()] == before


def test_a_product_begun_beside_the_keywords_gives_the_same_answer_and_writes_undo_it() -> None:
    """A large warm copy computes a query's product on a worker thread (WarmMatrix.begin);
    the search of that query takes it (and keeps it for a deeper look), a product of
    another query is never mistaken for it, and a write in between makes the search
    compute the product afresh."""
    from threading import Thread

    from threadpoolctl import threadpool_info

    from memvault.index.vectors import AHEAD_ROWS, WarmMatrix

    rng = np.random.default_rng(5)
    rows = AHEAD_ROWS + 10
    matrix = rng.standard_normal((rows, 16)).astype(np.float32)
    query, other = rng.standard_normal((2, 16)).astype(np.float32)
    warm = WarmMatrix(list(range(rows)), matrix.copy(), "1")
    plain = WarmMatrix(list(range(rows)), matrix.copy(), "1").search(query, 5, None)
    before = [pool["num_threads"] for pool in threadpool_info()]

    warm.begin(query)
    # Products on other threads meanwhile (other indexes' searches) leave BLAS as it was.
    others = [WarmMatrix(list(range(rows)), matrix, "1") for _ in range(4)]
    threads = [Thread(target=each.search, args=(other, 3, None)) for each in others]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert warm.search(query, 5, None) == plain
    assert warm.search(query.copy(), 5, None) == plain  # an equal array: computed again
    assert warm.search(other, 5, None) != plain
    assert [pool["num_threads"] for pool in threadpool_info()] == before

    warm.begin(query)
    best = plain[0][0]
    warm.put([best], [-matrix[best]])  # a write: the begun product is stale
    assert warm.search(query, 1, None)[0][0] != best
    warm.begin(query)
    warm.delete([plain[1][0]])
    assert plain[1][0] not in [i for i, _ in warm.search(query, 5, None)]
