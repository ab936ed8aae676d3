"""One index shared by a watcher thread and threads writing through the runtime."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from memvault.index.watch import follow
from memvault.runtime import Runtime
from waiting import WAIT

pytestmark = pytest.mark.both_backends


def test_writers_and_a_watcher_share_one_index(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    runtime.index.sync()
    stop, ready = threading.Event(), threading.Event()
    watcher = threading.Thread(
        target=follow,
        args=(runtime.index,),
        kwargs={"stop": stop, "debounce_ms": 50, "ready": ready},
        daemon=True,
    )
    watcher.start()
    assert ready.wait(WAIT)
    errors: list[str] = []

    def writer(k: int) -> None:
        for i in range(40):
            try:
                runtime.notes.write(
                    f"Projects/w{k}-{i % 5}.md", f"# W\n\nword{i} from writer {k}\n"
                )
                runtime.memories.remember(
                    f"memory {k}-{i} about apiaries", category=("fact", "preference")[k % 2]
                )
            except Exception as exc:  # collected: the assertion below names them
                errors.append(f"{type(exc).__name__}: {exc}")

    with caplog.at_level(logging.ERROR):
        writers = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join(WAIT)
        stop.set()
        watcher.join(WAIT)
    assert not watcher.is_alive()
    assert errors == []
    # Not the channels' loggers: a hub another test on this worker left stopping logs there.
    logged = [r for r in caplog.records if not r.name.startswith("memvault.channels")]
    assert [r.getMessage() for r in logged if r.levelno >= logging.ERROR] == []
    conn = runtime.index.conn
    if runtime.index.dialect == "sqlite":  # PostgreSQL checks its own pages
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 160
    assert runtime.index.sync().touched == 0  # nothing was missed


def test_closing_waits_for_a_write_in_flight(runtime: Runtime) -> None:
    """A daemon shutting down closes the index while an agent run may still be writing:
    the close waits for the write (closing SQLite under a running statement crashed the
    process)."""
    index = runtime.index
    index.sync()
    inside, closing, finished = threading.Event(), threading.Event(), []

    def write() -> None:
        with index.lock:
            inside.set()
            assert closing.wait(WAIT)
            time.sleep(0.3)  # the close, called now, waits for the lock meanwhile
            finished.append(index.conn.execute("SELECT count(*) FROM notes").fetchone()[0])

    writer = threading.Thread(target=write)
    writer.start()
    assert inside.wait(WAIT)
    closing.set()
    index.close()  # returns only after the write
    writer.join(WAIT)
    assert finished and finished[0] >= 1
    assert index._conn is None
