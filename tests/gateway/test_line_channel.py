"""LINE end to end: a real daemon serving the webhook, line-bot-sdk against a fake Messaging
API, a fake model, and webhooks posted and signed as LINE posts them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx2 as httpx
import pytest

from channel_support import APPROVAL_TIMEOUT
from gateway_support import Live, StartDaemon, failed, ok
from line_fake import FAKE_SECRET, FAKE_TOKEN, WEBHOOK_PATH, FakeLine, user_id
from llm_fakes import FakeOpenAI, llm_settings
from support import MovableClock
from waiting import WAIT, wait_for

OWNER = user_id(1)
STRANGER = user_id(5)


@pytest.fixture
def line(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLine]:
    """A fake Messaging API; the channel's secret and token in the environment."""
    with FakeLine() as fake:
        fake.add_user(OWNER, "Ada")
        fake.add_user(STRANGER, "Eve")
        monkeypatch.setenv("LINE_CHANNEL_SECRET", FAKE_SECRET)
        monkeypatch.setenv("LINE_CHANNEL_ACCESS_TOKEN", FAKE_TOKEN)
        yield fake


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def channels(line: FakeLine, llm: FakeOpenAI | None = None, **extra: Any) -> dict[str, Any]:
    section = {
        "enabled": True,
        "owner": [OWNER],
        "api_base": line.api_base,
        "data_api_base": line.data_api_base,
        **extra,
    }
    out: dict[str, Any] = {"channels": {"approval_timeout": APPROVAL_TIMEOUT, "line": section}}
    if llm is not None:
        out["llm"] = llm_settings(llm)
    return out


def started(start_daemon: StartDaemon, *vault: Any, **settings: Any) -> Live:
    """A daemon whose LINE channel runs (until then LINE's webhooks get 503)."""
    live = start_daemon(*vault, **settings)
    status = live.daemon.hub.statuses["line"]
    wait_for(lambda: status.state == "running", "the LINE channel running")
    return live


def url(live: Live) -> str:
    return live.url + WEBHOOK_PATH


def inbox(live: Live) -> list[tuple[str, str]]:
    rows = live.daemon.state.query(
        "SELECT message_id, status FROM channel_inbox WHERE channel = 'line' ORDER BY id"
    )
    return [(str(r["message_id"]), str(r["status"])) for r in rows]


def test_an_owner_message_gets_one_reply_in_its_chat(
    start_daemon: StartDaemon, line: FakeLine, llm: FakeOpenAI
) -> None:
    llm.reply("The **cert** is renewed on Friday.")
    live = started(start_daemon, settings=channels(line, llm))
    event = line.text_event(OWNER, "When is the cert renewed?")

    answer = line.post(url(live), event)
    assert ok(answer) == {"received": 1}
    # Stored before LINE was told so: the row exists the moment the webhook returns.
    assert [m for m, _ in inbox(live)] == [event["message"]["id"]]

    reply = wait_for(lambda: line.delivered(OWNER), "the reply")
    assert reply == ["The cert is renewed on Friday."]
    assert [(s["kind"], s["chat"]) for s in line.sent] == [("reply", OWNER)]  # the free reply
    # The loading animation while the agent wrote (again every few seconds on a slow run).
    assert line.loading and set(line.loading) == {OWNER}
    wait_for(lambda: inbox(live)[0][1] == "done", "the inbox row done")
    time.sleep(0.5)
    assert len(line.sent) == 1 and len(llm.requests) == 1
    users = [m["content"] for m in llm.requests[0]["messages"] if m["role"] == "user"]
    assert users == ["When is the cert renewed?"]
    session = live.daemon.sessions.get(f"line:{OWNER}")
    said = [(m.role, m.text) for m in live.daemon.sessions.messages(session.id)]
    assert said == [
        ("user", "When is the cert renewed?"),
        ("assistant", "The **cert** is renewed on Friday."),
    ]
    journal = live.daemon.runtime.journal.sections()["Commands Received"]
    assert any("line Ada: When is the cert renewed?" in line for line in journal)


def test_a_stranger_gets_nothing_under_quiet_and_the_owner_hears_once(
    start_daemon: StartDaemon, line: FakeLine, llm: FakeOpenAI
) -> None:
    live = started(start_daemon, settings=channels(line, llm))
    ok(line.post(url(live), line.text_event(STRANGER, "hi, who is this?")))
    ok(line.post(url(live), line.text_event(STRANGER, "hello??")))
    notice = wait_for(lambda: line.delivered(OWNER), "the owner's notice")
    wait_for(lambda: [s for _, s in inbox(live)] == ["held", "held"], "both held")
    time.sleep(0.5)
    assert line.delivered(STRANGER) == [] and len(line.delivered(OWNER)) == 1
    assert f"/approve {STRANGER}" in notice[0] and "Eve" in notice[0]
    assert line.sent[0]["kind"] == "push"  # the owner wrote nothing: no reply token
    assert llm.requests == []


def test_pairing_answers_the_stranger_with_a_code_the_owner_approves(
    start_daemon: StartDaemon, line: FakeLine, llm: FakeOpenAI
) -> None:
    live = started(start_daemon, settings=channels(line, llm, policy="pairing"))
    ok(line.post(url(live), line.text_event(STRANGER, "hi")))
    code_message = wait_for(lambda: line.delivered(STRANGER), "the pairing code")
    assert next(s for s in line.sent if s["chat"] == STRANGER)["kind"] == "reply"
    sender = live.daemon.hub.store.sender("line", STRANGER)
    assert sender is not None and sender.code
    shown = f"{sender.code[:4]}-{sender.code[4:]}"
    assert shown in code_message[0]

    ok(line.post(url(live), line.text_event(OWNER, f"/approve {shown}")))
    approved = wait_for(
        lambda: [t for t in line.delivered(OWNER) if t.startswith("Approved")], "the approval"
    )
    assert approved[0].startswith("Approved Eve")
    contact = live.daemon.runtime.contacts.find_by_identity("line", STRANGER)
    assert contact is not None and contact.name == "Eve"

    llm.reply("Hello Eve.")
    ok(line.post(url(live), line.text_event(STRANGER, "can we talk now?")))
    wait_for(lambda: len(line.delivered(STRANGER)) == 2, "Eve's answer")
    assert line.delivered(STRANGER)[1] == "Hello Eve."


def test_an_approval_is_given_by_tapping_a_quick_reply(
    start_daemon: StartDaemon, line: FakeLine, llm: FakeOpenAI
) -> None:
    live = started(start_daemon, settings=channels(line, llm))
    llm.reply("", tool_calls=[("remember", {"fact": "Ada likes tea"})])
    llm.reply_with(lambda request: "done: " + request["messages"][-1]["content"][:40])
    ok(line.post(url(live), line.text_event(OWNER, "remember that I like tea")))
    request = wait_for(
        lambda: [s for s in line.sent if "Approval needed" in "".join(s["texts"])],
        "the approval request",
    )[0]
    items = request["messages"][-1]["quickReply"]["items"]
    once = items[0]["action"]
    assert (once["type"], once["label"]) == ("postback", "Approve once")

    ok(line.post(url(live), line.postback_event(OWNER, once["data"])))
    wait_for(lambda: [t for t in line.delivered(OWNER) if t.startswith("done: ")], "the answer")
    assert [m.text for m in live.daemon.runtime.memories.list()] == ["Ada likes tea"]
    assert "Approved remember once." in line.delivered(OWNER)


def test_a_webhook_line_did_not_sign_is_refused_and_nothing_is_stored(
    start_daemon: StartDaemon, line: FakeLine
) -> None:
    live = started(start_daemon, settings=channels(line))
    event = line.text_event(OWNER, "/remember forged")
    body = line.body(event)
    answers = [
        line.post(url(live), event, signature=None),
        line.post(url(live), event, signature=line.sign(body, "not-the-channel-secret")),
        line.post(url(live), body=body.replace(b"forged", b"FORGED"), signature=line.sign(body)),
    ]
    for answer in answers:
        error = failed(answer, 401, "invalid_signature")
        assert "X-Line-Signature" in error["message"]
    # The daemon's token opens no other door: LINE's signature is what this route takes.
    with live.client() as api:
        failed(api.post(WEBHOOK_PATH, content=body), 401, "invalid_signature")
    with live.client(token=None) as anonymous:  # and the path opens nothing else
        failed(anonymous.get(WEBHOOK_PATH), 401, "unauthorized")
        failed(anonymous.post("/v1/channels/line/approve"), 401, "unauthorized")
    time.sleep(0.3)
    assert inbox(live) == [] and line.sent == []
    assert live.daemon.runtime.memories.list() == []


def test_a_webhook_the_channel_cannot_take_yet_is_taken_when_line_delivers_it_again(
    start_daemon: StartDaemon, line: FakeLine
) -> None:
    # LINE's API fails as the channel starts, and at every restart until it is healed (a
    # single failure would let a slow machine's restart, 1 s later, come before the post).
    line.fail("info", 500, times=1_000)
    live = start_daemon(settings=channels(line))
    wait_for(lambda: live.daemon.hub.statuses["line"].state == "backoff", "the failure")
    event = line.text_event(OWNER, "/help")
    answer = line.post(url(live), event)
    failed(answer, 503, "channel_failed")
    assert inbox(live) == []

    line.heal("info")
    wait_for(lambda: live.daemon.hub.statuses["line"].state == "running", "the restart")
    ok(line.post(url(live), line.redelivered(event)))
    wait_for(lambda: line.delivered(OWNER), "the answer")
    ok(line.post(url(live), line.redelivered(event)))  # LINE's retry of a slow answer
    time.sleep(0.5)
    assert len(line.delivered(OWNER)) == 1
    assert inbox(live) == [(event["message"]["id"], "done")]


def test_a_restart_neither_replays_nor_drops_a_message(
    start_daemon: StartDaemon, line: FakeLine, llm: FakeOpenAI
) -> None:
    llm.reply("First answer.")
    first = started(start_daemon, settings=channels(line, llm))
    vault = first.vault
    before = line.text_event(OWNER, "before the restart")
    ok(line.post(url(first), before))
    wait_for(lambda: line.delivered(OWNER) == ["First answer."], "the first answer")
    webhook = url(first)
    first.stop()

    during = line.text_event(OWNER, "while the daemon was down")
    with pytest.raises(httpx.TransportError):
        line.post(webhook, during)  # LINE keeps it for redelivery

    llm.reply("Second answer.")
    second = started(start_daemon, vault, settings=channels(line, llm))
    ok(line.post(url(second), line.redelivered(before)))  # delivered twice: stored once
    ok(line.post(url(second), line.redelivered(during)))
    wait_for(lambda: len(line.delivered(OWNER)) == 2, "the second answer")
    time.sleep(0.5)
    assert line.delivered(OWNER) == ["First answer.", "Second answer."]
    assert len(llm.requests) == 2
    assert [s for _, s in inbox(second)] == ["done", "done"]


def test_a_refused_token_stops_the_channel_and_doctor_says_why(
    start_daemon: StartDaemon, line: FakeLine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LINE_CHANNEL_ACCESS_TOKEN", "not-the-token")
    live = start_daemon(settings=channels(line))
    wait_for(lambda: live.daemon.hub.statuses["line"].state == "failed", "the failure")
    check = {c.name: c for c in live.daemon.doctor().checks}["channel_line"]
    assert check.status == "error" and "LINE_CHANNEL_ACCESS_TOKEN" in check.message
    assert "not-the-token" not in check.message
    error = failed(line.post(url(live), line.text_event(OWNER, "hello?")), 503, "channel_failed")
    assert "not running" in error["message"]


def test_a_channel_that_is_not_enabled_answers_503(
    start_daemon: StartDaemon, line: FakeLine
) -> None:
    live = start_daemon()
    error = failed(line.post(url(live), line.text_event(OWNER, "hi")), 503, "channel_unavailable")
    assert "channels.line.enabled" in error["message"]


def test_a_reply_that_failed_is_retried_and_delivered_once(
    start_daemon: StartDaemon, line: FakeLine, clock: MovableClock
) -> None:
    live = started(start_daemon, settings=channels(line))
    line.fail("reply", 500)
    ok(line.post(url(live), line.text_event(OWNER, "/status")))
    hub = live.daemon.hub

    def tried_once() -> list[Any]:  # the row is pending from before its first attempt
        return [r for r in hub.store.outbox(status="pending") if r.attempts >= 1]

    row = wait_for(tried_once, "the row waiting to retry")[0]
    assert row.attempts == 1 and "500" in str(row.last_error)
    deadline = time.monotonic() + WAIT
    while not line.delivered(OWNER):
        assert time.monotonic() < deadline, "the reply was never retried"
        clock.set(clock.now() + timedelta(minutes=1))
        time.sleep(0.2)
    time.sleep(0.3)
    # The reply token was spent on the failed attempt: the retry is a push.
    assert [(s["kind"], s["error"] is None) for s in line.sent] == [
        ("reply", False),
        ("push", True),
    ]
    assert len(line.delivered(OWNER)) == 1


def test_a_429_is_waited_out(
    start_daemon: StartDaemon, line: FakeLine, clock: MovableClock
) -> None:
    live = started(start_daemon, settings=channels(line))
    line.fail("reply", 429)
    ok(line.post(url(live), line.text_event(OWNER, "/help")))
    row = wait_for(
        lambda: [r for r in live.daemon.hub.store.outbox() if r.last_error], "the limited row"
    )[0]
    assert row.status == "pending" and (row.next_attempt_at - clock.now()).total_seconds() == 2
    time.sleep(1.0)
    assert line.delivered(OWNER) == []  # not before the wait
    clock.set(clock.now() + timedelta(seconds=3))
    wait_for(lambda: line.delivered(OWNER), "the reply after the wait")


def test_images_and_files_are_saved_into_the_vault(
    start_daemon: StartDaemon, line: FakeLine
) -> None:
    live = started(start_daemon, settings=channels(line))
    ok(line.post(url(live), line.image_event(OWNER, b"\xff\xd8whiteboard")))
    ok(line.post(url(live), line.file_event(OWNER, "notes.pdf", b"%PDF-1.4 data")))
    wait_for(lambda: [s for _, s in inbox(live)] == ["done", "done"], "both handled")
    files = [p for p in (live.vault / "Attachments" / "line").rglob("*") if p.is_file()]
    assert sorted(p.read_bytes() for p in files) == [b"%PDF-1.4 data", b"\xff\xd8whiteboard"]
    assert any(p.name.endswith("notes.pdf") for p in files)
    journal = "\n".join(live.daemon.runtime.journal.sections()["Commands Received"])
    assert "![[Attachments/line/" in journal
