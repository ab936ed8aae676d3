"""Sessions and messages in state.db: open, log, end, reopen, and what is refused."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memvault.acting import Actor, acting_as
from memvault.errors import InvalidInputError, NotFoundError, VaultError
from memvault.memory.sessions import Sessions, channel_of, check_key
from memvault.memory.state import SCHEMA_VERSION, StateDB
from memvault.runtime import Runtime
from support import TZ, MovableClock

pytestmark = pytest.mark.both_backends


@pytest.fixture
def sessions(runtime: Runtime, clock: MovableClock) -> Sessions:
    return Sessions(StateDB(runtime.vault.state_dir), clock, runtime.journal)


def test_keys_and_channels() -> None:
    assert check_key("  telegram:42 ") == "telegram:42"
    assert channel_of("telegram:42", None) == "telegram"
    assert channel_of("Slack:C01:thread", None) == "slack"
    assert channel_of("no-prefix", None) == "api"
    assert channel_of("9lives:1", None) == "api"
    assert channel_of("x", "Signal") == "signal"
    for bad in ("", "   ", "a\nb", "x" * 201):
        with pytest.raises(InvalidInputError):
            check_key(bad)
    with pytest.raises(InvalidInputError, match="channel name"):
        channel_of("x", "two words")


def test_a_conversation_from_first_message_to_journal(
    sessions: Sessions, clock: MovableClock, runtime: Runtime
) -> None:
    session, first = sessions.log("telegram:42", "Hello", sender="Alex")
    assert session.active and session.message_count == 1 and first.direction == "inbound"
    clock.set(clock.now() + timedelta(minutes=5))
    session, reply = sessions.log("telegram:42", "Hi Alex", role="assistant")
    assert reply.direction == "outbound" and session.message_count == 2
    assert session.last_message_at == clock.now()
    earlier = datetime(2026, 11, 22, 9, 0, tzinfo=TZ)
    session, _ = sessions.log("telegram:42", "sent while offline", sent_at=earlier)
    assert session.last_message_at == clock.now(), "an older message does not move it back"

    assert [m.text for m in sessions.messages(session.id)] == [
        "Hello",
        "Hi Alex",
        "sent while offline",
    ]
    assert [m.text for m in sessions.messages(session.id, limit=1)] == ["sent while offline"]

    ended = sessions.end("telegram:42", "Greetings exchanged.")
    assert not ended.active and ended.summary == "Greetings exchanged."
    journal = runtime.journal.sections()["Sessions"]
    assert journal == [
        "09:35 Session telegram:42 (telegram): 3 messages since 09:30. Greetings exchanged."
    ]
    with pytest.raises(NotFoundError):
        sessions.end("telegram:42")
    assert sessions.get("telegram:42").id == session.id

    reopened, _ = sessions.log("telegram:42", "Back")
    assert reopened.id != session.id and reopened.active
    assert sessions.get("telegram:42").id == reopened.id
    assert [s.id for s in sessions.list(active=False)] == [session.id]
    assert [s.id for s in sessions.list(channel="telegram")] == [reopened.id, session.id]


def test_a_session_by_its_id_and_only_the_confined_agents_own(sessions: Sessions) -> None:
    with acting_as("scout"):
        scouts, _ = sessions.log("telegram:7", "hello", role="user")
    owners, _ = sessions.log("telegram:8", "hi", role="user")
    assert sessions.find(owners.id).key == "telegram:8"
    assert sessions.find(scouts.id).agent == "scout"
    with acting_as(Actor(agent="scout", confined=True)):
        assert sessions.find(scouts.id).key == "telegram:7"
        with pytest.raises(NotFoundError, match=f"no session {owners.id}"):
            sessions.find(owners.id)
    with pytest.raises(NotFoundError):
        sessions.find(owners.id + 1000)


def test_refusals_store_nothing(sessions: Sessions) -> None:
    for kwargs in ({"role": "robot"}, {"direction": "sideways"}, {"channel": "Bad!"}):
        with pytest.raises(InvalidInputError):
            sessions.log("k", "text", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        sessions.log("k", "   ")
    with pytest.raises(InvalidInputError):
        sessions.log("k", "x" * 100_001)
    assert sessions.list() == []
    with pytest.raises(NotFoundError):
        sessions.get("k")


def test_state_db_survives_reopening_and_refuses_a_newer_schema(tmp_path: Path) -> None:
    db = StateDB(tmp_path)
    db.set_meta("answer", "42")
    db.close()
    again = StateDB(tmp_path)
    assert again.get_meta("answer") == "42" and again.check() is None
    again.close()
    raw = sqlite3.connect(tmp_path / "state.db")
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.commit()
    raw.close()
    with pytest.raises(VaultError, match="newer memvault"):
        StateDB(tmp_path)
