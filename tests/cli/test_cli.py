"""End-to-end tests of the ``memvault`` command line, in a temporary vault.

Most tests drive the Typer app in-process with ``CliRunner`` (stdout and
stderr are captured separately); a few run the real entry point,
``python -m memvault``, in a subprocess. Every test looks at the files in the
vault as well as at what the command printed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from ruamel.yaml import YAML

from cli_support import (
    EXIT_CONFIG,
    EXIT_CONFLICT,
    EXIT_INVALID,
    EXIT_NOT_FOUND,
    EXIT_VAULT,
    fail,
    invoke,
    ok,
    ok_json,
    snapshot,
)
from support import LAYOUT_FOLDERS, LAYOUT_NOTES
from waiting import WAIT

MEMORY_KEYS = {
    "id",
    "text",
    "category",
    "importance",
    "tags",
    "created",
    "source",
    "path",
    "line",
    "archived",
    "superseded_by",
    "agent",
    "trust",
    "trust_reason",
}
TASK_KEYS = {
    "path",
    "title",
    "status",
    "priority",
    "created",
    "due",
    "completed",
    "project",
    "tags",
    "description",
    "steps",
    "notes",
}
PNG_BYTES = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe binary"


# -- helpers ---------------------------------------------------------------------


def frontmatter(path: Path) -> dict[str, Any]:
    """The YAML frontmatter of a note, parsed independently of memvault."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), text
    end = text.index("\n---\n", 4)
    data = YAML(typ="safe").load(text[4:end])
    return dict(data or {})


def section(text: str, heading: str) -> str:
    """The lines under ``## heading`` up to the next heading."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^#|\Z)", text, re.M | re.S)
    assert match, f"no section {heading!r} in:\n{text}"
    return match.group(1)


def days_in(zone: str) -> set[date]:
    """The days in ``zone`` of the last two minutes, so a test straddling midnight passes."""
    now = datetime.now(ZoneInfo(zone))
    return {now.date(), (now - timedelta(minutes=2)).date()}


def memory_line(path: Path, memory_id: str) -> str:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if memory_id in line]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    """A freshly initialised vault."""
    root = tmp_path / "vault"
    ok(None, "init", root)
    return root


# -- init --------------------------------------------------------------------------


def test_init_creates_the_layout_and_reports_it_as_json(tmp_path: Path) -> None:
    root = tmp_path / "brain"

    report = ok_json(None, "init", root)

    assert report["root"] == str(root)
    assert report["kept"] == []
    for folder in LAYOUT_FOLDERS:
        assert (root / folder).is_dir(), folder
    for name in LAYOUT_NOTES:
        assert (root / name).is_file(), name
        assert name in report["created"]
    assert (root / ".memvault" / "config.toml").is_file()
    home = (root / "Home.md").read_text(encoding="utf-8")
    for link in ("[[User Profile]]", "[[Current Status]]", "[[MEMORY]]", "[[Known Issues]]"):
        assert link in home
    assert "[[Decision Log]]" in home


def test_second_init_creates_nothing_and_keeps_user_edits(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    first = ok(None, "init", root)
    assert first.stdout.startswith(f"Initialised vault at {root}: created ")
    (root / "Home.md").write_text("# My own home page\n\nHand-written.\n", encoding="utf-8")
    (root / "Templates" / "task.md").unlink()  # a template the user deleted comes back
    before = snapshot(root)

    again = ok_json(None, "--vault", root, "init")

    assert again["created"] == ["Templates/task.md"]
    assert "Home.md" in again["kept"]
    after = snapshot(root)
    assert {k: v for k, v in after.items() if k != "Templates/task.md"} == before
    third = ok(root, "init")  # vault from MEMVAULT_VAULT
    assert third.stdout.startswith(f"Vault at {root} is already complete; nothing changed.")
    assert snapshot(root) == after


def test_home_links_every_core_note_and_they_all_resolve(vault_dir: Path) -> None:
    data = ok_json(vault_dir, "note", "links", "Home")

    assert data["path"] == "Home.md"
    resolved = {link["resolved"] for link in data["links"]}
    assert None not in resolved
    assert {"User Profile.md", "MEMORY.md", "Current Status.md", "Known Issues.md"} <= resolved
    assert "Decisions/Decision Log.md" in resolved


def test_init_on_a_file_is_a_vault_error(tmp_path: Path) -> None:
    target = tmp_path / "not-a-folder"
    target.write_text("just a file\n", encoding="utf-8")

    message = fail(None, "init", target, code=EXIT_VAULT)

    assert "is a file" in message
    assert target.read_text(encoding="utf-8") == "just a file\n"


# -- memories ----------------------------------------------------------------------


def test_remember_appends_one_bullet_with_a_block_id(vault_dir: Path) -> None:
    result = ok(
        vault_dir,
        "remember",
        "I prefer short answers",
        "--category",
        "preference",
        "--importance",
        "0.8",
        "--tags",
        "ui,style",
    )

    match = re.fullmatch(r"Remembered (m-[0-9a-f]+) in Memory/Preferences\.md\n", result.stdout)
    assert match, result.stdout
    memory_id = match.group(1)
    note = vault_dir / "Memory" / "Preferences.md"
    line = memory_line(note, memory_id)
    assert line.startswith("- I prefer short answers #ui #style ")
    assert line.endswith(f" ^{memory_id}")
    assert "[importance:: 0.8]" in line
    assert "[source:: cli]" in line
    assert re.search(r"\[created:: \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\]", line)
    text = note.read_text(encoding="utf-8")
    assert text.startswith("---\ncategory: preference\n")
    assert text.endswith(line + "\n")


def test_remember_json_and_an_exact_duplicate(vault_dir: Path) -> None:
    first = ok_json(vault_dir, "remember", "Coffee at 7 every morning", "-c", "fact")

    assert set(first) == MEMORY_KEYS | {"created_new", "consolidation"}
    assert first["created_new"] is True
    assert first["path"] == "Memory/Facts.md"
    assert first["category"] == "fact"
    assert first["importance"] == 0.5
    assert first["source"] == "cli"

    again = ok(vault_dir, "remember", "Coffee  at 7 every morning")
    assert again.stdout.strip() == f"Already remembered as {first['id']} in Memory/Facts.md"
    again_json = ok_json(vault_dir, "remember", "Coffee at 7 every morning")
    assert again_json["created_new"] is False
    assert again_json["id"] == first["id"]
    text = (vault_dir / "Memory" / "Facts.md").read_text(encoding="utf-8")
    assert text.count("Coffee at 7 every morning") == 1
    assert text.count(first["id"]) == 1


def test_get_memories_and_forget(vault_dir: Path) -> None:
    dark = ok_json(vault_dir, "remember", "Prefers dark mode", "-c", "preference", "-t", "ui")
    work = ok_json(vault_dir, "remember", "Works at Acme", "-i", "0.9", "--tags", "work")

    got = ok_json(vault_dir, "get", dark["id"])
    assert got == {k: v for k, v in dark.items() if k not in ("created_new", "consolidation")}
    shown = ok(vault_dir, "get", dark["id"]).stdout.splitlines()
    assert shown[0] == "Prefers dark mode"
    assert shown[1].startswith(f"{dark['id']} ")
    assert "preference" in shown[1]
    assert "#ui" in shown[1]
    assert shown[2] == f"Memory/Preferences.md:{dark['line']}"

    assert {m["id"] for m in ok_json(vault_dir, "memories")} == {dark["id"], work["id"]}
    by_category = ok_json(vault_dir, "memories", "--category", "preference")
    assert [m["id"] for m in by_category] == [dark["id"]]
    assert [m["id"] for m in ok_json(vault_dir, "memories", "--tag", "work")] == [work["id"]]
    table = ok(vault_dir, "memories").stdout
    assert "2 memories" in table
    assert "Works at Acme" in table

    forgotten = ok(vault_dir, "forget", dark["id"])
    assert forgotten.stdout.startswith(f"Forgot {dark['id']}: Prefers dark mode")
    assert dark["id"] not in (vault_dir / "Memory" / "Preferences.md").read_text(encoding="utf-8")
    assert work["id"] in (vault_dir / "Memory" / "Facts.md").read_text(encoding="utf-8")
    fail(vault_dir, "get", dark["id"], code=EXIT_NOT_FOUND)
    fail(vault_dir, "forget", dark["id"], code=EXIT_NOT_FOUND)
    assert [m["id"] for m in ok_json(vault_dir, "memories")] == [work["id"]]


def test_memories_are_listed_oldest_first_within_a_category(vault_dir: Path) -> None:
    ids = [ok_json(vault_dir, "remember", f"Fact number {n}")["id"] for n in range(3)]

    assert [m["id"] for m in ok_json(vault_dir, "memories")] == ids
    assert [m["id"] for m in ok_json(vault_dir, "memories", "--limit", "2")] == ids[1:]


def test_memories_limit_shows_the_newest_across_categories(vault_dir: Path) -> None:
    older = ok_json(vault_dir, "remember", "Prefers dark mode", "-c", "preference")
    newest = ok_json(vault_dir, "remember", "Works at Acme", "-c", "fact")
    if older["created"] == newest["created"]:
        pytest.skip("stored in the same second: the vault cannot tell which came first")

    listed = ok_json(vault_dir, "memories", "--limit", "1")

    assert [m["id"] for m in listed] == [newest["id"]]


def test_no_memories_yet_is_said_plainly(vault_dir: Path) -> None:
    assert ok_json(vault_dir, "memories") == []
    assert "No memories yet" in ok(vault_dir, "memories").stdout


def test_memories_edited_or_deleted_by_hand_are_respected(vault_dir: Path) -> None:
    note = vault_dir / "Memory" / "Facts.md"
    memory = ok_json(vault_dir, "remember", "Lives in Berlin", "-c", "fact")

    note.write_text(
        note.read_text(encoding="utf-8").replace("Lives in Berlin", "Lives in Hamburg"),
        encoding="utf-8",
    )
    assert ok_json(vault_dir, "get", memory["id"])["text"] == "Lives in Hamburg"

    with note.open("a", encoding="utf-8") as handle:
        handle.write("- Has a cat named Miso\n")  # typed in Obsidian, no block id
    typed = [m for m in ok_json(vault_dir, "memories") if m["text"] == "Has a cat named Miso"]
    assert len(typed) == 1
    assert typed[0]["category"] == "fact"
    ok(vault_dir, "forget", typed[0]["id"])
    assert "Miso" not in note.read_text(encoding="utf-8")
    assert "Lives in Hamburg" in note.read_text(encoding="utf-8")

    kept = [line for line in note.read_text(encoding="utf-8").splitlines() if "Hamburg" not in line]
    note.write_text("\n".join(kept) + "\n", encoding="utf-8")
    fail(vault_dir, "get", memory["id"], code=EXIT_NOT_FOUND)
    assert ok_json(vault_dir, "memories") == []


def test_remember_reports_the_same_tags_as_get(vault_dir: Path) -> None:
    stored = ok_json(vault_dir, "remember", "Likes #coffee in the morning")

    read_back = ok_json(vault_dir, "get", stored["id"])

    assert read_back["tags"] == ["coffee"]
    assert stored["tags"] == read_back["tags"]


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["remember", "x", "--category", "nope"], EXIT_INVALID, "Unknown memory category"),
        (["remember", "x", "--importance", "1.5"], EXIT_INVALID, "between 0 and 1"),
        (["remember", "x", "--importance", "-0.5"], EXIT_INVALID, "between 0 and 1"),
        (["remember", "   "], EXIT_INVALID, "needs some text"),
        (["remember", "x", "--tags", "123"], EXIT_INVALID, "not a valid tag"),
        (["memories", "--category", "nope"], EXIT_INVALID, "Unknown memory category"),
        (["get", "m-00000000"], EXIT_NOT_FOUND, "No memory with id"),
        (["forget", "m-00000000"], EXIT_NOT_FOUND, "No memory with id"),
    ],
)
def test_memory_mistakes_change_nothing(
    vault_dir: Path, args: list[str], code: int, words: str
) -> None:
    before = snapshot(vault_dir)

    message = fail(vault_dir, *args, code=code)

    assert words in message
    assert snapshot(vault_dir) == before


def test_an_unparsable_option_value_is_a_usage_error(vault_dir: Path) -> None:
    result = invoke(vault_dir, "remember", "x", "--importance", "very")

    assert result.exit_code == 2
    assert "--importance" in result.stderr
    assert result.stdout == ""


# -- tasks -------------------------------------------------------------------------


def test_task_add_writes_a_note_and_show_reads_it(vault_dir: Path) -> None:
    data = ok_json(
        vault_dir,
        "task",
        "add",
        "Fix login bug",
        "-d",
        "Users cannot log in",
        "-p",
        "high",
        "--due",
        "2030-01-05",
        "--project",
        "Apollo",
        "-t",
        "bug,web",
        "-s",
        "Reproduce",
        "-s",
        "Fix it",
    )

    assert set(data) == TASK_KEYS
    assert data["path"] == "Tasks/active/Fix login bug.md"
    assert data["title"] == "Fix login bug"
    assert (data["status"], data["priority"], data["due"]) == ("todo", "high", "2030-01-05")
    assert data["project"] == "Apollo"
    assert data["tags"] == ["bug", "web"]
    assert data["description"] == "Users cannot log in"
    assert data["steps"] == [
        {"text": "Reproduce", "done": False},
        {"text": "Fix it", "done": False},
    ]
    assert data["completed"] is None

    note = vault_dir / data["path"]
    meta = frontmatter(note)
    assert meta["status"] == "todo"
    assert meta["priority"] == "high"
    assert meta["due"] == date(2030, 1, 5)
    assert meta["project"] == "[[Apollo]]"
    assert meta["tags"] == ["bug", "web"]
    assert isinstance(meta["created"], date)
    text = note.read_text(encoding="utf-8")
    assert "# Fix login bug\n" in text
    assert section(text, "Description").strip() == "Users cannot log in"
    assert section(text, "Steps").strip() == "- [ ] Reproduce\n- [ ] Fix it"

    assert ok_json(vault_dir, "task", "show", "fix login bug") == data
    assert ok_json(vault_dir, "task", "show", "Fix login bug.md") == data
    shown = ok(vault_dir, "task", "show", "login").stdout
    assert shown.startswith("Fix login bug  [todo, high]\n")
    assert "due 2030-01-05" in shown
    assert "[ ] Reproduce" in shown
    assert shown.rstrip().endswith("Tasks/active/Fix login bug.md")
    added = ok(vault_dir, "task", "add", "Second task")
    assert added.stdout.strip() == "Created task Tasks/active/Second task.md"


def test_task_list_filters(vault_dir: Path) -> None:
    ok(vault_dir, "task", "add", "Buy milk", "--due", "2030-02-01", "-p", "low", "-t", "home")
    ok(vault_dir, "task", "add", "Plan trip", "-p", "medium", "-t", "home")
    ok(
        vault_dir,
        *("task", "add", "Write report", "--due", "2030-01-10", "-p", "urgent"),
        *("--project", "Apollo", "-t", "work"),
    )
    ok(vault_dir, "task", "add", "Old chore")
    ok(vault_dir, "task", "done", "Old chore")

    def titles(*args: str) -> list[str]:
        return [t["title"] for t in ok_json(vault_dir, "task", "list", *args)]

    assert titles() == ["Write report", "Plan trip", "Buy milk"]  # most urgent first
    assert titles("--status", "todo") == ["Write report", "Plan trip", "Buy milk"]
    assert titles("--status", "done") == ["Old chore"]
    assert titles("--status", "todo,done") == ["Write report", "Plan trip", "Buy milk", "Old chore"]
    assert titles("--all") == ["Write report", "Plan trip", "Buy milk", "Old chore"]
    assert titles("--status", "all") == titles("--all")
    assert titles("--project", "Apollo") == ["Write report"]
    assert titles("--project", "[[Apollo]]") == ["Write report"]
    assert titles("--tag", "home") == ["Plan trip", "Buy milk"]
    assert titles("--tag", "#home") == ["Plan trip", "Buy milk"]
    assert titles("--due-before", "2030-01-31") == ["Write report"]
    assert titles("--due-before", "2030-02-01") == ["Write report", "Buy milk"]
    assert titles("--tag", "home", "--due-before", "2030-12-31") == ["Buy milk"]
    assert titles("--tag", "nothing") == []

    table = ok(vault_dir, "task", "list").stdout
    assert "3 tasks" in table
    assert "Write report" in table
    assert "Old chore" not in table
    assert ok(vault_dir, "task", "list", "--tag", "nothing").stdout.strip() == "No matching tasks."


def test_task_update_status_done_moves_the_note_and_back(vault_dir: Path) -> None:
    ok(vault_dir, "task", "add", "Ship it")
    active = vault_dir / "Tasks" / "active" / "Ship it.md"
    completed = vault_dir / "Tasks" / "completed" / "Ship it.md"

    result = ok(vault_dir, "task", "update", "Ship it", "status", "done")

    assert result.stdout.strip() == "Updated Tasks/completed/Ship it.md: status = done"
    assert not active.exists()
    meta = frontmatter(completed)
    assert meta["status"] == "done"
    assert isinstance(meta["completed"], date)
    assert ok_json(vault_dir, "task", "list") == []
    [closed] = ok_json(vault_dir, "task", "list", "--all")
    assert (closed["path"], closed["status"]) == ("Tasks/completed/Ship it.md", "done")
    assert closed["completed"] == meta["completed"].isoformat()

    reopened = ok_json(vault_dir, "task", "update", "Ship it", "status", "in progress")
    assert (reopened["path"], reopened["status"]) == ("Tasks/active/Ship it.md", "in_progress")
    assert reopened["completed"] is None
    assert active.exists()
    assert not completed.exists()

    assert ok_json(vault_dir, "task", "update", "Ship it", "priority", "urgent")["priority"] == (
        "urgent"
    )
    assert ok_json(vault_dir, "task", "update", "Ship it", "due", "2031-05-06")["due"] == (
        "2031-05-06"
    )
    assert frontmatter(active)["due"] == date(2031, 5, 6)
    assert ok_json(vault_dir, "task", "update", "Ship it", "due", "")["due"] is None
    assert ok_json(vault_dir, "task", "update", "Ship it", "tags", "a,b")["tags"] == ["a", "b"]

    done = ok(vault_dir, "task", "done", "Ship it")
    assert done.stdout.strip() == "Completed Ship it -> Tasks/completed/Ship it.md"
    assert completed.exists()
    assert not active.exists()
    assert frontmatter(completed)["status"] == "done"


def test_task_done_json(vault_dir: Path) -> None:
    ok(vault_dir, "task", "add", "Pay rent", "--due", "2030-03-01")

    data = ok_json(vault_dir, "task", "done", "Pay rent")

    assert set(data) == TASK_KEYS
    assert data["path"] == "Tasks/completed/Pay rent.md"
    assert data["status"] == "done"
    assert data["completed"] == frontmatter(vault_dir / data["path"])["completed"].isoformat()
    assert data["due"] == "2030-03-01"


def test_task_note_adds_a_dated_line(vault_dir: Path) -> None:
    ok(vault_dir, "task", "add", "Call the bank")

    data = ok_json(vault_dir, "task", "note", "Call the bank", "Asked about the fee")
    human = ok(vault_dir, "task", "note", "Call the bank", "They will call back")

    assert human.stdout.strip() == "Noted on Tasks/active/Call the bank.md"
    assert re.fullmatch(r"- \d{4}-\d{2}-\d{2} \d{2}:\d{2}: Asked about the fee", data["notes"])
    notes = section(
        (vault_dir / "Tasks" / "active" / "Call the bank.md").read_text(encoding="utf-8"), "Notes"
    )
    lines = [line for line in notes.splitlines() if line.strip()]
    assert len(lines) == 2
    assert lines[0].endswith(": Asked about the fee")
    assert lines[1].endswith(": They will call back")


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["task", "show", "Nope"], EXIT_NOT_FOUND, "No task named 'Nope'"),
        (["task", "done", "Nope"], EXIT_NOT_FOUND, "No task named"),
        (["task", "note", "Nope", "hi"], EXIT_NOT_FOUND, "No task named"),
        (["task", "update", "Nope", "priority", "high"], EXIT_NOT_FOUND, "No task named"),
        (["task", "add", "X", "--due", "someday"], EXIT_INVALID, "'someday' is not a date"),
        (["task", "add", "X", "--due", "2030-02-30"], EXIT_INVALID, "is not a date"),
        (["task", "add", "X", "--priority", "meh"], EXIT_INVALID, "Unknown priority"),
        (["task", "add", "   "], EXIT_INVALID, "needs a title"),
        (["task", "update", "Write docs", "status", "bogus"], EXIT_INVALID, "Unknown task status"),
        (["task", "update", "Write docs", "due", "31/12/2030"], EXIT_INVALID, "is not a date"),
        (["task", "update", "Write docs", "completed", "2020-01-01"], EXIT_INVALID, "set by"),
        (["task", "update", "Write docs", "bad field", "x"], EXIT_INVALID, "not a field name"),
        (["task", "update", "Write docs", "title", "Write tests"], EXIT_CONFLICT, "already"),
        (["task", "list", "--due-before", "soon"], EXIT_INVALID, "is not a date"),
        (["task", "list", "--status", "bogus"], EXIT_INVALID, "Unknown task status"),
        (["task", "show", "Write"], EXIT_INVALID, "matches several tasks"),
    ],
)
def test_task_mistakes_change_nothing(
    vault_dir: Path, args: list[str], code: int, words: str
) -> None:
    ok(vault_dir, "task", "add", "Write docs")
    ok(vault_dir, "task", "add", "Write tests")
    before = snapshot(vault_dir)

    message = fail(vault_dir, *args, code=code)

    assert words in message
    assert snapshot(vault_dir) == before


# -- contacts ----------------------------------------------------------------------


def test_contact_add_log_show_and_list(vault_dir: Path) -> None:
    data = ok_json(
        vault_dir,
        *("contact", "add", "Alice Smith", "-r", "friend", "--email", "alice@example.com"),
        *("--phone", "+49 30 1234567", "--alias", "Ali", "--id", "telegram=123456"),
        *("--notes", "Met at PyCon"),
    )

    assert data["path"] == "Contacts/Alice Smith.md"
    assert data["identities"] == {"telegram": "123456"}
    note = vault_dir / "Contacts" / "Alice Smith.md"
    raw = note.read_text(encoding="utf-8")
    assert 'telegram: "123456"' in raw  # a string, so a leading zero or '+' would survive
    meta = frontmatter(note)
    assert meta["telegram"] == "123456"
    assert meta["email"] == "alice@example.com"
    assert meta["relationship"] == "friend"
    assert meta["aliases"] == ["Ali"]
    assert "Met at PyCon" in section(raw, "Notes")

    logged = ok(vault_dir, "contact", "log", "telegram:123456", "Called about the offer")
    assert logged.stdout.startswith("Logged on Contacts/Alice Smith.md: ")
    assert logged.stdout.strip().endswith(": Called about the offer")
    interactions = section(note.read_text(encoding="utf-8"), "Interactions")
    assert re.search(r"^- \d{4}-\d{2}-\d{2}: Called about the offer$", interactions, re.M)

    shown = ok_json(vault_dir, "contact", "show", "telegram:123456")
    assert shown["name"] == "Alice Smith"
    assert shown["phone"] == "+49 30 1234567"
    assert shown["interactions"][-1].endswith(": Called about the offer")
    assert ok_json(vault_dir, "contact", "show", "Ali")["path"] == "Contacts/Alice Smith.md"
    assert ok_json(vault_dir, "contact", "show", "alice smith")["path"] == data["path"]
    human = ok(vault_dir, "contact", "show", "telegram:123456").stdout
    assert human.startswith("Alice Smith  (friend)\n")
    assert "telegram: 123456" in human
    assert "Also known as: Ali" in human

    ok(vault_dir, "contact", "add", "Bob", "--id", "whatsapp:+4912345")
    assert [c["name"] for c in ok_json(vault_dir, "contact", "list")] == ["Alice Smith", "Bob"]
    assert ok_json(vault_dir, "contact", "show", "whatsapp:+4912345")["name"] == "Bob"
    table = ok(vault_dir, "contact", "list").stdout
    assert "2 contacts" in table
    assert "telegram:123456" in table


def test_no_contacts_yet(vault_dir: Path) -> None:
    assert ok_json(vault_dir, "contact", "list") == []
    assert "No contacts yet" in ok(vault_dir, "contact", "list").stdout


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["contact", "add", "Bob", "--id", "telegram=123456"], EXIT_CONFLICT, "already belongs"),
        (["contact", "add", "Bob", "--id", "nonsense"], EXIT_INVALID, "CHANNEL=ID"),
        (["contact", "add", "Bob", "--id", "fax=1"], EXIT_INVALID, "Unknown channel"),
        (["contact", "add", "Bob", "--email", "not-an-email"], EXIT_INVALID, "not an email"),
        (["contact", "add", "alice smith"], EXIT_CONFLICT, "already exists"),
        (["contact", "add", "  "], EXIT_INVALID, "needs a name"),
        (["contact", "show", "Nobody"], EXIT_NOT_FOUND, "No contact named"),
        (["contact", "show", "telegram:999"], EXIT_NOT_FOUND, "No contact named"),
        (["contact", "log", "Nobody", "hi"], EXIT_NOT_FOUND, "No contact named"),
        (["contact", "log", "Alice Smith", "  "], EXIT_INVALID, "empty"),
    ],
)
def test_contact_mistakes_change_nothing(
    vault_dir: Path, args: list[str], code: int, words: str
) -> None:
    ok(vault_dir, "contact", "add", "Alice Smith", "--id", "telegram=123456")
    before = snapshot(vault_dir)

    message = fail(vault_dir, *args, code=code)

    assert words in message
    assert snapshot(vault_dir) == before


# -- projects ----------------------------------------------------------------------


def test_project_add_link_list_and_show(vault_dir: Path) -> None:
    created = ok_json(
        vault_dir, "project", "add", "Apollo", "-d", "Land on the moon", "-t", "space"
    )
    assert created["path"] == "Projects/Apollo.md"
    assert created["status"] == "active"
    assert created["overview"] == "Land on the moon"
    assert "space" in created["tags"]
    assert created["tasks"] == []

    ok(vault_dir, "task", "add", "Build rocket")
    linked = ok(vault_dir, "project", "link", "Apollo", "Build rocket")
    assert linked.stdout.strip() == "Apollo now lists 1 task."
    ok(vault_dir, "task", "add", "Train crew", "--project", "apollo")

    project_note = (vault_dir / "Projects" / "Apollo.md").read_text(encoding="utf-8")
    assert "[[Build rocket]]" in section(project_note, "Tasks")
    assert "[[Train crew]]" in section(project_note, "Tasks")
    assert frontmatter(vault_dir / "Tasks" / "active" / "Build rocket.md")["project"] == (
        "[[Apollo]]"
    )
    assert frontmatter(vault_dir / "Tasks" / "active" / "Train crew.md")["project"] == "[[Apollo]]"

    shown = ok_json(vault_dir, "project", "show", "Apollo")
    assert shown["tasks"] == ["Build rocket", "Train crew"]
    project_tasks = ok_json(vault_dir, "task", "list", "--project", "Apollo")
    assert sorted(t["title"] for t in project_tasks) == ["Build rocket", "Train crew"]
    human = ok(vault_dir, "project", "show", "Apollo").stdout
    assert human.startswith("Apollo  [active]\nLand on the moon\n")
    assert "  - Build rocket\n" in human

    ok(vault_dir, "project", "add", "Zeus", "--status", "paused")
    assert [p["name"] for p in ok_json(vault_dir, "project", "list")] == ["Apollo", "Zeus"]
    assert [p["name"] for p in ok_json(vault_dir, "project", "list", "--status", "paused")] == [
        "Zeus"
    ]
    assert "2 projects" in ok(vault_dir, "project", "list").stdout


def test_renaming_a_task_keeps_its_project_listing_valid(vault_dir: Path) -> None:
    ok(vault_dir, "project", "add", "Apollo")
    ok(vault_dir, "task", "add", "Old name", "--project", "Apollo")

    renamed = ok_json(vault_dir, "task", "update", "Old name", "title", "New name")

    assert renamed["path"] == "Tasks/active/New name.md"
    assert ok_json(vault_dir, "project", "show", "Apollo")["tasks"] == ["New name"]
    links = ok_json(vault_dir, "note", "links", "Projects/Apollo.md")["links"]
    assert all(link["resolved"] for link in links)


def test_linking_a_task_to_another_project_moves_it(vault_dir: Path) -> None:
    ok(vault_dir, "project", "add", "Apollo")
    ok(vault_dir, "project", "add", "Zeus")
    ok(vault_dir, "task", "add", "Build rocket", "--project", "Apollo")

    ok(vault_dir, "project", "link", "Zeus", "Build rocket")

    assert ok_json(vault_dir, "task", "show", "Build rocket")["project"] == "Zeus"
    assert ok_json(vault_dir, "project", "show", "Zeus")["tasks"] == ["Build rocket"]
    assert ok_json(vault_dir, "project", "show", "Apollo")["tasks"] == []
    task_note = (vault_dir / "Tasks" / "active" / "Build rocket.md").read_text(encoding="utf-8")
    assert "[[Apollo]]" not in task_note


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["project", "add", "apollo"], EXIT_CONFLICT, "already exists"),
        (["project", "add", "X", "--status", "weird"], EXIT_INVALID, "Unknown project status"),
        (["project", "link", "Nope", "Build rocket"], EXIT_NOT_FOUND, "No project named"),
        (["project", "link", "Apollo", "No such task"], EXIT_NOT_FOUND, "No task named"),
        (["project", "show", "Nope"], EXIT_NOT_FOUND, "No project named"),
    ],
)
def test_project_mistakes_change_nothing(
    vault_dir: Path, args: list[str], code: int, words: str
) -> None:
    ok(vault_dir, "project", "add", "Apollo")
    ok(vault_dir, "task", "add", "Build rocket")
    before = snapshot(vault_dir)

    message = fail(vault_dir, *args, code=code)

    assert words in message
    assert snapshot(vault_dir) == before


# -- journal -----------------------------------------------------------------------


def test_journal_add_show_and_list(vault_dir: Path) -> None:
    utc = {"MEMVAULT_TIMEZONE": "UTC"}
    first = ok_json(vault_dir, "journal", "add", "Deployed v2", "--section", "actions", env=utc)
    assert first["section"] == "Actions Taken"
    match = re.fullmatch(r"Journal/(\d{4}-\d{2}-\d{2})\.md", first["path"])
    assert match, first
    day = match.group(1)
    assert date.fromisoformat(day) in days_in("UTC")

    added = ok(vault_dir, "journal", "add", "User seemed tired", env=utc)
    assert added.stdout.strip() == f"Added to Journal/{day}.md under Observations"
    ok(vault_dir, "journal", "add", "Ask about the trip", "-s", "Follow-ups", env=utc)
    ok(vault_dir, "journal", "add", "Try the new tool", "-s", "Ideas", env=utc)

    text = (vault_dir / "Journal" / f"{day}.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[:5] == [
        "Actions Taken",
        "Commands Received",
        "Observations",
        "Decisions Made",
        "Follow-ups",
    ]
    assert "Ideas" in headings
    assert re.fullmatch(r"- \d{2}:\d{2} Deployed v2\n*", section(text, "Actions Taken"))
    assert re.fullmatch(r"- \d{2}:\d{2} User seemed tired\n*", section(text, "Observations"))
    assert re.fullmatch(r"- \d{2}:\d{2} Try the new tool\n*", section(text, "Ideas"))

    shown = ok_json(vault_dir, "journal", "show", env=utc)
    assert shown["date"] == day
    assert shown["path"] == f"Journal/{day}.md"
    assert [e.split(" ", 1)[1] for e in shown["sections"]["Follow-ups"]] == ["Ask about the trip"]
    assert shown["sections"]["Decisions Made"] == []
    assert ok_json(vault_dir, "journal", "show", day) == shown
    assert ok(vault_dir, "journal", "show", day).stdout.rstrip("\n") == text.rstrip("\n")
    assert ok_json(vault_dir, "journal", "list") == [day]
    assert ok(vault_dir, "journal", "list").stdout.strip() == day


def test_journal_day_follows_the_configured_timezone(vault_dir: Path) -> None:
    # UTC+14 and UTC-12 are always on different calendar days.
    (vault_dir / ".memvault" / "config.toml").write_text(
        'timezone = "Pacific/Kiritimati"\n', encoding="utf-8"
    )
    east = ok_json(vault_dir, "journal", "add", "From the east")
    west = ok_json(
        vault_dir, "journal", "add", "From the west", env={"MEMVAULT_TIMEZONE": "Etc/GMT+12"}
    )

    assert east["path"] in {f"Journal/{d}.md" for d in days_in("Pacific/Kiritimati")}
    assert west["path"] in {f"Journal/{d}.md" for d in days_in("Etc/GMT+12")}
    assert east["path"] != west["path"]
    assert len(ok_json(vault_dir, "journal", "list")) == 2


def test_no_journal_yet(vault_dir: Path) -> None:
    assert ok_json(vault_dir, "journal", "list") == []
    assert ok(vault_dir, "journal", "list").stdout.strip() == "No journal notes yet."


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["journal", "show", "2001-01-01"], EXIT_NOT_FOUND, "No journal entry for 2001-01-01"),
        (["journal", "show", "someday"], EXIT_INVALID, "is not a date"),
        (["journal", "add", "   "], EXIT_INVALID, "empty"),
        (["journal", "add", "x", "--section", "  "], EXIT_INVALID, "section"),
        (["journal", "add", "x", "--section", "[[x]]"], EXIT_INVALID, "cannot be a section"),
    ],
)
def test_journal_mistakes(vault_dir: Path, args: list[str], code: int, words: str) -> None:
    before = snapshot(vault_dir)

    message = fail(vault_dir, *args, code=code)

    assert words in message
    assert snapshot(vault_dir) == before


# -- notes -------------------------------------------------------------------------


def test_note_write_read_and_append(vault_dir: Path) -> None:
    alpha = vault_dir / "Ideas" / "Alpha.md"

    written = ok(vault_dir, "note", "write", "Ideas/Alpha", "--content", "# Alpha\nFirst line")
    assert written.stdout.strip() == "Wrote Ideas/Alpha.md"
    assert alpha.read_bytes() == b"# Alpha\nFirst line\n"

    assert ok(vault_dir, "note", "read", "Ideas/Alpha").stdout == "# Alpha\nFirst line\n"
    assert ok(vault_dir, "note", "read", "Ideas/Alpha.md").stdout == "# Alpha\nFirst line\n"
    view = ok_json(vault_dir, "note", "read", "Ideas/Alpha")
    assert view["path"] == "Ideas/Alpha.md"
    assert view["content"] == "# Alpha\nFirst line\n"
    assert view["title"] == "Alpha"
    assert view["headings"] == ["Alpha"]
    assert view["size"] == len(alpha.read_bytes())

    appended = ok(vault_dir, "note", "append", "Ideas/Alpha", "--content", "Second line")
    assert appended.stdout.strip() == "Appended to Ideas/Alpha.md"
    ok(vault_dir, "note", "append", "Ideas/Alpha.md", stdin="Third line\n")
    assert alpha.read_bytes() == b"# Alpha\nFirst line\nSecond line\nThird line\n"
    assert ok_json(vault_dir, "note", "append", "Ideas/Alpha", "--content", "4") == {
        "path": "Ideas/Alpha.md",
        "appended": True,
    }

    assert ok_json(vault_dir, "note", "write", "Ideas/Beta.md", stdin="# Beta\nfrom stdin") == {
        "path": "Ideas/Beta.md",
        "written": True,
    }
    assert (vault_dir / "Ideas" / "Beta.md").read_bytes() == b"# Beta\nfrom stdin\n"

    ok(vault_dir, "note", "append", "Inbox/Fresh", "--content", "a new note")
    assert (vault_dir / "Inbox" / "Fresh.md").read_bytes() == b"a new note\n"

    ok(vault_dir, "note", "write", "Ideas/Beta", "--content", "replaced")
    assert (vault_dir / "Ideas" / "Beta.md").read_bytes() == b"replaced\n"


def test_note_write_with_empty_stdin_is_refused_unless_allowed(vault_dir: Path) -> None:
    # An empty pipe (a failed command upstream) must not wipe a note by accident.
    (vault_dir / "Keep.md").write_text("precious\n", encoding="utf-8")
    message = fail(vault_dir, "note", "write", "Keep", stdin="", code=EXIT_INVALID)
    assert "content is empty" in message
    assert (vault_dir / "Keep.md").read_text(encoding="utf-8") == "precious\n"

    result = ok(vault_dir, "note", "write", "Empty", "--allow-empty", stdin="")
    assert result.stdout.strip() == "Wrote Empty.md"
    assert (vault_dir / "Empty.md").read_bytes() == b""
    message = fail(vault_dir, "note", "append", "Empty", stdin="", code=EXIT_INVALID)
    assert "Nothing to append" in message


def test_note_append_keeps_crlf_and_existing_bytes(vault_dir: Path) -> None:
    note = vault_dir / "Windows.md"
    note.write_bytes(b"line one\r\nline two")  # CRLF, no trailing newline

    ok(vault_dir, "note", "append", "Windows.md", "--content", "three")

    assert note.read_bytes() == b"line one\r\nline two\r\nthree\r\n"


def test_note_read_json_extracts_frontmatter_and_inline_tags(vault_dir: Path) -> None:
    content = textwrap.dedent(
        """\
        ---
        tags: [project, important]
        aliases: Moonshot, Apollo Program
        ---
        # Apollo

        Working on it #inline/nested today. ^intro

        ```python
        x = 1  # not-a-tag
        ```

        See https://example.com/page#anchor and `#code-tag`.
        """
    )
    ok(vault_dir, "note", "write", "Projects/Apollo", "--content", content)

    view = ok_json(vault_dir, "note", "read", "Projects/Apollo")

    assert view["tags"] == ["project", "important", "inline/nested"]
    assert view["aliases"] == ["Moonshot", "Apollo Program"]
    assert view["block_ids"] == ["intro"]
    assert view["frontmatter"]["tags"] == ["project", "important"]
    assert view["frontmatter_error"] is None
    assert (vault_dir / "Projects" / "Apollo.md").read_text(encoding="utf-8") == content


def test_note_links_shows_resolved_and_unresolved_links_and_backlinks(vault_dir: Path) -> None:
    apollo = textwrap.dedent(
        """\
        # Apollo

        See [[Beta Plan#Risks|the risks]], [[Nowhere]] and ![[diagram.png]].
        Also [[home]] and [the log](Decisions/Decision%20Log.md).

        ```
        [[Not a link]]
        ```
        """
    )
    ok(vault_dir, "note", "write", "Projects/Apollo.md", "--content", apollo)
    beta = "# Beta Plan\n\nBack to [[Apollo]].\n\n## Risks\nSee [[Projects/Apollo#Goals]].\n"
    ok(vault_dir, "note", "write", "Ideas/Beta Plan.md", "--content", beta)
    (vault_dir / "Ideas" / "diagram.png").write_bytes(PNG_BYTES)

    data = ok_json(vault_dir, "note", "links", "Projects/Apollo")

    assert data["path"] == "Projects/Apollo.md"
    got = [
        (link["target"], link["subpath"], link["alias"], link["embed"], link["resolved"])
        for link in data["links"]
    ]
    assert got == [
        ("Beta Plan", "Risks", "the risks", False, "Ideas/Beta Plan.md"),
        ("Nowhere", None, None, False, None),
        ("diagram.png", None, None, True, "Ideas/diagram.png"),
        ("home", None, None, False, "Home.md"),
        ("Decisions/Decision Log.md", None, "the log", False, "Decisions/Decision Log.md"),
    ]
    assert [link["line"] for link in data["links"]] == [3, 3, 3, 4, 4]
    assert data["links"][-1]["kind"] == "markdown"
    assert [(b["source"], b["line"]) for b in data["backlinks"]] == [
        ("Ideas/Beta Plan.md", 3),
        ("Ideas/Beta Plan.md", 6),
    ]

    human = ok(vault_dir, "note", "links", "Projects/Apollo").stdout
    assert "5 outgoing links" in human
    assert "(unresolved)" in human
    assert "Beta Plan#Risks" in human
    assert "!diagram.png" in human
    assert "2 backlinks" in human
    back = ok_json(vault_dir, "note", "links", "Ideas/Beta Plan")
    assert [b["source"] for b in back["backlinks"]] == ["Projects/Apollo.md"]


def test_note_links_survive_an_unrelated_non_utf8_note(vault_dir: Path) -> None:
    (vault_dir / "Old latin-1.md").write_bytes("caf\xe9 [[Home]]\n".encode("latin-1"))

    data = ok_json(vault_dir, "note", "links", "MEMORY")

    assert [link["resolved"] for link in data["links"]] == ["Home.md"]


def test_note_list_move_and_delete(vault_dir: Path) -> None:
    ok(vault_dir, "note", "write", "Ideas/A", "--content", "a")
    ok(vault_dir, "note", "write", "Ideas/Sub/B", "--content", "b")
    (vault_dir / "Ideas" / "picture.png").write_bytes(PNG_BYTES)

    listed = ok_json(vault_dir, "note", "list", "Ideas")
    assert [e["path"] for e in listed] == ["Ideas/A.md", "Ideas/Sub/B.md"]
    assert listed[0]["size"] == 2
    assert listed[0]["is_dir"] is False
    assert datetime.fromisoformat(listed[0]["modified"]).tzinfo is not None
    shallow = ok_json(vault_dir, "note", "list", "Ideas", "--shallow")
    assert [e["path"] for e in shallow] == ["Ideas/A.md"]
    with_files = ok_json(vault_dir, "note", "list", "Ideas", "--all-files")
    assert "Ideas/picture.png" in [e["path"] for e in with_files]
    everything = [e["path"] for e in ok_json(vault_dir, "note", "list")]
    assert "Home.md" in everything
    assert "Ideas/Sub/B.md" in everything
    assert not [p for p in everything if p.startswith(".")]
    assert "2 notes" in ok(vault_dir, "note", "list", "Ideas").stdout

    moved = ok(vault_dir, "note", "move", "Ideas/A.md", "Archive/A.md")
    assert moved.stdout.strip() == "Moved to Archive/A.md"
    assert (vault_dir / "Archive" / "A.md").read_bytes() == b"a\n"
    assert not (vault_dir / "Ideas" / "A.md").exists()
    into_folder = ok_json(vault_dir, "note", "move", "Archive/A", "Ideas/Sub")
    assert into_folder == {"path": "Ideas/Sub/A.md", "moved": True}
    renamed = ok_json(vault_dir, "note", "move", "Ideas/Sub/A.md", "Ideas/Sub/Renamed")
    assert renamed["path"] == "Ideas/Sub/Renamed.md"

    declined = invoke(vault_dir, "note", "delete", "Ideas/Sub/Renamed", stdin="n\n")
    assert declined.exit_code != 0
    assert (vault_dir / "Ideas" / "Sub" / "Renamed.md").exists()
    confirmed = ok(vault_dir, "note", "delete", "Ideas/Sub/Renamed", stdin="y\n")
    assert "Deleted Ideas/Sub/Renamed.md" in confirmed.stdout
    assert not (vault_dir / "Ideas" / "Sub" / "Renamed.md").exists()
    assert ok_json(vault_dir, "note", "delete", "Ideas/Sub/B.md", "--yes") == {
        "path": "Ideas/Sub/B.md",
        "deleted": True,
    }
    assert not (vault_dir / "Ideas" / "Sub" / "B.md").exists()


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["note", "read", "../outside.md"], EXIT_INVALID, "'..' is not allowed"),
        (["note", "read", "Ideas/../../outside.md"], EXIT_INVALID, "'..' is not allowed"),
        (["note", "write", "../outside.md", "--content", "x"], EXIT_INVALID, "'..'"),
        (["note", "append", "../outside", "--content", "x"], EXIT_INVALID, "'..'"),
        (["note", "write", "/tmp/outside.md", "--content", "x"], EXIT_INVALID, "is absolute"),
        (["note", "write", "~/outside.md", "--content", "x"], EXIT_INVALID, "is absolute"),
        (["note", "write", "C:/outside.md", "--content", "x"], EXIT_INVALID, "is absolute"),
        (["note", "read", "/etc/hostname"], EXIT_INVALID, "is absolute"),
        (["note", "write", ".memvault/config.toml", "--content", "x"], EXIT_INVALID, "hidden"),
        (["note", "write", ".obsidian/app.json", "--content", "x"], EXIT_INVALID, "hidden"),
        (["note", "write", "a<b", "--content", "x"], EXIT_INVALID, "invalid on common"),
        (["note", "write", "Ideas/CON", "--content", "x"], EXIT_INVALID, "reserved on Windows"),
        (["note", "write", "Trailing./x", "--content", "x"], EXIT_INVALID, "ends with"),
        (["note", "move", "Home.md", "../Home.md"], EXIT_INVALID, "'..'"),
        (["note", "delete", "../outside.md", "--yes"], EXIT_INVALID, "'..'"),
        (["note", "list", ".."], EXIT_INVALID, "'..'"),
        (["note", "links", "/etc/hostname"], EXIT_INVALID, "is absolute"),
        (["note", "read", "Nope"], EXIT_NOT_FOUND, "No note at Nope"),
        (["note", "links", "Nope"], EXIT_NOT_FOUND, "No note at Nope"),
        (["note", "delete", "Nope", "--yes"], EXIT_NOT_FOUND, "No note at Nope"),
        (["note", "move", "Nope", "Elsewhere"], EXIT_NOT_FOUND, "No note at Nope"),
        (["note", "list", "Nope"], EXIT_NOT_FOUND, "No folder at Nope"),
        (["note", "read", "Memory"], EXIT_INVALID, "is a folder"),
        (["note", "list", "Home.md"], EXIT_INVALID, "is a note"),
        (["note", "read", "picture.png"], EXIT_INVALID, "not UTF-8"),
        (["note", "write", "Home", "--content", "x", "--no-overwrite"], EXIT_CONFLICT, "exists"),
        (["note", "move", "MEMORY.md", "Home.md"], EXIT_CONFLICT, "already exists"),
        (["note", "append", "Ideas/X", "--content", ""], EXIT_INVALID, "Nothing to append"),
    ],
)
def test_note_mistakes_change_nothing(
    tmp_path: Path, vault_dir: Path, args: list[str], code: int, words: str
) -> None:
    (vault_dir / "picture.png").write_bytes(PNG_BYTES)
    outside_before = sorted(p.name for p in tmp_path.iterdir())
    before = snapshot(vault_dir)

    message = fail(vault_dir, *args, code=code)

    assert words in message
    assert snapshot(vault_dir) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == outside_before


def test_a_symlink_out_of_the_vault_is_refused(tmp_path: Path, vault_dir: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.md").write_text("top secret\n", encoding="utf-8")
    (vault_dir / "Escape").symlink_to(secret, target_is_directory=True)

    read = fail(vault_dir, "note", "read", "Escape/key.md", code=EXIT_INVALID)
    write = fail(vault_dir, "note", "write", "Escape/new.md", "--content", "x", code=EXIT_INVALID)

    assert "outside the vault" in read
    assert "outside the vault" in write
    assert sorted(p.name for p in secret.iterdir()) == ["key.md"]
    assert (secret / "key.md").read_text(encoding="utf-8") == "top secret\n"


# -- user text is printed as written ---------------------------------------------


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["get", "[/x]"], "'[/x]'"),
        (["note", "read", "Ideas/x[/b]"], "Ideas/x[/b]"),
        (["task", "show", "No [red]such[/red] task"], "'No [red]such[/red] task'"),
    ],
)
def test_error_messages_quote_user_input_literally(
    vault_dir: Path, args: list[str], shown: str
) -> None:
    message = fail(vault_dir, *args, code=EXIT_NOT_FOUND)

    assert shown in message


def test_tables_show_user_text_literally(vault_dir: Path) -> None:
    ok(vault_dir, "remember", "Stray closing tag [/bold] in text")
    ok(vault_dir, "remember", "Writes [bold]markup[/bold] literally")

    table = ok(vault_dir, "memories").stdout

    assert "Stray closing tag [/bold] in text" in table
    assert "Writes [bold]markup[/bold] literally" in table


def test_note_read_prints_emoji_shortcodes_as_written(vault_dir: Path) -> None:
    content = "Status :white_check_mark: done, see :smile:\n"
    ok(vault_dir, "note", "write", "Emoji", "--content", content)
    memory = ok_json(vault_dir, "remember", "Ships with :rocket: speed")

    assert ok(vault_dir, "note", "read", "Emoji").stdout == content
    assert ok(vault_dir, "get", memory["id"]).stdout.splitlines()[0] == (
        "Ships with :rocket: speed"
    )


# -- status ------------------------------------------------------------------------


def test_status_counts_each_kind(vault_dir: Path) -> None:
    fresh = ok_json(vault_dir, "status")
    assert fresh["root"] == str(vault_dir)
    assert fresh["counts"] == {
        "memories": 0,
        "tasks_open": 0,
        "tasks_closed": 0,
        "projects": 0,
        "contacts": 0,
        "journal_days": 0,
        "insights": 0,
        "skills": 0,
    }

    ok(vault_dir, "remember", "Prefers tea", "-c", "preference")
    ok(vault_dir, "remember", "Born in 1990")
    gone = ok_json(vault_dir, "remember", "Temporary thought")
    ok(vault_dir, "forget", gone["id"])
    ok(vault_dir, "task", "add", "Open one")
    ok(vault_dir, "task", "add", "Closed one")
    ok(vault_dir, "task", "done", "Closed one")
    ok(vault_dir, "project", "add", "Apollo")
    ok(vault_dir, "contact", "add", "Alice")
    ok(vault_dir, "journal", "add", "Counted things")

    summary = ok_json(vault_dir, "status")

    assert summary["counts"] == {
        "memories": 2,
        "tasks_open": 1,
        "tasks_closed": 1,
        "projects": 1,
        "contacts": 1,
        "journal_days": 1,
        "insights": 0,
        "skills": 0,
    }
    assert summary["memories_by_category"] == {"fact": 1, "preference": 1}
    assert summary["notes"] == len(ok_json(vault_dir, "note", "list"))
    assert summary["last_activity"]["path"] is not None
    assert datetime.fromisoformat(summary["last_activity"]["modified"]).tzinfo is not None
    human = ok(vault_dir, "status").stdout
    assert re.search(r"Open tasks\s*\S\s*1\b", human)
    assert re.search(r"Memories\s*\S\s*2\b", human)
    assert "Memories by category: fact 1, preference 1" in human
    assert "Last activity: " in human


# -- config ------------------------------------------------------------------------


def test_config_show_says_where_each_setting_comes_from(tmp_path: Path, vault_dir: Path) -> None:
    config = vault_dir / ".memvault" / "config.toml"

    data = ok_json(vault_dir, "config", "show")
    assert data["config_file"] == str(config)
    settings = data["settings"]
    assert settings["vault"] == {"value": str(vault_dir), "source": "env MEMVAULT_VAULT"}
    assert settings["timezone"] == {"value": None, "source": "default"}
    assert settings["owner_name"] == {"value": "the owner", "source": "default"}
    assert settings["memory.default_importance"] == {"value": 0.5, "source": "default"}

    config.write_text(
        textwrap.dedent(
            """\
            timezone = "Asia/Tokyo"
            owner_name = "Alex"

            [memory]
            default_importance = 0.7
            """
        ),
        encoding="utf-8",
    )
    from_file = ok_json(vault_dir, "config", "show")["settings"]
    assert from_file["timezone"] == {"value": "Asia/Tokyo", "source": f"config.toml ({config})"}
    assert from_file["owner_name"]["source"] == f"config.toml ({config})"
    assert from_file["memory.default_importance"]["value"] == 0.7

    from_env = ok_json(
        vault_dir,
        "config",
        "show",
        env={"MEMVAULT_TIMEZONE": "UTC", "MEMVAULT_MEMORY__DEFAULT_CATEGORY": "preference"},
    )["settings"]
    assert from_env["timezone"] == {"value": "UTC", "source": "env MEMVAULT_TIMEZONE"}
    assert from_env["owner_name"]["value"] == "Alex"  # env overrides only what it sets
    assert from_env["memory.default_category"] == {
        "value": "preference",
        "source": "env MEMVAULT_MEMORY__DEFAULT_CATEGORY",
    }

    elsewhere = tmp_path / "elsewhere"
    by_flag = ok_json(elsewhere, "--vault", vault_dir, "config", "show")["settings"]
    assert by_flag["vault"] == {"value": str(vault_dir), "source": "flag --vault"}
    assert by_flag["timezone"]["value"] == "Asia/Tokyo"  # the flagged vault's config.toml
    after_command = ok_json(elsewhere, "config", "show", "--vault", vault_dir)["settings"]
    assert after_command["vault"] == by_flag["vault"]

    table = ok(vault_dir, "config", "show", env={"MEMVAULT_TIMEZONE": "UTC"}).stdout
    assert f"config file: {config}" in table
    assert re.search(r"timezone\s*\S\s*UTC\s*\S\s*env MEMVAULT_TIMEZONE", table)
    assert re.search(r"owner_name\s*\S\s*Alex\s*\S\s*config\.toml", table)
    assert re.search(r"lock_timeout\s*\S\s*10\.0\s*\S\s*default", table)


def test_settings_take_effect(vault_dir: Path) -> None:
    (vault_dir / ".memvault" / "config.toml").write_text(
        "[memory]\ndefault_importance = 0.7\n", encoding="utf-8"
    )

    memory = ok_json(
        vault_dir,
        "remember",
        "Answers in German",
        env={"MEMVAULT_MEMORY__DEFAULT_CATEGORY": "preference"},
    )

    assert memory["importance"] == 0.7
    assert memory["category"] == "preference"
    line = memory_line(vault_dir / "Memory" / "Preferences.md", memory["id"])
    assert "[importance:: 0.7]" in line


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ("timezone = \n", "is not valid TOML"),
        ('timezone = "Europe/Berlin"\ntimezone = "UTC"\n', "is not valid TOML"),
        ('colour = "red"\n', "'colour'"),
        ('timezone = "Mars/Olympus"\n', "Unknown timezone 'Mars/Olympus'"),
        ("lock_timeout = -1\n", "'lock_timeout'"),
        ("[memory]\ndefault_importance = 3\n", "'memory.default_importance'"),
        ('[memory]\nflavour = "x"\n', "'memory.flavour'"),
        ('[memory]\ndefault_category = "nope"\n', "Unknown memory category 'nope'"),
        ('vault = "/elsewhere"\n', "cannot move the vault"),
    ],
)
def test_an_invalid_config_file_is_one_clear_error(vault_dir: Path, toml: str, words: str) -> None:
    (vault_dir / ".memvault" / "config.toml").write_text(toml, encoding="utf-8")
    before = snapshot(vault_dir)

    message = fail(vault_dir, "status", code=EXIT_CONFIG)
    fail(vault_dir, "remember", "x", code=EXIT_CONFIG)

    assert words in message
    assert snapshot(vault_dir) == before


@pytest.mark.parametrize(
    "toml", ["timezone = \n", 'colour = "red"\n', 'timezone = "Mars/Olympus"\n']
)
def test_config_show_reports_an_invalid_config_file(vault_dir: Path, toml: str) -> None:
    (vault_dir / ".memvault" / "config.toml").write_text(toml, encoding="utf-8")

    message = fail(vault_dir, "config", "show", code=EXIT_CONFIG)

    assert "config.toml" in message


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MEMVAULT_TIMEZONE", "Nowhere/Land"),
        ("MEMVAULT_LOCK_TIMEOUT", "soon"),
        ("MEMVAULT_MEMORY__DEFAULT_IMPORTANCE", "2"),
    ],
)
def test_an_invalid_environment_variable_is_one_clear_error(
    vault_dir: Path, variable: str, value: str
) -> None:
    message = fail(vault_dir, "status", env={variable: value}, code=EXIT_CONFIG)

    assert variable in message


# -- a vault that is not there -----------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["status"],
        ["remember", "x"],
        ["get", "m-00000000"],
        ["memories"],
        ["task", "add", "X"],
        ["task", "list"],
        ["contact", "list"],
        ["project", "add", "X"],
        ["journal", "add", "x"],
        ["note", "write", "X", "--content", "y"],
        ["note", "list"],
    ],
)
def test_commands_on_a_missing_vault_fail_without_creating_it(
    tmp_path: Path, args: list[str]
) -> None:
    missing = tmp_path / "no-vault-here"

    message = fail(missing, *args, code=EXIT_VAULT)

    assert message == f"Error: No vault at {missing}."
    assert not missing.exists()


def test_a_vault_flag_naming_a_file_is_a_usage_error(tmp_path: Path) -> None:
    target = tmp_path / "file.md"
    target.write_text("hello\n", encoding="utf-8")

    result = invoke(None, "--vault", target, "status")

    assert result.exit_code == 2
    assert "is a file" in result.stderr
    assert target.read_text(encoding="utf-8") == "hello\n"


def test_a_vault_from_the_environment_that_is_a_file_is_a_vault_error(tmp_path: Path) -> None:
    target = tmp_path / "file.md"
    target.write_text("hello\n", encoding="utf-8")

    message = fail(target, "status", code=EXIT_VAULT)

    assert "config.toml" not in message
    assert target.read_text(encoding="utf-8") == "hello\n"


# -- the real entry point ------------------------------------------------------------


def run_memvault(
    *args: object, vault_env: Path | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """``python -m memvault ARGS`` in a child process with a clean MEMVAULT_* environment."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MEMVAULT_") and k not in ("FORCE_COLOR", "TTY_COMPATIBLE")
    }
    env["COLUMNS"] = "200"
    if vault_env is not None:
        env["MEMVAULT_VAULT"] = str(vault_env)
    completed = subprocess.run(
        [sys.executable, "-m", "memvault", *(str(arg) for arg in args)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=WAIT,
        check=False,
    )
    assert "Traceback" not in completed.stdout + completed.stderr
    return completed


def test_entry_point_with_the_vault_from_the_environment(tmp_path: Path) -> None:
    root = tmp_path / "env-vault"

    init = run_memvault("init", "--json", vault_env=root)
    assert init.returncode == 0, init.stderr
    assert "Home.md" in json.loads(init.stdout)["created"]

    remembered = run_memvault(
        "remember", "Likes green tea", "-c", "preference", "--json", vault_env=root
    )
    assert remembered.returncode == 0, remembered.stderr
    memory = json.loads(remembered.stdout)
    assert memory["path"] == "Memory/Preferences.md"
    assert f"^{memory['id']}" in (root / "Memory" / "Preferences.md").read_text(encoding="utf-8")

    got = run_memvault("get", memory["id"], vault_env=root)
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines()[0] == "Likes green tea"
    assert got.stderr == ""


def test_entry_point_with_the_vault_flag_and_stdin(tmp_path: Path) -> None:
    root = tmp_path / "flag-vault"
    assert run_memvault("init", root).returncode == 0

    content = "# Piped\n\nWritten from [[Home]] via stdin.\n"
    written = run_memvault("--vault", root, "note", "write", "Inbox/Piped", stdin=content)
    assert written.returncode == 0, written.stderr
    assert written.stdout.strip() == "Wrote Inbox/Piped.md"
    assert (root / "Inbox" / "Piped.md").read_text(encoding="utf-8") == content

    read = run_memvault("note", "read", "Inbox/Piped", "--vault", root, "--json")
    assert read.returncode == 0, read.stderr
    view = json.loads(read.stdout)
    assert view["content"] == content
    assert [link["target"] for link in view["links"]] == ["Home"]


def test_entry_point_user_mistakes_are_one_sentence_without_traceback(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    ok(None, "init", root)

    escape = run_memvault("--vault", root, "note", "read", "../secret.md")
    assert escape.returncode == EXIT_INVALID
    assert escape.stdout == ""
    assert escape.stderr.splitlines() == [
        "Error: Path '../secret.md' is not allowed: '..' is not allowed; "
        "paths must stay inside the vault."
    ]

    missing = run_memvault("status", vault_env=tmp_path / "missing")
    assert missing.returncode == EXIT_VAULT
    assert missing.stderr.splitlines()[0] == f"Error: No vault at {tmp_path / 'missing'}."

    (root / ".memvault" / "config.toml").write_text('timezone = "Mars/Olympus"\n', encoding="utf-8")
    config = run_memvault("status", vault_env=root)
    assert config.returncode == EXIT_CONFIG
    assert len(config.stderr.splitlines()) == 1
    assert "Unknown timezone 'Mars/Olympus'" in config.stderr


def test_entry_point_error_about_bracketed_input_has_no_traceback(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    ok(None, "init", root)

    completed = subprocess.run(
        [sys.executable, "-m", "memvault", "--vault", str(root), "get", "[/x]"],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")},
    )

    assert "Traceback" not in completed.stderr
    assert completed.returncode == EXIT_NOT_FOUND
    assert completed.stderr.splitlines()[0] == "Error: No memory with id '[/x]'."
