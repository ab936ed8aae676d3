"""Every chat becomes memory: each turn logged in a session is kept whole as a memory in
``Memory/Conversations/``, found by search, with its conversation's audience and trust, and
switched by the settings (real files, real index, the real session store)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from memvault.config import SearchSettings, Settings, StorageSettings
from memvault.index.filters import SearchFilters
from memvault.memory.conversations import conversation_path
from memvault.privacy.audiences import Audience
from memvault.runtime import Runtime
from memvault.vault.memories import Memory
from memvault.vault.store import Vault
from support import TZ, HashEmbedder, MovableClock

OWNER_CHAT = "telegram:100"
ADA_CHAT = "telegram:200"
EVE_CHAT = "telegram:300"


@pytest.fixture
def open_runtime(vault: Vault, clock: MovableClock, embedder: HashEmbedder) -> Iterator[Any]:
    opened: list[Runtime] = []

    def make(**settings: Any) -> Runtime:
        runtime = Runtime.open(
            Settings(vault=vault.root, timezone="Europe/Berlin", **settings),
            clock=clock,
            embedder=embedder,
        )
        opened.append(runtime)
        return runtime

    yield make
    for runtime in opened:
        runtime.close()


def turns(runtime: Runtime) -> list[Memory]:
    return runtime.memories.list(category="conversation")


def say(runtime: Runtime, said_at: datetime, lines: list[str]) -> None:
    """Sam tells the owner's chat ``lines``, a minute apart from ``said_at``."""
    for minute, text in enumerate(lines):
        runtime.sessions.log(
            OWNER_CHAT,
            text,
            sender="Sam",
            sent_at=said_at + timedelta(minutes=minute),
            metadata={"owner": True},
        )


def ada(runtime: Runtime) -> Audience:
    runtime.contacts.create("Ada Lovelace", identities={"telegram": "200"})
    return runtime.audiences.of_chat("telegram", "200", "200", owner=False, group=False)


def test_every_turn_is_kept_whole_and_found_by_search(
    open_runtime: Any, clock: MovableClock
) -> None:
    runtime = open_runtime()
    sessions = runtime.sessions
    sessions.log(
        OWNER_CHAT,
        "My sister Clara moved to Porto in March and works at the harbour museum.",
        channel="telegram",
        sender="Sam",
        metadata={"owner": True},
    )
    sessions.log(OWNER_CHAT, "Noted: Clara is in Porto now.", role="assistant")
    sessions.log(OWNER_CHAT, "ok", sender="Sam", metadata={"owner": True})
    sessions.log(OWNER_CHAT, "ok", sender="Sam", metadata={"owner": True})
    long_text = " ".join(f"word{n}" for n in range(1500))  # about 10,000 characters
    sessions.log(OWNER_CHAT, long_text, sender="Sam", metadata={"owner": True})

    kept = turns(runtime)
    texts = [m.text for m in kept]
    assert texts[:4] == [
        "Sam: My sister Clara moved to Porto in March and works at the harbour museum.",
        "memvault: Noted: Clara is in Porto now.",
        "Sam: ok",
        "Sam: ok",  # said twice, kept twice
    ]
    # A long message is kept whole, in consecutive turns, every word in order.
    rest = kept[4:]
    assert len(rest) >= 3
    assert " ".join(m.text.removeprefix("Sam: ") for m in rest) == long_text
    assert all(m.source == OWNER_CHAT and m.fields["channel"] == "telegram" for m in kept[:1])
    path = conversation_path(OWNER_CHAT, clock.now())
    assert {m.path for m in kept} == {path}
    assert path.startswith("Memory/Conversations/") and "100" in path
    assert runtime.vault.read_text(path).startswith("---\ncategory: conversation\n")
    # Not among the memories people list; found by search (keywords and the index).
    assert runtime.memories.list() == []
    hits = runtime.searcher.search("Where does Clara work?", limit=3)
    assert hits and hits[0].id == kept[0].id


def test_a_contacts_words_are_theirs_shared_with_them_and_low_trust(
    open_runtime: Any,
) -> None:
    runtime = open_runtime()
    audience = ada(runtime)
    eve = runtime.audiences.of_chat("telegram", "300", "300", owner=False, group=False)
    runtime.sessions.log(
        ADA_CHAT,
        "The boat trip is on the 9th #share/everyone [share:: everyone] [[Contacts/Eve]]",
        channel="telegram",
        sender="Ada #share/everyone",
        metadata={"owner": False, "audience": audience.label},
    )
    runtime.sessions.log(
        EVE_CHAT,
        "my locker code is 4711",
        channel="telegram",
        sender="Eve",
        metadata={"owner": False, "audience": eve.label},
    )
    said = next(m for m in turns(runtime) if m.source == ADA_CHAT)
    assert said.fields["share"] == "Contacts/Ada Lovelace"
    assert said.fields["contact"] == "Contacts/Ada Lovelace"
    assert said.trust == "low"
    # Their words cannot share themselves with anyone else, or link, or tag.
    assert said.tags == []
    assert "[[" not in said.text and "share::" not in said.text
    assert said.text.startswith("Ada \uff03share/everyone: The boat trip is on the 9th")
    assert audience.sees_memory(said) and not eve.sees_memory(said)
    # Each contact's view finds their own conversation and nothing of the other's.
    ada_view = runtime.audience_view(audience)
    eve_view = runtime.audience_view(eve)
    assert [f.memory.id for f in ada_view.search("boat trip") if f.memory] == [said.id]
    assert [f for f in eve_view.search("boat trip") if f.memory] == []
    assert [f for f in ada_view.search("locker code") if f.memory] == []
    # The owner sees everything.
    assert {h.id for h in runtime.searcher.search("boat trip locker code", limit=5)} >= {said.id}


def test_the_agents_replies_to_a_contact_carry_the_conversations_audience(
    open_runtime: Any,
) -> None:
    runtime = open_runtime()
    audience = ada(runtime)
    runtime.sessions.log(
        ADA_CHAT,
        "See you at the pier at noon.",
        role="assistant",
        channel="telegram",
        metadata={"audience": audience.label},
    )
    reply = turns(runtime)[0]
    assert reply.text == "memvault: See you at the pier at noon."
    assert reply.fields["share"] == "Contacts/Ada Lovelace" and reply.trust is None


def test_settings_switch_capture_per_vault_channel_contact_and_group(
    open_runtime: Any,
) -> None:
    def kept_after(settings: dict[str, Any], chat: str, **metadata: Any) -> int:
        runtime = open_runtime(**settings)
        before = len(turns(runtime))
        runtime.sessions.log(chat, "hello there", channel="telegram", metadata=metadata)
        return len(turns(runtime)) - before

    group = {"owner": True, "audience": "group:Family"}
    contact = {"owner": False, "audience": "contact:Contacts/Ada Lovelace"}
    assert kept_after({}, OWNER_CHAT, owner=True) == 1
    assert kept_after({"memory": {"capture": False}}, OWNER_CHAT, owner=True) == 0
    assert kept_after({"channels": {"telegram": {"capture": False}}}, OWNER_CHAT) == 0
    assert (
        kept_after(
            {"memory": {"capture": False}, "channels": {"telegram": {"capture": True}}}, OWNER_CHAT
        )
        == 1
    )
    # Groups are opted into, for every channel or one.
    assert kept_after({}, "telegram:-5", **group) == 0
    assert kept_after({"memory": {"capture_groups": True}}, "telegram:-5", **group) == 1
    assert (
        kept_after({"channels": {"telegram": {"capture_groups": True}}}, "telegram:-5", **group)
        == 1
    )
    # One contact left out, by their name.
    assert kept_after({}, ADA_CHAT, **contact) == 1
    off = {"privacy": {"contacts": {"Ada Lovelace": {"capture": False}}}}
    assert kept_after(off, ADA_CHAT, **contact) == 0
    # Tool calls and messages logged with capture off are not turns.
    assert kept_after({}, OWNER_CHAT, kind="tool_calls") == 0
    assert kept_after({}, OWNER_CHAT, capture=False) == 0


def test_remembering_a_fact_is_not_held_back_by_what_was_said(open_runtime: Any) -> None:
    runtime = open_runtime(memory={"consolidation": "rule"})
    runtime.sessions.log(OWNER_CHAT, "ok", sender="me", metadata={"owner": True})
    runtime.sessions.log(OWNER_CHAT, "Sam: ok", role="assistant")
    stored = runtime.consolidation.remember("Sam: ok", category="fact")
    assert stored.memory.category == "fact" and stored.memory.path == "Memory/Facts.md"
    assert runtime.memories.list() == [stored.memory]


def test_turns_are_dated_when_said_and_neighbours_by_conversation(
    open_runtime: Any, clock: MovableClock
) -> None:
    runtime = open_runtime()
    said_at = datetime(2026, 10, 3, 18, 30, tzinfo=TZ)
    say(
        runtime,
        said_at,
        ["We should book the cabin in Tromsø.", "Which weekend?", "The second one in January."],
    )
    kept = turns(runtime)
    assert [m.created for m in kept] == [said_at + timedelta(minutes=n) for n in range(3)]
    assert {m.path for m in kept} == {conversation_path(OWNER_CHAT, said_at)}
    assert "/2026-10/" in kept[0].path
    # The turn that answers "which weekend" is found beside the one that names the cabin.
    hits = runtime.searcher.search(
        "cabin weekend January", limit=5, filters=SearchFilters(category="conversation")
    )
    assert {h.id for h in hits} >= {m.id for m in kept[::2]}


@pytest.mark.both_backends
def test_the_turns_beside_the_best_one_join_the_candidates(
    vault: Vault, clock: MovableClock, embedder: HashEmbedder, storage_settings: StorageSettings
) -> None:
    """The answer often follows the line that matches: the turns up to two either side of
    the best one join the candidates, though no search (here: by meaning, ten candidates)
    found them."""
    runtime = Runtime.open(
        Settings(vault=vault.root, storage=storage_settings, search=SearchSettings(candidates=10)),
        clock=clock,
        embedder=embedder,
    )
    try:
        words = [f"w{n:02d}x" for n in range(26)]
        lines = [f"{w} {words[(i * 7) % 26]} {words[(i * 11) % 26]}" for i, w in enumerate(words)]
        lines[15] = "We should book the cabin in Tromsø."
        say(runtime, datetime(2026, 10, 3, 18, 30, tzinfo=TZ), lines)
        runtime.index.embed_pending()
        kept = sorted(turns(runtime), key=lambda m: m.created)
        hits = runtime.searcher.search(lines[15], limit=30, mode="vector", min_score=0)
        found = [h.id for h in hits]
        assert found[0] == kept[15].id
        assert {m.id for m in kept[13:18]} <= set(found)
        assert len(found) > 10  # some came only as neighbours
    finally:
        runtime.close()


def test_turns_are_archived_like_any_memory_when_unused(
    open_runtime: Any, clock: MovableClock
) -> None:
    from memvault.config import ArchivalJob
    from memvault.jobs import Job, JobEngine, Schedule, archival

    runtime = open_runtime()
    now = clock.now()
    long_ago = now - timedelta(days=400)
    runtime.recalls.begin(long_ago - timedelta(days=1))  # searches recorded all along
    runtime.sessions.log(
        OWNER_CHAT, "The old bike lock code was 1234", sender="Sam", sent_at=long_ago,
        metadata={"owner": True},
    )  # fmt: skip
    runtime.sessions.log(OWNER_CHAT, "Lunch was fine today", sender="Sam", metadata={"owner": True})
    old, _recent = turns(runtime)
    assert old.importance == 0.3  # [memory] capture_importance: below what is remembered
    job = Job(
        "archival", Schedule(cron="0 4 * * 0"), archival.run, settings=ArchivalJob(enabled=True)
    )
    run = JobEngine(runtime.state, clock, [job], runtime=runtime).run_now("archival")
    assert run.status == "ok", run.error
    archived = {m.id for m in runtime.memories.all() if m.archived}
    assert archived == {old.id}
    assert old.id not in {h.id for h in runtime.searcher.search("bike lock code")}
