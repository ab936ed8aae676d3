"""The OpenClaw bridge against the ``openclaw`` command: a stand-in that answers ``message
read`` from recorded platform messages and records ``message send``, and the real
OpenClaw 2026.9.6 for the rest (its version, its checks of a send's arguments, its
channel list and status, its failures). Then the three tools of the first design,
through the registry and its approval policy."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from http import HTTPStatus
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
    NotSupportedError,
    Outbound,
)
from memvault.channels.openclaw_bridge import OpenClawBridge
from memvault.channels.openclaw_messages import read_messages
from memvault.channels.tools import full_registry
from memvault.config import OpenClawBridgeSettings, Settings
from memvault.runtime import Runtime
from memvault.tools import ToolContext
from memvault.tools.policy import AllowAll, ApprovalRequest, Policy, Tier
from memvault.tools.registry import ToolResult
from openclaw_bridge_fake import (
    BOT_ID,
    CLI_TIMEOUT,
    NO_CREDENTIALS,
    UNREACHABLE,
    FakeOpenClaw,
    real_home,
)
from openclaw_support import free_port
from support import HashEmbedder, LoopbackHandler, LoopbackServer, MovableClock
from waiting import WAIT

pytestmark = pytest.mark.slow  # the real OpenClaw CLI: seconds a call

ROOM = ("discord", "channel:100")
OWNER = "discord:user:42"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fresh OpenClaw home for the module (``openclaw setup`` takes seconds)."""
    return real_home(tmp_path_factory.mktemp("openclaw"))


@pytest.fixture
def fake(tmp_path: Path, home: Path) -> FakeOpenClaw:
    return FakeOpenClaw(tmp_path / "openclaw", home)


def settings_for(fake: FakeOpenClaw, **overrides: Any) -> OpenClawBridgeSettings:
    values: dict[str, Any] = {
        "enabled": True,
        "command": str(fake.command),
        "listeners": [{"channel": ROOM[0], "target": ROOM[1]}],
        "listen": "poll",
        "poll_seconds": 1,
        "timeout": CLI_TIMEOUT,
    }
    return OpenClawBridgeSettings(**{**values, **overrides})


def run(
    fake: FakeOpenClaw,
    scenario: Callable[[OpenClawBridge], Awaitable[None]],
    state: MemoryState | None = None,
    **overrides: Any,
) -> None:
    bridge = OpenClawBridge(settings_for(fake, **overrides), state=state or MemoryState())
    asyncio.run(scenario(bridge))


async def receive(bridge: OpenClawBridge, count: int, *, seconds: float = WAIT) -> list[Inbound]:
    """What the bridge hands over until ``count`` arrived, or while it polls for ``seconds``
    (a short window where nothing should arrive)."""
    got: list[Inbound] = []

    async def handler(message: Inbound) -> None:
        got.append(message)

    task = asyncio.create_task(bridge.start(handler))
    deadline = asyncio.get_running_loop().time() + seconds
    while len(got) < count and asyncio.get_running_loop().time() < deadline and not task.done():
        await asyncio.sleep(0.05)
    if task.done():
        task.result()  # raise what stopped it
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return got


# -- receiving -------------------------------------------------------------------------------


def test_a_message_is_handed_over_and_only_then_its_listener_moves_on(
    fake: FakeOpenClaw,
) -> None:
    first = fake.say(*ROOM, "When is the cert renewed?", author="42", name="Ada")
    state = MemoryState()

    async def scenario(bridge: OpenClawBridge) -> None:
        moves_when_handled: list[list[tuple[str, str]]] = []

        async def handler(message: Inbound) -> None:
            moves_when_handled.append(list(state.puts))
            got.append(message)

        got: list[Inbound] = []
        task = asyncio.create_task(bridge.start(handler))
        deadline = asyncio.get_running_loop().time() + WAIT
        while not got and not task.done():
            assert asyncio.get_running_loop().time() < deadline, "nothing was handed over"
            await asyncio.sleep(0.05)
        if task.done():
            task.result()  # raise what stopped it
        task.cancel()
        (message,) = got
        assert message == Inbound(
            channel="openclaw",
            message_id=f"discord:channel:100:{first}",
            chat_id="discord:channel:100",
            sender_id=OWNER,
            sender_name="Ada",
            username="ada",
            chat_type="group",
            text="When is the cert renewed?",
            sent_at=message.sent_at,
            platform_message_id=first,
        )
        # Said moments ago: a slow read takes seconds, a misread zone hours.
        assert abs((datetime.now(UTC) - message.sent_at).total_seconds()) < 600
        assert moves_when_handled == [[]]  # not moved before the handler returned
        assert state.values == {"last_seen.discord:channel:100": first}

    run(fake, scenario, state)
    read = ["message", "read", "--channel", "discord", "--target", "channel:100", "--limit", "50"]
    assert fake.reads()[0][:8] == read


def test_a_restart_reads_on_from_the_last_message_and_a_failed_handler_reads_it_again(
    fake: FakeOpenClaw,
) -> None:
    state = MemoryState()
    first = fake.say(*ROOM, "one")

    async def handled_once(bridge: OpenClawBridge) -> None:
        assert [m.text for m in await receive(bridge, 1)] == ["one"]

    run(fake, handled_once, state)
    second = fake.say(*ROOM, "two")

    async def failing(bridge: OpenClawBridge) -> None:
        async def handler(message: Inbound) -> None:
            raise RuntimeError("the hub could not store it")

        with pytest.raises(RuntimeError):
            await bridge.start(handler)

    run(fake, failing, state)  # a new bridge: as after a restart
    assert state.values["last_seen.discord:channel:100"] == first
    assert fake.reads()[-1][-2] == f"--after={first}"

    async def again(bridge: OpenClawBridge) -> None:
        got = await receive(bridge, 1)
        assert [(m.text, m.platform_message_id) for m in got] == [("two", second)]

    run(fake, again, state)
    assert state.values["last_seen.discord:channel:100"] == second


def test_the_bots_own_stale_and_empty_messages_are_skipped(fake: FakeOpenClaw) -> None:
    fake.say(*ROOM, "from two hours ago", minutes_ago=120)
    fake.say(*ROOM, "another bot", author="77", name="Helper", bot=True)
    fake.say(*ROOM, "the bot itself, unmarked", author="555", name="Us")
    fake.say(*ROOM, "")
    fresh = fake.say(*ROOM, "fresh", author="42")

    async def scenario(bridge: OpenClawBridge) -> None:
        got = await receive(bridge, 1)
        assert [m.text for m in got] == ["fresh"]
        sent = await bridge.send(Outbound("discord:channel:100", "my answer"))
        # The read brings the bot's answer back: it is not handed over as a message.
        assert await receive(bridge, 1, seconds=1.5) == []
        assert sent.message_ids == (fake.sent[-1]["id"],)

    state = MemoryState()
    run(fake, scenario, state, self_ids=["discord:user:555"], max_age_minutes=60)
    assert state.values["last_seen.discord:channel:100"] == fake.sent[-1]["id"] > fresh


def test_each_platforms_shape_is_read_oldest_first() -> None:
    """Messages as each platform's read returns them: Discord's API objects (newest first),
    Slack's (``ts``, ``bot_id``), Matrix's summaries (``isSelf``), Telegram's history."""
    discord = {
        "payload": {
            "ok": True,
            "messages": [
                {
                    "id": "1200000000000000011",
                    "content": "second",
                    "author": {"id": "42", "username": "ada", "global_name": "Ada"},
                    "timestamp": "2026-11-24T10:00:05.000000+00:00",
                    "timestampMs": 1795514405000,
                    "message_reference": {"message_id": "1200000000000000010"},
                    "attachments": [
                        {
                            "id": "9",
                            "filename": "plan.pdf",
                            "content_type": "application/pdf",
                            "size": 12,
                            "url": "https://cdn.discordapp.com/attachments/1/9/plan.pdf",
                        }
                    ],
                },
                {
                    "id": "1200000000000000010",
                    "content": "first",
                    "author": {"id": "42", "username": "ada"},
                    "timestamp": "2026-11-24T10:00:05.000000+00:00",
                },
            ],
        }
    }
    first, second = read_messages(discord)
    assert (first.text, second.text) == ("first", "second")  # same moment: the ids decide
    assert second.reply_to == first.id and second.sender_name == "Ada"
    assert second.attachments == (
        Attachment(
            "document",
            "https://cdn.discordapp.com/attachments/1/9/plan.pdf",
            "plan.pdf",
            "application/pdf",
            12,
        ),
    )
    assert second.sent_at == datetime(2026, 11, 24, 10, 0, 5, tzinfo=UTC)

    slack = {
        "messages": [
            {"type": "message", "ts": "1795514500.000200", "bot_id": "B1", "text": "beep"},
            {
                "type": "message",
                "ts": "1795514400.000100",
                "user": "U42",
                "text": "hello",
                "thread_ts": "1795514300.000000",
                "user_profile": {"display_name": "Ada L."},
                "files": [{"id": "F1", "name": "a.png", "mimetype": "image/png", "size": 3}],
            },
        ],
        "hasMore": False,
    }
    hello, beep = read_messages({"payload": slack})
    assert (hello.id, hello.sender, hello.sender_name, hello.bot) == (
        "1795514400.000100",
        "U42",
        "Ada L.",
        False,
    )
    assert hello.reply_to == "1795514300.000000" and beep.bot
    assert hello.attachments == (Attachment("photo", "F1", "a.png", "image/png", 3),)
    assert hello.to_dict("slack")["sender_id"] == "slack:user:U42"

    matrix = {
        "messages": [
            {"eventId": "$b", "sender": "@bot:x.org", "isSelf": True, "body": "mine"},
            {
                "eventId": "$a",
                "sender": "@ada:x.org",
                "body": "hi",
                "timestamp": 1795514400000,
                "relatesTo": {"eventId": "$z"},
            },
        ]
    }
    mine, hi = sorted(read_messages({"payload": matrix}), key=lambda m: m.id, reverse=True)
    assert mine.own and not hi.own and hi.reply_to == "$z"
    assert hi.to_dict("matrix")["sender_id"] == "matrix:@ada:x.org"
    assert hi.sent_at == datetime.fromtimestamp(1795514400, UTC)

    telegram = {
        "messages": [
            {
                "messageId": 7,
                "sender": "Ada Lovelace",
                "senderId": "4242",
                "senderUsername": "ada",
                "timestamp": 1795514400,
                "body": "from telegram",
                "mediaType": "photo",
                "mediaRef": "AgAD",
                "replyToId": 6,
            }
        ]
    }
    (message,) = read_messages({"payload": telegram})
    assert (message.id, message.sender, message.sender_name, message.username) == (
        "7",
        "4242",
        "Ada Lovelace",
        "ada",
    )
    assert message.reply_to == "6" and message.attachments == (Attachment("photo", "AgAD"),)
    assert read_messages({"payload": {"ok": True}}) == []


# -- sending ---------------------------------------------------------------------------------


def test_a_send_is_openclaw_message_send_to_the_chats_channel_and_target(
    fake: FakeOpenClaw, tmp_path: Path
) -> None:
    photo = tmp_path / "photo.png"
    photo.write_bytes(b"png")

    async def scenario(bridge: OpenClawBridge) -> None:
        sent = await bridge.send(
            Outbound("discord:channel:100", "--not an option--", reply_to="17", media=(photo,))
        )
        assert sent.message_ids == (fake.sent[0]["id"],)
        await bridge.send(Outbound("telegram:123456789", "plain"))
        for bad in ("no-target", "Discord Room:1", "discord:"):
            with pytest.raises(MessageRejectedError, match="<channel>:<target>"):
                await bridge.send(Outbound(bad, "hi"))
        with pytest.raises(MessageRejectedError, match="nothing to send"):
            await bridge.send(Outbound("discord:channel:100", "  "))
        with pytest.raises(MessageRejectedError, match="cannot be read"):
            await bridge.send(Outbound("discord:channel:100", "", media=(tmp_path / "gone",)))

    run(fake, scenario)
    assert [{k: s[k] for k in ("channel", "target", "message", "reply_to")} for s in fake.sent] == [
        {
            "channel": "discord",
            "target": "channel:100",
            "message": "--not an option--",
            "reply_to": "17",
        },
        {"channel": "telegram", "target": "123456789", "message": "plain", "reply_to": None},
    ]
    assert fake.sent[0]["media"] == [str(photo)]
    assert fake.calls[0][-1] == "--json"


def test_the_real_cli_accepts_a_sends_arguments_and_refuses_a_channel_it_lacks(
    fake: FakeOpenClaw, tmp_path: Path
) -> None:
    """The arguments the bridge builds, checked by OpenClaw itself (``--dry-run``): a reply
    with a file to Telegram is accepted; Discord, not set up there, is refused for good."""
    fake.check_sends()
    photo = tmp_path / "photo.png"
    photo.write_bytes(b"png")

    async def scenario(bridge: OpenClawBridge) -> None:
        await bridge.send(
            Outbound("telegram:123456789", "**Renewed** on Friday", reply_to="17", media=(photo,))
        )
        with pytest.raises(MessageRejectedError, match="Channel is unavailable: discord"):
            await bridge.send(Outbound("discord:channel:100", "hello"))

    run(fake, scenario)
    assert [(s["channel"], s["message"]) for s in fake.sent] == [
        ("telegram", "**Renewed** on Friday")
    ]


# -- failures --------------------------------------------------------------------------------


def test_a_failing_call_is_a_channel_error_to_retry(fake: FakeOpenClaw) -> None:
    fake.say(*ROOM, "still here")
    fake.fail("message read", UNREACHABLE)
    fake.fail("message send", UNREACHABLE)
    fake.fail("message read", "timeout")
    state = MemoryState()

    async def refused(bridge: OpenClawBridge) -> None:
        with pytest.raises(ChannelError, match=r"ECONNREFUSED.*openclaw gateway run") as failed:
            await receive(bridge, 1)
        assert type(failed.value) is ChannelError and "exit 1" in failed.value.message
        with pytest.raises(ChannelError, match="Gateway not reachable") as failed:
            await bridge.send(Outbound("discord:channel:100", "hi"))
        assert type(failed.value) is ChannelError

    run(fake, refused, state)

    async def silent(bridge: OpenClawBridge) -> None:
        started = asyncio.get_running_loop().time()
        with pytest.raises(ChannelError, match=r"did not answer .* in 1 s") as failed:
            await receive(bridge, 1)
        assert type(failed.value) is ChannelError
        # The stand-in stays silent for 60 s: the bridge's timeout ended the call.
        assert asyncio.get_running_loop().time() - started < 30

    # A second's timeout is this call's point (the stand-in never answers it), so the
    # bridge makes no other call with it.
    run(fake, silent, state, timeout=1)

    async def answers(bridge: OpenClawBridge) -> None:
        # Then the same listener answers: nothing was lost on the way.
        assert [m.text for m in await receive(bridge, 1)] == ["still here"]

    run(fake, answers, state)
    assert fake.sent == []


def test_a_gateway_without_credentials_stops_the_channel(fake: FakeOpenClaw) -> None:
    fake.fail("message read", NO_CREDENTIALS)
    fake.fail("message send", NO_CREDENTIALS)

    async def scenario(bridge: OpenClawBridge) -> None:
        with pytest.raises(ChannelFatalError, match=r"requires credentials.*gateway\.auth"):
            await receive(bridge, 1)
        with pytest.raises(ChannelFatalError, match="requires credentials"):
            await bridge.send(Outbound("discord:channel:100", "hi"))

    run(fake, scenario)


def test_a_listener_on_a_channel_openclaw_lacks_stops_the_channel(fake: FakeOpenClaw) -> None:
    fake.fail("message read", "real")  # the real CLI reads: it has no Discord set up

    async def scenario(bridge: OpenClawBridge) -> None:
        with pytest.raises(ChannelFatalError, match="Channel is unavailable: discord"):
            await receive(bridge, 1)

    run(fake, scenario)


# -- the gateway's events, or polling --------------------------------------------------------


def test_with_no_gateway_auto_polls_and_says_why(fake: FakeOpenClaw) -> None:
    """Nothing listens at ``gateway_url``: under "auto" the listeners are polled, Telegram
    (whose history OpenClaw cannot read) left to the gateway instead of stopping all."""
    nowhere = f"ws://127.0.0.1:{free_port()}"
    fake.fail("message read", "Message action read not supported for channel telegram.")
    fake.say(*ROOM, "read by polling")
    listeners = [{"channel": "telegram", "target": "4242"}, {"channel": ROOM[0], "target": ROOM[1]}]

    async def scenario(bridge: OpenClawBridge) -> None:
        assert [m.text for m in await receive(bridge, 1)] == ["read by polling"]
        assert bridge.receiving() == (
            "polling `openclaw message read` every 1 s (No OpenClaw gateway answers at "
            f"{nowhere} (Connection refused); the gateway is tried again every 30 s)"
        )

    run(fake, scenario, listen="auto", gateway_url=nowhere, listeners=listeners)
    assert [c[3] for c in fake.reads()][:2] == ["telegram", "discord"]
    assert "telegram" not in [c[3] for c in fake.reads()[2:]]  # asked once, then left


def test_gateway_only_with_no_gateway_is_an_error_to_retry(fake: FakeOpenClaw) -> None:
    nowhere = f"ws://127.0.0.1:{free_port()}"

    async def scenario(bridge: OpenClawBridge) -> None:
        with pytest.raises(ChannelError, match=f"No OpenClaw gateway answers at {nowhere}"):
            await receive(bridge, 1)
        assert bridge.receiving() == (
            f"nothing yet: No OpenClaw gateway answers at {nowhere} (Connection refused)."
        )

    run(fake, scenario, listen="gateway", gateway_url=nowhere)
    assert fake.reads() == []


def test_identify_finds_the_real_openclaw_and_refuses_a_missing_or_foreign_one(
    fake: FakeOpenClaw, tmp_path: Path
) -> None:
    async def found(bridge: OpenClawBridge) -> None:
        assert await bridge.identify() == "OpenClaw 2026.9.6"

    run(fake, found)

    async def missing(bridge: OpenClawBridge) -> None:
        with pytest.raises(ChannelFatalError, match=r"channels\.openclaw\.command"):
            await bridge.identify()

    run(fake, missing, command=str(tmp_path / "nowhere" / "openclaw"))
    foreign = tmp_path / "echo-openclaw"
    foreign.write_text("#!/bin/sh\necho 'hello'\n")
    foreign.chmod(0o755)

    async def not_openclaw(bridge: OpenClawBridge) -> None:
        with pytest.raises(ChannelFatalError, match="does not say an OpenClaw version"):
            await bridge.identify()

    run(fake, not_openclaw, command=str(foreign))


# -- files -----------------------------------------------------------------------------------


class _Files(LoopbackHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == "/attachments/plan.pdf":
            body = b"%PDF-1.4 plan"
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "application/pdf")
        else:
            body = b"gone"
            self.send_response(HTTPStatus.NOT_FOUND)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def cdn() -> Iterator[str]:
    server = LoopbackServer(_Files, "fake-cdn")
    yield server.address
    server.close()


def test_a_file_with_an_address_is_downloaded(fake: FakeOpenClaw, cdn: str) -> None:
    url = f"{cdn}/attachments/plan.pdf"
    fake.say(
        *ROOM,
        "the plan",
        attachments=[{"id": "9", "filename": "plan.pdf", "content_type": "application/pdf",
                      "size": 13, "url": url}],
    )  # fmt: skip

    async def scenario(bridge: OpenClawBridge) -> None:
        (message,) = await receive(bridge, 1)
        (attachment,) = message.attachments
        assert (attachment.kind, attachment.name, attachment.file_id) == (
            "document",
            "plan.pdf",
            url,
        )
        assert await bridge.download(attachment) == b"%PDF-1.4 plan"
        with pytest.raises(MessageRejectedError, match="HTTP 404"):
            await bridge.download(Attachment("document", f"{cdn}/old.pdf", "old.pdf"))
        with pytest.raises(NotSupportedError, match="no address"):
            await bridge.download(Attachment("photo", "F1", "a.png"))

    run(fake, scenario)


# -- the tools -------------------------------------------------------------------------------


class Asked:
    """An approver that records each question and answers as told."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    def approve(self, request: ApprovalRequest) -> bool:
        self.requests.append(request)
        return self.answer


@pytest.fixture
def runtime(tmp_path: Path, fake: FakeOpenClaw, clock: MovableClock) -> Iterator[Runtime]:
    openclaw = settings_for(fake, owner=[OWNER], allow=["discord:channel:100"])
    settings = Settings(
        vault=tmp_path / "vault",
        timezone="Europe/Berlin",
        channels={"openclaw": openclaw.model_dump()},
    )
    opened = Runtime.open(settings, clock=clock, embedder=HashEmbedder(), create=True)
    yield opened
    opened.close()


@pytest.fixture
def call(runtime: Runtime) -> Callable[..., ToolResult]:
    """Call a tool of the full registry (its own hub, never started)."""
    registry = full_registry()

    def run_tool(name: str, arguments: dict[str, Any], policy: Policy | None = None) -> ToolResult:
        context = ToolContext(runtime=runtime, policy=policy or Policy(approver=AllowAll()))
        return registry.call(name, arguments, context)

    return run_tool


def test_the_three_tools_have_the_first_designs_names_schemas_and_tiers() -> None:
    registry = full_registry()
    send, read, status = (
        registry.get(n) for n in ("openclaw_send", "openclaw_read", "openclaw_status")
    )
    assert (send.tier, send.category) == (Tier.WRITE, "network_access")
    assert (read.tier, read.category) == (Tier.WRITE, "network_access")
    assert status.tier == Tier.READ and status.annotations.read_only
    assert send.input_schema()["required"] == ["channel", "target", "message"]
    assert set(send.input_schema()["properties"]) == {"channel", "target", "message", "media"}
    assert read.input_schema()["required"] == ["channel", "target"]
    assert read.input_schema()["properties"]["limit"]["default"] == 10
    assert status.input_schema().get("required", []) == []


def test_openclaw_send_asks_the_owner_once_and_obeys_the_access_rules(
    call: Callable[..., ToolResult], fake: FakeOpenClaw, runtime: Runtime
) -> None:
    (runtime.vault.root / "Attachments").mkdir()
    (runtime.vault.root / "Attachments" / "report.pdf").write_bytes(b"%PDF")
    refused = Asked(False)
    arguments = {"channel": "discord", "target": "channel:100", "message": "Build is green"}
    result = call("openclaw_send", arguments, Policy(approver=refused, mode="ask"))
    assert not result.ok and result.code == "not_approved" and fake.sent == []
    (request,) = refused.requests
    assert request.summary == "send on discord to channel:100: 'Build is green'"

    yes = Asked(True)
    policy = Policy(approver=yes, mode="ask")
    sent = call("openclaw_send", {**arguments, "media": "Attachments/report.pdf"}, policy)
    assert sent.ok, sent.error
    assert sent.data["sent"] and sent.data["status"] == "sent"
    assert sent.data["chat_id"] == "discord:channel:100" and sent.data["adapter"] == "openclaw"
    assert fake.sent[0]["media"] == [str(runtime.vault.root / "Attachments" / "report.pdf")]
    owner = call("openclaw_send", {"platform": "discord", "to": "user:42", "text": "hi"}, policy)
    assert owner.ok and len(yes.requests) == 1, "network access is approved once a session"

    stranger = call("openclaw_send", {"channel": "discord", "target": "user:66", "message": "x"})
    assert not stranger.ok and stranger.code == "recipient_not_allowed"
    assert [(s["target"], s["message"]) for s in fake.sent] == [
        ("channel:100", "Build is green"),
        ("user:42", "hi"),
    ]


def test_openclaw_read_is_the_platforms_conversation_oldest_first(
    call: Callable[..., ToolResult], fake: FakeOpenClaw
) -> None:
    fake.say(*ROOM, "one", author="42", name="Ada")
    fake.say(*ROOM, "two", author=BOT_ID, name="memvault-bot", bot=True)
    fake.say(*ROOM, "three", author="66", name="Bob")
    read = call("openclaw_read", {"channel": "discord", "target": "channel:100", "limit": 2})
    assert read.ok, read.error
    assert [(m["text"], m["sender_id"], m["from_bot"]) for m in read.data["messages"]] == [
        ("two", f"discord:user:{BOT_ID}", True),
        ("three", "discord:user:66", False),
    ]
    assert read.data["count"] == 2 and fake.reads()[-1][7] == "2"
    empty = call("openclaw_read", {"channel": "discord", "target": "channel:7"})
    assert empty.ok and empty.data["messages"] == [] and empty.data["note"] == "No recent messages."


def test_openclaw_status_and_get_channel_status_say_what_the_real_openclaw_has(
    call: Callable[..., ToolResult],
) -> None:
    """A fresh OpenClaw: no channel configured, no gateway credentials; both are said."""
    status = call("openclaw_status", {})
    assert status.ok, status.error
    platform = status.data
    assert platform["channels"] == {} and platform["status"]["configuredChannels"] == []
    assert platform["status"]["gatewayReachable"] is False
    assert "openclaw channels add" in platform["hint"]
    assert platform["listeners"] == [
        {"channel": "discord", "target": "channel:100", "last_seen": None}
    ]
    assert platform["bridge"]["channel"] == "openclaw" and platform["bridge"]["owner_set"]

    (channel,) = call("get_channel_status", {"channel": "OpenClaw"}).data
    assert channel["channel"] == "openclaw"
    assert channel["platform"]["channels"] == {} and "hint" in channel["platform"]
    every = call("get_channel_status", {}).data
    assert all("platform" not in item for item in every)  # no OpenClaw call for the overview


def test_the_tools_say_when_the_bridge_is_off(tmp_path: Path, clock: MovableClock) -> None:
    settings = Settings(vault=tmp_path / "vault", timezone="Europe/Berlin")
    runtime = Runtime.open(settings, clock=clock, embedder=HashEmbedder(), create=True)
    try:
        context = ToolContext(runtime=runtime, policy=Policy(approver=AllowAll()))
        result = full_registry().call("openclaw_status", {}, context)
        assert not result.ok and result.code == "adapter_not_found"
        assert "channels.openclaw.enabled = true" in (result.error or "")
    finally:
        runtime.close()
