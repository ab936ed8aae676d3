"""What the OpenClaw gateway's session entries say, read as platform messages. The entries
are as the real gateway (openclaw 2026.9.6) sent them in ``session.message`` events and
``chat.history`` answers for a Telegram direct chat and a Telegram group (the tests of
tests/gateway/test_openclaw_events.py receive them live)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memvault.channels.openclaw_events import channel_message


def entry(text: Any, *, message_id: str = "1", sender: str = "4242") -> dict[str, Any]:
    """A user entry as the gateway records a Telegram message."""
    return {
        "role": "user",
        "content": text,
        "timestamp": 1795774863000,
        "idempotencyKey": "channel-user:v1:e818",
        "__openclaw": {
            "senderIsOwner": False,
            "senderId": sender,
            "senderName": "Ada",
            "senderUsername": "ada",
            "senderIdentity": {
                "type": "observation",
                "id": sender,
                "pluginId": "telegram",
                "accountId": "default",
                "senderKind": "human",
            },
            "transport": {
                "channel": "telegram",
                "conversationRef": "conv_1a81171d4c67d7de12e96eb7c2cc412b",
                "messageId": message_id,
            },
            "id": "7634c579-109b-4ccb-99da-d5b062a73157",
            "recordTimestampMs": 1795774873783,
            "seq": 1,
        },
    }


MAIN = {  # OpenClaw's main session: every direct chat shares it (dmScope "main")
    "key": "agent:main:main",
    "kind": "direct",
    "channel": "telegram",
    "chatType": "direct",
    "origin": {"provider": "telegram", "chatType": "direct", "to": "telegram:7777"},
    "deliveryContext": {"channel": "telegram", "to": "telegram:7777"},
}
GROUP = {
    "key": "agent:main:telegram:group:-1001234",
    "chatType": "group",
    "origin": {
        "chatType": "group",
        "from": "telegram:group:-1001234",
        "to": "telegram:-1001234",
    },
    "deliveryContext": {"channel": "telegram", "to": "telegram:-1001234"},
}


def test_a_direct_message_is_its_senders_conversation() -> None:
    """The main session's route may be another chat's (7777): the sender names it."""
    message = channel_message(entry("hello from telegram"), MAIN, "agent:main:main")
    assert message is not None
    assert (message.channel, message.id, message.entry) == (
        "telegram",
        "1",
        "7634c579-109b-4ccb-99da-d5b062a73157",
    )
    assert (message.sender, message.sender_name, message.username) == ("4242", "Ada", "ada")
    assert message.text == "hello from telegram" and message.direct
    assert message.sent_at == datetime(2026, 11, 27, 10, 21, 3, tzinfo=UTC)
    assert message.recorded_ms == 1795774873783
    assert message.conversation == {"4242", "user:4242"}


def test_a_group_message_is_the_groups_conversation() -> None:
    message = channel_message(entry("hello group"), GROUP, GROUP["key"])
    assert message is not None and not message.direct
    assert message.conversation == {"-1001234", "group:-1001234"}


def test_what_is_not_a_platforms_message_is_none() -> None:
    answer = {"role": "assistant", "content": [{"type": "text", "text": "Hi"}]}
    failed = {"role": "custom", "customType": "run-failed-before-reply", "content": "x"}
    typed_in_openclaw = {
        "role": "user",
        "content": "from the Control UI",
        "__openclaw": {"id": "e1"},
    }
    for item in (answer, failed, typed_in_openclaw, "text", None):
        assert channel_message(item, MAIN, "agent:main:main") is None


def test_text_parts_are_joined_and_other_parts_left_out() -> None:
    parts = [
        {"type": "text", "text": "look at this"},
        {"type": "image", "data": "iVBOR..."},
        {"type": "text", "text": "and this"},
    ]
    message = channel_message(entry(parts), MAIN, "agent:main:main")
    assert message is not None and message.text == "look at this\nand this"
