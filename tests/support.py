"""Test helpers shared by several test modules (fixtures live in conftest.py)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from memvault.clock import Clock

TZ = ZoneInfo("Europe/Berlin")


class MovableClock(Clock):
    """A clock tests can set: real time never leaks into assertions."""

    def __init__(self, start: datetime) -> None:
        self.moment = start
        super().__init__(TZ, now=lambda: self.moment)

    def set(self, moment: datetime) -> None:
        self.moment = moment
