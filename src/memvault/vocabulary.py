"""The fixed words of memvault's world, in one light module.

Memory categories, task statuses and priorities, journal sections, contact
channels, search kinds, tool export formats. The modules that give these
words meaning (``vault.memories``, ``vault.tasks`` ...) import them from here;
the CLI reads them for its help text without loading those modules, so a
command answered by the daemon starts fast.
"""

from __future__ import annotations

# Memory category -> the title of its file in Memory/.
CATEGORIES: dict[str, str] = {
    "preference": "Preferences",
    "decision": "Decisions",
    "fact": "Facts",
    "context": "Context",
    "project": "Projects",
    "person": "People",
    "correction": "Corrections",
    "pattern": "Patterns",
    "issue": "Issues",
    # What was said in a conversation, one turn a memory (memory/conversations.py): files
    # of their own under Memory/Conversations/, left out of listings unless asked for.
    "conversation": "Conversations",
}
CONVERSATION = "conversation"
# The earlier designs' category names, taken as memvault's own (a contact is a person;
# "general", their default, a fact).
CATEGORY_ALIASES: dict[str, str] = {"contact": "person", "general": "fact"}

STATUSES = ("todo", "in_progress", "blocked", "done", "cancelled")
OPEN_STATUSES = frozenset({"todo", "in_progress", "blocked"})
PRIORITIES = ("low", "medium", "high", "urgent")

# Channels a contact can have an identity on; each is a frontmatter key (telegram: "123456").
KNOWN_CHANNELS = (
    "telegram",
    "whatsapp",
    "signal",
    "discord",
    "slack",
    "line",
    "imessage",
    "matrix",
    "sms",
    "mastodon",
    "teams",
    "messenger",
    "wechat",
    "openclaw",
)

SECTIONS = ("Actions Taken", "Commands Received", "Observations", "Decisions Made", "Follow-ups")

KINDS = ("note", "memory", "task", "contact", "project", "journal", "insight", "skill", "entity")

TOOL_FORMATS = ("anthropic", "openai", "mcp")


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun in agreement: ``1 memory``, ``2 memories``, ``0 results``.

    The plural is ``noun`` + "s" (a consonant + "y" becomes "ies") unless given.
    """
    if number == 1:
        return f"1 {noun}"
    if plural is None:
        consonant_y = noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u")
        plural = noun[:-1] + "ies" if consonant_y else noun + "s"
    return f"{number} {plural}"
