from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

import pytest

from memvault.clock import Clock
from memvault.errors import InvalidInputError, NotFoundError
from memvault.runtime import Runtime
from memvault.vault.journal import Journal
from memvault.vault.store import Vault
from support import TZ, MovableClock


def test_first_entry_creates_the_day_from_the_template(runtime: Runtime) -> None:
    entry = runtime.journal.append("Actions Taken", "Deployed v1.2")
    assert entry.path == "Journal/2026-11-22.md"
    text = (runtime.vault.root / entry.path).read_text()
    assert text.startswith(
        "---\ndate: 2026-11-22\ntags: [journal]\n---\n# Sunday, 22 November 2026\n"
    )
    for section in [
        "Actions Taken",
        "Commands Received",
        "Observations",
        "Decisions Made",
        "Follow-ups",
    ]:
        assert f"## {section}\n" in text
    assert "## Actions Taken\n- 09:30 Deployed v1.2\n\n## Commands Received" in text


def test_entries_append_in_order_under_their_section(runtime: Runtime, clock: MovableClock) -> None:
    runtime.journal.append("decisions", "Use SQLite")
    clock.set(datetime(2026, 11, 22, 10, 15, tzinfo=TZ))
    runtime.journal.append("Decisions Made", "Keep it local")
    runtime.journal.append("Sessions", "Talked about memory\nDecided on vaults")
    sections = runtime.journal.sections()
    assert sections["Decisions Made"] == ["09:30 Use SQLite", "10:15 Keep it local"]
    assert sections["Sessions"] == ["10:15 Talked about memory\nDecided on vaults"]
    assert runtime.journal.days() == [date(2026, 11, 22)]


def test_day_follows_the_owner_timezone(vault: Vault) -> None:
    # 23:30 UTC on the 22nd is already the 23rd in Tokyo.
    moment = datetime(2026, 11, 22, 23, 30, tzinfo=ZoneInfo("UTC"))
    tokyo = Journal(vault, Clock(ZoneInfo("Asia/Tokyo"), now=lambda: moment))
    assert tokyo.append("Observations", "late night").path == "Journal/2026-11-23.md"
    utc = Journal(vault, Clock(ZoneInfo("UTC"), now=lambda: moment))
    assert utc.append("Observations", "same moment").path == "Journal/2026-11-22.md"


def test_user_edits_to_the_day_are_kept(runtime: Runtime) -> None:
    path = runtime.vault.root / runtime.journal.append("Observations", "first").path
    path.write_text(path.read_text().replace("## Follow-ups", "My own paragraph.\n\n## Follow-ups"))
    runtime.journal.append("Follow-ups", "call Ada")
    text = path.read_text()
    assert "My own paragraph.\n\n## Follow-ups\n- 09:30 call Ada\n" in text


def test_bad_entries_and_missing_days(runtime: Runtime) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        runtime.journal.append("Observations", "   ")
    with pytest.raises(InvalidInputError):
        runtime.journal.append("#bad [section]", "x")
    with pytest.raises(NotFoundError, match="No journal entry for 2020-01-01"):
        runtime.journal.read(date(2020, 1, 1))
