"""Which agent is acting: the name of the named API token a request came with.

The daemon sets it for the length of a request made with a named token
(:mod:`memvault.gateway.tokens`), and what the request creates records it: a
memory gets an ``[agent:: NAME]`` field, a session its ``agent`` column. It is
a context variable, so the vault and memory layers learn the name without
knowing of HTTP, and every way a request reaches them (a route, a tool call,
MCP) is covered alike. Unset (the owner's token, the CLI, a job, a channel),
nothing is recorded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_AGENT: ContextVar[str | None] = ContextVar("memvault_acting_agent", default=None)


def acting_agent() -> str | None:
    """The agent the current request acts for, or None (the owner, or no request)."""
    return _AGENT.get()


@contextlib.contextmanager
def acting_as(agent: str | None) -> Iterator[None]:
    """Run the block as ``agent`` (None: as the owner)."""
    token = _AGENT.set(agent)
    try:
        yield
    finally:
        _AGENT.reset(token)
