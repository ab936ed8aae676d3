"""The router end to end: a real daemon, the real Telegram library, a fake Bot API and a
fake model on loopback. Access, capture, replies, commands without a model, and approval
from the owner's chat."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from channel_support import APPROVAL_TIMEOUT, OWNER, delivered, telegram_config
from gateway_support import Live, StartDaemon
from llm_fakes import FakeOpenAI, llm_settings
from memvault.channels.approvals import APPROVE, DENY, HASH_SHOWN, Reply
from memvault.errors import NotFoundError
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for

pytestmark = pytest.mark.both_backends

STRANGER = 555
FRIEND = 777


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def channels(
    tg: FakeTelegram,
    llm: FakeOpenAI | None = None,
    *,
    timeout: float = APPROVAL_TIMEOUT,
    **telegram: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "channels": {
            "approval_timeout": timeout,
            "telegram": telegram_config(tg, **telegram),
        }
    }
    if llm is not None:
        out["llm"] = llm_settings(llm)
        # The scripted replies are the agent's: consolidation on write must not take one.
        out["memory"] = {"consolidation": "rule"}
    return out


def events(live: Live, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in live.daemon.bus.since(0) if e.type == kind]


def commands_received(live: Live) -> list[str]:
    try:
        return list(live.daemon.runtime.journal.sections().get("Commands Received", []))
    except NotFoundError:
        return []


def inbox_status(live: Live) -> list[str]:
    rows = live.daemon.state.query("SELECT status FROM channel_inbox ORDER BY id")
    return [str(r["status"]) for r in rows]


def test_an_owner_message_runs_the_agent_and_the_reply_comes_back(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    llm.reply("The **cert** is renewed on Friday.")
    live = start_daemon(settings=channels(tg, llm))
    update = tg.push_message(OWNER, "When is the cert renewed?", first_name="Ada")

    reply = wait_for(lambda: delivered(tg, OWNER), "the reply")
    assert reply == ["The <b>cert</b> is renewed on Friday."]
    sent = next(s for s in tg.sent if s["method"] == "sendMessage")
    assert sent["parse_mode"] == "HTML" and sent["reply_to"] is not None
    tg.wait_confirmed(update + 1)
    # The model saw the owner's words once, with the session's channel.
    request = llm.requests[0]
    users = [m for m in request["messages"] if m["role"] == "user"]
    assert [m["content"] for m in users] == ["When is the cert renewed?"]
    assert "over telegram" in request["messages"][0]["content"]
    # Captured: the session, the journal, the events; typing was shown.
    session = live.daemon.sessions.get(f"telegram:{OWNER}")
    messages = live.daemon.sessions.messages(session.id)
    assert [(m.role, m.text) for m in messages] == [
        ("user", "When is the cert renewed?"),
        ("assistant", "The **cert** is renewed on Friday."),
    ]
    journal = live.daemon.runtime.journal.sections()["Commands Received"]
    assert any("telegram Ada: When is the cert renewed?" in line for line in journal)
    wait_for(lambda: events(live, "outbound_message"), "outbound_message")
    inbound = events(live, "inbound_message")
    assert inbound and inbound[0]["session"] == f"telegram:{OWNER}"
    assert any(action == "typing" for _, action in tg.actions)
    assert wait_for(lambda: inbox_status(live) == ["done"], "the inbox row done")


def test_a_long_answer_is_split_at_the_limit(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    paragraphs = [f"Paragraph {n}: " + "word " * 150 for n in range(12)]
    llm.reply("\n\n".join(paragraphs))
    start_daemon(settings=channels(tg, llm))
    tg.push_message(OWNER, "Tell me everything")
    whole = " ".join(" ".join(paragraphs).split())
    parts = wait_for(
        lambda: " ".join(" ".join(delivered(tg, OWNER)).split()) == whole and delivered(tg, OWNER),
        "every part",
    )
    assert len(parts) >= 3
    assert all(len(part) <= 4096 for part in parts)


def test_a_stranger_gets_nothing_under_quiet_and_the_owner_hears_once(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(tg, llm))
    tg.push_message(STRANGER, "hi, who is this?", first_name="Eve", username="eve")
    tg.push_message(STRANGER, "hello??", first_name="Eve", username="eve")
    notice = wait_for(lambda: delivered(tg, OWNER), "the owner's notice")
    wait_for(lambda: inbox_status(live) == ["held", "held"], "both held")
    time.sleep(0.5)
    assert delivered(tg, STRANGER) == []
    assert len(delivered(tg, OWNER)) == 1
    assert "Eve @eve (id 555)" in notice[0] and f"/approve {STRANGER}" in notice[0]
    assert llm.requests == []  # no model call for a stranger
    assert commands_received(live) == []


def test_pairing_sends_a_code_once_and_the_owner_approves_it(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(tg, llm, policy="pairing"))
    tg.push_message(STRANGER, "hi", first_name="Eve")
    tg.push_message(STRANGER, "hi again", first_name="Eve")
    code_message = wait_for(lambda: delivered(tg, STRANGER), "the pairing code")
    wait_for(lambda: delivered(tg, OWNER), "the owner's notice")
    wait_for(lambda: inbox_status(live) == ["held", "held"], "both held")
    time.sleep(0.3)
    assert len(delivered(tg, STRANGER)) == 1 and len(delivered(tg, OWNER)) == 1
    sender = live.daemon.hub.store.sender("telegram", str(STRANGER))
    assert sender is not None and sender.code
    assert f"{sender.code[:4]}-{sender.code[4:]}" in code_message[0]

    tg.push_message(OWNER, f"/approve {sender.code[:4]}-{sender.code[4:]}")
    wait_for(lambda: len(delivered(tg, OWNER)) == 2, "the approval's answer")
    assert delivered(tg, OWNER)[1].startswith("Approved Eve")
    contact = live.daemon.runtime.contacts.find_by_identity("telegram", str(STRANGER))
    assert contact is not None and contact.name == "Eve"
    # What Eve wrote while waiting is captured now (not answered).
    assert any(line.endswith("telegram Eve: hi again") for line in commands_received(live))
    assert inbox_status(live) == ["done", "done", "done"]

    llm.reply("Hello Eve.")
    tg.push_message(STRANGER, "can we talk now?", first_name="Eve")
    wait_for(lambda: len(delivered(tg, STRANGER)) == 2, "Eve's answer")
    assert delivered(tg, STRANGER)[1] == "Hello Eve."
    # The model was told who writes, with their contact note.
    system = llm.requests[-1]["messages"][0]["content"]
    assert "This message comes from Eve" in system and "Met on telegram" in system
    said = live.daemon.sessions.messages(live.daemon.sessions.get(f"telegram:{STRANGER}").id)
    assert [m.text for m in said if m.role == "user"] == ["hi", "hi again", "can we talk now?"]
    history = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "user"]
    assert history == ["hi", "hi again", "can we talk now?"]
    interactions = live.daemon.runtime.contacts.get(contact.path).interactions
    assert any(line.endswith("telegram: hi") for line in interactions)


def test_pairing_stops_at_the_cap_and_codes_go_only_to_who_wrote(
    start_daemon: StartDaemon, tg: FakeTelegram
) -> None:
    live = start_daemon(settings=channels(tg, policy="pairing", max_pending=2))
    strangers = (901, 902, 903)
    for sender in strangers:
        tg.push_message(sender, "hello", first_name=f"S{sender}")
    wait_for(lambda: inbox_status(live) == ["held"] * 3, "three held")

    def coded() -> list[int]:
        return [chat for chat in strangers if delivered(tg, chat)]

    wait_for(lambda: len(coded()) >= 2 and len(delivered(tg, OWNER)) >= 2, "two codes")
    time.sleep(0.5)
    # Which two come first is the scheduler's choice; never a third, never anyone else.
    assert len(coded()) == 2 and len(delivered(tg, OWNER)) == 2
    assert {s["chat_id"] for s in tg.sent} == {*coded(), OWNER}


def test_a_block_beats_an_earlier_approval_and_allowlist_ignores_old_approvals(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(tg, llm))
    hub = live.daemon.hub
    hub.store.update_sender("telegram", str(FRIEND), status="approved")
    llm.reply("hi friend")
    tg.push_message(FRIEND, "hello", first_name="Fred")
    wait_for(lambda: delivered(tg, FRIEND), "the friend's answer")

    tg.push_message(OWNER, f"/block {FRIEND}")
    wait_for(lambda: delivered(tg, OWNER), "the block's answer")
    tg.push_message(FRIEND, "still there?", first_name="Fred")
    wait_for(lambda: inbox_status(live)[-1] == "ignored", "ignored")
    with pytest.raises(Exception, match="blocked"):
        hub.send("telegram", str(FRIEND), "a tool tries to write")
    assert len(delivered(tg, FRIEND)) == 1


def test_allowlist_does_not_honour_a_pairing_from_before(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(tg, llm, policy="allowlist", allow=["888"]))
    live.daemon.hub.store.update_sender("telegram", str(FRIEND), status="approved")
    llm.reply("hello allowed")
    tg.push_message(FRIEND, "let me in", first_name="Fred")
    tg.push_message(888, "I am on the list", first_name="Lou")
    wait_for(lambda: delivered(tg, 888), "the allowed sender's answer")
    wait_for(lambda: "ignored" in inbox_status(live), "the old pairing ignored")
    assert delivered(tg, FRIEND) == [] and delivered(tg, OWNER) == []
    with pytest.raises(Exception, match="not allowed"):
        live.daemon.hub.send("telegram", str(FRIEND), "hello")


def test_commands_answer_without_a_model(start_daemon: StartDaemon, tg: FakeTelegram) -> None:
    live = start_daemon(settings=channels(tg))
    live.daemon.runtime.tasks.create("Renew the TLS certificate", priority="high")
    tg.push_message(OWNER, "/remember The dentist is Dr. Okafor on Elm Street")
    wait_for(lambda: delivered(tg, OWNER), "remember's answer")
    tg.push_message(OWNER, "/recall dentist")
    wait_for(lambda: len(delivered(tg, OWNER)) == 2, "recall's answer")
    tg.push_message(OWNER, "/tasks")
    wait_for(lambda: len(delivered(tg, OWNER)) == 3, "tasks' answer")
    tg.push_message(OWNER, "/status")
    wait_for(lambda: len(delivered(tg, OWNER)) == 4, "status' answer")
    tg.push_message(OWNER, "what's up?")
    wait_for(lambda: len(delivered(tg, OWNER)) == 5, "the no-model answer")
    tg.push_message(OWNER, "/new")
    wait_for(lambda: len(delivered(tg, OWNER)) == 6, "new's answer")
    remembered, recalled, tasks, status, plain, new = delivered(tg, OWNER)
    assert remembered.startswith("Remembered (")
    assert "Okafor" in recalled
    assert "Renew the TLS certificate" in tasks
    assert status.startswith("1 memories, 1 open tasks")
    assert "No language model is configured" in plain
    assert new.startswith("Started a new session")
    memories = live.daemon.runtime.memories.list()
    assert [m.source for m in memories] == ["telegram"]
    assert not live.daemon.sessions.get(f"telegram:{OWNER}").active


def _tool_then_answer(llm: FakeOpenAI, tool: str, arguments: dict[str, Any]) -> None:
    llm.reply("", tool_calls=[(tool, arguments)])
    llm.reply_with(lambda request: ("done: " + request["messages"][-1]["content"][:60], []))


def _ask_to_remember(
    tg: FakeTelegram, llm: FakeOpenAI, fact: str, said: str, *, then: str | None = None
) -> tuple[str, dict[str, Any]]:
    """The owner says ``said``; the model wants to remember ``fact`` (the owner is asked),
    then answers with the tool's result; ``then`` answers a next message."""
    _tool_then_answer(llm, "remember", {"fact": fact})
    if then is not None:
        llm.reply(then)
    tg.push_message(OWNER, said)
    return _approval_request(tg)


def _approval_request(tg: FakeTelegram) -> tuple[str, dict[str, Any]]:
    sent = wait_for(
        lambda: [
            s for s in tg.sent if s["chat_id"] == OWNER and "Approval needed" in str(s["text"])
        ],
        "the approval request",
    )
    text = str(sent[0]["text"])
    short_id = text.split("/approve ")[1].split()[0]
    return short_id, sent[0]


def test_approval_round_trip_approves_once(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(tg, llm))
    short_id, request = _ask_to_remember(tg, llm, "Ada likes tea", "remember that I like tea")
    assert "remember" in str(request["text"]) and "Ada likes tea" in str(request["text"])
    buttons = request["reply_markup"]["inline_keyboard"]
    assert len([b for row in buttons for b in row]) == 3
    tg.push_message(OWNER, f"/approve {short_id} once")
    answer = wait_for(
        lambda: [t for t in delivered(tg, OWNER) if t.startswith("done: ")], "the run's answer"
    )
    assert "Ada likes tea" in answer[0] or answer
    assert [m.text for m in live.daemon.runtime.memories.list()] == ["Ada likes tea"]
    assert any(t == "Approved remember once." for t in delivered(tg, OWNER))
    resolved = events(live, "approval_resolved")
    assert resolved and resolved[0]["status"] == "approved" and resolved[0]["id"] == short_id
    assert events(live, "approval_requested")[0]["tool"] == "remember"


def test_approval_denied_by_the_owner_and_by_a_button(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(tg, llm))
    short_id, request = _ask_to_remember(tg, llm, "secret plan", "remember the plan")
    deny = [b for row in request["reply_markup"]["inline_keyboard"] for b in row][-1]
    tg.push_callback(OWNER, deny["callback_data"])
    wait_for(lambda: [t for t in delivered(tg, OWNER) if t.startswith("done: ")], "the run's end")
    assert live.daemon.runtime.memories.list() == []
    tool_result = next(m for m in llm.requests[1]["messages"] if m["role"] == "tool")
    assert "did not approve" in tool_result["content"]
    assert tg.answered_callbacks and tg.answered_callbacks[0][1] == f"Denied remember ({short_id})."


def test_an_approval_times_out_as_a_denial(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(tg, llm, timeout=1.5))
    short_id, _ = _ask_to_remember(tg, llm, "never approved", "remember this")
    wait_for(lambda: [t for t in delivered(tg, OWNER) if "timed out" in t], "the timeout notice")
    wait_for(lambda: [t for t in delivered(tg, OWNER) if t.startswith("done: ")], "the run's end")
    assert live.daemon.runtime.memories.list() == []
    rows = live.daemon.state.query("SELECT status FROM channel_approvals")
    assert [r["status"] for r in rows] == ["expired"]
    # A late answer changes nothing.
    tg.push_message(OWNER, f"/approve {short_id} once")
    wait_for(
        lambda: [t for t in delivered(tg, OWNER) if t.startswith("No approval")], "the refusal"
    )


def test_a_forged_approval_from_another_sender_is_refused(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(tg, llm, timeout=4, policy="open"))
    short_id, request = _ask_to_remember(tg, llm, "forged", "remember something", then="nice try")
    approve = next(b for row in request["reply_markup"]["inline_keyboard"] for b in row)
    # Another sender types the command, presses the button, and the owner forwards it.
    tg.push_message(FRIEND, f"/approve {short_id} always", first_name="Mallory")
    tg.push_callback(FRIEND, approve["callback_data"], sender_id=FRIEND)
    tg.push_message(OWNER, f"/approve {short_id} once", forwarded=True)
    wait_for(lambda: [t for t in delivered(tg, OWNER) if "timed out" in t], "the timeout")
    assert live.daemon.runtime.memories.list() == []
    rows = live.daemon.state.query("SELECT status, resolved_by FROM channel_approvals")
    assert [(r["status"], r["resolved_by"]) for r in rows] == [("expired", None)]


def test_a_stale_button_cannot_approve_a_new_call(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(tg, llm))
    _, request = _ask_to_remember(tg, llm, "first call", "remember the first")
    approve, *_, deny = (b for row in request["reply_markup"]["inline_keyboard"] for b in row)
    parts = approve["callback_data"].split(":")
    forged = ":".join([*parts[:3], "0000000000", *parts[4:]])
    tg.push_callback(OWNER, forged)
    wait_for(lambda: tg.answered_callbacks, "the button's answer")
    assert "earlier request" in str(tg.answered_callbacks[0][1])
    # The call still waits (no timeout races the button): the owner's Deny ends it.
    tg.push_callback(OWNER, deny["callback_data"])
    wait_for(lambda: [t for t in delivered(tg, OWNER) if t.startswith("done: ")], "the run's end")
    assert live.daemon.runtime.memories.list() == []


def test_always_approves_the_category_for_the_session(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(tg, llm))
    short_id, _ = _ask_to_remember(tg, llm, "first fact", "remember one")
    tg.push_message(OWNER, f"/approve {short_id} always")
    wait_for(lambda: [t for t in delivered(tg, OWNER) if t.startswith("done: ")], "the first run")
    _tool_then_answer(llm, "remember", {"fact": "second fact"})
    tg.push_message(OWNER, "remember two")
    wait_for(
        lambda: len([t for t in delivered(tg, OWNER) if t.startswith("done: ")]) == 2, "the second"
    )
    assert sorted(m.text for m in live.daemon.runtime.memories.list()) == [
        "first fact",
        "second fact",
    ]
    assert len([s for s in tg.sent if "Approval needed" in str(s["text"])]) == 1


def _keyboard_gone(tg: FakeTelegram, request: dict[str, Any]) -> None:
    """Wait until the question's message shows no buttons (Telegram took them off)."""
    wait_for(lambda: tg.keyboard(OWNER, request["message_id"]) is None, "the buttons taken off")
    assert [e["message_id"] for e in tg.edits] == [request["message_id"]]


def test_an_answered_question_no_longer_offers_its_buttons(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(tg, llm))
    short_id, request = _ask_to_remember(tg, llm, "typed fact", "remember what I type")
    assert tg.keyboard(OWNER, request["message_id"]) == request["reply_markup"]
    tg.push_message(OWNER, f"/approve {short_id} once")
    _keyboard_gone(tg, request)
    wait_for(lambda: [t for t in delivered(tg, OWNER) if t.startswith("done: ")], "the run's end")
    assert [m.text for m in live.daemon.runtime.memories.list()] == ["typed fact"]


def test_a_question_decided_in_the_console_loses_its_buttons_in_the_chat(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(tg, llm))
    short_id, request = _ask_to_remember(tg, llm, "console fact", "remember it")
    waiting = next(w for w in live.daemon.hub.approvals.pending() if w.short_id == short_id)
    # The console's form takes this path: the call's hash, by "console".
    reply = Reply(DENY, short_id, hash_prefix=waiting.call_hash[:HASH_SHOWN])
    assert (
        live.daemon.hub.approvals.resolve(reply, by="console") == f"Denied remember ({short_id})."
    )
    _keyboard_gone(tg, request)
    told = wait_for(
        lambda: [t for t in delivered(tg, OWNER) if t.startswith("Denied in the console")],
        "the chat told",
    )
    assert told == [f"Denied in the console: remember ({short_id})."]
    assert live.daemon.runtime.memories.list() == []


def test_a_timed_out_question_loses_its_buttons(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    start_daemon(settings=channels(tg, llm, timeout=1.5))
    _, request = _ask_to_remember(tg, llm, "never approved", "remember this")
    wait_for(lambda: [t for t in delivered(tg, OWNER) if "timed out" in t], "the timeout notice")
    _keyboard_gone(tg, request)


def test_a_question_decided_before_it_left_is_sent_without_buttons(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI, clock: Any
) -> None:
    tg.fail("sendMessage", 429, retry_after=2)  # the question waits in the outbox
    live = start_daemon(settings=channels(tg, llm))
    _tool_then_answer(llm, "remember", {"fact": "early fact"})
    tg.push_message(OWNER, "remember early")
    approvals = live.daemon.hub.approvals
    waiting = wait_for(lambda: next(iter(approvals.pending()), None), "the call to wait")
    limited = wait_for(
        lambda: [r for r in live.daemon.hub.store.outbox() if r.last_error], "the limited row"
    )
    assert limited[0].status == "pending" and "Approval needed" in limited[0].text
    reply = Reply(APPROVE, waiting.short_id, hash_prefix=waiting.call_hash[:HASH_SHOWN])
    approvals.resolve(reply, by="console")
    store, row = live.daemon.hub.store, limited[0].id

    def dropped() -> bool:
        queued = store.queued(row)
        return queued is not None and queued.status == "pending" and not queued.buttons

    wait_for(dropped, "the queued question's buttons dropped")
    clock.set(clock.now() + timedelta(seconds=3))  # past the rate limit
    wait_for(lambda: [t for t in delivered(tg, OWNER) if t.startswith("done: ")], "the run's end")
    questions = [s for s in tg.sent if "Approval needed" in str(s["text"]) and s["error"] is None]
    assert len(questions) == 1 and questions[0]["reply_markup"] is None
    assert tg.edits == []
    assert [m.text for m in live.daemon.runtime.memories.list()] == ["early fact"]


def test_photos_and_documents_are_saved_and_linked(
    start_daemon: StartDaemon, tg: FakeTelegram
) -> None:
    live = start_daemon(settings=channels(tg))
    tg.push_message(OWNER, None, photo=b"\xff\xd8jpeg-bytes", caption="the whiteboard")
    tg.push_message(OWNER, None, document=("notes.pdf", b"%PDF-1.4 data", "application/pdf"))
    wait_for(lambda: len(delivered(tg, OWNER)) == 2, "both acknowledged")
    files = sorted((live.vault / "Attachments" / "telegram").rglob("*"))
    saved = {p.name: p.read_bytes() for p in files if p.is_file()}
    assert sorted(saved.values()) == [b"%PDF-1.4 data", b"\xff\xd8jpeg-bytes"]
    journal = "\n".join(live.daemon.runtime.journal.sections()["Commands Received"])
    assert "the whiteboard" in journal and "![[Attachments/telegram/" in journal
    assert any(name.endswith("notes.pdf") for name in saved)


def test_a_bad_token_stops_the_channel_and_doctor_says_why(
    start_daemon: StartDaemon, tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "999:wrong")
    live = start_daemon(settings=channels(tg))
    wait_for(lambda: live.daemon.hub.statuses["telegram"].state == "failed", "the failure")
    checks = {c.name: c for c in live.daemon.doctor().checks}
    assert checks["channel_telegram"].status == "error"
    assert "TELEGRAM_BOT_TOKEN" in checks["channel_telegram"].message


def test_another_poller_is_reported_not_silently_ignored(
    start_daemon: StartDaemon, tg: FakeTelegram
) -> None:
    tg.fail("getUpdates", 409)
    live = start_daemon(settings=channels(tg))
    status = live.daemon.hub.statuses["telegram"]
    wait_for(lambda: status.state == "conflict", "the conflict")
    check = {c.name: c for c in live.daemon.doctor().checks}["channel_telegram"]
    assert check.status == "error"
    assert check.message.startswith("telegram receives nothing: Another program is polling")
    # It cannot receive, but what it has to say still goes out.
    sent = live.daemon.hub.send("telegram", "owner", "Are you there?", wait=WAIT)
    assert sent["status"] == "sent" and delivered(tg, OWNER) == ["Are you there?"]


def test_a_reply_that_failed_is_retried_and_shown_in_the_outbox(
    start_daemon: StartDaemon, tg: FakeTelegram, clock: Any
) -> None:
    live = start_daemon(settings=channels(tg))
    tg.fail("sendMessage", 500, times=2)
    tg.push_message(OWNER, "/status")
    wait_for(lambda: len(tg.sent) >= 1, "the first attempt")
    hub = live.daemon.hub
    row = wait_for(  # pending from before its first attempt: wait for that attempt
        lambda: [r for r in hub.store.outbox(status="pending") if r.attempts >= 1],
        "a pending row tried once",
    )[0]
    assert row.attempts >= 1 and row.last_error
    # Time passes: the retries go out, the second fails too, then it is sent.
    deadline = time.monotonic() + WAIT
    while not delivered(tg, OWNER):
        assert time.monotonic() < deadline, "the reply was never retried"
        clock.set(clock.now() + timedelta(hours=1))
        time.sleep(0.3)
    # Delivered before the outbox row is marked sent: wait for the mark.
    sent = wait_for(lambda: hub.store.outbox(status="sent"), "the row marked sent")
    assert sent[0].attempts == 3


def test_a_429_is_waited_out(start_daemon: StartDaemon, tg: FakeTelegram, clock: Any) -> None:
    live = start_daemon(settings=channels(tg))
    tg.fail("sendMessage", 429, retry_after=30)
    tg.push_message(OWNER, "/help")
    row = wait_for(
        lambda: [r for r in live.daemon.hub.store.outbox() if r.last_error], "the limited row"
    )[0]
    assert row.status == "pending" and (row.next_attempt_at - clock.now()).total_seconds() == 30
    time.sleep(1.5)
    assert delivered(tg, OWNER) == []  # not before retry_after
    clock.set(clock.now() + timedelta(minutes=1))
    wait_for(lambda: delivered(tg, OWNER), "the reply after the wait")


def test_a_crashed_poller_is_restarted_and_nothing_is_missed(
    start_daemon: StartDaemon, tg: FakeTelegram
) -> None:
    tg.fail("getUpdates", 502)
    live = start_daemon(settings=channels(tg))
    status = live.daemon.hub.statuses["telegram"]
    wait_for(lambda: status.restarts >= 1, "a restart")
    tg.push_message(OWNER, "/help")
    wait_for(lambda: delivered(tg, OWNER), "the answer after the restart")
    assert status.state == "running"
    states = [e["state"] for e in events(live, "channel_status") if "state" in e]
    assert "backoff" in states and states[-1] == "running"


def test_doctor_warns_about_a_silent_channel(
    start_daemon: StartDaemon, tg: FakeTelegram, clock: Any
) -> None:
    live = start_daemon(settings=channels(tg, silence_hours=6))
    wait_for(lambda: live.daemon.hub.statuses["telegram"].state == "running", "running")
    check = {c.name: c for c in live.daemon.doctor().checks}["channel_telegram"]
    assert check.status == "warning" and "received nothing yet" in check.message
    tg.push_message(OWNER, "/help")
    wait_for(lambda: delivered(tg, OWNER), "the answer")
    check = {c.name: c for c in live.daemon.doctor().checks}["channel_telegram"]
    assert check.status == "ok", check
    clock.set(clock.now() + timedelta(hours=7))
    check = {c.name: c for c in live.daemon.doctor().checks}["channel_telegram"]
    assert check.status == "warning" and "more than 6 h" in check.message


def test_hostile_text_and_file_names_are_kept_safely(
    start_daemon: StartDaemon, tg: FakeTelegram
) -> None:
    """A lone surrogate or a control character in a message, and a file name that climbs
    out of its folder, neither block the channel nor lose the message nor leave the vault's
    attachments folder."""
    live = start_daemon(settings=channels(tg))
    tg.push_message(OWNER, "/remember bad \ud800 char and \x07 bell", first_name="Ada\udc80")
    tg.push_message(OWNER, None, document=("../../.memvault/token", b"not a token", "text/plain"))
    tg.push_message(OWNER, "/help")
    wait_for(lambda: len(delivered(tg, OWNER)) == 3, "all three answered")
    assert inbox_status(live) == ["done", "done", "done"]
    (memory,) = live.daemon.runtime.memories.list()
    assert memory.text == "bad \ufffd char and \ufffd bell"
    token = (live.vault / ".memvault/token").read_text()
    assert token.strip() == live.daemon.token
    saved = [p for p in (live.vault / "Attachments").rglob("*") if p.is_file()]
    assert [p.read_bytes() for p in saved] == [b"not a token"]
    assert all(".." not in p.relative_to(live.vault).parts for p in saved)
    assert not any(".memvault" in p.relative_to(live.vault).parts for p in saved)
