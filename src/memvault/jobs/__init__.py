"""Jobs: work the daemon does on a schedule (cron or an interval), recorded in state.db."""

from memvault.jobs.engine import Job, JobContext, JobEngine, JobRun
from memvault.jobs.schedule import BACKOFF_SECONDS, Schedule

__all__ = ["BACKOFF_SECONDS", "Job", "JobContext", "JobEngine", "JobRun", "Schedule"]
