"""Running one built-in job in tests, built from its settings as the daemon builds it."""

from __future__ import annotations

from typing import Any

from llm_fakes import FakeOpenAI, llm_settings
from memvault.config import JobsSettings
from memvault.jobs import JobEngine, JobRun
from memvault.jobs.catalog import MODULES, job_from
from memvault.llm.factory import make_provider
from memvault.runtime import Runtime
from support import MovableClock


def job_engine(
    runtime: Runtime, clock: MovableClock, name: str, *, fake: FakeOpenAI | None = None,
    **settings: Any,
) -> JobEngine:  # fmt: skip
    """An engine running only the built-in job ``name`` with these settings (its defaults
    otherwise), on ``fake`` as its model if given."""
    section = type(JobsSettings().sections()[name])(**settings)
    module = MODULES[name]
    job = job_from(name, section, module.run, module.DESCRIPTION)
    provider = make_provider(llm_settings(fake, max_retries=0)) if fake else None
    return JobEngine(runtime.state, clock, [job], runtime=runtime, provider=provider)


def run_job(runtime: Runtime, clock: MovableClock, name: str, **kwargs: Any) -> JobRun:
    """One run of ``name`` that must end ok."""
    done = job_engine(runtime, clock, name, **kwargs).run_now(name)
    assert done.status == "ok", done.error
    return done
