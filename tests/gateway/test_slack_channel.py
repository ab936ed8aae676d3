"""Slack end to end: a real daemon, slack_sdk over Socket Mode and the Web API against a fake
Slack, and a fake model, all on loopback. Replies in the right conversation and thread,
strangers, retries on both sides, a restart, fatal tokens, rate limits, files, approvals."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from channel_support import APPROVAL_TIMEOUT
from gateway_support import Live, StartDaemon
from llm_fakes import FakeOpenAI, llm_settings
from memvault.channels.approvals import APPROVE, HASH_SHOWN, Reply
from slack_fake import APP_TOKEN, BOT_TOKEN, FakeSlack
from waiting import WAIT, wait_for

OWNER = "U0OWNER"
STRANGER = "U0EVE"
GENERAL = "C0GENERAL"


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    """A fake Slack on loopback; its tokens in $SLACK_BOT_TOKEN and $SLACK_APP_TOKEN."""
    with FakeSlack() as fake:
        fake.add_user(OWNER, "ada", display_name="Ada")
        fake.add_user(STRANGER, "eve", display_name="Eve")
        fake.add_channel(GENERAL, "general")
        monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
        monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
        yield fake


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def channels(slack: FakeSlack, llm: FakeOpenAI | None = None, **extra: Any) -> dict[str, Any]:
    section = {"enabled": True, "owner": [OWNER], "base_url": slack.base_url, **extra}
    out: dict[str, Any] = {"channels": {"approval_timeout": APPROVAL_TIMEOUT, "slack": section}}
    if llm is not None:
        out["llm"] = llm_settings(llm)
    return out


def texts(slack: FakeSlack, channel: str) -> list[str]:
    """What the bot posted in ``channel`` (a user id: their DM), refused attempts left out."""
    return [str(message["text"]) for message in slack.posted(channel)]


def inbox_status(live: Live) -> list[str]:
    rows = live.daemon.state.query("SELECT status FROM channel_inbox ORDER BY id")
    return [str(r["status"]) for r in rows]


def running(live: Live, slack: FakeSlack) -> Live:
    """``live`` once its Slack channel is connected."""
    wait_for(lambda: live.daemon.hub.statuses["slack"].state == "running", "the channel running")
    slack.wait_connected(slack.sockets_opened or 1)
    return live


def test_an_owner_message_runs_the_agent_and_one_reply_comes_back(
    slack: FakeSlack, start_daemon: StartDaemon, llm: FakeOpenAI
) -> None:
    llm.reply("The **cert** is renewed on Friday.")
    live = running(start_daemon(settings=channels(slack, llm)), slack)
    dm = slack.dm(OWNER)
    slack.push_message(dm, OWNER, "When is the cert renewed?")

    reply = wait_for(lambda: slack.posted(dm), "the reply")
    assert [m["text"] for m in reply] == ["The *cert* is renewed on Friday."]
    assert reply[0]["thread_ts"] is None  # a direct message is answered in the conversation
    wait_for(lambda: inbox_status(live) == ["done"], "the inbox row done")
    slack.wait_acknowledged()
    time.sleep(0.5)
    assert texts(slack, dm) == ["The *cert* is renewed on Friday."]
    users = [m for m in llm.requests[0]["messages"] if m["role"] == "user"]
    assert [m["content"] for m in users] == ["When is the cert renewed?"]
    session = live.daemon.sessions.get(f"slack:{dm}")
    said = [(m.role, m.text) for m in live.daemon.sessions.messages(session.id)]
    assert said == [
        ("user", "When is the cert renewed?"),
        ("assistant", "The **cert** is renewed on Friday."),
    ]
    journal = live.daemon.runtime.journal.sections()["Commands Received"]
    assert any("slack Ada: When is the cert renewed?" in line for line in journal)


def test_a_mention_in_a_channel_is_answered_in_its_thread(
    slack: FakeSlack, start_daemon: StartDaemon
) -> None:
    live = running(start_daemon(settings=channels(slack, channels=[GENERAL])), slack)
    # (A channel is read by everyone in it: commands that show the owner's memory, such as
    # /tasks, are answered in a private chat only; see tests/privacy.)
    asked = slack.push_mention(
        GENERAL, OWNER, "/remember Renew the TLS certificate", with_message=True
    )
    (answer,) = wait_for(lambda: slack.posted(GENERAL), "the answer in the thread")
    assert answer["thread_ts"] == asked
    assert answer["text"].startswith("Remembered (fact, m-")

    slack.push_mention(GENERAL, OWNER, "/help", thread_ts=asked)
    wait_for(lambda: len(slack.posted(GENERAL)) == 2, "the answer in the same thread")
    time.sleep(0.5)  # the mention's message event was the same message: no third answer
    _, second = slack.posted(GENERAL)
    assert second["thread_ts"] == asked and second["text"].startswith("Commands:")
    assert inbox_status(live) == ["done", "done"]


def test_a_stranger_gets_nothing_under_quiet_and_the_owner_hears_once(
    slack: FakeSlack, start_daemon: StartDaemon, llm: FakeOpenAI
) -> None:
    live = running(start_daemon(settings=channels(slack, llm)), slack)
    slack.push_message(slack.dm(STRANGER), STRANGER, "hi, who is this?")
    slack.push_message(slack.dm(STRANGER), STRANGER, "hello??")
    (notice,) = wait_for(lambda: texts(slack, OWNER), "the owner's notice")
    wait_for(lambda: inbox_status(live) == ["held", "held"], "both held")
    time.sleep(0.5)
    assert texts(slack, STRANGER) == [] and len(texts(slack, OWNER)) == 1
    assert "Eve @eve (id U0EVE)" in notice and "/approve U0EVE" in notice
    assert llm.requests == []


def test_pairing_sends_the_stranger_a_code_and_the_owner_a_notice(
    slack: FakeSlack, start_daemon: StartDaemon
) -> None:
    live = running(start_daemon(settings=channels(slack, policy="pairing")), slack)
    slack.push_message(slack.dm(STRANGER), STRANGER, "hi")
    (code_message,) = wait_for(lambda: texts(slack, STRANGER), "the pairing code")
    wait_for(lambda: texts(slack, OWNER), "the owner's notice")
    sender = live.daemon.hub.store.sender("slack", STRANGER)
    assert sender is not None and sender.code
    assert f"{sender.code[:4]}-{sender.code[4:]}" in code_message


def test_a_failed_reply_is_retried_until_it_is_sent(
    slack: FakeSlack, start_daemon: StartDaemon, clock: Any
) -> None:
    live = running(start_daemon(settings=channels(slack)), slack)
    slack.fail("chat.postMessage", "internal_error", times=2)
    slack.push_message(slack.dm(OWNER), OWNER, "/help")
    hub = live.daemon.hub
    row = wait_for(lambda: [r for r in hub.store.outbox() if r.last_error], "a failed attempt")[0]
    assert row.status == "pending" and "internal_error" in str(row.last_error)
    deadline = time.monotonic() + WAIT
    while not slack.posted(OWNER):
        assert time.monotonic() < deadline, "the reply was never retried"
        clock.set(clock.now() + timedelta(hours=1))
        time.sleep(0.3)
    # Delivered before the outbox row is marked sent: wait for the mark.
    sent = wait_for(lambda: hub.store.outbox(status="sent"), "the row marked sent")
    assert sent[0].attempts == 3
    assert len(texts(slack, OWNER)) == 1


def test_a_failed_connection_is_retried_and_nothing_is_missed(
    slack: FakeSlack, start_daemon: StartDaemon
) -> None:
    slack.fail("apps.connections.open", "internal_error")
    slack.push_message(slack.dm(OWNER), OWNER, "/help")  # waits in Slack meanwhile
    live = start_daemon(settings=channels(slack))
    status = live.daemon.hub.statuses["slack"]
    wait_for(lambda: status.restarts >= 1, "a restart")
    wait_for(lambda: texts(slack, OWNER), "the answer after the restart")
    assert status.state == "running"
    assert slack.requests.count("apps.connections.open") == 2


def test_a_rate_limit_is_waited_out(
    slack: FakeSlack, start_daemon: StartDaemon, clock: Any
) -> None:
    live = running(start_daemon(settings=channels(slack)), slack)
    slack.fail("chat.postMessage", retry_after=30)
    slack.push_message(slack.dm(OWNER), OWNER, "/help")
    row = wait_for(
        lambda: [r for r in live.daemon.hub.store.outbox() if r.last_error], "the limited row"
    )[0]
    assert row.status == "pending" and (row.next_attempt_at - clock.now()).total_seconds() == 30
    time.sleep(1.5)
    assert texts(slack, OWNER) == []  # not before Retry-After
    clock.set(clock.now() + timedelta(minutes=1))
    wait_for(lambda: texts(slack, OWNER), "the reply after the wait")


def test_a_restart_neither_replays_nor_drops_a_message(
    slack: FakeSlack, start_daemon: StartDaemon
) -> None:
    settings = channels(slack)
    first = running(start_daemon(settings=settings), slack)
    dm = slack.dm(OWNER)
    slack.lose_acks = True  # handled and answered, but Slack never hears the acknowledgement
    slack.push_message(dm, OWNER, "/help")
    wait_for(lambda: texts(slack, dm), "the first answer")
    wait_for(lambda: inbox_status(first) == ["done"], "the first message done")
    first.stop()
    slack.lose_acks = False
    slack.push_message(dm, OWNER, "/tasks")  # while no daemon runs

    second = start_daemon(vault=first.vault, settings=settings)
    wait_for(lambda: len(texts(slack, dm)) == 2, "the answer to the message sent meanwhile")
    slack.wait_acknowledged()
    time.sleep(1.0)
    help_text, tasks_text = texts(slack, dm)
    assert help_text.startswith("Commands:") and tasks_text == "No open tasks."
    assert inbox_status(second) == ["done", "done"]
    # Slack did send /help again (its ack was lost); the hub knew it by its id.
    assert (slack.attempts("/help"), slack.attempts("/tasks")) == (2, 1)


@pytest.mark.parametrize("variable", ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"])
def test_a_refused_token_stops_the_channel_and_doctor_says_why(
    slack: FakeSlack, start_daemon: StartDaemon, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "xoxb-revoked" if variable == "SLACK_BOT_TOKEN" else "xapp-no")
    live = start_daemon(settings=channels(slack))
    status = live.daemon.hub.statuses["slack"]
    wait_for(lambda: status.state == "failed", "the failure")
    check = {c.name: c for c in live.daemon.doctor().checks}["channel_slack"]
    assert check.status == "error"
    assert variable in check.message and "invalid_auth" in check.message
    assert status.restarts == 0


def test_files_are_saved_into_the_vault(
    slack: FakeSlack, start_daemon: StartDaemon, caplog: pytest.LogCaptureFixture
) -> None:
    live = running(start_daemon(settings=channels(slack)), slack)
    board = slack.add_file("board.png", b"\x89PNG whiteboard", "image/png", user=OWNER)
    slack.push_message(slack.dm(OWNER), OWNER, "the whiteboard", files=[board])
    wait_for(lambda: texts(slack, OWNER), "the answer")
    saved = [p for p in (live.vault / "Attachments" / "slack").rglob("*") if p.is_file()]
    why = [vars(r).get("error") for r in caplog.records if "attachment" in r.getMessage()]
    assert [p.read_bytes() for p in saved] == [b"\x89PNG whiteboard"], why
    journal = "\n".join(live.daemon.runtime.journal.sections()["Commands Received"])
    assert "the whiteboard" in journal and "![[Attachments/slack/" in journal


def ask_to_remember(slack: FakeSlack, llm: FakeOpenAI, fact: str) -> tuple[str, dict[str, Any]]:
    """The owner asks in their DM; the model wants to remember ``fact``, then answers with
    the tool's result. The DM, and the question the owner is sent (with its buttons)."""
    llm.reply("", tool_calls=[("remember", {"fact": fact})])
    llm.reply_with(lambda request: ("done: " + request["messages"][-1]["content"][:60], []))
    dm = slack.dm(OWNER)
    slack.push_message(dm, OWNER, f"remember that {fact}")
    question = wait_for(
        lambda: [m for m in slack.posted(dm) if m["blocks"]], "the approval request"
    )[0]
    return dm, question


def test_an_approval_is_given_with_a_button(
    slack: FakeSlack, start_daemon: StartDaemon, llm: FakeOpenAI
) -> None:
    live = running(start_daemon(settings=channels(slack, llm)), slack)
    dm, question = ask_to_remember(slack, llm, "Ada likes tea")
    buttons = question["blocks"][-1]["elements"]
    assert [b["text"]["text"] for b in buttons] == ["Approve once", "Always", "Deny"]
    response_url = slack.push_action(dm, OWNER, buttons[0]["value"], message_ts=question["ts"])
    wait_for(lambda: [t for t in texts(slack, dm) if t.startswith("done: ")], "the run's answer")
    assert [m.text for m in live.daemon.runtime.memories.list()] == ["Ada likes tea"]
    (answer,) = wait_for(lambda: slack.responses, "the buttons replaced")
    assert answer["url"] == response_url and answer["body"]["replace_original"] is True
    assert "Approved remember once." in answer["body"]["text"]


def test_a_question_decided_elsewhere_loses_its_buttons(
    slack: FakeSlack, start_daemon: StartDaemon, llm: FakeOpenAI
) -> None:
    live = running(start_daemon(settings=channels(slack, llm)), slack)
    dm, question = ask_to_remember(slack, llm, "Ada likes coffee")
    approvals = live.daemon.hub.approvals
    waiting = wait_for(lambda: next(iter(approvals.pending()), None), "the call to wait")
    # The console's form takes this path: the call's hash, by "console".
    reply = Reply(APPROVE, waiting.short_id, hash_prefix=waiting.call_hash[:HASH_SHOWN])
    approvals.resolve(reply, by="console")
    wait_for(lambda: [t for t in texts(slack, dm) if t.startswith("done: ")], "the run's answer")
    (update,) = wait_for(lambda: slack.updates, "the question updated")
    assert (update["channel"], update["ts"], update["blocks"]) == (dm, question["ts"], [])
    now = slack.message(dm, question["ts"])
    assert now is not None and "blocks" not in now
    assert now["text"].startswith("Approval needed") and now["text"].endswith(
        "Approved remember once."
    )
    assert [m.text for m in live.daemon.runtime.memories.list()] == ["Ada likes coffee"]


def test_every_part_of_a_long_answer_stays_in_the_thread(
    slack: FakeSlack, start_daemon: StartDaemon, llm: FakeOpenAI
) -> None:
    llm.reply(("The harbour log line. " * 40).strip())
    settings = channels(slack, llm, channels=[GENERAL], max_message_length=300)
    running(start_daemon(settings=settings), slack)
    asked = slack.push_mention(GENERAL, OWNER, "What does the harbour log say?")
    parts = wait_for(lambda: len(slack.posted(GENERAL)) >= 3 and slack.posted(GENERAL), "parts")
    assert {part["thread_ts"] for part in parts} == {asked}, parts
