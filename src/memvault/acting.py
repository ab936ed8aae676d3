"""Who is acting: the agent of the named API token a request came with, and what it may see.

The daemon sets it for the length of a request made with a named token
(:mod:`memvault.gateway.tokens`), and what the request creates records its
agent: a memory gets an ``[agent:: NAME]`` field, a session its ``agent``
column. A token bound to an agent (``memvault tokens create NAME --agent A``)
is *confined*: it sees and continues only what that agent stored (its
memories, its sessions and their messages). A read-scoped token is an
*observer*: what its searches return is not a recall, so reading the memory
never changes what the archival job keeps.

It is a context variable, so the vault and memory layers learn it without
knowing of HTTP, and every way a request reaches them (a route, a tool call,
MCP) is covered alike. Unset (the owner's token, the CLI, a job, a channel),
nothing is recorded and everything is seen.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Actor:
    """On whose behalf the current request acts."""

    agent: str | None = None  # recorded on what it creates; None: the owner
    confined: bool = False  # sees only what ``agent`` stored
    observer: bool = False  # only reads: its searches are not recalls
    # Whom the conversation is with, when not the owner (:mod:`memvault.privacy.audiences`):
    # "contact:Contacts/Ada Lovelace" or "group:family". None: the owner.
    audience: str | None = None


OWNER = Actor()
_ACTOR: ContextVar[Actor] = ContextVar("memvault_actor", default=OWNER)


def current_actor() -> Actor:
    """Whom the current request acts for (:data:`OWNER` outside a request)."""
    return _ACTOR.get()


def acting_agent() -> str | None:
    """The agent the current request acts for, or None (the owner, or no request)."""
    return _ACTOR.get().agent


def confined_agent() -> str | None:
    """The agent whose own memories and sessions alone the current request may see; None
    when it may see everything."""
    actor = _ACTOR.get()
    return actor.agent if actor.confined else None


def sees(agent: str | None) -> bool:
    """Whether the current request may see what ``agent`` stored (None: the owner)."""
    actor = _ACTOR.get()
    return not actor.confined or agent == actor.agent


def current_audience() -> str | None:
    """Whom the current conversation is with when it is not the owner (``contact:PATH`` or
    ``group:NAME``); None for the owner, the CLI, a job or an API token."""
    return _ACTOR.get().audience


def records_recalls() -> bool:
    """Whether what the current request's searches return counts as recalled."""
    return not _ACTOR.get().observer


@contextlib.contextmanager
def acting_as(actor: Actor | str | None) -> Iterator[None]:
    """Run the block as ``actor`` (an agent's name: that agent, unconfined; None: the
    owner)."""
    if not isinstance(actor, Actor):
        actor = Actor(agent=actor)
    token = _ACTOR.set(actor)
    try:
        yield
    finally:
        _ACTOR.reset(token)
