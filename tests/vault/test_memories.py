from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from memvault.clock import Clock
from memvault.errors import ConfigError, InvalidInputError, NotFoundError
from memvault.runtime import Runtime
from memvault.vault.memories import CATEGORIES, Memories, derived_id
from memvault.vault.store import Vault
from support import TZ, MovableClock
from waiting import WAIT


def test_remember_writes_one_readable_bullet(runtime: Runtime) -> None:
    result = runtime.memories.remember(
        "Prefers dark mode in every app",
        category="preference",
        importance=0.8,
        tags=["ui"],
        source="cli",
    )
    assert result.created
    memory = result.memory
    assert memory.id.startswith("m-") and len(memory.id) == 10
    assert memory.path == "Memory/Preferences.md"
    text = (runtime.vault.root / memory.path).read_text()
    assert text.endswith(
        "- Prefers dark mode in every app #ui [importance:: 0.8] "
        f"[created:: 2026-11-22 09:30:00] [source:: cli] ^{memory.id}\n"
    )
    assert text.splitlines()[memory.line - 1].endswith(f"^{memory.id}")
    again = runtime.memories.get(memory.id)
    assert (again.text, again.category, again.importance, again.tags, again.source) == (
        "Prefers dark mode in every app",
        "preference",
        0.8,
        ["ui"],
        "cli",
    )
    assert again.created == datetime(2026, 11, 22, 9, 30, tzinfo=TZ)


def test_every_category_has_a_file(runtime: Runtime) -> None:
    for category, title in CATEGORIES.items():
        memory = runtime.memories.remember(f"A {category} memory", category=category).memory
        assert memory.path == f"Memory/{title}.md"
        assert runtime.memories.get(memory.id).category == category


def test_exact_duplicates_are_not_stored_twice(runtime: Runtime) -> None:
    first = runtime.memories.remember("The wifi password is on the fridge", category="fact")
    second = runtime.memories.remember(
        "  the WIFI password   is on the fridge ", category="context"
    )
    assert not second.created
    assert second.memory.id == first.memory.id
    assert len(runtime.memories.list()) == 1


def test_trailing_hashtags_become_tags_and_newlines_collapse(runtime: Runtime) -> None:
    memory = runtime.memories.remember(
        "Deploys go out on Fridays\nafter review #ops #release"
    ).memory
    assert memory.text == "Deploys go out on Fridays after review"
    assert memory.tags == ["ops", "release"]


def test_text_cannot_forge_metadata(runtime: Runtime) -> None:
    memory = runtime.memories.remember("Weird [importance:: 1] text ^m-deadbeef").memory
    read = runtime.memories.get(memory.id)
    assert read.importance == 0.5
    assert read.id == memory.id != "m-deadbeef"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": "   "}, "needs some text"),
        ({"text": "x", "category": "gossip"}, "Unknown memory category"),
        ({"text": "x", "importance": 1.5}, "between 0 and 1"),
        ({"text": "x", "tags": ["12"]}, "not a valid tag"),
        ({"text": "x" * 5000}, "at most"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(
    runtime: Runtime, kwargs: dict[str, object], message: str
) -> None:
    before = {p: p.read_bytes() for p in (runtime.vault.root / "Memory").iterdir()}
    with pytest.raises(InvalidInputError, match=message):
        runtime.memories.remember(**kwargs)  # type: ignore[arg-type]
    assert {p: p.read_bytes() for p in (runtime.vault.root / "Memory").iterdir()} == before


def test_forget_removes_only_that_line(runtime: Runtime) -> None:
    keep = runtime.memories.remember("Keep me").memory
    drop = runtime.memories.remember("Drop me").memory
    forgotten = runtime.memories.forget(drop.id)
    assert forgotten.text == "Drop me"
    text = (runtime.vault.root / "Memory/Facts.md").read_text()
    assert "Drop me" not in text and f"^{keep.id}" in text
    with pytest.raises(NotFoundError):
        runtime.memories.get(drop.id)
    with pytest.raises(NotFoundError):
        runtime.memories.forget(drop.id)


def test_hand_edits_in_obsidian_are_respected(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    a = runtime.memories.remember("Coffee, black", category="preference").memory
    b = runtime.memories.remember("Tea in the afternoon", category="preference").memory
    path = runtime.vault.root / "Memory/Preferences.md"
    text = path.read_text()
    # The owner rewrites one memory, deletes another and types a new one without an id.
    text = text.replace("Coffee, black", "Coffee with oat milk")
    text = "\n".join(line for line in text.splitlines() if b.id not in line) + "\n"
    text += "- Hates meetings before 10 #schedule\n"
    write("Memory/Preferences.md", text)
    assert runtime.memories.get(a.id).text == "Coffee with oat milk"
    with pytest.raises(NotFoundError):
        runtime.memories.get(b.id)
    typed = [m for m in runtime.memories.list(category="preference") if not m.explicit_id]
    assert len(typed) == 1
    assert typed[0].id == derived_id("Hates meetings before 10")
    assert typed[0].tags == ["schedule"]
    assert runtime.memories.get(typed[0].id).text == "Hates meetings before 10"
    runtime.memories.forget(typed[0].id)
    assert "Hates meetings" not in path.read_text()


def test_a_memory_moved_by_hand_to_another_file_is_found_there(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    moved = runtime.memories.remember("Walks the dog at seven", category="fact").memory
    assert runtime.memories.get(moved.id).path == "Memory/Facts.md"  # read, and cached
    facts = runtime.vault.root / "Memory/Facts.md"
    line = next(line for line in facts.read_text().splitlines() if moved.id in line)
    write("Memory/Facts.md", facts.read_text().replace(line + "\n", ""))
    write("Memory/Habits.md", f"- {line[2:].replace('seven', 'eight')}\n")
    found = runtime.memories.get(moved.id)
    assert (found.path, found.text) == ("Memory/Habits.md", "Walks the dog at eight")
    write("Memory/Habits.md", "")
    with pytest.raises(NotFoundError):
        runtime.memories.get(moved.id)


def test_checklists_code_and_frontmatter_are_not_memories(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    write(
        "Memory/Facts.md",
        "---\ncategory: fact\ntags:\n  - memory\n---\n# Facts\n\n- [ ] a task, not a memory\n"
        "```\n- code, not a memory\n```\n- real memory ^m-00000001\n",
    )
    assert [m.text for m in runtime.memories.list()] == ["real memory"]


def test_list_filters(runtime: Runtime, clock: MovableClock) -> None:
    runtime.memories.remember("old", category="fact", tags=["a"])
    clock.set(datetime(2026, 11, 23, 8, 0, tzinfo=TZ))
    runtime.memories.remember("new", category="decision", tags=["a", "b"])
    assert [m.text for m in runtime.memories.list()] == ["old", "new"]
    assert [m.text for m in runtime.memories.list(category="decision")] == ["new"]
    assert [m.text for m in runtime.memories.list(category="Decisions")] == ["new"]  # title works
    assert [m.text for m in runtime.memories.list(tag="#b")] == ["new"]


def test_archived_memories_are_hidden_unless_asked(runtime: Runtime) -> None:
    memory = runtime.memories.remember("stale fact").memory
    runtime.memories.update_fields(memory.id, archived="2026-11-22")
    assert runtime.memories.list() == []
    assert [m.text for m in runtime.memories.list(include_archived=True)] == ["stale fact"]
    assert runtime.memories.get(memory.id).archived
    assert "[archived:: 2026-11-22]" in (runtime.vault.root / memory.path).read_text()


def test_remember_many_stores_a_batch_with_line_numbers(runtime: Runtime) -> None:
    results = runtime.memories.remember_many(
        [
            ("one", "fact", None, (), "import", None),
            ("two", "fact", 0.9, ("x",), "import", datetime(2023, 5, 8, 13, 56)),
            ("one", "fact", None, (), "import", None),
        ]
    )
    assert [r.created for r in results] == [True, True, False]
    assert results[1].memory.created == datetime(2023, 5, 8, 13, 56, tzinfo=TZ)
    lines = (runtime.vault.root / "Memory/Facts.md").read_text().splitlines()
    assert [lines[r.memory.line - 1].split(" [")[0] for r in results[:2]] == ["- one", "- two #x"]


def test_default_category_and_importance_come_from_settings(vault: Vault) -> None:
    memories = Memories(vault, Clock(TZ), default_category="preference", default_importance=0.7)
    memory = memories.remember("likes defaults").memory
    assert (memory.category, memory.importance) == ("preference", 0.7)
    with pytest.raises(ConfigError):
        Memories(vault, Clock(TZ), default_category="nonsense")


def _remember_many(root: str, worker: int) -> None:
    memories = Memories(Vault(Path(root)), Clock(TZ))
    for i in range(40):
        memories.remember(f"worker {worker} fact {i}")
        memories.remember("a fact both workers know")


def test_two_processes_remembering_lose_nothing_and_do_not_duplicate(vault: Vault) -> None:
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_remember_many, args=(str(vault.root), w)) for w in (1, 2)]
    for proc in workers:
        proc.start()
    for proc in workers:
        proc.join(WAIT)
        assert proc.exitcode == 0
    texts = [m.text for m in Memories(vault, Clock(TZ)).all()]
    assert len(texts) == 81
    assert texts.count("a fact both workers know") == 1
    assert len({m.id for m in Memories(vault, Clock(TZ)).all()}) == 81


def test_newest_across_categories_is_last(runtime: Runtime, clock: MovableClock) -> None:
    runtime.memories.remember("older preference", category="preference")
    clock.set(datetime(2026, 11, 22, 9, 30, 1, tzinfo=TZ))
    runtime.memories.remember("newer fact", category="fact")
    assert [m.text for m in runtime.memories.list()][-1] == "newer fact"


def test_inline_tags_are_reported_when_stored(runtime: Runtime) -> None:
    memory = runtime.memories.remember("Likes #coffee in the morning").memory
    assert memory.tags == ["coffee"]
    assert runtime.memories.get(memory.id).tags == ["coffee"]


def test_a_screen_sees_every_new_memory_and_its_fields_are_stored(vault: Vault) -> None:
    memories = Memories(vault, Clock(TZ))
    seen: list[tuple[str, str | None]] = []

    def screen(text: str, source: str | None) -> tuple[str, dict[str, str]]:
        seen.append((text, source))
        if "shout" not in text:
            return text, {}
        return text.upper(), {"trust": "low", "trust_reason": "it shouts]] [x:: y"}

    memories.screen(screen)
    quiet = memories.remember("A quiet fact", source="cli").memory
    loud = memories.remember("please shout this", source="agent").memory

    assert seen == [("A quiet fact", "cli"), ("please shout this", "agent")]
    assert quiet.trust is None and quiet.fields == {}
    assert loud.text == "PLEASE SHOUT THIS" and loud.trust == "low"
    # A field's value cannot close the field or forge another one.
    assert loud.trust_reason == "it shouts)) [x: y"
    line = (vault.root / loud.path).read_text().splitlines()[loud.line - 1]
    assert "[trust:: low] [trust_reason:: it shouts)) [x: y]" in line
    again = memories.get(loud.id)
    assert (again.trust, again.to_dict()["trust"]) == ("low", "low")
