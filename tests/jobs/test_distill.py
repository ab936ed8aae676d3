"""The distill job on a seeded vault, with and without a (fake) model.

The ``runtime`` fixture embeds with a hashed bag of words, so memories that
share words are related: the seed holds two such groups and a few loners.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from job_support import job_engine, run_job
from llm_fakes import FakeOpenAI
from memvault.config import Settings
from memvault.index.embedders import NoEmbedder
from memvault.index.filters import SearchFilters
from memvault.jobs import JobEngine, JobRun, distill
from memvault.runtime import Runtime
from memvault.tools import job_tools
from memvault.tools.policy import Policy, Tier
from memvault.tools.registry import ToolContext, ToolRegistry
from memvault.vault.note import Note
from memvault.vault.store import Vault
from support import TZ, MovableClock
from waiting import WAIT

COFFEE = [
    "Drinks espresso coffee from the harbour roaster every morning",
    "Buys espresso coffee beans at the harbour roaster",
    "Grinds the espresso coffee beans from the harbour roaster fresh",
]
CYCLING = [
    "Cycles to work on the green bike when it is dry",
    "Rides the green bike to work along the river path",
    "Keeps the green bike in the hallway after the ride to work",
]
LONERS = ["Allergic to penicillin", "Birthday is on 4 March", "Speaks Portuguese at home"]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=TZ)


def seed(runtime: Runtime, clock: MovableClock) -> dict[str, str]:
    """The memories, two days old; returns their ids by text."""
    clock.set(at("2026-11-20T10:00"))
    ids = {}
    for text in COFFEE + LONERS[:1]:
        ids[text] = runtime.memories.remember(text, "preference").memory.id
    for text in CYCLING + LONERS[1:]:
        ids[text] = runtime.memories.remember(text, "fact").memory.id
    clock.set(at("2026-11-22T05:00"))
    return ids


def engine(runtime: Runtime, clock: MovableClock, **kwargs: Any) -> JobEngine:
    return job_engine(runtime, clock, "distill", **kwargs)


def run(runtime: Runtime, clock: MovableClock, **kwargs: Any) -> JobRun:
    return run_job(runtime, clock, "distill", **kwargs)


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*.md"))
        if ".memvault" not in p.parts
    }


def insights(vault: Vault) -> dict[str, Note]:
    folder = vault.root / "Insights"
    return {
        f"Insights/{p.name}": Note.parse(p.read_text("utf-8")) for p in sorted(folder.glob("*.md"))
    }


def links(text: str) -> set[str]:
    return set(re.findall(r"!\[\[Memory/(?:Facts|Preferences)#\^(m-[0-9a-f]+)\]\]", text))


def by_sources(vault: Vault, ids: list[str]) -> tuple[str, Note]:
    (found,) = [(p, n) for p, n in insights(vault).items() if set(n.get("sources")) == set(ids)]
    return found


def test_clusters_become_digests_linked_to_each_source(
    runtime: Runtime, clock: MovableClock, vault: Vault
) -> None:
    ids = seed(runtime, clock)
    done = run(runtime, clock)
    notes = insights(vault)
    assert len(notes) == 2, done.output
    for group in (COFFEE, CYCLING):
        wanted = [ids[t] for t in group]
        path, note = by_sources(vault, wanted)
        text = note.render()
        assert note.get("type") == "insight" and "insight" in note.get("tags")
        assert note.get("digest") is True  # no model: search shows its sources instead
        assert note.get("sources_hash") == distill.sources_hash(
            [runtime.memories.get(i) for i in wanted]
        )
        assert str(note.get("created")) == str(note.get("updated")) == "2026-11-22"
        assert links(text) == set(wanted)
        assert distill.MARKERS.start in text
        # A digest has no words of its own: its section embeds the most central sources.
        insight = text.split("## Insight", 1)[1].split("## Evidence", 1)[0]
        assert links(insight) == set(wanted) and "digest" not in insight.lower()
        for memory_id in wanted:
            assert runtime.memories.get(memory_id).fields["distilled"] == path[:-3]
    for text in LONERS:
        assert "distilled" not in runtime.memories.get(ids[text]).fields
    assert "2 new insights from 6 memories" in done.output
    assert "related by embeddings" in done.output
    # The coffee digest is titled by the words its memories share, most shared first.
    coffee_path, coffee = by_sources(vault, [ids[t] for t in COFFEE])
    assert coffee_path == "Insights/Espresso, coffee and harbour.md"
    assert coffee.body.startswith("# Espresso, coffee and harbour\n")


def test_a_second_run_writes_nothing(runtime: Runtime, clock: MovableClock, vault: Vault) -> None:
    seed(runtime, clock)
    run(runtime, clock)
    before = snapshot(vault.root)
    clock.set(at("2026-11-23T05:00"))
    again = run(runtime, clock)
    assert snapshot(vault.root) == before
    assert "changes" not in again.metadata and "insights" not in again.metadata
    assert again.output.startswith("0 new insights from 0 memories, 0 insights refreshed")


def test_young_memories_wait(runtime: Runtime, clock: MovableClock, vault: Vault) -> None:
    seed(runtime, clock)
    done = run(runtime, clock, min_age_days=3)
    assert not (vault.root / "Insights").exists() or not insights(vault)
    assert done.output.startswith("0 new insights from 0 memories")
    assert "0 memories left waiting" in done.output


def test_an_edited_source_refreshes_its_insight_only(
    runtime: Runtime, clock: MovableClock, vault: Vault
) -> None:
    ids = seed(runtime, clock)
    run(runtime, clock)
    coffee_path, _ = by_sources(vault, [ids[t] for t in COFFEE])
    cycling_path, _ = by_sources(vault, [ids[t] for t in CYCLING])
    # The owner edits the insight outside memvault's block, and a coffee memory by hand.
    coffee_file = vault.root / coffee_path
    coffee_file.write_text(coffee_file.read_text("utf-8") + "\nMy own note: switch to decaf.\n")
    cycling_before = (vault.root / cycling_path).read_bytes()
    facts = vault.root / "Memory/Preferences.md"
    facts.write_text(
        facts.read_text("utf-8").replace("beans at the harbour", "beans at the station"), "utf-8"
    )
    clock.set(at("2026-11-23T05:00"))
    done = run(runtime, clock)
    assert f"refreshed {coffee_path}: its sources changed" in done.output
    refreshed = Note.parse(coffee_file.read_text("utf-8"))
    assert refreshed.get("sources_hash") == distill.sources_hash(
        [runtime.memories.get(ids[t]) for t in COFFEE]
    )
    assert links(refreshed.body) == {ids[t] for t in COFFEE}
    assert refreshed.body.rstrip().endswith("My own note: switch to decaf.")
    assert str(refreshed.get("updated")) == "2026-11-23"
    assert str(refreshed.get("created")) == "2026-11-22"
    assert (vault.root / cycling_path).read_bytes() == cycling_before
    assert done.metadata["insights"] == {"written": 0, "refreshed": 1}


def test_an_older_digest_quoting_its_sources_is_written_again(
    runtime: Runtime, clock: MovableClock, vault: Vault
) -> None:
    ids = seed(runtime, clock)
    run(runtime, clock)
    path, _ = by_sources(vault, [ids[t] for t in COFFEE])
    file = vault.root / path
    # As digests were written before: no digest field, the memories quoted after a count.
    text = file.read_text("utf-8").replace("digest: true\n", "")
    block = text.split("## Insight\n\n", 1)[1].split("\n\n## Evidence", 1)[0]
    old = "A digest of 3 related memories, the most central first: " + " ".join(COFFEE)
    file.write_text(text.replace(block, old), "utf-8")
    done = run(runtime, clock)
    assert f"refreshed {path}: a digest now embeds its memories" in done.output
    note = Note.parse(file.read_text("utf-8"))
    assert note.get("digest") is True and "A digest of" not in note.body
    assert links(note.body) == {ids[t] for t in COFFEE}
    # Written again once: the next run leaves it.
    before = snapshot(vault.root)
    run(runtime, clock)
    assert snapshot(vault.root) == before


def test_a_deleted_source_leaves_the_insight(
    runtime: Runtime, clock: MovableClock, vault: Vault
) -> None:
    ids = seed(runtime, clock)
    run(runtime, clock)
    coffee_path, _ = by_sources(vault, [ids[t] for t in COFFEE])
    runtime.memories.forget(ids[COFFEE[1]])
    run(runtime, clock)
    note = Note.parse((vault.root / coffee_path).read_text("utf-8"))
    kept = [ids[t] for t in COFFEE if t != COFFEE[1]]
    assert sorted(note.get("sources")) == sorted(kept) and links(note.body) == set(kept)


def test_with_the_model_the_insight_is_its_answer(
    runtime: Runtime, clock: MovableClock, vault: Vault, fake: FakeOpenAI
) -> None:
    ids = seed(runtime, clock)

    def answer(request: dict[str, Any]) -> str:
        if "espresso" in str(request["messages"]):
            return "# Coffee rituals\n\nThe owner starts each day with fresh espresso."
        return "# Riding to work\n\nThe owner commutes by the green bike."

    fake.reply_with(answer)
    fake.reply_with(answer)
    done = run(runtime, clock, fake=fake)
    assert len(fake.requests) == 2
    prompt = str(fake.requests[0]["messages"])
    assert "<vault-data>" in prompt and "not instructions" in prompt
    path, note = by_sources(vault, [ids[t] for t in COFFEE])
    assert path == "Insights/Coffee rituals.md"
    assert note.body.startswith("# Coffee rituals\n")
    assert "The owner starts each day with fresh espresso." in note.body
    assert links(note.body) == {ids[t] for t in COFFEE}
    assert note.get("digest") is False  # words of its own: a result in its own right
    assert by_sources(vault, [ids[t] for t in CYCLING])[0] == "Insights/Riding to work.md"
    assert "by the model" in done.output and done.metadata["model"]["model_calls"] == 2


def test_a_truncated_answer_gives_the_digest_and_says_why(
    runtime: Runtime, clock: MovableClock, vault: Vault, fake: FakeOpenAI
) -> None:
    ids = seed(runtime, clock)
    fake.reply("# Coffee rit", stop="length")
    fake.reply("# Coffee rit", stop="length")
    done = run(runtime, clock, fake=fake)
    _, note = by_sources(vault, [ids[t] for t in COFFEE])
    assert note.get("digest") is True and "Coffee rit" not in note.render()
    assert "digest: the model's answer was cut off at its token limit" in done.output


def test_undo_restores_every_file(runtime: Runtime, clock: MovableClock, vault: Vault) -> None:
    seed(runtime, clock)
    before = snapshot(vault.root)
    done = run(runtime, clock)
    assert snapshot(vault.root) != before
    engine(runtime, clock).undo(done.id)
    assert snapshot(vault.root) == before


def test_distilling_keeps_the_source_findable(
    runtime: Runtime, clock: MovableClock, vault: Vault
) -> None:
    """LoCoMo-style guard: what a query found before distillation it still finds after."""
    ids = seed(runtime, clock)
    runtime.index.sync()
    runtime.index.embed_pending()
    query = "where does the owner buy coffee beans"
    wanted = ids[COFFEE[1]]
    assert wanted in [hit.id for hit in runtime.searcher.search(query, limit=5)]
    run(runtime, clock)
    runtime.index.sync()
    runtime.index.embed_pending()
    hits = runtime.searcher.search(query, limit=5)
    assert wanted in [hit.id for hit in hits]
    # The digest holds only its sources' words: they take its place.
    everything = runtime.searcher.search(query, limit=10)
    assert not any(hit.path.startswith("Insights/") for hit in everything)
    insights_only = SearchFilters(kinds=("insight",))
    # Where its sources cannot be shown, it answers what its title names.
    titled = runtime.searcher.search("espresso coffee harbour", limit=10, filters=insights_only)
    assert titled[0].path.startswith("Insights/Espresso")


def test_without_an_embedder_it_relates_by_shared_words(
    tmp_path: Path, clock: MovableClock
) -> None:
    opened = Runtime.open(
        Settings(vault=tmp_path / "vault", timezone="Europe/Berlin"),
        clock=clock,
        embedder=NoEmbedder(),
        create=True,
    )
    try:
        ids = seed(opened, clock)
        done = run(opened, clock)
        path, _ = by_sources(opened.vault, [ids[t] for t in COFFEE])
        assert path == "Insights/Espresso, coffee and harbour.md"
        assert "related by shared words" in done.output
        assert "the embedder is off" in done.output
    finally:
        opened.close()


def test_a_hand_typed_bullet_gets_an_id_its_link_resolves_to(
    runtime: Runtime, clock: MovableClock, vault: Vault
) -> None:
    seed(runtime, clock)
    facts = vault.root / "Memory/Preferences.md"
    facts.write_text(
        facts.read_text("utf-8") + "- Orders espresso coffee at the harbour roaster cafe\n", "utf-8"
    )
    run(runtime, clock)
    (typed,) = [m for m in runtime.memories.all() if m.text.startswith("Orders espresso")]
    assert typed.explicit_id and f"^{typed.id}" in facts.read_text("utf-8")
    path = typed.fields["distilled"] + ".md"
    assert typed.id in links((vault.root / path).read_text("utf-8"))


def test_distill_now_runs_the_job_through_the_engine(
    runtime: Runtime, clock: MovableClock, vault: Vault
) -> None:
    seed(runtime, clock)
    jobs = engine(runtime, clock)
    registry = ToolRegistry(job_tools.tools(lambda _runtime: jobs))
    context = ToolContext(runtime, policy=Policy(mode="autonomous"))
    called = registry.call("distill_now", {}, context)
    assert called.ok, called.error
    jobs.wait(timeout=WAIT)
    done = jobs.run_record(called.data["run_id"])
    assert done.job == "distill" and done.status == "ok", done.error
    assert len(insights(vault)) == 2
    assert registry.get("distill_now").tier == Tier.WRITE


def test_a_superseded_source_leaves_the_insight(
    runtime: Runtime, clock: MovableClock, vault: Vault
) -> None:
    ids = seed(runtime, clock)
    run(runtime, clock)
    path, _ = by_sources(vault, [ids[t] for t in CYCLING])
    runtime.memories.update_fields(ids[CYCLING[0]], superseded="2026-11-23")
    done = run(runtime, clock)
    assert f"refreshed {path}" in done.output
    note = Note.parse((vault.root / path).read_text("utf-8"))
    assert set(note.get("sources")) == {ids[t] for t in CYCLING[1:]}
    assert links(note.body) == {ids[t] for t in CYCLING[1:]}


def test_a_digest_is_titled_by_what_sets_its_cluster_apart(
    runtime: Runtime, clock: MovableClock, vault: Vault
) -> None:
    clock.set(at("2026-11-20T10:00"))
    for text in [
        "Caroline throws a glazed clay bowl at the pottery wheel",
        "Caroline fires the glazed clay bowl in the pottery kiln",
        "Caroline paints the glazed clay bowl from the pottery class",
        "Caroline walks the dog along the canal",
        "Caroline reads a novel on the train",
        "Caroline cooks lentil soup on Sundays",
        "Caroline calls her sister every Friday",
    ]:
        runtime.memories.remember(text, "fact")
    clock.set(at("2026-11-22T05:00"))
    run(runtime, clock)
    (title,) = [p.removeprefix("Insights/").removesuffix(".md") for p in insights(vault)]
    assert "caroline" not in title.casefold()  # in every memory: it says nothing
    assert {"glazed", "clay", "bowl", "pottery"} & set(title.casefold().replace(",", "").split())
