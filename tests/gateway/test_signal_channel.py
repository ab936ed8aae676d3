"""Signal end to end: a real daemon with the Signal channel, a fake signal-cli daemon and a
fake model on loopback. One reply per owner message, in the right chat and quoting it;
strangers; retries on receive and on send; rate limits; a restart; a fatal account."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from gateway_support import Live, StartDaemon
from llm_fakes import FakeOpenAI, llm_settings
from signal_fake import FakeSignalCli, uuid_of
from waiting import WAIT, wait_for

OWNER = "+4915112345678"
STRANGER = "+4917655555555"
GROUP = "Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI="


@pytest.fixture
def sig() -> Iterator[FakeSignalCli]:
    with FakeSignalCli() as fake:
        yield fake


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def channels(sig: FakeSignalCli, llm: FakeOpenAI | None = None, **signal: Any) -> dict[str, Any]:
    """Settings with ``[channels.signal]`` on ``sig``, the owner set."""
    section = {"enabled": True, "owner": [OWNER], "account": sig.account, "url": sig.url}
    out: dict[str, Any] = {"channels": {"signal": {**section, **signal}}}
    if llm is not None:
        out["llm"] = llm_settings(llm)
    return out


def inbox_status(live: Live) -> list[str]:
    rows = live.daemon.state.query("SELECT status FROM channel_inbox ORDER BY id")
    return [str(r["status"]) for r in rows]


def running(live: Live) -> None:
    wait_for(lambda: live.daemon.hub.statuses["signal"].state == "running", "the channel running")


def test_an_owner_message_gets_one_reply_quoting_it(
    start_daemon: StartDaemon, sig: FakeSignalCli, llm: FakeOpenAI
) -> None:
    llm.reply("The **cert** is renewed on Friday.")
    live = start_daemon(settings=channels(sig, llm))
    stamp = sig.push_message(OWNER, "When is the cert renewed?", name="Ada")

    assert wait_for(lambda: sig.delivered(OWNER), "the reply") == ["The cert is renewed on Friday."]
    (sent,) = sig.sent
    assert sent["textStyle"] == ["4:4:BOLD"]
    assert (sent["quoteTimestamp"], sent["quoteAuthor"]) == (stamp, uuid_of(OWNER))
    assert {"recipient": [OWNER]} in sig.typing
    users = [m for m in llm.requests[0]["messages"] if m["role"] == "user"]
    assert [m["content"] for m in users] == ["When is the cert renewed?"]
    session = live.daemon.sessions.get(f"signal:{OWNER}")
    said = live.daemon.sessions.messages(session.id)
    assert [(m.role, m.text) for m in said] == [
        ("user", "When is the cert renewed?"),
        ("assistant", "The **cert** is renewed on Friday."),
    ]
    wait_for(lambda: inbox_status(live) == ["done"], "the inbox row done")
    time.sleep(0.5)
    assert len(sig.sent) == 1  # one reply, once


def test_a_group_message_is_answered_in_the_group(
    start_daemon: StartDaemon, sig: FakeSignalCli
) -> None:
    live = start_daemon(settings=channels(sig))
    # (A group reads the answer: /tasks is answered in a private chat only.)
    sig.push_message(OWNER, "/remember Renew the TLS certificate", group=GROUP)
    (answer,) = wait_for(lambda: sig.delivered(f"group:{GROUP}"), "the answer in the group")
    assert answer.startswith("Remembered (fact, m-")
    assert "Renew the TLS certificate" in live.daemon.runtime.memories.list()[-1].text
    assert sig.delivered(OWNER) == []


def test_a_stranger_gets_nothing_under_quiet_and_the_owner_hears_once(
    start_daemon: StartDaemon, sig: FakeSignalCli, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(sig, llm))
    sig.push_message(STRANGER, "hi, who is this?", name="Eve")
    sig.push_message(STRANGER, "hello??", name="Eve")
    notice = wait_for(lambda: sig.delivered(OWNER), "the owner's notice")
    wait_for(lambda: inbox_status(live) == ["held", "held"], "both held")
    time.sleep(0.5)
    assert sig.delivered(STRANGER) == [] and len(sig.delivered(OWNER)) == 1
    assert f"Eve (id {STRANGER})" in notice[0] and f"/approve {STRANGER}" in notice[0]
    assert llm.requests == []


def test_pairing_sends_a_code_and_the_owner_approves_it(
    start_daemon: StartDaemon, sig: FakeSignalCli, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(sig, llm, policy="pairing"))
    sig.push_message(STRANGER, "hi", name="Eve")
    (code_message,) = wait_for(lambda: sig.delivered(STRANGER), "the pairing code")
    wait_for(lambda: sig.delivered(OWNER), "the owner's notice")
    sender = live.daemon.hub.store.sender("signal", STRANGER)
    assert sender is not None and sender.code
    shown = f"{sender.code[:4]}-{sender.code[4:]}"
    assert shown in code_message

    sig.push_message(OWNER, f"/approve {shown}")
    wait_for(lambda: len(sig.delivered(OWNER)) == 2, "the approval's answer")
    assert sig.delivered(OWNER)[1].startswith("Approved Eve")
    llm.reply("Hello Eve.")
    sig.push_message(STRANGER, "can we talk now?", name="Eve")
    wait_for(lambda: len(sig.delivered(STRANGER)) == 2, "Eve's answer")
    assert sig.delivered(STRANGER)[1] == "Hello Eve."


def test_a_dropped_event_stream_is_reconnected_and_nothing_is_missed(
    start_daemon: StartDaemon, sig: FakeSignalCli
) -> None:
    live = start_daemon(settings=channels(sig))
    running(live)
    sig.wait_listeners(1)
    sig.drop_streams(abrupt=True)  # signal-cli restarts mid-stream
    sig.wait_listeners(0)
    sig.push_message(OWNER, "/help")  # kept on Signal's servers until memvault is back
    wait_for(lambda: sig.delivered(OWNER), "the answer after the reconnection")
    status = live.daemon.hub.statuses["signal"]
    assert status.restarts >= 1 and status.state == "running"
    assert len(sig.delivered(OWNER)) == 1


def test_a_reply_that_failed_is_retried(
    start_daemon: StartDaemon, sig: FakeSignalCli, clock: Any
) -> None:
    live = start_daemon(settings=channels(sig))
    sig.fail_send("NETWORK_FAILURE", times=2)
    sig.push_message(OWNER, "/status")
    sig.wait_sent(1)
    hub = live.daemon.hub
    row = wait_for(  # pending from before its first attempt: wait for that attempt
        lambda: [r for r in hub.store.outbox(status="pending") if r.attempts >= 1],
        "a pending row tried once",
    )[0]
    assert row.attempts >= 1 and "Failed to send message" in str(row.last_error)
    deadline = time.monotonic() + WAIT
    while not sig.delivered(OWNER):
        assert time.monotonic() < deadline, "the reply was never retried"
        clock.set(clock.now() + timedelta(hours=1))
        time.sleep(0.3)
    # Delivered before the outbox row is marked sent: wait for the mark.
    sent = wait_for(lambda: hub.store.outbox(status="sent"), "the row marked sent")
    assert sent[0].attempts == 3


def test_a_rate_limit_is_waited_out(
    start_daemon: StartDaemon, sig: FakeSignalCli, clock: Any
) -> None:
    live = start_daemon(settings=channels(sig))
    sig.fail_send("RATE_LIMIT_FAILURE", retry_after=30)
    sig.push_message(OWNER, "/help")
    row = wait_for(
        lambda: [r for r in live.daemon.hub.store.outbox() if r.last_error], "the limited row"
    )[0]
    assert row.status == "pending" and (row.next_attempt_at - clock.now()).total_seconds() == 30
    time.sleep(1.5)
    assert sig.delivered(OWNER) == []  # not before retry_after
    clock.set(clock.now() + timedelta(minutes=1))
    wait_for(lambda: sig.delivered(OWNER), "the reply after the wait")


def test_a_restart_neither_replays_nor_drops(start_daemon: StartDaemon, sig: FakeSignalCli) -> None:
    first = start_daemon(settings=channels(sig))
    answered = sig.push_message(OWNER, "/status")
    wait_for(lambda: sig.delivered(OWNER), "the first answer")
    first.stop()
    sig.wait_listeners(0)
    sig.push_message(OWNER, "/help")  # while memvault is down
    assert sig.pending() == 1

    second = start_daemon(settings=channels(sig))
    wait_for(lambda: len(sig.delivered(OWNER)) == 2, "the answer after the restart")
    sig.redeliver(answered)  # signal-cli hands the first message over again
    sig.push_message(OWNER, "/status")
    wait_for(lambda: len(sig.delivered(OWNER)) == 3, "the next answer")
    time.sleep(0.5)
    assert len(sig.delivered(OWNER)) == 3
    assert inbox_status(second) == ["done", "done", "done"]


def test_an_account_the_daemon_does_not_serve_stops_the_channel_and_doctor_says_why(
    start_daemon: StartDaemon,
) -> None:
    with FakeSignalCli(accounts=["+15559999999"]) as sig:
        live = start_daemon(settings=channels(sig))
        wait_for(lambda: live.daemon.hub.statuses["signal"].state == "failed", "the failure")
        check = {c.name: c for c in live.daemon.doctor().checks}["channel_signal"]
        assert check.status == "error"
        assert f"signal-cli has no account {sig.account}" in check.message
        assert sig.requests == ["version"]  # stopped: not retried


def test_photos_and_documents_are_saved_into_the_vault(
    start_daemon: StartDaemon, sig: FakeSignalCli
) -> None:
    live = start_daemon(settings=channels(sig))
    sig.push_message(
        OWNER, "the whiteboard", attachments=[("wb.jpg", b"\xff\xd8jpeg", "image/jpeg")]
    )
    sig.push_message(OWNER, None, attachments=[("notes.pdf", b"%PDF-1.4 data", "application/pdf")])
    wait_for(lambda: inbox_status(live) == ["done", "done"], "both handled")
    files = [p for p in (live.vault / "Attachments" / "signal").rglob("*") if p.is_file()]
    assert sorted(p.read_bytes() for p in files) == [b"%PDF-1.4 data", b"\xff\xd8jpeg"]
    journal = "\n".join(live.daemon.runtime.journal.sections()["Commands Received"])
    assert "the whiteboard" in journal and "![[Attachments/signal/" in journal


def test_the_socket_daemon_works_the_same(
    start_daemon: StartDaemon, sig: FakeSignalCli, llm: FakeOpenAI
) -> None:
    llm.reply("Over the socket.")
    start_daemon(settings=channels(sig, llm, socket=sig.socket))
    sig.push_message(OWNER, "hello?")
    assert wait_for(lambda: sig.delivered(OWNER), "the reply") == ["Over the socket."]
    assert sig.sent[0]["transport"] == "socket"
    sig.drop_streams()  # the daemon restarts: the channel reconnects
    sig.wait_listeners(0)
    sig.push_message(OWNER, "/help")
    wait_for(lambda: len(sig.delivered(OWNER)) == 2, "the answer after reconnecting")
