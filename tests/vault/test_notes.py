from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memvault.errors import ConflictError, InvalidInputError, NotFoundError
from memvault.runtime import Runtime


def test_read_write_append_with_and_without_suffix(runtime: Runtime) -> None:
    assert runtime.notes.write("Ideas/Rocket", "# Rocket") == "Ideas/Rocket.md"
    assert runtime.notes.read("Ideas/Rocket").text == "# Rocket\n"
    runtime.notes.append("Ideas/Rocket.md", "more")
    view = runtime.notes.read("Ideas/Rocket.md")
    assert view.text == "# Rocket\nmore\n"
    assert view.title == "Rocket"
    with pytest.raises(InvalidInputError, match="content is empty"):
        runtime.notes.write("Ideas/Rocket", "  \n")
    assert runtime.notes.read("Ideas/Rocket").text == "# Rocket\nmore\n"
    with pytest.raises(ConflictError):
        runtime.notes.write("Ideas/Rocket", "x", overwrite=False)
    with pytest.raises(NotFoundError):
        runtime.notes.read("Ideas/Nothing")


def test_links_include_frontmatter_properties(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    write("Projects/Apollo.md", "# Apollo\n")
    write("Task.md", '---\nproject: "[[Apollo]]"\n---\nSee [[Missing]].\n')
    links = runtime.notes.links("Task")
    assert [(r.link.target, r.link.line, r.resolved) for r in links] == [
        ("Apollo", 2, "Projects/Apollo.md"),
        ("Missing", 4, None),
    ]
    assert [b.source for b in runtime.notes.backlinks("Projects/Apollo")] == ["Task.md"]


def test_move_rewrites_links_that_would_break(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    write("People/Ada.md", "---\naliases: [Countess]\n---\n# Ada\n")
    write(
        "Notes/Meeting.md",
        "Met [[Ada]], [[Ada#Bio|her bio]], ![[Ada]], [[Countess]] and [[People/Ada]].\n"
        "`[[Ada]]` in code stays.\n",
    )
    write("Notes/Other.md", "Nothing about her.\n")
    other_mtime = (runtime.vault.root / "Notes/Other.md").stat().st_mtime_ns
    assert runtime.notes.move("People/Ada", "People/Ada Lovelace") == "People/Ada Lovelace.md"
    text = (runtime.vault.root / "Notes/Meeting.md").read_text()
    assert text == (
        "Met [[Ada Lovelace]], [[Ada Lovelace#Bio|her bio]], ![[Ada Lovelace]], [[Countess]] "
        "and [[Ada Lovelace]].\n`[[Ada]]` in code stays.\n"
    )
    assert (runtime.vault.root / "Notes/Other.md").stat().st_mtime_ns == other_mtime


def test_move_into_a_folder_keeps_links_that_still_resolve(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    write("Ada.md", "# Ada\n")
    write("Index.md", "[[Ada]]\n")
    assert runtime.notes.move("Ada", "People/") == "People/Ada.md"
    assert runtime.notes.move("People/Ada", "Contacts") == "Contacts/Ada.md"
    assert (runtime.vault.root / "Index.md").read_text() == "[[Ada]]\n"


def test_backlinks_skip_files_that_are_not_text(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    write("Target.md", "# Target\n")
    write("Linker.md", "[[Target]]\n")
    (runtime.vault.root / "Old.md").write_bytes("caf\xe9 [[Target]]".encode("latin-1"))
    assert [b.source for b in runtime.notes.backlinks("Target")] == ["Linker.md"]


def test_renaming_a_task_relinks_its_project(runtime: Runtime) -> None:
    runtime.projects.create("Apollo")
    runtime.tasks.create("Old name", project="Apollo")
    runtime.tasks.update("Old name", "title", "New name")
    assert runtime.projects.get("Apollo").tasks == ["New name"]


def test_moving_a_task_between_projects(runtime: Runtime) -> None:
    runtime.projects.create("Apollo")
    runtime.projects.create("Zeus")
    runtime.tasks.create("Build", project="Apollo")
    runtime.tasks.create("Test", project="Apollo")
    runtime.projects.link_task("Zeus", "Build")
    assert runtime.projects.get("Apollo").tasks == ["Test"]
    assert runtime.projects.get("Zeus").tasks == ["Build"]
    runtime.tasks.update("Test", "project", "")
    assert runtime.projects.get("Apollo").tasks == []
    assert runtime.tasks.get("Test").project is None
