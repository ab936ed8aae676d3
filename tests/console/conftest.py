"""The console's browser: Debian's chromium, driven by Playwright (pytest-playwright's
fixtures), never a browser Playwright downloads. A missing browser fails the tests:
``make test`` installs it (the Makefile's Debian packages)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from waiting import WAIT

CHROMIUM = Path(os.environ.get("MEMVAULT_TEST_CHROMIUM", "/usr/bin/chromium"))
# A page's expectation waits as long as any wait of the suite (waiting.py), not 5 s.
expect.set_options(timeout=WAIT * 1000)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """Launch Debian's chromium (``MEMVAULT_TEST_CHROMIUM`` names another)."""
    if not CHROMIUM.is_file():
        pytest.fail(
            f"No browser at {CHROMIUM}: the console's tests need Debian's chromium "
            "(`make test` installs it; or apt-get install chromium)."
        )
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM)}
