"""What every channel adapter shares (memvault.channels.base and .webhook): the one error
mapping, quiet best-effort calls, the rate-limit streak, loop-bound clients, and the
webhook hand-over from the daemon's HTTP thread to the hub's loop.

Each adapter's own tests drive these through a real platform fake; these pin the shared
behaviour down once, on a minimal adapter of this file's own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import traceback
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memvault.channels.base import (
    Adapter,
    ChannelError,
    ChannelFatalError,
    LoopBound,
    MessageRejectedError,
    RateLimitStreak,
    media_kind,
    read_media,
    token_refused,
)
from memvault.channels.webhook import WebhookInbox
from memvault.errors import InvalidInputError
from waiting import WAIT, wait_for

SECRET = "123456:secret-token"


@dataclass(frozen=True)
class _Settings:
    max_message_length: int = 3000


class _PlatformError(Exception):
    """What a platform library raises."""


class _Tiny(Adapter):
    """An adapter whose platform raises _PlatformError (and quotes its token in it)."""

    name = "tiny"

    def _classify(self, exc: Exception, what: str) -> ChannelError | None:
        if isinstance(exc, _PlatformError) and "401" in str(exc):
            return token_refused("Tiny", "bot token", "401 Unauthorized", "TINY_TOKEN")
        if isinstance(exc, _PlatformError):
            return ChannelError(f"Tiny failed on {what}: {exc}.")
        return None


def test_the_settings_are_kept_and_a_platform_limit_caps_the_length() -> None:
    assert _Tiny(_Settings()).max_message_length == 3000
    assert _Tiny(_Settings(), text_limit=2000).max_message_length == 2000
    assert _Tiny(_Settings(), text_limit=9000).max_message_length == 3000


def test_a_platform_error_becomes_one_sentence_chained_to_its_cause() -> None:
    adapter = _Tiny(_Settings())
    with pytest.raises(ChannelError) as caught, adapter.errors("the message to 42"):
        raise _PlatformError("503 busy")
    assert caught.value.message == "Tiny failed on the message to 42: 503 busy."
    assert isinstance(caught.value.__cause__, _PlatformError)


def test_a_refused_token_is_fatal_names_the_variable_and_never_quotes_the_token() -> None:
    adapter = _Tiny(_Settings())
    with pytest.raises(ChannelFatalError) as caught, adapter.errors("the bot's identity"):
        raise _PlatformError(f"401: the token {SECRET} is invalid")
    assert caught.value.message == (
        "Tiny refused the bot token (401 Unauthorized); check the token in $TINY_TOKEN."
    )
    assert caught.value.__cause__ is None
    shown = "".join(traceback.format_exception(caught.value))
    assert SECRET not in shown


def test_memvaults_own_errors_and_unknown_exceptions_pass_untouched() -> None:
    adapter = _Tiny(_Settings())
    rejected = MessageRejectedError("The file x cannot be read: gone.")
    with pytest.raises(MessageRejectedError) as caught, adapter.errors("the file x"):
        raise rejected
    assert caught.value is rejected
    with pytest.raises(KeyError), adapter.errors("anything"):
        raise KeyError("a bug stays a bug")


def test_a_call_that_only_helps_logs_its_failure_and_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter = _Tiny(_Settings())
    with caplog.at_level(logging.WARNING):
        with adapter.quietly("tiny typing failed", chat_id="42"), adapter.errors("typing"):
            raise _PlatformError("timeout")
        with adapter.quietly("tiny button answer failed", TimeoutError):
            raise TimeoutError("slow")
    (typing, button) = caplog.records
    assert typing.getMessage() == "tiny typing failed"
    assert (vars(typing)["chat_id"], vars(typing)["error"]) == (
        "42",
        "Tiny failed on typing: timeout.",
    )
    assert typing.name == __name__  # the adapter module's own logger
    assert vars(button)["error"] == "slow"
    with pytest.raises(KeyError), adapter.quietly("tiny typing failed"):
        raise KeyError("not a platform failure")


def test_rate_limits_in_a_row_wait_longer_up_to_a_minute_and_reset_after_success() -> None:
    streak = RateLimitStreak()
    waits = [streak.next_wait() for _ in range(8)]
    assert waits == [2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 60.0, 60.0]
    streak.reset()
    assert streak.next_wait() == 2.0


def test_a_loop_bound_client_is_made_anew_on_another_loop_and_closed_on_its_own() -> None:
    made: list[object] = []
    closed: list[object] = []

    def opened() -> object:
        made.append(object())
        return made[-1]

    async def closing(client: object) -> None:
        closed.append(client)

    bound = LoopBound(opened, closing)

    async def twice() -> tuple[object, object]:
        return bound.get(), bound.get()

    first, again = asyncio.run(twice())
    assert first is again
    other = asyncio.run(twice())[0]
    assert other is not first and len(made) == 2

    async def close() -> None:
        await bound.close()

    asyncio.run(close())  # the client belongs to the last loop, which is gone: not closed
    assert closed == []

    async def use_and_close() -> object:
        client = bound.get()
        await bound.close()
        await bound.close()  # again: nothing
        return client

    assert closed == [asyncio.run(use_and_close())]


def test_media_kinds_and_an_unreadable_file(tmp_path: Path) -> None:
    kinds = [media_kind(m) for m in ("image/png", "audio/ogg", "video/mp4", "text/plain", None)]
    assert kinds == ["photo", "audio", "video", "document", "document"]
    assert media_kind("audio/ogg", voice=True) == "voice"
    with pytest.raises(MessageRejectedError) as caught:
        read_media(tmp_path / "gone.pdf")
    assert caught.value.message == (
        f"The file {tmp_path / 'gone.pdf'} cannot be read: No such file or directory."
    )


# -- the webhook hand-over ---------------------------------------------------------------------


class _HubLoop:
    """A loop on a thread of its own, as the daemon runs the hub's."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, work: Coroutine[Any, Any, None]) -> concurrent.futures.Future[None]:
        return asyncio.run_coroutine_threadsafe(work, self.loop)

    def close(self) -> None:
        async def cancel_the_rest() -> None:
            rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        self.run(cancel_the_rest()).result(WAIT)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(WAIT)
        self.loop.close()


@pytest.fixture
def hub_loop() -> Iterator[_HubLoop]:
    running = _HubLoop()
    yield running
    running.close()


def test_a_webhook_returns_only_once_the_hub_took_every_item(hub_loop: _HubLoop) -> None:
    inbox: WebhookInbox[str] = WebhookInbox("LINE", "LINE")
    taken: list[str] = []
    released = threading.Event()

    async def take(item: str) -> None:
        await asyncio.to_thread(released.wait, WAIT)
        taken.append(item)

    serving = hub_loop.run(inbox.serve(take))
    wait_for(inbox.running_loop, "the inbox to serve")
    webhook = threading.Thread(target=lambda: asyncio.run(inbox.hand_over(["a", "b"])))
    webhook.start()
    webhook.join(0.2)
    assert webhook.is_alive() and taken == []  # still waiting for the hub
    released.set()
    webhook.join(WAIT)
    assert not webhook.is_alive() and taken == ["a", "b"]
    serving.cancel()


def test_a_webhook_without_a_running_channel_is_told_to_come_again() -> None:
    inbox: WebhookInbox[str] = WebhookInbox("WhatsApp", "Meta")
    with pytest.raises(ChannelError) as caught:
        asyncio.run(inbox.hand_over(["a"]))
    assert caught.value.message == (
        "The WhatsApp channel is not running yet; Meta will deliver the webhook again."
    )


def test_a_failure_storing_reaches_the_webhook_and_stops_the_channel(
    hub_loop: _HubLoop,
) -> None:
    inbox: WebhookInbox[str] = WebhookInbox("LINE", "LINE")

    async def take(item: str) -> None:
        raise InvalidInputError(f"cannot store {item}")

    serving = hub_loop.run(inbox.serve(take))
    wait_for(inbox.running_loop, "the inbox to serve")
    with pytest.raises(InvalidInputError, match="cannot store a"):
        asyncio.run(inbox.hand_over(["a"]))
    with pytest.raises(InvalidInputError):
        serving.result(WAIT)  # the adapter's start() fails: the hub restarts it
    assert inbox.running_loop() is None


def test_storing_that_takes_too_long_is_an_error_the_platform_retries(
    hub_loop: _HubLoop,
) -> None:
    inbox: WebhookInbox[str] = WebhookInbox("WhatsApp", "Meta", wait=0.1)
    released = threading.Event()

    async def take(item: str) -> None:
        await asyncio.to_thread(released.wait, WAIT)

    serving = hub_loop.run(inbox.serve(take))
    wait_for(inbox.running_loop, "the inbox to serve")
    with pytest.raises(ChannelError) as caught:
        asyncio.run(inbox.hand_over(["a"]))
    assert caught.value.message == (
        "Storing WhatsApp's messages took longer than 0.1 s; Meta will deliver them again."
    )
    released.set()
    serving.cancel()
