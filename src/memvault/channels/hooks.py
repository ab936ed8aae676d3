"""The router's seams: what the daemon wires into it, and the turn it hands the responder.

The router (:mod:`memvault.channels.router`) runs without a daemon in the CLI
and the tests; :class:`Hooks` holds what a daemon adds (publishing events,
logging and ending sessions, the agent that answers), each with a plain
default, and :class:`Turn` is one admitted message as the responder sees it.
Apart from the router so the owner's commands (:mod:`memvault.channels.owner_commands`)
and the daemon can name them without the router's flow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memvault.channels.base import Inbound
from memvault.memory.sessions import Message, Session
from memvault.privacy.audiences import Audience
from memvault.tools.policy import Policy


@dataclass(frozen=True)
class Turn:
    """One admitted message for the responder to answer."""

    message: Inbound
    session: str
    owner: bool
    contact: str  # the sender's contact note for the agent's context ("" when there is none)
    policy: Policy
    text: str  # what the agent is asked: the text, with attachments named
    # Whom the conversation is with: a contact or a group sees only what is shared with it.
    audience: Audience


Responder = Callable[[Turn], str]
Publish = Callable[[str, dict[str, Any], str], None]
Queue = Callable[..., list[int]]


def _no_publish(kind: str, payload: dict[str, Any], source: str) -> None:
    return None


@dataclass
class Hooks:
    """What the daemon wires in (each has a plain default for the CLI and tests)."""

    publish: Publish = _no_publish
    log_message: Callable[..., tuple[Session, Message]] | None = None
    end_session: Callable[[str], Session] | None = None
    end_if_idle: Callable[[str], Any] | None = None
    responder: Responder | None = None


def session_key(channel: str, chat_id: str) -> str:
    """The session a chat's messages go to."""
    return f"{channel}:{chat_id}"
