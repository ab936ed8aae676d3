"""The channel tools: an agent writes to the owner (or an approved contact) and reads
what came in on the messaging channels.

Four tools, as the earlier design named them: ``send_channel_message``
(tier 2, network access: the owner approves it once per session),
``list_channel_conversations``, ``read_channel_messages`` and
``get_channel_status`` (tier 1). They run on a :class:`~memvault.channels.hub.Hub`
that the caller provides through ``hub_for``: the daemon passes its own,
running one; a CLI or MCP process gets a hub of its own that is never
started, whose :meth:`~memvault.channels.hub.Hub.send` delivers at once
from that process. Sending obeys the channel's access rules, so no tool can
write to someone the owner has not let in.

:func:`full_registry` is what every serving surface uses: the built-in
tools plus these. The registry itself (:mod:`memvault.tools`) does not know
channels; the arrow points from here to there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

from memvault.channels.hub import Hub
from memvault.runtime import Runtime
from memvault.tools import default_registry
from memvault.tools.inputs import ToolInput, names
from memvault.tools.policy import NETWORK_ACCESS, Tier
from memvault.tools.registry import Annotations, Tool, ToolContext, ToolRegistry

HubFor = Callable[[Runtime], Hub]

DEFAULT_CHANNEL = "telegram"
_SUMMARY_CHARS = 60


def _as_text(value: Any) -> Any:
    """A chat id a model sends as a number is the same id as text."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


ChatRef = Annotated[str, BeforeValidator(_as_text)]
# Channel names are lowercase (Telegram and telegram are one channel).
ChannelName = Annotated[str, AfterValidator(str.lower)]
_CHANNEL = names("channel", "adapter", "platform")
_HINT = names("conversation_hint", "chat_id", "channel_id", "conversation", "to", "recipient")


def _channel_field() -> Any:
    return Field(
        DEFAULT_CHANNEL,
        description=f"The channel's name, e.g. 'telegram' (default {DEFAULT_CHANNEL}).",
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
    channel: ChannelName = _channel_field()
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
    channel: ChannelName = _channel_field()
    limit: int = _limit_field(20)


class ReadChannelMessages(ToolInput):
    channel: ChannelName = _channel_field()
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


def _quoted(text: str) -> str:
    """The start of a message, as an approval question shows it."""
    flat = " ".join(text.split())
    if len(flat) > _SUMMARY_CHARS:
        flat = flat[: _SUMMARY_CHARS - 1].rstrip() + "…"
    return f"'{flat}'"


def channel_tools(hub_for: HubFor) -> list[Tool]:
    """The four channel tools, each running on the hub ``hub_for`` gives for a runtime."""

    def send(ctx: ToolContext, args: SendChannelMessage) -> dict[str, Any]:
        result = hub_for(ctx.runtime).send(args.channel, args.conversation_hint, args.text)
        return {**result, "sent": result["status"] == "sent"}

    def conversations(ctx: ToolContext, args: ListChannelConversations) -> dict[str, Any]:
        return hub_for(ctx.runtime).conversations(args.channel, args.limit)

    def messages(ctx: ToolContext, args: ReadChannelMessages) -> dict[str, Any]:
        return hub_for(ctx.runtime).messages(args.channel, args.conversation_hint, args.limit)

    def status(ctx: ToolContext, args: GetChannelStatus) -> list[dict[str, Any]]:
        hub = hub_for(ctx.runtime)
        every = hub.status()
        if args.channel is None:
            return every
        chosen = [item for item in every if item["channel"] == args.channel]
        if not chosen:
            hub.adapter(args.channel)  # says which channels there are
        return chosen

    return [
        Tool(
            name="send_channel_message",
            title="Send a message on a channel",
            description=(
                "Send a message on a messaging channel (Telegram): to the owner ('owner'), or "
                "to a chat id or contact the owner approved. Use it when the owner asked to be "
                "told something on their phone, or to pass a message on. Says whether it was "
                "sent, or is queued for retry (status sent, queued or failed)."
            ),
            input_model=SendChannelMessage,
            handler=send,
            tier=Tier.WRITE,
            category=NETWORK_ACCESS,
            annotations=Annotations(open_world=True),
            summarize=lambda a: f"send to {a.channel} {a.conversation_hint}: {_quoted(a.text)}",
        ),
        Tool(
            name="list_channel_conversations",
            title="List channel conversations",
            description=(
                "The conversations on a messaging channel, most recent first: chat id, name, "
                "how many messages, and the last one. Use it to find a chat id to read or write to."
            ),
            input_model=ListChannelConversations,
            handler=conversations,
        ),
        Tool(
            name="read_channel_messages",
            title="Read channel messages",
            description=(
                "Recent messages on a messaging channel, oldest first: what arrived (inbound) "
                "and what memvault sent (outbound), of one conversation or all of them."
            ),
            input_model=ReadChannelMessages,
            handler=messages,
        ),
        Tool(
            name="get_channel_status",
            title="Channel status",
            description=(
                "Each messaging channel: enabled, running or not (and why), its policy for "
                "strangers, the last message received, the outbox, and senders waiting for "
                "the owner's approval."
            ),
            input_model=GetChannelStatus,
            handler=status,
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


def full_registry(hub_for: HubFor | None = None) -> ToolRegistry:
    """Every tool a serving surface offers: the built-in ones and the channel tools."""
    return ToolRegistry([*default_registry(), *channel_tools(hub_for or own_hubs())])
