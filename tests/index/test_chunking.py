from __future__ import annotations

import itertools
from datetime import datetime
from textwrap import dedent

from memvault.index.chunking import (
    estimate_tokens,
    field_summary,
    kind_of,
    memory_chunks,
    note_chunks,
)
from memvault.vault.memories import Memory
from memvault.vault.note import Note
from support import TZ


def _chunks(text: str, kind: str = "note", **kwargs: int) -> list:  # type: ignore[type-arg]
    note = Note.parse(text)
    return note_chunks(
        path="Notes/x.md",
        kind=kind,
        title="X",
        body=note.body,
        body_offset=note.body_offset,
        frontmatter=note.frontmatter,
        tags=["t"],
        created=0.0,
        **kwargs,
    )


def test_kind_comes_from_the_folder() -> None:
    assert kind_of("Tasks/active/a.md") == "task"
    assert kind_of("Contacts/Ada.md") == "contact"
    assert kind_of("Memory/Facts.md") == "memory"
    assert kind_of("Journal/2026-11-22.md") == "journal"
    assert kind_of("Home.md") == "note"
    assert kind_of("Elsewhere/Tasks/x.md") == "note"


def test_small_sections_share_a_chunk_with_line_ranges() -> None:
    text = "---\na: 1\n---\n# Title\n\nIntro.\n\n## One\nFirst.\n\n## Two\nSecond.\n"
    chunks = _chunks(text)
    assert len(chunks) == 1
    assert (chunks[0].start_line, chunks[0].end_line) == (4, 12)
    lines = text.splitlines()
    assert lines[chunks[0].start_line - 1] == "# Title"
    assert lines[chunks[0].end_line - 1] == "Second."


def test_lines_of_a_code_block_are_kept_whatever_they_look_like() -> None:
    text = (
        "# Shell\n\n## Setup\n```sh\n## uncomment to enable tracing\n## export TRACE=1\n"
        "-\n```\n\n## Empty\n\n## Next\nDone.\n"
    )
    [chunk] = _chunks(text)
    assert "## uncomment to enable tracing\n## export TRACE=1\n-\n```" in chunk.text
    assert "## Empty" not in chunk.text  # outside the block, an empty section still goes


def test_long_sections_split_with_overlap_and_true_line_numbers() -> None:
    lines = [f"Line {n} says something moderately long about topic {n}." for n in range(60)]
    text = "# Big\n\n## Part\n" + "\n".join(lines) + "\n"
    chunks = _chunks(text, chunk_tokens=100, overlap_tokens=20)
    assert len(chunks) > 3
    source = text.split("\n")
    for chunk in chunks:
        assert estimate_tokens(chunk.text) <= 100
        assert source[chunk.start_line - 1].strip() == chunk.text.split("\n")[0].strip()
        assert source[chunk.end_line - 1].strip() == chunk.text.split("\n")[-1].strip()
    for before, after in itertools.pairwise(chunks):
        assert after.start_line <= before.end_line  # overlapping lines
        assert after.start_line > before.start_line
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    assert covered >= set(range(4, len(source)))  # every content line is in some chunk


def test_context_carries_title_heading_path_and_typed_fields() -> None:
    text = dedent(
        """\
        ---
        status: todo
        priority: high
        project: "[[Apollo]]"
        tags: [x]
        ---
        # Launch

        ## Steps
        Count down.
        """
    )
    chunks = _chunks(text, kind="task")
    assert "priority: high" in chunks[0].context and "project: Apollo" in chunks[0].context
    assert "tags" not in chunks[0].context
    assert field_summary("note", {"status": "x"}) == ""


def test_empty_note_is_still_findable_by_title() -> None:
    chunks = _chunks("---\nstatus: todo\n---\n", kind="task")
    assert [c.text for c in chunks] == ["X"]
    assert chunks[0].context == "status: todo"


def _memory(n: int, source: str, hour: int = 10) -> Memory:
    return Memory(
        id=f"m-{n:08x}",
        text=f"turn {n}",
        category="context",
        importance=0.5,
        tags=[],
        created=datetime(2026, 11, 22, hour, 0, tzinfo=TZ),
        source=source,
        path="Memory/Context.md",
        line=n + 7,
    )


def test_memory_context_is_the_window_from_the_same_source_and_time() -> None:
    a, b = "chat:a", "chat:b"
    memories = [_memory(0, a), _memory(1, a), _memory(2, a), _memory(3, b), _memory(4, a, hour=23)]
    chunks = memory_chunks(memories, window=2, max_gap_hours=6)
    assert [c.memory_id for c in chunks] == [m.id for m in memories]
    assert chunks[0].context == "turn 0\nturn 1\nturn 2"
    assert chunks[2].context == "turn 0\nturn 1\nturn 2"  # turn 3 is another source, 4 too late
    assert chunks[3].context == ""  # alone in its source
    assert chunks[4].context == ""
    assert all(c.start_line == c.end_line for c in chunks)
    assert chunks[1].hash != memory_chunks(memories[:2], window=2)[1].hash  # context is part of it


def test_plain_sources_do_not_make_neighbours() -> None:
    memories = [_memory(0, "cli"), _memory(1, "cli"), _memory(2, "")]
    assert [c.context for c in memory_chunks(memories)] == ["", "", ""]
