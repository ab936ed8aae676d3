"""Permission tiers and who approves a tool call.

Three tiers, as the vault service design set them out:

- **tier 1**: reads, searches, listings. Always allowed.
- **tier 2**: file writes and network access. The owner approves each
  *category* once per session (``file_writes``, ``network_access``), or
  never has to in ``autonomous`` mode.
- **tier 3**: deletions, configuring communication channels, the shell.
  The owner approves every single call, in every mode.

An :class:`Approver` asks the owner: at a terminal now, over a chat reply
once channels exist. A refusal is a clear tool error, never an exception
that escapes into the agent loop.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Literal, Protocol

READ = "reads"
FILE_WRITES = "file_writes"
NETWORK_ACCESS = "network_access"
DELETIONS = "deletions"
CHANNELS = "channel_configuration"
SHELL = "shell"


class Tier(IntEnum):
    """How much trust a tool needs."""

    READ = 1
    WRITE = 2
    DANGEROUS = 3


@dataclass(frozen=True)
class ApprovalRequest:
    """What the owner is asked to approve."""

    tool: str
    tier: Tier
    category: str
    summary: str
    arguments: dict[str, Any]

    def question(self) -> str:
        """One line for a prompt: what will happen and why it needs approval."""
        scope = (
            "this one call"
            if self.tier == Tier.DANGEROUS
            else f"{self.category.replace('_', ' ')} for this session"
        )
        return f"Allow {self.tool}: {self.summary}? (approves {scope})"


ONCE: Literal["once"] = "once"
# What an approver answers: True (yes; a tier-2 category stays approved for the session),
# ONCE (this call only) or False.
Answer = bool | Literal["once"]


class Approver(Protocol):
    """Decides whether the owner allows a call."""

    def approve(self, request: ApprovalRequest) -> Answer:
        """True to allow the call (and its tier-2 category), ONCE for this call alone."""
        ...


class AllowAll:
    """Approves everything: the caller already has the owner's consent (e.g. ``--yes``)."""

    def approve(self, request: ApprovalRequest) -> bool:
        return True


class DenyAll:
    """Approves nothing: for surfaces with nobody to ask."""

    def approve(self, request: ApprovalRequest) -> bool:
        return False


class TerminalApprover:
    """Asks at the terminal; refuses when there is no interactive terminal."""

    def __init__(
        self,
        ask: Callable[[str], str] = input,
        interactive: Callable[[], bool] = lambda: sys.stdin is not None and sys.stdin.isatty(),
    ) -> None:
        self._ask = ask
        self._interactive = interactive

    def approve(self, request: ApprovalRequest) -> bool:
        if not self._interactive():
            return False
        try:
            answer = self._ask(request.question() + " [y/N] ")
        except EOFError:
            return False
        return answer.strip().lower() in ("y", "yes")


@dataclass
class Decision:
    """The outcome of :meth:`Policy.authorize`."""

    allowed: bool
    reason: str = ""
    asked: bool = False


@dataclass
class Policy:
    """Applies the tiers for one session of tool calls.

    ``mode`` is ``ask`` (the default) or ``autonomous`` (tier 2 without
    asking). Approvals of a category last as long as this object.
    """

    approver: Approver = field(default_factory=DenyAll)
    mode: str = "ask"
    granted: set[str] = field(default_factory=set)

    def authorize(self, request: ApprovalRequest) -> Decision:
        """Allow, ask, or refuse a call according to its tier."""
        if request.tier == Tier.READ:
            return Decision(True)
        if request.tier == Tier.WRITE:
            if self.mode == "autonomous":
                return Decision(True, "autonomous mode")
            if request.category in self.granted:
                return Decision(True, f"{request.category} approved earlier this session")
            answer = self.approver.approve(request)
            if answer is True:
                self.granted.add(request.category)
            if answer:
                return Decision(True, "approved", asked=True)
            return Decision(False, _refusal(request), asked=True)
        if self.approver.approve(request):
            return Decision(True, "approved", asked=True)
        return Decision(False, _refusal(request), asked=True)


def _refusal(request: ApprovalRequest) -> str:
    what = (
        "every call" if request.tier == Tier.DANGEROUS else f"{request.category.replace('_', ' ')}"
    )
    return (
        f"The owner did not approve {request.tool} ({request.summary}); "
        f"tier {int(request.tier)} tools need approval for {what}. "
        "Ask the owner, or continue without it."
    )
