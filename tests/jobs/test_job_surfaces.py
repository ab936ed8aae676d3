"""The jobs over HTTP, the tools, the CLI (with and without a daemon) and doctor."""

from __future__ import annotations

import json
import threading
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from channel_support import OWNER, delivered, telegram_config
from cli_support import EXIT_CONFLICT, EXIT_NOT_FOUND, invoke
from gateway_support import Live, failed, ok
from memvault.jobs import Job, JobContext, Schedule
from memvault.memory.state import StateDB
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import daytime_zone
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for

BUILT_IN = {
    "archival", "daily_note", "distill", "heartbeat", "knowledge_graph", "living_summary",
    "reminders",
    "skill_discovery",
}  # fmt: skip


def add_note_job(live: Live, gate: threading.Event | None = None) -> None:
    """A job that appends a line to Notes/log.md (after ``gate`` opens, if given)."""

    def note(ctx: JobContext) -> str:
        if gate is not None:
            assert gate.wait(WAIT)
        ctx.will_change("Notes/log.md")
        ctx.services.vault.edit_text(
            "Notes/log.md", lambda text: (text or "# Log\n") + "a job was here\n", must_exist=False
        )
        return "wrote Notes/log.md"

    live.daemon.jobs.add(Job("note", Schedule(every_seconds=3600), note, description="notes"))


def finished(api: httpx.Client, run_id: int) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        run: dict[str, Any] = ok(api.get(f"/v1/jobs/runs/{run_id}"))
        return run if run["status"] != "running" else None

    return wait_for(ended, f"run {run_id} to finish")


def test_http_lists_runs_and_undoes_jobs(live: Live, api: httpx.Client) -> None:
    jobs = {j["name"]: j for j in ok(api.get("/v1/jobs"))}
    assert set(jobs) == BUILT_IN
    # The cheap ones are on by default; those that call a model or retire memories are off.
    assert {n for n, j in jobs.items() if j["enabled"]} == {"daily_note", "reminders"}
    assert jobs["daily_note"]["schedule"] == "0 21 * * *" and jobs["daily_note"]["uses_model"]
    assert jobs["heartbeat"]["next_run"] is None
    add_note_job(live)
    started = ok(api.post("/v1/jobs/note/run"), status=202)
    run = finished(api, started["run_id"])
    assert (run["status"], run["output"]) == ("ok", "wrote Notes/log.md")
    assert [c["path"] for c in run["metadata"]["changes"]] == ["Notes/log.md"]
    assert [r["id"] for r in ok(api.get("/v1/jobs/note/runs"))] == [run["id"]]
    assert ok(api.get("/v1/jobs/runs"))[0]["id"] == run["id"]
    undone = ok(api.post(f"/v1/jobs/runs/{run['id']}/undo"))
    assert undone == {"run_id": run["id"], "restored": ["Notes/log.md"]}
    assert not (live.daemon.runtime.vault.root / "Notes/log.md").exists()
    error = failed(api.post(f"/v1/jobs/runs/{run['id']}/undo"), 409, "conflict")
    assert "already undone" in error["message"]
    error = failed(api.post("/v1/jobs/nightly/run"), 404, "not_found")
    assert error["message"].startswith("There is no job called 'nightly'")
    failed(api.get("/v1/jobs/runs/999"), 404, "not_found")


def test_a_running_job_is_not_started_twice(live: Live, api: httpx.Client) -> None:
    gate = threading.Event()
    add_note_job(live, gate)
    first = ok(api.post("/v1/jobs/note/run"), status=202)
    error = failed(api.post("/v1/jobs/note/run"), 409, "conflict")
    assert error["message"] == "The job 'note' is already running."
    gate.set()
    assert finished(api, first["run_id"])["status"] == "ok"


def test_the_job_tools_list_trigger_and_tell_history(live: Live) -> None:
    add_note_job(live)
    with live.client() as api:
        listed = ok(api.post("/v1/tools/list_agent_jobs", json={}))["result"]["jobs"]
        assert {j["name"] for j in listed} == BUILT_IN | {"note"}
        # Starting a job writes files: a tier-2 tool, so it needs the owner's approval.
        failed(api.post("/v1/tools/trigger_agent_job", json={"job": "note"}), 403,
               "approval_required")  # fmt: skip
    with live.client(**{"X-Memvault-Approval": live.daemon.approval_token}) as api:
        called = ok(api.post("/v1/tools/trigger_agent_job", json={"name": "note"}))["result"]
        assert called["status"] == "running"
        run = finished(api, called["run_id"])
        history = ok(api.post("/v1/tools/get_agent_job_history", json={"job": "note"}))
        assert [r["id"] for r in history["result"]["runs"]] == [run["id"]]
        unknown = failed(api.post("/v1/tools/trigger_agent_job", json={"job": "x"}), 404,
                         "not_found")  # fmt: skip
        assert "list_agent_jobs" in unknown["message"]


def test_cli_runs_lists_and_undoes_without_a_daemon(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    zone = {"MEMVAULT_TIMEZONE": daytime_zone()}
    listed = json.loads(invoke(root, "jobs", "list", "--json", env=zone).stdout)
    assert {j["name"] for j in listed} == BUILT_IN
    shown = invoke(root, "jobs", "list", env=zone).stdout
    assert "daily_note" in shown and "0 21 * * *" in shown
    quiet = invoke(root, "jobs", "run", "daily_note", env=zone)
    assert quiet.exit_code == 0 and "Run 1 of daily_note: skipped." in quiet.stdout
    assert invoke(root, "remember", "The boiler is serviced every October", env=zone).exit_code == 0
    result = invoke(root, "jobs", "run", "daily_note", env=zone)
    assert result.exit_code == 0, result.output
    assert "Run 2 of daily_note: ok." in result.stdout
    run = json.loads(invoke(root, "jobs", "history", "daily_note", "--json", env=zone).stdout)[0]
    changed = [c["path"] for c in run["metadata"]["changes"]]
    assert changed and changed[0].startswith("Journal/")
    assert (root / changed[0]).exists()
    undone = invoke(root, "jobs", "undo", str(run["id"]), env=zone)
    assert undone.exit_code == 0, undone.output
    assert f"Run {run['id']} undone: restored {changed[0]}" in undone.stdout
    again = invoke(root, "jobs", "undo", str(run["id"]), env=zone)
    assert again.exit_code == EXIT_CONFLICT and "already undone" in again.output
    missing = invoke(root, "jobs", "run", "nightly", env=zone)
    assert missing.exit_code == EXIT_NOT_FOUND
    assert "There is no job called 'nightly'" in missing.output


def test_cli_says_the_same_through_the_daemon(live: Live) -> None:
    root = live.daemon.runtime.vault.root
    env = {"MEMVAULT_CLI__AUTOSTART": "false"}
    direct = invoke(root, "--direct", "jobs", "run", "nightly")
    through = invoke(root, "jobs", "run", "nightly", env=env)
    assert direct.exit_code == through.exit_code == EXIT_NOT_FOUND
    assert direct.output.splitlines()[0] == through.output.splitlines()[0]
    add_note_job(live)
    result = invoke(root, "jobs", "run", "note", env=env)
    assert result.exit_code == 0, result.output
    assert "Run 1 of note: ok." in result.stdout  # the daemon's job: only it knows "note"
    assert "wrote Notes/log.md" in result.stdout
    history = invoke(root, "jobs", "history", "--json", env=env)
    assert json.loads(history.stdout)[0]["job"] == "note"


def test_doctor_reports_a_failing_job(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    state = StateDB(root / ".memvault")
    with state.transaction() as conn:
        for minute in (1, 2, 3):
            conn.execute(
                "INSERT INTO job_runs (job, started, finished, status, error) "
                "VALUES ('reminders', ?, ?, 'failed', 'Telegram said: Unauthorized.')",
                (f"2026-05-01T12:0{minute}:00+02:00", f"2026-05-01T12:0{minute}:01+02:00"),
            )
    state.close()
    report = json.loads(invoke(root, "doctor", "--json").stdout)
    check = next(c for c in report["checks"] if c["name"] == "jobs")
    assert check["status"] == "error"
    assert "reminders failed 3 time(s) in a row" in check["message"]
    assert "Telegram said: Unauthorized." in check["message"]


def test_the_daemons_jobs_reach_the_owner_over_its_channels(
    start_daemon: Any, tg: FakeTelegram, clock: Any
) -> None:
    live = start_daemon(settings={"channels": {"telegram": telegram_config(tg)}})
    live.daemon.runtime.tasks.create("Renew the passport", due="2026-11-22")
    clock.set(datetime(2026, 11, 22, 9, 30, tzinfo=ZoneInfo("Europe/Berlin")))
    run = live.daemon.jobs.run_now("reminders")
    assert run.status == "ok", run.error
    texts = wait_for(lambda: delivered(tg, OWNER), "the reminder on Telegram")
    assert any("Renew the passport" in text for text in texts)


def test_without_a_channel_to_the_owner_the_daemons_reminders_wait(live: Live, clock: Any) -> None:
    live.daemon.runtime.tasks.create("Renew the passport", due="2026-11-22")
    clock.set(datetime(2026, 11, 22, 9, 30, tzinfo=ZoneInfo("Europe/Berlin")))
    run = live.daemon.jobs.run_now("reminders")
    assert run.status == "skipped"
    assert "No enabled channel has an owner id" in (run.error or "")
