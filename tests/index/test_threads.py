"""One index shared by a watcher thread and threads writing through the runtime."""

from __future__ import annotations

import logging
import threading

import pytest

from memvault.index.watch import follow
from memvault.runtime import Runtime

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
    assert ready.wait(10)
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
            thread.join(120)
        stop.set()
        watcher.join(10)
    assert not watcher.is_alive()
    assert errors == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    conn = runtime.index.conn
    if runtime.index.dialect == "sqlite":  # PostgreSQL checks its own pages
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 160
    assert runtime.index.sync().touched == 0  # nothing was missed
