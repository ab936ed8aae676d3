"""Consolidation's rule without a model (issue 28): it looks for near-identical memories
only, in the files the store reads under its lock. No index search runs for it (a write
with four writers at 10k memories spent most of its time there), and two writers of one
fact store it once."""

from __future__ import annotations

import random
import sys
import threading
from typing import Any

from gateway_support import StartDaemon, ok
from memvault.memory.near_identical import NEAR_IDENTICAL, jaccard, tokens
from memvault.memory.nomination import rule_decision
from memvault.runtime import Runtime
from memvault.vault.memories import Memory, normalize_text
from waiting import WAIT, wait_for

FACTS = "Memory/Facts.md"


def test_the_rule_asks_the_index_nothing(runtime: Runtime) -> None:
    runtime.memories.remember("The spare house key is under the blue flower pot")
    runtime.memories.remember("The owner waters the flower pot on Sundays")
    runtime.index.sync()
    statements: list[str] = []
    runtime.index.conn.set_trace_callback(statements.append)
    try:
        near = runtime.consolidation.remember("the spare house key is under the blue flower pot!")
        added = runtime.consolidation.remember("The blue flower pot came from Lisbon")
    finally:
        runtime.index.conn.set_trace_callback(None)
    assert (near.action, near.created) == ("noop", False)
    assert (added.action, added.created) == ("add", True)
    # Storing writes the index; deciding asks nothing of its keywords or vectors.
    assert [s for s in statements if " MATCH " in s.upper()] == []
    assert any("INSERT INTO chunks_fts" in s for s in statements)


def _waiting_for_the_store(count: int) -> bool:
    """Whether ``count`` threads wait in ``Memories.remember_many`` for the store's lock."""
    waiting = 0
    for frame in sys._current_frames().values():
        names: list[str] = []
        while frame is not None:
            names.append(frame.f_code.co_name)
            frame = frame.f_back  # type: ignore[assignment]
        if names and "remember_many" in names and "lock" in names[: names.index("remember_many")]:
            waiting += 1
    return waiting >= count


def test_two_writers_of_one_fact_store_it_once(start_daemon: StartDaemon) -> None:
    live = start_daemon(settings={"lock_timeout": WAIT})
    vault = live.daemon.runtime.vault
    texts = ["Prefers dark mode in every app", "prefers dark mode, in every app!"]
    answers: dict[int, Any] = {}

    def post(n: int) -> None:
        with live.client() as client:
            answers[n] = client.post("/v1/memories", json={"text": texts[n]})

    writers = [threading.Thread(target=post, args=(n,)) for n in range(2)]
    # Both requests arrive while another holds the store (a CLI run, a channel, a job).
    with vault.lock("memory-store"):
        for writer in writers:
            writer.start()
        wait_for(lambda: _waiting_for_the_store(2), "both writers to wait for the store")
    for writer in writers:
        writer.join(WAIT)
    results = [ok(answers[n]) for n in range(2)]
    assert sorted(r["created_new"] for r in results) == [False, True]
    stored = next(r for r in results if r["created_new"])
    held = next(r for r in results if not r["created_new"])
    assert held["id"] == stored["id"] and held["consolidation"]["action"] == "noop"
    bullets = [
        line for line in (vault.root / FACTS).read_text().splitlines() if "dark mode" in line
    ]
    assert len(bullets) == 1
    with live.client() as client:
        assert len(ok(client.get("/v1/memories"))) == 1


def _qualifies(new: Memory, other: Memory) -> bool:
    if normalize_text(other.text) == normalize_text(new.text):
        return True
    overlap = jaccard(tokens(new.text), tokens(other.text))
    return overlap >= NEAR_IDENTICAL and other.category == new.category


def test_the_lookup_finds_every_memory_the_rule_would_act_on(runtime: Runtime) -> None:
    # Few words, so that many memories are near one another; two categories.
    rng = random.Random(28)
    words = [f"w{n}" for n in range(40)]
    base = [rng.sample(words, rng.randint(3, 24)) for _ in range(60)]

    def variant(sentence: list[str]) -> str:
        changed = list(sentence)
        for _ in range(rng.randint(0, 2)):
            kind = rng.random()
            if kind < 0.4 and len(changed) > 1:
                changed.pop(rng.randrange(len(changed)))
            elif kind < 0.8:
                changed.insert(rng.randrange(len(changed) + 1), rng.choice(words))
            else:
                rng.shuffle(changed)
        text = " ".join(changed)
        return text.upper() if rng.random() < 0.2 else text

    items = [
        (variant(s), rng.choice(("fact", "preference")), None, (), None, None)
        for s in base
        for _ in range(4)
    ]
    runtime.memories.remember_many(items)
    files = runtime.memories.readable()
    everything = [m for f in files for m in f.memories]
    probes = [
        runtime.memories.prepare(variant(s), rng.choice(("fact", "preference"))) for s in base
    ]
    noops = 0
    for new in probes:
        found = runtime.consolidation.near.find(new, files)
        expected = [m for m in everything if _qualifies(new, m)]
        decision = rule_decision(new, found)
        assert decision.action == ("noop" if expected else "add"), new.text
        if expected:
            noops += 1
            assert decision.target in {m.id for m in expected}
    assert noops >= 10  # the vault gave the rule something to find


def test_an_archived_near_copy_is_no_holder(runtime: Runtime) -> None:
    kept = runtime.memories.remember("The boiler was serviced in March").memory
    runtime.memories.update_fields(kept.id, archived="2026-01-01")
    again = runtime.consolidation.remember("the boiler was serviced in March!")
    assert again.action == "add" and again.created and again.memory.id != kept.id
