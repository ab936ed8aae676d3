"""The console's kept values: worked out again as soon as a note of their folders changes."""

from pathlib import Path

from memvault.console.stamped import Stamped
from memvault.vault.store import Vault


def _counter(vault: Vault, calls: list[int]) -> int:
    calls.append(1)
    return sum(len(vault.read_text(e.path)) for e in vault.list("People"))


def test_kept_until_a_note_changes(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    vault.write_text("People/Ann.md", "# Ann\n")
    kept: Stamped[int] = Stamped()
    calls: list[int] = []
    assert kept.get(vault, ("People",), lambda: _counter(vault, calls)) == 6
    assert kept.get(vault, ("People",), lambda: _counter(vault, calls)) == 6
    assert len(calls) == 1
    # Rewritten at once with the same size: a new file put in place, so a new stamp.
    vault.write_text("People/Ann.md", "# Bob\n")
    vault.write_text("People/Cy.md", "# Cy\n")
    assert kept.get(vault, ("People",), lambda: _counter(vault, calls)) == 11
    assert len(calls) == 2


def test_a_folder_not_there_yet(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    kept: Stamped[int] = Stamped()
    assert kept.get(vault, ("People",), lambda: 0) == 0
    vault.write_text("People/Ann.md", "# Ann\n")
    assert kept.get(vault, ("People",), lambda: 1) == 1


def test_each_question_kept_apart_and_only_a_few(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    kept: Stamped[str] = Stamped(keep=2)
    assert kept.get(vault, (), lambda: "a", "a") == "a"
    assert kept.get(vault, (), lambda: "b", "b") == "b"
    assert kept.get(vault, (), lambda: "c", "c") == "c"
    assert kept.get(vault, (), lambda: "a again", "a") == "a again"  # the oldest went
    assert kept.get(vault, (), lambda: "c again", "c") == "c"
