"""The channel tools through the registry, as an agent calls them: the real hub and the
real Telegram adapter against a fake Bot API on loopback, with no daemon (a send is
delivered from this process) and with a running hub (reads see what arrived)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from channel_support import OWNER, delivered, telegram_config
from line_fake import FAKE_SECRET, FAKE_TOKEN, FakeLine, user_id
from memvault.channels import owner
from memvault.channels.base import Inbound
from memvault.channels.hub import Hub
from memvault.channels.tools import full_registry
from memvault.config import Settings
from memvault.runtime import Runtime
from memvault.tools import ToolContext, default_registry
from memvault.tools.policy import AllowAll, ApprovalRequest, Policy, Tier
from memvault.tools.registry import ToolResult
from support import TZ, HashEmbedder, MovableClock
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
    channel = schema["properties"]["channel"]
    assert "default" not in channel and "owner's primary channel" in channel["description"]
    listed = full.get("list_channel_conversations").input_schema()["properties"]
    limit = listed["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 200, 20)
    assert (listed["days"]["type"], listed["days"]["minimum"]) == ("integer", 1)


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
        # Sent, or still queued when a loaded machine takes longer than the tool waits.
        assert call("send_channel_message", {"to": "owner", "text": "Later"})["status"] in (
            "sent",
            "queued",
        )
        wait_for(
            lambda: call("get_channel_status", {"channel": "telegram"})[0]["outbox"] == {"sent": 2},
            "the message marked sent",
        )

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


# -- the owner's primary channel, unread markers, days, uptime -----------------------------

LINE_OWNER = user_id(1)


@pytest.fixture
def line(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLine]:
    """A fake LINE Messaging API, its secret and token in the environment."""
    with FakeLine() as fake:
        fake.add_user(LINE_OWNER, "Ada")
        monkeypatch.setenv("LINE_CHANNEL_SECRET", FAKE_SECRET)
        monkeypatch.setenv("LINE_CHANNEL_ACCESS_TOKEN", FAKE_TOKEN)
        yield fake


def two_channels(
    tmp_path: Path, clock: MovableClock, tg: FakeTelegram, line: FakeLine, *, owner_on_tg: bool
) -> Runtime:
    """Telegram (first in the settings; its owner set or not) and LINE with its owner."""
    telegram = telegram_config(tg)
    if not owner_on_tg:
        telegram["owner"] = []
    channels = {
        "telegram": telegram,
        "line": {
            "enabled": True,
            "owner": [LINE_OWNER],
            "api_base": line.api_base,
            "data_api_base": line.data_api_base,
        },
    }
    settings = Settings(vault=tmp_path / "vault", timezone="Europe/Berlin", channels=channels)
    return Runtime.open(settings, clock=clock, embedder=HashEmbedder(), create=True)


def test_a_tool_not_told_the_channel_uses_the_owners_primary_one(
    tmp_path: Path, clock: MovableClock, tg: FakeTelegram, line: FakeLine
) -> None:
    # Telegram comes first but has no owner: the owner's primary channel is LINE.
    runtime = two_channels(tmp_path, clock, tg, line, owner_on_tg=False)
    try:
        asked = Asked(True)
        context = ToolContext(runtime=runtime, policy=Policy(approver=asked, mode="ask"))
        registry = full_registry()
        sent = registry.call("send_channel_message", {"to": "owner", "text": "Bread's up"}, context)
        assert sent.ok and sent.data["adapter"] == "line", sent.error
        assert line.delivered(LINE_OWNER) == ["Bread's up"] and tg.sent == []
        (request,) = asked.requests  # the owner is told where it goes
        assert request.summary == "send to line owner: 'Bread's up'"
        assert request.arguments["channel"] == "line"
        listed = registry.call("list_channel_conversations", {}, context)
        assert listed.ok and listed.data["adapter"] == "line", listed.error
        read = registry.call("read_channel_messages", {"conversation_hint": "owner"}, context)
        assert read.ok and read.data["adapter"] == "line", read.error
        assert [m["text"] for m in read.data["messages"]] == ["Bread's up"]
    finally:
        runtime.close()

    # With its owner set, Telegram (first) is the primary channel again.
    again = two_channels(tmp_path / "2", clock, tg, line, owner_on_tg=True)
    try:
        context = ToolContext(runtime=again, policy=Policy(approver=AllowAll()))
        sent = full_registry().call("send_channel_message", {"to": "owner", "text": "Hi"}, context)
        assert sent.ok and sent.data["adapter"] == "telegram", sent.error
        assert delivered(tg, OWNER) == ["Hi"]
    finally:
        again.close()


def test_with_no_channel_enabled_the_default_says_so(tmp_path: Path) -> None:
    settings = Settings(vault=tmp_path / "bare", timezone="Europe/Berlin")
    bare = Runtime.open(settings, embedder=HashEmbedder(), create=True)
    try:
        context = ToolContext(runtime=bare, policy=Policy(approver=AllowAll()))
        result = full_registry().call("list_channel_conversations", {}, context)
        assert not result.ok and result.code == "adapter_not_found"
        names = list(bare.settings.channels.sections())
        assert result.error == (
            "No messaging channel is enabled; turn one on in the vault's config, e.g. "
            f"channels.telegram.enabled = true (channels: {', '.join(names)})."
        )
    finally:
        bare.close()


def arrive(runtime: Runtime, channel: str, chat: str, text: str, number: int) -> None:
    """A message stored as the hub's intake stores it (for the channel no hub runs here)."""
    Hub(runtime, adapters={}).store.receive(
        Inbound(
            channel=channel,
            message_id=f"{channel}-{number}",
            chat_id=chat,
            sender_id=chat,
            sender_name="Ada",
            text=text,
            sent_at=runtime.clock.now(),
        )
    )


def test_reading_with_no_channel_shows_what_is_unread_on_every_channel_once(
    tmp_path: Path, clock: MovableClock, tg: FakeTelegram, line: FakeLine
) -> None:
    runtime = two_channels(tmp_path, clock, tg, line, owner_on_tg=True)
    hub = Hub(runtime)
    hub.start()
    try:
        registry = full_registry(lambda _runtime: hub)
        context = ToolContext(runtime=runtime, policy=Policy(approver=AllowAll()))

        def read(arguments: dict[str, Any]) -> Any:
            result = registry.call("read_channel_messages", arguments, context)
            assert result.ok, result.error
            return result.data

        wait_for(lambda: hub.statuses["telegram"].state == "running", "the channel")
        nothing = read({})
        assert (nothing["message_count"], nothing["note"]) == (
            0,
            "No unread messages on any channel.",
        )

        for n, text in enumerate(["/tasks", "/help", "/tasks"]):
            clock.set(datetime(2026, 11, 22, 10, n, tzinfo=TZ))
            tg.push_message(OWNER, text, first_name="Ada")
            wait_for(lambda n=n: len(hub.store.inbox("telegram")) == n + 1, "the message")
        clock.set(datetime(2026, 11, 22, 10, 5, tzinfo=TZ))
        arrive(runtime, "line", LINE_OWNER, "Are the rolls ready?", 1)

        first = read({"limit": 2})
        assert [(m["channel"], m["text"]) for m in first["messages"]] == [
            ("telegram", "/tasks"),
            ("telegram", "/help"),
            ("line", "Are the rolls ready?"),
        ]
        assert first["channels"] == {
            "telegram": {"shown": 2, "still_unread": 1},
            "line": {"shown": 1, "still_unread": 0},
        }
        assert first["note"] == "More unread messages are waiting; call again to read them."
        second = read({"limit": 2})
        assert [(m["channel"], m["text"]) for m in second["messages"]] == [("telegram", "/tasks")]
        assert read({})["message_count"] == 0  # each message is shown once

        # Reading a channel whole marks what it showed read too; one chat does not.
        arrive(runtime, "line", LINE_OWNER, "And the rye?", 2)
        assert read({"channel": "line", "conversation_hint": "owner"})["message_count"] == 2
        assert [m["text"] for m in read({})["messages"]] == ["And the rye?"]
        arrive(runtime, "line", LINE_OWNER, "Thanks!", 3)
        assert read({"channel": "line"})["messages"][-1]["text"] == "Thanks!"
        assert read({})["message_count"] == 0
    finally:
        hub.stop(WAIT)
        runtime.close()


def test_conversations_can_be_limited_to_the_last_days(
    runtime: Runtime, clock: MovableClock, call: Callable[..., ToolResult]
) -> None:
    clock.set(datetime(2026, 11, 1, 9, 0, tzinfo=TZ))
    arrive(runtime, "telegram", "111", "Old news", 1)
    clock.set(datetime(2026, 11, 20, 9, 0, tzinfo=TZ))
    arrive(runtime, "telegram", "222", "Fresh news", 2)
    clock.set(datetime(2026, 11, 22, 9, 0, tzinfo=TZ))

    every = call("list_channel_conversations", {})
    assert [c["chat_id"] for c in every.data["conversations"]] == ["222", "111"]
    week = call("list_channel_conversations", {"days": 7})
    assert week.ok, week.error
    assert [c["chat_id"] for c in week.data["conversations"]] == ["222"]
    assert (week.data["count"], week.data["days"]) == (1, 7)
    assert call("list_channel_conversations", {"days": 30}).data["count"] == 2
    bad = call("list_channel_conversations", {"days": 0})
    assert not bad.ok and "'days'" in (bad.error or "")


def test_channel_status_reports_uptime_since_the_adapter_started(
    runtime: Runtime, clock: MovableClock, tg: FakeTelegram
) -> None:
    hub = Hub(runtime)
    registry = full_registry(lambda _runtime: hub)
    context = ToolContext(runtime=runtime, policy=Policy(approver=AllowAll()))

    def status() -> dict[str, Any]:
        result = registry.call("get_channel_status", {"channel": "telegram"}, context)
        assert result.ok, result.error
        (item,) = result.data
        return dict(item)

    stopped = status()
    assert (stopped["connected"], stopped["uptime_seconds"], stopped["running_since"]) == (
        False,
        None,
        None,
    )
    clock.set(datetime(2026, 11, 22, 9, 0, tzinfo=TZ))
    hub.start()
    try:
        wait_for(lambda: hub.statuses["telegram"].state == "running", "the channel")
        clock.set(datetime(2026, 11, 22, 10, 30, tzinfo=TZ))
        running = status()
        assert running["connected"] is True
        assert running["running_since"] == "2026-11-22T09:00:00+01:00"
        assert running["uptime_seconds"] == 5400
    finally:
        hub.stop(WAIT)
    assert status()["connected"] is False


def test_a_stop_as_the_outbox_wakes_ends_the_hub(runtime: Runtime, tg: FakeTelegram) -> None:
    """A message queued and the hub stopped at once: its loop ends. (The dispatcher's
    wait was ``asyncio.wait_for``, which on Python 3.11 swallows a cancellation that
    comes as the wait ends: the dispatcher outlived the stop, and the stop waited.)"""
    for attempt in range(10):
        hub = Hub(runtime)
        hub.start()
        hub.queue("telegram", str(OWNER), [f"Ping {attempt}"], kind="send")
        hub.stop(WAIT)
        assert not hub.running, f"the hub still runs after its stop (attempt {attempt})"
