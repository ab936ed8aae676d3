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

This module holds the hub's life: starting and stopping its loop, supervising
the adapters, taking messages in, one worker per conversation, the approvals'
glue. The outbox and sending are :class:`~memvault.channels.outbox.Outbox`, what
the hub shows (conversations, status, doctor's checks) is
:class:`~memvault.channels.hub_view.HubView`; both are mixed into :class:`Hub`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Coroutine
from datetime import datetime
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
    PollingConflictError,
)
from memvault.channels.hub_view import HubView
from memvault.channels.outbox import (
    AdapterNotFoundError,
    InvalidHintError,
    InvalidTextError,
    Outbox,
)
from memvault.channels.router import Hooks, Router, session_key
from memvault.channels.store import INBOX_NEW, ChannelStore
from memvault.errors import MemvaultError
from memvault.runtime import Runtime
from memvault.tools.policy import Answer, ApprovalRequest, Policy

# The names others import from here (the errors live with the outbox that raises them).
__all__ = ["AdapterNotFoundError", "Hub", "InvalidHintError", "InvalidTextError"]

log = logging.getLogger(__name__)

RESTART_DELAYS = (1.0, 2.0, 5.0, 15.0, 60.0)
# An adapter that ran this long before failing starts its backoff from the beginning.
_HEALTHY_RUN = 120.0
_IDLE_WORKER = 60.0
# Adapter work asked from outside the hub's loop (a chat's context, its conversations):
# above the adapters' own per-call bounds (the OpenClaw bridge's two concurrent CLI calls
# take 5 to 17 s each on a loaded 2-core machine; its timeout is 60 s by default).
CALL_TIMEOUT = 300.0

T = TypeVar("T")


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


class Hub(Outbox, HubView):
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
            retire=self._retire_question,
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
        waiting.asked_in = self.queue(
            waiting.channel,
            waiting.chat_id,
            [waiting.question()],
            kind="approval",
            buttons=waiting.buttons(),
        )

    def _tell_owner(self, waiting: Waiting, text: str) -> None:
        self.queue(waiting.channel, waiting.chat_id, [text], kind="approval")

    def _retire_question(self, waiting: Waiting) -> None:
        """Once a call no longer waits, its question offers no buttons: a question still
        queued leaves without them, one sent has them taken off where the platform can
        (a press on one left behind is answered "No approval ... is waiting")."""
        if not waiting.asked_in:
            return
        outbox_id, loop = waiting.asked_in[-1], self._loop
        if loop is not None and self.running:
            work = self._retire_sent(outbox_id, waiting.outcome())
            try:
                asyncio.run_coroutine_threadsafe(work, loop)
                return
            except RuntimeError:  # the loop closed meanwhile
                work.close()
        self.store.drop_buttons(outbox_id)  # nothing is sending: it leaves without them

    async def _retire_sent(self, outbox_id: int, outcome: str) -> None:
        """Take the buttons off a question: still queued, off its row; being sent, once
        the send under way is done: sent, off the message; put back in the queue (a
        rate limit), off the row."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.call_timeout
        while True:
            if await asyncio.to_thread(self.store.drop_buttons, outbox_id):
                return  # back in the queue: it leaves without them
            row = await asyncio.to_thread(self.store.queued, outbox_id)
            if row is None or row.status != "sending" or loop.time() > give_up:
                break
            await asyncio.sleep(0.05)
        adapter = self.adapters.get(row.channel) if row is not None else None
        if row is None or adapter is None or row.status != "sent" or not row.buttons:
            return
        await adapter.retire_buttons(row.chat_id, row.platform_ids, row.text, outcome)

    # -- adapter work asked from other threads -----------------------------------------

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
