"""The agent runs record: ``/v1/runs``, what the console's "Why did it say that" shows.

Each run of the agent (the CLI, a channel, the API, a job that asks the model)
is kept for ``[agent] runs_keep_days`` (:mod:`memvault.memory.runs`): the list
answers the newest first without the heavy parts; one run adds its context
section by section, the memories it recalled with their scores, and its tool
calls. A token bound to an agent sees that agent's runs only.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from memvault.gateway.routes import COMMON_ERRORS, MAX_ROW_ID, DaemonDep, errors, row_id
from memvault.gateway.schemas import Envelope, RunDetail, RunOut
from memvault.memory.runs import LISTED
from memvault.memory.sessions import CHANNEL_PATTERN

router = APIRouter(prefix="/v1", tags=["runs"])

RunId = Annotated[int, row_id("The run's id (from /v1/runs).")]


@router.get("/runs", response_model=Envelope[list[RunOut]], responses=errors(*COMMON_ERRORS))
def list_runs(
    daemon: DaemonDep,
    session_id: Annotated[
        int | None, Query(ge=1, le=MAX_ROW_ID, description="Only this session's runs (its id).")
    ] = None,
    channel: Annotated[
        str | None, Query(pattern=CHANNEL_PATTERN, description="Only runs from this channel.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = LISTED,
) -> dict[str, Any]:
    """The newest agent runs first, without their context and tool calls."""
    found = daemon.runtime.runs.list(session_id=session_id, channel=channel, limit=limit)
    return {"ok": True, "result": [r.to_listed_dict() for r in found]}


@router.get(
    "/runs/{run_id}", response_model=Envelope[RunDetail], responses=errors(*COMMON_ERRORS, 404)
)
def get_run(run_id: RunId, daemon: DaemonDep) -> dict[str, Any]:
    """One run: the context it was given section by section (and what the token budget
    left out), the memories and notes it recalled with their scores, its tool calls."""
    return {"ok": True, "result": daemon.runtime.runs.get(run_id).to_dict()}
