"""The knowledge graph over HTTP (``/v1/graph``, ``/v1/graph/entities/{name}/facts``) and
what consolidation held for review or changed (``/v1/memories/reviews``,
``/v1/memories/{id}/history``), on a real daemon on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from cli_support import ok_json
from gateway_support import Live, StartDaemon, failed, ok
from graph_support import KILN, write_people
from llm_fakes import FakeOpenAI, llm_settings
from memvault.config import Settings
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import HashEmbedder, MovableClock
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound


def _watched(start_daemon: StartDaemon, root: Path) -> Live:
    running = start_daemon(root)
    wait_for(running.daemon.watching.is_set, "the watcher to start")
    return running


@pytest.fixture
def people(tmp_path: Path, start_daemon: StartDaemon) -> Iterator[tuple[Live, httpx.Client]]:
    """A daemon on a vault holding the entity notes, and a memory linking Melanie."""
    root = tmp_path / "vault"
    init_vault(Vault(root))
    write_people(root)
    live = _watched(start_daemon, root)
    with live.client() as api:
        ok(api.post("/v1/memories", json={"text": KILN}))
        yield live, api


def edges(graph: dict[str, Any]) -> dict[tuple[str, str, str], bool]:
    return {(e["source"], e["target"], e["relation"]): e["current"] for e in graph["edges"]}


def test_the_graph_around_an_entity_and_of_the_vault(
    people: tuple[Live, httpx.Client],
) -> None:
    _, api = people
    graph = ok(api.get("/v1/graph", params={"entity": "Mel"}))
    assert graph["center"] == "Contacts/Melanie.md"
    found = edges(graph)
    assert found[("Contacts/Melanie.md", "Contacts/Caroline.md", "friend_of")] is True
    assert found[("Contacts/Melanie.md", "Entities/Acme.md", "works_at")] is False
    assert found[("Contacts/Melanie.md", "Dan", "mentor_of")] is True
    [memory] = [n for n in graph["nodes"] if n["id"].startswith("memory:")]
    assert memory["name"] == KILN and found[(memory["id"], "Contacts/Melanie.md", "mentions")]
    assert "Entities/Anna.md" not in {n["id"] for n in graph["nodes"]}

    deeper = ok(api.get("/v1/graph", params={"entity": "Melanie", "depth": 2}))
    assert ("Contacts/Caroline.md", "Entities/Anna.md", "sister_of") in edges(deeper)
    current = ok(api.get("/v1/graph", params={"entity": "Melanie", "include_ended": "false"}))
    assert ("Contacts/Melanie.md", "Entities/Acme.md", "works_at") not in edges(current)

    whole = ok(api.get("/v1/graph"))
    assert whole["center"] is None
    assert {n["id"] for n in whole["nodes"] if n["type"] != "tag"} == {
        "Contacts/Melanie.md",
        "Contacts/Caroline.md",
        "Entities/Anna.md",
        "Entities/Acme.md",
    }
    small = ok(api.get("/v1/graph", params={"max_nodes": 1}))
    assert len(small["nodes"]) == 1 and small["truncated"] is True


def test_an_edit_in_obsidian_shows_in_the_next_answer(
    people: tuple[Live, httpx.Client],
) -> None:
    live, api = people
    note = live.vault / "Contacts/Caroline.md"
    note.write_text(note.read_text("utf-8") + "- lives_in [[Berlin]]\n", encoding="utf-8")

    def with_the_edit() -> dict[str, Any] | None:
        graph: dict[str, Any] = ok(api.get("/v1/graph", params={"entity": "Caroline"}))
        return graph if ("Contacts/Caroline.md", "Berlin", "lives_in") in edges(graph) else None

    graph = wait_for(with_the_edit, "the watcher to pick up the edit")
    assert {n["id"]: n["type"] for n in graph["nodes"]}["Berlin"] == "missing"


def test_an_entitys_facts_today_with_history_and_on_a_day(
    people: tuple[Live, httpx.Client],
) -> None:
    _, api = people
    today = ok(api.get("/v1/graph/entities/Mel/facts"))
    assert (today["name"], today["type"], today["aliases"], today["path"]) == (
        "Melanie",
        "person",
        ["Mel"],
        "Contacts/Melanie.md",
    )
    assert [f["text"] for f in today["facts"]] == ["Messi", "paints landscapes #art"]
    assert [r["target"] for r in today["relations"]] == ["Caroline", "Dan"]

    history = ok(api.get("/v1/graph/entities/Melanie/facts", params={"history": "true"}))
    ronaldo = next(f for f in history["facts"] if f["text"] == "Ronaldo")
    assert ronaldo["current"] is False and ronaldo["valid_until"] == "2026-03-01"
    assert {r["target"]: r["current"] for r in history["relations"]}["Acme"] is False

    def players_on(day: str) -> list[str]:
        found = ok(api.get("/v1/graph/entities/Melanie/facts", params={"as_of": day}))
        return [f["text"] for f in found["facts"] if f["category"] == "favourite player"]

    assert players_on("2025-06-01") == ["Ronaldo"]
    assert players_on("2026-06-01") == ["Messi"]
    by_path = ok(api.get("/v1/graph/entities/Contacts/Melanie.md/facts"))
    assert by_path == today

    # The tool over HTTP answers the same as the route.
    called = ok(api.post("/v1/tools/entity_facts", json={"entity": "Mel", "as_of": "2025-06-01"}))
    assert called["result"] == ok(
        api.get("/v1/graph/entities/Mel/facts", params={"as_of": "2025-06-01"})
    )
    listed = {t["name"]: t for t in ok(api.get("/v1/tools"))}
    assert listed["get_knowledge_graph"]["tier"] == 1 and listed["entity_facts"]["tier"] == 1


def test_mistakes_are_one_sentence_with_their_status(
    people: tuple[Live, httpx.Client],
) -> None:
    _, api = people
    error = failed(api.get("/v1/graph/entities/Nobody/facts"), 404, "not_found")
    assert error["message"] == "No entity called 'Nobody'."
    assert error["details"]["hint"].startswith("Entities are the notes in Contacts/")
    error = failed(api.get("/v1/graph", params={"entity": "Nobody"}), 404, "not_found")
    assert error["message"] == "No entity or note called 'Nobody'."
    for params, message in (
        ({"entity": "Mel", "depth": 9}, "The depth must be between 0 and 5."),
        ({"entity": "Mel", "depth": "deep"}, "depth must be a whole number."),
        ({"max_nodes": 0}, "max_nodes must be between 1 and 5000, not 0."),
        ({"entity": " "}, "Name an entity, e.g. 'Caroline'."),
    ):
        assert (
            failed(api.get("/v1/graph", params=params), 400, "validation_failed")["message"]
            == message
        ), params
    facts = "/v1/graph/entities/Mel/facts"
    assert (
        failed(api.get(facts, params={"as_of": "2025-02-30"}), 400, "validation_failed")["message"]
        == "'2025-02-30' is not a date; give the day as YYYY-MM-DD, e.g. 2025-06-01."
    )
    both = failed(
        api.get(facts, params={"as_of": "2025-06-01", "history": "true"}), 400, "validation_failed"
    )
    assert "not both" in both["message"]


def test_the_spec_lists_the_routes_with_their_errors(people: tuple[Live, httpx.Client]) -> None:
    _, api = people
    paths = api.get("/openapi.json").json()["paths"]
    for path in ("/v1/graph", "/v1/graph/entities/{name}/facts"):
        assert {"400", "404"} <= set(paths[path]["get"]["responses"]), path
    assert "/v1/memories/reviews" in paths and "/v1/memories/{memory_id}/history" in paths


# -- consolidation: reviews and a memory's history ----------------------------------------


def test_reviews_and_history_answer_what_the_cli_shows(
    tmp_path: Path, clock: MovableClock, start_daemon: StartDaemon
) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    config = root / ".memvault/config.toml"  # the CLI's time zone is the daemon's
    config.write_text('timezone = "Europe/Berlin"\n' + config.read_text("utf-8"), "utf-8")
    with FakeOpenAI() as fake:
        runtime = Runtime.open(
            Settings(
                vault=root,
                timezone="Europe/Berlin",
                llm=llm_settings(fake, timeout=WAIT),
                memory={"consolidation_timeout": min(WAIT, 300)},  # no timeout is tested here
            ),
            clock=clock,
            embedder=HashEmbedder(),
        )
        try:
            dog = runtime.memories.remember("The owner's dog is called Rex").memory
            decision = {"action": "update", "target": dog.id, "text": "Rex is a beagle"}
            fake.reply(json.dumps({"reason": "scripted", "confidence": 0.9, **decision}))
            runtime.consolidation.remember("The owner's dog Rex is a beagle")
            old = runtime.memories.remember("Favourite football player is Ronaldo").memory
            decision = {"action": "supersede", "target": old.id}
            fake.reply(json.dumps({"reason": "unsure", "confidence": 0.4, **decision}))
            held = runtime.consolidation.remember("Favourite football player is Messi").memory
        finally:
            runtime.close()
    live = start_daemon(root)
    with live.client() as api:
        [review] = ok(api.get("/v1/memories/reviews"))
        assert (review["memory_id"], review["action"], review["target"]) == (
            held.id,
            "supersede",
            old.id,
        )
        assert review["status"] == "pending" and review["applicable"] is True
        assert "not sure enough" in review["problem"]
        assert [review] == ok_json(root, "--direct", "memory", "review")

        [change] = ok(api.get(f"/v1/memories/{dog.id}/history"))
        assert (change["action"], change["decided_by"]) == ("update", "model")
        assert (change["old_text"], change["new_text"]) == (
            "The owner's dog is called Rex",
            "Rex is a beagle",
        )
        assert [change] == ok_json(root, "--direct", "memory", "history", dog.id)
        assert ok(api.get("/v1/memories/m-00000000/history")) == []
        # The routes beside them still answer for a memory itself.
        assert ok(api.get(f"/v1/memories/{dog.id}"))["text"] == "Rex is a beagle"
