"""Every chat becomes memory: which turns are kept, and who may see them.

Each message a session logs (a channel's message in, the agent's reply out, the
owner's own ``memvault agent`` runs, an imported conversation) is handed here
once it is stored (:meth:`memvault.memory.sessions.Sessions.observe`). It is kept
whole as a conversation turn (:mod:`memvault.memory.conversations`) when the
settings say so:

- ``[memory] capture`` (on): private conversations, the owner's and contacts';
- ``[memory] capture_groups`` (off): group chats too, opted into;
- a channel's ``capture`` / ``capture_groups`` say otherwise for that channel;
- ``[privacy.contacts."NAME"] capture = false`` leaves one contact's out.

A turn carries the audience of its conversation: a contact's or a group's
conversation is shared with them (``[share:: ...]``), so their view finds what
was said there and nothing else; the owner's own conversations are shared with
no one. Words from anyone but the owner are theirs: attributed, ``[trust:: low]``,
and made inert, so a name or a message cannot become a tag, a field or a link
(``#share/everyone`` would widen who sees it).

The caller tells whose words a message is in its metadata: ``audience`` (the
label of :class:`memvault.privacy.audiences.Audience`, else the current run's)
and ``owner`` (False for someone else's words). A message logged with
``capture: false``, or a tool call, is not kept.
"""

from __future__ import annotations

import logging
from typing import Any

from memvault.acting import current_audience
from memvault.config import Settings
from memvault.errors import MemvaultError
from memvault.memory.conversations import Conversations, Turn
from memvault.memory.sessions import Message, Session
from memvault.privacy.audiences import CONTACT_KIND, GROUP_KIND, Audiences
from memvault.privacy.trust import inert
from memvault.vault.contacts import CONTACTS_DIR

log = logging.getLogger(__name__)

KEPT_ROLES = ("user", "assistant")


class Capture:
    """Keeps the turns of conversations as memories (a sessions observer)."""

    def __init__(
        self, settings: Settings, audiences: Audiences, conversations: Conversations
    ) -> None:
        self.settings = settings
        self.audiences = audiences
        self.conversations = conversations

    def __call__(self, session: Session, message: Message) -> None:
        """Keep ``message`` of ``session`` if the settings say so (never raises: the
        message is already stored in the session)."""
        try:
            turn = self.turn(session, message)
            if turn is not None:
                self.conversations.record(turn)
        except MemvaultError as exc:
            log.warning(
                "could not keep a conversation turn",
                extra={"session": session.key, "error": exc.message},
            )

    def turn(self, session: Session, message: Message) -> Turn | None:
        """The turn ``message`` is kept as, or None when it is not kept."""
        meta: dict[str, Any] = message.metadata or {}
        if message.role not in KEPT_ROLES or meta.get("kind") == "tool_calls":
            return None
        if meta.get("capture") is False:
            return None
        label = str(meta.get("audience") or current_audience() or "")
        kind, _, name = label.partition(":")
        if not self.wanted(message.channel, kind, name):
            return None
        owner_words = message.role == "assistant" or bool(meta.get("owner", not label))
        speaker = self._speaker(message, owner_words)
        text = message.text if owner_words else inert(message.text)
        contact = name if kind == CONTACT_KIND and name.startswith(f"{CONTACTS_DIR}/") else None
        return Turn(
            session=session.key,
            speaker=speaker,
            text=text,
            when=message.sent_at,
            channel=message.channel,
            with_whom=name.rsplit("/", 1)[-1] if name else "",
            share=name or None,
            low_trust=not owner_words,
            contact=contact if not owner_words else None,
            importance=self.settings.memory.capture_importance,
        )

    def wanted(self, channel: str | None, kind: str, name: str) -> bool:
        """Whether a conversation on ``channel`` with this audience is kept."""
        memory = self.settings.memory
        config = self.settings.channels.sections().get(channel or "")
        on = memory.capture if config is None or config.capture is None else config.capture
        if not on:
            return False
        if kind == GROUP_KIND:
            groups = config.capture_groups if config is not None else None
            return memory.capture_groups if groups is None else groups
        if kind == CONTACT_KIND:
            privacy = self.audiences.settings_of(name)
            return privacy is None or privacy.capture
        return True

    def _speaker(self, message: Message, owner_words: bool) -> str:
        if message.role == "assistant":  # memvault's agent, or another's (an import)
            return inert(message.sender or "") or self.settings.agent.name
        said_by = (message.sender or "").strip()
        if owner_words:
            return said_by or self.settings.owner_name
        return inert(said_by) or "someone"
