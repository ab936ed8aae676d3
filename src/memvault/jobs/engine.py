"""The job engine: decides which jobs are due, runs them one at a time each.

Every run is a row of ``job_runs`` in state.db. A run starts by claiming a
``running`` row inside a transaction; a partial unique index allows one such
row per job, so two threads or two processes never run a job at once. Rows
left ``running`` by a crash are marked failed when the engine starts, with
the files the run had written ahead that it was changing, so it can be undone.

A job is due at the first schedule tick after its last run started, so a job
that missed several ticks while the daemon was down runs once, not once per
tick. After a failure the job instead waits out ``schedule.backoff`` (30 s,
1 min, 5 min, 15 min, 60 min) counted from the failure; other jobs go on.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memvault.clock import Clock
from memvault.errors import ConflictError, MemvaultError, NotFoundError
from memvault.jobs import changes
from memvault.jobs.budget import BudgetedModel
from memvault.jobs.schedule import Schedule, backoff
from memvault.llm.base import Provider
from memvault.memory.outcomes import one_line
from memvault.memory.runs import RunRecord, prompt_record
from memvault.memory.state import StateStore
from memvault.privacy.reads import reading
from memvault.processes import process_alive, process_start

if TYPE_CHECKING:
    from memvault.runtime import Runtime

log = logging.getLogger(__name__)

Publish = Callable[[str, dict[str, Any]], object]
# Quiet runs (ok or skipped, nothing recorded) kept per job; see JobEngine.prune.
QUIET_RUNS_KEPT = 200

INTERRUPTED = "The run was interrupted (the process stopped before it finished)."

# Sends the owner a message: (text, channel or None for their preferred one) -> what happened.
Notify = Callable[[str, str | None], dict[str, Any]]


class SkipRun(MemvaultError):  # noqa: N818 (a signal, not a failure)
    """Raised by a job with nothing it can do now; the run is recorded as skipped, with why."""

    code = "skipped"


@dataclass
class JobContext:
    """What a running job gets: its run id, the clock, the vault's services, the model
    within the job's budget, a way to message the owner, and where to record what it did.

    A job that changes a vault file calls :meth:`will_change` first, so the
    run can be undone.
    """

    job: str
    run_id: int
    clock: Clock
    runtime: Runtime | None = None
    model: BudgetedModel | None = None
    notify: Notify | None = None
    settings: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    changes: changes.RunChanges | None = None
    # Whether the job recorded its model call as an agent run itself (with the memory
    # context it built); otherwise the engine records each call with its prompt.
    run_recorded: bool = False

    def record(self, line: str) -> None:
        """Add a line to the run's output."""
        self.lines.append(line)

    def record_run(self, run: RunRecord) -> None:
        """Keep this run's model call as an agent run (see :mod:`memvault.memory.runs`)."""
        self.run_recorded = True
        self.services.runs.record(run)

    @property
    def services(self) -> Runtime:
        """The vault's services (a job that needs them cannot run without)."""
        if self.runtime is None:
            raise MemvaultError(f"The {self.job} job needs the vault, and this engine has none.")
        return self.runtime

    def will_change(self, relpath: str) -> str:
        """Keep a vault file as it is now, before this run changes, creates, moves or
        deletes it, so ``memvault jobs undo`` can restore it; what the run then writes there
        is recorded before each write, so even a run cut short can be. Returns the clean
        path."""
        if self.changes is None:
            self.changes = changes.RunChanges(self.services.vault, self.run_id)
        return self.changes.will_change(relpath)

    @property
    def changed_files(self) -> list[str]:
        """The files this run has changed so far."""
        return self.changes.paths if self.changes is not None else []


@dataclass(frozen=True)
class Job:
    """A named piece of work and when to do it; ``run`` returns its output text.

    ``settings`` is the job's config section (handed to the run); ``budget``
    (calls, tokens) marks a job that may call the model.
    """

    name: str
    schedule: Schedule
    run: Callable[[JobContext], str | None]
    enabled: bool = True
    description: str = ""
    settings: Any = None
    budget: tuple[int, int] | None = None


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
        state: StateStore,
        clock: Clock,
        jobs: list[Job],
        *,
        runtime: Runtime | None = None,
        publish: Publish | None = None,
        provider: Provider | None = None,
        notify: Notify | None = None,
    ) -> None:
        self.state = state
        self.clock = clock
        self.jobs = {job.name: job for job in jobs}
        self.runtime = runtime
        self.provider = provider
        self.notify = notify
        self._publish = publish
        self._threads: list[threading.Thread] = []
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
        """Mark runs a crash left ``running`` as failed; return how many there were.

        A run whose process (recorded when it was claimed) is still alive, a
        ``memvault jobs run`` beside the daemon say, is left to finish.
        """
        stale = [
            row["id"]
            for row in self.state.query(
                "SELECT id, metadata FROM job_runs WHERE status = 'running'"
            )
            if not _alive(json.loads(row["metadata"] or "{}"))
        ]
        self._interrupted(stale)
        return len(stale)

    def _interrupted(self, run_ids: list[int]) -> None:
        """Mark runs failed as interrupted, each with the changes it wrote ahead."""
        if not run_ids:
            return
        now = self.clock.now().isoformat()
        with self.state.transaction() as conn:
            for run_id in run_ids:
                row = conn.execute(
                    "SELECT metadata FROM job_runs WHERE id = ? AND status = 'running'", (run_id,)
                ).fetchone()
                if row is None:
                    continue
                metadata = json.loads(row["metadata"] or "{}")
                vault = self.runtime.vault if self.runtime is not None else None
                if vault is not None and (touched := changes.written_ahead(vault, run_id)):
                    metadata["changes"] = touched
                conn.execute(
                    "UPDATE job_runs SET status = 'failed', finished = ?, error = ?, "
                    "metadata = ? WHERE id = ? AND status = 'running'",
                    (now, INTERRUPTED, json.dumps(metadata), run_id),
                )
        log.warning("jobs: marked interrupted runs failed", extra={"runs": len(run_ids)})

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
            "WHERE job = ? AND status IN ('ok', 'failed', 'running', 'skipped') "
            "ORDER BY id DESC LIMIT 1",
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

    def describe(self, name: str) -> dict[str, Any]:
        """A job as the surfaces list it: schedule, switch, last run, next run, failures."""
        job = self.job(name)
        last = self.history(name, limit=1)
        nxt = self.next_due(name)
        return {
            "name": name,
            "description": job.description,
            "enabled": job.enabled,
            "schedule": job.schedule.describe(),
            "uses_model": job.budget is not None,
            "last_run": last[0].as_dict() if last else None,
            "next_run": nxt.isoformat(timespec="seconds") if nxt is not None else None,
            "failures_in_a_row": self.failures(name),
        }

    def overview(self) -> list[dict[str, Any]]:
        """Every job, by name, as :meth:`describe` gives it."""
        return [self.describe(name) for name in sorted(self.jobs)]

    def due(self) -> list[str]:
        """Names of the enabled jobs due now."""
        now = self.clock.now()
        names = []
        for name in sorted(self.jobs):
            when = self.next_due(name)
            if when is not None and when <= now:
                names.append(name)
        return names

    def _record_calls(self, name: str, started: datetime, model: BudgetedModel) -> None:
        """Each model call of a job's run as an agent run: the prompt, message by message,
        as the context it was given, and the answer; a failure to record is logged only."""
        if self.runtime is None:
            return
        try:
            runs = self.runtime.runs
            if not runs.enabled:
                return
            for messages, completion in model.exchanges:
                answered = bool(completion.text.strip()) and completion.stop_reason != "length"
                usage = completion.usage
                counted = usage.input_tokens or usage.output_tokens
                asked = next((m.content for m in reversed(messages) if m.role == "user"), "")
                runs.record(
                    RunRecord(
                        started_at=started,
                        finished_at=self.clock.now(),
                        surface="job",
                        command=f"{name}: {asked}",
                        status="done" if answered else "failed",
                        summary=one_line(completion.text, 200) if answered else "no usable answer",
                        sender=f"{name} job",
                        model=completion.model,
                        input_tokens=usage.input_tokens if counted else None,
                        output_tokens=usage.output_tokens if counted else None,
                        iterations=1,
                        context=prompt_record([(m.role, m.content) for m in messages]),
                    )
                )
        except Exception:  # whatever broke, the job's own record stands
            log.warning("jobs: could not record a model call", extra={"job": name}, exc_info=True)

    def claim(self, name: str) -> int:
        """Start a run of ``name``: insert its ``running`` row, or refuse if one exists."""
        self.job(name)
        try:
            with self.state.transaction() as conn:
                cursor = conn.execute(
                    "INSERT INTO job_runs (job, started, status, metadata) "
                    "VALUES (?, ?, 'running', ?)",
                    (name, self.clock.now().isoformat(), json.dumps(_claimant())),
                )
        except sqlite3.IntegrityError:
            raise ConflictError(f"The job {name!r} is already running.") from None
        assert cursor.lastrowid is not None
        return int(cursor.lastrowid)

    def execute(self, name: str, run_id: int) -> JobRun:
        """Run a claimed job and record the outcome; a failure is recorded, not raised."""
        job = self.job(name)
        model = None
        if job.budget is not None and self.provider is not None:
            model = BudgetedModel(self.provider, name, *job.budget)
        context = JobContext(
            job=name,
            run_id=run_id,
            clock=self.clock,
            runtime=self.runtime,
            model=model,
            notify=self.notify,
            settings=job.settings,
        )
        self._emit("job_started", {"job": name, "run_id": run_id})
        started = self.clock.now()
        status, error, output = "ok", None, ""
        try:
            with reading(surface="job"):  # what a job reads of memories is the job's
                result = job.run(context)
            output = "\n".join([*context.lines, *([result] if result else [])])
        except SkipRun as exc:
            status, error = "skipped", exc.message
            output = "\n".join(context.lines)
        except Exception as exc:  # a job's failure is its run's record, never the daemon's
            log.warning("jobs: run failed", extra={"job": name, "run_id": run_id}, exc_info=True)
            message = exc.message if isinstance(exc, MemvaultError) else str(exc)
            status, error = "failed", message or type(exc).__name__
            output = "\n".join(context.lines)
        finally:
            if context.changes is not None:
                context.changes.close()
        metadata = dict(context.metadata)
        if model is not None and model.calls:
            metadata["model"] = model.report()
            if not context.run_recorded:
                self._record_calls(name, started, model)
        if context.changes is not None and context.changes.entries:
            metadata["changes"] = context.changes.record()
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

    def undo(self, run_id: int) -> list[str]:
        """Put back the files run ``run_id`` changed; returns their paths.

        Refuses (ConflictError, nothing changed) when a file was edited since
        the run, and when the run was already undone. A run a crash interrupted
        is undone from what it wrote ahead (see :mod:`memvault.jobs.changes`).
        """
        run = self.run_record(run_id)
        if run.metadata.get("undone"):
            raise ConflictError(f"Run {run_id} was already undone at {run.metadata['undone']}.")
        if run.status == "running":
            if _alive(run.metadata) or _ours(run.metadata):
                raise ConflictError(f"Run {run_id} of {run.job} is still running; undo it after.")
            self._interrupted([run_id])  # its process is gone: a crash not yet recovered
            run = self.run_record(run_id)
        if self.runtime is None:
            raise MemvaultError("Undoing a run needs the vault, and this engine has none.")
        restored = changes.undo(self.runtime.vault, run_id, run.metadata.get("changes", []))
        metadata = {**run.metadata, "undone": self.clock.now().isoformat(timespec="seconds")}
        with self.state.transaction() as conn:
            conn.execute(
                "UPDATE job_runs SET metadata = ? WHERE id = ?", (json.dumps(metadata), run_id)
            )
        return restored

    def trigger(self, name: str) -> int:
        """Start a run of ``name`` in a thread of its own; returns its run id at once."""
        run_id = self.claim(name)
        thread = threading.Thread(
            target=self.execute, args=(name, run_id), name=f"memvault-job-{name}", daemon=True
        )
        thread.start()
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        return run_id

    def wait(self, timeout: float | None = None) -> None:
        """Wait for runs :meth:`trigger` started (at most ``timeout`` seconds each)."""
        for thread in list(self._threads):
            thread.join(timeout)

    def run_now(self, name: str) -> JobRun:
        """Claim and run ``name`` in this thread."""
        return self.execute(name, self.claim(name))

    def prune(self, keep: int = QUIET_RUNS_KEPT) -> int:
        """Forget quiet runs (ok or skipped, nothing recorded) beyond the newest ``keep`` of
        each job, so a job that looks every minute does not grow state.db for ever; runs
        that failed, changed files or recorded anything are kept. Returns how many went."""
        removed = 0
        with self.state.transaction() as conn:
            for name in self.jobs:
                cursor = conn.execute(
                    "DELETE FROM job_runs WHERE job = ? AND status IN ('ok', 'skipped') "
                    "AND metadata IN ('{}', '') AND id NOT IN "
                    "(SELECT id FROM job_runs WHERE job = ? ORDER BY id DESC LIMIT ?)",
                    (name, name, keep),
                )
                removed += cursor.rowcount
        return removed

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


def _claimant() -> dict[str, Any]:
    """This process, as a running row records it, so a later start can tell it still runs."""
    return {"pid": os.getpid(), "process_start": process_start(os.getpid())}


def _ours(claimed: dict[str, Any]) -> bool:
    """Whether this process claimed a run (one of its threads runs it)."""
    pid = os.getpid()
    return claimed.get("pid") == pid and claimed.get("process_start") == process_start(pid)


def _alive(claimed: dict[str, Any]) -> bool:
    """Whether the process that claimed a run (its pid and start time) is another one that
    still runs; a pid reused since by a new process does not count."""
    pid = claimed.get("pid")
    if not isinstance(pid, int) or pid == os.getpid() or pid <= 0 or not process_alive(pid):
        return False
    started = claimed.get("process_start")
    return started is None or process_start(pid) in (None, started)
