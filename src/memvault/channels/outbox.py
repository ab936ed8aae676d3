"""The outbox: every message the channels send leaves through here.

A reply, a send by a tool or the CLI, an approval's question: each is stored in
the outbox first (:meth:`Outbox.queue`), so a crash or a platform that is down
loses nothing; one dispatcher per channel drains it in order per chat, retrying
with backoff, and a chat whose message waits keeps its later ones waiting too.
:meth:`Outbox.send` is the way in for other threads: it names the chat (``owner``,
a contact, a chat id), applies the access rules and waits a little for delivery.

:class:`Outbox` is mixed into the hub (:mod:`memvault.channels.hub`), which
provides what it uses: the adapters, their statuses and the loop they run on.
It stands apart from the hub's life (starting, supervising, routing) because
sending is one flow of its own, read and changed on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memvault.channels.access import Access
from memvault.channels.base import (
    Adapter,
    AdapterStatus,
    ChannelError,
    ChannelFatalError,
    MessageRejectedError,
    Outbound,
    RateLimitedError,
)
from memvault.channels.hooks import Hooks, session_key
from memvault.channels.router import Router
from memvault.channels.store import ChannelStore, Queued
from memvault.config.channels import ChannelsSettings
from memvault.errors import InvalidInputError, MemvaultError, NotFoundError
from memvault.protocol_tokens import is_only_protocol, strip_protocol_tokens
from memvault.runtime import Runtime

log = logging.getLogger(__name__)

_SEND_BACKOFF_CAP = 300.0
# An adapter that cannot receive (another poller) can still send.
_SENDING_STATES = ("running", "conflict")
# A chat id as platforms write them: one word with a digit or an id's punctuation in it.
_CHAT_ID = re.compile(r"(?=\S*[\d@+:_])\S{1,200}")


class AdapterNotFoundError(NotFoundError):
    """No such channel is configured (the earlier design's ``adapter_not_found``)."""

    code = "adapter_not_found"
    http_status = 400


class InvalidHintError(InvalidInputError):
    """The conversation named for a send cannot be resolved."""

    code = "invalid_conversation_hint"


class InvalidTextError(InvalidInputError):
    """Nothing to send (the earlier design's ``invalid_text``)."""

    code = "invalid_text"


class Outbox:
    """The hub's sending, mixed into the hub, which provides what it uses."""

    runtime: Runtime
    settings: ChannelsSettings
    store: ChannelStore
    access: Access
    hooks: Hooks
    router: Router
    adapters: dict[str, Adapter]
    statuses: dict[str, AdapterStatus]
    _loop: asyncio.AbstractEventLoop | None
    # One dispatcher per channel, each woken by its own event.
    _wakes: dict[str, asyncio.Event]
    # Adapter work run from a thread outside the hub's loop (the hub's _run_once).
    _run_once: Callable[..., Any]

    if TYPE_CHECKING:  # the hub's property: read only, so not an annotation

        @property
        def running(self) -> bool: ...

    def queue(self, channel: str, chat_id: str, parts: list[str], **options: Any) -> list[int]:
        """Store a message in the outbox and wake the dispatcher.

        Every message leaves through here, so here protocol tokens
        (``HEARTBEAT_OK``, ...) are taken out: a part left empty is dropped,
        and a message with nothing else is not queued at all (one with media
        or buttons keeps them, with no text). The inbox row ``done`` names is
        marked answered all the same.
        """
        kept = [strip_protocol_tokens(part) for part in parts]
        kept = [part for part in kept if part.strip()]
        if not kept and (options.get("media") or options.get("buttons")):
            kept = [""]
        ids = self.store.queue(channel, chat_id, kept, **options)
        if ids:
            self._wake_soon()
        return ids

    def _wake_soon(self) -> None:
        loop = self._loop
        if loop is not None:
            for wake in list(self._wakes.values()):
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(wake.set)

    async def _dispatch(self, channel: str) -> None:
        """Send one channel's outbox: a platform slow to answer (or waiting out its rate
        limit inside its library) holds up no other channel."""
        wake = self._wakes[channel]
        while True:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation
            # that comes as the wait ends (a wake and a stop at once), and this loop then
            # outlived the hub's stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await wake.wait()
            wake.clear()
            try:
                await self._deliver(await asyncio.to_thread(self.store.pending, channel))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the outbox dispatcher failed; retrying")

    async def _deliver(self, rows: list[Queued], *, now_only: bool = False) -> None:
        """Send due rows; a chat whose row waits keeps its later rows waiting too."""
        held: set[tuple[str, str]] = set()
        now = self.runtime.clock.now()
        for row in rows:
            chat = (row.channel, row.chat_id)
            adapter = self.adapters.get(row.channel)
            status = self.statuses.get(row.channel)
            usable = adapter is not None and (
                now_only or (status is not None and status.state in _SENDING_STATES)
            )
            if chat in held or not usable or (row.next_attempt_at > now and not now_only):
                held.add(chat)
                continue
            assert adapter is not None
            if not await self._send_row(adapter, row):
                held.add(chat)

    async def _send_row(self, adapter: Adapter, row: Queued) -> bool:
        media = tuple(self.runtime.vault.resolve(path) for path in row.media)
        # The first part answers the message; on a threaded platform every part stays in
        # its thread (Slack), elsewhere the later parts follow without quoting it again.
        reply_to = row.reply_to if row.part == 1 or adapter.threaded else None
        retries = self.settings.send_retries
        if not await asyncio.to_thread(self.store.claim, row.id):
            return True  # another process is sending it
        buttons = row.buttons
        if buttons:  # read again once claimed: an answered question's were taken off
            claimed = await asyncio.to_thread(self.store.queued, row.id)
            buttons = claimed.buttons if claimed is not None else ()
        message = Outbound(row.chat_id, row.text, reply_to, media, buttons)
        try:
            sent = await adapter.send(message)
        except RateLimitedError as exc:
            await asyncio.to_thread(
                self.store.retry_later, row.id, exc.message, exc.retry_after, give_up=False
            )
            return False
        except (MessageRejectedError, ChannelFatalError) as exc:
            fatal = isinstance(exc, ChannelFatalError)
            await asyncio.to_thread(
                self.store.retry_later, row.id, exc.message, 30.0, give_up=not fatal
            )
            self._outbound_failed(row, exc.message, final=not fatal)
            return False
        except Exception as exc:  # ChannelError, or a bug: retried with backoff all the same
            text = exc.message if isinstance(exc, MemvaultError) else repr(exc)
            if not isinstance(exc, ChannelError):
                log.exception("sending failed unexpectedly", extra={"channel": row.channel})
            delay = min(2.0 ** (row.attempts + 1), _SEND_BACKOFF_CAP)
            final = row.attempts + 1 > retries
            await asyncio.to_thread(self.store.retry_later, row.id, text, delay, give_up=final)
            self._outbound_failed(row, text, final=final)
            return False
        await asyncio.to_thread(self.store.sent, row.id, sent.message_ids)
        self.hooks.publish(
            "outbound_message",
            {
                "channel": row.channel,
                "chat_id": row.chat_id,
                "kind": row.kind,
                "text": row.text,
                "outbox_id": row.id,
                "part": row.part,
                "parts": row.parts,
                "inbox_id": row.inbox_id,
            },
            f"channel:{row.channel}",
        )
        return True

    def _outbound_failed(self, row: Queued, error: str, *, final: bool) -> None:
        log.warning(
            "a message could not be sent",
            extra={"channel": row.channel, "outbox_id": row.id, "error": error, "final": final},
        )
        if final:
            self.hooks.publish(
                "channel_status",
                {
                    "channel": row.channel,
                    "event": "send_failed",
                    "outbox_id": row.id,
                    "error": error,
                },
                f"channel:{row.channel}",
            )

    # -- what other threads call -------------------------------------------------------

    def channel_named(self, name: str) -> str:
        """The channel ``name`` means, enabled or not (AdapterNotFoundError when none)."""
        clean = name.strip().lower()
        known = self.settings.sections()
        if clean not in known:
            raise AdapterNotFoundError(
                f"There is no channel named {name!r}; channels: {', '.join(known)}."
            )
        return clean

    def adapter(self, name: str) -> Adapter:
        """The adapter of an enabled channel."""
        clean = self.channel_named(name)
        adapter = self.adapters.get(clean)
        if adapter is None:
            status = self.statuses.get(clean)
            reason = (
                status.error
                if status is not None and status.error
                else f"it is not enabled (set channels.{clean}.enabled = true)"
            )
            raise AdapterNotFoundError(
                f"The {clean} channel is not available: {reason.rstrip('.')}."
            )
        return adapter

    def resolve_chat(self, channel: str, hint: str) -> str:
        """The chat a conversation hint names: ``owner``, a contact's name, or a chat id
        as the platform writes it (a number, an address, ``+49...``, ``U0123``,
        ``group:...``: one word holding a digit or one of ``@+:_``)."""
        clean = hint.strip()
        if not clean:
            raise InvalidHintError("The conversation_hint is empty; name a chat id, or 'owner'.")
        if clean.lower() == "owner":
            return self.access.owner_chat(channel)
        if clean.lstrip("-").isdigit():
            return clean
        try:
            contact = self.runtime.contacts.get(clean)
        except MemvaultError:
            contact = None
        if contact is not None:
            known = contact.identities.get(channel)
            if channel == "email":
                known = known or contact.email
            if known:
                return known.lower() if channel == "email" else known
        if _CHAT_ID.fullmatch(clean):
            return clean.lower() if channel == "email" else clean
        raise InvalidHintError(
            f"No chat on {channel} matches {clean!r}: give a chat id, 'owner', "
            f"or the name of a contact with a {channel} id."
        )

    def send(
        self, channel: str, hint: str, text: str, *, media: tuple[str, ...] = (), wait: float = 15.0
    ) -> dict[str, Any]:
        """Send a message as the owner's agent (access rules apply); waits up to ``wait``
        seconds for delivery and says whether it was sent or is queued for retry.

        Protocol tokens are taken out of the text; a text that was only one
        (``HEARTBEAT_OK``) sends nothing, and the answer's status says
        ``suppressed``."""
        adapter = self.adapter(channel)
        if not text.strip() and not media:
            raise InvalidTextError("The text is empty; say what to send.")
        chat_id = self.resolve_chat(channel, hint)
        self.access.check_send(channel, chat_id)
        if is_only_protocol(text) and not media:
            return self._suppressed(channel, chat_id)
        text = strip_protocol_tokens(text)
        parts = Router.split(adapter, text) if text.strip() else [""]
        ids = self.queue(channel, chat_id, parts, kind="send", media=media)
        if text.strip():
            with contextlib.suppress(MemvaultError):
                key = session_key(channel, chat_id)
                self.router.log_message(key, text, role="assistant", channel=channel)
        if not self.running:  # no daemon loop here: this process delivers its own rows
            self.deliver_here(ids)
        deadline = time.monotonic() + wait
        rows = [self.store.queued(i) for i in ids]
        while any(r is not None and r.status in ("pending", "sending") for r in rows):
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
            rows = [self.store.queued(i) for i in ids]
        states = {r.status for r in rows if r is not None}
        status = "sent" if states == {"sent"} else "failed" if "failed" in states else "queued"
        errors = [r.last_error for r in rows if r is not None and r.last_error]
        return {
            "adapter": channel,
            "action": "send_message",
            "chat_id": chat_id,
            "status": status,
            "message_id": ",".join(str(i) for i in ids),
            "outbox_ids": ids,
            "parts": len(ids),
            "error": errors[-1] if errors and status != "sent" else None,
            "timestamp": self.runtime.clock.now().isoformat(timespec="seconds"),
        }

    def _suppressed(self, channel: str, chat_id: str) -> dict[str, Any]:
        """The answer to a send whose text was only a protocol token: nothing was sent,
        on purpose."""
        return {
            "adapter": channel,
            "action": "send_message",
            "chat_id": chat_id,
            "status": "suppressed",
            "message_id": "",
            "outbox_ids": [],
            "parts": 0,
            "error": None,
            "note": "The text was only a protocol token (such as HEARTBEAT_OK), "
            "which is never sent to a person; nothing was sent.",
            "timestamp": self.runtime.clock.now().isoformat(timespec="seconds"),
        }

    def deliver_here(self, ids: list[int]) -> list[Queued]:
        """Send these outbox rows from this process now (no hub loop runs here); a row
        another process is sending is left to it. The rows as they are afterwards."""
        rows = [row for row in map(self.store.queued, ids) if row is not None]
        self._run_once(self._deliver([r for r in rows if r.status == "pending"], now_only=True))
        return [row for row in map(self.store.queued, ids) if row is not None]
