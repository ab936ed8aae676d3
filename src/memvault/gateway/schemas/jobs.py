"""Jobs: their schedules, runs, a run started now, and an undo."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from memvault.gateway.schemas.base import Result


class JobRunOut(Result):
    id: int
    job: str
    started: str
    finished: str | None
    status: str = Field(description="running, ok, failed or skipped")
    output: str
    error: str | None
    metadata: dict[str, Any] = Field(
        description="what the run recorded: changes (files, for undo), model use, and more"
    )


class JobOut(Result):
    name: str
    description: str
    enabled: bool
    schedule: str
    uses_model: bool
    last_run: JobRunOut | None
    next_run: str | None = Field(description="when it runs next; null while switched off")
    failures_in_a_row: int


class JobStarted(Result):
    job: str
    run_id: int
    status: str


class JobUndone(Result):
    run_id: int
    restored: list[str]
