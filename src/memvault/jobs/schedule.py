"""When a job is due: a cron expression or an interval, in the owner's timezone.

Cron ticks are computed on local wall-clock time (croniter on an aware
datetime), so "0 9 * * *" stays at 09:00 across a daylight-saving change.
A failing job waits out a growing pause before its next try.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

from croniter import croniter

from memvault.errors import ConfigError

# The pause after the 1st, 2nd, ... consecutive failure; the last one repeats.
BACKOFF_SECONDS = (30, 60, 300, 900, 3600)


def backoff(failures: int) -> timedelta:
    """The pause before retrying a job that failed ``failures`` times in a row."""
    if failures <= 0:
        return timedelta(0)
    return timedelta(seconds=BACKOFF_SECONDS[min(failures, len(BACKOFF_SECONDS)) - 1])


@dataclass(frozen=True)
class Schedule:
    """A cron expression or an interval in seconds (exactly one of them)."""

    cron: str | None = None
    every_seconds: int | None = None

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every_seconds is None):
            raise ConfigError("A job needs exactly one of schedule (cron) or every_seconds.")
        if self.cron is not None and not croniter.is_valid(self.cron):
            raise ConfigError(f"{self.cron!r} is not a cron expression, e.g. '0 9 * * *'.")
        if self.every_seconds is not None and self.every_seconds < 1:
            raise ConfigError("every_seconds must be at least 1.")

    def next_after(self, moment: datetime, tz: tzinfo) -> datetime:
        """The first tick strictly after ``moment``, as an aware datetime in ``tz``."""
        local = moment.astimezone(tz)
        if self.every_seconds is not None:
            return local + timedelta(seconds=self.every_seconds)
        assert self.cron is not None
        nxt: datetime = croniter(self.cron, local).get_next(datetime)
        return nxt.astimezone(tz)

    def describe(self) -> str:
        """The schedule as a person writes it."""
        return self.cron if self.cron is not None else f"every {self.every_seconds} s"
