"""Two channels on one daemon: what one platform does never holds up the other."""

from __future__ import annotations

from typing import Any

import pytest

from channel_support import OWNER, delivered, telegram_config, wait_for
from discord_fake import MESSAGES, FakeDiscord
from gateway_support import StartDaemon
from memvault.channels.discord import RATE_LIMIT_WAIT
from telegram_fake import FakeTelegram

DISCORD_OWNER = 410_000_000_000_000_001


def test_a_channel_waiting_out_a_rate_limit_holds_up_no_other(
    start_daemon: StartDaemon, tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeDiscord(users={DISCORD_OWNER: "ada"}, guilds={}) as discord:
        monkeypatch.setenv("DISCORD_BOT_TOKEN", discord.token)
        settings: dict[str, Any] = {
            "channels": {
                "telegram": telegram_config(tg),
                "discord": {
                    "enabled": True,
                    "owner": [str(DISCORD_OWNER)],
                    "api_base": discord.base_url,
                },
            }
        }
        start_daemon(settings=settings)
        discord.wait_listening()
        # discord.py waits out a short 429 inside its send (up to RATE_LIMIT_WAIT), holding
        # that send: long enough for Telegram's whole round trip on a slow machine.
        discord.fail("POST " + MESSAGES, 429, retry_after=RATE_LIMIT_WAIT - 10)
        discord.push_dm(DISCORD_OWNER, "/help")
        dm = discord.dm_channel(DISCORD_OWNER)
        wait_for(lambda: discord.failures_served, "Discord's 429")
        tg.push_message(OWNER, "/help")
        wait_for(lambda: delivered(tg, OWNER), "the Telegram answer")
        assert discord.delivered(dm) == [], "Telegram's answer waited for Discord's"
        wait_for(lambda: discord.delivered(dm), "the Discord answer after its wait")
