"""Who may talk to the agent, and whom it may write to.

The owner's ids (``channels.<name>.owner``) are always let in and can never
be blocked. Anyone else meets the channel's policy:

- ``quiet`` (the default): no answer at all; the owner is told once who
  wants to talk, and approves or blocks them.
- ``pairing``: the stranger gets a one-time code (valid an hour, at most
  ``max_pending`` waiting per channel) that the owner approves.
- ``allowlist``: only the ids in ``allow``; nobody else is answered or
  announced, and an approval from another policy does not count.
- ``open``: everyone who is not blocked.

A block beats everything: an earlier approval, a pairing, the allow list.
Sending obeys the same rules (:meth:`Access.check_send`), so no tool and no
command can write to someone the owner has not let in.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from datetime import timedelta

from memvault.channels.base import Inbound
from memvault.channels.store import ChannelStore, Sender
from memvault.clock import Clock
from memvault.config import ChannelSettings, ChannelsSettings
from memvault.errors import ConflictError, InvalidInputError, MemvaultError, NotFoundError

OWNER = "owner"
ALLOWED = "allowed"
BLOCKED = "blocked"
STRANGER = "stranger"
REFUSED = "refused"  # not on the allow list: nothing is said to anyone

CODE_LIFETIME = timedelta(hours=1)
# Letters only (no I, L, O: misread as digits), so a code never looks like an approval id.
_CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ"
CODE_LENGTH = 8


class SendRefusedError(MemvaultError):
    """A send to someone the access rules do not let in."""

    code = "recipient_not_allowed"
    exit_code = 8
    http_status = 403


@dataclass(frozen=True)
class Verdict:
    """What the access rules say about one inbound message."""

    kind: str  # owner | allowed | blocked | stranger | refused
    sender: Sender | None = None

    @property
    def admitted(self) -> bool:
        """Whether the message is captured and may be answered."""
        return self.kind in (OWNER, ALLOWED)


def new_code() -> str:
    """A pairing code: eight letters, shown as ABCD-EFGH."""
    return "".join(secrets.choice(_CODE_ALPHABET) for _ in range(CODE_LENGTH))


def shown_code(code: str) -> str:
    """A code as a person reads it."""
    return f"{code[:4]}-{code[4:]}"


def _clean_code(text: str) -> str:
    return text.replace("-", "").replace(" ", "").upper()


class Access:
    """Applies the owner list, the policy and the owner's decisions."""

    def __init__(self, settings: ChannelsSettings, store: ChannelStore, clock: Clock) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        # Strangers on different chats are routed at once: the caps are checked and
        # taken under one lock, so two of them cannot both take the last place.
        self._lock = threading.Lock()

    def config(self, channel: str) -> ChannelSettings:
        """The settings of a channel."""
        found = self.settings.sections().get(channel)
        if found is None:
            raise NotFoundError(f"There is no channel named {channel!r}.")
        return found

    def is_owner(self, channel: str, sender_id: str) -> bool:
        """Whether ``sender_id`` is one of the owner's ids on the channel."""
        return sender_id in self.config(channel).owner

    def judge(self, message: Inbound) -> Verdict:
        """The verdict on an inbound message (the sender is counted as seen)."""
        config = self.config(message.channel)
        if message.sender_id in config.owner:
            return Verdict(OWNER)
        sender = self.store.seen(message)
        if sender.status == "blocked":
            return Verdict(BLOCKED, sender)
        if config.policy == "open" or message.sender_id in config.allow:
            return Verdict(ALLOWED, sender)
        if config.policy == "allowlist":
            return Verdict(REFUSED, sender)
        if sender.status == "approved":
            return Verdict(ALLOWED, sender)
        return Verdict(STRANGER, sender)

    def waiting(self, channel: str) -> list[Sender]:
        """Strangers the owner was told of and has not decided on."""
        return [s for s in self.store.senders(channel=channel, status="pending") if s.owner_told]

    def claim_announcement(self, sender: Sender) -> bool:
        """Whether the owner should hear of this stranger now (once, within the cap);
        True marks them as told."""
        with self._lock:
            current = self.store.sender(sender.channel, sender.sender_id)
            if current is None or current.owner_told:
                return False
            if len(self.waiting(sender.channel)) >= self.config(sender.channel).max_pending:
                return False
            self.store.update_sender(sender.channel, sender.sender_id, owner_told=1)
            return True

    def pairing_code(self, sender: Sender) -> str | None:
        """A fresh code for a stranger under ``pairing``; None when one is still valid or
        too many strangers are already waiting (they then get nothing)."""
        with self._lock:
            return self._new_code(sender)

    def _new_code(self, sender: Sender) -> str | None:
        now = self.clock.now()
        current = self.store.sender(sender.channel, sender.sender_id) or sender
        if current.code and current.code_expires_at and current.code_expires_at > now:
            return None
        live = [
            s
            for s in self.store.senders(channel=sender.channel, status="pending")
            if s.code and s.code_expires_at and s.code_expires_at > now
        ]
        if len(live) >= self.config(sender.channel).max_pending:
            return None
        code = new_code()
        self.store.update_sender(
            sender.channel, sender.sender_id, code=code, code_expires_at=now + CODE_LIFETIME
        )
        return code

    def find(self, channel: str, ref: str) -> Sender:
        """The sender ``ref`` names: their id, or their pairing code while it is valid."""
        ref = ref.strip()
        if not ref:
            raise InvalidInputError("Name the sender: their id or their pairing code.")
        found = self.store.sender(channel, ref)
        if found is not None:
            return found
        code = _clean_code(ref)
        for sender in self.store.senders(channel=channel):
            if sender.code and sender.code == code:
                expires = sender.code_expires_at
                if expires is None or expires <= self.clock.now():
                    raise InvalidInputError(
                        f"The code {shown_code(code)} expired; ask them to write again "
                        "for a new one, or approve them by id."
                    )
                return sender
        raise NotFoundError(
            f"Nobody on {channel} has the id or code {ref!r}; "
            "`memvault channels pending` lists who is waiting."
        )

    def approve(self, channel: str, ref: str, *, by: str) -> Sender:
        """Let a sender in (their id, or their pairing code)."""
        config = self.config(channel)
        if config.policy == "allowlist":
            raise ConflictError(
                f"channels.{channel}.policy is allowlist, so approvals do not count; "
                f"add the id to channels.{channel}.allow in config.toml instead."
            )
        if ref.strip() in config.owner:
            raise ConflictError(f"{ref.strip()} is the owner's own id on {channel}.")
        sender = self.find(channel, ref)
        return self.store.update_sender(
            channel,
            sender.sender_id,
            status="approved",
            code=None,
            code_expires_at=None,
            decided_at=self.clock.now(),
            decided_by=by,
        )

    def block(self, channel: str, ref: str, *, by: str) -> Sender:
        """Shut a sender out for good: no earlier approval or pairing gets them back in."""
        config = self.config(channel)
        clean = ref.strip()
        if clean in config.owner:
            raise ConflictError(
                f"{clean} is the owner's own id on {channel}; it cannot be blocked."
            )
        try:
            sender_id = self.find(channel, clean).sender_id
        except NotFoundError:
            if not clean.lstrip("-").isdigit() and channel == "telegram":
                raise
            sender_id = clean  # block someone before they ever write
        return self.store.update_sender(
            channel,
            sender_id,
            status="blocked",
            code=None,
            code_expires_at=None,
            decided_at=self.clock.now(),
            decided_by=by,
        )

    def check_send(self, channel: str, chat_id: str) -> None:
        """Refuse a send to a chat the access rules do not let in (SendRefusedError)."""
        config = self.config(channel)
        if chat_id in config.owner:
            return
        sender = self.store.sender(channel, chat_id)
        if sender is not None and sender.status == "blocked":
            raise SendRefusedError(f"{chat_id} is blocked on {channel}; nothing was sent.")
        if config.policy == "open" or chat_id in config.allow:
            return
        if config.policy != "allowlist" and sender is not None and sender.status == "approved":
            return
        raise SendRefusedError(
            f"{chat_id} is not allowed on {channel} (policy {config.policy}); nothing was sent. "
            f"Approve them with `memvault channels approve {channel} {chat_id}`"
            + (
                f", or add them to channels.{channel}.allow."
                if config.policy != "allowlist"
                else f" after adding them to channels.{channel}.allow."
            )
        )

    def owner_chat(self, channel: str) -> str:
        """The owner's chat on a channel (the first owner id)."""
        owners = self.config(channel).owner
        if not owners:
            raise InvalidInputError(
                f"channels.{channel}.owner is empty; set the owner's id there to write to them."
            )
        return owners[0]
