"""Agent runs' records (memvault.memory.runs) in PostgreSQL's state: the same statements
as in state.db, against a real server."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from memvault.config import StorageSettings
from memvault.memory.runs import RunRecord, RunRecords
from memvault.storage.pg_state import PgStateDB
from memvault.storage.postgres import PostgresStorage

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.fixture
def state(migrated: str) -> Iterator[PgStateDB]:
    settings = StorageSettings(backend="postgres")
    with PostgresStorage.open(settings, environ={"MEMVAULT_PG_DSN": migrated}) as storage:
        yield PgStateDB(storage)


def test_a_run_is_recorded_listed_read_and_pruned(state: PgStateDB) -> None:
    runs = RunRecords(state, lambda: NOW, keep_days=7)
    recalled = [{"id": "m-1", "score": 0.8, "line": "- tea (fact, ^m-1)", "shown": True}]
    old = runs.record(RunRecord(started_at=NOW - timedelta(days=9), surface="cli", command="old"))
    new = runs.record(
        RunRecord(
            started_at=NOW,
            surface="channel",
            command="Which tea?",
            session_id=4,
            turn=17,
            channel="telegram",
            context={"sections": [{"title": "Owner", "shown": ["- Ada"], "left_out": []}]},
            recalled=recalled,
            tool_calls=[{"name": "recall", "arguments": "{}", "ok": True, "result": "tea"}],
        )
    )
    assert old is not None and new is not None and new > old
    assert [r.command for r in runs.list()] == ["Which tea?"]
    assert [r.id for r in runs.list(channel="telegram")] == [new]
    assert runs.channels() == ["telegram"]
    got = runs.get(new)
    assert got.recalled == recalled and got.tool_calls[0]["name"] == "recall"
    assert got.context["sections"][0]["shown"] == ["- Ada"]
    mark = {"id": "m-1", "score": "0.800", "line": "tea (fact, ^m-1)"}
    assert runs.of_session(4) == {17: {"id": new, "top": [mark], "more": 0}}
    # The first write of a process prunes: the old row went as it was written.
    assert state.query("SELECT count(*) FROM agent_runs")[0][0] == 1
    assert runs.prune() == 0
