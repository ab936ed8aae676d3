"""What a search returns: hits, best first, and how they were found.

A :class:`Hit` has the shape of OpenClaw's ``memory_search`` results;
:class:`SearchResults` adds the mode the search could use and, when that is not what
was asked, why in one sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

SNIPPET_CHARS = 700


@dataclass
class Hit:
    """One search result, compatible with OpenClaw's ``memory_search`` shape."""

    path: str
    start_line: int
    end_line: int
    score: float
    vector_score: float
    text_score: float
    snippet: str
    kind: str
    source: str  # "memory" for memory bullets, "vault" for notes
    id: str | None  # the memory id when the hit is a memory
    title: str = ""
    heading: str = ""
    category: str | None = None
    created: datetime | None = None
    tags: list[str] = field(default_factory=list)
    origin: str | None = None  # where a memory came from (cli, telegram, ...)
    chunk_id: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "score": round(self.score, 4),
            "vector_score": round(self.vector_score, 4),
            "text_score": round(self.text_score, 4),
            "snippet": self.snippet,
            "kind": self.kind,
            "source": self.source,
            "id": self.id,
            "title": self.title,
            "heading": self.heading,
            "category": self.category,
            "created": self.created.isoformat(timespec="seconds") if self.created else None,
            "tags": list(self.tags),
            "origin": self.origin,
        }


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """At most ``limit`` characters, cut at a word boundary."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut) + "…"


class SearchResults(list[Hit]):
    """Hits, best first, and how they were found.

    ``mode`` is what the search could use (``keyword`` when no vector was
    available); ``notice`` says why, in one sentence, when that differs from
    what was asked.
    """

    def __init__(
        self, hits: Iterable[Hit] = (), *, mode: str = "hybrid", notice: str | None = None
    ) -> None:
        super().__init__(hits)
        self.mode = mode
        self.notice = notice


# Told each search's results after it answered.
SearchObserver = Callable[[SearchResults], None]
