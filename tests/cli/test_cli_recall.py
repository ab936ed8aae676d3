"""End-to-end tests of the recall commands: ``index``, ``search``, ``recall``, ``context``,
``tag`` and ``related``, in a temporary vault.

The commands run in-process through ``CliRunner``. Most tests use
``embedder.provider = none`` (keyword search, no model); one module-scoped
vault is indexed with the real bundled MiniLM model for the semantic checks
and the embedder-switch checks.
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import textwrap
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cli_support import (
    EXIT_INVALID,
    EXIT_NOT_FOUND,
    fail,
    invoke,
    ok,
    ok_json,
    snapshot,
)
from support import HIT_KEYS

LOCAL_IDENTITY = "local:all-MiniLM-L6-v2"
# Nothing listens on the discard port: any embedding request there fails at once.
DEAD_ENDPOINT = "http://127.0.0.1:9/v1"

FACTS = """\
---
category: fact
tags: [memory]
---
# Facts

- Zephyr bought a sailboat in spring #boat [importance:: 0.5] [created:: 2023-05-08 13:56:00] [source:: chat] ^m-00000001
- Zephyr sold the sailboat in winter #boat [importance:: 0.5] [created:: 2024-01-15 10:00:00] [source:: chat] ^m-00000002
- Zephyr kept an old sailboat photo #boat [importance:: 0.5] [created:: 2025-03-01 10:00:00] [source:: chat] ^m-00000003
"""  # noqa: E501


# -- helpers ---------------------------------------------------------------------


def write(root: Path, relpath: str, text: str) -> Path:
    """Write a file into the vault directly, as a person editing in Obsidian would."""
    target = root / relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(textwrap.dedent(text), encoding="utf-8")
    return target


def indexable_notes(root: Path) -> set[str]:
    """Markdown files the index should hold: not hidden, not under Templates/."""
    out = set()
    for path in root.rglob("*.md"):
        rel = path.relative_to(root)
        if rel.parts[0] == "Templates" or any(p.startswith(".") for p in rel.parts):
            continue
        out.add(rel.as_posix())
    return out


def search(vault: Path, query: str, *options: object, **kwargs: Any) -> list[dict[str, Any]]:
    """``memvault search QUERY OPTIONS --json``."""
    hits: list[dict[str, Any]] = ok_json(vault, "search", query, *options, **kwargs)
    return hits


def ids(hits: list[dict[str, Any]]) -> set[str]:
    return {h["id"] for h in hits if h["id"]}


def paths(hits: list[dict[str, Any]]) -> set[str]:
    return {h["path"] for h in hits}


def drop_index(root: Path) -> None:
    """Delete the index database as a user would (no memvault process is running)."""
    gc.collect()  # in-process runs leave connections for the collector to close
    for suffix in ("", "-wal", "-shm"):
        (root / ".memvault" / f"index.db{suffix}").unlink(missing_ok=True)


def headings_of(markdown: str) -> list[str]:
    return re.findall(r"^## (.+)$", markdown, re.M)


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    """A freshly initialised vault."""
    root = tmp_path / "vault"
    ok(None, "init", root)
    return root


def stock(root: Path) -> Path:
    """Notes, a task, tagged items and hand-written memories of known dates."""
    write(root, "Memory/Facts.md", FACTS)
    write(
        root,
        "Projects/Apollo.md",
        """\
        ---
        tags: [project/apollo]
        ---
        # Apollo

        The sailboat refit project, see [[Harbour]].
        """,
    )
    write(
        root,
        "Harbour.md",
        """\
        # Harbour

        Where the sailboat is moored. #project #regatta
        """,
    )
    write(
        root,
        "Boatyard.md",
        """\
        # Boatyard

        The yard that repairs the sailboat hull. #regatta
        """,
    )
    ok(root, "task", "add", "Fix the sailboat mast", "-p", "urgent", "-t", "boat")
    ok(root, "remember", "Prefers sailboat trips at dawn", "-c", "preference", "-t", "project")
    ok(root, "index")
    return root


def copy_vault(source: Path, target: Path) -> Path:
    """A private copy of a shared vault, index included, for a test that changes it."""
    gc.collect()  # close connections that in-process runs left open, so the WAL is settled
    shutil.copytree(source, target)
    return target


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stocked vault shared by the tests that only read it."""
    root = tmp_path_factory.mktemp("library") / "vault"
    ok(None, "init", root)
    return stock(root)


@pytest.fixture
def stocked(library: Path, tmp_path: Path) -> Path:
    """A private copy of the stocked vault."""
    return copy_vault(library, tmp_path / "vault")


# -- index -------------------------------------------------------------------------


def test_index_reports_counts_and_a_second_run_changes_nothing(vault_dir: Path) -> None:
    write(vault_dir, "Projects/Apollo.md", "# Apollo\n\nA moon project.\n")
    write(vault_dir, "Ideas/Kites.md", "# Kites\n\nBuild a kite.\n")
    expected = indexable_notes(vault_dir)

    first = ok_json(vault_dir, "index")

    assert set(first) == {"sync", "embedded", "status"}
    assert set(first["sync"]["added"]) == {"Projects/Apollo.md", "Ideas/Kites.md"}
    assert first["embedded"] == 0
    status = first["status"]
    assert status["notes"] == len(expected)
    assert status["chunks"] >= 2
    assert status["memories"] == 0
    assert status["embedder"] == "none:none"
    assert status["mismatch"] is None

    second = ok_json(vault_dir, "index")

    sync = second["sync"]
    assert (sync["added"], sync["changed"], sync["moved"], sync["deleted"]) == ([], [], [], [])
    assert sync["unchanged"] == len(expected)
    assert {k: second["status"][k] for k in ("notes", "chunks", "links")} == {
        k: status[k] for k in ("notes", "chunks", "links")
    }
    text = ok(vault_dir, "index").stdout
    assert text.startswith(f"Indexed {len(expected)} notes (nothing changed, ")


def test_index_on_an_index_less_vault_adds_every_note(vault_dir: Path) -> None:
    drop_index(vault_dir)

    report = ok_json(vault_dir, "index")

    assert set(report["sync"]["added"]) == indexable_notes(vault_dir)
    assert not any(p.startswith("Templates/") for p in report["sync"]["added"])


def test_rebuild_after_deleting_the_database_gives_the_same_counts(stocked: Path) -> None:
    before = ok_json(stocked, "index")["status"]
    assert before["memories"] == 4
    drop_index(stocked)

    rebuilt = ok_json(stocked, "index", "--rebuild")

    after = rebuilt["status"]
    for key in ("notes", "chunks", "memories", "links"):
        assert after[key] == before[key], key
    assert len(rebuilt["sync"]["added"]) == before["notes"]
    # Hand-written ids survive: they live in the vault, not in the index.
    hits = search(stocked, "sailboat", "--kind", "memory")
    assert {"m-00000001", "m-00000002", "m-00000003"} <= ids(hits)


def test_rebuild_with_the_database_in_place_gives_the_same_counts(stocked: Path) -> None:
    before = ok_json(stocked, "index")["status"]

    rebuilt = ok_json(stocked, "index", "--rebuild")

    after = rebuilt["status"]
    assert len(rebuilt["sync"]["added"]) == before["notes"]
    for key in ("notes", "chunks", "memories", "links"):
        assert after[key] == before[key], key


def test_hand_edits_are_reported_as_changed_moved_and_deleted(vault_dir: Path) -> None:
    note = write(vault_dir, "Ideas/Kites.md", "# Kites\n\nBuild a blue kite.\n")
    ok(vault_dir, "index")

    note.write_text("# Kites\n\nBuild a crimson kite with a long tail.\n", encoding="utf-8")
    changed = ok_json(vault_dir, "index")["sync"]
    assert changed["changed"] == ["Ideas/Kites.md"]
    assert (changed["added"], changed["moved"], changed["deleted"]) == ([], [], [])
    assert paths(search(vault_dir, "crimson")) == {"Ideas/Kites.md"}
    assert search(vault_dir, "blue") == []

    os.rename(note, vault_dir / "Ideas" / "Gliders.md")
    moved = ok_json(vault_dir, "index")["sync"]
    assert moved["moved"] == [{"from": "Ideas/Kites.md", "to": "Ideas/Gliders.md"}]
    assert (moved["added"], moved["changed"], moved["deleted"]) == ([], [], [])
    assert paths(search(vault_dir, "crimson")) == {"Ideas/Gliders.md"}

    (vault_dir / "Ideas" / "Gliders.md").unlink()
    deleted = ok_json(vault_dir, "index")["sync"]
    assert deleted["deleted"] == ["Ideas/Gliders.md"]
    assert (deleted["added"], deleted["changed"], deleted["moved"]) == ([], [], [])
    assert search(vault_dir, "crimson") == []


# -- search --------------------------------------------------------------------------


def test_remember_updates_the_keyword_index_at_once(vault_dir: Path) -> None:
    ok(vault_dir, "index")
    memory = ok_json(vault_dir, "remember", "The owner collects vintage barometers")

    # The write already indexed it: a sync has nothing left to do for the memory file.
    report = ok_json(vault_dir, "index")
    assert memory["path"] not in report["sync"]["added"] + report["sync"]["changed"]
    assert report["status"]["memories"] == 1

    hits = search(vault_dir, "barometers", "--keyword")
    assert [h["id"] for h in hits] == [memory["id"]]


def test_search_json_items_have_the_documented_shape(vault_dir: Path) -> None:
    memory = ok_json(vault_dir, "remember", "Quasar the cat likes tuna", "-t", "pets")
    long_line = " ".join(["quasar telescope observations"] * 80)  # far beyond 700 characters
    write(vault_dir, "Astronomy.md", f"# Astronomy\n\n{long_line}\n")

    hits = search(vault_dir, "quasar")

    assert len(hits) == 2
    for hit in hits:
        assert set(hit) == HIT_KEYS
        assert len(hit["snippet"]) <= 700
        assert hit["start_line"] <= hit["end_line"]
        assert isinstance(hit["score"], float)
    by_source = {h["source"]: h for h in hits}
    remembered = by_source["memory"]
    assert remembered["id"] == memory["id"]
    assert remembered["kind"] == "memory"
    assert remembered["path"] == memory["path"]
    assert remembered["category"] == "fact"
    assert remembered["tags"] == ["pets"]
    assert remembered["origin"] == "cli"
    assert remembered["snippet"] == "Quasar the cat likes tuna"
    note = by_source["vault"]
    assert note["id"] is None
    assert note["path"] == "Astronomy.md"
    assert note["kind"] == "note"
    assert note["title"] == "Astronomy"
    assert note["snippet"].endswith("…")  # cut at a word boundary, marked as cut


def test_search_table_and_nothing_found(library: Path) -> None:
    table = ok(library, "search", "sailboat", "--keyword").stdout
    assert "results for 'sailboat'" in table
    assert "^m-00000001" in table

    nothing = ok(library, "search", "xylophone")
    assert nothing.stdout.strip() == "Nothing relevant to 'xylophone'."
    assert "--min-score 0" in nothing.stderr


def test_search_limit(library: Path) -> None:
    assert len(search(library, "sailboat", "--limit", "2")) == 2


# -- filters -------------------------------------------------------------------------


def test_kind_filter(library: Path) -> None:
    tasks = search(library, "sailboat", "--kind", "task")
    assert paths(tasks) == {"Tasks/active/Fix the sailboat mast.md"}
    assert {h["kind"] for h in tasks} == {"task"}

    memories = search(library, "sailboat", "--kind", "memory")
    assert {h["source"] for h in memories} == {"memory"}
    assert {"m-00000001", "m-00000002", "m-00000003"} <= ids(memories)

    both = search(library, "sailboat", "--kind", "task", "--kind", "memory")
    assert {h["kind"] for h in both} == {"task", "memory"}
    assert search(library, "sailboat", "--kind", "task,memory") == both


def test_folder_filter(library: Path) -> None:
    hits = search(library, "sailboat", "--folder", "Projects")
    assert paths(hits) == {"Projects/Apollo.md"}
    assert search(library, "sailboat", "--folder", "Projects/") == hits


def test_category_filter(library: Path) -> None:
    hits = search(library, "sailboat", "--category", "preference")
    assert len(hits) == 1
    assert hits[0]["category"] == "preference"
    assert hits[0]["snippet"] == "Prefers sailboat trips at dawn"
    assert {h["category"] for h in search(library, "sailboat", "-c", "fact")} == {"fact"}


def test_tag_filter(library: Path) -> None:
    hits = search(library, "sailboat", "--tag", "regatta")
    assert paths(hits) == {"Harbour.md", "Boatyard.md"}
    # Nested tags count: project/apollo is a project tag.
    project = search(library, "sailboat", "--tag", "#project")
    assert paths(project) == {"Harbour.md", "Projects/Apollo.md", "Memory/Preferences.md"}
    assert search(library, "sailboat", "--tag", "proj") == []


def test_date_filters(library: Path) -> None:
    in_2024 = search(library, "sailboat", "--since", "2024-01-01", "--until", "2025-01-01")
    assert ids(in_2024) == {"m-00000002"}
    assert paths(in_2024) == {"Memory/Facts.md"}

    that_day = search(library, "sailboat", "--since", "2023-05-08", "--until", "2023-05-09")
    assert ids(that_day) == {"m-00000001"}

    before = search(library, "sailboat", "--until", "2024-01-15")
    assert ids(before) == {"m-00000001"}
    # --since is inclusive: the memory of 2024-01-15 10:00 is on or after that day.
    assert "m-00000002" in ids(search(library, "sailboat", "--since", "2024-01-15"))
    assert "m-00000001" not in ids(search(library, "sailboat", "--since", "2024-01-15"))


def test_archived_memories_are_hidden_unless_asked_for(stocked: Path) -> None:
    facts = stocked / "Memory" / "Facts.md"
    text = facts.read_text(encoding="utf-8")
    facts.write_text(
        text.replace("^m-00000003", "[archived:: 2026-01-01] ^m-00000003"), encoding="utf-8"
    )

    visible = search(stocked, "sailboat", "--kind", "memory")
    assert "m-00000003" not in ids(visible)
    assert {"m-00000001", "m-00000002"} <= ids(visible)

    everything = search(stocked, "sailboat", "--kind", "memory", "--archived")
    assert "m-00000003" in ids(everything)
    assert "m-00000003" not in ids(ok_json(stocked, "recall", "sailboat"))
    assert "m-00000003" not in {i["id"] for i in ok_json(stocked, "tag", "boat")}
    assert "m-00000003" in {i["id"] for i in ok_json(stocked, "tag", "boat", "--archived")}


# -- recall, tag, related --------------------------------------------------------------


def test_recall_returns_only_memories(library: Path) -> None:
    hits = ok_json(library, "recall", "sailboat")

    assert hits
    assert {h["source"] for h in hits} == {"memory"}
    assert {"m-00000001", "m-00000002", "m-00000003"} <= ids(hits)

    preferences = ok_json(library, "recall", "sailboat", "--category", "preference")
    assert [h["snippet"] for h in preferences] == ["Prefers sailboat trips at dawn"]

    text = ok(library, "recall", "sailboat").stdout
    assert "- Zephyr bought a sailboat in spring  (fact" in text
    assert "^m-00000001)" in text
    assert ok(library, "recall", "xylophone").stdout.strip() == "Nothing relevant to 'xylophone'."


def test_tag_finds_nested_tags_on_notes_and_memories(library: Path) -> None:
    items = ok_json(library, "tag", "project")

    by_path = {(i["path"], i["id"]) for i in items}
    assert ("Projects/Apollo.md", None) in by_path  # tagged #project/apollo
    assert ("Harbour.md", None) in by_path  # tagged #project
    memory = [i for i in items if i["kind"] == "memory"]
    assert [i["path"] for i in memory] == ["Memory/Preferences.md"]
    assert memory[0]["id"].startswith("m-")
    assert ok_json(library, "tag", "#project") == items
    assert ok_json(library, "tag", "project/apollo") == [
        i for i in items if i["path"] == "Projects/Apollo.md"
    ]

    table = ok(library, "tag", "project").stdout
    assert f"{len(items)} items tagged #project" in table
    assert ok(library, "tag", "nothing-here").stdout.strip() == "Nothing is tagged #nothing-here."


def test_related_lists_links_and_shared_tags_with_reasons(library: Path) -> None:
    found = ok_json(library, "related", "Harbour.md")

    related = {r["path"]: r["reasons"] for r in found["related"]}
    assert related["Projects/Apollo.md"] == ["links here"]
    assert related["Boatyard.md"] == ["#regatta"]
    assert [(b["source"], b["kind"], b["target"]) for b in found["backlinks"]] == [
        ("Projects/Apollo.md", "wikilink", "Harbour")
    ]
    assert found["backlinks"][0]["line"] == 6

    outgoing = ok_json(library, "related", "Projects/Apollo")  # the .md may be left off
    assert {r["path"]: r["reasons"] for r in outgoing["related"]} == {"Harbour.md": ["links to it"]}
    assert outgoing["backlinks"] == []

    table = ok(library, "related", "Harbour.md").stdout
    assert "Related to Harbour.md" in table
    assert "links here" in table


# -- context ---------------------------------------------------------------------------

CONTEXT_ORDER = [
    "Owner",
    "Current status",
    "Open tasks",
    "Today's journal",
    "Pinned memories",
    "Important memories",
    "Recent activity",
]
# Every section the builder considers, also the empty ones (no session yet, so nothing on
# how long they have worked together; no known issues).
ALL_SECTIONS = [
    "Working together",
    *CONTEXT_ORDER[:2],
    "Known issues (do not repeat these)",
    *CONTEXT_ORDER[2:6],
    "Last session",
    CONTEXT_ORDER[6],
]


def live_in(root: Path) -> Path:
    """A filled profile, an urgent task, memories and journal days."""
    write(
        root,
        "User Profile.md",
        """\
        ---
        name: Ada
        tags: [profile]
        ---
        # User Profile

        ## About
        - Ada is a marine engineer in Hamburg.

        ## Preferences
        - Short answers, no emoji.
        """,
    )
    write(
        root,
        "Current Status.md",
        """\
        # Current Status

        - **Last active:** 2026-11-20 18:00
        - **Working on:** the Kestrel refit
        """,
    )
    ok(root, "task", "add", "Renew the mooring permit", "-p", "urgent")
    ok(root, "task", "add", "Sort the bookshelf", "-p", "low")
    ok(root, "remember", "Ada is allergic to penicillin", "-t", "core", "-i", "0.9")
    ok(root, "remember", "The boat is called Kestrel", "-i", "0.7")
    ok(root, "remember", "The harbour fee is due in March", "-i", "0.6")
    ok(root, "journal", "add", "Checked the bilge pump")
    earlier = date.today() - timedelta(days=3)
    write(
        root,
        f"Journal/{earlier.isoformat()}.md",
        f"""\
        ---
        date: {earlier.isoformat()}
        tags: [journal]
        ---
        # {earlier.isoformat()}

        ## Observations
        - 10:00 Painted the hull of the Kestrel
        """,
    )
    return root


@pytest.fixture(scope="module")
def lived_in(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lived-in vault shared by the context tests (which only read it)."""
    root = tmp_path_factory.mktemp("lived-in") / "vault"
    ok(None, "init", root)
    return live_in(root)


def test_context_fills_sections_in_priority_order(lived_in: Path) -> None:
    markdown = ok(lived_in, "context").stdout

    titles = [t for t in headings_of(markdown) if t in CONTEXT_ORDER]
    assert titles == CONTEXT_ORDER
    assert "- Ada is a marine engineer in Hamburg." in markdown
    assert "- Renew the mooring permit (urgent)" in markdown
    assert "Sort the bookshelf" not in markdown
    assert "Checked the bilge pump" in markdown
    pinned = markdown.split("## Pinned memories", 1)[1].split("\n## ", 1)[0]
    assert "Ada is allergic to penicillin" in pinned
    important = markdown.split("## Important memories", 1)[1].split("\n## ", 1)[0]
    assert important.index("Kestrel") < important.index("harbour fee")  # by importance
    assert "penicillin" not in important  # shown once
    assert "Painted the hull of the Kestrel" in markdown.split("## Recent activity", 1)[1]
    assert "left out" not in markdown.lower()


def test_context_headings_are_only_the_builders_sections(lived_in: Path) -> None:
    markdown = ok(lived_in, "context").stdout

    assert headings_of(markdown) == CONTEXT_ORDER


def test_context_json_reports_the_budget(lived_in: Path) -> None:
    data = ok_json(lived_in, "context", "--budget", "100")

    assert set(data) == {"markdown", "tokens", "budget_tokens", "sections", "notice"}
    assert data["notice"] is None  # nothing was searched for
    assert data["budget_tokens"] == 100
    assert data["tokens"] <= 100
    assert len(data["markdown"]) <= 100 * 4
    assert data["tokens"] == (len(data["markdown"]) + 3) // 4
    assert [s["title"] for s in data["sections"]] == ALL_SECTIONS
    assert sum(s["left_out"] for s in data["sections"]) > 0
    assert all(set(s) == {"title", "shown", "left_out"} for s in data["sections"])


@pytest.mark.parametrize("budget", [50, 60, 80, 100, 150])
def test_a_small_budget_is_kept_and_says_what_it_left_out(lived_in: Path, budget: int) -> None:
    full = ok(lived_in, "context").stdout
    assert len(full) > budget * 4  # so something has to go

    data = ok_json(lived_in, "context", "--budget", budget)

    markdown = data["markdown"]
    assert ok(lived_in, "context", "--budget", budget).stdout == markdown
    assert len(markdown) <= budget * 4
    assert data["tokens"] <= budget
    assert sum(s["left_out"] for s in data["sections"]) > 0
    assert "more left out" in markdown or "Left out for the token budget" in markdown
    # Nothing is cut mid-line: each line is a line of the full context, or the left-out note.
    assert all(
        line in full.splitlines() or "left out" in line.lower() for line in markdown.split("\n")
    )
    # The sections that made it keep their priority order.
    shown = [t for t in headings_of(markdown) if t in CONTEXT_ORDER]
    assert shown == [t for t in CONTEXT_ORDER if t in shown]


def test_context_query_adds_a_relevant_section(lived_in: Path) -> None:
    markdown = ok(lived_in, "context", "--query", "harbour fee").stdout

    titles = headings_of(markdown)
    assert "Relevant to: harbour fee" in titles
    assert titles.index("Pinned memories") < titles.index("Relevant to: harbour fee")
    assert titles.index("Relevant to: harbour fee") < titles.index("Important memories")
    relevant = markdown.split("## Relevant to: harbour fee", 1)[1].split("\n## ", 1)[0]
    assert "The harbour fee is due in March" in relevant
    important = markdown.split("## Important memories", 1)[1].split("\n## ", 1)[0]
    assert "harbour fee" not in important  # each memory appears once


def test_context_of_an_empty_vault_says_so(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    ok(None, "init", root)

    # The notes init installed are still templates: all there is to tell an agent is that.
    said = (
        "## Working together\n"
        "- No memories yet: this may be the first session. Learn and remember.\n"
    )
    assert ok(root, "context").stdout == said
    data = ok_json(root, "context")
    assert data["markdown"] == said
    assert [s["title"] for s in data["sections"] if s["shown"]] == ["Working together"]


# -- mistakes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["search", ""], EXIT_INVALID, "query is empty"),
        (["search", "   "], EXIT_INVALID, "query is empty"),
        (["search", "x", "--kind", "bogus"], EXIT_INVALID, "Unknown kind 'bogus'"),
        (["search", "x", "--category", "bogus"], EXIT_INVALID, "'bogus'"),
        (["search", "x", "--since", "not-a-date"], EXIT_INVALID, "not a date"),
        (["search", "x", "--until", "2026-13-45"], EXIT_INVALID, "not a date"),
        (
            ["search", "x", "--since", "2026-02-01", "--until", "2026-01-01"],
            EXIT_INVALID,
            "range",
        ),
        (["search", "x", "--folder", "../x"], EXIT_INVALID, "inside the vault"),
        (["search", "x", "--folder", "/etc"], EXIT_INVALID, "absolute"),
        (["recall", ""], EXIT_INVALID, "query is empty"),
        (["recall", "x", "--category", "bogus"], EXIT_INVALID, "'bogus'"),
        (["tag", ""], EXIT_INVALID, "Name a tag"),
        (["tag", "#"], EXIT_INVALID, "Name a tag"),
        (["related", "Missing.md"], EXIT_NOT_FOUND, "Missing.md"),
        (["related", "../outside.md"], EXIT_INVALID, "inside the vault"),
    ],
)
def test_recall_mistakes_change_nothing(
    library: Path, args: list[str], code: int, words: str
) -> None:
    before = snapshot(library)

    message = fail(library, *args, code=code)

    assert words in message
    assert snapshot(library) == before


@pytest.mark.parametrize(
    "args",
    [
        ["context", "--budget", "10"],
        ["context", "--budget", "lots"],
        ["search", "x", "--limit", "0"],
        ["search", "x", "--mmr", "2"],
    ],
)
def test_out_of_range_options_are_usage_errors(library: Path, args: list[str]) -> None:
    before = snapshot(library)

    result = invoke(library, *args)

    assert result.exit_code == EXIT_INVALID
    assert result.stdout == ""
    assert args[-2].lstrip("-") in result.stderr  # names the option
    assert snapshot(library) == before


def test_commands_on_a_missing_vault_say_so(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    for args in (["index"], ["search", "x"], ["context"], ["tag", "x"]):
        assert "No vault at" in fail(missing, *args, code=5)
    assert not missing.exists()


# -- query strings are never syntax --------------------------------------------------------

HOSTILE_QUERIES = [
    '"',
    '""',
    "'",
    "AND",
    "a OR",
    "OR",
    "NOT",
    "NEAR(x y)",
    "NEAR(sailboat harbour, 2)",
    "*",
    "sail*",
    "^sailboat",
    "title:foo",
    "text:sailboat",
    "(((",
    ")",
    "'; DROP TABLE notes; --",
    'sailboat" OR "1"="1',
    "{text title}: sailboat",
    "-sailboat",
    "+",
    "\\",
    "🚀",
    "⛵ sailboat 🚀",
    "東京タワー",
    "Zürich straße ÆØÅ",
    "x" * 5000,
    " ".join(["sailboat"] * 1000),
    "line\nbreak\ttab",
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=range(len(HOSTILE_QUERIES)))
def test_any_query_string_is_safe(library: Path, query: str) -> None:
    # state.db notes which memories a search returned (the archival job's recall log).
    def files() -> dict[str, str]:
        return {p: h for p, h in snapshot(library).items() if not p.startswith(".memvault/state")}

    before = files()

    # "--" ends the options, so a query starting with "-" is a query.
    hits = json.loads(ok(library, "search", "--json", "--", query).stdout)

    assert isinstance(hits, list)
    assert all(set(h) == HIT_KEYS for h in hits)
    assert isinstance(json.loads(ok(library, "recall", "--json", "--", query).stdout), list)
    assert files() == before


def test_a_query_with_a_control_character_is_refused(library: Path) -> None:
    """NUL and the other control characters are not text: one sentence, exit 2."""
    message = fail(library, "search", "--", "a\x00b", code=2)
    assert message == (
        "Error: The argument QUERY contains a character that is not valid text "
        "(the control character U+0000)."
    )


def test_hostile_queries_still_find_their_words(library: Path) -> None:
    for query in ['sailboat"', "sailboat AND", "NEAR(sailboat)", "title:sailboat", "(((sailboat"]:
        assert search(library, query), query
    assert ok(library, "context", "--query", "'; DROP TABLE notes; --").exit_code == 0
    assert ok_json(library, "index")["status"]["notes"] == len(indexable_notes(library))


# -- the real local embedder ---------------------------------------------------------------


@pytest.fixture(scope="module")
def semantic_vault(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A vault indexed with the bundled MiniLM model (loaded once for the module)."""
    root = tmp_path_factory.mktemp("semantic") / "vault"
    ok(None, "init", root)
    oolong = ok_json(root, "remember", "The owner drinks oolong every morning", embedder="none")
    for text in (
        "The car is parked in the garage on level 3",
        "The quarterly tax return is filed by the accountant",
        "Kestrel's hull was repainted last spring",
        "The wifi password is on the fridge",
    ):
        ok(root, "remember", text, "-c", "context", embedder="none")
    report = ok_json(root, "index", embedder="local")
    return {"root": root, "oolong": oolong["id"], "report": report}


@pytest.mark.slow
def test_index_embeds_with_the_local_model(semantic_vault: dict[str, Any]) -> None:
    report = semantic_vault["report"]
    status = report["status"]

    assert report["embedded"] == status["chunks"] > 0
    assert status["pending"] == 0
    assert status["embedder"] == LOCAL_IDENTITY
    assert status["built_with"] == LOCAL_IDENTITY
    assert status["dimension"] == 384
    assert status["mismatch"] is None


@pytest.mark.slow
def test_search_finds_a_memory_by_meaning(semantic_vault: dict[str, Any]) -> None:
    root = semantic_vault["root"]

    hits = search(root, "tea habits", embedder="local")

    assert hits[0]["id"] == semantic_vault["oolong"]
    assert hits[0]["text_score"] == 0  # no word in common
    assert hits[0]["vector_score"] > 0.2
    assert search(root, "tea habits", "--keyword", embedder="local") == []
    recalled = ok_json(root, "recall", "tea habits", embedder="local")
    assert recalled[0]["id"] == semantic_vault["oolong"]


def switched(**extra: str) -> dict[str, str]:
    """Environment that configures an OpenAI-compatible embedder nobody serves."""
    return {
        "MEMVAULT_EMBEDDER__BASE_URL": DEAD_ENDPOINT,
        "MEMVAULT_EMBEDDER__MAX_RETRIES": "0",
        **extra,
    }


@pytest.mark.slow
def test_index_explains_a_changed_embedder(semantic_vault: dict[str, Any]) -> None:
    root = semantic_vault["root"]

    result = ok(root, "index", embedder="openai", env=switched())

    assert result.stdout.startswith("Indexed ")
    assert LOCAL_IDENTITY in result.stderr
    assert "openai:text-embedding-3-small" in result.stderr
    assert "memvault index --reembed" in result.stderr
    data = json.loads(ok(root, "index", "--json", embedder="openai", env=switched()).stdout)
    assert data["embedded"] == 0
    assert data["status"]["built_with"] == LOCAL_IDENTITY
    assert "memvault index --reembed" in data["status"]["mismatch"]


@pytest.mark.slow
def test_keyword_search_works_after_an_embedder_change(semantic_vault: dict[str, Any]) -> None:
    root = semantic_vault["root"]

    hits = search(root, "oolong", "--keyword", embedder="openai", env=switched())
    assert hits[0]["id"] == semantic_vault["oolong"]
    # Without --keyword the search falls back to keywords rather than failing.
    fallback = search(root, "oolong", embedder="openai", env=switched())
    assert fallback[0]["id"] == semantic_vault["oolong"]
    assert ok_json(root, "recall", "oolong", embedder="openai", env=switched())


@pytest.mark.slow
def test_semantic_search_after_an_embedder_change_explains_itself(
    semantic_vault: dict[str, Any],
) -> None:
    result = ok(semantic_vault["root"], "search", "tea habits", embedder="openai", env=switched())

    assert "memvault index --reembed" in result.stderr


@pytest.mark.slow
def test_a_failed_reembed_keeps_the_old_vectors(
    semantic_vault: dict[str, Any], tmp_path: Path
) -> None:
    gc.collect()
    root = tmp_path / "copy"
    shutil.copytree(semantic_vault["root"], root)

    message = fail(root, "index", "--reembed", code=1, embedder="openai", env=switched())
    assert "Cannot reach the embedding service" in message

    status = ok_json(root, "index", "--no-embed", embedder="local")["status"]
    assert status["built_with"] == LOCAL_IDENTITY
    assert status["pending"] == 0


def test_created_dates_in_hits_are_iso(library: Path) -> None:
    hit = next(h for h in search(library, "sailboat") if h["id"] == "m-00000001")

    created = datetime.fromisoformat(hit["created"])
    assert (created.year, created.month, created.day, created.hour) == (2023, 5, 8, 13)
    assert hit["origin"] == "chat"
    assert hit["tags"] == ["boat"]
