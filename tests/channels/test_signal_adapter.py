"""The Signal adapter against a fake signal-cli daemon: JSON-RPC over real HTTP (with its
Server-Sent Events) and over a real UNIX socket, as ``signal-cli daemon`` serves them."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from channel_support import MemoryState
from memvault.channels.base import (
    Attachment,
    ChannelError,
    ChannelFatalError,
    Inbound,
    MessageRejectedError,
    Outbound,
    RateLimitedError,
)
from memvault.channels.signal import SignalAdapter, signal_text
from memvault.config import SignalSettings
from signal_fake import FakeSignalCli, uuid_of
from waiting import WAIT

OWNER = "+4915112345678"
FRIEND = "+4917600000001"
GROUP = "Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI="
TRANSPORTS = ["http", "socket"]


@pytest.fixture
def fake() -> Iterator[FakeSignalCli]:
    with FakeSignalCli() as server:
        yield server


def settings_for(fake: FakeSignalCli, transport: str = "http", **overrides: Any) -> SignalSettings:
    values: dict[str, Any] = {"account": fake.account, "url": fake.url, "owner": [OWNER]}
    if transport == "socket":
        values["socket"] = fake.socket
    return SignalSettings(**{**values, **overrides})


def run(
    fake: FakeSignalCli,
    scenario: Callable[[SignalAdapter], Awaitable[None]],
    *,
    transport: str = "http",
    state: MemoryState | None = None,
    **overrides: Any,
) -> None:
    """Run ``scenario`` with an adapter on ``fake``, closed afterwards."""

    async def main() -> None:
        adapter = SignalAdapter(settings_for(fake, transport, **overrides), state=state)
        try:
            await scenario(adapter)
        finally:
            await adapter.close()

    asyncio.run(main())


async def receive(adapter: SignalAdapter, count: int) -> list[Inbound]:
    """Receive until ``count`` messages arrived, then stop the adapter."""
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
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert enough.is_set(), f"received {len(received)} of {count} messages"
    return received


# -- identity --------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_identify_names_the_account_and_the_daemons_version(
    fake: FakeSignalCli, transport: str
) -> None:
    async def scenario(adapter: SignalAdapter) -> None:
        assert await adapter.identify() == f"{fake.account} (signal-cli 0.13.22)"

    run(fake, scenario, transport=transport)
    assert fake.requests == ["version"]


def test_an_account_the_daemon_does_not_serve_is_fatal_and_named() -> None:
    with FakeSignalCli(accounts=["+15559999999"]) as fake:

        async def scenario(adapter: SignalAdapter) -> None:
            with pytest.raises(ChannelFatalError) as caught:
                await adapter.identify()
            assert f"no account {fake.account}" in str(caught.value)
            with pytest.raises(ChannelFatalError, match="no account"):  # the event stream: 400
                await adapter.start(_never)

        run(fake, scenario)


def test_a_daemon_serving_several_accounts_needs_the_account_set() -> None:
    with FakeSignalCli(accounts=["+15559999999", "+15558888888"]) as fake:

        async def scenario(adapter: SignalAdapter) -> None:
            assert await adapter.identify() == "signal-cli (signal-cli 0.13.22)"
            with pytest.raises(ChannelFatalError, match=r"set channels\.signal\.account"):
                await adapter.send(Outbound(OWNER, "from which account?"))

        run(fake, scenario, account="")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_absent_daemon_is_a_transient_error(transport: str) -> None:
    with FakeSignalCli() as fake:
        settings = settings_for(fake, transport)
    # The daemon is gone: the port refuses connections, the socket file is removed.

    async def main() -> None:
        adapter = SignalAdapter(settings)
        for attempt in (adapter.identify(), adapter.start(_never)):
            with pytest.raises(ChannelError) as caught:
                await attempt
            assert not isinstance(caught.value, ChannelFatalError)
            assert "is `signal-cli daemon` running?" in str(caught.value)
        await adapter.close()

    asyncio.run(main())


def test_another_server_at_the_url_is_fatal(fake: FakeSignalCli) -> None:
    fake.fail_http("/api/v1/rpc", 404)

    async def scenario(adapter: SignalAdapter) -> None:
        with pytest.raises(ChannelFatalError, match="not signal-cli's JSON-RPC endpoint"):
            await adapter.identify()

    run(fake, scenario)


def test_a_daemon_failing_with_5xx_is_transient(fake: FakeSignalCli) -> None:
    fake.fail_http("/api/v1/rpc", 503)
    fake.fail_http("/api/v1/events", 500)

    async def scenario(adapter: SignalAdapter) -> None:
        for attempt in (adapter.identify(), adapter.start(_never)):
            with pytest.raises(ChannelError, match="HTTP 5") as caught:
                await attempt
            assert not isinstance(caught.value, ChannelFatalError)

    run(fake, scenario)


async def _never(inbound: Inbound) -> None:
    raise AssertionError(f"nothing should arrive: {inbound}")


# -- receiving -------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_messages_arrive_with_their_sender_chat_and_quote(
    fake: FakeSignalCli, transport: str
) -> None:
    first = fake.push_message(OWNER, "remember the milk", name="Ada")
    fake.push_message(OWNER, "this one", quote=(fake.account, 1_700_000_000_123))
    fake.push_message(OWNER, "in a group", group=GROUP)
    hidden = "0b9c8f6e-3d1a-4c55-9e71-2f0a1b2c3d4e"
    fake.push_message(None, "my number is private", uuid=hidden, name="Eve")

    async def scenario(adapter: SignalAdapter) -> None:
        plain, reply, group, private = await receive(adapter, 4)
        assert plain.channel == "signal"
        assert plain.message_id == f"{uuid_of(OWNER)}_{first}"
        assert plain.platform_message_id == plain.message_id
        assert (plain.chat_id, plain.sender_id, plain.sender_name) == (OWNER, OWNER, "Ada")
        assert (plain.text, plain.chat_type, plain.reply_to) == (
            "remember the milk",
            "private",
            None,
        )
        assert plain.sent_at.utcoffset() == UTC.utcoffset(None)
        assert int(plain.sent_at.timestamp() * 1000) == first
        assert reply.reply_to == f"{uuid_of(fake.account)}_1700000000123"
        assert (group.chat_id, group.sender_id, group.chat_type) == (
            f"group:{GROUP}",
            OWNER,
            "group",
        )
        assert (private.chat_id, private.sender_id, private.sender_name) == (hidden, hidden, "Eve")

    run(fake, scenario, transport=transport)


def test_the_sender_is_named_as_the_owner_configured_them(fake: FakeSignalCli) -> None:
    """Signal shows a number and a UUID; the one in owner / allow is the sender's id."""
    fake.push_message(OWNER, "from the owner")
    fake.push_message(FRIEND, "from a friend")
    owner_uuid = uuid_of(OWNER).upper()  # pasted in capitals: still the owner

    async def scenario(adapter: SignalAdapter) -> None:
        owner, friend = await receive(adapter, 2)
        assert (owner.sender_id, owner.chat_id) == (owner_uuid, owner_uuid)
        assert friend.sender_id == FRIEND

    run(fake, scenario, owner=[owner_uuid])


def test_what_memvault_does_not_read_is_skipped(fake: FakeSignalCli) -> None:
    fake.push_envelope(OWNER, receiptMessage={"when": 1, "isDelivery": True, "timestamps": [1]})
    fake.push_envelope(OWNER, typingMessage={"action": "STARTED", "timestamp": 1})
    fake.push_envelope(
        OWNER, syncMessage={"sentMessage": {"destination": FRIEND, "message": "from my phone"}}
    )
    reaction = {"emoji": "👍", "targetAuthor": fake.account, "targetSentTimestamp": 1}
    fake.push_envelope(OWNER, dataMessage={"timestamp": 1, "message": None, "reaction": reaction})
    fake.push_exception(OWNER, "Untrusted identity", "UntrustedIdentityException")
    fake.push_envelope(OWNER, dataMessage={"message": "bad group", "groupInfo": "not an object"})
    fake.push_message(OWNER, None, sticker=True)
    original = fake.push_message(OWNER, "tpyo")
    fake.push_message(OWNER, "typo", edit_of=original)

    async def scenario(adapter: SignalAdapter) -> None:
        received = await receive(adapter, 3)
        assert [m.text for m in received] == ["[sticker]", "tpyo", "typo"]
        assert len({m.message_id for m in received}) == 3

    run(fake, scenario)


def test_attachments_arrive_and_download(fake: FakeSignalCli) -> None:
    fake.push_message(
        OWNER,
        "the receipt",
        attachments=[
            ("receipt.jpg", b"\xff\xd8jpeg", "image/jpeg"),
            ("notes.pdf", b"%PDF-1.7 notes", "application/pdf"),
            (None, b"voice", "audio/aac"),
        ],
    )

    async def scenario(adapter: SignalAdapter) -> None:
        (message,) = await receive(adapter, 1)
        photo, document, voice = message.attachments
        assert (photo.kind, photo.name, photo.mime, photo.size) == (
            "photo",
            "receipt.jpg",
            "image/jpeg",
            6,
        )
        assert (document.kind, voice.kind, voice.name) == ("document", "audio", None)
        assert await adapter.download(photo) == b"\xff\xd8jpeg"
        assert await adapter.download(document) == b"%PDF-1.7 notes"
        with pytest.raises(MessageRejectedError, match="Could not find attachment"):
            await adapter.download(Attachment("document", "gone.bin"))

    run(fake, scenario)


def test_a_message_counts_as_seen_only_after_the_handler_returned(fake: FakeSignalCli) -> None:
    """signal-cli hands a message over again after a crash (its cache); the adapter skips
    it once the hub took it, and only then."""
    state = MemoryState()
    first = fake.push_message(OWNER, "one")

    async def failing(inbound: Inbound) -> None:
        raise RuntimeError("the hub crashed")

    async def crash(adapter: SignalAdapter) -> None:
        with pytest.raises(RuntimeError, match="the hub crashed"):
            await adapter.start(failing)

    run(fake, crash, state=state)
    assert state.values == {}  # nothing was handled
    fake.wait_listeners(0)  # a stream still open would take the copy

    async def redelivered(adapter: SignalAdapter) -> None:
        fake.redeliver(first)
        (again,) = await receive(adapter, 1)
        assert again.text == "one"

    run(fake, redelivered, state=state)
    assert state.values == {f"seen.{uuid_of(OWNER)}.1": str(first)}
    fake.wait_listeners(0)

    async def replayed(adapter: SignalAdapter) -> None:
        fake.redeliver(first)
        fake.push_message(OWNER, "two")
        (only,) = await receive(adapter, 1)
        assert only.text == "two"

    run(fake, replayed, state=state)


def test_each_device_of_a_sender_keeps_its_own_order(fake: FakeSignalCli) -> None:
    """A phone and a desktop have clocks of their own: a later message with an earlier
    timestamp from another device is not a replay."""
    state = MemoryState()
    state.put(f"seen.{uuid_of(OWNER)}.2", "99999999999999")  # the desktop's clock runs ahead
    fake.push_message(OWNER, "from the phone", device=1)

    async def scenario(adapter: SignalAdapter) -> None:
        (message,) = await receive(adapter, 1)
        assert message.text == "from the phone"

    run(fake, scenario, state=state)


def test_on_connection_and_a_subscription_give_each_message_once() -> None:
    """A daemon without ``--receive-mode manual`` pushes to every socket connection, and the
    subscription adds a second copy: the adapter hands over one."""
    with FakeSignalCli(receive_mode="on-connection") as fake:
        fake.push_message(OWNER, "one")
        fake.push_message(OWNER, "two")
        state = MemoryState()

        async def scenario(adapter: SignalAdapter) -> None:
            received = await receive(adapter, 2)
            await asyncio.sleep(0.3)  # the second copies arrive too
            assert [m.text for m in received] == ["one", "two"]

        run(fake, scenario, transport="socket", state=state)
        assert len(fake.handed) == 2


@pytest.mark.parametrize(
    ("transport", "abrupt"), [("http", False), ("http", True), ("socket", False)]
)
def test_a_dropped_stream_is_transient_and_loses_nothing(
    fake: FakeSignalCli, transport: str, abrupt: bool
) -> None:
    async def scenario(adapter: SignalAdapter) -> None:
        task = asyncio.create_task(adapter.start(_never))
        await asyncio.to_thread(fake.wait_listeners, 1)
        fake.drop_streams(abrupt=abrupt)
        with pytest.raises(ChannelError) as caught:
            await asyncio.wait_for(task, WAIT)
        assert not isinstance(caught.value, ChannelFatalError)
        await asyncio.to_thread(fake.wait_listeners, 0)
        fake.push_message(OWNER, "while memvault reconnects")
        assert fake.pending() == 1  # still on Signal's servers: nobody listens
        (message,) = await receive(adapter, 1)
        assert message.text == "while memvault reconnects"

    run(fake, scenario, transport=transport)


# -- sending -----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_reply_is_styled_quotes_its_message_and_carries_files(
    fake: FakeSignalCli, transport: str, tmp_path: Path
) -> None:
    chart = tmp_path / "chart; final.png"
    chart.write_bytes(b"\x89PNG data")
    original = f"{uuid_of(OWNER)}_1700000000123"

    async def scenario(adapter: SignalAdapter) -> None:
        text = "The **cert** is renewed on _Friday_ 🎉 `tls`"
        sent = await adapter.send(Outbound(OWNER, text, reply_to=original, media=(chart,)))
        assert sent.message_ids == (f"{fake.account}_{fake.sent[0]['timestamp']}",)

    run(fake, scenario, transport=transport)
    (sent,) = fake.sent
    assert sent["chat"] == OWNER and sent["error"] is None and sent["transport"] == transport
    assert sent["message"] == "The cert is renewed on Friday 🎉 tls"
    assert sent["textStyle"] == ["4:4:BOLD", "23:6:ITALIC", "33:3:MONOSPACE"]
    assert (sent["quoteTimestamp"], sent["quoteAuthor"]) == (1700000000123, uuid_of(OWNER))
    assert sent["files"] == [("chart; final.png", "image/png", b"\x89PNG data")]


def test_groups_are_sent_to_by_group_id_and_typing_shows(fake: FakeSignalCli) -> None:
    fake.add_group(GROUP)

    async def scenario(adapter: SignalAdapter) -> None:
        await adapter.typing(f"group:{GROUP}")
        await adapter.typing(OWNER)
        await adapter.send(Outbound(f"group:{GROUP}", "hello group", reply_to="not-an-id"))
        await adapter.typing("group:unknown")  # refused: logged, never raised

    run(fake, scenario)
    assert fake.typing == [{"groupId": GROUP}, {"recipient": [OWNER]}]
    (sent,) = fake.sent
    assert sent["chat"] == f"group:{GROUP}" and sent["quoteTimestamp"] is None


@pytest.mark.parametrize(
    ("failure", "expected", "words"),
    [
        (("RATE_LIMIT_FAILURE", 30), RateLimitedError, "wait 30 seconds"),
        (("RATE_LIMIT_FAILURE", None), RateLimitedError, "wait 60 seconds"),
        (("NETWORK_FAILURE", None), ChannelError, "Failed to send message"),
        (("IDENTITY_FAILURE", None), MessageRejectedError, "safety number changed"),
        (("UNREGISTERED_FAILURE", None), MessageRejectedError, "not on Signal"),
    ],
)
def test_refused_sends_are_classed_as_the_hub_acts_on_them(
    fake: FakeSignalCli, failure: tuple[str, int | None], expected: type[Exception], words: str
) -> None:
    kind, retry_after = failure
    fake.fail_send(kind, retry_after=retry_after)

    async def scenario(adapter: SignalAdapter) -> None:
        with pytest.raises(ChannelError) as caught:
            await adapter.send(Outbound(OWNER, "hello"))
        assert type(caught.value) is expected
        assert words in str(caught.value)
        if isinstance(caught.value, RateLimitedError):
            assert caught.value.retry_after == float(retry_after or 60)

    run(fake, scenario)


def test_other_refusals_and_failures(tmp_path: Path) -> None:
    with FakeSignalCli(registered=[OWNER]) as fake:

        async def scenario(adapter: SignalAdapter) -> None:
            with pytest.raises(MessageRejectedError, match="not on Signal"):
                await adapter.send(Outbound("+15550000099", "to nobody"))
            with pytest.raises(MessageRejectedError, match="Group not found"):
                await adapter.send(Outbound("group:nope", "to no group"))
            with pytest.raises(MessageRejectedError, match="cannot be read"):
                await adapter.send(Outbound(OWNER, "", media=(tmp_path / "missing.pdf",)))
            fake.fail("send", -3, "Failed to send message: connection reset")
            with pytest.raises(ChannelError) as caught:
                await adapter.send(Outbound(OWNER, "an I/O error"))
            assert type(caught.value) is ChannelError
            fake.fail(
                "send",
                -32603,
                "Failed to send message: [401] Authorization failed! "
                "(AuthorizationFailedException) (UnexpectedErrorException)",
            )
            with pytest.raises(ChannelFatalError, match="no longer accepts the account"):
                await adapter.send(Outbound(OWNER, "after the account was unregistered"))
            fake.fail_http("/api/v1/rpc", 502)
            with pytest.raises(ChannelError, match="HTTP 502"):
                await adapter.send(Outbound(OWNER, "through a failing proxy"))

        run(fake, scenario)
    assert [s for s in fake.sent if not s["error"]] == []


def test_an_empty_message_sends_nothing(fake: FakeSignalCli) -> None:
    async def scenario(adapter: SignalAdapter) -> None:
        assert (await adapter.send(Outbound(OWNER, "  "))).message_ids == ()

    run(fake, scenario)
    assert fake.sent == []


# -- rendering ---------------------------------------------------------------------------------


def test_markdown_becomes_signal_text_styles_counted_in_utf16() -> None:
    text, styles = signal_text("😀 **bold** ~~old~~ *it*")
    assert text == "😀 bold old it"
    assert styles == ["3:4:BOLD", "8:3:STRIKETHROUGH", "12:2:ITALIC"]
    assert signal_text("# Plan\n\n- one\n- two") == ("Plan\n\n• one\n• two", ["0:4:BOLD"])
    assert signal_text("a < b & c")[0] == "a < b & c"


def test_links_keep_their_target_and_code_blocks_are_monospace() -> None:
    text, styles = signal_text("See [the docs](https://example.org) or https://x.org")
    assert text == "See the docs (https://example.org) or https://x.org"
    assert styles == []
    text, styles = signal_text("```python\nprint(1)\n```")
    assert (text, styles) == ("print(1)", ["0:8:MONOSPACE"])


def test_a_data_uri_is_what_signal_cli_decodes(tmp_path: Path) -> None:
    from memvault.channels.signal import _data_uri

    path = tmp_path / "a,b;c.txt"
    path.write_bytes(b"hello")
    uri = _data_uri(path)
    assert (
        uri
        == "data:text/plain;filename=a%2Cb%3Bc.txt;base64," + base64.b64encode(b"hello").decode()
    )
