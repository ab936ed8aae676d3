"""The Discord adapter, driving discord.py over real HTTP and a real Gateway WebSocket
against a fake Discord."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from channel_support import MemoryState
from discord_fake import BOT_ID, FAKE_TOKEN, MESSAGES, FakeDiscord
from memvault.channels.base import (
    Attachment,
    ChannelError,
    ChannelFatalError,
    Inbound,
    MessageRejectedError,
    Outbound,
    RateLimitedError,
)
from memvault.channels.discord import CURSORS, DiscordAdapter
from memvault.config import DiscordSettings
from waiting import WAIT, wait_for

OWNER = 310_000_000_000_000_001
FRIEND = 310_000_000_000_000_002
GUILD = 320_000_000_000_000_001
OTHER_GUILD = 320_000_000_000_000_002
ROOM = 330_000_000_000_000_001  # a channel of GUILD
LOBBY = 330_000_000_000_000_002  # another channel of GUILD
ELSEWHERE = 330_000_000_000_000_003  # a channel of OTHER_GUILD
SEND = "POST " + MESSAGES


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    with FakeDiscord(
        users={OWNER: "ada", FRIEND: "fred"},
        guilds={GUILD: [ROOM, LOBBY], OTHER_GUILD: [ELSEWHERE]},
    ) as server:
        yield server


def settings_for(fake: FakeDiscord, **overrides: Any) -> DiscordSettings:
    values: dict[str, Any] = {"api_base": fake.base_url, "owner": [str(OWNER)]}
    return DiscordSettings(**{**values, **overrides})


def run(
    fake: FakeDiscord,
    scenario: Callable[[DiscordAdapter], Awaitable[None]],
    *,
    token: str = FAKE_TOKEN,
    state: MemoryState | None = None,
    **overrides: Any,
) -> None:
    """Run ``scenario`` with an adapter on ``fake``, closed afterwards."""

    async def main() -> None:
        adapter = DiscordAdapter(
            settings_for(fake, **overrides), token, state=state or MemoryState()
        )
        try:
            await asyncio.wait_for(scenario(adapter), WAIT * 2)
        finally:
            await adapter.close()

    asyncio.run(main())


class Receiver:
    """``adapter.start`` in a task, collecting what it hands over."""

    def __init__(self, adapter: DiscordAdapter, fail_on: str | None = None) -> None:
        self.adapter = adapter
        self.received: list[Inbound] = []
        self.fail_on = fail_on
        self.task = asyncio.create_task(adapter.start(self._handle))

    async def _handle(self, inbound: Inbound) -> None:
        if inbound.text == self.fail_on:
            raise RuntimeError("the hub crashed")
        self.received.append(inbound)

    async def wait(self, count: int) -> list[Inbound]:
        """The first ``count`` messages (fails after ``WAIT`` seconds without them)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT
        while len(self.received) < count:
            if self.task.done():
                self.task.result()  # start() failed: its error is the test's failure
                raise AssertionError("start() returned")
            assert loop.time() < deadline, f"received {len(self.received)} of {count} messages"
            await asyncio.sleep(0.02)
        return self.received[:count]

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.wait([self.task], timeout=WAIT)
        assert self.task.cancelled() or self.task.exception() is None


async def listening(fake: FakeDiscord) -> None:
    await asyncio.to_thread(fake.wait_listening)


# -- identity ----------------------------------------------------------------------------


def test_identify_names_the_bot_and_the_max_length_is_the_setting(fake: FakeDiscord) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        assert await adapter.identify() == "@memvault_test_bot"
        assert adapter.max_message_length == 1500

    run(fake, scenario, max_message_length=1500)
    assert fake.requests[:2] == ["GET /users/@me", "GET /oauth2/applications/@me"]


def test_a_refused_token_is_fatal_and_names_the_variable_not_the_token(
    fake: FakeDiscord,
) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        with pytest.raises(ChannelFatalError) as caught:
            await adapter.identify()
        assert "$MY_DISCORD_TOKEN" in str(caught.value) and "401" in str(caught.value)
        assert "wrong-token" not in str(caught.value)
        assert caught.value.__suppress_context__  # nothing chained could quote the token

    run(fake, scenario, token="wrong-token", token_env="MY_DISCORD_TOKEN")
    assert fake.requests == ["GET /users/@me"]


def test_an_unreachable_server_is_a_transient_error() -> None:
    with FakeDiscord() as fake:
        settings = settings_for(fake)
    # The server is gone: its port refuses connections now.

    async def main() -> None:
        adapter = DiscordAdapter(settings, FAKE_TOKEN, state=MemoryState())
        with pytest.raises(ChannelError) as caught:
            await adapter.identify()
        assert not isinstance(caught.value, ChannelFatalError)
        await adapter.close()

    asyncio.run(main())


def test_the_gateway_is_the_one_rest_names_with_the_intents_memvault_needs(
    fake: FakeDiscord,
) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        await listening(fake)
        await receiver.stop()

    run(fake, scenario)
    assert "GET /gateway/bot" in fake.requests
    (connection,) = fake.connections
    # Compressed as the real Gateway offers it: zstd (zstandard is installed), else zlib.
    assert connection == {"v": "10", "encoding": "json", "compress": "zstd-stream"}
    (identify,) = fake.identifies
    guilds, guild_messages, direct_messages, message_content = 1, 1 << 9, 1 << 12, 1 << 15
    assert identify["intents"] == guilds | guild_messages | direct_messages | message_content


def test_a_bot_without_the_message_content_intent_is_fatal() -> None:
    with FakeDiscord(message_content=False) as fake:

        async def scenario(adapter: DiscordAdapter) -> None:
            async def ignore(inbound: Inbound) -> None:
                pass

            with pytest.raises(ChannelFatalError, match="Message Content intent"):
                await asyncio.wait_for(adapter.start(ignore), WAIT)

        run(fake, scenario)


# -- receiving ---------------------------------------------------------------------------


def test_dms_arrive_with_their_sender_chat_and_context(fake: FakeDiscord) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        await listening(fake)
        first = fake.push_dm(OWNER, "remember the milk")
        reply = fake.push_dm(OWNER, "this one", reply_to=first)
        plain, answer = await receiver.wait(2)
        await receiver.stop()
        dm = fake.dm_channel(OWNER)
        assert plain.channel == "discord"
        assert (plain.message_id, plain.platform_message_id) == (str(first), str(first))
        assert (plain.chat_id, plain.sender_id) == (str(dm), str(OWNER))
        assert (plain.sender_name, plain.username, plain.chat_type) == ("Ada", "ada", "private")
        assert plain.text == "remember the milk" and plain.reply_to is None
        assert plain.sent_at.utcoffset() == UTC.utcoffset(None)
        assert (answer.message_id, answer.reply_to) == (str(reply), str(first))

    run(fake, scenario)


def test_a_forwarded_message_is_marked_and_reads_as_what_it_forwards(fake: FakeDiscord) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        await listening(fake)
        fake.push_dm(OWNER, "", forwarded="/remember someone else's words")
        (forward,) = await receiver.wait(1)
        await receiver.stop()
        assert forward.forwarded and forward.reply_to is None
        assert forward.text == "/remember someone else's words"

    run(fake, scenario)


def test_attachments_arrive_and_download_from_their_url(fake: FakeDiscord) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        await listening(fake)
        fake.push_dm(
            OWNER,
            "the receipt",
            attachments=[
                ("receipt.png", b"\x89PNG receipt", "image/png"),
                ("notes.pdf", b"%PDF-1.7 notes", "application/pdf"),
            ],
        )
        fake.push_dm(
            OWNER, "", attachments=[("voice-message.ogg", b"OggS", "audio/ogg")], voice=True
        )
        files, voice = await receiver.wait(2)
        await receiver.stop()
        photo, document = files.attachments
        assert (photo.kind, photo.name, photo.mime, photo.size) == (
            "photo",
            "receipt.png",
            "image/png",
            12,
        )
        assert (document.kind, document.name) == ("document", "notes.pdf")
        assert await adapter.download(photo) == b"\x89PNG receipt"
        assert await adapter.download(document) == b"%PDF-1.7 notes"
        (note,) = voice.attachments
        assert (voice.text, note.kind) == ("", "voice")
        gone = Attachment("document", photo.file_id.replace("receipt.png", "gone.png"))
        with pytest.raises(MessageRejectedError):
            await adapter.download(gone)
        with pytest.raises(MessageRejectedError):
            await adapter.download(Attachment("document", "file:///etc/passwd"))

    run(fake, scenario)


def test_in_guilds_only_mentions_in_watched_guilds_arrive(fake: FakeDiscord) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        await listening(fake)
        fake.push_guild(ROOM, FRIEND, "talking among ourselves")
        fake.push_guild(ELSEWHERE, FRIEND, "another guild", mention=True)
        fake.push_guild(ROOM, 777, "a bot's words", mention=True, bot=True)
        mentioned = fake.push_guild(ROOM, FRIEND, "what is on the list?", mention=True)
        fake.push_dm(OWNER, "the end")
        room, last = await receiver.wait(2)
        await receiver.stop()
        assert (room.message_id, room.chat_id, room.sender_id) == (
            str(mentioned),
            str(ROOM),
            str(FRIEND),
        )
        assert (room.text, room.chat_type) == ("what is on the list?", "group")
        assert last.text == "the end"

    run(fake, scenario, guilds=[str(GUILD)])


def test_channels_narrow_the_watched_places(fake: FakeDiscord) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        await listening(fake)
        fake.push_guild(ROOM, FRIEND, "not this channel", mention=True)
        fake.push_guild(ELSEWHERE, FRIEND, "this channel", mention=True)
        (only,) = await receiver.wait(1)
        await asyncio.sleep(0.3)
        await receiver.stop()
        assert (only.text, only.chat_id) == ("this channel", str(ELSEWHERE))
        assert len(receiver.received) == 1

    run(fake, scenario, guilds=[str(GUILD)], channels=[str(ELSEWHERE)])


def test_the_bots_own_messages_are_skipped_but_move_the_cursor(fake: FakeDiscord) -> None:
    state = MemoryState()

    async def scenario(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        await listening(fake)
        asked = fake.push_dm(OWNER, "ping")
        (ping,) = await receiver.wait(1)
        sent = await adapter.send(Outbound(ping.chat_id, "pong", reply_to=ping.message_id))
        (own,) = sent.message_ids
        fake.push_dm(OWNER, "again")
        await receiver.wait(2)
        await receiver.stop()
        assert [m.text for m in receiver.received] == ["ping", "again"]
        assert int(own) > asked

    run(fake, scenario, state=state)
    cursors = json.loads(state.values[CURSORS])
    dm = str(fake.dm_channel(OWNER))
    assert cursors[dm]["guild"] is None
    assert int(cursors[dm]["after"]) == int(fake.history[int(dm)][-1]["id"])


def test_what_arrived_while_offline_is_fetched_once_on_connect(fake: FakeDiscord) -> None:
    state = MemoryState()

    async def first_run(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        await listening(fake)
        fake.push_dm(OWNER, "before the restart")
        chatter = fake.push_guild(ROOM, FRIEND, "chatter in the room")
        await receiver.wait(1)

        def room_cursor() -> bool:  # the chatter moves the room's cursor too
            saved = json.loads(state.values.get(CURSORS, "{}"))
            return saved.get(str(ROOM), {}).get("after") == str(chatter)

        await asyncio.to_thread(wait_for, room_cursor, "the room's cursor")
        await receiver.stop()

    run(fake, first_run, state=state, guilds=[str(GUILD)])
    # Offline: Discord keeps these in the channels' history only.
    fake.push_dm(OWNER, "while you were away")
    fake.push_dm(OWNER, "and this too")
    fake.push_guild(ROOM, FRIEND, "not for the bot")
    asked = fake.push_guild(ROOM, FRIEND, "for the bot", mention=True)

    async def second_run(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        missed = await receiver.wait(3)
        fake.push_dm(OWNER, "live again")
        await receiver.wait(4)
        await asyncio.sleep(0.3)
        await receiver.stop()
        # Channel by channel, the one read longest ago first; in order within each.
        assert [m.text for m in missed] == ["while you were away", "and this too", "for the bot"]
        assert [m.text for m in receiver.received][3:] == ["live again"]
        assert str(asked) in {m.message_id for m in missed}

    run(fake, second_run, state=state, guilds=[str(GUILD)])
    reads = [r for r in fake.requests if r == "GET " + MESSAGES]
    assert len(reads) == 2  # one per known channel, the DM and the room


def test_a_first_start_does_not_replay_old_history(fake: FakeDiscord) -> None:
    fake.push_dm(OWNER, "ancient history")

    async def scenario(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        await listening(fake)
        fake.push_dm(OWNER, "new")
        (only,) = await receiver.wait(1)
        await receiver.stop()
        assert only.text == "new"

    run(fake, scenario)
    assert "GET " + MESSAGES not in fake.requests


def test_the_cursor_moves_only_after_the_handler_returned(fake: FakeDiscord) -> None:
    state = MemoryState()

    async def crash(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter, fail_on="two")
        await listening(fake)
        fake.push_dm(OWNER, "one")
        fake.push_dm(OWNER, "two")
        with pytest.raises(RuntimeError, match="the hub crashed"):
            await asyncio.wait_for(receiver.task, WAIT)
        assert [m.text for m in receiver.received] == ["one"]

    run(fake, crash, state=state)
    dm = fake.dm_channel(OWNER)
    one, two = (int(m["id"]) for m in fake.history[dm])
    assert json.loads(state.values[CURSORS])[str(dm)]["after"] == str(one)

    async def restart(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        (again,) = await receiver.wait(1)
        await receiver.stop()
        assert (again.text, again.message_id) == ("two", str(two))

    run(fake, restart, state=state)  # a new adapter, resuming from the saved cursor
    assert json.loads(state.values[CURSORS])[str(dm)]["after"] == str(two)


def test_a_dropped_connection_resumes_and_loses_nothing(fake: FakeDiscord) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        await listening(fake)
        fake.push_dm(OWNER, "before the drop")
        await receiver.wait(1)
        assert fake.drop_connections() == 1
        fake.push_dm(OWNER, "during the drop")  # kept for the session, replayed on RESUME
        await receiver.wait(2)
        fake.push_dm(OWNER, "after the drop")
        await receiver.wait(3)
        await asyncio.sleep(0.3)
        await receiver.stop()
        assert [m.text for m in receiver.received] == [
            "before the drop",
            "during the drop",
            "after the drop",
        ]

    run(fake, scenario)
    assert len(fake.identifies) == 1 and len(fake.resumes) == 1


def test_a_session_discord_forgot_is_identified_anew_and_caught_up(fake: FakeDiscord) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        receiver = Receiver(adapter)
        await listening(fake)
        fake.push_dm(OWNER, "before the drop")
        await receiver.wait(1)
        assert fake.drop_connections(forget=True) == 1
        fake.push_dm(OWNER, "during the drop")  # no session keeps it: only the channel does
        await receiver.wait(2)
        await asyncio.sleep(0.3)
        await receiver.stop()
        assert [m.text for m in receiver.received] == ["before the drop", "during the drop"]

    run(fake, scenario)
    assert len(fake.identifies) == 2  # the RESUME was refused, a new session began
    assert len(fake.connections) >= 3 and "GET " + MESSAGES in fake.requests


def test_receiving_fails_transiently_on_server_errors(fake: FakeDiscord) -> None:
    fake.fail("GET /gateway/bot", 503)

    async def ignore(inbound: Inbound) -> None:
        pass

    async def scenario(adapter: DiscordAdapter) -> None:
        with pytest.raises(ChannelError) as caught:
            await asyncio.wait_for(adapter.start(ignore), WAIT)
        assert not isinstance(caught.value, ChannelFatalError | MessageRejectedError)
        assert "503" in str(caught.value)
        # The next start works (the hub's supervisor starts it again).
        receiver = Receiver(adapter)
        await listening(fake)
        fake.push_dm(OWNER, "after the outage")
        (message,) = await receiver.wait(1)
        await receiver.stop()
        assert message.text == "after the outage"

    run(fake, scenario)


def test_a_catch_up_that_fails_is_transient_and_a_gone_channel_is_forgotten(
    fake: FakeDiscord,
) -> None:
    gone = 999_999_999_999
    dm = fake.dm_channel(OWNER)
    state = MemoryState()
    state.values[CURSORS] = json.dumps(
        {str(dm): {"after": "1", "guild": None}, str(gone): {"after": "1", "guild": str(GUILD)}}
    )
    fake.fail("GET " + MESSAGES, 503)

    async def ignore(inbound: Inbound) -> None:
        pass

    async def scenario(adapter: DiscordAdapter) -> None:
        with pytest.raises(ChannelError) as caught:
            await asyncio.wait_for(adapter.start(ignore), WAIT)
        assert not isinstance(caught.value, ChannelFatalError | MessageRejectedError)
        receiver = Receiver(adapter)
        await listening(fake)
        fake.push_dm(OWNER, "hello")
        await receiver.wait(1)
        await receiver.stop()

    run(fake, scenario, state=state)
    assert set(json.loads(state.values[CURSORS])) == {str(dm)}


# -- sending -----------------------------------------------------------------------------


def test_replies_go_to_the_channel_with_a_reference_and_no_pings(fake: FakeDiscord) -> None:
    asked = fake.push_guild(ROOM, FRIEND, "question", mention=True)

    async def scenario(adapter: DiscordAdapter) -> None:
        text = "**Done**, @everyone <@310000000000000002>"
        sent = await adapter.send(Outbound(str(ROOM), text, reply_to=str(asked)))
        assert len(sent.message_ids) == 1

    run(fake, scenario)
    (attempt,) = fake.sent
    assert (attempt["channel_id"], attempt["content"]) == (
        ROOM,
        "**Done**, @everyone <@310000000000000002>",
    )
    assert attempt["reference"]["message_id"] == asked
    assert attempt["reference"]["fail_if_not_exists"] is False
    assert attempt["allowed_mentions"] == {"parse": [], "replied_user": True}
    (posted,) = [m for m in fake.history[ROOM] if m["author"]["id"] == str(BOT_ID)]
    assert posted["type"] == 19 and posted["referenced_message"]["id"] == str(asked)


def test_a_user_id_is_reached_in_their_dm(fake: FakeDiscord) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        await adapter.send(Outbound(str(OWNER), "to the owner"))  # known: opened at once
        await adapter.send(Outbound(str(FRIEND), "to a friend"))  # unknown: tried as a channel
        with pytest.raises(MessageRejectedError, match=r"Unknown Channel|Invalid Recipient"):
            await adapter.send(Outbound("123456789", "to nobody"))
        with pytest.raises(MessageRejectedError, match="not a Discord"):
            await adapter.send(Outbound("@ada", "by name"))

    run(fake, scenario)
    assert fake.delivered(fake.dm_channel(OWNER)) == ["to the owner"]
    assert fake.delivered(fake.dm_channel(FRIEND)) == ["to a friend"]
    assert fake.requests.count("POST /users/@me/channels") == 3


def test_media_is_attached_ten_files_a_message(fake: FakeDiscord, tmp_path: Path) -> None:
    paths = []
    for number in range(12):
        path = tmp_path / f"chart-{number}.png"
        path.write_bytes(b"\x89PNG %d" % number)
        paths.append(path)

    async def scenario(adapter: DiscordAdapter) -> None:
        sent = await adapter.send(Outbound(str(ROOM), "the charts", media=tuple(paths)))
        assert len(sent.message_ids) == 2
        with pytest.raises(MessageRejectedError, match="cannot be read"):
            await adapter.send(Outbound(str(ROOM), "", media=(tmp_path / "gone.png",)))
        assert (await adapter.send(Outbound(str(ROOM), "  "))).message_ids == ()

    run(fake, scenario)
    first, second = fake.sent
    assert first["content"] == "the charts" and len(first["files"]) == 10
    assert second["content"] == "" and sorted(second["files"]) == [
        "chart-10.png",
        "chart-11.png",
    ]
    assert first["files"]["chart-0.png"] == b"\x89PNG 0"


def test_send_errors_are_classed_for_the_hub(fake: FakeDiscord) -> None:
    fake.fail(SEND, 429, retry_after=60)
    fake.fail(SEND, 503)
    fake.fail(SEND, 403, message="Missing Permissions", code=50013)
    fake.fail(SEND, 401)

    async def scenario(adapter: DiscordAdapter) -> None:
        message = Outbound(str(ROOM), "hello")
        with pytest.raises(RateLimitedError) as limited:
            await adapter.send(message)
        assert limited.value.retry_after == 60
        with pytest.raises(ChannelError) as failed:
            await adapter.send(message)
        assert not isinstance(failed.value, MessageRejectedError | ChannelFatalError)
        with pytest.raises(MessageRejectedError, match="Missing Permissions"):
            await adapter.send(message)
        with pytest.raises(ChannelFatalError, match="DISCORD_BOT_TOKEN"):
            await adapter.send(message)
        with pytest.raises(MessageRejectedError, match=r"2000 or fewer|Invalid Form Body"):
            await adapter.send(Outbound(str(ROOM), "x" * 2001))
        fake.refuse_dms(FRIEND)
        with pytest.raises(MessageRejectedError, match="Cannot send messages to this user"):
            await adapter.send(Outbound(str(FRIEND), "hello"))
        assert (await adapter.send(message)).message_ids  # the channel still works

    run(fake, scenario)
    assert fake.delivered(ROOM) == ["hello"]


def test_a_short_rate_limit_is_waited_out_by_discord_py(fake: FakeDiscord) -> None:
    fake.fail(SEND, 429, retry_after=0.3)

    async def scenario(adapter: DiscordAdapter) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        sent = await adapter.send(Outbound(str(ROOM), "patiently"))
        assert sent.message_ids and loop.time() - started >= 0.3

    run(fake, scenario)
    assert fake.failures_served == [(SEND, 429)]
    assert fake.delivered(ROOM) == ["patiently"]


def test_typing_shows_and_never_fails(fake: FakeDiscord) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        await adapter.typing(str(ROOM))
        await adapter.typing("123456789")  # unknown channel: logged only
        await adapter.typing("not-an-id")

    run(fake, scenario)
    assert fake.typing == [ROOM]


def test_close_can_be_called_twice_and_the_adapter_reopens(fake: FakeDiscord) -> None:
    async def scenario(adapter: DiscordAdapter) -> None:
        await adapter.identify()
        await adapter.close()
        await adapter.close()
        assert await adapter.identify() == "@memvault_test_bot"

    run(fake, scenario)
    assert fake.requests.count("GET /users/@me") == 2
