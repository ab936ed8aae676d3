from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

import pytest

from memvault.errors import ConflictError, InvalidInputError, NotFoundError, UnsafePathError
from memvault.vault.store import Vault
from waiting import WAIT


def test_write_is_atomic_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    vault.write_text("Projects/Apollo.md", "# Apollo\n")
    vault.write_text("Projects/Apollo.md", "# Apollo v2\n")
    assert (tmp_path / "Projects/Apollo.md").read_text() == "# Apollo v2\n"
    assert sorted(p.name for p in (tmp_path / "Projects").iterdir()) == ["Apollo.md"]


def test_write_keeps_the_file_mode(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    vault.write_text("a.md", "one\n")
    os.chmod(tmp_path / "a.md", 0o640)
    vault.write_text("a.md", "two\n")
    assert stat.S_IMODE((tmp_path / "a.md").stat().st_mode) == 0o640


def test_write_without_overwrite_refuses_an_existing_note(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    assert vault.create_text("a.md", "first\n") is True
    assert vault.create_text("a.md", "second\n") is False
    with pytest.raises(ConflictError):
        vault.write_text("a.md", "third\n", overwrite=False)
    assert (tmp_path / "a.md").read_text() == "first\n"


def test_failed_write_leaves_the_old_content(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    vault.write_text("a.md", "safe\n")
    with pytest.raises(UnicodeEncodeError):
        vault.write_text("a.md", "broken \ud800 surrogate")
    assert (tmp_path / "a.md").read_text() == "safe\n"
    assert [p.name for p in tmp_path.iterdir() if p.name != ".memvault"] == ["a.md"]


def test_append_adds_lines_without_rewriting(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    target = tmp_path / "log.md"
    target.write_bytes(b"# Log\n- one\n")
    inode = target.stat().st_ino
    vault.append_text("log.md", "- two")
    vault.append_text("log.md", "- three\n")
    assert target.read_bytes() == b"# Log\n- one\n- two\n- three\n"
    assert target.stat().st_ino == inode  # appended in place, not replaced


def test_append_supplies_a_missing_trailing_newline(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    (tmp_path / "a.md").write_bytes(b"last line without newline")
    vault.append_text("a.md", "next")
    assert (tmp_path / "a.md").read_bytes() == b"last line without newline\nnext\n"


def test_append_keeps_crlf_line_endings(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    (tmp_path / "win.md").write_bytes(b"# Windows\r\n- one")
    vault.append_text("win.md", "- two\n- three")
    assert (tmp_path / "win.md").read_bytes() == b"# Windows\r\n- one\r\n- two\r\n- three\r\n"


def test_append_creates_missing_notes_and_folders(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    vault.append_text("New/Folder/note.md", "hello")
    assert (tmp_path / "New/Folder/note.md").read_text() == "hello\n"


def test_read_text_is_byte_exact_and_refuses_binary(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    raw = "\ufeff---\r\na: 1\r\n---\r\nbody".encode()
    (tmp_path / "bom.md").write_bytes(raw)
    assert vault.read_text("bom.md").encode() == raw
    (tmp_path / "image.md").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(InvalidInputError, match="not UTF-8"):
        vault.read_text("image.md")


def test_missing_notes_and_folders_give_clear_errors(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    (tmp_path / "Folder").mkdir()
    with pytest.raises(NotFoundError, match=r"No note at nothing\.md"):
        vault.read_text("nothing.md")
    with pytest.raises(InvalidInputError, match="is a folder"):
        vault.read_text("Folder")
    with pytest.raises(NotFoundError):
        vault.delete("nothing.md")
    with pytest.raises(NotFoundError):
        vault.list("Nowhere")


def test_list_skips_hidden_entries_and_reports_size_and_time(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    vault.write_text("b.md", "bb\n")
    vault.write_text("Sub/a.md", "a\n")
    vault.write_text("Sub/picture.png", "not really\n")
    (tmp_path / ".obsidian").mkdir()
    (tmp_path / ".obsidian" / "app.md").write_text("hidden")
    (tmp_path / ".draft.md").write_text("hidden")
    entries = vault.list()
    assert [e.path for e in entries] == ["Sub/a.md", "b.md"]
    assert entries[1].size == 3
    assert entries[1].modified.tzinfo is not None
    assert [e.path for e in vault.list(notes_only=False)] == ["Sub/a.md", "Sub/picture.png", "b.md"]
    assert [e.path for e in vault.list(recursive=False)] == ["b.md"]
    assert [e.path for e in vault.list("Sub")] == ["Sub/a.md"]


def test_move_and_delete(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    vault.write_text("a.md", "A\n")
    vault.write_text("b.md", "B\n")
    with pytest.raises(ConflictError):
        vault.move("a.md", "b.md")
    assert vault.move("a.md", "Archive/a.md") == "Archive/a.md"
    assert (tmp_path / "Archive/a.md").read_text() == "A\n"
    assert not (tmp_path / "a.md").exists()
    vault.delete("Archive/a.md")
    vault.delete("Archive")
    assert not (tmp_path / "Archive").exists()
    with pytest.raises(UnsafePathError):
        vault.move("b.md", "../b.md")
    assert (tmp_path / "b.md").exists()


def test_edit_text_is_a_locked_read_modify_write(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    vault.write_text("counter.md", "0\n")
    vault.edit_text("counter.md", lambda text: f"{int(text or '0') + 1}\n")
    assert (tmp_path / "counter.md").read_text() == "1\n"
    mtime = (tmp_path / "counter.md").stat().st_mtime_ns
    vault.edit_text("counter.md", lambda text: text)  # unchanged: not rewritten
    assert (tmp_path / "counter.md").stat().st_mtime_ns == mtime
    with pytest.raises(NotFoundError):
        vault.edit_text("missing.md", lambda text: "x")
    vault.edit_text(
        "missing.md", lambda text: "created\n" if text is None else text, must_exist=False
    )
    assert (tmp_path / "missing.md").read_text() == "created\n"


def test_lock_is_reentrant_within_a_process(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    with vault.lock("a.md"), vault.lock("a.md"):
        vault.append_text("a.md", "inside two locks")
    assert (tmp_path / "a.md").read_text() == "inside two locks\n"


def _append_lines(root: str, worker: int, count: int) -> None:
    vault = Vault(Path(root))
    for i in range(count):
        vault.append_text("shared.md", f"- worker {worker} line {i}")


def _increment(root: str, count: int) -> None:
    vault = Vault(Path(root))
    for _ in range(count):
        vault.edit_text("counter.md", lambda text: f"{int((text or '0').strip()) + 1}\n")


def test_two_processes_appending_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_append_lines, args=(str(tmp_path), w, 300)) for w in (1, 2)]
    for proc in workers:
        proc.start()
    for proc in workers:
        proc.join(WAIT)
        assert proc.exitcode == 0
    lines = (tmp_path / "shared.md").read_text().splitlines()
    assert len(lines) == 600
    for worker in (1, 2):
        assert [line for line in lines if f"worker {worker} " in line] == [
            f"- worker {worker} line {i}" for i in range(300)
        ]


def test_two_processes_editing_one_note_lose_no_update(tmp_path: Path) -> None:
    (tmp_path / "counter.md").write_text("0\n")
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_increment, args=(str(tmp_path), 150)) for _ in range(2)]
    for proc in workers:
        proc.start()
    for proc in workers:
        proc.join(WAIT)
        assert proc.exitcode == 0
    assert (tmp_path / "counter.md").read_text() == "300\n"
