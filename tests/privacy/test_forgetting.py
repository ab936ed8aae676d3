"""Forgetting with a receipt (issue 29, item 4): each place named, what the owner wrote left
alone and said, ``forget --contact`` and ``--about`` shown before anything goes, and the CLI,
the route and the tool giving the same receipt with and without a daemon."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from channel_support import OWNER, delivered, telegram_config
from cli_support import EXIT_INVALID, fail, invoke, ok, ok_json, snapshot
from gateway_support import Live, StartDaemon, failed
from gateway_support import ok as answered
from job_support import run_job
from memvault.channels.hub import Hub
from memvault.config import Settings
from memvault.gateway.tokens import Scope
from memvault.jobs import distill
from memvault.runtime import Runtime
from memvault.tools import default_registry
from memvault.tools.policy import AllowAll, Policy
from memvault.tools.registry import ToolContext
from memvault.vault.layout import init_vault
from memvault.vault.note import Note
from memvault.vault.store import Vault
from support import TZ, HashEmbedder, MovableClock
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(3 * WAIT)

TARGET = "The quolloid boat is moored at the north marina beside Ada Lovelace"
BOATS = [
    "The red boat is moored at the north marina",
    "The blue boat is moored at the north marina",
    "The green boat is moored at the north marina",
]
ADA = 777
DSN = "MEMVAULT_PG_DSN"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=TZ)


def places(receipt: dict[str, Any]) -> dict[str, str]:
    return {p["place"]: p["action"] for p in receipt["places"]}


def test_the_receipt_names_each_place_and_what_it_left(
    runtime: Runtime, clock: MovableClock, vault: Vault, write: Any
) -> None:
    (vault.root / ".git").mkdir()  # a vault kept in git: its history is not rewritten
    runtime.contacts.create("Ada Lovelace")
    clock.set(at("2026-11-20T10:00"))
    target = runtime.consolidation.remember(TARGET).memory
    for text in BOATS:
        runtime.memories.remember(text)
    mine = f"# Boats\n\nThe quolloid boat is the prettiest ([[Memory/Facts#^{target.id}]]).\n"
    write("Notes/Boats.md", mine)
    clock.set(at("2026-11-20T21:00"))
    run_job(runtime, clock, "daily_note")
    clock.set(at("2026-11-22T09:00"))
    run_job(runtime, clock, "distill")
    run_job(runtime, clock, "knowledge_graph")
    run_job(runtime, clock, "living_summary")
    (insight,) = (vault.root / "Insights").glob("*.md")
    insight_path = f"Insights/{insight.name}"
    assert target.id in Note.parse(insight.read_text("utf-8")).get("sources")
    assert f"^{target.id}" in (vault.root / "Contacts/Ada Lovelace.md").read_text("utf-8")

    receipt = runtime.forgetter.forget(target.id).to_dict()

    done = places(receipt)
    assert done["Memory/Facts.md"] == "removed"
    assert done[insight_path] == "refreshed"  # three sources left: the job writes it again
    assert done["Contacts/Ada Lovelace.md"] == "removed"  # its mention of the memory
    assert done["MEMORY.md"] == "removed"
    assert done["Journal/2026-11-20.md"] == "removed"  # the day's summary listed it
    assert done["state.db"] == "checked"  # nothing there held it: said, not left out
    assert done["index.db"] == "verified"
    (graph,) = [p for p in receipt["places"] if p["place"] == "graph"]
    assert graph["action"] == "left" and "Notes/Boats.md" in graph["detail"]  # the owner's link
    assert receipt["forgotten"] == [{"id": target.id, "text": TARGET, "path": "Memory/Facts.md"}]
    untouched = {p["place"]: p["detail"] for p in receipt["untouched"]}
    assert "git repository" in untouched["git history"]
    # The distill run kept Facts.md as it was before marking its sources: not edited.
    assert "what run 2 kept" in untouched[".memvault/jobs/runs (the undo store)"]
    # The owner's own note still says it, and is left as written: the receipt says so.
    assert receipt["still_found"] == ["Notes/Boats.md"]
    assert (vault.root / "Notes/Boats.md").read_text("utf-8") == mine

    note = Note.parse(insight.read_text("utf-8"))
    assert sorted(note.get("sources")) == sorted(m.id for m in runtime.memories.all())
    assert target.id not in insight.read_text("utf-8")
    assert target.id not in (vault.root / "Contacts/Ada Lovelace.md").read_text("utf-8")
    for path in ("MEMORY.md", "Journal/2026-11-20.md"):
        assert "quolloid" not in (vault.root / path).read_text("utf-8"), path
    # The distill job's next run writes the refreshed insight from the three left.
    again = run_job(runtime, clock, "distill")
    assert f"refreshed {insight_path}: its sources changed" in again.output
    assert Note.parse(insight.read_text("utf-8")).get("sources_hash") == distill.sources_hash(
        runtime.memories.all()
    )


def test_an_insight_of_too_few_sources_is_dropped_and_they_wait_again(
    runtime: Runtime, clock: MovableClock, vault: Vault
) -> None:
    clock.set(at("2026-11-20T10:00"))
    target = runtime.memories.remember(TARGET).memory
    for text in BOATS[:2]:
        runtime.memories.remember(text)
    clock.set(at("2026-11-22T09:00"))
    run_job(runtime, clock, "distill")
    (insight,) = (vault.root / "Insights").glob("*.md")
    assert all("distilled" in m.fields for m in runtime.memories.all())

    receipt = runtime.forgetter.forget(target.id)

    assert not insight.exists()
    dropped = [p for p in receipt.places if p.action == "dropped"]
    assert [p.place for p in dropped] == [f"Insights/{insight.name}"]
    assert "2 other sources wait for the distill job" in dropped[0].detail
    assert all("distilled" not in m.fields for m in runtime.memories.all())


def test_an_insight_the_owner_wrote_in_is_refreshed_never_dropped(
    runtime: Runtime, clock: MovableClock, vault: Vault
) -> None:
    clock.set(at("2026-11-20T10:00"))
    target = runtime.memories.remember(TARGET).memory
    for text in BOATS[:2]:
        runtime.memories.remember(text)
    clock.set(at("2026-11-22T09:00"))
    run_job(runtime, clock, "distill")
    (insight,) = (vault.root / "Insights").glob("*.md")
    with insight.open("a", encoding="utf-8") as note:
        note.write("\nMy own thought: sell two of them.\n")

    receipt = runtime.forgetter.forget(target.id)

    text = insight.read_text("utf-8")
    assert "My own thought: sell two of them." in text and target.id not in text
    assert {p.place: p.action for p in receipt.places}[f"Insights/{insight.name}"] == "refreshed"


# -- a person ---------------------------------------------------------------------------


@pytest.fixture
def with_ada(tmp_path: Path, tg: FakeTelegram, clock: MovableClock) -> Iterator[Path]:
    """A vault where Ada (a contact on Telegram) wrote twice, and memories about her."""
    root = tmp_path / "vault"
    init_vault(Vault(root))
    settings = Settings(
        vault=root,
        timezone="Europe/Berlin",
        channels={"telegram": telegram_config(tg, allow=[str(ADA)])},
    )
    runtime = Runtime.open(settings, clock=clock, embedder=HashEmbedder())
    try:
        runtime.contacts.create("Ada Lovelace", aliases=["Ada"], identities={"telegram": str(ADA)})
        runtime.memories.remember("Ada Lovelace prefers tea to coffee")
        runtime.memories.remember("Lunch with Ada on Friday at noon", tags=["family"])
        runtime.memories.remember("The boiler is serviced in March")
        hub = Hub(runtime)
        hub.start()
        try:
            tg.push_message(ADA, "Hello from Ada", sender_id=ADA, first_name="Ada")
            tg.push_message(ADA, "See you on Friday", sender_id=ADA, first_name="Ada")
            tg.push_message(OWNER, "/remember The garage code is 8812")
            wait_for(lambda: delivered(tg, OWNER), "the owner's /remember to be answered")
            wait_for(
                lambda: (
                    runtime.state.query(
                        "SELECT count(*) FROM messages WHERE session_id IN "
                        f"(SELECT id FROM sessions WHERE key = 'telegram:{ADA}')"
                    )[0][0]
                    == 2
                ),
                "Ada's messages to be captured",
            )
        finally:
            hub.stop()
    finally:
        runtime.close()
    yield root


def state_rows(root: Path, sql: str) -> list[Any]:
    import sqlite3

    conn = sqlite3.connect(root / ".memvault/state.db")
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_forgetting_a_person_shows_first_and_then_removes_everything_about_them(
    with_ada: Path,
) -> None:
    root = with_ada
    before = snapshot(root)
    plan = ok_json(root, "forget", "--contact", "Ada", "--dry-run")
    assert plan["kind"] == "contact" and plan["subject"] == "Contacts/Ada Lovelace.md"
    # Her conversation's turns too: kept as memories when they came (privacy/capture.py).
    assert sorted(m["text"] for m in plan["memories"]) == [
        "Ada Lovelace prefers tea to coffee",
        "Ada: Hello from Ada",
        "Ada: See you on Friday",
        "Lunch with Ada on Friday at noon",
    ]
    assert plan["notes"] == ["Contacts/Ada Lovelace.md"]
    assert plan["identities"] == {"telegram": [str(ADA)]}
    assert plan["chat_messages"] == 2
    shown = ok(root, "forget", "--contact", "Ada", "--dry-run").stdout
    assert "Forgetting the person Contacts/Ada Lovelace.md would remove:" in shown
    assert "Lunch with Ada on Friday at noon" in shown and "2 chat messages" in shown
    # Asked, and not answered yes (a script's closed stdin, or "n"): nothing goes.
    for answer in (None, "n\n"):
        asked = invoke(root, "forget", "--contact", "Ada", stdin=answer)
        assert asked.exit_code == 1 and "Forget all of this? [y/N]" in asked.stdout
        assert "Nothing was forgotten" in asked.stdout
    assert snapshot(root) == before

    done = ok_json(root, "forget", "--contact", "Ada", "--yes")

    receipt = done["receipt"]
    assert receipt["subject"] == "contact:Contacts/Ada Lovelace.md"
    assert places(receipt)["Contacts/Ada Lovelace.md"] == "deleted"
    assert not (root / "Contacts/Ada Lovelace.md").exists()
    memories = ok_json(root, "memories")
    assert sorted(m["text"] for m in memories) == [
        "The boiler is serviced in March",
        "The garage code is 8812",
    ]
    said = ok_json(root, "memories", "--category", "conversation")
    assert said and not [m for m in said if m["source"] == f"telegram:{ADA}"]
    assert state_rows(root, f"SELECT * FROM sessions WHERE key = 'telegram:{ADA}'") == []
    assert state_rows(root, f"SELECT * FROM channel_senders WHERE sender_id = '{ADA}'") == []
    assert state_rows(root, "SELECT text FROM messages WHERE text LIKE '%Ada%'") == []
    journal = "".join(p.read_text("utf-8") for p in (root / "Journal").glob("*.md"))
    assert "Ada" not in journal and "The garage code is 8812" in journal
    # The owner's own session and the rest of the vault are still there.
    assert state_rows(root, f"SELECT count(*) FROM sessions WHERE key = 'telegram:{OWNER}'") == [
        (1,)
    ]


def test_forgetting_a_topic_shows_what_a_search_finds_then_removes_it(
    runtime: Runtime, clock: MovableClock, vault: Vault
) -> None:
    root = vault.root
    clock.set(at("2026-11-20T10:00"))
    for text in BOATS:
        runtime.memories.remember(text)
    kept = runtime.memories.remember("The boiler is serviced in March").memory
    clock.set(at("2026-11-22T09:00"))
    run_job(runtime, clock, "distill")
    runtime.index.sync()
    runtime.close()
    before = snapshot(root)

    plan = ok_json(root, "forget", "--about", "boat moored at the marina", "--dry-run")
    assert sorted(m["text"] for m in plan["memories"]) == sorted(BOATS)
    shown = ok(root, "forget", "--about", "boat moored at the marina", "--dry-run").stdout
    assert "Forgetting the topic boat moored at the marina would remove:" in shown
    assert snapshot(root) == before

    done = ok_json(root, "forget", "--about", "boat moored at the marina", "--yes")

    assert [m["id"] for m in ok_json(root, "memories")] == [kept.id]
    assert done["receipt"]["subject"] == "about:boat moored at the marina"
    assert list((root / "Insights").glob("*.md")) == []  # its digest embedded only them
    assert any(p["action"] == "dropped" for p in done["receipt"]["places"])


# -- the same through the daemon -----------------------------------------------------


def normalized(receipt: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The receipt's places, ids and texts left out (two memories, one receipt); the
    daemon's own event buffer is the daemon's place alone."""
    return sorted(
        (p["place"], p["action"], re.sub(r"m-[0-9a-f]{8}", "ID", p["detail"]))
        for p in [*receipt["places"], *receipt["untouched"]]
        if p["place"] != "event stream (in memory)"
    )


@pytest.mark.both_backends
def test_the_cli_the_route_and_the_tool_give_one_receipt_with_and_without_a_daemon(
    start_daemon: StartDaemon, backend: str
) -> None:
    live = start_daemon()
    root = live.vault
    stored = [
        ok_json(root, "remember", f"The {colour} kayak lives in the boathouse")["id"]
        for colour in ("red", "blue", "green", "white")
    ]
    by_daemon = ok_json(root, "forget", stored[0])
    # Its recent events no longer hand its text out (memory_forgotten says what went).
    assert places(by_daemon["receipt"])["event stream (in memory)"] == "redacted"
    events = [(e.type, json.dumps(e.payload)) for e in live.daemon.bus.since(None)]
    assert not any("red kayak" in payload for _, payload in events)
    assert ("memory_forgotten", json.dumps({"id": stored[0], "path": "Memory/Facts.md"})) in events
    assert any("blue kayak" in payload for _, payload in events)
    if backend == "postgres":  # and the events daemons send each other through PostgreSQL
        shared = live.daemon.runtime.state.query("SELECT payload::text FROM memvault_events")
        assert shared and not any("red kayak" in str(r[0]) for r in shared)
    # Direct, the CLI opens the daemon's storage itself (PostgreSQL's, when it is that).
    env = {}
    if backend == "postgres":
        env = {"MEMVAULT_STORAGE__BACKEND": "postgres", "MEMVAULT_PG_DSN": os.environ[DSN]}
    direct = ok_json(root, "--direct", "forget", stored[1], env=env)
    assert by_daemon["forgotten"] is True and direct["forgotten"] is True
    assert normalized(by_daemon["receipt"]) == normalized(direct["receipt"])
    assert set(by_daemon) == set(direct)
    printed = ok(root, "forget", stored[2]).stdout
    assert printed.startswith(f"Forgot {stored[2]}: The green kayak lives in the boathouse\n")
    for line in ("Receipt", "Memory/Facts.md", "removed", "Not touched by design:"):
        assert line in printed
    approval = (root / ".memvault/approval-token").read_text().strip()
    with live.client() as api:
        called = answered(
            api.post(
                "/v1/tools/forget",
                json={"id": stored[3]},
                headers={"X-Memvault-Approval": approval},
            )
        )["result"]
        assert called["forgotten"] is True
        assert normalized(called["receipt"]) == normalized(direct["receipt"])
        failed(api.delete(f"/v1/memories/{stored[3]}"), 404, "not_found")
        assert answered(api.get("/v1/memories")) == []


def test_a_token_bound_to_an_agent_forgets_only_its_own_and_no_person_or_topic(
    start_daemon: StartDaemon,
) -> None:
    live = start_daemon(background=False)
    _, secret = live.daemon.tokens.create("alice-desk", [Scope.WRITE], agent="alice")
    with live.client() as owner:
        mine = answered(owner.post("/v1/memories", json={"text": "The owner's own secret"}))
    with live.client(token=secret) as alice:
        hers = answered(alice.post("/v1/memories", json={"text": "Alice files on Tuesdays"}))
        failed(alice.delete(f"/v1/memories/{mine['id']}"), 404, "not_found")
        failed(alice.post("/v1/forget", json={"about": "secret"}), 403, "insufficient_scope")
        gone = answered(alice.delete(f"/v1/memories/{hers['id']}"))
        assert gone["receipt"]["forgotten"][0]["id"] == hers["id"]
    with live.client() as owner:
        plan = answered(owner.post("/v1/forget", json={"about": "secret", "dry_run": True}))
        assert [m["id"] for m in plan["memories"]] == [mine["id"]]
        failed(owner.post("/v1/forget", json={}), 400, "validation_failed")
        receipt = answered(
            owner.post("/v1/forget", json={"about": "secret", "memory_ids": [mine["id"]]})
        )
        assert [m["id"] for m in receipt["forgotten"]] == [mine["id"]]
        assert answered(owner.get("/v1/memories")) == []


def test_the_forget_tool_answers_with_the_receipt(runtime: Runtime) -> None:
    memory = runtime.memories.remember("The attic key is on the blue hook").memory
    context = ToolContext(runtime=runtime, policy=Policy(approver=AllowAll()))
    result = default_registry().call("forget", {"id": memory.id}, context)
    assert result.ok, result.error
    assert result.data["forgotten"] is True and result.data["text"] == memory.text
    assert places(result.data["receipt"])["Memory/Facts.md"] == "removed"
    json.dumps(result.data)  # what a model and MCP are sent


def test_forget_needs_one_thing_to_forget(vault: Vault) -> None:
    root = vault.root
    for args in (
        ("forget",),
        ("forget", "m-00000000", "--contact", "Ada"),
        ("forget", "--contact", "Ada", "--about", "boats"),
        ("forget", "m-00000000", "--dry-run"),
        ("forget", "--about", "boats", "--json"),
    ):
        fail(root, *args, code=EXIT_INVALID)
    assert "No contact" in invoke(root, "forget", "--contact", "Nobody", "--yes").stderr


def test_a_yes_typed_at_the_question_forgets(runtime: Runtime, vault: Vault) -> None:
    runtime.memories.remember("The red boat is moored at the north marina")
    runtime.index.sync()
    runtime.close()
    result = invoke(vault.root, "forget", "--about", "red boat", stdin="y\n")
    assert result.exit_code == 0, result.output
    assert "Forget all of this? [y/N]" in result.stdout and "Forgot 1 memory:" in result.stdout
    assert ok_json(vault.root, "memories") == []


def test_the_daemon_answers_plans_and_receipts_as_the_cli_prints_them(live: Live) -> None:
    root = live.vault
    ok_json(root, "remember", "The red boat is moored at the north marina")
    with httpx.Client(base_url=live.url, timeout=WAIT) as anonymous:
        failed(anonymous.post("/v1/forget", json={"about": "boat"}), 401, "unauthorized")
    plan = ok_json(root, "forget", "--about", "red boat", "--dry-run")
    assert [m["text"] for m in plan["memories"]] == ["The red boat is moored at the north marina"]
    done = ok(root, "forget", "--about", "red boat", "--yes").stdout
    assert "Forgetting the topic red boat would remove:" in done
    assert "Forgot 1 memory:" in done and "Not touched by design:" in done
    assert ok_json(root, "memories") == []
