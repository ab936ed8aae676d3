"""The Discord channel end to end: a real daemon, discord.py, a fake Discord (REST and
Gateway) and a fake model on loopback. Replies in the right conversation, access, retries
on both sides, rate limits, a refused token, and a restart that neither replays nor drops."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from channel_support import APPROVAL_TIMEOUT
from discord_fake import MESSAGES, FakeDiscord
from gateway_support import Live, StartDaemon
from llm_fakes import FakeOpenAI, llm_settings
from memvault.channels.discord import CURSORS
from waiting import WAIT, wait_for

OWNER = 410_000_000_000_000_001
STRANGER = 410_000_000_000_000_002
GUILD = 420_000_000_000_000_001
OTHER_GUILD = 420_000_000_000_000_002
ROOM = 430_000_000_000_000_001
ELSEWHERE = 430_000_000_000_000_002
SEND = "POST " + MESSAGES


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDiscord]:
    """A fake Discord on loopback; its token in $DISCORD_BOT_TOKEN."""
    with FakeDiscord(
        users={OWNER: "ada", STRANGER: "eve"},
        guilds={GUILD: [ROOM], OTHER_GUILD: [ELSEWHERE]},
    ) as server:
        monkeypatch.setenv("DISCORD_BOT_TOKEN", server.token)
        yield server


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def channels(fake: FakeDiscord, llm: FakeOpenAI | None = None, **discord: Any) -> dict[str, Any]:
    """``[channels.discord]`` enabled on ``fake``, the owner set, GUILD watched."""
    section = {
        "enabled": True,
        "owner": [str(OWNER)],
        "guilds": [str(GUILD)],
        "api_base": fake.base_url,
        **discord,
    }
    out: dict[str, Any] = {"channels": {"approval_timeout": APPROVAL_TIMEOUT, "discord": section}}
    if llm is not None:
        out["llm"] = llm_settings(llm)
    return out


def started(start_daemon: StartDaemon, fake: FakeDiscord, **options: Any) -> Live:
    """A daemon whose Discord channel is connected (what is sent before that, Discord
    never delivers to a bot that never listened)."""
    live = start_daemon(**options)
    fake.wait_listening()
    return live


def inbox_status(live: Live) -> list[str]:
    rows = live.daemon.state.query("SELECT status FROM channel_inbox ORDER BY id")
    return [str(r["status"]) for r in rows]


def events(live: Live, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in live.daemon.bus.since(0) if e.type == kind]


def test_an_owner_dm_gets_one_reply_in_the_same_dm(
    start_daemon: StartDaemon, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    llm.reply("The **cert** is renewed on Friday.")
    live = started(start_daemon, fake, settings=channels(fake, llm))
    asked = fake.push_dm(OWNER, "When is the cert renewed?")
    dm = fake.dm_channel(OWNER)

    reply = wait_for(lambda: fake.delivered(dm), "the reply")
    assert reply == ["The **cert** is renewed on Friday."]  # Discord renders the Markdown
    sent = next(s for s in fake.sent if s["error"] is None)
    assert sent["reference"]["message_id"] == asked
    users = [m for m in llm.requests[0]["messages"] if m["role"] == "user"]
    assert [m["content"] for m in users] == ["When is the cert renewed?"]
    session = live.daemon.sessions.get(f"discord:{dm}")
    said = [(m.role, m.text) for m in live.daemon.sessions.messages(session.id)]
    assert said == [
        ("user", "When is the cert renewed?"),
        ("assistant", "The **cert** is renewed on Friday."),
    ]
    assert dm in fake.typing
    assert wait_for(lambda: inbox_status(live) == ["done"], "the inbox row done")
    time.sleep(0.5)
    assert fake.delivered(dm) == reply  # once
    check = {c.name: c for c in live.daemon.doctor().checks}["channel_discord"]
    assert check.status == "ok" and "@memvault_test_bot" in check.message


def test_a_mention_in_a_watched_guild_is_answered_in_its_channel(
    start_daemon: StartDaemon, fake: FakeDiscord
) -> None:
    live = started(start_daemon, fake, settings=channels(fake))
    # (A guild channel is read by everyone in it: /tasks is answered in private only.)
    fake.push_guild(ROOM, OWNER, "/remember Renew the TLS certificate")  # not addressed
    fake.push_guild(ELSEWHERE, OWNER, "/help", mention=True)  # a guild not watched
    asked = fake.push_guild(ROOM, OWNER, "/remember Renew the TLS certificate", mention=True)

    (answer,) = wait_for(lambda: fake.delivered(ROOM), "the answer in the room")
    assert answer.startswith("Remembered (fact, m-")
    sent = next(s for s in fake.sent if s["error"] is None)
    assert sent["reference"]["message_id"] == asked
    time.sleep(0.5)
    assert len(fake.delivered(ROOM)) == 1 and fake.delivered(ELSEWHERE) == []
    assert inbox_status(live) == ["done"]


def test_a_long_answer_is_split_at_discords_limit(
    start_daemon: StartDaemon, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    paragraphs = [f"Paragraph {n}: " + "word " * 150 for n in range(8)]
    llm.reply("\n\n".join(paragraphs))
    started(start_daemon, fake, settings=channels(fake, llm))
    fake.push_dm(OWNER, "Tell me everything")
    dm = fake.dm_channel(OWNER)
    whole = " ".join(" ".join(paragraphs).split())
    parts = wait_for(
        lambda: " ".join(" ".join(fake.delivered(dm)).split()) == whole and fake.delivered(dm),
        "every part",
    )
    assert len(parts) >= 3
    assert all(len(part) <= 2000 for part in parts)
    assert all(s["error"] is None for s in fake.sent)


def test_a_stranger_gets_nothing_under_quiet_and_the_owner_hears_once(
    start_daemon: StartDaemon, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    live = started(start_daemon, fake, settings=channels(fake, llm))
    fake.push_dm(STRANGER, "hi, who is this?")
    fake.push_dm(STRANGER, "hello??")
    owner_dm = fake.dm_channel(OWNER)
    notice = wait_for(lambda: fake.delivered(owner_dm), "the owner's notice")
    wait_for(lambda: inbox_status(live) == ["held", "held"], "both held")
    time.sleep(0.5)
    assert fake.delivered(fake.dm_channel(STRANGER)) == []
    assert len(fake.delivered(owner_dm)) == 1
    assert f"Eve @eve (id {STRANGER})" in notice[0] and f"/approve {STRANGER}" in notice[0]
    assert llm.requests == []
    assert "POST /users/@me/channels" in fake.requests  # the owner's DM, opened to tell them


def test_pairing_sends_a_code_and_the_owner_approves_it(
    start_daemon: StartDaemon, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    live = started(start_daemon, fake, settings=channels(fake, llm, policy="pairing"))
    fake.push_dm(STRANGER, "hi")
    theirs, owner_dm = fake.dm_channel(STRANGER), fake.dm_channel(OWNER)
    code_message = wait_for(lambda: fake.delivered(theirs), "the pairing code")
    wait_for(lambda: fake.delivered(owner_dm), "the owner's notice")
    sender = live.daemon.hub.store.sender("discord", str(STRANGER))
    assert sender is not None and sender.code
    shown = f"{sender.code[:4]}-{sender.code[4:]}"
    assert shown in code_message[0]

    fake.push_dm(OWNER, f"/approve {shown}")
    wait_for(lambda: len(fake.delivered(owner_dm)) == 2, "the approval's answer")
    assert fake.delivered(owner_dm)[1].startswith("Approved Eve")
    llm.reply("Hello Eve.")
    fake.push_dm(STRANGER, "can we talk now?")
    wait_for(lambda: len(fake.delivered(theirs)) == 2, "Eve's answer")
    assert fake.delivered(theirs)[1] == "Hello Eve."


def test_attachments_are_saved_into_the_vault(start_daemon: StartDaemon, fake: FakeDiscord) -> None:
    live = started(start_daemon, fake, settings=channels(fake))
    fake.push_dm(
        OWNER,
        "the whiteboard",
        attachments=[("board.png", b"\x89PNG board", "image/png")],
    )
    dm = fake.dm_channel(OWNER)
    wait_for(lambda: fake.delivered(dm), "the acknowledgement")
    files = [p for p in (live.vault / "Attachments" / "discord").rglob("*") if p.is_file()]
    assert [p.read_bytes() for p in files] == [b"\x89PNG board"]
    assert files[0].name.endswith("board.png")
    journal = "\n".join(live.daemon.runtime.journal.sections()["Commands Received"])
    assert "the whiteboard" in journal and "![[Attachments/discord/" in journal


def test_a_reply_that_failed_to_send_is_retried(
    start_daemon: StartDaemon, fake: FakeDiscord, clock: Any
) -> None:
    live = started(start_daemon, fake, settings=channels(fake))
    fake.fail(SEND, 503, times=2)
    fake.push_dm(OWNER, "/status")
    dm = fake.dm_channel(OWNER)
    hub = live.daemon.hub
    row = wait_for(lambda: hub.store.outbox(status="pending"), "a pending row")[0]
    wait_for(lambda: fake.failures_served, "the first refused attempt")
    deadline = time.monotonic() + WAIT
    while not fake.delivered(dm):
        assert time.monotonic() < deadline, "the reply was never retried"
        clock.set(clock.now() + timedelta(hours=1))
        time.sleep(0.2)
    assert fake.failures_served == [(SEND, 503), (SEND, 503)]
    sent = wait_for(lambda: hub.store.outbox(status="sent"), "the row sent")
    assert sent[0].id == row.id and sent[0].attempts == 3
    assert len(fake.delivered(dm)) == 1


def test_a_429_is_waited_out(start_daemon: StartDaemon, fake: FakeDiscord, clock: Any) -> None:
    live = started(start_daemon, fake, settings=channels(fake))
    fake.fail(SEND, 429, retry_after=60)
    fake.push_dm(OWNER, "/help")
    dm = fake.dm_channel(OWNER)
    row = wait_for(
        lambda: [r for r in live.daemon.hub.store.outbox() if r.last_error], "the limited row"
    )[0]
    assert row.status == "pending" and (row.next_attempt_at - clock.now()).total_seconds() == 60
    time.sleep(1.5)
    assert fake.delivered(dm) == []  # not before retry_after
    clock.set(clock.now() + timedelta(minutes=2))
    wait_for(lambda: fake.delivered(dm), "the reply after the wait")


def test_a_failed_connect_is_retried_and_nothing_is_missed(
    start_daemon: StartDaemon, fake: FakeDiscord
) -> None:
    fake.fail("GET /gateway/bot", 503)
    live = start_daemon(settings=channels(fake))
    status = live.daemon.hub.statuses["discord"]
    wait_for(lambda: status.restarts >= 1, "a restart")
    fake.wait_listening()
    fake.push_dm(OWNER, "/help")
    wait_for(lambda: fake.delivered(fake.dm_channel(OWNER)), "the answer after the restart")
    assert status.state == "running"
    states = [e["state"] for e in events(live, "channel_status") if "state" in e]
    assert "backoff" in states and states[-1] == "running"


def test_a_restart_neither_replays_nor_drops(start_daemon: StartDaemon, fake: FakeDiscord) -> None:
    first = started(start_daemon, fake, settings=channels(fake))
    fake.push_dm(OWNER, "/status")
    morning = fake.push_guild(ROOM, STRANGER, "morning, all")  # the room becomes one it knows
    dm = fake.dm_channel(OWNER)
    wait_for(lambda: fake.delivered(dm), "the first answer")

    def cursor(channel: int) -> str | None:
        saved = json.loads(first.daemon.state.get_meta(f"channels.discord.{CURSORS}") or "{}")
        return saved.get(str(channel), {}).get("after")

    # The bot's own message reached the Gateway and moved the DM's cursor.
    answer = str(fake.history[dm][-1]["id"])
    wait_for(lambda: cursor(dm) == answer and cursor(ROOM) == str(morning), "both cursors")
    vault = first.vault
    first.stop()
    wait_for(lambda: fake.live_sessions() == 0, "the first daemon's session closed")

    # While no daemon runs, Discord keeps these in the channels only (no Gateway replay).
    fake.push_dm(OWNER, "/help")
    asked_in_room = fake.push_guild(ROOM, OWNER, "/tasks", mention=True)
    reads_before = fake.requests.count("GET " + MESSAGES)

    second = started(start_daemon, fake, vault=vault, settings=channels(fake))
    wait_for(lambda: len(fake.delivered(dm)) == 2, "the missed DM answered")
    wait_for(lambda: fake.delivered(ROOM), "the missed mention answered")
    time.sleep(1.0)
    status_answer, help_answer = fake.delivered(dm)
    assert "Commands:" in help_answer and "Commands:" not in status_answer
    assert len(fake.delivered(ROOM)) == 1
    room_reply = next(s for s in fake.sent if s["channel_id"] == ROOM and s["error"] is None)
    assert room_reply["reference"]["message_id"] == asked_in_room
    assert fake.requests.count("GET " + MESSAGES) > reads_before  # the catch-up
    assert inbox_status(second) == ["done", "done", "done"]
    assert len(fake.identifies) == 2  # a fresh session each time, no replay from Discord


def test_a_bad_token_stops_the_channel_and_doctor_says_why(
    start_daemon: StartDaemon, fake: FakeDiscord, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISCORD_BOT_TOKEN", "not-the-token")
    live = start_daemon(settings=channels(fake))
    wait_for(lambda: live.daemon.hub.statuses["discord"].state == "failed", "the failure")
    checks = {c.name: c for c in live.daemon.doctor().checks}
    assert checks["channel_discord"].status == "error"
    message = checks["channel_discord"].message
    assert "DISCORD_BOT_TOKEN" in message and "401" in message
    assert "not-the-token" not in message
    assert fake.identifies == []
