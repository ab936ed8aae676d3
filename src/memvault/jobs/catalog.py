"""The built-in jobs, as the config's ``[jobs.NAME]`` sections set them up.

Each job is a module of this package with a ``DESCRIPTION`` and a
``run(context)``; its settings section says whether it is on, when it runs
and, for a job that may call the model, its budget per run.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from memvault.config import JobSettings, JobsSettings, ModelBudget
from memvault.jobs import (
    archival,
    daily_note,
    distill,
    heartbeat,
    knowledge_graph,
    living_summary,
    reminders,
    skill_discovery,
)
from memvault.jobs.engine import Job, JobEngine, Notify, Publish
from memvault.jobs.schedule import Schedule
from memvault.llm.base import Provider

if TYPE_CHECKING:
    from memvault.runtime import Runtime

MODULES: dict[str, ModuleType] = {
    "daily_note": daily_note,
    "living_summary": living_summary,
    "archival": archival,
    "heartbeat": heartbeat,
    "reminders": reminders,
    "distill": distill,
    "knowledge_graph": knowledge_graph,
    "skill_discovery": skill_discovery,
}


def job_from(name: str, settings: JobSettings, run: Callable[..., str | None], about: str) -> Job:
    """One job from its settings section."""
    return Job(
        name=name,
        schedule=Schedule(
            cron=settings.schedule if settings.every_seconds is None else None,
            every_seconds=settings.every_seconds,
        ),
        run=run,
        enabled=settings.enabled,
        description=about,
        settings=settings,
        budget=(settings.max_model_calls, settings.max_model_tokens)
        if isinstance(settings, ModelBudget)
        else None,
    )


def built_in_jobs(settings: JobsSettings) -> list[Job]:
    """Every built-in job, enabled or not (a disabled one can still be run by hand)."""
    sections = settings.sections()
    return [
        job_from(name, sections[name], module.run, module.DESCRIPTION)
        for name, module in MODULES.items()
    ]


def make_engine(
    runtime: Runtime,
    *,
    provider: Provider | None = None,
    notify: Notify | None = None,
    publish: Publish | None = None,
) -> JobEngine:
    """The job engine of a vault: its state.db, clock and built-in jobs."""
    return JobEngine(
        runtime.state,
        runtime.clock,
        built_in_jobs(runtime.settings.jobs),
        runtime=runtime,
        provider=provider,
        notify=notify,
        publish=publish,
    )
