"""The scheduled jobs: ``/v1/jobs``.

``POST /v1/jobs/{name}/run`` answers with the run's id at once; the run goes
on in the daemon, and ``GET /v1/jobs/{name}/runs`` (or the ``job_finished``
event) tells how it ended.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from memvault.gateway.routes import COMMON_ERRORS, DaemonDep, errors, row_id
from memvault.gateway.schemas import Envelope, JobOut, JobRunOut, JobStarted, JobUndone

router = APIRouter(prefix="/v1", tags=["jobs"])

JobName = Annotated[str, Path(min_length=1, max_length=100, description="e.g. daily_note")]
RunId = Annotated[int, row_id("The run's id (from /v1/jobs/runs).")]


@router.get("/jobs", response_model=Envelope[list[JobOut]], responses=errors(*COMMON_ERRORS))
def list_jobs(daemon: DaemonDep) -> dict[str, Any]:
    """Every job: on or off, schedule, last run, next run."""
    return {"ok": True, "result": daemon.jobs.overview()}


@router.post(
    "/jobs/{name}/run",
    status_code=202,
    response_model=Envelope[JobStarted],
    responses=errors(*COMMON_ERRORS, 404, 409),
)
def run_job(name: JobName, daemon: DaemonDep) -> dict[str, Any]:
    """Start a run now (even of a job that is off); 409 while one is running."""
    run_id = daemon.jobs.trigger(name)
    return {"ok": True, "result": {"job": name, "run_id": run_id, "status": "running"}}


@router.get(
    "/jobs/{name}/runs",
    response_model=Envelope[list[JobRunOut]],
    responses=errors(*COMMON_ERRORS, 404),
)
def job_runs(
    name: JobName, daemon: DaemonDep, limit: Annotated[int, Query(ge=1, le=1000)] = 20
) -> dict[str, Any]:
    """A job's runs, newest first."""
    return {"ok": True, "result": [r.as_dict() for r in daemon.jobs.history(name, limit)]}


@router.get(
    "/jobs/runs", response_model=Envelope[list[JobRunOut]], responses=errors(*COMMON_ERRORS)
)
def all_runs(daemon: DaemonDep, limit: Annotated[int, Query(ge=1, le=1000)] = 20) -> dict[str, Any]:
    """Every job's runs, newest first."""
    return {"ok": True, "result": [r.as_dict() for r in daemon.jobs.history(None, limit)]}


@router.get(
    "/jobs/runs/{run_id}", response_model=Envelope[JobRunOut], responses=errors(*COMMON_ERRORS, 404)
)
def job_run(run_id: RunId, daemon: DaemonDep) -> dict[str, Any]:
    """One run."""
    return {"ok": True, "result": daemon.jobs.run_record(run_id).as_dict()}


@router.post(
    "/jobs/runs/{run_id}/undo",
    response_model=Envelope[JobUndone],
    responses=errors(*COMMON_ERRORS, 404, 409),
)
def undo_run(run_id: RunId, daemon: DaemonDep) -> dict[str, Any]:
    """Restore the files a run changed; 409 (nothing changed) if one was edited since."""
    restored = daemon.jobs.undo(run_id)
    return {"ok": True, "result": {"run_id": run_id, "restored": restored}}
