"""The job engine: decides which jobs are due, runs them one at a time each.

Every run is a row of ``job_runs`` in state.db. A run starts by claiming a
``running`` row inside a transaction; a partial unique index allows one such
row per job, so two threads or two processes never run a job at once. Rows
left ``running`` by a crash are marked failed when the engine starts.

A job is due at the first schedule tick after its last run started, so a job
that missed several ticks while the daemon was down runs once, not once per
tick. After a failure the job instead waits out ``schedule.backoff`` (30 s,
1 min, 5 min, 15 min, 60 min) counted from the failure; other jobs go on.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memvault.clock import Clock
from memvault.errors import ConflictError, NotFoundError
from memvault.jobs.schedule import Schedule, backoff
from memvault.memory.state import StateDB

log = logging.getLogger(__name__)

Publish = Callable[[str, dict[str, Any]], object]


@dataclass
class JobContext:
    """What a running job gets: its run id, the clock, and where to record what it did."""

    job: str
    run_id: int
    clock: Clock
    runtime: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    changed_files: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def record(self, line: str) -> None:
        """Add a line to the run's output."""
        self.lines.append(line)


@dataclass(frozen=True)
class Job:
    """A named piece of work and when to do it; ``run`` returns its output text."""

    name: str
    schedule: Schedule
    run: Callable[[JobContext], str | None]
    enabled: bool = True
    description: str = ""


@dataclass(frozen=True)
class JobRun:
    """One row of ``job_runs``."""

    id: int
    job: str
    started: str
    finished: str | None
    status: str
    output: str
    error: str | None
    metadata: dict[str, Any]

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> JobRun:
        """A run from its database row."""
        return cls(
            id=row["id"],
            job=row["job"],
            started=row["started"],
            finished=row["finished"],
            status=row["status"],
            output=row["output"],
            error=row["error"],
            metadata=json.loads(row["metadata"] or "{}"),
        )

    def as_dict(self) -> dict[str, Any]:
        """The run as JSON-ready data."""
        return {
            "id": self.id,
            "job": self.job,
            "started": self.started,
            "finished": self.finished,
            "status": self.status,
            "output": self.output,
            "error": self.error,
            "metadata": self.metadata,
        }


class JobEngine:
    """Runs the configured jobs against ``state.db`` on ``clock``'s time."""

    def __init__(
        self,
        state: StateDB,
        clock: Clock,
        jobs: list[Job],
        *,
        runtime: Any = None,
        publish: Publish | None = None,
    ) -> None:
        self.state = state
        self.clock = clock
        self.jobs = {job.name: job for job in jobs}
        self.runtime = runtime
        self._publish = publish
        self._since = clock.now()  # a job never run is first due at its first tick after this

    def add(self, job: Job) -> None:
        """Schedule one more job (a job of the same name is replaced)."""
        self.jobs[job.name] = job

    def job(self, name: str) -> Job:
        """The job called ``name``."""
        try:
            return self.jobs[name]
        except KeyError:
            known = ", ".join(sorted(self.jobs)) or "none"
            raise NotFoundError(f"There is no job called {name!r} (known: {known}).") from None

    def recover(self) -> int:
        """Mark runs a crash left ``running`` as failed; return how many there were."""
        now = self.clock.now().isoformat()
        with self.state.transaction() as conn:
            cursor = conn.execute(
                "UPDATE job_runs SET status = 'failed', finished = ?, "
                "error = 'The run was interrupted (the process stopped before it finished).' "
                "WHERE status = 'running'",
                (now,),
            )
        if cursor.rowcount:
            log.warning("jobs: marked interrupted runs failed", extra={"runs": cursor.rowcount})
        return cursor.rowcount

    def history(self, name: str | None = None, limit: int = 20) -> list[JobRun]:
        """The newest runs first, of one job or all."""
        if name is not None:
            self.job(name)
            rows = self.state.query(
                "SELECT * FROM job_runs WHERE job = ? ORDER BY id DESC LIMIT ?", (name, limit)
            )
        else:
            rows = self.state.query("SELECT * FROM job_runs ORDER BY id DESC LIMIT ?", (limit,))
        return [JobRun.from_row(row) for row in rows]

    def run_record(self, run_id: int) -> JobRun:
        """One run by id."""
        rows = self.state.query("SELECT * FROM job_runs WHERE id = ?", (run_id,))
        if not rows:
            raise NotFoundError(f"There is no job run {run_id}.")
        return JobRun.from_row(rows[0])

    def failures(self, name: str) -> int:
        """How many of the job's latest finished runs failed in a row."""
        count = 0
        for row in self.state.query(
            "SELECT status FROM job_runs WHERE job = ? AND status IN ('ok', 'failed') "
            "ORDER BY id DESC LIMIT 10",
            (name,),
        ):
            if row["status"] != "failed":
                break
            count += 1
        return count

    def next_due(self, name: str) -> datetime | None:
        """When the job should next run, or None while it is disabled."""
        job = self.job(name)
        if not job.enabled:
            return None
        rows = self.state.query(
            "SELECT started, finished, status FROM job_runs "
            "WHERE job = ? AND status IN ('ok', 'failed', 'running') ORDER BY id DESC LIMIT 1",
            (name,),
        )
        tz = self.clock.tz
        if not rows:
            return job.schedule.next_after(self._since, tz)
        last = rows[0]
        started = datetime.fromisoformat(last["started"])
        due = job.schedule.next_after(started, tz)
        if last["status"] == "failed":
            failed_at = datetime.fromisoformat(last["finished"] or last["started"])
            return max(due, (failed_at + backoff(self.failures(name))).astimezone(tz))
        return due

    def due(self) -> list[str]:
        """Names of the enabled jobs due now."""
        now = self.clock.now()
        names = []
        for name in sorted(self.jobs):
            when = self.next_due(name)
            if when is not None and when <= now:
                names.append(name)
        return names

    def claim(self, name: str) -> int:
        """Start a run of ``name``: insert its ``running`` row, or refuse if one exists."""
        self.job(name)
        try:
            with self.state.transaction() as conn:
                cursor = conn.execute(
                    "INSERT INTO job_runs (job, started, status) VALUES (?, ?, 'running')",
                    (name, self.clock.now().isoformat()),
                )
        except sqlite3.IntegrityError:
            raise ConflictError(f"The job {name!r} is already running.") from None
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def execute(self, name: str, run_id: int) -> JobRun:
        """Run a claimed job and record the outcome; a failure is recorded, not raised."""
        job = self.job(name)
        context = JobContext(job=name, run_id=run_id, clock=self.clock, runtime=self.runtime)
        self._emit("job_started", {"job": name, "run_id": run_id})
        status, error, output = "ok", None, ""
        try:
            result = job.run(context)
            output = "\n".join([*context.lines, *([result] if result else [])])
        except Exception as exc:  # a job's failure is its run's record, never the daemon's
            log.warning("jobs: run failed", extra={"job": name, "run_id": run_id}, exc_info=True)
            status, error = "failed", str(exc) or type(exc).__name__
            output = "\n".join(context.lines)
        metadata = dict(context.metadata)
        if context.changed_files:
            metadata["changed_files"] = context.changed_files
        with self.state.transaction() as conn:
            conn.execute(
                "UPDATE job_runs SET status = ?, finished = ?, output = ?, error = ?, "
                "metadata = ? WHERE id = ?",
                (status, self.clock.now().isoformat(), output, error, json.dumps(metadata), run_id),
            )
        self._emit(
            "job_finished", {"job": name, "run_id": run_id, "status": status, "error": error}
        )
        return self.run_record(run_id)

    def run_now(self, name: str) -> JobRun:
        """Claim and run ``name`` in this thread."""
        return self.execute(name, self.claim(name))

    def tick(self) -> list[JobRun]:
        """Run every job due now, one after another; a busy job is left for the next tick."""
        runs = []
        for name in self.due():
            try:
                run_id = self.claim(name)
            except ConflictError:
                continue
            runs.append(self.execute(name, run_id))
        return runs

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        if self._publish is not None:
            try:
                self._publish(kind, data)
            except Exception:  # an event listener must not fail the run
                log.warning("jobs: publishing %s failed", kind, exc_info=True)
