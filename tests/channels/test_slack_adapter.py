"""The Slack adapter, driving slack_sdk (Web API and Socket Mode) over real HTTP and a real
WebSocket against a fake Slack on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

from memvault.channels.base import (
    Attachment,
    Button,
    ChannelError,
    ChannelFatalError,
    Inbound,
    InboundHandler,
    MessageRejectedError,
    Outbound,
    RateLimitedError,
)
from memvault.channels.slack import SlackAdapter, plain_text, to_mrkdwn
from memvault.config import SlackSettings
from slack_fake import ALL_SCOPES, APP_TOKEN, BOT_ID, BOT_TOKEN, BOT_USER, FakeSlack
from waiting import WAIT

OWNER = "U0OWNER"
GENERAL = "C0GENERAL"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_user(OWNER, "ada", display_name="Ada")
        fake.add_channel(GENERAL, "general")
        yield fake


def settings_for(fake: FakeSlack, **overrides: Any) -> SlackSettings:
    return SlackSettings(**{"base_url": fake.base_url, **overrides})


def run(
    fake: FakeSlack,
    scenario: Callable[[SlackAdapter], Awaitable[None]],
    *,
    bot_token: str = BOT_TOKEN,
    app_token: str = APP_TOKEN,
    **overrides: Any,
) -> None:
    """Run ``scenario`` with an adapter on ``fake``, closed afterwards."""

    async def main() -> None:
        adapter = SlackAdapter(settings_for(fake, **overrides), bot_token, app_token)
        try:
            await scenario(adapter)
        finally:
            await adapter.close()

    asyncio.run(main())


async def until(check: Callable[[], Any], what: str, task: asyncio.Task[None] | None = None) -> Any:
    """``check()``'s first truthy value; fails at once if ``task`` (the adapter) ended."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while asyncio.get_running_loop().time() < deadline:
        value = check()
        if value:
            return value
        if task is not None and task.done():
            task.result()  # start() failed: its error is the test's failure
            raise AssertionError(f"the adapter stopped before {what}")
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@asynccontextmanager
async def listening(
    fake: FakeSlack, adapter: SlackAdapter, handler: InboundHandler | None = None
) -> AsyncIterator[list[Inbound]]:
    """The adapter receiving (connected to the fake) for the block; what it received."""
    received: list[Inbound] = []

    async def keep(inbound: Inbound) -> None:
        if handler is not None:
            await handler(inbound)
        received.append(inbound)

    opened = fake.sockets_opened
    task = asyncio.create_task(adapter.start(keep))
    await until(lambda: fake.sockets_opened > opened, "the socket", task)
    try:
        yield received
    finally:
        task.cancel()
        await asyncio.wait([task], timeout=WAIT)
        assert task.cancelled(), "start() ended on its own"


async def receive(fake: FakeSlack, adapter: SlackAdapter, count: int) -> list[Inbound]:
    """Connect, read until ``count`` messages arrived and every envelope is acknowledged."""
    async with listening(fake, adapter) as received:
        await until(lambda: len(received) >= count, f"{count} messages")
        await asyncio.to_thread(fake.wait_acknowledged)
    return received


# -- identity and connecting -----------------------------------------------------------------


def test_identify_names_the_bot_and_its_workspace(slack: FakeSlack) -> None:
    async def scenario(adapter: SlackAdapter) -> None:
        assert await adapter.identify() == "@memvault in Fake Team"

    run(slack, scenario)
    assert slack.requests == ["auth.test"]


def test_a_refused_bot_token_is_fatal_and_names_the_variable_not_the_token(
    slack: FakeSlack,
) -> None:
    async def scenario(adapter: SlackAdapter) -> None:
        with pytest.raises(ChannelFatalError) as caught:
            await adapter.identify()
        assert "$MY_SLACK_BOT" in str(caught.value) and "invalid_auth" in str(caught.value)
        assert "xoxb-wrong" not in str(caught.value)

    run(slack, scenario, bot_token="xoxb-wrong", bot_token_env="MY_SLACK_BOT")


@pytest.mark.parametrize(
    ("app_token", "error"),
    [("xapp-1-wrong", "invalid_auth"), (BOT_TOKEN, "not_allowed_token_type")],
)
def test_a_refused_app_token_stops_receiving_with_a_fatal_error(
    slack: FakeSlack, app_token: str, error: str
) -> None:
    async def scenario(adapter: SlackAdapter) -> None:
        async def ignore(inbound: Inbound) -> None:
            pass

        with pytest.raises(ChannelFatalError) as caught:
            await asyncio.wait_for(adapter.start(ignore), WAIT)
        assert "$SLACK_APP_TOKEN" in str(caught.value) and error in str(caught.value)

    run(slack, scenario, app_token=app_token)
    assert slack.requests == ["auth.test", "apps.connections.open"]
    assert slack.sockets_opened == 0


def test_an_unreachable_server_is_a_transient_error() -> None:
    with FakeSlack() as fake:
        settings = settings_for(fake)
    # The server is gone: its port refuses connections now.

    async def main() -> None:
        adapter = SlackAdapter(settings, BOT_TOKEN, APP_TOKEN)
        with pytest.raises(ChannelError) as caught:
            await adapter.identify()
        assert not isinstance(caught.value, ChannelFatalError)

    asyncio.run(main())


def test_a_rate_limited_connection_request_is_waited_out(slack: FakeSlack) -> None:
    slack.fail("apps.connections.open", retry_after=1)
    slack.push_message(slack.dm(OWNER), OWNER, "after the wait")

    async def scenario(adapter: SlackAdapter) -> None:
        (message,) = await receive(slack, adapter, 1)
        assert message.text == "after the wait"

    run(slack, scenario)
    assert slack.requests.count("apps.connections.open") == 2


# -- receiving -------------------------------------------------------------------------------


def test_direct_messages_arrive_with_their_sender_chat_and_thread(slack: FakeSlack) -> None:
    dm = slack.dm(OWNER)
    first = slack.push_message(dm, OWNER, "remember the <https://milk.example|milk> &amp; eggs")
    reply = slack.push_message(dm, OWNER, "and in a thread", thread_ts=first)

    async def scenario(adapter: SlackAdapter) -> None:
        plain, threaded = await receive(slack, adapter, 2)
        assert plain.channel == "slack"
        assert plain.message_id == f"{dm}:{first}"
        assert (plain.chat_id, plain.sender_id, plain.chat_type) == (dm, OWNER, "private")
        assert (plain.sender_name, plain.username) == ("Ada", "ada")
        assert plain.text == "remember the milk (https://milk.example) & eggs"
        assert plain.sent_at.tzinfo is not None and plain.sent_at.utcoffset() == UTC.utcoffset(None)
        assert abs(plain.sent_at.timestamp() - float(first)) < 0.001
        # A direct message outside a thread is answered in the conversation itself.
        assert plain.platform_message_id is None and plain.reply_to is None
        assert threaded.message_id == f"{dm}:{reply}"
        assert (threaded.reply_to, threaded.platform_message_id) == (first, first)

    run(slack, scenario)
    assert slack.requests.count("users.info") == 1  # the name is remembered


def test_mentions_in_channels_are_read_and_everything_else_is_skipped(slack: FakeSlack) -> None:
    slack.add_channel("C0RANDOM", "random")
    dm = slack.dm(OWNER)
    mention = slack.push_mention(GENERAL, OWNER, " /tasks  please", with_message=True)
    slack.push_message(GENERAL, OWNER, "chatter without a mention")
    slack.push_mention("C0RANDOM", OWNER, "not a watched channel")
    slack.push_message(dm, BOT_USER, "the bot's own words", bot_id=BOT_ID)
    slack.push_message(dm, OWNER, "joined", subtype="channel_join")
    slack.push_event(
        {
            "type": "message",
            "subtype": "message_changed",
            "channel": dm,
            "channel_type": "im",
            "ts": "1700000000.000200",
            "message": {"type": "message", "user": OWNER, "text": "edited"},
        }
    )
    threaded = slack.push_mention(GENERAL, OWNER, "in the thread", thread_ts=mention)
    last = slack.push_message(dm, OWNER, "the last one")

    async def scenario(adapter: SlackAdapter) -> None:
        received = await receive(slack, adapter, 4)
        await asyncio.sleep(0.2)  # nothing else trickles in
        texts = [m.text for m in received]
        # The mention came twice (message and app_mention): one id, so the hub keeps one.
        assert texts == ["/tasks please", "/tasks please", "in the thread", "the last one"]
        assert len({m.message_id for m in received}) == 3
        first = received[0]
        assert (first.chat_id, first.chat_type) == (GENERAL, "channel")
        # A mention is answered in a thread under it; one in a thread, in that thread.
        assert first.platform_message_id == mention
        assert received[2].platform_message_id == mention
        assert received[2].message_id == f"{GENERAL}:{threaded}"
        assert received[3].message_id == f"{dm}:{last}"

    run(slack, scenario, channels=[GENERAL])
    assert slack.unacknowledged() == []  # skipped envelopes are acknowledged all the same


def test_an_envelope_is_acknowledged_only_after_the_handler_returned(slack: FakeSlack) -> None:
    slack.push_message(slack.dm(OWNER), OWNER, "hold on")
    release = asyncio.Event()

    async def slow(inbound: Inbound) -> None:
        await release.wait()

    async def scenario(adapter: SlackAdapter) -> None:
        async with listening(slack, adapter, slow):
            await until(lambda: slack.deliveries(), "the delivery")
            await asyncio.sleep(0.3)
            assert slack.acks == []  # the handler has not returned
            release.set()
            await asyncio.to_thread(slack.wait_acknowledged)

    run(slack, scenario)
    assert slack.acks == [slack.deliveries()[0][0]]
    assert slack.unacknowledged() == []


def test_a_failing_handler_leaves_the_envelope_to_be_redelivered(slack: FakeSlack) -> None:
    dm = slack.dm(OWNER)
    slack.push_message(dm, OWNER, "one")
    ts = slack.push_message(dm, OWNER, "two")
    seen: list[str] = []

    async def failing(inbound: Inbound) -> None:
        seen.append(inbound.text)
        if inbound.text == "two":
            raise RuntimeError("the hub crashed")

    async def crash(adapter: SlackAdapter) -> None:
        with pytest.raises(RuntimeError, match="the hub crashed"):
            await asyncio.wait_for(adapter.start(failing), WAIT)

    run(slack, crash)
    assert seen == ["one", "two"]
    assert [p["event"]["text"] for p in slack.unacknowledged()] == ["two"]

    async def restart(adapter: SlackAdapter) -> None:
        (again,) = await receive(slack, adapter, 1)
        assert (again.text, again.message_id) == ("two", f"{dm}:{ts}")

    run(slack, restart)  # a new adapter, a new socket: Slack sends it again
    assert slack.unacknowledged() == []
    assert [attempt for _, attempt in slack.deliveries()] == [0, 0, 1]


def test_the_socket_is_reopened_when_slack_refreshes_or_drops_it(slack: FakeSlack) -> None:
    dm = slack.dm(OWNER)

    async def scenario(adapter: SlackAdapter) -> None:
        async with listening(slack, adapter) as received:
            slack.drop("refresh_requested")
            await until(lambda: slack.sockets_opened == 2, "the refreshed socket")
            slack.push_message(dm, OWNER, "after the refresh")
            await until(lambda: len(received) == 1, "the first message")
            slack.drop()  # closed without a word
            await until(lambda: slack.sockets_opened == 3, "the reopened socket")
            await asyncio.to_thread(slack.wait_connected, 3)
            slack.push_message(dm, OWNER, "after the drop")
            await until(lambda: len(received) == 2, "the second message")
            await asyncio.to_thread(slack.wait_acknowledged)
        assert [m.text for m in received] == ["after the refresh", "after the drop"]

    run(slack, scenario)
    assert slack.requests.count("apps.connections.open") == 3


def test_an_unacknowledged_envelope_comes_again_with_the_same_message_id(
    slack: FakeSlack,
) -> None:
    slack.lose_acks = True  # Slack never hears the acknowledgement
    slack.push_message(slack.dm(OWNER), OWNER, "said once")

    async def scenario(adapter: SlackAdapter) -> None:
        async with listening(slack, adapter) as received:
            await until(lambda: len(received) == 1, "the message")
            slack.redeliver()  # Slack's retry after its timeout
            await until(lambda: len(received) == 2, "the retry")
        first, retry = received
        assert retry.message_id == first.message_id  # what the hub drops a copy by

    run(slack, scenario)
    assert [attempt for _, attempt in slack.deliveries()] == [0, 1]


def test_a_socket_that_stays_down_ends_start_with_a_transient_error(slack: FakeSlack) -> None:
    async def scenario(adapter: SlackAdapter) -> None:
        adapter.reconnect_grace = 1.0

        async def ignore(inbound: Inbound) -> None:
            pass

        task = asyncio.create_task(adapter.start(ignore))
        await asyncio.to_thread(slack.wait_connected)
        slack.fail("apps.connections.open", "internal_error", times=1000)
        slack.drop()
        with pytest.raises(ChannelError) as caught:
            await asyncio.wait_for(task, WAIT)
        assert not isinstance(caught.value, ChannelFatalError)
        assert "stayed down" in str(caught.value)

    run(slack, scenario)


# -- files -----------------------------------------------------------------------------------


def test_shared_files_arrive_as_attachments_and_download_with_the_bot_token(
    slack: FakeSlack,
) -> None:
    dm = slack.dm(OWNER)
    photo = slack.add_file("board.png", b"\x89PNG whiteboard", "image/png", user=OWNER)
    notes = slack.add_file("notes.pdf", b"%PDF-1.7 notes", "application/pdf", user=OWNER)
    slack.push_message(dm, OWNER, "the whiteboard", files=[photo])
    slack.push_message(dm, OWNER, "", files=[notes])
    slack.push_message(dm, OWNER, "", files=[{"id": "F0GONE", "mode": "tombstone"}])
    slack.push_message(dm, OWNER, "the end")

    async def scenario(adapter: SlackAdapter) -> None:
        with_photo, with_notes, last = await receive(slack, adapter, 3)
        assert last.text == "the end"  # a deleted file alone is nothing to read
        assert with_photo.text == "the whiteboard"
        (image,) = with_photo.attachments
        assert (image.kind, image.name, image.mime, image.size) == (
            "photo",
            "board.png",
            "image/png",
            15,
        )
        assert await adapter.download(image) == b"\x89PNG whiteboard"
        (document,) = with_notes.attachments
        assert (document.kind, document.file_id) == ("document", notes["id"])
        assert await adapter.download(document) == b"%PDF-1.7 notes"
        slack.delete_file(notes["id"])
        with pytest.raises(MessageRejectedError, match="file_deleted"):
            await adapter.download(document)
        # The bot token goes to Slack's hosts only, whatever a file's URL says.
        slack.files[photo["id"]]["url_private_download"] = "https://files.example.org/x.png"
        with pytest.raises(MessageRejectedError, match="outside Slack"):
            await adapter.download(image)

    run(slack, scenario)


def test_a_download_without_the_files_scope_says_which_scope_is_missing() -> None:
    with FakeSlack(scopes=ALL_SCOPES - {"files:read"}) as fake:

        async def scenario(adapter: SlackAdapter) -> None:
            with pytest.raises(ChannelFatalError, match="files:read"):
                await adapter.download(Attachment("document", "F0000001", "a.pdf"))

        run(fake, scenario)


# -- sending ---------------------------------------------------------------------------------


def test_replies_go_out_as_mrkdwn_in_the_thread_named(slack: FakeSlack) -> None:
    asked = slack.push_mention(GENERAL, OWNER, "what now?")

    async def scenario(adapter: SlackAdapter) -> None:
        sent = await adapter.send(Outbound(GENERAL, "**Done** & dusted", reply_to=asked))
        assert len(sent.message_ids) == 1
        await adapter.send(Outbound(GENERAL, "no thread", reply_to="not-a-ts"))

    run(slack, scenario)
    threaded, loose = slack.posted(GENERAL)
    assert (threaded["text"], threaded["thread_ts"]) == ("*Done* &amp; dusted", asked)
    assert threaded["ts"] and threaded["blocks"] is None
    assert loose["thread_ts"] is None


def test_a_user_id_is_reached_in_their_direct_messages(slack: FakeSlack) -> None:
    async def scenario(adapter: SlackAdapter) -> None:
        await adapter.send(Outbound(OWNER, "hello owner"))

    run(slack, scenario)
    (message,) = slack.posted(OWNER)
    assert (message["asked"], message["channel"]) == (OWNER, slack.dm(OWNER))


def test_buttons_go_out_as_block_kit_and_presses_arrive_as_actions(slack: FakeSlack) -> None:
    dm = slack.dm(OWNER)
    buttons = (Button("Approve once", "approve:7:once"), Button("Deny", "deny:7"))

    async def scenario(adapter: SlackAdapter) -> None:
        await adapter.send(Outbound(OWNER, "Allow **remember**?", buttons=buttons))
        url = slack.push_action(dm, OWNER, "approve:7:once")
        (press,) = await receive(slack, adapter, 1)
        assert (press.action, press.text, press.action_id) == ("approve:7:once",) * 2 + (url,)
        assert (press.chat_id, press.sender_id, press.sender_name) == (dm, OWNER, "Ada")
        await adapter.answer_action(url, "Approved remember once.")
        await adapter.answer_action("https://elsewhere.example/hook", "never sent")
        # A question too long for a section block: the buttons follow in a message of their own.
        await adapter.send(Outbound(dm, "x" * 3500, buttons=buttons))

    run(slack, scenario)
    question, long_text, choices = slack.posted(dm)
    section, actions = question["blocks"]
    assert section["text"] == {"type": "mrkdwn", "text": "Allow *remember*?"}
    assert question["text"] == "Allow *remember*?"
    assert [(b["text"]["text"], b["value"]) for b in actions["elements"]] == [
        ("Approve once", "approve:7:once"),
        ("Deny", "deny:7"),
    ]
    (answer,) = slack.responses
    assert answer["body"] == {
        "replace_original": True,
        "text": "Allow *remember*?\n\nApproved remember once.",
    }
    assert long_text["blocks"] is None and len(long_text["text"]) == 3500
    assert choices["blocks"][0]["type"] == "actions"


def test_buttons_are_taken_back_once_their_question_is_answered(
    slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    dm = slack.dm(OWNER)
    buttons = (Button("Approve once", "approve:7:once"), Button("Deny", "deny:7"))

    async def scenario(adapter: SlackAdapter) -> None:
        short = await adapter.send(Outbound(OWNER, "Allow **remember**?", buttons=buttons))
        await adapter.retire_buttons(OWNER, short.message_ids, "Allow **remember**?", "Denied.")
        # Too long for a section: only the message of buttons is replaced.
        long = await adapter.send(Outbound(OWNER, "x" * 3500, buttons=buttons))
        await adapter.retire_buttons(OWNER, long.message_ids, "x" * 3500, "Approved once.")
        # A message Slack no longer has: logged, never raised.
        await adapter.retire_buttons(OWNER, ("1.000001",), "gone", "Denied.")

    run(slack, scenario)
    question, long_text, choices = slack.posted(dm)
    first, second = slack.updates
    assert (first["channel"], first["ts"], first["blocks"]) == (dm, question["ts"], [])
    assert first["text"] == "Allow *remember*?\n\nDenied."
    assert (second["ts"], second["text"], second["blocks"]) == (choices["ts"], "Approved once.", [])
    for posted in (question, choices):
        now = slack.message(dm, posted["ts"])
        assert now is not None and "blocks" not in now
    untouched = slack.message(dm, long_text["ts"])
    assert untouched is not None and "edited" not in untouched
    assert any(
        r.getMessage() == "slack buttons not taken back"
        and "message_not_found" in str(vars(r).get("error"))
        for r in caplog.records
    )


def test_media_is_uploaded_into_the_thread(slack: FakeSlack, tmp_path: Path) -> None:
    chart = tmp_path / "chart.png"
    chart.write_bytes(b"\x89PNG chart")
    report = tmp_path / "report.csv"
    report.write_bytes(b"a,b\n1,2\n")
    asked = slack.push_message(slack.dm(OWNER), OWNER, "send me the report")

    async def scenario(adapter: SlackAdapter) -> None:
        sent = await adapter.send(Outbound(OWNER, "Here:", reply_to=asked, media=(chart, report)))
        assert len(sent.message_ids) == 3
        with pytest.raises(MessageRejectedError, match="cannot be read"):
            await adapter.send(Outbound(OWNER, "", media=(tmp_path / "gone.png",)))

    run(slack, scenario)
    dm = slack.dm(OWNER)
    assert [(u["channel"], u["thread_ts"], u["name"], u["data"]) for u in slack.uploads] == [
        (dm, asked, "chart.png", b"\x89PNG chart"),
        (dm, asked, "report.csv", b"a,b\n1,2\n"),
    ]


def test_send_errors_are_classed_for_the_hub(slack: FakeSlack) -> None:
    slack.add_channel("C0OUTSIDE", "outside", member=False)
    slack.fail("chat.postMessage", retry_after=7)
    slack.fail("chat.postMessage", status=503)
    slack.fail("chat.postMessage", "internal_error")
    slack.fail("chat.postMessage", "missing_scope", needed="chat:write")
    slack.fail("chat.postMessage", "account_inactive")

    async def scenario(adapter: SlackAdapter) -> None:
        message = Outbound(GENERAL, "hello")
        with pytest.raises(RateLimitedError) as limited:
            await adapter.send(message)
        assert limited.value.retry_after == 7
        for _ in range(2):  # a proxy's 503 page, then Slack's own internal_error
            with pytest.raises(ChannelError) as failed:
                await adapter.send(message)
            assert not isinstance(failed.value, MessageRejectedError | ChannelFatalError)
        with pytest.raises(ChannelFatalError, match="chat:write"):
            await adapter.send(message)
        with pytest.raises(ChannelFatalError, match=r"\$SLACK_BOT_TOKEN \(account_inactive\)"):
            await adapter.send(message)
        with pytest.raises(MessageRejectedError, match="C0NOPE: channel_not_found"):
            await adapter.send(Outbound("C0NOPE", "hello"))
        with pytest.raises(MessageRejectedError, match="not_in_channel"):
            await adapter.send(Outbound("C0OUTSIDE", "hello"))
        with pytest.raises(MessageRejectedError, match="msg_too_long"):
            await adapter.send(Outbound(GENERAL, "y" * 40_001))
        assert (await adapter.send(message)).message_ids  # the channel still works

    run(slack, scenario)


# -- Slack's text ----------------------------------------------------------------------------


def test_markdown_is_rendered_as_mrkdwn() -> None:
    markdown = dedent(
        """\
        # Plan

        **Bold**, *italic*, ~~gone~~, `a < b` and [the docs](https://example.com/a?b=1&c=2).
        2*3*4 stays arithmetic; <script> & co are text.

        - one
        - two

        > quoted

        ```python
        if a > b:
            pass
        ```
        """
    )
    assert to_mrkdwn(markdown) == dedent(
        """\
        *Plan*

        *Bold*, _italic_, ~gone~, `a &lt; b` and <https://example.com/a?b=1&amp;c=2|the docs>.
        2*3*4 stays arithmetic; &lt;script&gt; &amp; co are text.

        • one
        • two

        > quoted

        ```
        if a &gt; b:
            pass
        ```"""
    )
    assert to_mrkdwn("<https://example.com>") == "<https://example.com>"
    assert to_mrkdwn("[local](notes/a.md)") == "local (notes/a.md)"


def test_slack_text_is_read_as_plain_text() -> None:
    text = (
        "<@U0BOT> ask <@U0EVE|eve> in <#C0GENERAL|general> about <https://a.example|this>, "
        "<mailto:ada@example.com|ada@example.com> and <https://b.example> &lt;3 &amp; <!here>"
    )
    assert plain_text(text, "U0BOT") == (
        "ask @eve in #general about this (https://a.example), ada@example.com and "
        "https://b.example <3 & @here"
    )
    assert plain_text("<!subteam^S0TEAM|@ops> <!date^1700000000^{date}|Nov 14>") == "@ops Nov 14"
