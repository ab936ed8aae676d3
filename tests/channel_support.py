"""What the channel tests share: the owner's id, the Telegram section pointed at the fake,
waiting for something to happen, and what the fake delivered."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from telegram_fake import FakeTelegram

OWNER = 4242


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


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    """``check()``'s first truthy value, polled until ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


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
