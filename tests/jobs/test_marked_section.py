"""memvault's marked block inside a note a person writes in."""

from __future__ import annotations

import pytest

from memvault.errors import ConflictError
from memvault.jobs.marked_section import Markers

M = Markers("test-block")


def test_a_block_is_replaced_in_place_and_nothing_else_moves() -> None:
    text = f"head\r\n{M.start}\r\nold\r\n{M.end}\r\ntail\r\n"
    assert M.inner(text, "n.md") == "old"
    new = M.put(text, "new", "n.md")
    assert new == f"head\r\n{M.start}\nnew\n{M.end}\r\ntail\r\n"
    assert M.put(new, "new", "n.md") == new


def test_without_a_block_it_goes_where_asked_set_off_by_blank_lines() -> None:
    assert M.put("", "x", "n.md") == f"{M.start}\nx\n{M.end}\n"
    assert M.put("a", "x", "n.md") == f"a\n\n{M.start}\nx\n{M.end}\n"
    assert (
        M.put("# T\n## S\n", "x", "n.md", insert_at=4) == f"# T\n\n{M.start}\nx\n{M.end}\n\n## S\n"
    )
    assert M.put("a\n## E\n\n## F\n", "x", "n.md", replacing="## E\n\n## F\n") == (
        f"a\n{M.start}\nx\n{M.end}\n"
    )


def test_a_marker_inside_a_line_is_text_not_a_marker() -> None:
    text = f"I once wrote `{M.start}` in a sentence.\n"
    assert M.inner(text, "n.md") is None
    assert M.put(text, "x", "n.md").startswith(text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (f"{M.start}\nx\n", "but not its end line"),
        (f"x\n{M.end}\n", "but not its start line"),
        (f"{M.end}\n{M.start}\n", "before"),
        (f"{M.start}\n{M.end}\n{M.start}\n{M.end}\n", "more than once"),
    ],
)
def test_a_broken_pair_is_refused_with_what_to_fix(text: str, problem: str) -> None:
    with pytest.raises(ConflictError, match=problem):
        M.put(text, "x", "MEMORY.md")


def test_any_memvault_marker_in_a_text_is_noticed() -> None:
    assert M.mentioned_in("a <!-- /memvault:other --> b")
    assert M.mentioned_in("<!--memvault:test-block-->")
    assert not M.mentioned_in("a <!-- a comment --> b")
