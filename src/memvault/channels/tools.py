"""The channel tools: an agent writes to the owner (or an approved contact) and reads
what came in on the messaging channels.

Four tools, as the earlier design named them: ``send_channel_message``
(tier 2, network access: the owner approves it once per session),
``list_channel_conversations``, ``read_channel_messages`` and
``get_channel_status`` (tier 1). A tool not told the channel uses the owner's
primary one: the first enabled channel with an owner id (else the first
enabled channel). ``read_channel_messages`` told neither a channel nor a
conversation reads what is unread on every channel: an unread marker per
channel (the last inbox row an agent was shown, in state.db's meta) moves on
as messages are shown, the oldest first. They run on a :class:`~memvault.channels.hub.Hub`
that the caller provides through ``hub_for``: the daemon passes its own,
running one; a CLI or MCP process gets a hub of its own that is never
started, whose :meth:`~memvault.channels.hub.Hub.send` delivers at once
from that process. Sending obeys the channel's access rules, so no tool can
write to someone the owner has not let in.

Three more keep the first design's names for the OpenClaw bridge, as thin
names over its adapter (:mod:`memvault.channels.openclaw_bridge`):
``openclaw_send`` and ``openclaw_read`` (tier 2, network access) and
``openclaw_status`` (tier 1); ``get_channel_status`` for the ``openclaw``
channel adds what OpenClaw itself says of its channels.

:func:`full_registry` is what every serving surface uses: the built-in
tools plus these. The registry itself (:mod:`memvault.tools`) does not know
channels; the arrow points from here to there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BeforeValidator, Field

from memvault.channels.hub import AdapterNotFoundError, Hub
from memvault.channels.openclaw_bridge import OpenClawBridge
from memvault.channels.owner import owner_channel, tell_owner
from memvault.errors import MemvaultError
from memvault.jobs import JobEngine
from memvault.jobs.catalog import make_engine
from memvault.llm.factory import optional_provider
from memvault.runtime import Runtime
from memvault.tools import default_registry, job_tools
from memvault.tools.inputs import ToolInput, names
from memvault.tools.job_tools import EngineFor
from memvault.tools.policy import NETWORK_ACCESS, Tier
from memvault.tools.registry import Annotations, Tool, ToolContext, ToolRegistry

HubFor = Callable[[Runtime], Hub]
T = TypeVar("T")

OPENCLAW = "openclaw"
_SUMMARY_CHARS = 60
# state.db's meta key of a channel's unread marker: the last inbox row an agent was shown.
_READ_UPTO = "agent.read_upto.{channel}"


def _as_text(value: Any) -> Any:
    """A chat id a model sends as a number is the same id as text."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


ChatRef = Annotated[str, BeforeValidator(_as_text)]
# Channel names are lowercase (Telegram and telegram are one channel).
ChannelName = Annotated[str, AfterValidator(str.lower)]
_CHANNEL = names("channel", "adapter", "platform")
_HINT = names("conversation_hint", "chat_id", "channel_id", "conversation", "to", "recipient")


_PRIMARY = "the owner's primary channel: the first enabled channel with an owner id"


def _channel_field() -> Any:
    return Field(
        None,
        description=f"The channel's name, e.g. 'telegram'; default {_PRIMARY}.",
        validation_alias=_CHANNEL,
    )


def _limit_field(default: int) -> Any:
    return Field(
        default,
        ge=1,
        le=200,
        description=f"How many at most (default {default}, at most 200).",
        validation_alias=names("limit", "count", "max_results", "maxResults"),
    )


class SendChannelMessage(ToolInput):
    channel: ChannelName | None = _channel_field()
    conversation_hint: ChatRef = Field(
        description=(
            "Who to write to: 'owner' (the owner's own chat), a chat id such as '123456789', "
            "or the name of a contact whose note has an id on this channel. Only the owner "
            "and senders the owner approved can be written to."
        ),
        validation_alias=_HINT,
    )
    text: str = Field(
        description="The message, in Markdown; a long one is sent in several parts.",
        validation_alias=names("text", "message", "content", "body"),
    )


class ListChannelConversations(ToolInput):
    channel: ChannelName | None = _channel_field()
    limit: int = _limit_field(20)
    days: int | None = Field(
        None,
        ge=1,
        le=3650,
        description="Only conversations with a message in the last this many days; default any.",
        validation_alias=names("days", "since_days", "last_days"),
    )


class ReadChannelMessages(ToolInput):
    channel: ChannelName | None = Field(
        None,
        description=(
            "The channel's name, e.g. 'telegram'. Left out (and no conversation_hint): the "
            "unread messages of every channel that has some, marked read as they are shown. "
            f"Left out with a conversation_hint: {_PRIMARY}."
        ),
        validation_alias=_CHANNEL,
    )
    conversation_hint: ChatRef | None = Field(
        None,
        description=(
            "Only this conversation: 'owner', a chat id, or a contact's name; "
            "default every conversation of the channel."
        ),
        validation_alias=_HINT,
    )
    limit: int = _limit_field(20)


class GetChannelStatus(ToolInput):
    channel: ChannelName | None = Field(
        None,
        description="Only this channel, e.g. 'telegram'; default every channel.",
        validation_alias=_CHANNEL,
    )


_PLATFORM = "Platform: telegram, whatsapp, discord, slack, signal, imessage, matrix, msteams."


class OpenClawSend(ToolInput):
    channel: ChannelName = Field(
        description=_PLATFORM, validation_alias=names("channel", "platform")
    )
    target: ChatRef = Field(
        description=(
            "Recipient: E.164 phone for WhatsApp/Signal, chat ID for Telegram, "
            "channel/user for Discord/Slack (e.g. 'channel:123', 'user:42'), as "
            "`openclaw message send --target` takes it."
        ),
        validation_alias=names("target", "to", "recipient", "chat_id", "conversation"),
    )
    message: str = Field(
        description="Message text to send, in Markdown; a long one goes in several parts.",
        validation_alias=names("message", "text", "content", "body"),
    )
    media: str | None = Field(
        None,
        description="Optional: a file in the vault to attach, e.g. 'Attachments/report.pdf'.",
        validation_alias=names("media", "file", "attachment", "path"),
    )


class OpenClawRead(ToolInput):
    channel: ChannelName = Field(
        description=_PLATFORM, validation_alias=names("channel", "platform")
    )
    target: ChatRef = Field(
        description="Chat/channel to read from, e.g. 'channel:123' on Discord or Slack.",
        validation_alias=names("target", "chat", "chat_id", "conversation"),
    )
    limit: int = Field(
        10,
        ge=1,
        le=100,
        description="Maximum messages to return (default 10, at most 100).",
        validation_alias=names("limit", "count", "max_results", "maxResults"),
    )


class OpenClawStatus(ToolInput):
    pass


def _quoted(text: str) -> str:
    """The start of a message, as an approval question shows it."""
    flat = " ".join(text.split())
    if len(flat) > _SUMMARY_CHARS:
        flat = flat[: _SUMMARY_CHARS - 1].rstrip() + "…"
    return f"'{flat}'"


def _bridge(hub: Hub) -> OpenClawBridge:
    """The hub's OpenClaw bridge (AdapterNotFoundError when the channel is off)."""
    adapter = hub.adapter(OPENCLAW)
    assert isinstance(adapter, OpenClawBridge)
    return adapter


def primary_channel(hub: Hub) -> str:
    """The owner's primary channel: the first enabled channel with an owner id, else the
    first enabled one; AdapterNotFoundError (saying why) when no channel can be used."""
    chosen = owner_channel(hub)
    if chosen is not None:
        return chosen
    if hub.adapters:
        return next(iter(hub.adapters))
    for name in hub.statuses:  # enabled, but it could not be set up: say why
        hub.adapter(name)
    names = list(hub.settings.sections())
    raise AdapterNotFoundError(
        f"No messaging channel is enabled; turn one on in the vault's config, e.g. "
        f"channels.{names[0]}.enabled = true (channels: {', '.join(names)})."
    )


def _read_upto(hub: Hub, channel: str) -> int:
    """The channel's unread marker: the last inbox row an agent was shown (0: none yet)."""
    value = hub.runtime.state.get_meta(_READ_UPTO.format(channel=channel))
    return int(value) if value and value.isdigit() else 0


def _mark_read(hub: Hub, channel: str, upto: int) -> None:
    if upto > _read_upto(hub, channel):
        hub.runtime.state.set_meta(_READ_UPTO.format(channel=channel), str(upto))


def _unread_count(hub: Hub, channel: str, after: int) -> int:
    rows = hub.store.db.query(
        "SELECT count(*) AS n FROM channel_inbox WHERE channel = ? AND id > ?", (channel, after)
    )
    return int(rows[0]["n"]) if rows else 0


def _oldest_unread(hub: Hub, channel: str, after: int, limit: int) -> list[dict[str, Any]]:
    """The channel's first ``limit`` inbox rows after the marker, in the shape
    :meth:`Hub.messages` gives them, each naming its channel."""
    rows = hub.store.db.query(
        "SELECT id, status, received_at, payload FROM channel_inbox "
        "WHERE channel = ? AND id > ? ORDER BY id LIMIT ?",
        (channel, after, limit),
    )
    out = []
    for row in rows:
        payload = json.loads(row["payload"])
        out.append(
            {
                "id": int(row["id"]),
                "channel": channel,
                "direction": "inbound",
                "status": row["status"],
                "received_at": row["received_at"],
                **{k: payload.get(k) for k in ("chat_id", "sender_id", "sender_name", "text")},
                "attachments": payload.get("attachments", []),
            }
        )
    return out


def read_unread(hub: Hub, limit: int) -> dict[str, Any]:
    """What is unread on every enabled channel (at most ``limit`` a channel, the oldest
    first), oldest first; each channel's marker moves past what was shown."""
    messages: list[dict[str, Any]] = []
    channels: dict[str, dict[str, int]] = {}
    for name in hub.adapters:
        after = _read_upto(hub, name)
        unread = _unread_count(hub, name, after)
        if not unread:
            continue
        shown = _oldest_unread(hub, name, after, limit)
        if shown:
            _mark_read(hub, name, shown[-1]["id"])
        channels[name] = {"shown": len(shown), "still_unread": unread - len(shown)}
        messages.extend(shown)
    messages.sort(key=lambda m: (str(m["received_at"]), m["id"]))
    answer: dict[str, Any] = {
        "adapter": None,
        "unread": True,
        "channels": channels,
        "messages": messages,
        "message_count": len(messages),
    }
    if not messages:
        answer["note"] = "No unread messages on any channel."
    elif any(c["still_unread"] for c in channels.values()):
        answer["note"] = "More unread messages are waiting; call again to read them."
    return answer


def _mark_shown(hub: Hub, channel: str, shown: list[dict[str, Any]]) -> None:
    """A channel read whole: its unread marker moves on when every unread message of
    the channel was among those shown (none skipped)."""
    after = _read_upto(hub, channel)
    unread = [m["id"] for m in shown if m["direction"] == "inbound" and m["id"] > after]
    if unread and len(unread) == _unread_count(hub, channel, after):
        _mark_read(hub, channel, max(unread))


def _within(value: Any, since: datetime) -> bool:
    """Whether an ISO time (a conversation's last message) is at or after ``since``."""
    try:
        moment = datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return False
    return moment is not None and moment.tzinfo is not None and moment >= since


def _wait(work: Coroutine[Any, Any, T]) -> T:
    """Run the bridge's work from a tool's thread. Its calls are ``openclaw``
    processes that belong to no event loop, so a loop of the thread's own serves."""
    return asyncio.run(work)


def channel_tools(hub_for: HubFor) -> list[Tool]:
    """The channel tools, each running on the hub ``hub_for`` gives for a runtime."""

    def choose_channel(ctx: ToolContext, args: SendChannelMessage) -> None:
        # Before the owner is asked: the question names the channel the message goes to.
        args.channel = args.channel or primary_channel(hub_for(ctx.runtime))

    def send(ctx: ToolContext, args: SendChannelMessage) -> dict[str, Any]:
        hub = hub_for(ctx.runtime)
        channel = args.channel or primary_channel(hub)
        result = hub.send(channel, args.conversation_hint, args.text)
        return {**result, "sent": result["status"] == "sent"}

    def conversations(ctx: ToolContext, args: ListChannelConversations) -> dict[str, Any]:
        hub = hub_for(ctx.runtime)
        found = hub.conversations(args.channel or primary_channel(hub), args.limit)
        if args.days is not None:
            since = ctx.runtime.clock.now() - timedelta(days=args.days)
            kept = [c for c in found["conversations"] if _within(c.get("last_message_at"), since)]
            found.update(conversations=kept, count=len(kept), days=args.days)
        return found

    def messages(ctx: ToolContext, args: ReadChannelMessages) -> dict[str, Any]:
        hub = hub_for(ctx.runtime)
        if args.channel is None and args.conversation_hint is None:
            return read_unread(hub, args.limit)
        channel = args.channel or primary_channel(hub)
        found = hub.messages(channel, args.conversation_hint, args.limit)
        if args.conversation_hint is None:
            _mark_shown(hub, channel, found["messages"])
        return found

    def status(ctx: ToolContext, args: GetChannelStatus) -> list[dict[str, Any]]:
        hub = hub_for(ctx.runtime)
        every = hub.status()
        if args.channel is None:
            return every
        chosen = [item for item in every if item["channel"] == args.channel]
        if not chosen:
            hub.adapter(args.channel)  # says which channels there are
        bridge = hub.adapters.get(args.channel)
        if isinstance(bridge, OpenClawBridge):  # asked for by name: what OpenClaw says too
            try:
                chosen[0]["platform"] = _wait(bridge.platform_status())
            except MemvaultError as exc:  # memvault's side is still worth telling
                chosen[0]["platform_error"] = exc.message
        return chosen

    def openclaw_send(ctx: ToolContext, args: OpenClawSend) -> dict[str, Any]:
        # send_channel_message on the bridge: the same access rules, outbox and retries.
        hub = hub_for(ctx.runtime)
        media = (args.media,) if args.media else ()
        chat = f"{args.channel}:{args.target}"
        result = hub.send(OPENCLAW, chat, args.message, media=media)
        return {
            **result,
            "channel": args.channel,
            "target": args.target,
            "sent": result["status"] == "sent",
        }

    def openclaw_read(ctx: ToolContext, args: OpenClawRead) -> dict[str, Any]:
        chat = f"{args.channel}:{args.target}"
        found = _wait(_bridge(hub_for(ctx.runtime)).messages(chat, args.limit))
        answer: dict[str, Any] = {
            "adapter": OPENCLAW,
            "channel": args.channel,
            "target": args.target,
            "chat_id": chat,
            "messages": found,
            "count": len(found),
        }
        if not found:
            answer["note"] = "No recent messages."
        return answer

    def openclaw_status(ctx: ToolContext, args: OpenClawStatus) -> dict[str, Any]:
        hub = hub_for(ctx.runtime)
        bridge = _bridge(hub)
        (memvault,) = [item for item in hub.status() if item["channel"] == OPENCLAW]
        return {**_wait(bridge.platform_status()), "bridge": memvault}

    return [
        Tool(
            name="send_channel_message",
            title="Send a message on a channel",
            description=(
                "Send a message on a messaging channel (the owner's primary one unless named): "
                "to the owner ('owner'), or to a chat id or contact the owner approved. Use it "
                "when the owner asked to be told something on their phone, or to pass a "
                "message on. Says whether it was sent, or is queued for retry (status sent, "
                "queued or failed)."
            ),
            input_model=SendChannelMessage,
            handler=send,
            tier=Tier.WRITE,
            category=NETWORK_ACCESS,
            annotations=Annotations(open_world=True),
            summarize=lambda a: f"send to {a.channel} {a.conversation_hint}: {_quoted(a.text)}",
            precheck=choose_channel,
        ),
        Tool(
            name="list_channel_conversations",
            title="List channel conversations",
            description=(
                "The conversations on a messaging channel (the owner's primary one unless "
                "named), most recent first, optionally only those active in the last days: "
                "chat id, name, how many messages, and the last one. Use it to find a chat id "
                "to read or write to."
            ),
            input_model=ListChannelConversations,
            handler=conversations,
        ),
        Tool(
            name="read_channel_messages",
            title="Read channel messages",
            description=(
                "Recent messages on a messaging channel, oldest first: what arrived (inbound) "
                "and what memvault sent (outbound), of one conversation or all of them. "
                "Without a channel or conversation: what is unread on every channel (each "
                "message is shown once; call again for more)."
            ),
            input_model=ReadChannelMessages,
            handler=messages,
        ),
        Tool(
            name="get_channel_status",
            title="Channel status",
            description=(
                "Each messaging channel: enabled, running or not (and why), connected and its "
                "uptime in seconds, its policy for strangers, the last message received, the "
                "outbox, and senders waiting for the owner's approval."
            ),
            input_model=GetChannelStatus,
            handler=status,
        ),
        Tool(
            name="openclaw_send",
            title="Send a message through OpenClaw",
            description=(
                "Send a message through OpenClaw to a messaging platform (Telegram, WhatsApp, "
                "Discord, Slack, Signal, iMessage, etc.). Only the owner and conversations the "
                "owner let in can be written to; replies to messages that came in through "
                "OpenClaw go back on their own."
            ),
            input_model=OpenClawSend,
            handler=openclaw_send,
            tier=Tier.WRITE,
            category=NETWORK_ACCESS,
            annotations=Annotations(open_world=True),
            summarize=lambda a: f"send on {a.channel} to {a.target}: {_quoted(a.message)}",
        ),
        Tool(
            name="openclaw_read",
            title="Read messages through OpenClaw",
            description=(
                "Read recent messages from a messaging platform through OpenClaw, oldest "
                "first: who wrote, when, and what (the bot's own marked from_bot)."
            ),
            input_model=OpenClawRead,
            handler=openclaw_read,
            tier=Tier.WRITE,
            category=NETWORK_ACCESS,
            annotations=Annotations(read_only=True, open_world=True),
            summarize=lambda a: f"read the last {a.limit} messages on {a.channel} {a.target}",
        ),
        Tool(
            name="openclaw_status",
            title="OpenClaw status",
            description=(
                "Check OpenClaw gateway health and channel connection status: the channels "
                "OpenClaw has, whether its gateway answers, the conversations memvault "
                "listens to, and a hint when no channel is set up yet."
            ),
            input_model=OpenClawStatus,
            handler=openclaw_status,
            annotations=Annotations(read_only=True, idempotent=True, open_world=True),
        ),
    ]


def own_hubs() -> HubFor:
    """One hub per runtime, made on first use and never started: a send delivers at once
    from this process (the daemon, which runs the channels, passes its own instead)."""
    made: dict[int, Hub] = {}

    def hub_for(runtime: Runtime) -> Hub:
        # The hub holds its runtime, so an id cannot be reused while it is cached here.
        hub = made.get(id(runtime))
        if hub is None:
            hub = made[id(runtime)] = Hub(runtime)
        return hub

    return hub_for


def own_engines(hub_for: HubFor) -> EngineFor:
    """One job engine per runtime, made on first use, whose messages to the owner go
    through ``hub_for``'s hub (the daemon passes its own engine instead)."""
    made: dict[int, JobEngine] = {}

    def engine_for(runtime: Runtime) -> JobEngine:
        engine = made.get(id(runtime))
        if engine is None:
            engine = made[id(runtime)] = make_engine(
                runtime,
                provider=optional_provider(runtime.settings.llm, "jobs"),
                notify=lambda text, channel: tell_owner(hub_for(runtime), text, channel),
            )
        return engine

    return engine_for


def full_registry(
    hub_for: HubFor | None = None, engine_for: EngineFor | None = None
) -> ToolRegistry:
    """Every tool a serving surface offers: the built-in ones, the channel tools and the
    job tools."""
    hubs = hub_for or own_hubs()
    return ToolRegistry(
        [
            *default_registry(),
            *channel_tools(hubs),
            *job_tools.tools(engine_for or own_engines(hubs)),
        ]
    )
