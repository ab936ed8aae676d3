"""Memories and rewrites racing a person who types into the same files (issue 11: 1, 4, 5).

The person is a real separate process appending lines with plain ``open(..., "a")``:
it takes no memvault lock, as an editor, ``echo >>`` or a sync tool would not.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from memvault.clock import Clock
from memvault.errors import ConflictError, InvalidInputError
from memvault.vault.memories import Memories, category_path
from memvault.vault.store import Vault
from waiting import WAIT

# A hang guard only: well above the one wait of WAIT a test may spend on the typist.
pytestmark = pytest.mark.timeout(3 * WAIT)


def _typist(path: Path, lines: int, prefix: str, pause: float = 0.001) -> subprocess.Popen[bytes]:
    """A process appending ``lines`` lines to ``path`` by hand, one open and close each."""
    script = textwrap.dedent(
        f"""
        import time
        for i in range({lines}):
            with open({str(path)!r}, "a") as handle:
                handle.write(f"- {prefix} {{i}}\\n")
            time.sleep({pause})
        """
    )
    return subprocess.Popen([sys.executable, "-c", script])


def _missing(text: str, prefix: str, lines: int) -> list[int]:
    return [i for i in range(lines) if text.count(f"- {prefix} {i}\n") != 1]


def _real_clock() -> Clock:
    """The wall clock, microseconds and all, as the daemon has it."""
    return Clock(ZoneInfo("Europe/Berlin"))


# -- item 1: what is cached is what was written ------------------------------------------


def test_a_memory_remembered_with_microseconds_can_be_forgotten(vault: Vault) -> None:
    memories = Memories(vault, _real_clock())
    first = memories.remember("The boat is called Halcyon").memory
    assert first.created is not None and first.created.microsecond == 0
    assert memories.forget(first.id).id == first.id
    second = memories.remember(
        "The mooring is in Kiel", created=datetime(2026, 11, 22, 9, 30, 5, 123456)
    ).memory
    assert memories.forget(second.id).text == "The mooring is in Kiel"
    assert memories.list() == []


@pytest.mark.parametrize(
    ("text", "kwargs"),
    [
        ("Uses #python3 daily", {"tags": ["python"]}),  # a tag inside a longer inline tag
        ("Plain fact", {"importance": 0.333333}),
        ("Plain fact", {"importance": 0.125}),
        ("Plain fact", {"source": "  chat:  [a]::: b\nc  "}),
        ("Plain fact", {"source": "x" * 199 + " y"}),  # cut at 200 right after a space
        ("Weird [key::: value] text", {}),  # '::' escaped once is '::' again
        ("Ends with a block id ^abc and #tag", {"tags": ["Other"]}),
        ("Met [[Ada Lovelace]] at #work/london", {"tags": ["people"]}),
    ],
)
def test_what_remember_returns_is_what_the_line_reads_back(
    vault: Vault, text: str, kwargs: dict[str, object]
) -> None:
    memories = Memories(vault, _real_clock())
    stored = memories.remember(text, **kwargs).memory  # type: ignore[arg-type]
    assert memories.get(stored.id) == stored
    fresh = Memories(vault, _real_clock())  # nothing cached: the file alone
    assert fresh.get(stored.id) == stored
    assert memories.forget(stored.id) == stored


def test_a_checkbox_text_is_refused_not_stored_as_a_task(vault: Vault) -> None:
    memories = Memories(vault, _real_clock())
    path = vault.root / category_path("fact")
    before = path.read_bytes()
    with pytest.raises(InvalidInputError, match="would not read back"):
        memories.remember("[ ] buy milk")
    assert path.read_bytes() == before


def test_forget_and_update_find_the_line_by_id_after_hand_edits(vault: Vault) -> None:
    memories = Memories(vault, _real_clock())
    keep = memories.remember("Keep this one").memory
    target = memories.remember("Archive this one").memory
    gone = memories.remember("Forget this one").memory
    path = vault.root / target.path
    text = path.read_text()
    # A person adds a line at the top of the bullets and rewords the target by hand.
    text = text.replace("- Keep this one", "- Typed above\n- Keep this one")
    text = text.replace("Archive this one", "Archive this one, reworded")
    path.write_text(text)
    archived = memories.update_fields(target.id, archived="2026-11-22")
    assert archived.text == "Archive this one, reworded" and archived.archived
    memories.forget(gone.id)
    lines = path.read_text().splitlines()
    assert "- Typed above" in lines
    assert [m.text for m in Memories(vault, _real_clock()).all()] == [
        "Typed above",
        keep.text,
        "Archive this one, reworded",
    ]


# -- item 4: rewrites never drop what a person typed --------------------------------------


def test_forget_keeps_every_line_typed_by_hand_meanwhile(vault: Vault) -> None:
    memories = Memories(vault, _real_clock())
    stored = memories.remember_many(
        [(f"Seed fact {i}", "fact", None, (), None, None) for i in range(150)]
    )
    path = vault.root / "Memory/Facts.md"
    typist = _typist(path, 300, "typed by hand")
    try:
        for result in stored:
            memories.forget(result.memory.id)
    finally:
        typist.wait(timeout=WAIT)
    text = path.read_text()
    assert _missing(text, "typed by hand", 300) == []
    assert not any(f"^{r.memory.id}" in text for r in stored)
    assert len(Memories(vault, _real_clock()).all()) == 300


def test_every_edit_text_caller_keeps_lines_typed_meanwhile(vault: Vault) -> None:
    """Tasks, contacts, notes and the journal rewrite through edit_text too."""
    vault.write_text("Notes/Log.md", "edits: 0\n")
    path = vault.root / "Notes/Log.md"
    typist = _typist(path, 200, "note line", pause=0.0005)

    def bump(text: str | None) -> str:
        assert text is not None
        head, _, rest = text.partition("\n")
        return f"edits: {int(head.split(': ')[1]) + 1}\n{rest}"

    try:
        edits = 0
        while typist.poll() is None or edits < 50:
            vault.edit_text("Notes/Log.md", bump)
            edits += 1
    finally:
        typist.wait(timeout=WAIT)
    text = path.read_text()
    assert text.startswith(f"edits: {edits}\n")
    assert _missing(text, "note line", 200) == []


def test_edit_text_redoes_the_change_on_a_note_saved_meanwhile(vault: Vault) -> None:
    vault.write_text("Notes/Plan.md", "- one\n- two\n")
    path = vault.root / "Notes/Plan.md"
    seen: list[str] = []

    def drop_two(text: str | None) -> str:
        assert text is not None
        seen.append(text)
        if len(seen) == 1:  # an editor saves the note (a new file, renamed over it)
            path.with_name("tmp").write_text("- zero\n- one\n- two\n")
            os.replace(path.with_name("tmp"), path)
        return text.replace("- two\n", "")

    vault.edit_text("Notes/Plan.md", drop_two)
    assert seen == ["- one\n- two\n", "- zero\n- one\n- two\n"]
    assert path.read_text() == "- zero\n- one\n"


def test_edit_text_merges_an_append_and_redoes_an_in_place_rewrite(vault: Vault) -> None:
    vault.write_text("Notes/Plan.md", "- one\n- two\n")
    path = vault.root / "Notes/Plan.md"
    calls: list[str] = []

    def appending(text: str | None) -> str:
        assert text is not None
        calls.append(text)
        if len(calls) == 1:
            with open(path, "a") as handle:
                handle.write("- typed\n")
        return text.replace("- one\n", "")

    vault.edit_text("Notes/Plan.md", appending)
    assert len(calls) == 1  # an append is merged, not a reason to start again
    assert path.read_text() == "- two\n- typed\n"

    calls.clear()

    def rewritten(text: str | None) -> str:
        assert text is not None
        calls.append(text)
        if len(calls) == 1:
            path.write_text("- TWO\n- typed\n")  # same file, same size, other bytes
        return text + "- added\n"

    vault.edit_text("Notes/Plan.md", rewritten)
    assert calls == ["- two\n- typed\n", "- TWO\n- typed\n"]
    assert path.read_text() == "- TWO\n- typed\n- added\n"


def test_a_note_that_keeps_changing_is_a_conflict_and_keeps_the_last_edit(vault: Vault) -> None:
    vault.write_text("Notes/Busy.md", "v0\n")
    path = vault.root / "Notes/Busy.md"
    versions = iter(range(1, 100))

    def change(text: str | None) -> str:
        path.write_text(f"v{next(versions)}, typed\n")  # in place, never an append
        return "memvault's version\n"

    with pytest.raises(ConflictError, match="kept changing"):
        vault.edit_text("Notes/Busy.md", change)
    assert path.read_text().endswith(", typed\n")


# -- item 5: the memory cache is validated by content ---------------------------------------


def test_a_same_size_edit_with_its_mtime_put_back_is_seen(vault: Vault) -> None:
    memories = Memories(vault, _real_clock())
    stored = memories.remember("The code is 1234").memory
    path = vault.root / stored.path
    before = os.stat(path)
    assert memories.get(stored.id).text == "The code is 1234"
    with open(path, "r+b") as handle:  # in place: same inode, same size
        data = handle.read()
        handle.seek(0)
        handle.write(data.replace(b"1234", b"4321"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # as rsync -t does
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    assert memories.get(stored.id).text == "The code is 4321"


def test_remember_sees_every_bullet_typed_by_hand_meanwhile(vault: Vault) -> None:
    memories = Memories(vault, _real_clock())
    memories.remember("First fact")
    path = vault.root / "Memory/Facts.md"
    typist = _typist(path, 300, "hand fact", pause=0.0005)
    ours = []
    try:
        while typist.poll() is None or len(ours) < 100:
            ours.append(memories.remember(f"Our fact {len(ours)}").memory)
    finally:
        typist.wait(timeout=WAIT)
    cached = memories.all()
    assert cached == Memories(vault, _real_clock()).all()  # the cache is what the file says
    assert sum(m.text.startswith("hand fact") for m in cached) == 300
    assert [m for m in cached if m.text.startswith("Our fact")] == ours
    for memory in ours:  # and every line's number is right: forget finds each at once
        memories.forget(memory.id)
    assert _missing(path.read_text(), "hand fact", 300) == []


def test_edit_text_creates_a_missing_note_and_its_folders_but_never_clobbers(
    vault: Vault,
) -> None:
    assert vault.edit_text("New/Deep/Note.md", lambda text: "created\n", must_exist=False) == (
        "created\n"
    )
    assert (vault.root / "New/Deep/Note.md").read_text() == "created\n"
    seen: list[str | None] = []

    def create(text: str | None) -> str:
        seen.append(text)
        if text is None:  # a person saves the note first
            (vault.root / "New/Other.md").write_text("typed first\n")
        return (text or "") + "added\n"

    vault.edit_text("New/Other.md", create, must_exist=False)
    assert seen == [None, "typed first\n"]
    assert (vault.root / "New/Other.md").read_text() == "typed first\nadded\n"
