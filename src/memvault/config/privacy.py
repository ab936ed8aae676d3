"""Privacy: what contacts and other audiences may see, and secrets."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from memvault.config.base import Section


class ContactPrivacy(Section):
    """What one contact sees besides what is shared with them by name."""

    share: list[str] = Field(
        [], description='names of what they also see, e.g. ["family"] for #share/family'
    )
    trusted: bool = Field(False, description="sees everything the owner sees (a partner)")
    capture: bool = Field(
        True, description="keep their conversations as searchable memories ([memory] capture)"
    )


class PrivacySettings(Section):
    """Who may know what: secrets kept out, untrusted text marked, reads recorded
    (``memvault.privacy``)."""

    contacts: dict[str, ContactPrivacy] = Field(
        {},
        description="per contact (its name, alias or note path): the names of what it "
        "also sees, and whether it is trusted with everything",
    )

    secrets: Literal["redact", "refuse", "keep"] = Field(
        "redact",
        description="a secret (key, token, password, card number) in text being stored: "
        "redact (replaced by a marker), refuse (nothing is stored) or keep",
    )
    trust: Literal["mark", "off"] = Field(
        "mark",
        description="text from anyone but the owner (contacts, groups, emails, what the "
        "model read, imports) that reads as an instruction to the agent: mark (stored as "
        "[trust:: low] with a reason, shown to models only as data) or off",
    )
    reads_keep_days: int = Field(
        90,
        ge=0,
        le=3650,
        description="days each memory's reads (who, when, how) are kept; 0 records none",
    )
    reads_per_memory: int = Field(
        1000, ge=1, le=1_000_000, description="reads kept per memory at most (the newest)"
    )
