"""Search through the knowledge graph: a question about a person also finds what is
related to them, and a query naming no entity ranks exactly as without the graph."""

from __future__ import annotations

import pytest

from memvault.index.expansion import EntityNames, neighbourhood
from memvault.index.filters import SearchFilters
from memvault.index.search import Searcher
from memvault.runtime import Runtime
from support import HashEmbedder

pytestmark = pytest.mark.both_backends

DISTRACTORS = [
    "The weekly job board lists openings at the bakery",
    "Tom changed jobs twice last year",
    "The sister city of Leeds is Dortmund",
    "Job interviews are on Thursdays at the agency",
    "Priya's brother teaches chemistry",
    "The hospital car park is closed on Sundays",
]


def write(runtime: Runtime, path: str, text: str) -> None:
    target = runtime.vault.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def seed(runtime: Runtime) -> str:
    """Caroline's sister Anna, whose work is known only from one memory; returns its id."""
    for text in DISTRACTORS:
        runtime.memories.remember(text, "fact")
    answer = runtime.memories.remember("Anna works night shifts on the cardiac ward", "fact")
    ref = f"[[Memory/Facts#^{answer.memory.id}]]"
    write(runtime, "Contacts/Caroline.md", "# Caroline\n\n## Relations\n- sister_of [[Anna]]\n")
    write(
        runtime,
        "Entities/Anna.md",
        f"---\ntype: person\n---\n# Anna\n\n## Observations\n- [work] nurse [source:: {ref}]\n",
    )
    runtime.index.sync()
    return answer.memory.id


def ranked(searcher: Searcher, query: str, *, graph: bool) -> list[str | None]:
    searcher.settings.graph_expansion = graph
    return [hit.id or hit.path for hit in searcher.search(query, limit=10)]


def test_a_question_about_a_person_finds_what_is_related_to_them(runtime: Runtime) -> None:
    answer = seed(runtime)
    searcher = runtime.searcher
    query = "What does Caroline's sister do for a job?"
    without = ranked(searcher, query, graph=False)
    with_graph = ranked(searcher, query, graph=True)
    assert answer not in without
    assert answer in with_graph
    assert "Entities/Anna.md" in with_graph


def test_a_query_naming_no_entity_ranks_as_without_the_graph(runtime: Runtime) -> None:
    seed(runtime)
    searcher = runtime.searcher
    for query in ("job board openings", "hospital car park", "brother teaches"):
        assert ranked(searcher, query, graph=True) == ranked(searcher, query, graph=False)


def test_an_entity_linked_everywhere_passes_nothing_on(runtime: Runtime) -> None:
    answer = seed(runtime)
    searcher = runtime.searcher
    searcher.settings.graph_hub_limit = 0  # Anna now counts as a hub: her links tell nothing
    query = "What does Caroline's sister do for a job?"
    assert answer not in ranked(searcher, query, graph=True)


def test_a_hit_shows_an_embedded_memory_by_its_text(runtime: Runtime) -> None:
    kiln = runtime.memories.remember("Mel bought a second-hand kiln in Leeds", "fact").memory
    write(
        runtime,
        "Entities/Pottery club.md",
        "---\ntype: organisation\n---\n# Pottery club\n\n"
        f"## Mentions\n- ![[Memory/Facts#^{kiln.id}]]\n",
    )
    runtime.index.sync()
    hits = runtime.searcher.search("pottery club", limit=5)
    club = next(h for h in hits if h.path == "Entities/Pottery club.md")
    assert "- Mel bought a second-hand kiln in Leeds" in club.snippet
    assert "![[" not in club.snippet
    # The file itself keeps the embed: only what a search hands over shows the text.
    assert f"![[Memory/Facts#^{kiln.id}]]" in (runtime.vault.root / club.path).read_text()


def test_an_insight_gives_its_place_to_the_next_result_once_a_source_is_shown(
    runtime: Runtime,
) -> None:
    kiln = runtime.memories.remember("Mel fired the glazed bowl in the kiln", "fact").memory
    other = runtime.memories.remember("The glazed tiles for the kiln room arrived", "fact")
    write(
        runtime,
        "Insights/Pottery.md",
        "---\ntype: insight\n---\n# Pottery\n\n## Insight\n\n"
        "Mel has taken to pottery: the glazed bowl went into the kiln twice.\n"
        f"\n## Evidence\n\n- ![[Memory/Facts#^{kiln.id}]]\n",
    )
    runtime.index.sync()
    query = "glazed bowl kiln"
    ranked = [h.id or h.path for h in runtime.searcher.search(query, limit=10)]
    # Its source is shown first: the insight comes after the other memory, not before.
    assert ranked == [kiln.id, other.memory.id, "Insights/Pottery.md"]
    # With two places, the source and the next memory take them.
    assert [h.id for h in runtime.searcher.search(query, limit=2)] == [kiln.id, other.memory.id]
    # Without its source among the results (a filter leaves memories out) it ranks as ever.
    notes = runtime.searcher.search(query, limit=10, filters=SearchFilters(kinds=("insight",)))
    assert [h.path for h in notes] == ["Insights/Pottery.md"]


def test_the_context_embeds_its_request_once_for_both_its_searches(
    runtime: Runtime, embedder: HashEmbedder
) -> None:
    runtime.memories.remember("Mel fired the glazed bowl in the kiln", "fact")
    write(runtime, "Skills/Fire a kiln.md", "# Fire a kiln\n\n## When to use\nA kiln.\n")
    runtime.index.sync()
    runtime.index.embed_pending()
    before = embedder.calls
    built = runtime.context.build(query="how do I fire the kiln")
    assert embedder.calls == before + 1  # the relevant search and the skills search share it
    assert "glazed bowl" in built
    # Another request is embedded anew.
    runtime.searcher.search("glazed tiles")
    assert embedder.calls == before + 2


def test_memories_one_entity_links_by_block_reference_lend_each_other(runtime: Runtime) -> None:
    # Anna's note names two memories by block reference: each, found, lends to the other
    # (two hops: memory, entity, memory), and a memory no entity names lends to neither.
    shifts = runtime.memories.remember("Works night shifts on the cardiac ward", "fact")
    car = runtime.memories.remember("Drives a blue Fiat to the hospital", "fact")
    alone = runtime.memories.remember("The hospital car park is closed on Sundays", "fact")
    write(
        runtime,
        "Entities/Anna.md",
        "---\ntype: person\n---\n# Anna\n\n## Observations\n"
        f"- [work] nurse [source:: [[Memory/Facts#^{shifts.memory.id}]]]\n"
        f"- [car] a Fiat [source:: [[Memory/Facts#^{car.memory.id}]]]\n",
    )
    runtime.index.sync()
    conn = runtime.index.conn

    def chunk(memory_id: str) -> int:
        return int(
            conn.execute("SELECT id FROM chunks WHERE memory_id = ?", (memory_id,)).fetchone()[0]
        )

    graph = neighbourhood(conn, [chunk(shifts.memory.id)], [], "night shifts", hub_limit=50)
    assert graph.hops[chunk(car.memory.id)] == {chunk(shifts.memory.id): 2}
    assert graph.hops[chunk(shifts.memory.id)] == {chunk(car.memory.id): 2}
    assert chunk(alone.memory.id) not in graph.chunks


def test_a_name_given_to_an_entity_counts_from_the_next_search_after_other_edits(
    runtime: Runtime,
) -> None:
    seed(runtime)
    names = EntityNames()  # as a search keeps them, on the index's own connection
    caroline = ["Contacts/Caroline.md"]
    assert names.named_in(runtime.index.conn, "what about carolina") == []
    # Notes and memories change between searches; none of them names an entity.
    for n in range(3):
        runtime.memories.remember(f"The bakery opens at {6 + n} on weekdays", "fact")
        write(runtime, "Notes/Shopping.md", f"# Shopping\n\n- bread {n}\n")
        runtime.index.sync()
        assert names.named_in(runtime.index.conn, "what about carolina") == []
        assert names.named_in(runtime.index.conn, "caroline's sister") == caroline
    # Her note's title becomes Carolina (an edit, not a new note): the very next search
    # knows the name.
    write(runtime, caroline[0], "# Carolina\n\n## Relations\n- sister_of [[Anna]]\n")
    runtime.index.sync()
    assert names.named_in(runtime.index.conn, "what about carolina") == caroline
    # And an entity note that goes loses its names.
    (runtime.vault.root / caroline[0]).unlink()
    runtime.index.sync()
    assert names.named_in(runtime.index.conn, "what about carolina") == []
