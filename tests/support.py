"""Test helpers shared by several test modules (fixtures live in conftest.py)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from memvault.clock import Clock

# What `memvault init` creates (DESIGN.md, "The vault"), spelled out independently of the code.
LAYOUT_FOLDERS = (
    "Memory",
    "Tasks/active",
    "Tasks/completed",
    "Contacts",
    "Projects",
    "Insights",
    "Skills",
    "Decisions",
    "Journal",
    "Templates",
)
LAYOUT_NOTES = (
    "Home.md",
    "MEMORY.md",
    "User Profile.md",
    "Current Status.md",
    "Known Issues.md",
    "Decisions/Decision Log.md",
    "Templates/task.md",
    "Templates/contact.md",
    "Templates/project.md",
    "Templates/journal.md",
    "Templates/insight.md",
    "Templates/skill.md",
)

TZ = ZoneInfo("Europe/Berlin")


class MovableClock(Clock):
    """A clock tests can set: real time never leaks into assertions."""

    def __init__(self, start: datetime) -> None:
        self.moment = start
        super().__init__(TZ, now=lambda: self.moment)

    def set(self, moment: datetime) -> None:
        self.moment = moment
