"""The job tools, under the earlier design's names: ``list_agent_jobs``,
``trigger_agent_job`` (returns a run id at once; the run goes on in the
background) and ``get_agent_job_history``; and ``distill_now``, which starts
the distill job the same way.

They work on a :class:`~memvault.jobs.JobEngine` the caller provides
through ``engine_for``: the daemon passes its own, whose runs share its
scheduler; another process gets an engine of its own on the same state.db,
and the one-running-row rule keeps the two from running a job twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import Field

from memvault.jobs import JobEngine
from memvault.tools.inputs import LIMIT, ToolInput, names
from memvault.tools.policy import FILE_WRITES, Tier
from memvault.tools.registry import Annotations, Tool, ToolContext

if TYPE_CHECKING:
    from memvault.runtime import Runtime

EngineFor = Callable[["Runtime"], JobEngine]
_JOB = names("job", "name", "job_name")
_JOBS = "Try list_agent_jobs to see the jobs."


class JobList(ToolInput):
    pass


class JobTrigger(ToolInput):
    job: str = Field(description="The job's name, e.g. daily_note.", validation_alias=_JOB)


class DistillNow(ToolInput):
    pass


class JobHistory(ToolInput):
    job: str | None = Field(
        None, description="Only this job's runs (default: every job's).", validation_alias=_JOB
    )
    limit: int = Field(20, ge=1, le=200, description="Runs at most, newest first.",
                       validation_alias=LIMIT)  # fmt: skip


def tools(engine_for: EngineFor) -> list[Tool]:
    """The job tools on the engines ``engine_for`` gives."""

    def list_jobs(ctx: ToolContext, _args: JobList) -> dict[str, Any]:
        return {"jobs": engine_for(ctx.runtime).overview()}

    def trigger(ctx: ToolContext, args: JobTrigger) -> dict[str, Any]:
        engine = engine_for(ctx.runtime)
        run_id = engine.trigger(args.job)
        return {
            "job": args.job,
            "run_id": run_id,
            "status": "running",
            "note": "The run goes on in the background; get_agent_job_history shows its outcome.",
        }

    def distill_now(ctx: ToolContext, _args: DistillNow) -> dict[str, Any]:
        return trigger(ctx, JobTrigger(job="distill"))

    def history(ctx: ToolContext, args: JobHistory) -> dict[str, Any]:
        runs = engine_for(ctx.runtime).history(args.job, limit=args.limit)
        return {"runs": [run.as_dict() for run in runs]}

    return [
        Tool(
            name="list_agent_jobs",
            title="List scheduled jobs",
            description=(
                "List memvault's scheduled jobs (daily note, MEMORY.md summary, archival, "
                "heartbeat, reminders): whether each is on, its schedule, its last run "
                "(status, started, finished, error) and when it runs next."
            ),
            input_model=JobList,
            handler=list_jobs,
        ),
        Tool(
            name="trigger_agent_job",
            title="Run a job now",
            description=(
                "Start a scheduled job now, even one that is switched off; returns its run id "
                "at once while it runs in the background. A job already running is not "
                "started twice."
            ),
            input_model=JobTrigger,
            handler=trigger,
            tier=Tier.WRITE,
            category=FILE_WRITES,
            annotations=Annotations(),
            summarize=lambda a: f"run the {a.job} job now",
            not_found_hint=_JOBS,
        ),
        Tool(
            name="distill_now",
            title="Distil memories into insights now",
            description=(
                "Run the distill job now: clusters of related memories not yet distilled "
                "become insight notes in Insights/ that link to each source memory, and "
                "insights whose sources changed are refreshed. Returns the run id at once; "
                "get_agent_job_history shows what it wrote (undo with memvault jobs undo)."
            ),
            input_model=DistillNow,
            handler=distill_now,
            tier=Tier.WRITE,
            category=FILE_WRITES,
            annotations=Annotations(),
            summarize=lambda _a: "distil related memories into insight notes now",
        ),
        Tool(
            name="get_agent_job_history",
            title="Job run history",
            description=(
                "The latest runs of one job or all, newest first: status (ok, failed, "
                "skipped, running), when, what it did, its error, and the files it changed."
            ),
            input_model=JobHistory,
            handler=history,
            not_found_hint=_JOBS,
        ),
    ]
