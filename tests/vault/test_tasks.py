from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from textwrap import dedent

import pytest

from memvault.errors import ConflictError, InvalidInputError, NotFoundError
from memvault.runtime import Runtime
from memvault.vault.note import Note
from support import TZ, MovableClock


def test_create_writes_frontmatter_and_sections(runtime: Runtime) -> None:
    task = runtime.tasks.create(
        "Fix login bug",
        "Users get logged out after 5 minutes.",
        priority="high",
        due="tomorrow",
        tags=["auth", "#bug"],
        steps=["Reproduce", "Patch the session TTL"],
    )
    assert task.path == "Tasks/active/Fix login bug.md"
    note = Note.parse((runtime.vault.root / task.path).read_text())
    assert note.get("status") == "todo"
    assert note.get("priority") == "high"
    assert note.get("created") == date(2026, 11, 22)
    assert note.get("due") == date(2026, 11, 23)
    assert note.get("tags") == ["auth", "bug"]
    assert "# Fix login bug" in note.body
    assert "## Description\nUsers get logged out after 5 minutes.\n" in note.body
    assert "## Steps\n- [ ] Reproduce\n- [ ] Patch the session TTL\n" in note.body
    assert [s.text for s in task.steps] == ["Reproduce", "Patch the session TTL"]
    assert task.description == "Users get logged out after 5 minutes."


def test_titles_become_safe_file_names_and_a_duplicate_is_a_conflict(runtime: Runtime) -> None:
    first = runtime.tasks.create("Call: Bob / Alice?")
    assert first.path == "Tasks/active/Call - Bob - Alice.md"
    before = sorted(p.name for p in (runtime.vault.root / "Tasks/active").iterdir())
    with pytest.raises(
        ConflictError, match=r"already exists \(Tasks/active/Call - Bob - Alice.md\)"
    ):
        runtime.tasks.create("call: bob / alice?")
    assert sorted(p.name for p in (runtime.vault.root / "Tasks/active").iterdir()) == before


def test_a_closed_task_does_not_block_the_same_title_again(runtime: Runtime) -> None:
    runtime.tasks.create("Renew the certificate")
    runtime.tasks.complete("Renew the certificate")
    again = runtime.tasks.create("Renew the certificate")
    assert again.path == "Tasks/active/Renew the certificate.md"
    assert runtime.tasks.complete(again.path).path == "Tasks/completed/Renew the certificate 2.md"


def test_find_by_title_file_name_slug_link_or_unique_part(runtime: Runtime) -> None:
    runtime.tasks.create("Fix login bug")
    runtime.tasks.create("Write release notes")
    for ref in [
        "Fix login bug",
        "fix login bug",
        "Fix login bug.md",
        "fix-login-bug",
        "[[Fix login bug]]",
        "login",
        "Tasks/active/Fix login bug.md",
    ]:
        assert runtime.tasks.get(ref).title == "Fix login bug"
    runtime.tasks.create("Fix logout bug")
    with pytest.raises(InvalidInputError, match="matches several tasks"):
        runtime.tasks.get("Fix")
    with pytest.raises(NotFoundError, match="No task named"):
        runtime.tasks.get("nothing like it")


def test_update_one_field_keeps_the_rest(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    write(
        "Tasks/active/Hand made.md",
        dedent(
            """\
            ---
            status: todo   # set by me
            priority: low
            energy: high
            tags: [home]
            ---
            # Hand made

            My own layout.
            """
        ),
    )
    runtime.tasks.update("hand made", "priority", "urgent")
    runtime.tasks.update("hand made", "due", "2026-12-24")
    text = (runtime.vault.root / "Tasks/active/Hand made.md").read_text()
    assert text == dedent(
        """\
        ---
        status: todo   # set by me
        priority: urgent
        energy: high
        tags: [home]
        due: 2026-12-24
        ---
        # Hand made

        My own layout.
        """
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("status", "someday", "Unknown task status"),
        ("priority", "meh", "Unknown priority"),
        ("due", "next blue moon", "not a date"),
        ("created", "2020-01-01", "set by memvault"),
        ("bad key!", "x", "not a field name"),
        ("tags", "123", "not a valid tag"),
    ],
)
def test_invalid_updates_change_nothing(
    runtime: Runtime, field: str, value: str, message: str
) -> None:
    task = runtime.tasks.create("Stable task")
    before = (runtime.vault.root / task.path).read_bytes()
    with pytest.raises(InvalidInputError, match=message):
        runtime.tasks.update("Stable task", field, value)
    assert (runtime.vault.root / task.path).read_bytes() == before


def test_complete_moves_and_dates_the_task(runtime: Runtime, clock: MovableClock) -> None:
    runtime.tasks.create("Ship it")
    clock.set(datetime(2026, 11, 25, 17, 0, tzinfo=TZ))
    done = runtime.tasks.complete("ship it")
    assert done.path == "Tasks/completed/Ship it.md"
    assert (done.status, done.completed) == ("done", date(2026, 11, 25))
    assert not (runtime.vault.root / "Tasks/active/Ship it.md").exists()
    assert runtime.tasks.get("Ship it").status == "done"  # still findable


def test_status_updates_close_and_reopen(runtime: Runtime) -> None:
    runtime.tasks.create("Maybe later")
    assert runtime.tasks.update("Maybe later", "status", "in progress").status == "in_progress"
    cancelled = runtime.tasks.update("Maybe later", "status", "canceled")
    assert cancelled.path.startswith("Tasks/completed/") and cancelled.status == "cancelled"
    reopened = runtime.tasks.update("Maybe later", "status", "todo")
    assert reopened.path == "Tasks/active/Maybe later.md"
    assert reopened.completed is None


def test_rename_and_notes(runtime: Runtime) -> None:
    runtime.tasks.create("Old name")
    renamed = runtime.tasks.update("Old name", "title", "New name")
    assert renamed.path == "Tasks/active/New name.md"
    assert "# New name" in (runtime.vault.root / renamed.path).read_text()
    noted = runtime.tasks.add_note("New name", "Waiting for Ada")
    assert noted.notes == "- 2026-11-22 09:30: Waiting for Ada"
    described = runtime.tasks.update("New name", "description", "Now with a description")
    assert described.description == "Now with a description"


def test_list_filters_and_order(runtime: Runtime) -> None:
    runtime.tasks.create("Low", priority="low", tags=["home"])
    runtime.tasks.create("Urgent", priority="urgent", due="2026-11-30", project="Apollo")
    runtime.tasks.create(
        "High soon", priority="high", due="2026-11-24", project="Apollo", tags=["home"]
    )
    runtime.tasks.create("Blocked", priority="medium")
    runtime.tasks.update("Blocked", "status", "blocked")
    runtime.tasks.create("Done already")
    runtime.tasks.complete("Done already")
    assert [t.title for t in runtime.tasks.list()] == ["Urgent", "High soon", "Blocked", "Low"]
    assert [t.title for t in runtime.tasks.list(status="blocked")] == ["Blocked"]
    assert [t.title for t in runtime.tasks.list(status="done")] == ["Done already"]
    assert [t.title for t in runtime.tasks.list(project="[[apollo]]")] == ["Urgent", "High soon"]
    assert [t.title for t in runtime.tasks.list(tag="home")] == ["High soon", "Low"]
    assert [t.title for t in runtime.tasks.list(due_before="2026-11-25")] == ["High soon"]
    assert len(runtime.tasks.list(include_closed=True)) == 5
    assert len(runtime.tasks.list(status="all")) == 5


def test_legacy_and_hand_written_statuses_are_read(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    write("Tasks/active/Legacy.md", "---\nstatus: active\npriority: medium\n---\n# Legacy\n")
    write("Tasks/active/Bare.md", "Just a line, no frontmatter.\n")
    assert runtime.tasks.get("Legacy").status == "todo"
    bare = runtime.tasks.get("Bare")
    assert (bare.status, bare.priority) == ("todo", "medium")


def test_a_user_template_shapes_new_tasks(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    write(
        "Templates/task.md",
        "---\nstatus: todo\nowner: me\n---\n# {{title}}\n\n"
        "Created {{date:D MMM YYYY}}\n\n## Description\n",
    )
    task = runtime.tasks.create("From my template", "desc")
    text = (runtime.vault.root / task.path).read_text()
    assert "owner: me" in text
    assert "Created 22 Nov 2026" in text
    assert task.description == "desc"
