"""The hub: runs the enabled adapters, the router and the outbox on one event loop.

It is the message bus between adapters and the agent (as nanobot's is):
an adapter hands each message to :meth:`Hub._intake`, which stores it and
returns (only then may the adapter acknowledge it to the platform); one
worker per conversation routes the stored messages in order; replies and
sends go to the outbox, which a dispatcher drains in order per chat,
retrying with backoff. A crashed adapter is restarted with backoff (1 s,
2 s, 5 s, 15 s, then every 60 s); one that cannot go on (a refused token,
another poller) stops with the reason, which ``doctor`` reports.

The daemon runs the hub on its own thread (``memvault-channels``); other
threads (HTTP routes, tools, the agent waiting for an approval) use its
synchronous methods. Without a daemon, :meth:`Hub.send` delivers at once
from the calling process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
from collections.abc import Coroutine
from datetime import datetime, timedelta
from typing import Any, TypeVar

from memvault.channels.access import Access
from memvault.channels.adapters import FACTORIES
from memvault.channels.approvals import Approvals, Waiting
from memvault.channels.base import (
    Adapter,
    AdapterStatus,
    ChannelError,
    ChannelFatalError,
    Inbound,
    MessageRejectedError,
    NotSupportedError,
    Outbound,
    PollingConflictError,
    RateLimitedError,
)
from memvault.channels.router import Hooks, Router, session_key
from memvault.channels.store import INBOX_NEW, ChannelStore, Queued
from memvault.config import (
    ChannelSettings,
)
from memvault.errors import InvalidInputError, MemvaultError, NotFoundError
from memvault.protocol_tokens import is_only_protocol, strip_protocol_tokens
from memvault.runtime import Runtime
from memvault.tools.policy import Answer, ApprovalRequest, Policy

log = logging.getLogger(__name__)

RESTART_DELAYS = (1.0, 2.0, 5.0, 15.0, 60.0)
# An adapter that ran this long before failing starts its backoff from the beginning.
_HEALTHY_RUN = 120.0
_SEND_BACKOFF_CAP = 300.0
_IDLE_WORKER = 60.0
# Adapter work asked from outside the hub's loop (a chat's context, its conversations):
# above the adapters' own per-call bounds (the OpenClaw bridge's two concurrent CLI calls
# take 5 to 17 s each on a loaded 2-core machine; its timeout is 60 s by default).
CALL_TIMEOUT = 300.0
# An adapter that cannot receive (another poller) can still send.
_SENDING_STATES = ("running", "conflict")

T = TypeVar("T")


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


# A chat id as platforms write them: one word with a digit or an id's punctuation in it.
_CHAT_ID = re.compile(r"(?=\S*[\d@+:_])\S{1,200}")


class _ChannelApprover:
    """Asks the owner in their chat, for one session's calls."""

    def __init__(self, hub: Hub, session: str, channel: str) -> None:
        self.hub = hub
        self.session = session
        self.channel = channel

    def approve(self, request: ApprovalRequest) -> Answer:
        owners = self.hub.access.config(self.channel).owner
        if not owners or self.channel not in self.hub.adapters:
            return False
        return self.hub.approvals.ask(
            request, session=self.session, channel=self.channel, chat_id=owners[0]
        )


class Hub:
    """The channels of one vault."""

    def __init__(
        self,
        runtime: Runtime,
        hooks: Hooks | None = None,
        *,
        adapters: dict[str, Adapter] | None = None,
    ) -> None:
        self.runtime = runtime
        self.settings = runtime.settings.channels
        self.store = ChannelStore(runtime.state, runtime.clock)
        self.access = Access(self.settings, self.store, runtime.clock)
        self.hooks = hooks or Hooks()
        self.approvals = Approvals(
            self.store,
            runtime.clock,
            timeout=self.settings.approval_timeout,
            notify=self._ask_owner,
            publish=lambda kind, payload: self.hooks.publish(kind, payload, "channels"),
            tell=self._tell_owner,
        )
        self.router = Router(
            runtime,
            self.store,
            self.access,
            self.approvals,
            self.hooks,
            queue=self.queue,
            policy_for=self._policy_for,
        )
        # Seconds a call from outside the hub's loop may take (see _run_once).
        self.call_timeout = CALL_TIMEOUT
        self.statuses: dict[str, AdapterStatus] = {}
        # When each adapter last started running (its uptime), while it runs.
        self.running_since: dict[str, datetime] = {}
        self.adapters: dict[str, Adapter] = {}
        for name, config in self.settings.sections().items():
            if adapters is not None:
                if name in adapters:
                    self.adapters[name] = adapters[name]
                    self.statuses[name] = AdapterStatus()
                continue
            if not config.enabled:
                continue
            try:
                self.adapters[name] = FACTORIES[name](runtime, config)
                self.statuses[name] = AdapterStatus()
            except MemvaultError as exc:
                self.statuses[name] = AdapterStatus(state="failed", error=exc.message)
        self._policies: dict[str, tuple[int, Policy]] = {}
        self._policy_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        # One outbox dispatcher per channel, each woken by its own event.
        self._wakes: dict[str, asyncio.Event] = {}
        self._stop: asyncio.Event | None = None
        self._chats: dict[str, asyncio.Queue[tuple[int, str, Inbound]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the hub's loop runs (in the daemon)."""
        return self._loop is not None and self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the adapters, the router and the outbox on a thread of their own."""
        if self._thread is not None or not self.adapters:
            return  # no channel enabled: no loop polling an empty outbox
        self._thread = threading.Thread(target=self._run, name="memvault-channels", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop everything; calls waiting for an approval are denied."""
        for waiting in self.approvals.pending():
            waiting.done.set()
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception:
            log.exception("the channels stopped")
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wakes = {name: asyncio.Event() for name in self.adapters}
        self._stop = asyncio.Event()
        self._ready.set()
        await asyncio.to_thread(self.store.expire_approvals)
        await asyncio.to_thread(self.store.release_claims)
        for name, adapter in self.adapters.items():
            self._spawn(self._supervise(name, adapter))
        for name in self.adapters:
            self._spawn(self._dispatch(name))
        for inbox_id, status, message in await asyncio.to_thread(self.store.unfinished):
            if message.channel in self.adapters:
                self._route(inbox_id, status, message)
        await self._stop.wait()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for adapter in self.adapters.values():
            with contextlib.suppress(Exception):
                await adapter.close()
        self.router.close()
        self._loop = None

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _wake_soon(self) -> None:
        loop = self._loop
        if loop is not None:
            for wake in list(self._wakes.values()):
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(wake.set)

    # -- adapters ----------------------------------------------------------------------

    async def _supervise(self, name: str, adapter: Adapter) -> None:
        status = self.statuses[name]
        failures = 0
        while True:
            started = time.monotonic()
            self._set_status(name, "starting")
            try:
                status.identity = await adapter.identify()
                self._set_status(name, "running")
                await adapter.start(lambda message: self._intake(name, message))
                self._set_status(name, "stopped")
                return
            except asyncio.CancelledError:
                self._set_status(name, "stopped")
                raise
            except PollingConflictError as exc:
                delay = RESTART_DELAYS[-1]
                status.restarts += 1
                self._set_status(name, "conflict", f"{exc.message} (trying again in {delay:g} s)")
                log.error("channel cannot receive", extra={"channel": name, "error": exc.message})
                await asyncio.sleep(delay)
            except ChannelFatalError as exc:
                self._set_status(name, "failed", exc.message)
                log.error("channel stopped", extra={"channel": name, "error": exc.message})
                return
            except Exception as exc:
                message = exc.message if isinstance(exc, MemvaultError) else repr(exc)
                if not isinstance(exc, ChannelError):
                    log.exception("channel adapter crashed", extra={"channel": name})
                if time.monotonic() - started > _HEALTHY_RUN:
                    failures = 0
                delay = RESTART_DELAYS[min(failures, len(RESTART_DELAYS) - 1)]
                failures += 1
                status.restarts += 1
                self._set_status(name, "backoff", f"{message} (restarting in {delay:g} s)")
                await asyncio.sleep(delay)

    def _set_status(self, name: str, state: str, error: str | None = None) -> None:
        status = self.statuses[name]
        changed = status.state != state or status.error != error
        if state == "running" and status.state != "running":
            self.running_since[name] = self.runtime.clock.now()
        elif state != "running":
            self.running_since.pop(name, None)
        status.state = state
        status.error = error
        if changed:
            self.hooks.publish(
                "channel_status",
                {"channel": name, "state": state, "error": error, "identity": status.identity},
                f"channel:{name}",
            )

    async def _intake(self, name: str, message: Inbound) -> None:
        """The adapters' handler: store, then route; returning acknowledges the message."""
        message = message.scrubbed()  # a stray surrogate must not make it undeliverable
        # Secrets are kept out before the message is stored anywhere, the inbox first.
        message = await asyncio.to_thread(self.router.screened, message)
        inbox_id = await asyncio.to_thread(self.store.receive, message)
        if inbox_id is None:
            return  # delivered before (a redelivery after a crash)
        self._route(inbox_id, INBOX_NEW, message)

    def _route(self, inbox_id: int, status: str, message: Inbound) -> None:
        adapter = self.adapters[message.channel]
        if self.router.control_reply(message):
            self._spawn(self.router.answer_control(inbox_id, message, adapter))
            return
        key = session_key(message.channel, message.chat_id)
        queue = self._chats.get(key)
        if queue is None:
            queue = asyncio.Queue()
            self._chats[key] = queue
            self._spawn(self._work(key, queue, adapter))
        queue.put_nowait((inbox_id, status, message))

    async def _work(
        self, key: str, queue: asyncio.Queue[tuple[int, str, Inbound]], adapter: Adapter
    ) -> None:
        """One conversation's messages, in order."""
        while True:
            try:
                async with asyncio.timeout(_IDLE_WORKER):  # not wait_for: see _dispatch
                    inbox_id, status, message = await queue.get()
            except TimeoutError:
                if queue.empty():
                    self._chats.pop(key, None)
                    return
                continue
            try:
                await self.router.handle(inbox_id, status, message, adapter)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                text = exc.message if isinstance(exc, MemvaultError) else repr(exc)
                log.exception("routing a message failed", extra={"channel": message.channel})
                await asyncio.to_thread(self.store.mark, inbox_id, "failed", text)
            self._wake_soon()

    # -- approvals ---------------------------------------------------------------------

    def _policy_for(self, key: str, message: Inbound) -> Policy:
        """The session's approvals (``always`` lasts until the session ends)."""
        try:
            session_id = self.runtime.sessions.get(key).id
        except MemvaultError:
            session_id = 0
        with self._policy_lock:
            known = self._policies.get(key)
            if known is None or known[0] != session_id:
                approver = _ChannelApprover(self, key, message.channel)
                policy = Policy(approver=approver, mode=self.runtime.settings.tools.mode)
                known = (session_id, policy)
                self._policies[key] = known
            return known[1]

    def _ask_owner(self, waiting: Waiting) -> None:
        self.queue(
            waiting.channel,
            waiting.chat_id,
            [waiting.question()],
            kind="approval",
            buttons=waiting.buttons(),
        )

    def _tell_owner(self, waiting: Waiting, text: str) -> None:
        self.queue(waiting.channel, waiting.chat_id, [text], kind="approval")

    # -- the outbox --------------------------------------------------------------------

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
        message = Outbound(row.chat_id, row.text, reply_to, media, row.buttons)
        retries = self.settings.send_retries
        if not await asyncio.to_thread(self.store.claim, row.id):
            return True  # another process is sending it
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

    def _run_once(self, work: Coroutine[Any, Any, T], channel: str = "") -> T:
        """Run adapter work from a thread outside the hub's loop (or with none running).

        The adapter bounds each of its own calls (the OpenClaw bridge: its ``timeout``
        per CLI call, 60 s by default); the hub only ends work that outlasts
        ``call_timeout``, with a sentence, cancelling it.
        """
        loop = self._loop
        if loop is not None and self.running:
            future = asyncio.run_coroutine_threadsafe(work, loop)
            try:
                return future.result(timeout=self.call_timeout)
            except TimeoutError:
                future.cancel()
                raise ChannelError(
                    f"{channel or 'The channel'} did not answer within "
                    f"{self.call_timeout:g} s; try again."
                ) from None

        async def once() -> T:
            try:
                return await work
            finally:
                for adapter in self.adapters.values():
                    with contextlib.suppress(Exception):
                        await adapter.close()

        return asyncio.run(once())

    def conversations(self, channel: str, limit: int = 50) -> dict[str, Any]:
        """The channel's conversations: from the platform where it can list them, else
        from memvault's own log."""
        adapter = self.adapter(channel)
        try:
            items = self._run_once(adapter.conversations(limit), channel)
            source = "platform"
        except NotSupportedError:
            items = self.store.chats(channel, limit)
            source = "memvault"
        return {"adapter": channel, "conversations": items, "count": len(items), "source": source}

    def messages(self, channel: str, conversation: str | None, limit: int = 50) -> dict[str, Any]:
        """Recent messages of a channel (one conversation, or all), oldest first."""
        self.adapter(channel)
        chat = self.resolve_chat(channel, conversation) if conversation else None
        inbound = self.store.inbox(channel, chat_id=chat, limit=limit)
        outbound = [
            {
                "id": q.id,
                "direction": "outbound",
                "status": q.status,
                "received_at": q.created_at.isoformat(timespec="seconds"),
                "chat_id": q.chat_id,
                "sender_id": None,
                "sender_name": self.runtime.settings.agent.name,
                "text": q.text,
                "attachments": list(q.media),
            }
            for q in reversed(self.store.outbox(channel=channel, limit=limit))  # oldest first
            if chat is None or q.chat_id == chat
        ]
        merged = sorted([*inbound, *outbound], key=lambda m: str(m["received_at"]))[-limit:]
        return {
            "adapter": channel,
            "conversation": chat,
            "messages": merged,
            "message_count": len(merged),
        }

    def context(self, channel: str, conversation: str | None) -> dict[str, Any]:
        """What memvault knows of a conversation: the chat, the contact, the session."""
        adapter = self.adapter(channel)
        chat = self.resolve_chat(channel, conversation or "owner")
        try:
            platform: dict[str, Any] | None = self._run_once(adapter.context(chat), channel)
        except NotSupportedError:
            platform = None
        contact = self.runtime.contacts.find_by_identity(channel, chat)
        try:
            session: dict[str, Any] | None = self.runtime.sessions.get(
                session_key(channel, chat)
            ).to_dict()
        except MemvaultError:
            session = None
        recent = self.store.inbox(channel, chat_id=chat, limit=1)
        return {
            "adapter": channel,
            "conversation": chat,
            "conversation_name": (contact.name if contact else None)
            or (recent[-1]["sender_name"] if recent else None),
            "contact": contact.path if contact else None,
            "owner": chat in self.access.config(channel).owner,
            "session": session,
            "platform": platform,
            "timestamp": self.runtime.clock.now().isoformat(timespec="seconds"),
        }

    def status(self) -> list[dict[str, Any]]:
        """Every channel: enabled, state, uptime (since its adapter last started running in
        this hub), last error, last message, outbox, waiting senders."""
        out = []
        for name, config in self.settings.sections().items():
            status = self.statuses.get(name)
            last = self.store.last_received(name)
            since = self.running_since.get(name) if self.running else None
            uptime = (self.runtime.clock.now() - since).total_seconds() if since else None
            out.append(
                {
                    "channel": name,
                    "enabled": config.enabled,
                    "state": self._state(name),
                    "connected": since is not None,
                    "running_since": since.isoformat(timespec="seconds") if since else None,
                    "uptime_seconds": max(int(uptime), 0) if uptime is not None else None,
                    "error": status.error if status else None,
                    "identity": status.identity if status else None,
                    "receiving": self._receiving(name),
                    "restarts": status.restarts if status else 0,
                    "policy": config.policy,
                    "owner_set": bool(config.owner),
                    "respond": config.respond,
                    "last_received": last.isoformat(timespec="seconds") if last else None,
                    "outbox": self.store.counts(name),
                    "waiting_senders": len(self.access.waiting(name)),
                }
            )
        return out

    def _state(self, name: str) -> str:
        """A channel's state as people are shown it."""
        status = self.statuses.get(name)
        if status is None:
            return "disabled"
        if not self.running and status.state != "failed":
            return "not running (the daemon runs channels)"
        return status.state

    def checks(self) -> list[tuple[str, str, str]]:
        """``(name, ok | warning | error, sentence)`` per enabled channel, for doctor."""
        out: list[tuple[str, str, str]] = []
        for name, config in self.settings.sections().items():
            if config.enabled:
                out.append((f"channel_{name}", *self._verdict(name, config)))
        return out

    def _verdict(self, name: str, config: ChannelSettings) -> tuple[str, str]:
        """``(ok | warning | error, sentence)`` for one enabled channel."""
        status = self.statuses.get(name)
        state = status.state if status else None
        if status is not None and state == "failed":
            return "error", f"{name} stopped: {status.error}"
        if status is not None and state == "conflict":
            return "error", f"{name} receives nothing: {status.error}"
        if status is not None and state == "backoff":
            return "warning", f"{name} is restarting: {status.error}"
        if not config.owner:
            return "warning", (
                f"channels.{name}.owner is empty: nobody can approve senders or tool calls "
                "from a phone"
            )
        failed = self.store.counts(name).get("failed", 0)
        if failed:
            return "warning", (
                f"{failed} message(s) on {name} could not be sent; see `memvault channels outbox`"
            )
        if config.silence_hours:
            last = self.store.last_received(name)
            if last is None or self.runtime.clock.now() - last > timedelta(
                hours=config.silence_hours
            ):
                since = f"since {last.isoformat(timespec='minutes')}" if last else "yet"
                return "warning", (
                    f"{name} has received nothing {since} (more than {config.silence_hours:g} h)"
                )
        who = f" as {status.identity}" if status and status.identity else ""
        how = f", receiving by {way}" if (way := self._receiving(name)) else ""
        return "ok", f"{name} is {self._state(name)}{who}{how}"

    def _receiving(self, name: str) -> str | None:
        """How a running channel's messages arrive, when its adapter has more than one way."""
        adapter = self.adapters.get(name)
        return adapter.receiving() if adapter is not None and self.running else None
