"""memvault on a real Obsidian vault that nobody here wrote.

The fixture is a subset of the obsidian-tasks documentation vault, copied
byte for byte (see ``tests/fixtures/public_vault.SOURCE.txt``, which lists
the SHA-256 of every file). memvault must read it the way Obsidian does, and
``init`` plus a day of ordinary use must leave every file that was there
byte-identical, adding only the notes memvault is meant to create.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import textwrap
import traceback
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from cli_support import run_command
from support import LAYOUT_FOLDERS, LAYOUT_NOTES

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "public_vault"
SOURCE = FIXTURE.parent / "public_vault.SOURCE.txt"
_MANIFEST_ROW = re.compile(r"^\s*(\d+)\s+([0-9a-f]{40})\s+([0-9a-f]{64})\s+(\S.*?)\s*$")

# What `memvault init` adds to a vault (DESIGN.md, "The vault").
LAYOUT_FOLDER_SET = {*LAYOUT_FOLDERS, "Tasks", ".memvault"}
LAYOUT_NOTE_SET = set(LAYOUT_NOTES)
MEMORY_NOTES = {
    f"Memory/{title}.md"
    for title in (
        "Preferences",
        "Decisions",
        "Facts",
        "Context",
        "Projects",
        "People",
        "Corrections",
        "Patterns",
        "Issues",
    )
}
STATE_FILES = {".memvault/config.toml", ".memvault/.gitignore"}
# Derived and operational state: lock files, the rebuildable search index, and state.db
# (the read log records the owner's `get`: who read each memory).
_LOCK_FILE = re.compile(r"\.memvault/(locks/[^/]+\.lock|(index|state)\.db(-wal|-shm)?)")

READING_LIST = textwrap.dedent(
    """\
    ---
    tags: [reading, tasks-plugin]
    ---
    # Reading list

    - [[Migration to Publish]] first
    - then [[Backlink]] and [[Getting Started/Backlinks|the backlinks page]]
    - [[Combining Filters#Appendix Changes to Boolean filters in Tasks 7.0.0|the appendix]]
    - and [[A page this vault does not have]] #to-read
    """
)


# -- helpers ---------------------------------------------------------------------


def manifest() -> dict[str, tuple[int, str]]:
    """``path -> (size, sha256)`` as recorded in SOURCE.txt when the fixture was copied."""
    rows: dict[str, tuple[int, str]] = {}
    for line in SOURCE.read_text(encoding="utf-8").splitlines():
        if line.startswith("Total:"):
            break
        match = _MANIFEST_ROW.match(line)
        if match:
            rows[match.group(4)] = (int(match.group(1)), match.group(3))
    return rows


def file_hashes(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root``, hidden files included."""
    out: dict[str, str] = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def folders(root: Path) -> set[str]:
    """Every folder under ``root``, hidden ones included."""
    return {
        (Path(dirpath) / name).relative_to(root).as_posix()
        for dirpath, dirnames, _filenames in os.walk(root)
        for name in dirnames
    }


def identities(root: Path, paths: set[str]) -> dict[str, tuple[int, int]]:
    """``(inode, mtime_ns)`` per file: a file rewritten with the same bytes still shows."""
    out: dict[str, tuple[int, int]] = {}
    for rel in paths:
        st = (root / rel).stat()
        out[rel] = (st.st_ino, st.st_mtime_ns)
    return out


def invoke(root: Path, *args: object) -> Result:
    """Run ``memvault --vault ROOT ARGS`` in-process (timezone fixed, env cleaned)."""
    env: dict[str, str | None] = {key: None for key in os.environ if key.startswith("MEMVAULT_")}
    env.update({"MEMVAULT_TIMEZONE": "UTC", "COLUMNS": "200"})
    result = run_command(["--vault", str(root), *(str(a) for a in args)], None, env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        assert result.exc_info is not None
        pytest.fail("memvault crashed:\n" + "".join(traceback.format_exception(*result.exc_info)))
    assert "Traceback" not in result.output
    assert result.exit_code == 0, result.output
    return result


def run_json(root: Path, *args: object) -> Any:
    return json.loads(invoke(root, *args, "--json").stdout)


def links_of(root: Path, note: str) -> list[tuple[int, str, str | None, str | None, bool, Any]]:
    """``(line, target, subpath, alias, embed, resolved)`` for each outgoing link."""
    data = run_json(root, "note", "links", note)
    return [
        (
            link["line"],
            link["target"],
            link["subpath"],
            link["alias"],
            link["embed"],
            link["resolved"],
        )
        for link in data["links"]
    ]


@pytest.fixture
def docs_vault(tmp_path: Path) -> Path:
    """A private copy of the public vault (a space in its path, as real vaults often have)."""
    root = tmp_path / "Tasks docs vault"
    shutil.copytree(FIXTURE, root)
    return root


@pytest.fixture
def kept_vault(docs_vault: Path) -> Path:
    """The public vault after ``memvault init``: how a person starts keeping one with memvault."""
    invoke(docs_vault, "init")
    return docs_vault


def memvaults_own(path: str) -> bool:
    """A note ``init`` added (the layout, the memory files), not one of the public vault's."""
    return path in LAYOUT_NOTE_SET or path in MEMORY_NOTES


# -- the fixture itself ----------------------------------------------------------


def test_the_fixture_is_the_upstream_copy_listed_in_source_txt() -> None:
    recorded = manifest()

    assert len(recorded) == 52
    assert file_hashes(FIXTURE) == {path: digest for path, (_, digest) in recorded.items()}
    for path, (size, _) in recorded.items():
        assert (FIXTURE / path).stat().st_size == size, path


# -- nothing that was there changes ------------------------------------------------


def test_init_and_a_day_of_use_leave_every_existing_file_byte_identical(docs_vault: Path) -> None:
    root = docs_vault
    before = file_hashes(root)
    before_folders = folders(root)
    before_identity = identities(root, set(before))
    assert before == {path: digest for path, (_, digest) in manifest().items()}

    report = run_json(root, "init")
    assert report["kept"] == []  # the docs vault has none of memvault's names
    assert set(report["created"]) >= LAYOUT_NOTE_SET | STATE_FILES

    first = run_json(root, "remember", "The docs vault belongs to the Tasks plugin", "-c", "fact")
    run_json(root, "remember", "Prefers the Dataview task format", "-c", "preference", "-t", "docs")
    run_json(root, "remember", "Decided to read one page a day", "-c", "decision")
    assert (
        run_json(root, "get", first["id"])["text"] == "The docs vault belongs to the Tasks plugin"
    )
    run_json(root, "project", "add", "Docs", "-d", "Learn the Tasks plugin")
    run_json(root, "task", "add", "Read the docs", "--due", "2030-01-01", "--project", "Docs")
    run_json(root, "task", "add", "Try a query", "-t", "tasks-plugin")
    run_json(root, "project", "link", "Docs", "Try a query")
    run_json(root, "task", "done", "Try a query")
    run_json(root, "contact", "add", "Clare", "--id", "telegram=1001", "-r", "maintainer")
    run_json(root, "contact", "log", "telegram:1001", "Sent her the reading list")
    journal = run_json(root, "journal", "add", "Explored the Tasks docs vault", "-s", "actions")
    appended = run_json(root, "note", "append", "Inbox/Reading list", "--content", READING_LIST)
    assert appended["path"] == "Inbox/Reading list.md"

    # Reading, listing and linking touch nothing.
    for note in ("README.md", "Introduction", "Getting Started/Tags", "Queries/Backlinks.md"):
        view = run_json(root, "note", "read", note)
        assert view["content"] == (root / view["path"]).read_text(encoding="utf-8")
    run_json(root, "note", "list")
    run_json(root, "note", "list", "--all-files")
    run_json(root, "note", "links", "What is New/Breaking Changes.md")
    run_json(root, "note", "links", "Editing/Create or edit Task")
    invoke(root, "note", "links", "Queries/Combining Filters")
    invoke(root, "note", "list")
    invoke(root, "status")
    invoke(root, "memories")
    invoke(root, "task", "list", "--all")
    invoke(root, "journal", "show")
    assert run_json(root, "status")["counts"]["memories"] == 3

    after = file_hashes(root)
    assert sorted(set(before) - set(after)) == []  # nothing deleted
    assert sorted(p for p in before if after[p] != before[p]) == []  # nothing changed
    assert {p: after[p] for p in before} == {p: d for p, (_, d) in manifest().items()}
    assert identities(root, set(before)) == before_identity  # not even rewritten in place

    new = set(after) - set(before)
    state = {p for p in new if p.startswith(".memvault/")}
    assert state >= STATE_FILES
    assert all(_LOCK_FILE.fullmatch(p) for p in state - STATE_FILES), sorted(state)
    expected = LAYOUT_NOTE_SET | {
        "Memory/Facts.md",
        "Memory/Preferences.md",
        "Memory/Decisions.md",
        "Projects/Docs.md",
        "Tasks/active/Read the docs.md",
        "Tasks/completed/Try a query.md",
        "Contacts/Clare.md",
        journal["path"],
        "Inbox/Reading list.md",
    }
    assert expected <= new - state <= expected | MEMORY_NOTES, sorted(new - state)
    assert not [p for p in new if p.startswith(".obsidian/")]
    new_folders = folders(root) - before_folders
    assert new_folders <= LAYOUT_FOLDER_SET | {"Inbox", ".memvault/locks", ".memvault/carry"}, (
        sorted(new_folders)
    )

    # What memvault wrote reads back, and the new note links into the old ones.
    assert (root / "Inbox" / "Reading list.md").read_text(encoding="utf-8") == READING_LIST
    reading = run_json(root, "note", "read", "Inbox/Reading list")
    assert reading["tags"] == ["reading", "tasks-plugin", "to-read"]
    assert [(t, r) for _, t, _, _, _, r in links_of(root, "Inbox/Reading list")] == [
        ("Migration to Publish", "migration.md"),  # by alias
        ("Backlink", "Queries/Backlinks.md"),  # by alias
        ("Getting Started/Backlinks", "Queries/Backlinks.md"),  # a path-like alias
        ("Combining Filters", "Queries/Combining Filters.md"),
        ("A page this vault does not have", None),
    ]
    backlinks = run_json(root, "note", "links", "migration.md")["backlinks"]
    assert [b["source"] for b in backlinks] == ["Inbox/Reading list.md"]


def test_an_uninitialised_vault_is_refused_and_nothing_is_written(docs_vault: Path) -> None:
    before = file_hashes(docs_vault)
    before_folders = folders(docs_vault)

    env: dict[str, str | None] = {key: None for key in os.environ if key.startswith("MEMVAULT_")}
    for args in (
        ("note", "read", "Introduction"),
        ("note", "links", "What is New/Breaking Changes"),
        ("note", "list", "--all-files"),
        ("remember", "x"),
    ):
        result = run_command(["--vault", str(docs_vault), *args], None, env)
        assert result.exit_code == 5, result.output
        assert result.stderr.startswith(f"Error: {docs_vault} is not a memvault vault; run ")
        assert "`memvault init" in result.stderr

    assert file_hashes(docs_vault) == before
    assert folders(docs_vault) == before_folders


# -- reading it the way Obsidian does ------------------------------------------------


def test_listing_shows_notes_not_obsidian_state(kept_vault: Path) -> None:
    recorded = set(manifest())
    notes = sorted(p for p in recorded if p.endswith(".md"))

    listed = run_json(kept_vault, "note", "list")
    everything = run_json(kept_vault, "note", "list", "--all-files")
    shallow = run_json(kept_vault, "note", "list", "Getting Started", "--shallow")

    assert [e["path"] for e in listed if not memvaults_own(e["path"])] == notes
    assert len(notes) == 47
    assert [e["path"] for e in everything if not memvaults_own(e["path"])] == sorted(
        p for p in recorded if not p.startswith(".obsidian/")
    )
    sizes = {e["path"]: e["size"] for e in everything if not memvaults_own(e["path"])}
    assert sizes == {p: size for p, (size, _) in manifest().items() if p in sizes}
    assert [e["path"] for e in shallow] == sorted(
        p for p in notes if p.startswith("Getting Started/") and p.count("/") == 1
    )


def test_read_returns_the_exact_text_and_its_frontmatter(kept_vault: Path) -> None:
    path = "What is New/Breaking Changes.md"

    printed = invoke(kept_vault, "note", "read", path).stdout
    view = run_json(kept_vault, "note", "read", "What is New/Breaking Changes")

    text = (kept_vault / path).read_text(encoding="utf-8")
    assert printed == text
    assert view["content"] == text
    assert view["path"] == path
    assert view["frontmatter"] == {
        "publish": True,
        "aliases": ["Support and Help/Breaking Changes", "What is New?/Breaking Changes"],
    }
    assert view["aliases"] == ["Support and Help/Breaking Changes", "What is New?/Breaking Changes"]
    assert view["title"] == "Breaking changes"  # its first H1, not the file name
    assert view["frontmatter_error"] is None
    quick_add = run_json(kept_vault, "note", "read", "Other Plugins/QuickAdd")
    assert quick_add["aliases"] == ["Advanced/Quickadd"]  # a list indented by four spaces


def test_links_with_headings_and_aliases_resolve_to_the_right_files(kept_vault: Path) -> None:
    changes = links_of(kept_vault, "What is New/Breaking Changes")
    assert (
        52,
        "Combining Filters",
        "Appendix Changes to Boolean filters in Tasks 7.0.0",
        "the appendix",
        False,
        "Queries/Combining Filters.md",
    ) in changes
    assert (
        87,
        "How to style backlinks",
        "Using CSS to replace the backlinks with icons",
        "Using CSS to replace the backlinks with icons",
        False,
        "How To/How to style backlinks.md",
    ) in changes
    assert (66, "urgency", None, None, False, "Advanced/Urgency.md") in changes  # any case
    assert (63, "Filters", "Happens", "happens", False, None) in changes  # not in the subset

    edit = links_of(kept_vault, "Editing/Create or edit Task")
    assert (
        232,
        "Status Types",
        "DONE",
        "DONE status type",
        False,
        "Getting Started/Statuses/Status Types.md",
    ) in edit
    same_note = [link for link in edit if link[1] == ""]
    assert same_note  # [[#Heading]] links to the note itself
    assert {link[5] for link in same_note} == {"Editing/Create or edit Task.md"}

    backlinks_page = links_of(kept_vault, "How To/How to style backlinks")
    assert (13, "Backlinks", None, "Backlink", False, "Queries/Backlinks.md") in backlinks_page

    limitations = links_of(kept_vault, "Support and Help/Known Limitations")
    assert (
        52,
        "Dataview Format",
        "Limitations of Dataview Format",
        None,
        True,
        "Reference/Task Formats/Dataview Format.md",
    ) in limitations

    completion = links_of(kept_vault, "Getting Started/On Completion")
    embeds = [(t, r) for line, t, _, _, embed, r in completion if embed and line == 98]
    assert embeds == [
        ("on-completion-before.png", "images/on-completion-before.png"),
        ("on-completion-after.png", "images/on-completion-after.png"),
    ]


def test_backlinks_in_the_existing_vault(kept_vault: Path) -> None:
    combining = run_json(kept_vault, "note", "links", "Queries/Combining Filters")["backlinks"]
    assert [(b["source"], b["line"]) for b in combining] == [
        ("What is New/Breaking Changes.md", 51),
        ("What is New/Breaking Changes.md", 52),
    ]

    edit = run_json(kept_vault, "note", "links", "Editing/Create or edit Task")["backlinks"]
    sources = {b["source"] for b in edit}
    assert "Editing/Create or edit Task.md" not in sources  # its own [[#Heading]] links
    assert {"Getting Started/Priority.md", "Other Plugins/QuickAdd.md"} <= sources
    embedded = [b for b in edit if b["embed"]]
    assert [(b["source"], b["line"]) for b in embedded] == [
        ("Support and Help/Known Limitations.md", 64)
    ]


def test_tags_come_from_the_text_not_from_code_or_urls(kept_vault: Path) -> None:
    def tags(note: str) -> list[str]:
        return list(run_json(kept_vault, "note", "read", note)["tags"])

    assert "plugin/periodic-notes" in tags("Advanced/Daily Agenda")
    assert tags("Reference/Task Formats/Dataview Format") == [
        "task-formats",
        "task-format/dataview",
        "plugin/dataview",
    ]
    # Every '#tag' in these notes sits in a code block or an inline code span.
    assert tags("Queries/Combining Filters") == []
    assert tags("Getting Started/Global Filter") == []
    assert tags("Getting Started/Tags") == []
    # URL fragments (…/discussions/622#discussioncomment-2649299) are not tags.
    backlinks_tags = tags("How To/How to style backlinks")
    assert "feature/backlinks" in backlinks_tags
    assert not [t for t in backlinks_tags if "discussioncomment" in t or "+" in t]
    assert not [t for t in tags("How To/Style custom statuses") if "Use" in t]


def test_tags_inside_inline_html_are_found_as_obsidian_does(kept_vault: Path) -> None:
    def tags(note: str) -> list[str]:
        return list(run_json(kept_vault, "note", "read", note)["tags"])

    assert tags("How To/Style custom statuses") == ["css", "feature/statuses"]
    assert tags("Advanced/Daily Agenda") == ["plugin/calendar", "plugin/periodic-notes"]
    assert tags("Advanced/About Advanced") == ["index-pages"]
