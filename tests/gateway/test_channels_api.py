"""The channels over HTTP: a real daemon on loopback, the real Telegram adapter, a fake
Bot API. Sending obeys the access rules; the earlier design's error codes; reading what
arrived and what was sent; the owner's decisions need the approval token; the outbox."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2 as httpx
import pytest

from channel_support import OWNER, delivered, telegram_config, wait_for
from gateway_support import Live, StartDaemon, failed, ok
from telegram_fake import FakeTelegram

STRANGER = 555
APPROVAL = "X-Memvault-Approval"


def channels(tg: FakeTelegram, **telegram: Any) -> dict[str, Any]:
    return {"channels": {"telegram": telegram_config(tg, **telegram)}}


@pytest.fixture
def served(start_daemon: StartDaemon, tg: FakeTelegram) -> Live:
    """A daemon whose Telegram channel runs (polling the fake)."""
    live = start_daemon(settings=channels(tg))
    wait_for(lambda: live.daemon.hub.statuses["telegram"].state == "running", "the channel")
    return live


@pytest.fixture
def api(served: Live) -> Iterator[httpx.Client]:
    with served.client() as client:
        yield client


def send(api: httpx.Client, hint: str, text: str, **body: Any) -> httpx.Response:
    payload = {"conversation_hint": hint, "text": text}
    return api.post(
        "/v1/send",
        json={"adapter": "telegram", "action": "send_message", "payload": payload, **body},
    )


def stranger_writes(served: Live, tg: FakeTelegram, api: httpx.Client) -> None:
    tg.push_message(STRANGER, "hello, is this Ada's bot?", first_name="Bob", username="bob")
    wait_for(lambda: ok(api.get("/v1/channels/pending")), "the stranger to wait")


def test_a_send_to_the_owner_reaches_telegram(
    served: Live, api: httpx.Client, tg: FakeTelegram
) -> None:
    result = ok(send(api, "owner", "Renew the **cert** today"))
    assert result["status"] == "sent" and result["chat_id"] == str(OWNER)
    assert result["adapter"] == "telegram" and result["action"] == "send_message"
    assert result["parts"] == 1 and result["error"] is None
    assert result["message_id"] == ",".join(str(i) for i in result["outbox_ids"])
    assert delivered(tg, OWNER) == ["Renew the <b>cert</b> today"]
    # The owner's chat id, and the defaults (telegram, send_message), reach the same chat.
    ok(api.post("/v1/send", json={"payload": {"conversation_hint": str(OWNER), "text": "Two"}}))
    assert delivered(tg, OWNER)[-1] == "Two"


def test_a_stranger_cannot_be_written_to_until_approved_and_not_after_a_block(
    served: Live, api: httpx.Client, tg: FakeTelegram
) -> None:
    error = failed(send(api, str(STRANGER), "Hi Bob"), 403, "recipient_not_allowed")
    assert "nothing was sent" in error["message"]
    stranger_writes(served, tg, api)
    failed(send(api, str(STRANGER), "Hi Bob"), 403, "recipient_not_allowed")
    assert delivered(tg, STRANGER) == []

    approved = ok(
        api.post(
            "/v1/channels/telegram/approve",
            json={"sender": str(STRANGER)},
            headers={APPROVAL: served.daemon.approval_token},
        )
    )
    assert approved["status"] == "approved" and approved["decided_by"] == "api"
    assert ok(send(api, str(STRANGER), "Hi Bob"))["status"] == "sent"
    assert delivered(tg, STRANGER) == ["Hi Bob"]
    # Approving made Bob a contact: his name reaches his chat too.
    contact = served.daemon.runtime.contacts.find_by_identity("telegram", str(STRANGER))
    assert contact is not None and contact.name == "Bob"
    assert ok(send(api, "Bob", "Hi again"))["chat_id"] == str(STRANGER)

    ok(
        api.post(
            "/v1/channels/telegram/block",
            json={"sender": str(STRANGER)},
            headers={APPROVAL: served.daemon.approval_token},
        )
    )
    failed(send(api, str(STRANGER), "Still there?"), 403, "recipient_not_allowed")
    assert delivered(tg, STRANGER) == ["Hi Bob", "Hi again"]


def test_approve_and_block_need_the_owners_approval_token(
    served: Live, api: httpx.Client, tg: FakeTelegram
) -> None:
    stranger_writes(served, tg, api)
    for action in ("approve", "block"):
        for headers in ({}, {APPROVAL: "wrong"}, {APPROVAL: served.daemon.token}):
            response = api.post(
                f"/v1/channels/telegram/{action}", json={"sender": str(STRANGER)}, headers=headers
            )
            error = failed(response, 403, "approval_required")
            assert "X-Memvault-Approval" in error["message"]
    waiting = ok(api.get("/v1/channels/pending", params={"channel": "telegram"}))
    assert [(s["sender_id"], s["status"], s["name"]) for s in waiting] == [
        (str(STRANGER), "pending", "Bob")
    ]
    token = {APPROVAL: served.daemon.approval_token}
    failed(
        api.post("/v1/channels/telegram/approve", json={"sender": "999"}, headers=token),
        404,
        "not_found",
    )
    failed(
        api.post("/v1/channels/telegram/block", json={"sender": str(OWNER)}, headers=token),
        409,
        "conflict",
    )
    failed(
        api.post("/v1/channels/smoke-signal/approve", json={"sender": "1"}, headers=token),
        400,
        "adapter_not_found",
    )
    failed(
        api.post("/v1/channels/telegram/approve", json={}, headers=token), 400, "validation_failed"
    )
    ok(api.post("/v1/channels/telegram/approve", json={"sender": str(STRANGER)}, headers=token))
    assert ok(api.get("/v1/channels/pending")) == []


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"adapter": "telegram", "action": "click_button", "payload": {}}, "unsupported_action"),
        ({"payload": {"conversation_hint": "", "text": "hi"}}, "invalid_conversation_hint"),
        ({"payload": {"conversation_hint": "   ", "text": "hi"}}, "invalid_conversation_hint"),
        ({"payload": {"text": "hi"}}, "invalid_conversation_hint"),
        ({"payload": {"conversation_hint": "Nobody", "text": "hi"}}, "invalid_conversation_hint"),
        ({"payload": {"conversation_hint": "owner", "text": ""}}, "invalid_text"),
        ({"payload": {"conversation_hint": "owner", "text": " \n "}}, "invalid_text"),
        ({"payload": {"conversation_hint": "owner"}}, "invalid_text"),
        ({"adapter": "line", "payload": {"conversation_hint": "x", "text": "hi"}},
         "adapter_not_found"),
        ({"payload": {"conversation_hint": "owner", "text": 5}}, "validation_failed"),
    ],
)  # fmt: skip
def test_the_earlier_designs_error_codes(
    served: Live, api: httpx.Client, tg: FakeTelegram, body: dict[str, Any], code: str
) -> None:
    error = failed(api.post("/v1/send", json=body), 400, code)
    assert error["retriable"] is False
    assert [s for s in tg.sent if s["method"] == "sendMessage"] == []


def test_invalid_json_and_a_disabled_channel(start_daemon: StartDaemon, tg: FakeTelegram) -> None:
    live = start_daemon(settings=channels(tg, enabled=False))
    with live.client() as api:
        response = api.post(
            "/v1/send", content=b'{"payload": ', headers={"Content-Type": "application/json"}
        )
        failed(response, 400, "invalid_json")
        error = failed(send(api, "owner", "hi"), 400, "adapter_not_found")
        assert "channels.telegram.enabled" in error["message"]
        failed(api.get("/v1/messages"), 400, "adapter_not_found")
        failed(api.get("/v1/conversations", params={"adapter": "nope"}), 400, "adapter_not_found")
        status = ok(api.get("/v1/channels"))
        assert {(c["channel"], c["enabled"], c["state"]) for c in status} == {
            (name, False, "disabled")
            for name in (
                "telegram",
                "email",
                "slack",
                "discord",
                "signal",
                "line",
                "whatsapp",
                "openclaw",
            )
        }
    assert tg.sent == []


def test_messages_and_conversations_list_what_arrived_and_what_was_sent(
    served: Live, api: httpx.Client, tg: FakeTelegram
) -> None:
    tg.push_message(OWNER, "/help", first_name="Ada")
    wait_for(lambda: delivered(tg, OWNER), "the answer to /help")
    ok(send(api, "owner", "A note from the API"))
    result = ok(api.get("/v1/messages", params={"conversation": "owner"}))
    assert result["adapter"] == "telegram" and result["conversation"] == str(OWNER)
    shown = [(m["direction"], m["text"][:20]) for m in result["messages"]]
    assert shown[0] == ("inbound", "/help") and shown[-1] == ("outbound", "A note from the API")
    assert shown[1] == ("outbound", "Commands: /remember ")  # the answer to /help
    assert result["message_count"] == len(result["messages"]) == 3
    assert result["messages"][0]["sender_name"] == "Ada"
    assert len(ok(api.get("/v1/messages", params={"limit": 1}))["messages"]) == 1
    failed(api.get("/v1/messages", params={"limit": 500}), 400, "validation_failed")
    failed(api.get("/v1/messages", params={"conversation": "Nobody"}), 400,
           "invalid_conversation_hint")  # fmt: skip

    listed = ok(api.get("/v1/conversations", params={"adapter": "telegram"}))
    assert listed["count"] == 1 and listed["source"] == "memvault"
    chat = listed["conversations"][0]
    assert (chat["chat_id"], chat["name"], chat["last_text"]) == (str(OWNER), "Ada", "/help")
    failed(api.get("/v1/conversations", params={"limit": 0}), 400, "validation_failed")


def test_context_is_memvaults_own_unless_a_channel_is_named(
    served: Live, api: httpx.Client, tg: FakeTelegram
) -> None:
    own = ok(api.get("/v1/context"))
    assert "markdown" in own and "adapter" not in own
    tg.push_message(OWNER, "/status", first_name="Ada")
    wait_for(lambda: delivered(tg, OWNER), "the answer to /status")
    chat = ok(api.get("/v1/context", params={"adapter": "telegram"}))
    assert chat["adapter"] == "telegram" and chat["conversation"] == str(OWNER)
    assert chat["owner"] is True and chat["conversation_name"] == "Ada"
    assert chat["session"]["key"] == f"telegram:{OWNER}" and "markdown" not in chat
    failed(api.get("/v1/context", params={"adapter": "fax"}), 400, "adapter_not_found")


def test_a_refused_message_is_failed_in_the_outbox_and_retried(
    served: Live, api: httpx.Client, tg: FakeTelegram
) -> None:
    tg.fail("sendMessage", 400)  # "Bad Request: chat not found", once
    result = ok(send(api, "owner", "Is anyone there?"))
    assert result["status"] == "failed" and "chat not found" in result["error"].lower()
    assert delivered(tg, OWNER) == []
    rows = ok(api.get("/v1/channels/outbox", params={"status": "failed"}))
    assert [(r["id"], r["status"], r["text"]) for r in rows] == [
        (result["outbox_ids"][0], "failed", "Is anyone there?")
    ]
    assert ok(api.get("/v1/channels/outbox", params={"status": "pending"})) == []
    status = ok(api.get("/v1/channels"))[0]
    assert status["state"] == "running" and status["outbox"] == {"failed": 1}

    again = ok(api.post(f"/v1/channels/outbox/{rows[0]['id']}/retry"))
    assert again["status"] == "pending" and again["attempts"] == 0
    wait_for(lambda: delivered(tg, OWNER), "the retried message")
    assert delivered(tg, OWNER) == ["Is anyone there?"]
    sent = wait_for(lambda: ok(api.get("/v1/channels/outbox", params={"status": "sent"})), "sent")
    assert sent[0]["id"] == rows[0]["id"]
    failed(api.post(f"/v1/channels/outbox/{rows[0]['id']}/retry"), 409, "conflict")
    failed(api.post("/v1/channels/outbox/999/retry"), 404, "not_found")
    failed(api.get("/v1/channels/outbox", params={"status": "lost"}), 400, "validation_failed")


def test_channels_status_reports_the_running_bot(served: Live, api: httpx.Client) -> None:
    status = ok(api.get("/v1/channels"))
    telegram = status[0]
    assert all(c["state"] == "disabled" for c in status[1:]), status
    assert telegram["channel"] == "telegram" and telegram["enabled"] is True
    assert telegram["state"] == "running" and telegram["identity"] == "@memvault_test_bot"
    assert telegram["policy"] == "quiet" and telegram["owner_set"] is True


def test_the_channel_tools_are_served_over_http(
    served: Live, api: httpx.Client, tg: FakeTelegram
) -> None:
    tools = {t["name"]: t for t in ok(api.get("/v1/tools"))}
    assert tools["send_channel_message"]["tier"] == 2
    assert tools["send_channel_message"]["category"] == "network_access"
    assert tools["get_channel_status"]["tier"] == 1
    arguments = {"chat_id": OWNER, "text": "From a tool"}
    failed(api.post("/v1/tools/send_channel_message", json=arguments), 403, "approval_required")
    assert delivered(tg, OWNER) == []
    answer = ok(
        api.post(
            "/v1/tools/send_channel_message",
            json=arguments,
            headers={APPROVAL: served.daemon.approval_token},
        ),
        notice=None,
    )
    assert answer["result"]["sent"] is True and delivered(tg, OWNER) == ["From a tool"]
    status = ok(api.post("/v1/tools/get_channel_status", json={}))["result"]
    assert status[0]["state"] == "running"
