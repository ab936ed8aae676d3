"""What forgetting gives back: the receipt of where it looked and what it did, and the plan
shown before forgetting a person or a topic (:mod:`memvault.privacy.forgetting`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memvault.vault.memories import Memory


@dataclass(frozen=True)
class Place:
    """One place forgetting looked at: what it did there, and how many things."""

    place: str
    action: str  # removed, refreshed, dropped, deleted, redacted, verified, not touched
    detail: str
    count: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "place": self.place,
            "action": self.action,
            "detail": self.detail,
            "count": self.count,
        }


@dataclass
class Receipt:
    """What forgetting removed, where, and what it left alone by design."""

    forgotten: list[Memory]
    places: list[Place] = field(default_factory=list)
    untouched: list[Place] = field(default_factory=list)
    still_found: list[str] = field(default_factory=list)  # the owner's notes with a trace
    subject: str | None = None  # "contact:Contacts/Ada.md" or "about:TOPIC"
    # Whether a text holds a trace of what was forgotten (for places only a caller knows,
    # such as a daemon's event buffer); never sent.
    holds: Callable[[str], bool] = field(default=lambda text: False, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "subject": self.subject,
            "forgotten": [{"id": m.id, "text": m.text, "path": m.path} for m in self.forgotten],
            "places": [p.to_dict() for p in self.places],
            "untouched": [p.to_dict() for p in self.untouched],
            "still_found": list(self.still_found),
        }


@dataclass
class Plan:
    """What ``forget --contact`` or ``--about`` would remove, shown before it does."""

    kind: str  # "contact" or "about"
    subject: str  # the contact's note path, or the topic
    memories: list[Memory]
    notes: list[str]  # notes dropped whole: the contact's note, insights about the topic
    identities: dict[str, list[str]] = field(default_factory=dict)  # channel -> ids
    chats: int = 0  # messages captured from (or sent to) the person

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "kind": self.kind,
            "subject": self.subject,
            "memories": [{"id": m.id, "text": m.text, "path": m.path} for m in self.memories],
            "notes": list(self.notes),
            "identities": {k: list(v) for k, v in self.identities.items()},
            "chat_messages": self.chats,
        }
