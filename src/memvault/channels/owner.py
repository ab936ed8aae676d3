"""What the owner does about the channels from outside a chat.

Deciding on senders (approve, block), looking at the outbox, and putting a
message that could not be sent back in the queue. The terminal
(``memvault channels``) and the API (``/v1/channels/...``) both call these,
so the two behave alike; the same decisions from the owner's chat
(``/approve``, ``/block``) are the router's. Everything here works on
state.db, which a running daemon reads for every message it handles, so a
decision takes effect at once whichever process makes it.
"""

from __future__ import annotations

from typing import Any

from memvault.channels.access import shown_code
from memvault.channels.hub import Hub
from memvault.channels.store import Queued, Sender
from memvault.errors import ConflictError, InvalidInputError, NotFoundError

OUTBOX_STATUSES = ("pending", "failed", "sent", "all")


def pending(hub: Hub, channel: str | None = None) -> list[Sender]:
    """Senders waiting for the owner's decision, the most recent first."""
    chosen = hub.channel_named(channel) if channel is not None else None
    return hub.store.senders(channel=chosen, status="pending")


def approve(hub: Hub, channel: str, ref: str, *, by: str) -> Sender:
    """Let a sender in (their id, or their pairing code); they become a contact."""
    return hub.router.approve_sender(hub.channel_named(channel), ref, by=by)


def block(hub: Hub, channel: str, ref: str, *, by: str) -> Sender:
    """Shut a sender out for good (also someone who has not written yet, by id)."""
    return hub.router.block_sender(hub.channel_named(channel), ref, by=by)


def outbox(hub: Hub, status: str = "all", limit: int = 50) -> list[Queued]:
    """Outbox messages, newest first: ``pending``, ``failed``, ``sent`` or ``all``."""
    clean = status.strip().lower()
    if clean not in OUTBOX_STATUSES:
        raise InvalidInputError(
            f"The outbox status must be one of {', '.join(OUTBOX_STATUSES)}, not {status!r}."
        )
    if not 1 <= limit <= 1000:
        raise InvalidInputError(f"The limit must be between 1 and 1000, not {limit}.")
    return hub.store.outbox(status=None if clean == "all" else clean, limit=limit)


def retry(hub: Hub, outbox_id: int) -> Queued:
    """Queue a message that could not be sent again; the hub sends it with the next ones."""
    row = hub.store.queued(outbox_id)
    if row is None:
        raise _no_message(outbox_id)
    if row.status != "failed":
        raise ConflictError(
            f"Outbox message {outbox_id} is {row.status}, not failed; "
            "only a failed message is queued again."
        )
    again = hub.store.requeue(outbox_id)
    if again is None:
        raise _no_message(outbox_id)
    return again


def _no_message(outbox_id: int) -> NotFoundError:
    return NotFoundError(
        f"There is no outbox message {outbox_id}; `memvault channels outbox` lists them."
    )


def describe(sender: Sender) -> str:
    """A sender as the owner is shown them: name, @username, id, and a live pairing code."""
    code = f", code {shown_code(sender.code)}" if sender.code else ""
    return f"{sender.label}{code}"


def owner_channel(hub: Hub, channel: str | None = None) -> str | None:
    """The channel to reach the owner on: ``channel`` if given, else the first enabled
    channel with an owner id set; None when no channel can reach them."""
    if channel is not None:
        return hub.channel_named(channel)
    for name in hub.adapters:
        if hub.access.config(name).owner:
            return name
    return None


def tell_owner(hub: Hub, text: str, channel: str | None = None) -> dict[str, Any]:
    """Send the owner a message (a job's report, a reminder) on their channel."""
    chosen = owner_channel(hub, channel)
    if chosen is None:
        raise InvalidInputError(
            "No enabled channel has an owner id to write to; set channels.NAME.owner "
            "(for example channels.telegram.owner) in .memvault/config.toml."
        )
    return hub.send(chosen, "owner", text)
