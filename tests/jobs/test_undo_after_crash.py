"""Undo of a job run killed in the middle (issue 28, item 2).

A run records what it changes before each change is made (``changes.json``
beside the copies it keeps), so a run killed with SIGKILL the moment it
replaced a file is listed, after the restart, with that file, and
``memvault jobs undo RUN`` puts it back; a file a person edited since is
named and nothing is changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_support import EXIT_CONFLICT, invoke, ok_json
from daemon_process import DaemonProcess, daemon_env
from memvault.memory.state import StateDB
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(4 * WAIT)  # a hang guard: every wait has its own bound

# The owner's own MEMORY.md, CRLF and all: undo must give these bytes back exactly.
OWN = b"# My memory\r\n\r\nWhat I keep here myself.\r\nNo block of memvault's yet.\r\n"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    (root / "MEMORY.md").write_bytes(OWN)
    return root


def status(vault: Path, run_id: int) -> str:
    """The run's status in state.db, read as the next process would find it."""
    state = StateDB(vault / ".memvault")
    try:
        return str(state.query("SELECT status FROM job_runs WHERE id = ?", (run_id,))[0][0])
    finally:
        state.close()


def killed_as_it_replaces_memory(vault: Path) -> int:
    """Start a daemon, run living_summary in it, and SIGKILL the daemon the moment
    MEMORY.md is replaced; the run's id."""
    memory = vault / "MEMORY.md"
    daemon = DaemonProcess(vault)
    try:
        inode = os.stat(memory).st_ino
        # An editor holding the note open, as Obsidian may: after its rename the job waits
        # (a second at most) for such a writer, so the run cannot finish before the kill.
        with memory.open("ab"), daemon.client() as api:
            response = api.post("/v1/jobs/living_summary/run")
            assert response.status_code == 202, response.text
            run_id = int(response.json()["result"]["run_id"])
            deadline = time.monotonic() + WAIT
            while os.stat(memory).st_ino == inode:
                assert time.monotonic() < deadline, "living_summary never replaced MEMORY.md"
            daemon.kill()
    finally:
        if daemon.process.poll() is None:
            daemon.kill()
    assert status(vault, run_id) == "running", "the run ended before the kill reached it"
    assert memory.read_bytes() != OWN  # the job's text, not the owner's
    return run_id


@pytest.fixture
def restarted(vault: Path) -> Iterator[tuple[DaemonProcess, int]]:
    run_id = killed_as_it_replaces_memory(vault)
    daemon = DaemonProcess(vault)
    yield daemon, run_id
    daemon.stop()


@pytest.mark.slow  # daemon processes: over ten seconds on a loaded machine
def test_a_run_killed_as_it_replaced_memory_md_is_undone_after_the_restart(
    vault: Path, restarted: tuple[DaemonProcess, int]
) -> None:
    daemon, run_id = restarted
    with daemon.client() as api:

        def recovered() -> dict[str, Any] | None:
            run: dict[str, Any] = api.get(f"/v1/jobs/runs/{run_id}").json()["result"]
            return run if run["status"] != "running" else None

        run = wait_for(recovered, "the daemon to mark the killed run interrupted")
    assert run["status"] == "failed" and "interrupted" in run["error"]
    assert [c["path"] for c in run["metadata"]["changes"]] == ["MEMORY.md"]
    (listed,) = [r for r in ok_json(vault, "jobs", "history") if r["id"] == run_id]
    assert [c["path"] for c in listed["metadata"]["changes"]] == ["MEMORY.md"]

    undone = ok_json(vault, "jobs", "undo", run_id)
    assert undone == {"run_id": run_id, "restored": ["MEMORY.md"]}
    assert (vault / "MEMORY.md").read_bytes() == OWN  # byte for byte


@pytest.mark.slow  # daemon processes: over ten seconds on a loaded machine
def test_undo_of_a_killed_run_refuses_when_the_owner_edited_the_file_since(vault: Path) -> None:
    run_id = killed_as_it_replaces_memory(vault)
    memory = vault / "MEMORY.md"
    with memory.open("ab") as note:
        note.write(b"- a line the owner added after the crash\n")
    edited = memory.read_bytes()

    # No daemon now: the CLI works on the vault itself, and finds the run's process gone.
    refused = invoke(vault, "jobs", "undo", run_id)
    assert refused.exit_code == EXIT_CONFLICT, refused.output
    assert "MEMORY.md was edited after run" in refused.output
    assert memory.read_bytes() == edited
    (run,) = [r for r in ok_json(vault, "jobs", "history") if r["id"] == run_id]
    assert run["status"] == "failed" and "interrupted" in run["error"]
    assert [c["path"] for c in run["metadata"]["changes"]] == ["MEMORY.md"]
    assert "undone" not in run["metadata"]


# A run in a process of its own that edits, creates, deletes and moves files, says so and
# waits to be killed; one more file it only said it would change.
_WRITER = """
import sys, time
from pathlib import Path
from memvault.config import Settings
from memvault.jobs import Job, JobEngine, Schedule
from memvault.runtime import Runtime

def rewrite(ctx):
    vault = ctx.services.vault
    ctx.will_change("Notes/a.md")
    vault.edit_text("Notes/a.md", lambda text: text + "job line\\n")
    ctx.will_change("Notes/b.md")
    vault.write_text("Notes/b.md", "made by the job\\n")
    ctx.will_change("Notes/c.md")
    vault.delete("Notes/c.md")
    ctx.will_change("Notes/d.md")
    ctx.will_change("Notes/e.md")
    vault.move("Notes/d.md", "Notes/e.md")
    ctx.will_change("Notes/f.md")
    print("written", flush=True)
    time.sleep(3600)  # until the test kills it

runtime = Runtime.open(Settings(vault=Path(sys.argv[1])))
job = Job("rewrite", Schedule(every_seconds=3600), rewrite)
JobEngine(runtime.state, runtime.clock, [job], runtime=runtime).run_now("rewrite")
"""

BEFORE = {
    "Notes/a.md": b"owner's a\r\nsecond line\r\n",
    "Notes/b.md": None,
    "Notes/c.md": b"owner's c\n",
    "Notes/d.md": b"owner's d\n",
    "Notes/e.md": None,
    "Notes/f.md": b"owner's f\n",
}


def files(vault: Path) -> dict[str, bytes | None]:
    return {p: (vault / p).read_bytes() if (vault / p).exists() else None for p in BEFORE}


def killed_writer(vault: Path) -> int:
    """Run the writer job in its own process and SIGKILL it once it has written; the run."""
    for path, data in BEFORE.items():
        if data is not None:
            (vault / path).parent.mkdir(parents=True, exist_ok=True)
            (vault / path).write_bytes(data)
    env = {**daemon_env(), "PYTHONPATH": os.pathsep.join(sys.path)}
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(vault)], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "written"
    finally:
        writer.kill()
        writer.wait(timeout=WAIT)
    (run,) = ok_json(vault, "jobs", "history")
    assert run["status"] == "running"
    return int(run["id"])


def test_every_kind_of_change_of_a_killed_run_is_listed_and_undone(vault: Path) -> None:
    run_id = killed_writer(vault)
    assert files(vault)["Notes/e.md"] == b"owner's d\n"  # the job got as far as the move

    assert ok_json(vault, "jobs", "undo", run_id)["restored"] == list(BEFORE)
    assert files(vault) == BEFORE
    (run,) = ok_json(vault, "jobs", "history")
    assert run["status"] == "failed" and run["metadata"]["undone"]
    assert [c["path"] for c in run["metadata"]["changes"]] == list(BEFORE)


def test_a_file_a_killed_run_created_is_not_removed_once_the_owner_wrote_in_it(
    vault: Path,
) -> None:
    run_id = killed_writer(vault)
    (vault / "Notes/b.md").write_text("the owner's own text now\n")
    after_edit = files(vault)
    refused = invoke(vault, "jobs", "undo", run_id)
    assert refused.exit_code == EXIT_CONFLICT, refused.output
    assert "Notes/b.md was edited after run" in refused.output
    assert files(vault) == after_edit
    manifest = vault / f".memvault/jobs/runs/{run_id}/changes.json"
    assert oct(manifest.stat().st_mode & 0o777) == oct(0o600)
    assert [c["path"] for c in json.loads(manifest.read_text())["changes"]] == list(BEFORE)
