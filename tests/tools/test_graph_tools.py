"""The knowledge graph tools through the registry: get_knowledge_graph and entity_facts."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from graph_support import KILN, write_people
from memvault.runtime import Runtime
from memvault.tools import ToolContext, default_registry
from memvault.tools.policy import DenyAll, Policy, Tier
from memvault.tools.registry import ToolResult
from memvault.vault.entities import Fact, Relation

REGISTRY = default_registry()


@pytest.fixture
def people(runtime: Runtime) -> Runtime:
    """A vault with four entities, a relation to someone without a note, and a memory."""
    write_people(runtime.vault.root)
    runtime.memories.remember(KILN, "fact")
    return runtime


def call(runtime: Runtime, name: str, arguments: dict[str, Any]) -> ToolResult:
    # DenyAll: a read-only tool runs without anyone being asked.
    return REGISTRY.call(name, arguments, ToolContext(runtime, Policy(approver=DenyAll())))


def edges(graph: dict[str, Any]) -> dict[tuple[str, str, str], bool]:
    return {(e["source"], e["target"], e["relation"]): e["current"] for e in graph["edges"]}


def test_both_tools_are_tier_one_reads_with_an_optional_entity() -> None:
    graph, facts = REGISTRY.get("get_knowledge_graph"), REGISTRY.get("entity_facts")
    for tool in (graph, facts):
        assert tool.tier == Tier.READ and tool.annotations.read_only and not tool.searches
    schema = graph.input_schema()
    assert "required" not in schema
    assert (schema["properties"]["depth"]["minimum"], schema["properties"]["depth"]["maximum"]) == (
        0,
        5,
    )
    assert schema["properties"]["include_ended"]["default"] is True
    assert facts.input_schema()["required"] == ["entity"]
    assert set(facts.input_schema()["properties"]) == {"entity", "as_of", "history"}


def test_the_graph_around_an_entity_has_its_typed_edges(people: Runtime) -> None:
    result = call(people, "get_knowledge_graph", {"entity": "mel"})
    assert result.ok, result.error
    graph = result.data
    assert graph["center"] == "Contacts/Melanie.md" and graph["truncated"] is False
    found = edges(graph)
    assert found[("Contacts/Melanie.md", "Contacts/Caroline.md", "friend_of")] is True
    assert found[("Contacts/Melanie.md", "Entities/Acme.md", "works_at")] is False  # ended
    assert found[("Contacts/Melanie.md", "Dan", "mentor_of")] is True
    assert found[("Contacts/Melanie.md", "#family", "tagged")] is True
    [memory] = [n for n in graph["nodes"] if n["id"].startswith("memory:")]
    assert memory["name"].startswith("Mel bought a kiln")
    assert found[(memory["id"], "Contacts/Melanie.md", "mentions")] is True
    types = {n["id"]: n["type"] for n in graph["nodes"]}
    assert types["Entities/Acme.md"] == "organisation" and types["Dan"] == "missing"
    assert "Entities/Anna.md" not in types  # two hops away

    deeper = call(people, "get_knowledge_graph", {"name": "Melanie", "depth": 2}).data
    assert ("Contacts/Caroline.md", "Entities/Anna.md", "sister_of") in edges(deeper)

    current = call(people, "get_knowledge_graph", {"entity": "Melanie", "include_ended": False})
    assert ("Contacts/Melanie.md", "Entities/Acme.md", "works_at") not in edges(current.data)
    assert ("Contacts/Melanie.md", "Contacts/Caroline.md", "friend_of") in edges(current.data)

    alone = call(people, "get_knowledge_graph", {"entity": "Melanie", "depth": 0}).data
    assert [n["id"] for n in alone["nodes"]] == ["Contacts/Melanie.md"] and alone["edges"] == []


def test_without_an_entity_the_graph_holds_every_entity_and_no_memories(people: Runtime) -> None:
    graph = call(people, "get_knowledge_graph", {}).data
    assert graph["center"] is None
    ids = {n["id"] for n in graph["nodes"]}
    assert {
        "Contacts/Melanie.md",
        "Contacts/Caroline.md",
        "Entities/Anna.md",
        "Entities/Acme.md",
    } <= ids
    assert not any(i.startswith("memory:") for i in ids)
    assert ("Contacts/Caroline.md", "Entities/Anna.md", "sister_of") in edges(graph)
    small = call(people, "get_knowledge_graph", {"max_nodes": 2}).data
    assert len(small["nodes"]) == 2 and small["truncated"] is True


def test_graph_mistakes_come_back_as_sentences(people: Runtime) -> None:
    missing = call(people, "get_knowledge_graph", {"entity": "Nobody"})
    assert (missing.ok, missing.code, missing.status) == (False, "not_found", 404)
    assert missing.error is not None
    assert missing.error.startswith("No entity or note called 'Nobody'.")
    assert "without an entity" in missing.error
    too_deep = call(people, "get_knowledge_graph", {"entity": "Melanie", "depth": 9})
    assert too_deep.code == "validation_failed" and "'depth'" in (too_deep.error or "")
    blank = call(people, "get_knowledge_graph", {"entity": "  "})
    assert blank.code == "validation_failed" and blank.error == "Name an entity, e.g. 'Caroline'."


def test_entity_facts_today_with_history_and_on_a_day(people: Runtime) -> None:
    today = call(people, "entity_facts", {"entity": "Mel"})
    assert today.ok, today.error
    data = today.data
    assert (data["name"], data["type"], data["aliases"], data["path"]) == (
        "Melanie",
        "person",
        ["Mel"],
        "Contacts/Melanie.md",
    )
    assert [(f["category"], f["text"]) for f in data["facts"]] == [
        ("favourite player", "Messi"),
        ("hobby", "paints landscapes #art"),
    ]
    assert data["facts"][0]["source"] == "[[Memory/Facts]]"
    assert [(r["type"], r["target"]) for r in data["relations"]] == [
        ("friend_of", "Caroline"),
        ("mentor_of", "Dan"),
    ]  # the job at Acme has ended

    history = call(people, "entity_facts", {"entity": "Melanie", "history": True}).data
    players = {f["text"]: f for f in history["facts"] if f["category"] == "favourite player"}
    assert set(players) == {"Ronaldo", "Messi"}
    assert players["Ronaldo"]["current"] is False and players["Ronaldo"]["valid_until"] == (
        "2026-03-01"
    )
    assert players["Messi"]["current"] is True
    assert ("works_at", False) in {(r["type"], r["current"]) for r in history["relations"]}

    def players_on(day: str) -> list[str]:
        found = call(people, "entity_facts", {"entity": "Melanie", "as_of": day})
        assert found.ok, found.error
        assert found.data["as_of"] == day
        return [f["text"] for f in found.data["facts"] if f["category"] == "favourite player"]

    assert players_on("2025-06-01") == ["Ronaldo"]
    assert players_on("2026-03-01") == ["Messi"]  # valid_until is the first day it no longer held
    assert players_on("2024-12-31") == []  # before either began
    # By its note's path too, with or without .md, as get_knowledge_graph takes it.
    for path in ("Contacts/Melanie.md", "contacts/melanie"):
        assert call(people, "entity_facts", {"entity": path}).data == data
    on = call(people, "entity_facts", {"entity": "Melanie", "date": "2025-06-01"}).data
    assert ("works_at", "Acme") in {(r["type"], r["target"]) for r in on["relations"]}


def test_entity_facts_mistakes_come_back_as_sentences(people: Runtime) -> None:
    missing = call(people, "entity_facts", {"entity": "Nobody"})
    assert (missing.code, missing.status) == ("not_found", 404)
    assert (missing.error or "").startswith("No entity called 'Nobody'.")
    bad_day = call(people, "entity_facts", {"entity": "Melanie", "as_of": "last June"})
    assert bad_day.code == "validation_failed"
    assert (
        bad_day.error == "'last June' is not a date; give the day as YYYY-MM-DD, e.g. 2025-06-01."
    )
    both = call(people, "entity_facts", {"entity": "Melanie", "as_of": "2025-06-01", "history": 1})
    assert both.code == "validation_failed" and "not both" in (both.error or "")
    unnamed = call(people, "entity_facts", {})
    assert unnamed.code == "validation_failed" and "'entity' is required" in (unnamed.error or "")


def test_a_fact_recorded_now_is_what_the_tools_answer_next(people: Runtime) -> None:
    """The tools read the notes as they are now: no stale index or cache in between."""
    path = "Contacts/Melanie.md"
    people.entities.record_fact(
        path, Fact("hobby", "plays the cello", valid_from=date(2026, 11, 1)), supersedes=True
    )
    people.entities.record_relation(path, Relation("neighbour_of", "Anna"))
    facts = call(people, "entity_facts", {"entity": "Melanie"}).data
    assert [f["text"] for f in facts["facts"] if f["category"] == "hobby"] == ["plays the cello"]
    graph = call(people, "get_knowledge_graph", {"entity": "Melanie"}).data
    assert edges(graph)[("Contacts/Melanie.md", "Entities/Anna.md", "neighbour_of")] is True
