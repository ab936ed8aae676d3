"""What was said: every turn of a conversation kept whole, as a memory of its own.

A message in and a reply out become one bullet each in the conversation's file
for the month, ``Memory/Conversations/2026-11/telegram 123456.md``::

    - Ada Lovelace: Are we still on for Friday? [importance:: 0.3]
      [created:: 2026-11-27 10:31:05] [source:: telegram:123456] [channel:: telegram]
      [speaker:: Ada Lovelace] [share:: Contacts/Ada Lovelace] [trust:: low] ^m-3f9a1c2b

(one line in the file). A turn is the unit the index ranks, and the turns of one
conversation (one ``source``, close in time) are each other's neighbours, so a
question finds the turn that answers it with what was said around it: the form
that recalls best on LoCoMo. The turns are memories like any other (searched,
recalled, archived, forgotten), in the category ``conversation``, which listings
leave out unless asked for.

Who may see a turn is decided by the caller (:mod:`memvault.privacy.capture`):
this module writes what it is given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memvault.vault.memories import MAX_TEXT_CHARS, MEMORY_DIR, Memories, Memory
from memvault.vault.paths import safe_filename
from memvault.vocabulary import CONVERSATION

CONVERSATIONS_DIR = f"{MEMORY_DIR}/Conversations"
# A long message is kept in consecutive turns of at most this many characters (a memory
# line holds MAX_TEXT_CHARS; the speaker's name and the markers need the rest).
_PART_CHARS = MAX_TEXT_CHARS - 400
_UNSAFE_KEY = re.compile(r"[:/\\]+")


@dataclass(frozen=True)
class Turn:
    """One message of a conversation, as it is to be kept."""

    session: str  # the conversation's key (``telegram:123456``, ``cli``)
    speaker: str  # who said it, as the line names them
    text: str
    when: datetime
    channel: str | None = None
    with_whom: str = ""  # whom the conversation is with, for the file's heading
    share: str | None = None  # the audience it is shared with (None: the owner's alone)
    low_trust: bool = False  # said by someone other than the owner
    contact: str | None = None  # the speaker's contact note, when they have one
    importance: float | None = None  # None: the vault's default


def conversation_path(session: str, when: datetime) -> str:
    """The file a conversation's turns of ``when``'s month go to."""
    name = safe_filename(_UNSAFE_KEY.sub(" ", session).strip() or "conversation")
    return f"{CONVERSATIONS_DIR}/{when:%Y-%m}/{name}.md"


def _header(turn: Turn) -> str:
    whom = f" with {turn.with_whom}" if turn.with_whom else ""
    where = f" on {turn.channel}" if turn.channel else ""
    share = f"share: [{_quoted(turn.share)}]\n" if turn.share else ""
    return (
        f"---\ncategory: {CONVERSATION}\nsession: {_quoted(turn.session)}\n{share}"
        f"tags: [memory, conversation]\n---\n"
        f"# Conversation{where}{whom}, {turn.when:%B %Y}\n\n"
    )


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _parts(text: str) -> list[str]:
    """``text`` in pieces a memory line holds, cut between words."""
    words = " ".join(text.split())
    parts: list[str] = []
    while len(words) > _PART_CHARS:
        cut = words.rfind(" ", 0, _PART_CHARS)
        cut = cut if cut > _PART_CHARS // 2 else _PART_CHARS
        parts.append(words[:cut].strip())
        words = words[cut:].strip()
    if words:
        parts.append(words)
    return parts


class Conversations:
    """Keeps the turns of every conversation as memories."""

    def __init__(self, memories: Memories) -> None:
        self.memories = memories

    def record(self, turn: Turn) -> list[Memory]:
        """Keep one turn (a long one in several consecutive parts); returns its memories."""
        fields = {"channel": turn.channel, "speaker": turn.speaker}
        if turn.share:
            fields["share"] = turn.share
        if turn.contact:
            fields["contact"] = turn.contact.removesuffix(".md")
        if turn.low_trust:
            fields["trust"] = "low"
        kept = {key: value for key, value in fields.items() if value}
        items: Sequence[tuple[str, datetime, str | None, dict[str, str]]] = [
            (f"{turn.speaker}: {part}", turn.when, turn.session, kept) for part in _parts(turn.text)
        ]
        return self.memories.record(
            conversation_path(turn.session, turn.when),
            items,
            header=_header(turn),
            importance=turn.importance,
        )
