"""``memvault unarchive``: what the archival job retired comes back, searchable again."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cli_support import EXIT_INVALID, EXIT_NOT_FOUND, fail, ok, ok_json
from memvault.config import ArchivalJob, Settings
from memvault.jobs import Job, JobEngine, Schedule, archival
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import TZ, HashEmbedder, MovableClock

NOW = datetime(2026, 11, 22, 9, 30, tzinfo=TZ)
LONG_AGO = NOW - timedelta(days=400)


@pytest.fixture
def archived(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A vault the archival job has run on: two memories and a task archived, one kept."""
    root = tmp_path / "vault"
    init_vault(Vault(root))
    clock = MovableClock(LONG_AGO)
    runtime = Runtime.open(
        Settings(vault=root, timezone="Europe/Berlin"), clock=clock, embedder=HashEmbedder()
    )
    try:
        runtime.recalls.begin(LONG_AGO)
        locker = runtime.memories.remember("Gym locker number 4711", importance=0.1).memory
        bus = runtime.memories.remember("Old bus timetable for line 9", importance=0.1).memory
        kept = runtime.memories.remember("Daughter's birthday is in June", importance=0.9).memory
        runtime.tasks.create("Sell the bike")
        runtime.tasks.complete("Sell the bike")
        clock.set(NOW)
        job = Job("archival", Schedule(cron="0 4 * * 0"), archival.run, settings=ArchivalJob())
        run = JobEngine(runtime.state, clock, [job], runtime=runtime).run_now("archival")
        assert run.status == "ok", run.error
        assert run.metadata["archived"]["memories"] == [locker.id, bus.id]
    finally:
        runtime.close()
    return root, {"locker": locker.id, "bus": bus.id, "kept": kept.id}


def search_ids(vault: Path, query: str) -> set[str]:
    hits: list[dict[str, Any]] = ok_json(vault, "search", query)
    return {h["id"] for h in hits if h["id"]}


def test_unarchived_memory_is_searchable_again(archived: tuple[Path, dict[str, str]]) -> None:
    vault, ids = archived
    assert search_ids(vault, "locker 4711") == set()

    out = ok(vault, "unarchive", ids["locker"]).stdout

    assert out.strip() == f"Unarchived memory {ids['locker']}: Gym locker number 4711"
    assert search_ids(vault, "locker 4711") == {ids["locker"]}
    assert search_ids(vault, "bus timetable") == set()  # the other stays archived
    line = (vault / "Memory" / "Facts.md").read_text()
    assert "[archived::" in line and line.count("[archived::") == 1


def test_a_task_moves_back_to_completed(archived: tuple[Path, dict[str, str]]) -> None:
    vault, _ = archived
    assert (vault / "Tasks/Archive/Sell the bike.md").exists()

    data = ok_json(vault, "unarchive", "--task", "sell the bike")

    assert data == {
        "memories": [],
        "tasks": [
            {
                "title": "Sell the bike",
                "from": "Tasks/Archive/Sell the bike.md",
                "to": "Tasks/completed/Sell the bike.md",
            }
        ],
    }
    text = (vault / "Tasks/completed/Sell the bike.md").read_text()
    assert "archived:" not in text
    assert not (vault / "Tasks/Archive/Sell the bike.md").exists()
    tasks = ok_json(vault, "task", "list", "--status", "done")
    assert [t["title"] for t in tasks] == ["Sell the bike"]


def test_all_since_brings_back_everything_archived_from_that_day(
    archived: tuple[Path, dict[str, str]],
) -> None:
    vault, ids = archived
    assert ok_json(vault, "unarchive", "--all-since", "2026-11-23") == {"memories": [], "tasks": []}

    data = ok_json(vault, "unarchive", "--all-since", "2026-11-22")

    assert data["memories"] == [ids["locker"], ids["bus"]]
    assert [t["to"] for t in data["tasks"]] == ["Tasks/completed/Sell the bike.md"]
    assert ok(vault, "unarchive", "--list").stdout.strip() == "Nothing is archived."


def test_list_and_memories_archived_show_what_is_archived(
    archived: tuple[Path, dict[str, str]],
) -> None:
    vault, ids = archived
    listed = ok(vault, "unarchive", "--list").stdout
    assert "Archived: 2 memories, 1 task." in listed
    assert f"{ids['locker']} (since 2026-11-22): Gym locker number 4711" in listed
    assert "task 'Sell the bike' (since 2026-11-22): Tasks/Archive/Sell the bike.md" in listed

    assert {m["id"] for m in ok_json(vault, "memories")} == {ids["kept"]}
    every = ok_json(vault, "memories", "--archived")
    assert {m["id"] for m in every if m["archived"]} == {ids["locker"], ids["bus"]}
    table = ok(vault, "memories", "--archived").stdout
    assert "(archived) Gym locker number 4711" in table
    assert "(archived) Daughter" not in table


def test_unknown_id_is_one_sentence_and_changes_nothing(
    archived: tuple[Path, dict[str, str]],
) -> None:
    vault, ids = archived
    before = (vault / "Memory" / "Facts.md").read_bytes()

    message = fail(vault, "unarchive", ids["locker"], "m-00000000", code=EXIT_NOT_FOUND)

    assert message == "Error: No memory with id 'm-00000000'."
    assert (vault / "Memory" / "Facts.md").read_bytes() == before
    assert "not archived" in fail(vault, "unarchive", ids["kept"], code=EXIT_INVALID)
    assert "No archived task named 'Paint'" in fail(
        vault, "unarchive", "--task", "Paint", code=EXIT_NOT_FOUND
    )
    assert "Name what to bring back" in fail(vault, "unarchive", code=EXIT_INVALID)
    assert "--all-since" in fail(vault, "unarchive", "--all-since", "someday", code=EXIT_INVALID)
