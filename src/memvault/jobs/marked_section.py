"""memvault's own part of a note a person also writes in, between two HTML comments.

A job that maintains part of a note (the day's summary in a journal note,
the living summary in ``MEMORY.md``) keeps it between a start and an end
marker, each alone on its line::

    <!-- memvault:living-summary -->
    ...what the job wrote...
    <!-- /memvault:living-summary -->

Only that block is ever replaced: every byte outside it is the owner's and
stays as it was. Obsidian does not render the comments, so the note reads
as one page. A note with a broken pair of markers (one missing, or the
block twice) is refused with a sentence saying what to fix, never guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memvault.errors import ConflictError


@dataclass(frozen=True)
class Markers:
    """The start and end comments of one kind of block, e.g. ``living-summary``."""

    name: str

    @property
    def start(self) -> str:
        """The start marker line."""
        return f"<!-- memvault:{self.name} -->"

    @property
    def end(self) -> str:
        """The end marker line."""
        return f"<!-- /memvault:{self.name} -->"

    def block(self, body: str) -> str:
        """The whole block around ``body`` (no newline after the end marker)."""
        return f"{self.start}\n{body.strip(chr(10))}\n{self.end}"

    def mentioned_in(self, text: str) -> bool:
        """Whether ``text`` holds anything that reads as one of these markers (or any
        memvault marker): text that would break the block if written inside it."""
        return bool(re.search(r"<!--\s*/?\s*memvault:", text, re.IGNORECASE))

    def span(self, text: str, where: str) -> tuple[int, int] | None:
        """Where the block is in ``text`` (start of its start marker, end of its end
        marker), or None when there is none; ConflictError for a broken pair."""
        starts = _marker_lines(text, self.start)
        ends = _marker_lines(text, self.end)
        if not starts and not ends:
            return None
        if len(starts) == 1 and len(ends) == 1 and starts[0][0] < ends[0][0]:
            return starts[0][0], ends[0][1]
        if len(starts) > 1 or len(ends) > 1:
            problem = f"holds memvault's {self.name} block more than once"
        elif not ends:
            problem = f"has the line {self.start} but not its end line {self.end}"
        elif not starts:
            problem = f"has the line {self.end} but not its start line {self.start}"
        else:
            problem = f"has {self.end} before {self.start}"
        raise ConflictError(
            f"{where} {problem}; fix the markers by hand (or delete both, and the "
            "block between them) so memvault can tell its part from yours."
        )

    def inner(self, text: str, where: str) -> str | None:
        """The text between the markers, or None when the note has no block."""
        if self.span(text, where) is None:
            return None
        (start,) = _marker_lines(text, self.start)
        (end,) = _marker_lines(text, self.end)
        return text[start[1] : end[0]].strip("\r\n")

    def put(
        self,
        text: str,
        body: str,
        where: str,
        *,
        replacing: str | None = None,
        insert_at: int | None = None,
    ) -> str:
        """``text`` with its block holding ``body``; everything else byte for byte.

        Without a block yet, ``replacing`` (if ``text`` holds it exactly once)
        is replaced by the block; else the block goes in at offset
        ``insert_at`` (the start of a line) or at the end, set off by blank lines.
        """
        block = self.block(body)
        found = self.span(text, where)
        if found is not None:
            return text[: found[0]] + block + text[found[1] :]
        if replacing and text.count(replacing) == 1:
            return text.replace(replacing, block + "\n", 1)
        at = len(text) if insert_at is None else insert_at
        before, after = text[:at], text[at:]
        if before and not before.endswith("\n"):
            before += "\n"
        lead = "\n" if before and not before.endswith("\n\n") else ""
        tail = "\n" if after and not after.startswith("\n") else ""
        return f"{before}{lead}{block}\n{tail}{after}"


def _marker_lines(text: str, marker: str) -> list[tuple[int, int]]:
    """The spans of the lines that hold just ``marker`` (spaces around allowed)."""
    pattern = re.compile(rf"^[ \t]*{re.escape(marker)}[ \t]*(?=\r?$)", re.MULTILINE)
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def item_line(text: str, limit: int) -> str:
    """``text`` as one line of a marked section: white space runs made one space, at most
    ``limit`` characters, and unable to open an HTML comment (so never a marker)."""
    line = " ".join(text.split()).replace("<!--", "&lt;!--")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
