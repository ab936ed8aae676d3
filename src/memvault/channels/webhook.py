"""The hand-over from a platform's webhook to the hub, for the channels that cannot be
polled (LINE, WhatsApp).

The platform POSTs what arrived to the daemon's HTTP server, on a thread of its own;
the adapter's :meth:`~memvault.channels.base.Adapter.start` runs on the hub's loop.
:class:`WebhookInbox` joins the two: :meth:`WebhookInbox.hand_over` (called by the
route, from any loop) queues one webhook's items on the hub's loop and returns only
once :meth:`WebhookInbox.serve` has taken every one of them, so the route answers 200
only for what is stored. A failure, a channel that is not running, or storing that
takes longer than :data:`WEBHOOK_WAIT` is a :class:`ChannelError`: the route answers
with an error and the platform delivers the webhook again, with the same message ids,
which the hub's inbox stores once. A body the platform did not sign is a
:class:`WebhookSignatureError` (401), a signed one that is not its JSON a
:class:`WebhookBodyError` (400).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from memvault.channels.base import ChannelError
from memvault.errors import InvalidInputError, MemvaultError

# How long a webhook waits for the hub to store what arrived; past it the platform retries.
WEBHOOK_WAIT = 10.0

ItemT = TypeVar("ItemT")


class WebhookSignatureError(MemvaultError):
    """A webhook body not signed with the channel's secret: the platform did not send it."""

    code = "invalid_signature"
    http_status = 401


class WebhookBodyError(InvalidInputError):
    """A signed webhook body that is not the JSON the platform sends."""

    code = "invalid_json"


@dataclass(frozen=True)
class _Delivery(Generic[ItemT]):
    """One webhook's items on their way to the adapter, and the route waiting for them."""

    items: list[ItemT]
    done: asyncio.Future[None]


class WebhookInbox(Generic[ItemT]):
    """What one webhook channel received and the hub has not taken yet.

    ``platform`` and ``sender`` name who posts in the sentences a retried webhook gets
    (``LINE`` and ``LINE``; ``WhatsApp`` and ``Meta``); ``wait`` bounds how long a
    webhook waits for the hub.
    """

    def __init__(self, platform: str, sender: str, *, wait: float = WEBHOOK_WAIT) -> None:
        self.platform = platform
        self.sender = sender
        self.wait = wait
        self.not_running = (
            f"The {platform} channel is not running yet; {sender} will deliver the webhook again."
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[_Delivery[ItemT]] | None = None

    def running_loop(self) -> asyncio.AbstractEventLoop | None:
        """The hub's loop while :meth:`serve` runs on it; None otherwise."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._queue is None:
            return None
        return loop

    async def serve(
        self,
        take: Callable[[ItemT], Awaitable[None]],
        after: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """On the hub's loop, until cancelled: each webhook's items to ``take``, in order,
        then ``after`` (the adapter's bookkeeping); the webhook is answered with success
        only then, else with what failed. Webhooks still queued when it stops are told
        the channel is not running (the platform delivers them again)."""
        queue: asyncio.Queue[_Delivery[ItemT]] = asyncio.Queue()
        self._loop, self._queue = asyncio.get_running_loop(), queue
        try:
            while True:
                delivery = await queue.get()
                try:
                    for item in delivery.items:
                        await take(item)
                    if after is not None:
                        await after()
                except Exception as exc:
                    _settle(delivery.done, exc)
                    raise
                except BaseException:
                    _settle(delivery.done, ChannelError(self.not_running))
                    raise
                _settle(delivery.done, None)
        finally:
            self._queue = None
            while not queue.empty():
                _settle(queue.get_nowait().done, ChannelError(self.not_running))

    async def hand_over(self, items: list[ItemT]) -> None:
        """From the webhook route's loop: queue ``items`` on the hub's loop and return
        once :meth:`serve` took them all (ChannelError when it did not, in time)."""
        loop = self.running_loop()
        if loop is None:
            raise ChannelError(self.not_running)
        handed = asyncio.run_coroutine_threadsafe(self._queued(items), loop)
        try:
            await asyncio.wait_for(asyncio.wrap_future(handed), self.wait)
        except TimeoutError as exc:
            raise ChannelError(
                f"Storing {self.platform}'s messages took longer than {self.wait:g} s; "
                f"{self.sender} will deliver them again."
            ) from exc

    async def _queued(self, items: list[ItemT]) -> None:
        """On the hub's loop: queue one webhook's items and wait until they are taken."""
        queue = self._queue
        if queue is None:
            raise ChannelError(self.not_running)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.put_nowait(_Delivery(items, done))
        await done


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():
        return  # the webhook gave up waiting (the platform delivers it again)
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
