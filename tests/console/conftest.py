"""The console's browser: Debian's chromium, driven by Playwright, never a browser
Playwright downloads. A missing browser fails the tests: ``make test`` installs it (the
Makefile's Debian packages).

Playwright's synchronous API runs an event loop of its own for as long as it is started,
so it is started for a module and stopped after it: a worker that ran these tests then
runs the next module's ``asyncio.run`` (MCP clients, the CLI's channel sends) with no
loop left behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from llm_fakes import FakeOpenAI
from telegram_fake import FakeTelegram
from waiting import WAIT

CHROMIUM = Path(os.environ.get("MEMVAULT_TEST_CHROMIUM", "/usr/bin/chromium"))
# A page's expectation waits as long as any wait of the suite (waiting.py), not 5 s.
expect.set_options(timeout=WAIT * 1000)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's chromium (``MEMVAULT_TEST_CHROMIUM`` names another), for one module."""
    if not CHROMIUM.is_file():
        pytest.fail(
            f"No browser at {CHROMIUM}: the console's tests need Debian's chromium "
            "(`make test` installs it; or apt-get install chromium)."
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeOpenAI]:
    """The fake model server, for one module."""
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def tg() -> Iterator[FakeTelegram]:
    """The fake Bot API, for one module; its token in $TELEGRAM_BOT_TOKEN, where the
    channel reads it."""
    with FakeTelegram() as fake, pytest.MonkeyPatch.context() as patch:
        patch.setenv("TELEGRAM_BOT_TOKEN", fake.token)
        yield fake
