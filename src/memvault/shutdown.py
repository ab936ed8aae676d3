"""Ending a process whose threads may still be inside native code.

A daemon thread still loading or running the ONNX model when Python finalises
is unwound through C++ frames when it next asks for the interpreter, and the
process aborts ("terminate called without an active exception", status -6).
A request thread stuck in a read holds up the interpreter's exit for good.
So a server process, once its own shutdown is done (requests drained,
databases closed, announcements withdrawn), gives the threads left a short
grace and, if some are still busy, ends at once with status 0 instead of
finalising under them. Standard library only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time

log = logging.getLogger(__name__)

EXIT_GRACE = 3.0


def leave_cleanly(last_words: str, grace: float = EXIT_GRACE) -> None:
    """Return when every other thread has ended within ``grace`` seconds; otherwise log
    ``last_words`` and end the process now, status 0, without finalising the interpreter.

    Call it only when nothing of memvault's is left open: the databases closed,
    the files written.
    """
    busy = busy_threads(time.monotonic() + grace)
    if not busy:
        return
    log.warning("threads still busy after the shutdown; exiting without them", extra={"busy": busy})
    log.info(last_words)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def busy_threads(deadline: float) -> list[str]:
    """Names of the threads (other than this one) still running at ``deadline``.

    Daemon threads count too: one inside native code must not meet the
    interpreter's finalisation.
    """
    current = threading.current_thread()

    def others() -> list[threading.Thread]:
        # A "dummy" thread is a foreign one Python merely saw: it cannot be joined.
        return [
            t
            for t in threading.enumerate()
            if t is not current and not isinstance(t, threading._DummyThread)
        ]

    for thread in others():
        thread.join(max(deadline - time.monotonic(), 0.0))
    return [t.name for t in others() if t.is_alive()]
