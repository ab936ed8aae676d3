"""What a search may return: folder, kinds, category, tags, dates, archived memories, and
which memories at all (a confined agent's own).

:class:`SearchFilters` checks and normalises what a caller asked for (one
clear sentence for a mistake) and turns it into SQL over the chunks and
their notes; :func:`parse_day` reads the date bounds people type.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from memvault.errors import InvalidInputError
from memvault.vault.memories import Memories
from memvault.vault.paths import normalize_relpath
from memvault.vocabulary import KINDS


@dataclass(frozen=True)
class SearchFilters:
    """Restrictions on what a search may return."""

    folder: str | None = None
    kinds: tuple[str, ...] = ()
    category: str | None = None
    tags: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    include_archived: bool = False
    # Only these memories, and nothing else (no notes): a confined agent's own. None: any.
    memory_ids: frozenset[str] | None = None

    def checked(self) -> SearchFilters:
        """The filters with names validated and normalised (a clear error otherwise)."""
        kinds = tuple(k.strip().lower() for k in self.kinds if k.strip())
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise InvalidInputError(f"Unknown kind {unknown[0]!r}; use one of {', '.join(KINDS)}.")
        category = Memories.check_category(self.category) if self.category else None
        folder = normalize_relpath(self.folder, allow_root=True) if self.folder else None
        tags = tuple(t.strip().lstrip("#") for t in self.tags if t.strip().lstrip("#"))
        if self.since and self.until and self.since > self.until:
            raise InvalidInputError("The date range ends before it starts.")
        return SearchFilters(
            folder or None,
            kinds,
            category,
            tags,
            self.since,
            self.until,
            self.include_archived,
            self.memory_ids,
        )

    def sql(self) -> tuple[str, list[Any]]:
        """A WHERE clause over ``chunks c JOIN notes n`` and its parameters."""
        clauses: list[str] = []
        params: list[Any] = []
        if self.folder:
            clauses.append("(n.path LIKE ? ESCAPE '\\')")
            params.append(like_prefix(self.folder) + "/%")
        if self.kinds:
            clauses.append(f"c.kind IN ({','.join('?' * len(self.kinds))})")
            params.extend(self.kinds)
        if self.category:
            clauses.append("c.category = ?")
            params.append(self.category)
        if self.tags:
            tag_clauses = []
            for tag in self.tags:
                tag_clauses.append("(t.tag = ? OR t.tag LIKE ? ESCAPE '\\')")
                params.extend([tag, like_prefix(tag) + "/%"])
            clauses.append(
                "c.id IN (SELECT t.chunk_id FROM chunk_tags t WHERE "
                + " OR ".join(tag_clauses)
                + ")"
            )
        if self.since:
            clauses.append("c.created >= ?")
            params.append(self.since.timestamp())
        if self.until:
            clauses.append("c.created < ?")
            params.append(self.until.timestamp())
        if not self.include_archived:
            clauses.append("c.archived = 0")
        if self.memory_ids is not None:
            ids = sorted(self.memory_ids)
            clauses.append(f"c.memory_id IN ({','.join('?' * len(ids))})" if ids else "1 = 0")
            params.extend(ids)
        # "1 = 1", not "1": PostgreSQL wants a boolean.
        return (" AND ".join(clauses) if clauses else "1 = 1"), params

    @property
    def restrictive(self) -> bool:
        """Whether anything beyond hiding archived memories is filtered."""
        return bool(
            self.folder
            or self.kinds
            or self.category
            or self.tags
            or self.since
            or self.until
            or self.memory_ids is not None
        )


def like_prefix(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def parse_day(value: str | date | datetime | None, tz: Any) -> datetime | None:
    """A filter bound from ``YYYY-MM-DD`` (start of that day in the owner's zone) or a datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=tz)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=tz)
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInputError(f"{value!r} is not a date; use YYYY-MM-DD.") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=tz)
