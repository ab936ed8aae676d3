"""The channel tools through the registry, as an agent calls them: the real hub and the
real Telegram adapter against a fake Bot API on loopback, with no daemon (a send is
delivered from this process) and with a running hub (reads see what arrived)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from channel_support import OWNER, delivered, telegram_config
from memvault.channels import owner
from memvault.channels.hub import Hub
from memvault.channels.tools import full_registry
from memvault.config import Settings
from memvault.runtime import Runtime
from memvault.tools import ToolContext, default_registry
from memvault.tools.policy import AllowAll, ApprovalRequest, Policy, Tier
from memvault.tools.registry import ToolResult
from support import HashEmbedder, MovableClock
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for

STRANGER = 555
CHANNEL_TOOLS = {
    "send_channel_message",
    "list_channel_conversations",
    "read_channel_messages",
    "get_channel_status",
    "openclaw_send",
    "openclaw_read",
    "openclaw_status",
}


class Asked:
    """An approver that records each question and answers as told."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    def approve(self, request: ApprovalRequest) -> bool:
        self.requests.append(request)
        return self.answer


@pytest.fixture
def runtime(tmp_path: Path, tg: FakeTelegram, clock: MovableClock) -> Iterator[Runtime]:
    telegram = telegram_config(tg)
    settings = Settings(
        vault=tmp_path / "vault", timezone="Europe/Berlin", channels={"telegram": telegram}
    )
    opened = Runtime.open(settings, clock=clock, embedder=HashEmbedder(), create=True)
    yield opened
    opened.close()


@pytest.fixture
def call(runtime: Runtime) -> Callable[..., ToolResult]:
    """Call a tool of the full registry (its own hub, never started), the owner approving."""
    registry = full_registry()

    def run(name: str, arguments: dict[str, Any], policy: Policy | None = None) -> ToolResult:
        context = ToolContext(runtime=runtime, policy=policy or Policy(approver=AllowAll()))
        return registry.call(name, arguments, context)

    return run


def receive(runtime: Runtime, tg: FakeTelegram, chat: int, text: str) -> None:
    """A message arrives: a hub runs until it has judged who sent it."""
    hub = Hub(runtime)
    hub.start()
    try:
        tg.push_message(chat, text, first_name="Bob")
        wait_for(lambda: hub.store.sender("telegram", str(chat)), "the sender to be seen")
    finally:
        hub.stop(WAIT)


def test_the_full_registry_adds_the_channel_tools_with_their_tiers() -> None:
    full = full_registry()
    job_tools = {"list_agent_jobs", "trigger_agent_job", "get_agent_job_history", "distill_now"}
    assert set(full.names()) - set(default_registry().names()) == CHANNEL_TOOLS | job_tools
    send = full.get("send_channel_message")
    assert (send.tier, send.category) == (Tier.WRITE, "network_access")
    assert send.annotations.open_world and not send.annotations.read_only
    for name in CHANNEL_TOOLS - {"send_channel_message", "openclaw_send", "openclaw_read"}:
        tool = full.get(name)
        assert tool.tier == Tier.READ and tool.annotations.read_only, name
    schema = send.input_schema()
    assert schema["required"] == ["conversation_hint", "text"]
    assert schema["properties"]["channel"]["default"] == "telegram"
    limit = full.get("list_channel_conversations").input_schema()["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 200, 20)


def test_a_send_to_the_owner_is_delivered_from_this_process(
    call: Callable[..., ToolResult], tg: FakeTelegram
) -> None:
    result = call("send_channel_message", {"conversation_hint": "owner", "text": "Renew the cert"})
    assert result.ok, result.error
    assert result.data["sent"] is True and result.data["status"] == "sent"
    assert result.data["chat_id"] == str(OWNER)
    assert delivered(tg, OWNER) == ["Renew the cert"]


def test_the_owner_is_asked_once_with_a_summary_and_a_no_sends_nothing(
    call: Callable[..., ToolResult], tg: FakeTelegram
) -> None:
    text = "Renew the certificate for the mail server before it expires on Friday morning"
    refused = Asked(False)
    result = call(
        "send_channel_message",
        {"conversation_hint": "owner", "text": text},
        Policy(approver=refused, mode="ask"),
    )
    assert not result.ok and result.code == "not_approved"
    assert tg.sent == []
    (request,) = refused.requests
    assert request.category == "network_access" and request.tier == Tier.WRITE
    assert request.summary == (
        "send to telegram owner: 'Renew the certificate for the mail server before it expires…'"
    )
    yes = Asked(True)
    policy = Policy(approver=yes, mode="ask")
    for words in ("One", "Two"):
        assert call("send_channel_message", {"chat_id": "owner", "text": words}, policy).ok
    assert len(yes.requests) == 1, "network access is approved once per session"
    assert delivered(tg, OWNER) == ["One", "Two"]


def test_a_stranger_is_refused_until_approved_and_again_once_blocked(
    call: Callable[..., ToolResult], runtime: Runtime, tg: FakeTelegram
) -> None:
    arguments = {"chat_id": STRANGER, "text": "Hello Bob"}  # a number, as models send ids
    refused = call("send_channel_message", arguments)
    assert not refused.ok and refused.code == "recipient_not_allowed"
    assert "nothing was sent" in (refused.error or "")
    assert tg.sent == []

    receive(runtime, tg, STRANGER, "Hi, is this Ada's bot?")
    hub = Hub(runtime, adapters={})
    approved = owner.approve(hub, "telegram", str(STRANGER), by="test")
    assert approved.status == "approved"
    sent = call("send_channel_message", {"channel_id": str(STRANGER), "text": "Hello Bob"})
    assert sent.ok and sent.data["sent"], sent.error
    assert delivered(tg, STRANGER) == ["Hello Bob"]

    owner.block(hub, "telegram", str(STRANGER), by="test")
    again = call("send_channel_message", arguments)
    assert not again.ok and again.code == "recipient_not_allowed"
    assert delivered(tg, STRANGER) == ["Hello Bob"]


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"conversation_hint": "owner", "text": ""}, "invalid_text"),
        ({"conversation_hint": "owner", "text": "   "}, "invalid_text"),
        ({"conversation_hint": "", "text": "hi"}, "invalid_conversation_hint"),
        ({"conversation_hint": "Nobody", "text": "hi"}, "invalid_conversation_hint"),
        ({"channel": "line", "conversation_hint": "owner", "text": "hi"}, "adapter_not_found"),
        ({"text": "hi"}, "validation_failed"),
    ],
)
def test_a_bad_send_is_one_sentence_with_the_earlier_designs_code(
    call: Callable[..., ToolResult], tg: FakeTelegram, arguments: dict[str, Any], code: str
) -> None:
    result = call("send_channel_message", arguments)
    assert not result.ok and result.code == code
    assert result.error and result.error.endswith(".")
    assert tg.sent == []


def test_channel_names_are_not_case_sensitive(
    call: Callable[..., ToolResult], tg: FakeTelegram
) -> None:
    result = call("send_channel_message", {"channel": "Telegram", "to": "owner", "text": "Hi"})
    assert result.ok, result.error
    status = call("get_channel_status", {"channel": "TELEGRAM"})
    assert [item["channel"] for item in status.data] == ["telegram"]
    unknown = call("get_channel_status", {"channel": "fax"})
    assert unknown.code == "adapter_not_found" and "channels: telegram" in (unknown.error or "")


def test_reads_see_what_arrived_and_what_was_sent_on_a_running_hub(
    runtime: Runtime, tg: FakeTelegram
) -> None:
    hub = Hub(runtime)
    hub.start()
    try:
        registry = full_registry(lambda _runtime: hub)
        context = ToolContext(runtime=runtime, policy=Policy(approver=AllowAll()))

        def call(name: str, arguments: dict[str, Any]) -> Any:
            result = registry.call(name, arguments, context)
            assert result.ok, result.error
            return result.data

        wait_for(lambda: hub.statuses["telegram"].state == "running", "the channel")
        tg.push_message(OWNER, "/tasks", first_name="Ada")
        wait_for(lambda: delivered(tg, OWNER), "the answer to /tasks")
        assert call("send_channel_message", {"to": "owner", "text": "Later"})["sent"]

        read = call("read_channel_messages", {"conversation_hint": "owner"})
        assert [(m["direction"], m["text"]) for m in read["messages"]] == [
            ("inbound", "/tasks"),
            ("outbound", "No open tasks."),
            ("outbound", "Later"),
        ]
        assert call("read_channel_messages", {"limit": 1})["message_count"] == 1
        listed = call("list_channel_conversations", {})
        assert [(c["chat_id"], c["name"]) for c in listed["conversations"]] == [(str(OWNER), "Ada")]
        status, *others = call("get_channel_status", {})
        assert status["channel"] == "telegram" and {o["state"] for o in others} == {"disabled"}
        assert status["state"] == "running" and status["outbox"] == {"sent": 2}
        assert status["identity"] == "@memvault_test_bot"
    finally:
        hub.stop(WAIT)
