"""What the channel tests share: the owner's id, the Telegram section pointed at the fake,
how long the owner may take to answer an approval, and what the fake delivered.

``wait_for`` is :func:`waiting.wait_for`, re-exported for the tests that import it here.
"""

from __future__ import annotations

from typing import Any

from memvault.config import ChannelsSettings
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for

__all__ = [
    "APPROVAL_TIMEOUT",
    "OWNER",
    "MemoryState",
    "delivered",
    "telegram_config",
    "wait_for",
]

OWNER = 4242
# The owner's answer to an approval is an event like any other: the product's own default
# (or WAIT, if a run raised it past that), so a slow round trip never expires it.
APPROVAL_TIMEOUT = max(WAIT, ChannelsSettings.model_fields["approval_timeout"].default)


def telegram_config(tg: FakeTelegram, **extra: Any) -> dict[str, Any]:
    """``[channels.telegram]`` enabled, the owner set, polling ``tg`` briefly."""
    return {
        "enabled": True,
        "owner": [str(OWNER)],
        "base_url": tg.base_url,
        "base_file_url": tg.base_file_url,
        "poll_timeout": 1,
        **extra,
    }


def delivered(tg: FakeTelegram, chat: int) -> list[str]:
    """The texts the fake delivered to ``chat`` (refused attempts left out)."""
    return [
        str(s["text"])
        for s in list(tg.sent)
        if s["method"] == "sendMessage" and s["chat_id"] == chat and not s["error"]
    ]


class MemoryState:
    """Named values kept in memory, as the hub keeps them in state.db (an adapter's
    :class:`memvault.channels.base.AdapterState`); ``puts`` lists every write in order."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.puts: list[tuple[str, str]] = []

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    def put(self, name: str, value: str) -> None:
        self.values[name] = value
        self.puts.append((name, value))
