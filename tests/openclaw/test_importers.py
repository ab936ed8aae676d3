"""The OpenClaw importers: real Markdown files in tmp_path, a real vault, real state.db."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from textwrap import dedent

import pytest

from cli_support import EXIT_INVALID, EXIT_NOT_FOUND, fail, ok, ok_json, snapshot
from memvault.openclaw.importers import (
    JOURNAL_SECTION,
    import_daily_logs,
    import_learnings,
    import_memory_md,
    import_todo,
    import_workspace,
)
from memvault.runtime import Runtime
from memvault.vault.store import Vault

MEMORY_MD = """\
# MEMORY.md - what I keep

## Preferences
- Prefers dark mode in every app [importance: 0.9]
- Likes tea
  - green, never black
* Answers in short sentences

## Decisions
1. Use SQLite for the index (importance: 0.8)

## Tools of the trade
- Uses tmux every day

A plain paragraph about the user
that goes on for a second line.
"""

DAY_LOG = """\
# 2026-01-05
- 09:15 Started the storage migration
- assistant: Suggested SQLite over Postgres
- **14:30** Finished the first import
"""

TODO_MD = """\
# TODO
- [ ] Write the importer
  - [ ] parse the files
- [x] Ship version one
- Plain bullet task
"""

LEARNINGS_MD = """\
# Learnings
- Don't install packages globally; use the venv instead
- Batching writes makes imports fast
"""


def files(root: Path, contents: dict[str, str | bytes]) -> Path:
    """Write ``contents`` (relative path -> text) under ``root``."""
    for relpath, text in contents.items():
        target = root / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text if isinstance(text, bytes) else dedent(text).encode("utf-8"))
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An OpenClaw workspace with all four kinds of file (and a log that is not dated)."""
    return files(
        tmp_path / "workspace",
        {
            "MEMORY.md": MEMORY_MD,
            "memory/2026-01-05.md": DAY_LOG,
            "memory/2026-01-06.md": "- Reviewed the pull request\n",
            "memory/notes.md": "- not a day\n",
            "TODO.md": TODO_MD,
            "LEARNINGS.md": LEARNINGS_MD,
            "AGENTS.md": "# not imported\n",
        },
    )


def vault_files(root: Path) -> dict[str, str]:
    """The vault's files by hash; SQLite's shared-memory file changes on reads too."""
    return {k: v for k, v in snapshot(root).items() if not k.endswith("-shm")}


def imported_rows(runtime: Runtime) -> list[tuple[str, str]]:
    return [(r["kind"], r["target"]) for r in runtime.state.query("SELECT * FROM imports")]


def test_memory_md_bullets_become_memories_under_their_heading(
    runtime: Runtime, workspace: Path
) -> None:
    report = import_memory_md(runtime, workspace / "MEMORY.md")

    assert (report.imported, report.skipped, report.problems) == (6, 0, [])
    assert report.items == {"memories": 6}
    by_text = {m.text: m for m in runtime.memories.all()}
    assert by_text["Prefers dark mode in every app"].category == "preference"
    assert by_text["Prefers dark mode in every app"].importance == 0.9
    assert by_text["Likes tea: green, never black"].category == "preference"
    assert by_text["Answers in short sentences"].source == "openclaw"
    assert by_text["Use SQLite for the index"].category == "decision"
    assert by_text["Use SQLite for the index"].importance == 0.8
    # A heading that names no category: the default category, the heading kept as a tag.
    tmux = by_text["Uses tmux every day"]
    assert (tmux.category, tmux.tags) == ("fact", ["tools-of-the-trade"])
    assert "A plain paragraph about the user that goes on for a second line." in by_text
    preferences = (runtime.vault.root / "Memory/Preferences.md").read_text(encoding="utf-8")
    assert "- Prefers dark mode in every app [importance:: 0.9]" in preferences
    assert [k for k, _ in imported_rows(runtime)] == ["memory-md"] * 6
    # The keyword index was synced: search finds an imported memory.
    assert any("tmux" in hit.snippet for hit in runtime.searcher.search("tmux", mode="keyword"))


def test_importing_twice_adds_nothing(runtime: Runtime, workspace: Path, vault: Vault) -> None:
    first = import_workspace(runtime, workspace)
    before = vault_files(vault.root)
    second = import_workspace(runtime, workspace)

    assert first.imported == 15 and first.skipped == 0
    assert (second.imported, second.skipped, second.items) == (0, 15, {})
    assert vault_files(vault.root) == before
    assert len(runtime.sessions.list()) == 2
    assert len(imported_rows(runtime)) == 15


def test_a_memory_already_in_the_vault_is_skipped(runtime: Runtime, tmp_path: Path) -> None:
    runtime.memories.remember("Likes tea", category="preference")
    path = files(tmp_path, {"MEMORY.md": "## Preferences\n- Likes tea\n- Likes cake\n"})

    report = import_memory_md(runtime, path / "MEMORY.md")

    assert (report.imported, report.skipped) == (1, 1)
    assert sorted(m.text for m in runtime.memories.all()) == ["Likes cake", "Likes tea"]


def test_daily_logs_carry_their_dates(runtime: Runtime, workspace: Path) -> None:
    report = import_daily_logs(runtime, workspace / "memory")

    assert report.items == {"journal entries": 4, "sessions": 2}
    assert report.problems == [
        "memory/notes.md: the file name does not start with a date (YYYY-MM-DD), "
        "so it was not imported."
    ]
    entries = runtime.journal.sections(date(2026, 1, 5))[JOURNAL_SECTION]
    assert entries == [
        "09:15 Started the storage migration",
        "09:15 assistant: Suggested SQLite over Postgres",
        "14:30 Finished the first import",
    ]
    assert runtime.journal.sections(date(2026, 1, 6))[JOURNAL_SECTION] == [
        "Reviewed the pull request"
    ]
    session = runtime.sessions.get("openclaw:import:2026-01-05")
    assert not session.active
    assert session.channel == "openclaw"
    assert session.started_at.date() == date(2026, 1, 5)
    assert session.ended_at is not None and session.ended_at.date() == date(2026, 1, 5)
    assert session.summary is not None and "Started the storage migration" in session.summary
    messages = runtime.sessions.messages(session.id)
    assert [(m.role, m.text) for m in messages] == [
        ("user", "Started the storage migration"),
        ("assistant", "Suggested SQLite over Postgres"),
        ("user", "Finished the first import"),
    ]
    assert [m.sent_at.strftime("%H:%M") for m in messages] == ["09:15", "09:15", "14:30"]
    # Nothing went to today's journal: the import is about those days.
    assert not runtime.vault.exists(runtime.journal.path_for(runtime.clock.today()))


def test_new_lines_in_a_daily_log_are_imported_on_the_next_run(
    runtime: Runtime, tmp_path: Path
) -> None:
    log = files(tmp_path, {"memory/2026-02-01.md": "- First thing\n"}) / "memory/2026-02-01.md"
    import_daily_logs(runtime, log)
    log.write_text("- First thing\n- Second thing\n", encoding="utf-8")

    again = import_daily_logs(runtime, log)

    assert (again.imported, again.skipped) == (1, 1)
    assert runtime.journal.sections(date(2026, 2, 1))[JOURNAL_SECTION] == [
        "First thing",
        "Second thing",
    ]


def test_todo_keeps_the_done_state(runtime: Runtime, workspace: Path) -> None:
    report = import_todo(runtime, workspace / "TODO.md")

    assert (report.imported, report.items) == (3, {"tasks": 3})
    open_titles = {t.title: t for t in runtime.tasks.list()}
    assert set(open_titles) == {"Write the importer", "Plain bullet task"}
    assert [s.text for s in open_titles["Write the importer"].steps] == ["parse the files"]
    shipped = runtime.tasks.get("Ship version one")
    assert shipped.status == "done"
    assert shipped.path == "Tasks/completed/Ship version one.md"
    assert shipped.completed == runtime.clock.today()


def test_a_task_done_since_the_last_import_is_completed(runtime: Runtime, tmp_path: Path) -> None:
    todo = files(tmp_path, {"TODO.md": "- [ ] Call the bank\n"}) / "TODO.md"
    import_todo(runtime, todo)
    todo.write_text("- [x] Call the bank\n", encoding="utf-8")

    report = import_todo(runtime, todo)

    assert report.imported == 1
    assert runtime.tasks.list() == []
    assert runtime.tasks.get("Call the bank").status == "done"


def test_an_open_task_of_the_same_title_is_skipped(runtime: Runtime, tmp_path: Path) -> None:
    runtime.tasks.create("Water the plants")
    todo = files(tmp_path, {"TODO.md": "- [ ] Water the plants\n- [ ] Feed the cat\n"})

    report = import_todo(runtime, todo / "TODO.md")

    assert (report.imported, report.skipped, report.problems) == (1, 1, [])
    assert sorted(t.title for t in runtime.tasks.list()) == ["Feed the cat", "Water the plants"]


def test_learnings_become_corrections_or_patterns(runtime: Runtime, workspace: Path) -> None:
    report = import_learnings(runtime, workspace / "LEARNINGS.md")

    assert report.counts() == {"learnings": 2}
    categories = {m.text: m.category for m in runtime.memories.all()}
    assert categories == {
        "Don't install packages globally; use the venv instead": "correction",
        "Batching writes makes imports fast": "pattern",
    }


def test_malformed_files_give_problem_lines_and_the_rest_is_imported(
    runtime: Runtime, tmp_path: Path
) -> None:
    bad = files(
        tmp_path,
        {
            "MEMORY.md": "## Facts\n- Fine fact\n- Bad \x01 control\n| a | b |\n|---|---|\n"
            "```\n- inside code\n```\n- Another fine fact\n",
            "TODO.md": "Some intro text\n- [ ] A real task\n",
            "memory/2026-13-40.md": "- impossible day\n",
            "memory/2026-03-01.md": b"- caf\xe9 latin-1\n",
            "LEARNINGS.md": b"\x00\x01\x02\xff",
        },
    )

    report = import_workspace(runtime, bad)

    assert report.imported == 3
    assert sorted(m.text for m in runtime.memories.all()) == ["Another fine fact", "Fine fact"]
    assert [t.title for t in runtime.tasks.list()] == ["A real task"]
    problems = "\n".join(report.problems)
    assert "MEMORY.md line 3: " in problems and "control character" in problems
    assert "MEMORY.md lines 4-5: a table is not imported" in problems
    assert "TODO.md line 1: not a list item" in problems
    assert "memory/2026-13-40.md: the file name does not start with a date" in problems
    assert "2026-03-01.md: not UTF-8 text" in problems
    assert "LEARNINGS.md: not UTF-8 text" in problems
    assert all(p.endswith(".") and "\n" not in p for p in report.problems)


def test_import_openclaw_json_and_missing_files(vault: Vault, tmp_path: Path) -> None:
    ws = files(tmp_path / "ws", {"MEMORY.md": MEMORY_MD, "memory/2026-01-05.md": DAY_LOG})

    data = ok_json(vault.root, "import", "openclaw", ws)

    assert data["kind"] == "openclaw" and data["dry_run"] is False
    assert (data["imported"], data["skipped"]) == (9, 0)
    assert data["items"] == {"memories": 6, "journal entries": 3, "sessions": 1}
    assert data["missing"] == ["TODO.md", "LEARNINGS.md"]
    assert [p["kind"] for p in data["parts"]] == ["memory-md", "daily-logs"]
    assert data["summary"] == "Imported 6 memories, 3 journal entries, 1 session."
    again = ok_json(vault.root, "import", "openclaw", ws)
    assert (again["imported"], again["skipped"]) == (0, 9)


def test_import_prints_a_summary_and_the_problems(vault: Vault, workspace: Path) -> None:
    out = ok(vault.root, "import", "openclaw", workspace).stdout.splitlines()

    assert out[0] == ("Imported 6 memories, 4 journal entries, 2 sessions, 3 tasks, 2 learnings.")
    assert "embeddings are filled by the daemon's backfill" in out[1]
    assert out[2:] == [
        "Problems (1):",
        "  - memory/notes.md: the file name does not start with a date (YYYY-MM-DD), "
        "so it was not imported.",
    ]
    again = ok(vault.root, "import", "openclaw", workspace).stdout.splitlines()
    assert again[0] == "Imported nothing; skipped 15 already imported."


def test_dry_run_writes_nothing(vault: Vault, workspace: Path) -> None:
    before = vault_files(vault.root)

    data = ok_json(vault.root, "import", "openclaw", workspace, "--dry-run")

    assert vault_files(vault.root) == before
    assert not (vault.root / ".memvault/state.db").exists()
    assert data["dry_run"] is True and data["imported"] == 15
    assert data["summary"] == (
        "Would import 6 memories, 4 journal entries, 2 sessions, 3 tasks, 2 learnings."
    )


def test_dry_run_after_an_import_reports_everything_skipped(vault: Vault, workspace: Path) -> None:
    ok(vault.root, "import", "todo", workspace / "TODO.md")
    before = vault_files(vault.root)

    out = ok(vault.root, "import", "todo", workspace / "TODO.md", "--dry-run").stdout

    assert out.splitlines()[0] == "Would import nothing; would skip 3 already imported."
    assert vault_files(vault.root) == before


@pytest.mark.parametrize(
    ("kind", "target", "code", "says"),
    [
        ("openclaw", "nowhere", EXIT_NOT_FOUND, "does not exist"),
        ("memory-md", "nowhere.md", EXIT_NOT_FOUND, "does not exist"),
        ("daily-logs", "nowhere", EXIT_NOT_FOUND, "does not exist"),
        ("memory-md", ".", EXIT_INVALID, "is a folder"),
        ("todo", ".", EXIT_INVALID, "is a folder"),
        ("learnings", ".", EXIT_INVALID, "is a folder"),
        ("openclaw", "MEMORY.md", EXIT_INVALID, "is a file"),
        ("openclaw", "empty", EXIT_NOT_FOUND, "Nothing to import"),
    ],
)
def test_bad_paths_are_one_sentence(
    vault: Vault, workspace: Path, kind: str, target: str, code: int, says: str
) -> None:
    (workspace / "empty").mkdir()
    before = vault_files(vault.root)

    message = fail(vault.root, "import", kind, workspace / target, code=code)

    assert says in message
    assert vault_files(vault.root) == before


def test_an_openclaw_state_folder_is_read_through_its_workspace(
    runtime: Runtime, tmp_path: Path
) -> None:
    home = files(tmp_path / ".openclaw", {"workspace/TODO.md": "- [ ] One task\n"})

    report = import_workspace(runtime, home)

    assert report.path == str(home / "workspace")
    assert [t.title for t in runtime.tasks.list()] == ["One task"]


def test_imported_items_are_recorded_after_they_are_written(
    runtime: Runtime, tmp_path: Path, write: Callable[[str, str], Path]
) -> None:
    # A memory file that is not text: the vault refuses the write, nothing is recorded,
    # and the item is imported once the file is mended.
    (runtime.vault.root / "Memory/Facts.md").write_bytes(b"\xff\xfe not text")
    path = files(tmp_path, {"MEMORY.md": "## Facts\n- Water boils at 100 C\n"}) / "MEMORY.md"

    failed = import_memory_md(runtime, path)

    assert failed.imported == 0 and len(failed.problems) == 1
    assert imported_rows(runtime) == []
    write("Memory/Facts.md", "# Facts\n")
    mended = import_memory_md(runtime, path)
    assert mended.imported == 1
    assert [m.text for m in runtime.memories.all()] == ["Water boils at 100 C"]


def test_imported_memories_are_dated_now(runtime: Runtime, tmp_path: Path) -> None:
    path = files(tmp_path, {"MEMORY.md": "- A fact\n"}) / "MEMORY.md"
    import_memory_md(runtime, path)
    [memory] = runtime.memories.all()
    assert memory.created == runtime.clock.now().replace(microsecond=0)
    assert isinstance(memory.created, datetime)


def test_state_db_has_the_imports_table(runtime: Runtime, vault: Vault) -> None:
    runtime.state.query("SELECT 1")
    conn = sqlite3.connect(vault.root / ".memvault/state.db")
    try:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(imports)")]
    finally:
        conn.close()
    assert columns == ["kind", "item_hash", "target", "source", "imported_at"]
