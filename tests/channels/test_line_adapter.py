"""The LINE adapter, driving line-bot-sdk over real HTTP against a fake Messaging API, with
webhook bodies signed as LINE signs them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from line_fake import FAKE_SECRET, FAKE_TOKEN, FakeLine, group_id, user_id
from memvault.channels.base import (
    Attachment,
    Button,
    ChannelError,
    ChannelFatalError,
    Inbound,
    MessageRejectedError,
    Outbound,
    RateLimitedError,
)
from memvault.channels.line import LineAdapter, WebhookBodyError, WebhookSignatureError
from memvault.config import LineSettings
from waiting import WAIT

OWNER = user_id(1)
FRIEND = user_id(2)
GROUP = group_id(9)


@pytest.fixture
def fake() -> Iterator[FakeLine]:
    with FakeLine() as server:
        server.add_user(OWNER, "Ada")
        server.add_user(FRIEND, "Fred")
        yield server


def settings_for(fake: FakeLine, **overrides: Any) -> LineSettings:
    values: dict[str, Any] = {"api_base": fake.api_base, "data_api_base": fake.data_api_base}
    return LineSettings(**{**values, **overrides})


def run(
    fake: FakeLine,
    scenario: Callable[[LineAdapter], Awaitable[None]],
    *,
    token: str = FAKE_TOKEN,
    secret: str = FAKE_SECRET,
    **overrides: Any,
) -> None:
    """Run ``scenario`` with an adapter on ``fake``, closed afterwards."""

    async def main() -> None:
        adapter = LineAdapter(settings_for(fake, **overrides), secret, token)
        try:
            await asyncio.wait_for(scenario(adapter), WAIT)
        finally:
            await adapter.close()

    asyncio.run(main())


@asynccontextmanager
async def running(
    adapter: LineAdapter, handler: Callable[[Inbound], Awaitable[None]] | None = None
) -> AsyncIterator[list[Inbound]]:
    """The adapter receiving (``start`` running) for the block; what it handed over."""
    received: list[Inbound] = []

    async def keep(message: Inbound) -> None:
        if handler is not None:
            await handler(message)
        received.append(message)

    task = asyncio.create_task(adapter.start(keep))
    await asyncio.sleep(0)  # start() takes its queue
    try:
        yield received
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def post(fake: FakeLine, adapter: LineAdapter, *events: dict[str, Any]) -> int:
    """What the route does with LINE's POST: the signed body to the adapter."""
    body = fake.body(*events)
    return await adapter.receive_webhook(body, fake.sign(body))


async def received_one(fake: FakeLine, adapter: LineAdapter, text: str = "hi") -> Inbound:
    async with running(adapter) as received:
        await post(fake, adapter, fake.text_event(OWNER, text))
    return received[0]


# -- identity --------------------------------------------------------------------------------


def test_identify_names_the_bot(fake: FakeLine) -> None:
    async def scenario(adapter: LineAdapter) -> None:
        assert await adapter.identify() == "memvault (@123abcde)"

    run(fake, scenario)


def test_a_refused_token_is_fatal_and_names_the_variable_not_the_token(fake: FakeLine) -> None:
    async def scenario(adapter: LineAdapter) -> None:
        with pytest.raises(ChannelFatalError) as caught:
            await adapter.identify()
        assert "$MY_LINE_TOKEN" in str(caught.value) and "401" in str(caught.value)
        assert "wrong-token" not in str(caught.value)

    run(fake, scenario, token="wrong-token", token_env="MY_LINE_TOKEN")
    assert fake.requests == ["info"]


def test_an_unreachable_server_is_a_transient_error() -> None:
    with FakeLine() as fake:
        settings = settings_for(fake)
    # The server is gone: its port refuses connections now.

    async def main() -> None:
        adapter = LineAdapter(settings, FAKE_SECRET, FAKE_TOKEN)
        with pytest.raises(ChannelError) as caught:
            await adapter.identify()
        assert not isinstance(caught.value, ChannelFatalError)
        assert caught.value.retriable
        await adapter.close()

    asyncio.run(main())


# -- receiving -------------------------------------------------------------------------------


def test_messages_arrive_with_their_sender_chat_and_name(fake: FakeLine) -> None:
    plain = fake.text_event(OWNER, "remember the milk")
    quoting = fake.text_event(OWNER, "this one", quoted="123456")
    in_group = fake.text_event(FRIEND, "in a group", group=GROUP)
    sticker = fake.sticker_event(OWNER, ["happy", "smile", "joy", "fun"])
    follow = fake.follow_event(OWNER)  # nothing anyone said: not handed over

    async def scenario(adapter: LineAdapter) -> None:
        async with running(adapter) as received:
            count = await post(fake, adapter, plain, quoting, in_group, sticker, follow)
        assert count == 4
        first, reply, group, stuck = received
        assert first.channel == "line"
        assert first.message_id == plain["message"]["id"] == first.platform_message_id
        assert (first.chat_id, first.sender_id, first.chat_type) == (OWNER, OWNER, "private")
        assert (first.sender_name, first.username) == ("Ada", None)
        assert first.text == "remember the milk" and first.reply_to is None
        assert first.sent_at.utcoffset() == UTC.utcoffset(None)
        assert reply.reply_to == "123456"
        assert (group.chat_id, group.sender_id, group.chat_type) == (GROUP, FRIEND, "group")
        assert group.sender_name == "Fred"  # the group member's profile
        assert stuck.text == "[sticker: happy, smile, joy]"

    run(fake, scenario)
    # One profile request per sender and chat: names are remembered.
    assert fake.requests.count("profile") == 2


def test_a_button_tap_arrives_as_an_action(fake: FakeLine) -> None:
    tap = fake.postback_event(OWNER, "mv:approve:4821:abcd:once")

    async def scenario(adapter: LineAdapter) -> None:
        async with running(adapter) as received:
            await post(fake, adapter, tap)
        (press,) = received
        assert (press.action, press.text) == ("mv:approve:4821:abcd:once",) * 2
        # No message id: the event's id, which a redelivery keeps.
        assert press.message_id == press.action_id == tap["webhookEventId"]
        assert (press.chat_id, press.sender_id) == (OWNER, OWNER)
        await adapter.answer_action(press.action_id or "")  # LINE wants no answer

    run(fake, scenario)


def test_images_and_files_arrive_as_attachments_and_download_from_the_data_host(
    fake: FakeLine,
) -> None:
    image = fake.image_event(OWNER, b"\xff\xd8jpeg bytes")
    document = fake.file_event(OWNER, "notes.pdf", b"%PDF-1.7 notes")

    async def scenario(adapter: LineAdapter) -> None:
        async with running(adapter) as received:
            await post(fake, adapter, image, document)
        (photo,) = received[0].attachments
        (file,) = received[1].attachments
        assert (photo.kind, photo.mime, photo.file_id) == (
            "photo",
            "image/jpeg",
            image["message"]["id"],
        )
        assert (file.kind, file.name, file.mime, file.size) == (
            "document",
            "notes.pdf",
            "application/pdf",
            14,
        )
        assert await adapter.download(photo) == b"\xff\xd8jpeg bytes"
        assert await adapter.download(file) == b"%PDF-1.7 notes"
        with pytest.raises(MessageRejectedError, match="404"):
            await adapter.download(Attachment("photo", "999"))

    run(fake, scenario)
    assert fake.requests.count("content") == 3


def test_a_webhook_line_did_not_sign_is_refused_and_nothing_arrives(fake: FakeLine) -> None:
    event = fake.text_event(OWNER, "forged")
    body = fake.body(event)

    async def scenario(adapter: LineAdapter) -> None:
        async with running(adapter) as received:
            for signature in (None, "", fake.sign(body, "another-channel-secret")):
                with pytest.raises(WebhookSignatureError) as caught:
                    await adapter.receive_webhook(body, signature)
                assert caught.value.http_status == 401
            tampered = body.replace(b"forged", b"FORGED")
            with pytest.raises(WebhookSignatureError):
                await adapter.receive_webhook(tampered, fake.sign(body))
            with pytest.raises(WebhookBodyError):
                await adapter.receive_webhook(b"[1, 2]", fake.sign(b"[1, 2]"))
        assert received == []

    run(fake, scenario)


def test_a_webhook_before_the_channel_runs_asks_line_to_deliver_again(fake: FakeLine) -> None:
    async def scenario(adapter: LineAdapter) -> None:
        with pytest.raises(ChannelError, match="not running") as caught:
            await post(fake, adapter, fake.text_event(OWNER, "too early"))
        assert caught.value.retriable and caught.value.http_status == 503
        # The console's "Verify" (no events) is answered whether running or not.
        assert await post(fake, adapter) == 0

    run(fake, scenario)


def test_the_webhook_returns_only_after_the_handler_stored_each_message(fake: FakeLine) -> None:
    events = [fake.text_event(OWNER, f"message {n}") for n in range(3)]

    async def scenario(adapter: LineAdapter) -> None:
        stored: list[str] = []

        async def slow_store(message: Inbound) -> None:
            await asyncio.sleep(0.05)
            stored.append(message.text)

        async with running(adapter, slow_store):
            assert await post(fake, adapter, *events) == 3
            assert stored == ["message 0", "message 1", "message 2"]

    run(fake, scenario)


def test_a_handler_failure_fails_the_webhook_so_line_delivers_again(fake: FakeLine) -> None:
    async def scenario(adapter: LineAdapter) -> None:
        async def broken(message: Inbound) -> None:
            raise ChannelError("the database is locked")

        task = asyncio.create_task(adapter.start(broken))
        await asyncio.sleep(0)
        with pytest.raises(ChannelError, match="locked"):
            await post(fake, adapter, fake.text_event(OWNER, "keep me"))
        # start() fails too, so the hub restarts the channel with backoff.
        with pytest.raises(ChannelError, match="locked"):
            await task
        with pytest.raises(ChannelError, match="not running"):
            await post(fake, adapter, fake.text_event(OWNER, "while it restarts"))

    run(fake, scenario)


def test_a_webhook_from_another_thread_is_handed_to_the_adapters_loop(fake: FakeLine) -> None:
    """The daemon's HTTP server runs on its own loop and thread, as here."""
    event = fake.text_event(OWNER, "from the server's thread")

    async def scenario(adapter: LineAdapter) -> None:
        loop = asyncio.get_running_loop()
        async with running(adapter) as received:
            body = fake.body(event)
            count = await asyncio.to_thread(
                asyncio.run, adapter.receive_webhook(body, fake.sign(body))
            )
            assert count == 1 and received[0].text == "from the server's thread"
            assert asyncio.get_running_loop() is loop

    run(fake, scenario)


# -- sending ---------------------------------------------------------------------------------


def test_a_reply_uses_the_token_once_then_pushes(fake: FakeLine) -> None:
    async def scenario(adapter: LineAdapter) -> None:
        message = await received_one(fake, adapter, "When is the cert renewed?")
        first = await adapter.send(
            Outbound(OWNER, "The **cert** is renewed.", message.platform_message_id)
        )
        second = await adapter.send(Outbound(OWNER, "Part two.", message.platform_message_id))
        assert len(first.message_ids) == len(second.message_ids) == 1

    run(fake, scenario)
    assert [(s["kind"], s["texts"], s["error"]) for s in fake.sent] == [
        ("reply", ["The cert is renewed."], None),
        ("push", ["Part two."], None),
    ]
    assert fake.delivered(OWNER) == ["The cert is renewed.", "Part two."]


def test_a_message_nobody_asked_for_is_pushed_to_the_chat(fake: FakeLine) -> None:
    async def scenario(adapter: LineAdapter) -> None:
        sent = await adapter.send(Outbound(FRIEND, "A note from the agent."))
        assert sent.message_ids

    run(fake, scenario)
    (push,) = fake.sent
    assert (push["kind"], push["chat"]) == ("push", FRIEND) and push["retry_key"]


def test_a_reply_token_line_no_longer_takes_falls_back_to_a_push(fake: FakeLine) -> None:
    async def scenario(adapter: LineAdapter) -> None:
        message = await received_one(fake, adapter)
        fake.expire_reply_tokens()  # LINE's clock ran out before memvault's
        await adapter.send(Outbound(OWNER, "Late answer.", message.platform_message_id))

    run(fake, scenario)
    assert [(s["kind"], s["error"]) for s in fake.sent] == [
        ("reply", "Invalid reply token"),
        ("push", None),
    ]
    assert fake.delivered(OWNER) == ["Late answer."]


def test_long_text_is_cut_to_lines_limit_as_line_counts_it(fake: FakeLine) -> None:
    # 4,000 characters, each two UTF-16 units: within memvault's split, over LINE's limit.
    text = "😀" * 4000

    async def scenario(adapter: LineAdapter) -> None:
        sent = await adapter.send(Outbound(FRIEND, text))
        assert len(sent.message_ids) == 2

    run(fake, scenario)
    (push,) = fake.sent
    assert push["error"] is None and "".join(push["texts"]) == text
    assert all(len(t.encode("utf-16-le")) // 2 <= 5000 for t in push["texts"])


def test_buttons_become_quick_replies_that_post_back(fake: FakeLine) -> None:
    buttons = (
        Button("Approve once", "mv:approve:1:ab:once"),
        Button("Always, for this whole session", "mv:approve:1:ab:always"),
        Button("Deny", "mv:deny:1:ab"),
    )

    async def scenario(adapter: LineAdapter) -> None:
        await adapter.send(Outbound(OWNER, "Allow?", buttons=buttons))

    run(fake, scenario)
    (push,) = fake.sent
    assert push["error"] is None
    items = push["messages"][0]["quickReply"]["items"]
    actions = [item["action"] for item in items]
    assert [a["type"] for a in actions] == ["postback"] * 3
    assert [a["data"] for a in actions] == [b.data for b in buttons]
    assert actions[1]["label"] == "Always, for this whole session"[:20]
    assert actions[1]["displayText"] == "Always, for this whole session"


def test_files_are_named_in_the_text_not_lost(fake: FakeLine, tmp_path: Path) -> None:
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF")

    async def scenario(adapter: LineAdapter) -> None:
        await adapter.send(Outbound(OWNER, "Here it is.", media=(report,)))
        with pytest.raises(MessageRejectedError, match="empty"):
            await adapter.send(Outbound(OWNER, "  "))

    run(fake, scenario)
    (text,) = fake.delivered(OWNER)
    assert text.startswith("Here it is.") and "report.pdf" in text and "public URL" in text


def test_lines_refusals_are_rejections_with_its_reason(fake: FakeLine) -> None:
    async def scenario(adapter: LineAdapter) -> None:
        with pytest.raises(MessageRejectedError) as caught:
            await adapter.send(Outbound("U-not-an-id", "hello"))
        assert "'to'" in str(caught.value) and not caught.value.retriable
        with pytest.raises(MessageRejectedError, match="Failed to send messages"):
            await adapter.send(Outbound(user_id(77), "a stranger who never wrote"))

    run(fake, scenario)


def test_a_429_waits_longer_each_time_and_honours_retry_after(fake: FakeLine) -> None:
    fake.fail("push", 429, times=2)
    fake.fail("push", 429, retry_after=7)
    fake.fail("push", 429, message="You have reached your monthly limit.")

    async def scenario(adapter: LineAdapter) -> None:
        waits = []
        for _ in range(4):
            with pytest.raises(RateLimitedError) as caught:
                await adapter.send(Outbound(OWNER, "hello"))
            waits.append(caught.value.retry_after)
        assert waits == [2.0, 4.0, 7.0, 3600.0]
        assert "monthly limit" in str(caught.value)
        await adapter.send(Outbound(OWNER, "hello"))  # a success resets the backoff
        fake.fail("push", 429)
        with pytest.raises(RateLimitedError) as caught:
            await adapter.send(Outbound(OWNER, "again"))
        assert caught.value.retry_after == 2.0

    run(fake, scenario)


def test_a_server_error_is_transient_and_the_retry_is_delivered_once(fake: FakeLine) -> None:
    fake.fail("push", 500)  # refused: nothing delivered
    fake.fail("push", 502, accepted=True)  # delivered, but the answer was lost

    async def scenario(adapter: LineAdapter) -> None:
        for _ in range(2):
            with pytest.raises(ChannelError) as caught:
                await adapter.send(Outbound(OWNER, "exactly once"))
            assert caught.value.retriable and not isinstance(caught.value, MessageRejectedError)
        sent = await adapter.send(Outbound(OWNER, "exactly once"))
        assert sent.message_ids  # LINE's 409 names the messages it sent the first time

    run(fake, scenario)
    assert fake.delivered(OWNER) == ["exactly once"]
    keys = {s["retry_key"] for s in fake.sent}
    assert len(keys) == 1 and None not in keys  # one key for every attempt


def test_typing_shows_the_loading_animation_in_one_on_one_chats_only(
    fake: FakeLine, caplog: pytest.LogCaptureFixture
) -> None:
    fake.fail("loading", 500)

    async def scenario(adapter: LineAdapter) -> None:
        with caplog.at_level(logging.WARNING):
            await adapter.typing(OWNER)  # fails: logged, never raised
        await adapter.typing(OWNER)
        await adapter.typing(GROUP)  # groups have none

    run(fake, scenario)
    assert fake.loading == [OWNER]
    assert "loading animation failed" in caplog.text


def test_a_sender_whose_profile_cannot_be_read_still_arrives(fake: FakeLine) -> None:
    fake.fail("profile", 500)
    stranger = user_id(55)  # not a friend: no profile either

    async def scenario(adapter: LineAdapter) -> None:
        async with running(adapter) as received:
            await post(
                fake, adapter, fake.text_event(OWNER, "one"), fake.text_event(stranger, "two")
            )
        assert [(m.text, m.sender_name) for m in received] == [("one", ""), ("two", "")]

    run(fake, scenario)
