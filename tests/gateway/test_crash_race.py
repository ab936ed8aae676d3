"""The crash-and-race suite (issue 11): writers, forgets, a person typing, SIGKILL, restart.

A real ``memvault serve`` process takes concurrent HTTP writers that remember
facts and forget some of them, and one that keeps updating a task (each
update rewrites its note), while a separate process appends bullets by hand
to ``Memory/Facts.md`` and lines to that task's note, taking no lock of
memvault's. The daemon is SIGKILLed mid-stream and restarted, twice. Afterwards:

- every remember that was acknowledged, and not acknowledged as forgotten, is
  in the file (once) and in ``GET /v1/memories``; no acknowledged forget is;
- every line typed by hand is in its file, once, and every hand-typed bullet
  is a memory the daemon lists; every acknowledged task update is in the note;
- ``memvault index`` then agrees with the files: one indexed memory (and one
  chunk) per bullet, and keyword search finds a sample of the memories.

What was in flight when the daemon died may or may not have happened; it is
counted, not asserted on.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2 as httpx
import pytest

from cli_support import ok_json
from daemon_process import DaemonProcess, daemon_env
from memvault.clock import Clock
from memvault.vault.layout import init_vault
from memvault.vault.memories import Memories
from memvault.vault.store import Vault
from waiting import WAIT

pytestmark = pytest.mark.timeout(5 * WAIT)  # a hang guard: every wait has its own bound

WRITERS = 3
PHASE_SECONDS = 3.0
KILLS = 2


@dataclass
class Ledger:
    """What the daemon acknowledged, and what it could not have (killed mid-request)."""

    remembered: dict[str, str] = field(default_factory=dict)  # id -> text
    forgotten: set[str] = field(default_factory=set)
    forget_unknown: set[str] = field(default_factory=set)
    in_flight_writes: int = 0
    task_notes: list[str] = field(default_factory=list)  # lines a task update added
    refused: list[str] = field(default_factory=list)  # answers that were not 200
    guard: threading.Lock = field(default_factory=threading.Lock)


class Current:
    """The daemon now running; writers wait while there is none (killed, restarting)."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon: DaemonProcess | None = daemon
        self.changed = threading.Condition()

    def set(self, daemon: DaemonProcess | None) -> None:
        with self.changed:
            self.daemon = daemon
            self.changed.notify_all()

    def wait(self, stop: threading.Event) -> DaemonProcess | None:
        with self.changed:
            self.changed.wait_for(lambda: self.daemon is not None or stop.is_set(), timeout=WAIT)
            return self.daemon


def _typist(facts: Path, note: Path, stop: Path) -> subprocess.Popen[str]:
    """A person typing: a bullet into the facts, a line into a note, until told to stop."""
    script = textwrap.dedent(
        f"""
        import json, os, time
        counts = {{"facts": 0, "notes": 0}}
        while not os.path.exists({str(stop)!r}):
            with open({str(facts)!r}, "a") as handle:
                handle.write(f"- hand fact {{counts['facts']}} typed as zhf{{counts['facts']}}\\n")
            counts["facts"] += 1
            with open({str(note)!r}, "a") as handle:
                handle.write(f"- hand note {{counts['notes']}}\\n")
            counts["notes"] += 1
            time.sleep(0.004)
        print(json.dumps(counts))
        """
    )
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)


def _through_restarts(
    current: Current, stop: threading.Event, step: Callable[[httpx.Client, int], None]
) -> None:
    """Call ``step(api, i)`` for i = 1, 2, ... on whichever daemon runs, until ``stop``."""
    i = 0
    while not stop.is_set():
        daemon = current.wait(stop)
        if daemon is None:
            continue
        try:
            with daemon.client() as api:
                while not stop.is_set():
                    i += 1
                    step(api, i)
        except httpx.TransportError:
            time.sleep(0.05)  # killed: wait for the next daemon


def _writer(number: int, current: Current, ledger: Ledger, stop: threading.Event) -> None:
    rng = random.Random(number)
    _through_restarts(current, stop, lambda api, i: _write_once(api, number, i, rng, ledger))


def _task_writer(task: str, current: Current, ledger: Ledger, stop: threading.Event) -> None:
    """Updates a task (memvault rewrites its note) while the person types into that note."""

    def update(api: httpx.Client, i: int) -> None:
        line = f"task update {i} noted as ztu{i}"
        priority = ("low", "high")[i % 2]
        response = api.patch(f"/v1/tasks/{task}", json={"priority": priority, "note": line})
        with ledger.guard:
            if response.status_code == 200:
                ledger.task_notes.append(line)
            else:
                ledger.refused.append(f"PATCH {response.status_code} {response.text}")
        time.sleep(0.02)

    _through_restarts(current, stop, update)


def _write_once(api: httpx.Client, number: int, i: int, rng: random.Random, ledger: Ledger) -> None:
    text = f"Crash fact {number} {i} marked zw{number}x{i}"
    with ledger.guard:
        ledger.in_flight_writes += 1
    response = api.post("/v1/memories", json={"text": text})
    with ledger.guard:
        ledger.in_flight_writes -= 1
        if response.status_code != 200:
            ledger.refused.append(f"POST {response.status_code} {response.text}")
            return
        ledger.remembered[response.json()["result"]["id"]] = text
        if i % 3:
            return
        candidates = sorted(set(ledger.remembered) - ledger.forgotten - ledger.forget_unknown)
        victim = rng.choice(candidates)
        ledger.forget_unknown.add(victim)  # until the answer says otherwise
    response = api.delete(f"/v1/memories/{victim}")
    with ledger.guard:
        if response.status_code == 200:
            ledger.forget_unknown.discard(victim)
            ledger.forgotten.add(victim)
        else:
            ledger.refused.append(f"DELETE {response.status_code} {response.text}")


@pytest.fixture
def start() -> Iterator[Callable[[Path], DaemonProcess]]:
    """Start daemons; any still running at the end (a failed assertion) is killed."""
    started: list[DaemonProcess] = []

    def starting(root: Path) -> DaemonProcess:
        started.append(DaemonProcess(root))
        return started[-1]

    yield starting
    for daemon in started:
        if daemon.process.poll() is None:
            daemon.kill()


def test_nothing_acknowledged_or_typed_by_hand_is_lost(
    tmp_path: Path, start: Callable[[Path], DaemonProcess]
) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    ledger, stop = Ledger(), threading.Event()
    current = Current(start(root))
    assert current.daemon is not None
    with current.daemon.client() as api:
        task = api.post("/v1/tasks", json={"title": "Survive the crash"}).json()["result"]
    facts, note = root / "Memory/Facts.md", root / task["path"]
    writers = [
        threading.Thread(target=_writer, args=(n, current, ledger, stop), daemon=True)
        for n in range(WRITERS)
    ]
    writers.append(
        threading.Thread(
            target=_task_writer, args=(task["title"], current, ledger, stop), daemon=True
        )
    )
    stop_typing = tmp_path / "stop-typing"
    typist = _typist(facts, note, stop_typing)
    for thread in writers:
        thread.start()
    try:
        for _ in range(KILLS):
            time.sleep(PHASE_SECONDS)
            running = current.daemon
            assert running is not None
            running.kill()
            current.set(None)
            current.set(start(root))
        time.sleep(PHASE_SECONDS)
    finally:
        stop.set()
        current.set(current.daemon)  # wake writers waiting for a daemon
        for thread in writers:
            thread.join(timeout=WAIT)
        stop_typing.touch()
        out, _ = typist.communicate(timeout=WAIT)
    typed = json.loads(out)
    daemon = current.daemon
    assert daemon is not None
    assert not any(thread.is_alive() for thread in writers)
    assert ledger.refused == []

    kept = set(ledger.remembered) - ledger.forgotten - ledger.forget_unknown
    with daemon.client() as api:
        listed = {m["id"]: m["text"] for m in api.get("/v1/memories").json()["result"]}
    text = facts.read_text()
    missing = [i for i in kept if text.count(f"^{i}") != 1 or listed.get(i) != ledger.remembered[i]]
    assert missing == [], "acknowledged memories lost or doubled"
    assert [i for i in ledger.forgotten if f"^{i}" in text or i in listed] == []
    lost = [n for n in range(typed["facts"]) if text.count(f"- hand fact {n} typed ") != 1]
    assert lost == [], "hand-typed bullets lost or doubled"
    noted = note.read_text()
    assert [n for n in range(typed["notes"]) if noted.count(f"- hand note {n}\n") != 1] == []
    assert [line for line in ledger.task_notes if noted.count(line) != 1] == []
    assert sum(t.startswith("hand fact ") for t in listed.values()) == typed["facts"]
    assert daemon.stop()[0] == 0

    # The index the daemon left agrees with the files once `memvault index` has run.
    indexed = subprocess.run(
        [sys.executable, "-m", "memvault", "--vault", str(root), "index"],
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert indexed.returncode == 0, indexed.stderr
    on_disk = Memories(Vault(root), Clock()).all()
    with sqlite3.connect(root / ".memvault/index.db") as db:
        rows = db.execute("SELECT count(*), count(DISTINCT id) FROM memories").fetchone()
        chunks = db.execute(
            "SELECT count(*) FROM chunks c JOIN notes n ON n.id = c.note_id"
            " WHERE n.path = 'Memory/Facts.md'"
        ).fetchone()[0]
    assert rows == (len(on_disk), len({m.id for m in on_disk}))
    assert chunks == sum(m.path == "Memory/Facts.md" for m in on_disk)
    sample = random.Random(5).sample(sorted(kept), 5) + sorted(ledger.forgotten)[:3]
    for memory_id in sample:
        word = ledger.remembered[memory_id].rsplit(" ", 1)[1]
        # Quoted: a finished word (unquoted, the last word also matches as a prefix, and
        # zw1x1 would find zw1x10).
        found = ok_json(root, "--direct", "search", f'"{word}"', "--keyword")
        assert [h["id"] for h in found] == ([] if memory_id in ledger.forgotten else [memory_id])
    print(
        f"\ncrash-and-race: {len(ledger.remembered)} writes acknowledged, "
        f"{len(ledger.forgotten)} forgets acknowledged, {len(ledger.forget_unknown)} forgets "
        f"in flight at a kill ({ledger.in_flight_writes} writes), "
        f"{len(ledger.task_notes)} task updates, "
        f"{typed['facts']} + {typed['notes']} lines typed by hand, "
        f"{KILLS} SIGKILLs; {len(on_disk)} memories on disk, all indexed"
    )
