"""Jobs: work the daemon does on a schedule (cron or an interval), recorded in state.db."""

from memvault.jobs.budget import BudgetedModel, BudgetExceededError
from memvault.jobs.engine import Job, JobContext, JobEngine, JobRun, Notify, SkipRun
from memvault.jobs.schedule import BACKOFF_SECONDS, Schedule

__all__ = [
    "BACKOFF_SECONDS",
    "BudgetExceededError",
    "BudgetedModel",
    "Job",
    "JobContext",
    "JobEngine",
    "JobRun",
    "Notify",
    "Schedule",
    "SkipRun",
]
