"""What the job tests share: a fake model server, and a runtime whose Telegram channel
reaches the fake Bot API with the owner set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from channel_support import telegram_config
from llm_fakes import FakeOpenAI
from memvault.config import Settings
from memvault.runtime import Runtime
from support import HashEmbedder, MovableClock
from telegram_fake import FakeTelegram


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def telegram_runtime(tmp_path: Path, tg: FakeTelegram, clock: MovableClock) -> Iterator[Runtime]:
    settings = Settings(
        vault=tmp_path / "vault",
        timezone="Europe/Berlin",
        channels={"telegram": telegram_config(tg)},
    )
    opened = Runtime.open(settings, clock=clock, embedder=HashEmbedder(), create=True)
    yield opened
    opened.close()
