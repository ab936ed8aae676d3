"""What consolidation did to memories, and what it left for the owner to decide.

Two tables of state.db: ``memory_changes`` (one row per change: the memory,
the action, its text before and after, the other memory involved, why, who
decided, when), which ``memvault memory history ID`` reads; and
``memory_reviews`` (decisions not sure or sound enough to apply), which
``memvault memory review`` lists, applies or dismisses. Times are stored in
UTC so they sort as text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from memvault.errors import InvalidInputError, NotFoundError
from memvault.memory.state import StateStore


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Change:
    """One change consolidation (or the owner, through a review) made to a memory."""

    memory_id: str
    action: str  # add, update, supersede, superseded, noop
    old_text: str | None
    new_text: str | None
    related_id: str | None
    reason: str
    decided_by: str  # rule, model, owner
    at: datetime

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "memory_id": self.memory_id,
            "action": self.action,
            "old_text": self.old_text,
            "new_text": self.new_text,
            "related_id": self.related_id,
            "reason": self.reason,
            "decided_by": self.decided_by,
            "at": self.at.isoformat(timespec="seconds"),
        }


@dataclass(frozen=True)
class Review:
    """A decision kept back: the memory added as it was, and what was nominated for it."""

    id: int
    memory_id: str
    text: str
    action: str | None
    target: str | None
    merged_text: str | None
    reason: str
    confidence: float | None
    problem: str | None
    candidates: list[str]
    status: str
    created_at: datetime

    @property
    def applicable(self) -> bool:
        """Whether the nomination names everything needed to apply it."""
        if self.action == "add":
            return True
        if self.action not in ("update", "supersede", "noop") or not self.target:
            return False
        return self.action != "update" or bool(self.merged_text)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "memory_id": self.memory_id,
            "text": self.text,
            "action": self.action,
            "target": self.target,
            "merged_text": self.merged_text,
            "reason": self.reason,
            "confidence": self.confidence,
            "problem": self.problem,
            "candidates": list(self.candidates),
            "status": self.status,
            "created_at": self.created_at.isoformat(timespec="seconds"),
            "applicable": self.applicable,
        }


class RevisionLog:
    """Reads and writes ``memory_changes`` and ``memory_reviews``."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    def record(self, change: Change) -> None:
        """Append one change."""
        with self.state.transaction() as conn:
            conn.execute(
                "INSERT INTO memory_changes (memory_id, action, old_text, new_text, related_id,"
                " reason, decided_by, at) VALUES (?,?,?,?,?,?,?,?)",
                (
                    change.memory_id,
                    change.action,
                    change.old_text,
                    change.new_text,
                    change.related_id,
                    change.reason,
                    change.decided_by,
                    _utc(change.at),
                ),
            )

    def history(self, memory_id: str, tz: tzinfo | None = None) -> list[Change]:
        """The changes of a memory, and those naming it as the other memory, oldest first."""
        rows = self.state.query(
            "SELECT * FROM memory_changes WHERE memory_id = ? OR related_id = ? ORDER BY id",
            (memory_id, memory_id),
        )
        return [
            Change(
                memory_id=row["memory_id"],
                action=row["action"],
                old_text=row["old_text"],
                new_text=row["new_text"],
                related_id=row["related_id"],
                reason=row["reason"],
                decided_by=row["decided_by"],
                at=datetime.fromisoformat(row["at"]).astimezone(tz),
            )
            for row in rows
        ]

    def hold(
        self,
        *,
        memory_id: str,
        text: str,
        action: str | None,
        target: str | None,
        merged_text: str | None,
        reason: str,
        confidence: float | None,
        problem: str | None,
        candidates: list[str],
        when: datetime,
    ) -> int:
        """Keep a decision for review; its id."""
        with self.state.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO memory_reviews (memory_id, text, action, target, merged_text, reason,"
                " confidence, problem, candidates, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    memory_id,
                    text,
                    action,
                    target,
                    merged_text,
                    reason,
                    confidence,
                    problem,
                    json.dumps(candidates),
                    _utc(when),
                ),
            )
            return int(cursor.lastrowid or 0)

    def reviews(self, *, status: str = "pending", tz: tzinfo | None = None) -> list[Review]:
        """Reviews with this status, oldest first."""
        rows = self.state.query(
            "SELECT * FROM memory_reviews WHERE status = ? ORDER BY id", (status,)
        )
        return [_review(row, tz) for row in rows]

    def review(self, review_id: int, tz: tzinfo | None = None) -> Review:
        """One review; NotFoundError if there is none with this id."""
        rows = self.state.query("SELECT * FROM memory_reviews WHERE id = ?", (review_id,))
        if not rows:
            raise NotFoundError(
                f"No memory review {review_id}.",
                hint="List pending ones with `memvault memory review`.",
            )
        return _review(rows[0], tz)

    def resolve(self, review_id: int, status: str, when: datetime) -> None:
        """Mark a pending review applied or dismissed (once: a resolved one is refused)."""
        with self.state.transaction() as conn:
            done = conn.execute(
                "UPDATE memory_reviews SET status = ?, resolved_at = ?"
                " WHERE id = ? AND status = 'pending'",
                (status, _utc(when), review_id),
            ).rowcount
        if not done:
            current = self.review(review_id)
            raise InvalidInputError(f"Memory review {review_id} was already {current.status}.")


def _review(row: Any, tz: tzinfo | None) -> Review:
    return Review(
        id=int(row["id"]),
        memory_id=row["memory_id"],
        text=row["text"],
        action=row["action"],
        target=row["target"],
        merged_text=row["merged_text"],
        reason=row["reason"],
        confidence=row["confidence"],
        problem=row["problem"],
        candidates=[str(c) for c in json.loads(row["candidates"] or "[]")],
        status=row["status"],
        created_at=datetime.fromisoformat(row["created_at"]).astimezone(tz),
    )
