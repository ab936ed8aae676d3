"""How long a test waits for something to happen: for the thing, never for a clock.

A test polls for what it waits for (a daemon answering, a message delivered, a file
written) and goes on the moment it holds. The bound only ends a wait that would never
succeed, so it is generous: a cold 2-core machine with another job running beside the
suite (a first Node start of the real OpenClaw took 17 s here) must pass.
``MEMVAULT_TEST_WAIT`` raises (or, to find hangs quickly, lowers) it for a whole run.

A test that checks that something does *not* happen within a moment (no second
delivery, no event) keeps its own short window: that window is what it asserts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Seconds: the bound of every wait for readiness or an event.
WAIT = float(os.environ.get("MEMVAULT_TEST_WAIT", "120"))
POLL = 0.02


def wait_for(check: Callable[[], T], what: str, timeout: float = WAIT) -> T:
    """``check()``'s first truthy value, polled until it comes; an AssertionError naming
    ``what`` if ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(POLL)
