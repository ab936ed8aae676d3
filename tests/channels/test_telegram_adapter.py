"""The Telegram adapter, driving python-telegram-bot over real HTTP against a fake Bot API."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

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
from memvault.channels.telegram import TelegramAdapter
from memvault.config import TelegramSettings
from telegram_fake import FAKE_TOKEN, FakeTelegram
from waiting import WAIT

# PTB warns, while building its own RetryAfter, that the attribute's type will change.
pytestmark = pytest.mark.filterwarnings("ignore:.*retry_after.*:DeprecationWarning")

OWNER = 42


class MemoryCursor:
    """A polling offset kept in memory, as the hub keeps it in state.db."""

    def __init__(self) -> None:
        self.saved: list[int] = []

    def load(self) -> int | None:
        return self.saved[-1] if self.saved else None

    def save(self, offset: int) -> None:
        self.saved.append(offset)


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with FakeTelegram(chats=[OWNER]) as server:
        yield server


def settings_for(fake: FakeTelegram, **overrides: Any) -> TelegramSettings:
    values: dict[str, Any] = {
        "base_url": fake.base_url,
        "base_file_url": fake.base_file_url,
        "poll_timeout": 5,
    }
    return TelegramSettings(**{**values, **overrides})


def run(
    fake: FakeTelegram,
    scenario: Callable[[TelegramAdapter], Awaitable[None]],
    *,
    token: str = FAKE_TOKEN,
    cursor: MemoryCursor | None = None,
    **overrides: Any,
) -> None:
    """Run ``scenario`` with an adapter on ``fake``, closed afterwards."""

    async def main() -> None:
        adapter = TelegramAdapter(settings_for(fake, **overrides), token, cursor=cursor)
        try:
            await scenario(adapter)
        finally:
            await adapter.close()

    asyncio.run(main())


async def receive(fake: FakeTelegram, adapter: TelegramAdapter, count: int) -> list[Inbound]:
    """Poll until ``count`` messages arrived and the next poll waits, then stop the adapter."""
    received: list[Inbound] = []
    enough = asyncio.Event()

    async def handler(inbound: Inbound) -> None:
        received.append(inbound)
        if len(received) >= count:
            enough.set()

    task = asyncio.create_task(adapter.start(handler))
    waiter = asyncio.create_task(enough.wait())
    await asyncio.wait([task, waiter], timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if task.done():
        task.result()  # start() failed: its error is the test's failure
    if enough.is_set():  # the next getUpdates, which confirms the offset, reached the fake
        await asyncio.to_thread(fake.wait_polling)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert enough.is_set(), f"received {len(received)} of {count} messages"
    return received


# -- identity --------------------------------------------------------------------------------


def test_identify_names_the_bot(fake: FakeTelegram) -> None:
    async def scenario(adapter: TelegramAdapter) -> None:
        assert await adapter.identify() == "@memvault_test_bot"

    run(fake, scenario)


def test_a_refused_token_is_fatal_and_names_the_variable_not_the_token(
    fake: FakeTelegram,
) -> None:
    async def scenario(adapter: TelegramAdapter) -> None:
        with pytest.raises(ChannelFatalError) as caught:
            await adapter.identify()
        assert "$MY_BOT_TOKEN" in str(caught.value)
        assert "401" in str(caught.value)
        assert "wrong-token" not in str(caught.value)

    run(fake, scenario, token="999:wrong-token", token_env="MY_BOT_TOKEN")
    assert fake.requests == ["getMe"]


def test_an_unreachable_server_is_a_transient_error() -> None:
    with FakeTelegram() as fake:
        settings = settings_for(fake)
    # The server is gone: its port refuses connections now.

    async def main() -> None:
        adapter = TelegramAdapter(settings, FAKE_TOKEN)
        with pytest.raises(ChannelError) as caught:
            await adapter.identify()
        assert not isinstance(caught.value, ChannelFatalError)
        await adapter.close()

    asyncio.run(main())


# -- receiving -------------------------------------------------------------------------------


def test_messages_arrive_with_their_sender_chat_and_context(fake: FakeTelegram) -> None:
    first = fake.push_message(OWNER, "remember the milk", first_name="Ada", username="ada")
    earlier = fake.message(OWNER, text="an earlier reply", from_bot=True)
    fake.push_message(OWNER, "this one", reply_to=earlier)
    fake.push_message(OWNER, "someone else's words", forwarded=True)
    fake.push_message(-100, "in a group", sender_id=OWNER)

    async def scenario(adapter: TelegramAdapter) -> None:
        plain, reply, forwarded, group = await receive(fake, adapter, 4)
        assert plain.channel == "telegram"
        assert plain.message_id == str(first)
        assert (plain.chat_id, plain.sender_id) == ("42", "42")
        assert (plain.sender_name, plain.username) == ("Ada", "ada")
        assert plain.text == "remember the milk"
        assert plain.chat_type == "private"
        assert plain.sent_at.tzinfo is not None
        assert plain.sent_at.utcoffset() == UTC.utcoffset(None)
        assert plain.platform_message_id is not None
        assert not plain.forwarded and plain.reply_to is None
        assert reply.reply_to == str(earlier)
        assert forwarded.forwarded
        assert (group.chat_id, group.sender_id, group.chat_type) == ("-100", "42", "group")

    run(fake, scenario)


def test_button_presses_arrive_as_actions_and_are_answered(fake: FakeTelegram) -> None:
    shown = fake.message(OWNER, text="Allow?", from_bot=True)
    fake.push_callback(OWNER, "approve:7")

    async def scenario(adapter: TelegramAdapter) -> None:
        (press,) = await receive(fake, adapter, 1)
        assert (press.action, press.text) == ("approve:7", "approve:7")
        assert press.platform_message_id == str(shown)
        assert (press.chat_id, press.sender_id) == ("42", "42")
        assert press.action_id is not None
        await adapter.answer_action(press.action_id, "Approved")
        await adapter.answer_action("no-such-query")  # logged, never raised

    run(fake, scenario)
    assert [text for _, text in fake.answered_callbacks] == ["Approved"]


def test_photos_and_documents_arrive_as_attachments_and_download(fake: FakeTelegram) -> None:
    fake.push_message(OWNER, None, photo=b"full-size photo", caption="the receipt")
    fake.push_message(OWNER, None, document=("notes.pdf", b"%PDF-1.7 notes", "application/pdf"))

    async def scenario(adapter: TelegramAdapter) -> None:
        photo_message, document_message = await receive(fake, adapter, 2)
        assert photo_message.text == "the receipt"
        (photo,) = photo_message.attachments
        assert (photo.kind, photo.mime, photo.size) == ("photo", "image/jpeg", 15)
        assert await adapter.download(photo) == b"full-size photo"  # the largest size
        (document,) = document_message.attachments
        assert document_message.text == ""
        assert (document.kind, document.name, document.mime) == (
            "document",
            "notes.pdf",
            "application/pdf",
        )
        assert await adapter.download(document) == b"%PDF-1.7 notes"
        with pytest.raises(MessageRejectedError):
            await adapter.download(Attachment("document", "no-such-file"))

    run(fake, scenario)


def test_stickers_read_as_text_and_other_content_is_skipped_but_confirmed(
    fake: FakeTelegram,
) -> None:
    chat = {"id": OWNER, "type": "private", "first_name": "Owner"}
    sender = {"id": OWNER, "is_bot": False, "first_name": "Owner"}
    base = {"date": 1_700_000_000, "chat": chat, "from": sender}
    sticker = {"file_id": "s1", "file_unique_id": "us1", "type": "regular"}
    sticker |= {"width": 512, "height": 512, "is_animated": False, "is_video": False}
    location = fake.push_update(
        message={**base, "message_id": 90, "location": {"latitude": 1.0, "longitude": 2.0}}
    )
    fake.push_update(message={**base, "message_id": 91, "sticker": sticker})
    last = fake.push_message(OWNER, "after")

    async def scenario(adapter: TelegramAdapter) -> None:
        received = await receive(fake, adapter, 2)
        assert [m.text for m in received] == ["[sticker]", "after"]
        assert str(location) not in {m.message_id for m in received}

    cursor = MemoryCursor()
    run(fake, scenario, cursor=cursor)
    assert cursor.saved == [location + 1, location + 2, last + 1]


def test_the_offset_moves_only_after_the_handler_returned(fake: FakeTelegram) -> None:
    first = fake.push_message(OWNER, "one")
    second = fake.push_message(OWNER, "two")
    cursor = MemoryCursor()
    seen: list[str] = []

    async def failing(inbound: Inbound) -> None:
        seen.append(inbound.text)
        if inbound.text == "two":
            raise RuntimeError("the hub crashed")

    async def crash(adapter: TelegramAdapter) -> None:
        with pytest.raises(RuntimeError, match="the hub crashed"):
            await asyncio.wait_for(adapter.start(failing), WAIT)

    run(fake, crash, cursor=cursor)
    assert seen == ["one", "two"]
    assert cursor.saved == [first + 1]
    assert second in fake.pending_updates()

    async def restart(adapter: TelegramAdapter) -> None:
        (again,) = await receive(fake, adapter, 1)
        assert (again.text, again.message_id) == ("two", str(second))

    run(fake, restart, cursor=cursor)  # a new adapter, resuming from the saved offset
    assert cursor.saved == [first + 1, second + 1]
    assert fake.pending_updates() == []


def test_a_long_poll_returns_as_soon_as_a_message_arrives(fake: FakeTelegram) -> None:
    async def scenario(adapter: TelegramAdapter) -> None:
        received: list[Inbound] = []
        polls_when_handed: list[int] = []
        arrived = asyncio.Event()

        async def handler(inbound: Inbound) -> None:
            received.append(inbound)
            polls_when_handed.append(fake.requests.count("getUpdates"))
            arrived.set()

        task = asyncio.create_task(adapter.start(handler))
        await asyncio.to_thread(fake.wait_polling)
        waiting_poll = fake.requests.count("getUpdates")
        fake.push_message(OWNER, "wake up")
        await asyncio.wait_for(arrived.wait(), WAIT)
        task.cancel()
        await asyncio.wait([task], timeout=WAIT)
        assert task.cancelled()
        assert [m.text for m in received] == ["wake up"]
        # The poll that was waiting brought it, not the next one 45 s later: however slow
        # the machine, an answer at the poll's end would come with a later getUpdates.
        assert polls_when_handed == [waiting_poll]

    run(fake, scenario, poll_timeout=45)


def test_a_second_poller_on_the_token_is_fatal(fake: FakeTelegram) -> None:
    async def scenario(adapter: TelegramAdapter) -> None:
        async def ignore(inbound: Inbound) -> None:
            pass

        first = asyncio.create_task(adapter.start(ignore))
        await asyncio.to_thread(fake.wait_polling)
        other = TelegramAdapter(settings_for(fake), FAKE_TOKEN)
        second = asyncio.create_task(other.start(ignore))
        try:
            with pytest.raises(ChannelFatalError, match="Another program is polling"):
                await asyncio.wait_for(first, WAIT)
        finally:
            second.cancel()
            await asyncio.wait([second], timeout=WAIT)
            await other.close()

    run(fake, scenario, poll_timeout=30)


def test_polling_waits_out_flood_control_and_fails_on_server_errors(fake: FakeTelegram) -> None:
    fake.fail("getUpdates", 429, retry_after=1)
    fake.push_message(OWNER, "after the wait")

    async def scenario(adapter: TelegramAdapter) -> None:
        (message,) = await receive(fake, adapter, 1)
        assert message.text == "after the wait"
        fake.fail("getUpdates", 502)

        async def ignore(inbound: Inbound) -> None:
            pass

        with pytest.raises(ChannelError) as caught:
            await asyncio.wait_for(adapter.start(ignore), WAIT)
        assert not isinstance(caught.value, ChannelFatalError)

    run(fake, scenario)
    assert fake.requests.count("getUpdates") >= 3


# -- sending ---------------------------------------------------------------------------------


def test_replies_go_out_as_html_with_buttons_and_a_reply(fake: FakeTelegram) -> None:
    asked = fake.message(OWNER, text="what now?")
    buttons = tuple(Button(f"Option {n}", f"pick:{n}") for n in range(4))

    async def scenario(adapter: TelegramAdapter) -> None:
        message = Outbound(str(OWNER), "**Done** & dusted", reply_to=str(asked), buttons=buttons)
        sent = await adapter.send(message)
        assert len(sent.message_ids) == 1

    run(fake, scenario)
    (attempt,) = fake.sent
    assert (attempt["text"], attempt["parse_mode"]) == ("<b>Done</b> &amp; dusted", "HTML")
    assert attempt["reply_to"] == asked
    rows = attempt["reply_markup"]["inline_keyboard"]
    assert [[key["callback_data"] for key in row] for row in rows] == [
        ["pick:0", "pick:1", "pick:2"],
        ["pick:3"],
    ]
    assert attempt["error"] is None


def test_buttons_are_taken_off_an_answered_question(
    fake: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    buttons = (Button("Approve once", "mv:approve:1:ab:once"), Button("Deny", "mv:deny:1:ab"))

    async def scenario(adapter: TelegramAdapter) -> None:
        sent = await adapter.send(Outbound(str(OWNER), "Allow **remember**?", buttons=buttons))
        await adapter.retire_buttons(str(OWNER), sent.message_ids, "", "Denied.")
        # Taken off already, and a message Telegram does not have: logged, never raised.
        await adapter.retire_buttons(str(OWNER), sent.message_ids, "", "Denied.")
        await adapter.retire_buttons(str(OWNER), ("999",), "", "Denied.")

    run(fake, scenario)
    (question,) = fake.sent
    assert question["reply_markup"] is not None
    assert fake.keyboard(OWNER, question["message_id"]) is None
    assert fake.edits == [
        {"chat_id": OWNER, "message_id": question["message_id"], "reply_markup": None}
    ]
    errors = [
        str(vars(r).get("error"))
        for r in caplog.records
        if r.getMessage() == "telegram buttons not taken back"
    ]
    assert len(errors) == 2 and "not modified" in errors[0] and "not found" in errors[1]


def test_html_telegram_cannot_parse_is_resent_as_plain_text(fake: FakeTelegram) -> None:
    fake.fail(
        "sendMessage", 400, description="Bad Request: can't parse entities: Unsupported start tag"
    )

    async def scenario(adapter: TelegramAdapter) -> None:
        await adapter.send(Outbound(str(OWNER), "**bold** and `code`"))

    run(fake, scenario)
    refused, plain = fake.sent
    assert refused["parse_mode"] == "HTML" and refused["error"]
    assert (plain["text"], plain["parse_mode"], plain["error"]) == ("bold and code", None, None)


def test_html_longer_than_a_message_goes_out_as_plain_text(fake: FakeTelegram) -> None:
    text = "a & b " * 10  # 99 characters of HTML, 59 of plain text

    async def scenario(adapter: TelegramAdapter) -> None:
        await adapter.send(Outbound(str(OWNER), text))

    run(fake, scenario, max_message_length=64)
    (attempt,) = fake.sent
    assert attempt["parse_mode"] is None
    assert attempt["text"] == text.strip()


def test_media_goes_out_as_photos_and_documents(fake: FakeTelegram, tmp_path: Path) -> None:
    photo = tmp_path / "chart.png"
    photo.write_bytes(b"\x89PNG chart")
    report = tmp_path / "report.csv"
    report.write_bytes(b"a,b\n1,2\n")

    async def scenario(adapter: TelegramAdapter) -> None:
        sent = await adapter.send(Outbound(str(OWNER), "", media=(photo, report)))
        assert len(sent.message_ids) == 2
        with pytest.raises(MessageRejectedError, match="cannot be read"):
            await adapter.send(Outbound(str(OWNER), "", media=(tmp_path / "gone.png",)))

    run(fake, scenario)
    assert [(s["method"], s["files"]) for s in fake.sent] == [
        ("sendPhoto", {"photo": ("chart.png", b"\x89PNG chart")}),
        ("sendDocument", {"document": ("report.csv", b"a,b\n1,2\n")}),
    ]


def test_send_errors_are_classed_for_the_hub(fake: FakeTelegram) -> None:
    fake.fail("sendMessage", 429, retry_after=7)
    fake.fail("sendMessage", 500)
    fake.fail("sendMessage", 403)

    async def scenario(adapter: TelegramAdapter) -> None:
        message = Outbound(str(OWNER), "hello")
        with pytest.raises(RateLimitedError) as limited:
            await adapter.send(message)
        assert limited.value.retry_after == 7
        with pytest.raises(ChannelError) as failed:
            await adapter.send(message)
        assert not isinstance(failed.value, MessageRejectedError | ChannelFatalError)
        with pytest.raises(MessageRejectedError, match="blocked"):
            await adapter.send(message)
        with pytest.raises(MessageRejectedError, match="chat 777: Chat not found"):
            await adapter.send(Outbound("777", "hello"))
        assert (await adapter.send(message)).message_ids  # the channel still works

    run(fake, scenario)


def test_typing_shows_an_action_and_never_fails(fake: FakeTelegram) -> None:
    async def scenario(adapter: TelegramAdapter) -> None:
        await adapter.typing(str(OWNER))
        await adapter.typing("777")  # unknown chat: logged only

    run(fake, scenario)
    assert fake.actions == [(OWNER, "typing")]


def test_close_can_be_called_twice(fake: FakeTelegram) -> None:
    async def scenario(adapter: TelegramAdapter) -> None:
        await adapter.identify()
        await adapter.close()
        await adapter.close()
        assert await adapter.identify() == "@memvault_test_bot"  # reopens on use

    run(fake, scenario)
