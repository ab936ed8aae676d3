"""The daemon's scheduler thread: crash recovery at start, events on the bus, config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memvault.config import load_settings
from memvault.errors import ConfigError
from memvault.jobs import Job, JobContext, Schedule
from memvault.memory.state import StateDB
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import wait_for


def test_daemon_marks_a_crashed_run_failed_at_start(tmp_path: Path, start_daemon: Any) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    state = StateDB(root / ".memvault")
    with state.transaction() as conn:
        conn.execute(
            "INSERT INTO job_runs (job, started, status) "
            "VALUES ('reminders', '2026-05-01T12:00:00+02:00', 'running')"
        )
    state.close()
    live = start_daemon(root)
    wait_for(
        lambda: live.daemon.state.query("SELECT status FROM job_runs")[0][0] != "running",
        "the interrupted run to be marked failed",
    )
    row = live.daemon.state.query("SELECT status, error FROM job_runs")[0]
    assert row["status"] == "failed" and "interrupted" in row["error"]


def test_daemon_job_runs_publish_events(start_daemon: Any) -> None:
    live = start_daemon(background=False)

    def hello(context: JobContext) -> str:
        return "hi"

    engine = live.daemon.jobs
    engine.add(Job("hello", Schedule(every_seconds=60), hello))
    run = engine.run_now("hello")
    kinds = [event.type for event in live.daemon.bus.since(0)]
    assert run.output == "hi"
    assert kinds[-2:] == ["job_started", "job_finished"]


def test_jobs_tick_is_configurable_and_checked(tmp_path: Path) -> None:
    init_vault(Vault(tmp_path / "v"))
    loaded = load_settings(tmp_path / "v", overrides={"jobs": {"tick_seconds": 2}})
    assert loaded.settings.jobs.tick_seconds == 2
    with pytest.raises(ConfigError):
        load_settings(tmp_path / "v", overrides={"jobs": {"tick_seconds": 0}})
