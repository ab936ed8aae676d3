"""WhatsApp end to end: a real daemon serving the webhook, the adapter against a fake Graph
API, a fake model, and webhooks posted and signed as Meta posts them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from channel_support import APPROVAL_TIMEOUT
from gateway_support import Live, StartDaemon, failed, ok
from llm_fakes import FakeOpenAI, llm_settings
from support import MovableClock
from waiting import WAIT, wait_for
from whatsapp_fake import (
    FAKE_APP_SECRET,
    FAKE_TOKEN,
    FAKE_VERIFY_TOKEN,
    PHONE_NUMBER_ID,
    WEBHOOK_PATH,
    FakeWhatsApp,
    wa_id,
)

OWNER = wa_id(1)
STRANGER = wa_id(5)


@pytest.fixture
def wa(monkeypatch: pytest.MonkeyPatch, clock: MovableClock) -> Iterator[FakeWhatsApp]:
    """A fake Graph API on the daemon's clock; the app's secrets in the environment."""
    with FakeWhatsApp(now=clock.now) as fake:
        fake.add_user(OWNER, "Ada")
        fake.add_user(STRANGER, "Eve")
        monkeypatch.setenv("WHATSAPP_ACCESS_TOKEN", FAKE_TOKEN)
        monkeypatch.setenv("WHATSAPP_APP_SECRET", FAKE_APP_SECRET)
        monkeypatch.setenv("WHATSAPP_VERIFY_TOKEN", FAKE_VERIFY_TOKEN)
        yield fake


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def channels(wa: FakeWhatsApp, llm: FakeOpenAI | None = None, **extra: Any) -> dict[str, Any]:
    section = {
        "enabled": True,
        "owner": [f"+{OWNER}"],  # as people write their number: the same id
        "api_base": wa.api_base,
        "phone_number_id": PHONE_NUMBER_ID,
        **extra,
    }
    out: dict[str, Any] = {"channels": {"approval_timeout": APPROVAL_TIMEOUT, "whatsapp": section}}
    if llm is not None:
        out["llm"] = llm_settings(llm)
    return out


def started(start_daemon: StartDaemon, *vault: Any, **settings: Any) -> Live:
    """A daemon whose WhatsApp channel runs (until then Meta's webhooks get 503)."""
    live = start_daemon(*vault, **settings)
    status = live.daemon.hub.statuses["whatsapp"]
    wait_for(lambda: status.state == "running", "the WhatsApp channel running")
    return live


def url(live: Live) -> str:
    return live.url + WEBHOOK_PATH


def inbox(live: Live) -> list[tuple[str, str]]:
    rows = live.daemon.state.query(
        "SELECT message_id, status FROM channel_inbox WHERE channel = 'whatsapp' ORDER BY id"
    )
    return [(str(r["message_id"]), str(r["status"])) for r in rows]


def window_check(live: Live) -> Any:
    with live.client() as api:
        checks = api.get("/v1/doctor").json()["result"]["checks"]
    return {c["name"]: c for c in checks}["whatsapp_window"]


def test_metas_subscription_check_is_answered_with_the_challenge(
    start_daemon: StartDaemon, wa: FakeWhatsApp
) -> None:
    live = started(start_daemon, settings=channels(wa))
    answer = wa.verify(url(live), FAKE_VERIFY_TOKEN, challenge="1158201444")
    assert answer.status_code == 200, answer.text
    assert answer.text == "1158201444" and answer.headers["content-type"].startswith("text/plain")
    error = failed(wa.verify(url(live), "a-guess"), 403, "verification_failed")
    assert "verify token" in error["message"]
    failed(wa.verify(url(live), None), 403, "verification_failed")
    with live.client(token=None) as anonymous:  # the path opens nothing else
        failed(anonymous.get("/v1/channels/whatsapp/other"), 401, "unauthorized")
        failed(anonymous.get("/v1/channels"), 401, "unauthorized")


def test_an_owner_message_is_stored_then_answered_in_its_chat(
    start_daemon: StartDaemon, wa: FakeWhatsApp, llm: FakeOpenAI
) -> None:
    llm.reply("The **cert** is renewed on Friday.")
    live = started(start_daemon, settings=channels(wa, llm))
    message = wa.text(OWNER, "When is the cert renewed?")

    answer = wa.post(url(live), message)
    assert ok(answer) == {"received": 1}
    # Stored before Meta was told so: the row exists the moment the webhook returns.
    assert [m for m, _ in inbox(live)] == [message["id"]]

    reply = wait_for(lambda: wa.delivered(OWNER), "the reply")
    assert reply == ["The *cert* is renewed on Friday."]
    (sent,) = wa.sent
    assert (sent["kind"], sent["context"]) == ("text", message["id"])  # quoting the question
    # Read, and "typing…" while the agent wrote.
    assert wa.reads and wa.reads[0] == {"message_id": message["id"], "typing": True}
    wait_for(lambda: inbox(live)[0][1] == "done", "the inbox row done")
    users = [m["content"] for m in llm.requests[0]["messages"] if m["role"] == "user"]
    assert users == ["When is the cert renewed?"]
    session = live.daemon.sessions.get(f"whatsapp:{OWNER}")
    said = [(m.role, m.text) for m in live.daemon.sessions.messages(session.id)]
    assert said == [
        ("user", "When is the cert renewed?"),
        ("assistant", "The **cert** is renewed on Friday."),
    ]


def test_a_webhook_meta_did_not_sign_is_refused_and_nothing_is_stored(
    start_daemon: StartDaemon, wa: FakeWhatsApp
) -> None:
    live = started(start_daemon, settings=channels(wa))
    message = wa.text(OWNER, "/remember forged")
    body = wa.body(message)
    answers = [
        wa.post(url(live), message, signature=None),
        wa.post(url(live), message, signature=wa.sign(body, "not-the-app-secret")),
        wa.post(url(live), body=body.replace(b"forged", b"FORGED"), signature=wa.sign(body)),
    ]
    for answer in answers:
        error = failed(answer, 401, "invalid_signature")
        assert "X-Hub-Signature-256" in error["message"]
    with live.client() as api:  # the daemon's token opens no other door here
        failed(api.post(WEBHOOK_PATH, content=body), 401, "invalid_signature")
    time.sleep(0.3)
    assert inbox(live) == [] and wa.sent == []
    assert live.daemon.runtime.memories.list() == []


def test_a_redelivered_message_is_stored_and_answered_once(
    start_daemon: StartDaemon, wa: FakeWhatsApp
) -> None:
    live = started(start_daemon, settings=channels(wa))
    message = wa.text(OWNER, "/help")
    ok(wa.post(url(live), message))
    wait_for(lambda: wa.delivered(OWNER), "the answer")
    assert ok(wa.post(url(live), message)) == {"received": 1}  # Meta's retry of a slow 200
    time.sleep(0.5)
    assert len(wa.delivered(OWNER)) == 1
    assert inbox(live) == [(message["id"], "done")]


def test_an_approval_is_given_by_tapping_a_reply_button(
    start_daemon: StartDaemon, wa: FakeWhatsApp, llm: FakeOpenAI
) -> None:
    live = started(start_daemon, settings=channels(wa, llm))
    llm.reply("", tool_calls=[("remember", {"fact": "Ada likes tea"})])
    llm.reply_with(lambda request: "done: " + request["messages"][-1]["content"][:40])
    ok(wa.post(url(live), wa.text(OWNER, "remember that I like tea")))
    request = wait_for(lambda: wa.accepted(OWNER, "interactive"), "the approval request")[0]
    assert "Approval needed" in request["text"]
    buttons = request["payload"]["interactive"]["action"]["buttons"]
    once = buttons[0]["reply"]
    assert once["title"] == "Approve once"

    # A stranger's text saying the same is no approval; the owner's tap is.
    ok(wa.post(url(live), wa.text(STRANGER, once["id"])))
    tap = wa.button_reply(OWNER, once["id"], once["title"], on=str(request["id"]))
    ok(wa.post(url(live), tap))
    wait_for(lambda: [t for t in wa.delivered(OWNER) if t.startswith("done: ")], "the answer")
    assert [m.text for m in live.daemon.runtime.memories.list()] == ["Ada likes tea"]
    assert "Approved remember once." in wa.delivered(OWNER)


def test_a_131047_sends_the_template_and_doctor_names_the_closed_window(
    start_daemon: StartDaemon, wa: FakeWhatsApp
) -> None:
    live = started(
        start_daemon, settings=channels(wa, template="memvault_reply", template_text=True)
    )
    check = window_check(live)  # the owner never wrote: no window yet
    assert check["status"] == "ok" and OWNER in check["message"]
    assert "'memvault_reply'" in check["message"]

    # A stranger writes; the owner is told, but never wrote: Meta refuses free text.
    ok(wa.post(url(live), wa.text(STRANGER, "hi, who is this?")))
    template = wait_for(lambda: wa.accepted(OWNER, "template"), "the template")[0]
    assert [(s["kind"], s["error"]) for s in wa.sent] == [("text", 131047), ("template", None)]
    assert "wants to talk on whatsapp" in template["text"]
    assert "\n" not in template["text"]
    assert wa.delivered(STRANGER) == []  # quiet: nothing to the stranger
    wait_for(lambda: [r.status for r in live.daemon.hub.store.outbox()] == ["sent"], "sent")


def test_without_a_template_the_message_fails_and_doctor_warns(
    start_daemon: StartDaemon, wa: FakeWhatsApp, clock: MovableClock
) -> None:
    live = started(start_daemon, settings=channels(wa))
    ok(wa.post(url(live), wa.text(OWNER, "/status")))
    wait_for(lambda: wa.delivered(OWNER), "the answer in the window")
    assert window_check(live)["status"] == "ok"

    clock.set(clock.now() + timedelta(hours=25))
    result = live.daemon.hub.send("whatsapp", "owner", "A reminder nobody asked for.", wait=WAIT)
    assert result["status"] == "failed"
    assert "channels.whatsapp.template is not set" in str(result["error"])
    assert len(wa.sent) == 1  # the adapter knew the window closed: no refused attempt
    check = window_check(live)
    assert check["status"] == "warning" and OWNER in check["message"]
    assert "channels.whatsapp.template is not set" in check["message"]


def test_a_throughput_limit_is_waited_out_and_retried(
    start_daemon: StartDaemon, wa: FakeWhatsApp, clock: MovableClock
) -> None:
    live = started(start_daemon, settings=channels(wa))
    wa.fail("messages", 130429)
    ok(wa.post(url(live), wa.text(OWNER, "/help")))
    row = wait_for(
        lambda: [r for r in live.daemon.hub.store.outbox() if r.last_error], "the limited row"
    )[0]
    assert row.status == "pending" and "error 130429" in str(row.last_error)
    assert (row.next_attempt_at - clock.now()).total_seconds() == 2
    time.sleep(1.0)
    assert wa.delivered(OWNER) == []  # not before the wait
    clock.set(clock.now() + timedelta(seconds=3))
    wait_for(lambda: wa.delivered(OWNER), "the reply after the wait")
    assert [s["error"] for s in wa.sent] == [130429, None]


def test_files_in_are_saved_into_the_vault_and_files_out_are_uploaded(
    start_daemon: StartDaemon, wa: FakeWhatsApp
) -> None:
    live = started(start_daemon, settings=channels(wa))
    ok(wa.post(url(live), wa.image(OWNER, b"\xff\xd8whiteboard", caption="the board")))
    ok(wa.post(url(live), wa.document(OWNER, "notes.pdf", b"%PDF-1.4 data", "application/pdf")))
    wait_for(lambda: [s for _, s in inbox(live)] == ["done", "done"], "both handled")
    files = [p for p in (live.vault / "Attachments" / "whatsapp").rglob("*") if p.is_file()]
    assert sorted(p.read_bytes() for p in files) == [b"%PDF-1.4 data", b"\xff\xd8whiteboard"]
    assert any(p.name.endswith("notes.pdf") for p in files)

    report = live.vault / "Attachments" / "report.pdf"
    report.write_bytes(b"%PDF the report")
    result = live.daemon.hub.send(
        "whatsapp", "owner", "The report:", media=("Attachments/report.pdf",), wait=WAIT
    )
    assert result["status"] == "sent", result
    document = wa.accepted(OWNER, "document")[-1]["payload"]["document"]
    assert wa.uploads[document["id"]] == (b"%PDF the report", "application/pdf", "report.pdf")
    assert document["filename"] == "report.pdf"


def test_a_channel_that_is_not_enabled_answers_503(
    start_daemon: StartDaemon, wa: FakeWhatsApp
) -> None:
    live = start_daemon()
    error = failed(wa.post(url(live), wa.text(OWNER, "hi")), 503, "channel_unavailable")
    assert "channels.whatsapp.enabled" in error["message"]
    failed(wa.verify(url(live), FAKE_VERIFY_TOKEN), 503, "channel_unavailable")
