"""A process killed while it carries a person's late lines over to a note it replaced.

memvault replaces a note by renaming a new file over it; what an editor appends to
the old file meanwhile is carried over once the editor lets go of it. A real
``edit_text`` runs in its own process while this test holds the note open for
appending, as an editor would; once the rename is seen (the process then waits
for the editor), lines are typed into the old file and the process is SIGKILLed
mid-wait. More lines follow into the old file before the editor closes it.
Every line must then reach the note, once and in order: by the next edit of it
from any process, or by the daemon's start (:meth:`Vault.finish_carries`).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cli_support import invoke
from memvault.vault.carry import CARRY_DIR
from memvault.vault.disk import Keep, Kept
from memvault.vault.layout import init_vault
from memvault.vault.locks import digest
from memvault.vault.store import Vault
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(4 * WAIT)

NOTE = "Notes/Typed.md"
BEFORE = "status: open\n- line 0\n"


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    made = Vault(tmp_path / "vault")
    init_vault(made)
    made.write_text(NOTE, BEFORE)
    return made


def _editor(root: Path) -> subprocess.Popen[str]:
    """Another process whose ``edit_text`` marks the note done."""
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from memvault.vault.store import Vault
        Vault(Path({str(root)!r})).edit_text(
            {NOTE!r}, lambda text: text.replace("status: open", "status: done")
        )
        print("done", flush=True)
        """
    )
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)


def _lines(numbers: range) -> str:
    return "".join(f"- line {number}\n" for number in numbers)


def _type(fd: int, numbers: range) -> None:
    for number in numbers:  # a line at a time, as a person types
        os.write(fd, _lines(range(number, number + 1)).encode())


@pytest.fixture
def killed_mid_carry(vault: Vault) -> Iterator[Callable[[], None]]:
    """Run the scenario: after it, the note was replaced and lines 2-6 are only in the
    old file, which memvault keeps under ``.memvault/carry``."""
    note = vault.root / NOTE
    editors: list[subprocess.Popen[str]] = []

    def run() -> None:
        fd = os.open(note, os.O_WRONLY | os.O_APPEND)
        try:
            _type(fd, range(1, 2))
            editor = _editor(vault.root)
            editors.append(editor)
            held = os.fstat(fd).st_ino
            wait_for(lambda: os.stat(note).st_ino != held, "memvault to replace the note")
            _type(fd, range(2, 5))
            editor.send_signal(signal.SIGKILL)
            assert editor.wait(timeout=WAIT) == -signal.SIGKILL, "it finished before the kill"
            _type(fd, range(5, 7))
        finally:
            os.close(fd)

    yield run
    for editor in editors:
        if editor.poll() is None:
            editor.kill()
            editor.wait()


def _lines_once_in_order(text: str) -> bool:
    places = [text.find(f"- line {n}\n") for n in range(7)]
    return all(text.count(f"- line {n}\n") == 1 for n in range(7)) and places == sorted(places)


def test_the_daemons_start_carries_over_what_a_killed_edit_left(
    vault: Vault, killed_mid_carry: Callable[[], None]
) -> None:
    killed_mid_carry()
    note = vault.root / NOTE
    assert note.read_text() == "status: done\n- line 0\n- line 1\n"  # the kill's cut
    assert len(os.listdir(vault.state_dir / CARRY_DIR)) == 1

    assert Vault(vault.root).finish_carries() == [NOTE]

    text = note.read_text()
    assert text.startswith("status: done\n") and _lines_once_in_order(text), text
    assert os.listdir(vault.state_dir / CARRY_DIR) == []
    assert Vault(vault.root).finish_carries() == []
    assert note.read_text() == text


def test_the_next_edit_of_the_note_carries_over_first(
    vault: Vault, killed_mid_carry: Callable[[], None]
) -> None:
    killed_mid_carry()
    other = _editor(vault.root)  # a fresh process; the killed one's lock is gone
    assert other.communicate(timeout=WAIT)[0] == "done\n"
    text = (vault.root / NOTE).read_text()
    assert text.startswith("status: done\n") and _lines_once_in_order(text), text
    assert os.listdir(vault.state_dir / CARRY_DIR) == []


def test_a_carry_over_the_killed_edit_had_finished_is_not_made_twice(
    vault: Vault, killed_mid_carry: Callable[[], None]
) -> None:
    killed_mid_carry()
    note = vault.root / NOTE
    # Killed after its append, before it let the old file go: the lines are there already.
    with open(note, "a") as handle:
        handle.write(_lines(range(2, 7)))
    before = note.read_text()
    assert vault.finish_carries() == [NOTE]
    assert note.read_text() == before and _lines_once_in_order(before)
    assert os.listdir(vault.state_dir / CARRY_DIR) == []


def test_a_note_saved_whole_since_gets_the_late_lines_at_its_end(
    vault: Vault, killed_mid_carry: Callable[[], None]
) -> None:
    killed_mid_carry()
    note = vault.root / NOTE
    vault.write_text(NOTE, "# Rewritten in an editor\n- line 0\n- line 1")  # no final newline
    assert vault.finish_carries() == [NOTE]
    assert note.read_text() == "# Rewritten in an editor\n" + _lines(range(7))


def test_an_edit_killed_before_its_rename_leaves_the_note_as_it_was(vault: Vault) -> None:
    note = vault.root / NOTE
    folder = vault.state_dir / CARRY_DIR
    folder.mkdir()
    kept = Kept.name(Keep(folder, digest(NOTE)), BEFORE.encode(), b"status: done\n")
    os.link(note, kept.path)  # what the edit did just before its rename
    assert vault.finish_carries() == [NOTE]
    assert note.read_text() == BEFORE
    assert os.listdir(folder) == []


def test_a_kept_old_note_whose_note_is_gone_stays_and_is_named(
    vault: Vault, killed_mid_carry: Callable[[], None], caplog: pytest.LogCaptureFixture
) -> None:
    killed_mid_carry()
    vault.delete(NOTE)
    with caplog.at_level(logging.WARNING, logger="memvault.vault.store"):
        assert vault.finish_carries() == []
    (kept,) = (vault.state_dir / CARRY_DIR).iterdir()
    assert _lines_once_in_order(kept.read_text())
    assert [r.kept for r in caplog.records] == [str(kept)]  # type: ignore[attr-defined]
    checks = json.loads(invoke(vault.root, "doctor", "--direct", "--json").stdout)["checks"]
    (told,) = [check for check in checks if check["name"] == "kept_old_notes"]
    assert told["status"] == "warning" and told["details"] == {"kept": [str(kept)]}
    assert "1 replaced note left old text in" in told["message"]


def test_what_is_planted_in_the_carry_folder_is_named_and_never_followed(
    vault: Vault, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A link or a named pipe under a kept file's name is not read, not followed and not
    released; the daemon's start and the note's edits go on."""
    folder = vault.state_dir / CARRY_DIR
    folder.mkdir()
    outside = tmp_path / "outside.md"
    outside.write_text("not yours\n")
    link = Kept.name(Keep(folder, digest(NOTE)), BEFORE.encode(), b"one")
    pipe = Kept.name(Keep(folder, digest(NOTE)), BEFORE.encode(), b"two")
    link.path.symlink_to(outside)
    os.mkfifo(pipe.path)
    with caplog.at_level(logging.WARNING):
        assert vault.finish_carries() == [NOTE]
        assert vault.edit_text(NOTE, lambda text: text + "- edited\n") == BEFORE + "- edited\n"
    assert sorted(os.listdir(folder)) == sorted([link.path.name, pipe.path.name])
    assert outside.read_text() == "not yours\n"
    assert (vault.root / NOTE).read_text() == BEFORE + "- edited\n"
    named = [r.kept for r in caplog.records if hasattr(r, "kept")]  # type: ignore[attr-defined]
    assert set(named) == {str(link.path), str(pipe.path)}
