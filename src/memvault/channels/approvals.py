"""Approval from a phone: a tool call waits for the owner's reply in their own chat.

When a run that came from a channel needs a tier-2 or tier-3 tool, the
owner is sent what exactly will run, with a short id::

    task_delete 'Renew cert' - reply /approve 4821 once, /approve 4821 always or /deny 4821

(with buttons where the channel has them), and the run waits up to
``channels.approval_timeout``, then is denied. An approval is bound to a
hash of the tool and its arguments: the id names one waiting call, and a
button carries the hash's first characters, so a reply can never be spent
on another call. Only the owner's own message resolves one; the router
never passes text from anyone else, a forwarded message or a tool argument
here. ``always`` approves the tool's category for the session (tier 2, as
at the terminal); tier 3 always asks for each call. A decision made
elsewhere (the console) is told in the chat where the question was asked,
and once a call no longer waits, however it ended, its question's buttons are
taken off where the platform can (``retire``), so the phone never offers a
call that is no longer waiting.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memvault.channels.base import Button
from memvault.channels.store import ChannelStore
from memvault.clock import Clock
from memvault.tools.policy import ONCE, Answer, ApprovalRequest, Tier

APPROVE = "approve"
DENY = "deny"
ALWAYS = "always"
BUTTON_PREFIX = "mv"
HASH_SHOWN = 10
# Seconds an answer given just as the wait ran out takes to reach the run (a few lines).
_ANSWER_SETTLES = 5.0


def call_hash(tool: str, arguments: dict[str, Any]) -> str:
    """The hash an approval is bound to: the tool and its exact arguments."""
    canonical = json.dumps(
        {"tool": tool, "arguments": arguments}, sort_keys=True, ensure_ascii=False, default=str
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass
class Waiting:
    """One call waiting for the owner."""

    row_id: int
    short_id: str
    call_hash: str
    request: ApprovalRequest
    session: str
    channel: str
    chat_id: str
    requested_at: datetime | None = None
    done: threading.Event = field(default_factory=threading.Event)
    answer: str | None = None  # once | always | deny
    asked_in: list[int] = field(default_factory=list)  # the question's outbox rows
    ended: str = ""  # how it ended, as the owner was told

    def question(self) -> str:
        """The message the owner gets."""
        scope = (
            "tier 3: every call is approved on its own"
            if self.request.tier == Tier.DANGEROUS
            else f"`always` approves {self.request.category.replace('_', ' ')} for this session"
        )
        return (
            f"Approval needed ({self.session}): **{self.request.tool}** {self.request.summary}\n"
            f"Arguments: `{_shown_arguments(self.request.arguments)}`\n"
            f"Reply `/approve {self.short_id} once`, `/approve {self.short_id} always` "
            f"or `/deny {self.short_id}` ({scope})."
        )

    def outcome(self) -> str:
        """What became of the call, said where its question's buttons were."""
        return self.ended or "No longer waiting: denied."

    def buttons(self) -> tuple[Button, ...]:
        """Inline buttons carrying the id and the hash's start."""
        tag = self.call_hash[:HASH_SHOWN]
        return (
            Button("Approve once", f"{BUTTON_PREFIX}:{APPROVE}:{self.short_id}:{tag}:once"),
            Button("Always", f"{BUTTON_PREFIX}:{APPROVE}:{self.short_id}:{tag}:always"),
            Button("Deny", f"{BUTTON_PREFIX}:{DENY}:{self.short_id}:{tag}"),
        )


def _shown_arguments(arguments: dict[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= 600 else text[:599] + "…"


@dataclass(frozen=True)
class Reply:
    """An owner's answer, parsed from ``/approve 4821 once`` or a button."""

    decision: str  # approve | deny
    short_id: str
    scope: str = ONCE  # once | always
    hash_prefix: str | None = None


def parse_reply(text: str, action: str | None) -> Reply | None:
    """The approval answer a message carries, if any (a command or a button's data)."""
    if action and action.startswith(BUTTON_PREFIX + ":"):
        parts = action.split(":")
        if len(parts) >= 4 and parts[1] in (APPROVE, DENY):
            scope = parts[4] if len(parts) > 4 and parts[4] in (ONCE, ALWAYS) else ONCE
            return Reply(parts[1], parts[2], scope, parts[3])
        return None
    words = text.strip().split()
    if len(words) < 2 or not words[1].isdigit() or len(words[1]) != 4:
        return None
    command = words[0].split("@", 1)[0].lower()
    if command == "/approve":
        scope = words[2].lower() if len(words) > 2 else ONCE
        return Reply(APPROVE, words[1], ALWAYS if scope == ALWAYS else ONCE)
    if command == "/deny":
        return Reply(DENY, words[1])
    return None


Notify = Callable[[Waiting], None]
Publish = Callable[[str, dict[str, Any]], None]


class Approvals:
    """Calls waiting for the owner, across every channel."""

    def __init__(
        self,
        store: ChannelStore,
        clock: Clock,
        *,
        timeout: float,
        notify: Notify,
        publish: Publish,
        tell: Callable[[Waiting, str], None],
        retire: Callable[[Waiting], None],
    ) -> None:
        self.store = store
        self.clock = clock
        self.timeout = timeout
        self._notify = notify
        self._publish = publish
        self._tell = tell
        self._retire = retire
        self._waiting: dict[str, Waiting] = {}
        self._lock = threading.Lock()

    def ask(self, request: ApprovalRequest, *, session: str, channel: str, chat_id: str) -> Answer:
        """Ask the owner and wait (in the run's thread) for the answer or the timeout."""
        digest = call_hash(request.tool, request.arguments)
        with self._lock:
            taken = self.store.pending_short_ids() | set(self._waiting)
            short_id = _new_short_id(taken)
            now = self.clock.now()
            row_id = self.store.open_approval(
                {
                    "short_id": short_id,
                    "session": session,
                    "channel": channel,
                    "chat_id": chat_id,
                    "tool": request.tool,
                    "tier": int(request.tier),
                    "category": request.category,
                    "summary": request.summary,
                    "call_hash": digest,
                    "status": "pending",
                    "requested_at": now.isoformat(),
                }
            )
            waiting = Waiting(row_id, short_id, digest, request, session, channel, chat_id, now)
            self._waiting[short_id] = waiting
        self._publish("approval_requested", self._event(waiting))
        try:
            self._notify(waiting)
            answered = waiting.done.wait(self.timeout)
        finally:
            with self._lock:
                self._waiting.pop(short_id, None)
        answer = self._answer(waiting, answered)
        self._retire(waiting)  # its buttons offer a call that no longer waits
        return answer

    def _answer(self, waiting: Waiting, answered: bool) -> Answer:
        """The run's answer once the wait ended: the owner's, else a timeout's denial."""
        request, short_id = waiting.request, waiting.short_id
        if not answered:
            if self.store.close_approval(waiting.row_id, "expired", None, None):
                self._publish("approval_resolved", {**self._event(waiting), "status": "expired"})
                after = f"{round(self.timeout / 60, 1):g} min"
                waiting.ended = (
                    f"Approval {short_id} ({request.tool}) timed out after {after}: denied."
                )
                self._tell(waiting, waiting.ended)
                return False
            # Answered as the wait ran out: the row holds the answer, which resolve is
            # setting now, so the run does what the history says was decided.
            if not waiting.done.wait(_ANSWER_SETTLES):
                return False
        if waiting.answer == ALWAYS and request.tier == Tier.WRITE:
            return True
        return ONCE if waiting.answer in (ONCE, ALWAYS) else False

    def resolve(self, reply: Reply, *, by: str) -> str:
        """Apply the owner's answer; the sentence they get back."""
        with self._lock:
            waiting = self._waiting.get(reply.short_id)
        if waiting is None:
            return f"No approval {reply.short_id} is waiting (it was answered or timed out)."
        if reply.hash_prefix is not None and not waiting.call_hash.startswith(reply.hash_prefix):
            return (
                f"That button belongs to an earlier request, not to approval "
                f"{reply.short_id}; nothing was approved."
            )
        status = "approved" if reply.decision == APPROVE else "denied"
        scope = reply.scope if reply.decision == APPROVE else None
        if not self.store.close_approval(waiting.row_id, status, scope, by):
            return f"Approval {reply.short_id} was already answered."
        said = _said(waiting, reply.decision, scope)
        with self._lock:  # no longer pending for anyone who looks once it is told
            self._waiting.pop(reply.short_id, None)
        waiting.answer = scope if reply.decision == APPROVE else DENY
        waiting.ended = said
        waiting.done.set()
        self._publish(
            "approval_resolved", {**self._event(waiting), "status": status, "scope": scope}
        )
        if by != waiting.channel and not by.startswith(f"{waiting.channel}:"):
            # Decided elsewhere: the chat where it was asked learns it at once.
            where = "in the console" if by == "console" else f"by {by}"
            tool = waiting.request.tool
            self._tell(waiting, f"{status.capitalize()} {where}: {tool} ({reply.short_id}).")
        return said

    def pending(self) -> list[Waiting]:
        """Calls waiting now."""
        with self._lock:
            return list(self._waiting.values())

    def _event(self, waiting: Waiting) -> dict[str, Any]:
        return {
            "id": waiting.short_id,
            "session": waiting.session,
            "channel": waiting.channel,
            "tool": waiting.request.tool,
            "tier": int(waiting.request.tier),
            "summary": waiting.request.summary,
            "call_hash": waiting.call_hash,
        }


def _said(waiting: Waiting, decision: str, scope: str | None) -> str:
    """The sentence an answer gets back."""
    tool = waiting.request.tool
    if decision == DENY:
        return f"Denied {tool} ({waiting.short_id})."
    if scope == ALWAYS and waiting.request.tier == Tier.WRITE:
        category = waiting.request.category.replace("_", " ")
        return f"Approved {tool}; {category} is approved for the rest of this session."
    if scope == ALWAYS:
        return f"Approved {tool} once: tier-3 tools ask for every call."
    return f"Approved {tool} once."


def _new_short_id(taken: set[str]) -> str:
    while True:
        candidate = f"{secrets.randbelow(9000) + 1000}"
        if candidate not in taken:
            return candidate
