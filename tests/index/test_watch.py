"""``memvault.index.watch.follow``: edits made outside memvault reach the index while watching.

The watcher runs in a background thread over a real temporary vault; the
test edits files directly, as Obsidian or a text editor would, and polls
keyword search until the index has caught up (bounded by ``waiting.WAIT``, never a
fixed sleep). The test thread touches the index only through searches.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memvault.index.index import SyncReport
from memvault.index.watch import follow
from memvault.runtime import Runtime
from waiting import POLL, WAIT


@dataclass
class Watcher:
    """A running ``follow`` thread and what it reported."""

    runtime: Runtime
    thread: threading.Thread
    stop: threading.Event
    ready: threading.Event
    reports: list[SyncReport] = field(default_factory=list)
    initial: list[SyncReport] = field(default_factory=list)  # from the sync before watching
    errors: list[BaseException] = field(default_factory=list)

    def found(self, word: str) -> set[str]:
        """Paths whose text matches ``word`` (keyword search only)."""
        return {h.path for h in self.runtime.searcher.search(word, limit=50, mode="keyword")}

    def wait_for(self, what: str, condition: Callable[[], bool], timeout: float = WAIT) -> None:
        """Poll ``condition`` until it holds; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert not self.errors, self.errors
            assert self.thread.is_alive(), "the watcher thread died"
            if time.monotonic() > deadline:
                pytest.fail(f"not within {timeout:g} s: {what}; reports: {self.reports}")
            time.sleep(POLL)

    def wait_found(self, word: str, paths: set[str], timeout: float = WAIT) -> None:
        self.wait_for(f"{word!r} found in {paths}", lambda: self.found(word) == paths, timeout)

    def reported(self, pick: Callable[[SyncReport], Sequence[object]]) -> list[object]:
        """One kind of change (added, moved ...) over every report so far."""
        return [item for report in list(self.reports) for item in pick(report)]


def added(report: SyncReport) -> list[str]:
    return report.added


def changed(report: SyncReport) -> list[str]:
    return report.changed


def deleted(report: SyncReport) -> list[str]:
    return report.deleted


def start(runtime: Runtime, debounce_ms: int = 100) -> Watcher:
    stop = threading.Event()
    ready = threading.Event()
    watcher = Watcher(runtime, threading.Thread(), stop, ready)

    def run() -> None:
        try:
            follow(
                runtime.index,
                stop=stop,
                debounce_ms=debounce_ms,
                on_batch=watcher.reports.append,
                ready=ready,
            )
        except BaseException as exc:  # surfaced by the test thread
            watcher.errors.append(exc)
            ready.set()

    watcher.thread = threading.Thread(target=run, name="memvault-watch-test", daemon=True)
    watcher.thread.start()
    assert ready.wait(WAIT), "the watcher never became ready"
    assert not watcher.errors, watcher.errors
    # The first sync reported before ``ready``; later reports are the test's own edits.
    watcher.initial = list(watcher.reports)
    del watcher.reports[: len(watcher.initial)]
    return watcher


def halt(watcher: Watcher) -> float:
    """Stop the watcher; returns how long it took to exit."""
    started = time.monotonic()
    watcher.stop.set()
    watcher.thread.join(WAIT)
    assert not watcher.thread.is_alive(), f"the watcher did not stop within {WAIT:g} s"
    assert not watcher.errors, watcher.errors
    return time.monotonic() - started


@pytest.fixture
def watching(runtime: Runtime) -> Iterator[Watcher]:
    """A watcher following the fixture vault, stopped (and checked) afterwards."""
    watcher = start(runtime)
    try:
        yield watcher
    finally:
        halt(watcher)


def test_a_new_note_becomes_searchable(
    watching: Watcher, write: Callable[[str, str], Path]
) -> None:
    write("Projects/Kites.md", "# Kites\n\nBuild a tetrahedral kite.\n")

    watching.wait_found("tetrahedral", {"Projects/Kites.md"})
    # The report follows the commit that made the note searchable.
    watching.wait_for("reported", lambda: "Projects/Kites.md" in watching.reported(added))


def test_an_edit_replaces_the_old_text(
    watching: Watcher, write: Callable[[str, str], Path]
) -> None:
    write("Projects/Kites.md", "# Kites\n\nBuild a tetrahedral kite.\n")
    watching.wait_found("tetrahedral", {"Projects/Kites.md"})

    write("Projects/Kites.md", "# Kites\n\nBuild a delta kite with a ripstop sail.\n")

    watching.wait_found("ripstop", {"Projects/Kites.md"})
    assert watching.found("tetrahedral") == set()
    watching.wait_for("reported", lambda: "Projects/Kites.md" in watching.reported(changed))


def test_a_quick_series_of_edits_ends_with_the_last_text(
    watching: Watcher, write: Callable[[str, str], Path]
) -> None:
    for n in range(10):
        write("Drafts.md", f"# Drafts\n\nVersion word{n}.\n")

    watching.wait_found("word9", {"Drafts.md"})
    assert all(watching.found(f"word{n}") == set() for n in range(9))


def test_a_rename_is_a_move(watching: Watcher, write: Callable[[str, str], Path]) -> None:
    old = write("Projects/Kites.md", "# Kites\n\nBuild a tetrahedral kite.\n")
    watching.wait_found("tetrahedral", {"Projects/Kites.md"})

    os.rename(old, old.with_name("Gliders.md"))

    watching.wait_found("tetrahedral", {"Projects/Gliders.md"})
    watching.wait_for("the move is reported", lambda: bool(watching.reported(lambda r: r.moved)))
    assert watching.reported(lambda r: r.moved) == [("Projects/Kites.md", "Projects/Gliders.md")]
    assert watching.reported(lambda r: r.deleted) == []


def test_a_move_into_another_folder(watching: Watcher, write: Callable[[str, str], Path]) -> None:
    old = write("Projects/Kites.md", "# Kites\n\nBuild a tetrahedral kite.\n")
    watching.wait_found("tetrahedral", {"Projects/Kites.md"})

    os.rename(old, watching.runtime.vault.root / "Insights" / "Kites.md")

    watching.wait_found("tetrahedral", {"Insights/Kites.md"})
    watching.wait_for("the move is reported", lambda: bool(watching.reported(lambda r: r.moved)))
    assert watching.reported(lambda r: r.moved) == [("Projects/Kites.md", "Insights/Kites.md")]


def test_a_deleted_note_is_gone(watching: Watcher, write: Callable[[str, str], Path]) -> None:
    note = write("Projects/Kites.md", "# Kites\n\nBuild a tetrahedral kite.\n")
    watching.wait_found("tetrahedral", {"Projects/Kites.md"})

    note.unlink()

    watching.wait_found("tetrahedral", set())
    watching.wait_for("reported", lambda: "Projects/Kites.md" in watching.reported(deleted))


def test_hand_written_memories_are_searchable(
    watching: Watcher, write: Callable[[str, str], Path]
) -> None:
    write(
        "Memory/Facts.md",
        "# Facts\n\n- The owner keeps bees [created:: 2026-11-20 10:00:00] ^m-0000beef\n",
    )

    watching.wait_for(
        "the memory is found",
        lambda: (
            [h.id for h in watching.runtime.searcher.search("bees", mode="keyword")]
            == ["m-0000beef"]
        ),
    )


def test_hidden_folders_and_other_files_are_ignored(
    watching: Watcher, write: Callable[[str, str], Path]
) -> None:
    write(".obsidian/workspace.md", "zanzibar in a hidden folder\n")
    write(".trash/Old.md", "# Old\n\nzanzibar in the trash\n")
    write("Projects/data.txt", "zanzibar in a text file\n")
    write("Projects/Kites.md~", "zanzibar in an editor backup\n")
    write("Templates/extra.md", "# Extra\n\nzanzibar in a template\n")  # excluded by settings

    # A note written afterwards is a marker: once it is indexed, the others were seen.
    write("Projects/Marker.md", "# Marker\n\nquokka\n")
    watching.wait_found("quokka", {"Projects/Marker.md"})
    watching.wait_for("reported", lambda: "Projects/Marker.md" in watching.reported(added))

    assert watching.found("zanzibar") == set()
    seen = watching.reported(lambda r: [*r.added, *r.changed, *r.deleted, *r.skipped])
    assert seen == ["Projects/Marker.md"]


def test_edits_made_before_watching_are_picked_up(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    runtime.index.sync()
    write("Projects/Kites.md", "# Kites\n\nBuild a tetrahedral kite.\n")

    watcher = start(runtime)
    try:
        # follow() syncs once before it starts watching, so ready means indexed.
        assert watcher.found("tetrahedral") == {"Projects/Kites.md"}
        assert "Projects/Kites.md" in [p for r in watcher.initial for p in r.added]
    finally:
        halt(watcher)


def test_stop_ends_the_watcher_promptly(runtime: Runtime) -> None:
    watcher = start(runtime)

    took = halt(watcher)

    assert took < WAIT  # stop is honoured at once, not when something next changes


def test_stop_while_a_batch_is_pending(runtime: Runtime, write: Callable[[str, str], Path]) -> None:
    watcher = start(runtime, debounce_ms=2000)
    write("Projects/Kites.md", "# Kites\n\nBuild a tetrahedral kite.\n")

    took = halt(watcher)

    assert took < WAIT  # stop is honoured at once, not when something next changes


# Folders: notify reports a folder renamed or moved across the vault's edge as one event
# for the folder, and nothing for the notes inside it; follow() syncs the vault for it.


def folder_with_a_note(parent: Path, name: str) -> Path:
    folder = parent / name
    folder.mkdir()
    (folder / "Kites.md").write_text("# Kites\n\nBuild a tetrahedral kite.\n", encoding="utf-8")
    return folder


def test_a_renamed_folder_moves_its_notes(runtime: Runtime) -> None:
    folder = folder_with_a_note(runtime.vault.root, "Ideas")
    watcher = start(runtime)  # the folder exists (and is indexed) before watching starts
    try:
        assert watcher.found("tetrahedral") == {"Ideas/Kites.md"}

        os.rename(folder, folder.with_name("Concepts"))

        watcher.wait_found("tetrahedral", {"Concepts/Kites.md"})
    finally:
        halt(watcher)


def test_a_folder_moved_into_the_vault_is_indexed(watching: Watcher, tmp_path: Path) -> None:
    outside = folder_with_a_note(tmp_path, "Downloads")

    os.rename(outside, watching.runtime.vault.root / "Kites")

    watching.wait_found("tetrahedral", {"Kites/Kites.md"})


def test_a_folder_moved_out_of_the_vault_is_forgotten(runtime: Runtime, tmp_path: Path) -> None:
    folder = folder_with_a_note(runtime.vault.root, "Ideas")
    watcher = start(runtime)
    try:
        assert watcher.found("tetrahedral") == {"Ideas/Kites.md"}

        os.rename(folder, tmp_path / "Trash")

        watcher.wait_found("tetrahedral", set())
    finally:
        halt(watcher)


def test_an_upper_case_extension_is_followed_like_index_does(
    watching: Watcher, write: Callable[[str, str], Path]
) -> None:
    write("Projects/Shouting.MD", "# Shouting\n\nBuild a tetrahedral kite.\n")

    watching.wait_found("tetrahedral", {"Projects/Shouting.MD"})
