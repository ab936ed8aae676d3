"""Who read what (issue 29, item 5): each read of a memory is recorded with who read it,
when, through what and how (search, context, tool, get), bounded in time and per memory,
and shown by ``memvault memory access ID`` and ``GET /v1/memories/{id}/access``."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from channel_support import OWNER, delivered, telegram_config
from cli_support import EXIT_NOT_FOUND, fail, invoke, ok, ok_json
from gateway_support import StartDaemon, failed
from gateway_support import ok as answered
from memvault.acting import Actor, acting_as
from memvault.channels.hub import Hub
from memvault.config import JobSettings, Settings
from memvault.gateway.tokens import Scope
from memvault.jobs import JobEngine
from memvault.jobs.catalog import job_from
from memvault.jobs.engine import JobContext
from memvault.privacy.reads import reading
from memvault.runtime import Runtime
from memvault.tools import default_registry
from memvault.tools.policy import AllowAll, Policy
from memvault.tools.registry import ToolContext
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import TZ, HashEmbedder, MovableClock
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(3 * WAIT)

BOILER = "The boiler is serviced every March by Hansen"
KEY = "The spare key hangs on the blue hook in the shed"
DSN = "MEMVAULT_PG_DSN"


def reads(runtime: Runtime, memory_id: str) -> list[dict[str, Any]]:
    return [r.to_dict() for r in runtime.reads.of(memory_id)]


def ways(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(path, surface) of each read, oldest first."""
    return [(r["path"], r["surface"]) for r in reversed(found)]


@pytest.mark.both_backends
def test_searches_contexts_tools_and_gets_are_recorded_with_who(runtime: Runtime) -> None:
    boiler = runtime.memories.remember(BOILER).memory
    key = runtime.memories.remember(KEY, tags=["core"]).memory  # pinned: in every context
    runtime.index.sync()

    runtime.searcher.search("boiler serviced")  # the CLI's own search
    runtime.context.build_result("when is the boiler serviced")
    tools = default_registry()
    context = ToolContext(runtime=runtime, policy=Policy(approver=AllowAll()), surface="mcp")
    assert tools.call("memory_search", {"query": "boiler serviced"}, context).ok
    assert tools.call("memory_get", {"path": boiler.id}, context).ok
    assert tools.call("get_context", {"query": "boiler"}, context).ok
    ada = Actor(agent="alice", observer=True, audience="contact:Contacts/Ada Lovelace.md")
    with acting_as(ada), reading(surface="channel"):
        runtime.searcher.search("boiler serviced")
    runtime.record_reads([boiler.id], "get")

    found = reads(runtime, boiler.id)
    assert ways(found) == [
        ("search", "cli"),
        ("context", "cli"),
        ("tool", "mcp"),
        ("tool", "mcp"),
        ("context", "mcp"),
        ("search", "channel"),
        ("get", "cli"),
    ]
    newest_first = [r["at"] for r in found]
    assert newest_first == sorted(newest_first, reverse=True)
    by_alice = found[1]
    assert by_alice["agent"] == "alice" and by_alice["observer"] is True
    assert by_alice["audience"] == "contact:Contacts/Ada Lovelace.md"
    assert all(r["agent"] is None and r["observer"] is False for r in found[2:])
    # The pinned memory was shown by each context, though no search returned it.
    assert ("context", "cli") in ways(reads(runtime, key.id))
    assert ways(reads(runtime, key.id)).count(("context", "mcp")) == 1


def test_reads_are_kept_for_the_window_and_at_most_n_per_memory(
    vault: Vault, clock: MovableClock
) -> None:
    settings = Settings(
        vault=vault.root,
        timezone="Europe/Berlin",
        privacy={"reads_keep_days": 30, "reads_per_memory": 3},
    )
    runtime = Runtime.open(settings, clock=clock, embedder=HashEmbedder())
    try:
        boiler = runtime.memories.remember(BOILER).memory
        key = runtime.memories.remember(KEY).memory
        start = datetime(2026, 10, 1, 9, 0, tzinfo=TZ)
        for day in range(5):
            clock.set(start + timedelta(days=day))
            runtime.record_reads([boiler.id], "get")
        assert [r["at"][:10] for r in reads(runtime, boiler.id)] == [
            "2026-10-05",
            "2026-10-04",
            "2026-10-03",
        ]
        clock.set(start)
        runtime.record_reads([key.id], "get")
        # Forty days on: outside the window, shown no more, and pruned by the next write.
        clock.set(start + timedelta(days=40))
        assert reads(runtime, key.id) == [] and reads(runtime, boiler.id) == []
        runtime.reads._pruned = 0.0  # the next write prunes (at most once a minute)
        runtime.record_reads([boiler.id], "search")
        rows = runtime.state.query("SELECT memory_id, at FROM memory_reads ORDER BY id")
        assert [(r["memory_id"], r["at"][:10]) for r in rows] == [(boiler.id, "2026-11-10")]
    finally:
        runtime.close()


def test_no_read_is_recorded_when_the_window_is_zero(vault: Vault, clock: MovableClock) -> None:
    settings = Settings(vault=vault.root, timezone="Europe/Berlin", privacy={"reads_keep_days": 0})
    runtime = Runtime.open(settings, clock=clock, embedder=HashEmbedder())
    try:
        boiler = runtime.memories.remember(BOILER).memory
        runtime.index.sync()
        runtime.searcher.search("boiler serviced")
        runtime.record_reads([boiler.id], "get")
        assert runtime.state.query("SELECT count(*) FROM memory_reads")[0][0] == 0
    finally:
        runtime.close()


@pytest.mark.both_backends
def test_the_route_and_the_cli_show_who_read_a_memory(
    start_daemon: StartDaemon, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = start_daemon(background=False)
    root = live.vault
    _, reader = live.daemon.tokens.create("dashboard", [Scope.READ])
    _, alice = live.daemon.tokens.create("alice-desk", [Scope.REMEMBER], agent="alice")
    with live.client() as owner:
        boiler = answered(owner.post("/v1/memories", json={"text": BOILER}))
        answered(owner.get(f"/v1/memories/{boiler['id']}"))
    with live.client(token=reader) as client:
        hits = answered(client.get("/v1/search", params={"q": "boiler serviced", "keyword": True}))
        assert [h["id"] for h in hits] == [boiler["id"]]
    with live.client(token=alice) as client:
        hers = answered(client.post("/v1/memories", json={"text": KEY}))
        failed(client.get(f"/v1/memories/{boiler['id']}/access"), 404, "not_found")
        own = answered(client.get(f"/v1/memories/{hers['id']}/access"))
        assert own == []
    with live.client() as owner:
        shown = answered(owner.get(f"/v1/memories/{boiler['id']}/access"))
        failed(owner.get("/v1/memories/m-00000000/access"), 404, "not_found")
        one = answered(owner.get(f"/v1/memories/{boiler['id']}/access", params={"limit": 1}))
    assert [(r["path"], r["surface"], r["agent"], r["observer"]) for r in shown] == [
        ("search", "http", "dashboard", True),  # a read token's search: read, not recalled
        ("get", "http", None, False),
    ]
    assert one == shown[:1]
    recalled = live.daemon.runtime.state.query("SELECT memory_id FROM memory_recalls")
    assert [r["memory_id"] for r in recalled] == []

    # The CLI through the daemon and on the files prints the same.
    env: dict[str, str | None] = {}
    if backend == "postgres":  # direct, the CLI opens the daemon's PostgreSQL itself
        env = {"MEMVAULT_STORAGE__BACKEND": "postgres", "MEMVAULT_PG_DSN": os.environ[DSN]}
    assert ok_json(root, "memory", "access", boiler["id"]) == shown
    assert ok_json(root, "--direct", "memory", "access", boiler["id"], env=env) == shown
    printed = ok(root, "memory", "access", boiler["id"]).stdout
    assert printed == ok(root, "--direct", "memory", "access", boiler["id"], env=env).stdout
    assert "2 reads of" in printed and "dashboard (observer)" in printed and "owner" in printed
    assert "No memory" in fail(root, "memory", "access", "m-00000000", code=EXIT_NOT_FOUND)
    quiet = invoke(root, "memory", "access", hers["id"])
    assert quiet.exit_code == 0 and "No read of" in quiet.stdout


def test_a_job_reads_as_a_job(runtime: Runtime, clock: MovableClock) -> None:
    boiler = runtime.memories.remember(BOILER).memory
    runtime.index.sync()

    def look(ctx: JobContext) -> str:
        return f"{len(ctx.services.searcher.search('boiler serviced'))} found"

    jobs = JobEngine(
        runtime.state,
        clock,
        [job_from("looker", JobSettings(every_seconds=3600), look, "Looks.")],
        runtime=runtime,
    )
    assert jobs.run_now("looker").output == "1 found"
    assert ways(reads(runtime, boiler.id)) == [("search", "job")]


def test_a_channel_command_reads_as_the_channel(
    tmp_path: Path, tg: FakeTelegram, clock: MovableClock
) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    settings = Settings(
        vault=root, timezone="Europe/Berlin", channels={"telegram": telegram_config(tg)}
    )
    runtime = Runtime.open(settings, clock=clock, embedder=HashEmbedder())
    try:
        boiler = runtime.memories.remember(BOILER).memory
        runtime.index.sync()
        hub = Hub(runtime)
        hub.start()
        try:
            tg.push_message(OWNER, "/recall boiler serviced")
            wait_for(lambda: delivered(tg, OWNER), "the owner's /recall to be answered")
        finally:
            hub.stop()
        assert BOILER in delivered(tg, OWNER)[0]
        assert ways(reads(runtime, boiler.id)) == [("search", "channel")]
    finally:
        runtime.close()
