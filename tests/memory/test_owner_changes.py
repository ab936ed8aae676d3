"""The owner's own changes to memories (what the console's edit and bulk actions run):
an edit bound to the note's hash, a move to another category, tags added; each in the
memory's history, every other byte of its files kept."""

from __future__ import annotations

import pytest

from memvault.errors import ConflictError, InvalidInputError
from memvault.runtime import Runtime
from memvault.vault.notes import content_hash


def test_an_edit_with_the_notes_hash_is_written_and_logged(runtime: Runtime) -> None:
    kept = runtime.memories.remember("Ada likes black tea", category="preference").memory
    memory = runtime.memories.remember("Ada's train leaves at nine", category="preference").memory
    note = runtime.vault.root / memory.path
    before = note.read_text(encoding="utf-8")
    edited = runtime.consolidation.edit(
        memory.id, "Ada's train leaves at ten", expected_hash=content_hash(before)
    )
    assert (edited.id, edited.text, edited.category) == (
        memory.id,
        "Ada's train leaves at ten",
        "preference",
    )
    after = note.read_text(encoding="utf-8")
    assert after.replace(after.splitlines()[memory.line - 1], "") == before.replace(
        before.splitlines()[memory.line - 1], ""
    )  # only the memory's own line changed
    assert runtime.memories.get(kept.id).text == "Ada likes black tea"
    (change,) = runtime.consolidation.history(memory.id)
    assert (change.action, change.decided_by, change.old_text, change.new_text) == (
        "update",
        "owner",
        "Ada's train leaves at nine",
        "Ada's train leaves at ten",
    )


def test_an_edit_over_a_note_changed_since_it_was_read_writes_nothing(runtime: Runtime) -> None:
    memory = runtime.memories.remember("The bins go out on Tuesday").memory
    note = runtime.vault.root / memory.path
    read = note.read_text(encoding="utf-8")
    # Meanwhile, in Obsidian: a line of its own added under the memory.
    obsidian = read + "- Typed by hand in Obsidian\n"
    note.write_text(obsidian, encoding="utf-8")
    with pytest.raises(ConflictError) as refused:
        runtime.consolidation.edit(
            memory.id, "The bins go out on Wednesday", expected_hash=content_hash(read)
        )
    assert "changed since it was read; nothing was written" in refused.value.message
    assert refused.value.details["current_hash"] == content_hash(obsidian)
    assert note.read_text(encoding="utf-8") == obsidian
    assert runtime.consolidation.history(memory.id) == []
    with pytest.raises(InvalidInputError):
        runtime.consolidation.edit(memory.id, "Wednesday", expected_hash="not a hash")


def test_a_move_to_another_category_keeps_the_id_and_the_other_lines(runtime: Runtime) -> None:
    moved = runtime.memories.remember("Ada chose the blue kettle", tags=["home"]).memory
    stays = runtime.memories.remember("The kettle was bought in May").memory
    facts = runtime.vault.root / "Memory/Facts.md"
    runtime.consolidation.recategorize(moved.id, "decision")
    now = runtime.memories.get(moved.id)
    assert (now.category, now.path, now.text, now.tags, now.created) == (
        "decision",
        "Memory/Decisions.md",
        moved.text,
        ["home"],
        moved.created,
    )
    assert moved.id not in facts.read_text(encoding="utf-8")
    assert runtime.memories.get(stays.id).path == "Memory/Facts.md"
    (change,) = runtime.consolidation.history(moved.id)
    assert (change.action, change.reason, change.decided_by) == (
        "recategorize",
        "fact -> decision",
        "owner",
    )
    assert runtime.consolidation.recategorize(moved.id, "decisions").category == "decision"
    assert len(runtime.consolidation.history(moved.id)) == 1  # already there: no change
    with pytest.raises(InvalidInputError, match="Unknown memory category"):
        runtime.consolidation.recategorize(moved.id, "nonsense")


def test_tags_are_added_once(runtime: Runtime) -> None:
    memory = runtime.memories.remember("The piano is tuned every spring", tags=["home"]).memory
    tagged = runtime.consolidation.tag(memory.id, ["#music", "home"])
    assert tagged.tags == ["home", "music"]
    assert runtime.memories.get(memory.id).tags == ["home", "music"]
    assert [c.reason for c in runtime.consolidation.history(memory.id)] == ["added #music"]
    with pytest.raises(InvalidInputError):
        runtime.consolidation.tag(memory.id, ["   "])
