"""The adapter protocol: what every messaging channel implements.

An adapter turns one platform (Telegram, email, Slack, ...) into two
streams: :class:`Inbound` messages handed to the hub's handler, and
:class:`Outbound` messages it sends. It never calls the agent, the vault or
the router: the hub (:mod:`memvault.channels.hub`) stores what arrives,
routes it, and queues what goes out.

The contract that keeps messages safe:

- :meth:`Adapter.start` runs until it is cancelled. It awaits the handler
  for every message before it acknowledges that message to the platform
  (Telegram's offset moves past an update only after the handler
  returned), so a crash redelivers instead of losing.
- Errors are classed, so the hub knows what to do: :class:`RateLimitedError`
  (wait ``retry_after``), :class:`ChannelError` (transient: back off and
  retry), :class:`MessageRejectedError` (this message can never be sent: no
  retry), :class:`ChannelFatalError` (bad token, another poller: the
  adapter stops and ``doctor`` says why).
- The reads (:meth:`Adapter.conversations`, :meth:`Adapter.messages`,
  :meth:`Adapter.context`) are optional; an adapter that cannot read its
  platform raises :class:`NotSupportedError` and the hub answers from
  memvault's own log of the channel.

What every adapter shares lives here too, so that an adapter module holds only
what is its platform's: the settings it keeps (:meth:`Adapter.__init__`), the one
place a platform's exceptions become the classes above (:meth:`Adapter.errors`,
each adapter saying only how in :meth:`Adapter._classify`), calls that only help
and may fail quietly (:meth:`Adapter.quietly`), the sentences several platforms
say alike (:func:`token_refused`, :func:`file_unreadable`), the waits for a
platform that says "slow down" without saying how long (:class:`RateLimitStreak`),
clients that belong to one event loop (:class:`LoopBound`), and the kind of an
attachment by its MIME type (:func:`media_kind`). Starting, stopping, restarting
with backoff, the outbox's retries and the status ``doctor`` shows are the hub's
(:mod:`memvault.channels.hub`), once for every adapter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from memvault.errors import MemvaultError
from memvault.text import scrub


class ChannelError(MemvaultError):
    """A transient failure talking to a platform (network, 5xx): retried with backoff."""

    code = "channel_failed"
    http_status = 503
    retriable = True


class RateLimitedError(ChannelError):
    """The platform asked us to wait (Telegram's 429 ``retry_after``)."""

    code = "rate_limited"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class MessageRejectedError(ChannelError):
    """The platform refused this one message (unknown chat, bad content): never retried."""

    code = "message_rejected"
    http_status = 400
    retriable = False


class ChannelFatalError(ChannelError):
    """The adapter cannot go on (bad token, another poller on the same bot)."""

    code = "channel_fatal"
    retriable = False


class PollingConflictError(ChannelFatalError):
    """Another program receives this account's messages (Telegram's 409 on getUpdates).

    Reported as an error; the hub keeps sending and tries to receive again every
    minute, so a poller that went away (an old instance) stops mattering on its own.
    """

    code = "channel_conflict"


class NotSupportedError(MemvaultError):
    """The adapter does not implement this operation (the earlier design's ``not_supported``)."""

    code = "not_supported"
    exit_code = 2
    http_status = 400


@dataclass(frozen=True)
class Attachment:
    """A file that came with a message; ``path`` is set once it is saved into the vault."""

    kind: str  # photo | document | voice | audio | video
    file_id: str  # the platform's handle, to fetch it
    name: str | None = None
    mime: str | None = None
    size: int | None = None
    path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "kind": self.kind,
            "file_id": self.file_id,
            "name": self.name,
            "mime": self.mime,
            "size": self.size,
            "path": self.path,
        }


@dataclass(frozen=True)
class Inbound:
    """One message (or button press) that arrived on a channel."""

    channel: str
    message_id: str  # unique within the channel: what makes a redelivery a duplicate
    chat_id: str
    sender_id: str
    sender_name: str
    text: str
    sent_at: datetime
    username: str | None = None
    chat_type: str = "private"
    reply_to: str | None = None
    attachments: tuple[Attachment, ...] = ()
    # Forwarded text is someone else's words: it never counts as the owner's command.
    forwarded: bool = False
    # A button press: the button's data, and the platform's id for acknowledging it.
    action: str | None = None
    action_id: str | None = None
    platform_message_id: str | None = None  # the message itself, for replies
    # Kinds of secret kept out of ``text`` before it was stored ([privacy] secrets), and
    # whether the whole text was withheld (secrets = "refuse"): the owner is told once.
    secrets_removed: tuple[str, ...] = ()
    secret_refused: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "channel": self.channel,
            "message_id": self.message_id,
            "chat_id": self.chat_id,
            "sender_id": self.sender_id,
            "sender_name": self.sender_name,
            "username": self.username,
            "chat_type": self.chat_type,
            "text": self.text,
            "sent_at": self.sent_at.isoformat(timespec="seconds"),
            "reply_to": self.reply_to,
            "attachments": [a.to_dict() for a in self.attachments],
            "forwarded": self.forwarded,
            "action": self.action,
            "action_id": self.action_id,
            "platform_message_id": self.platform_message_id,
            "secrets_removed": list(self.secrets_removed),
            "secret_refused": self.secret_refused,
        }

    def scrubbed(self) -> Inbound:
        """The message with every text field fit to store (:func:`memvault.text.scrub`):
        platform text is kept, never refused, and never blocks the channel."""
        fields: dict[str, Any] = {
            name: scrub(value) for name, value in vars(self).items() if isinstance(value, str)
        }
        attachments = tuple(
            replace(a, name=scrub(a.name) if a.name else a.name, mime=scrub(a.mime or "") or None)
            for a in self.attachments
        )
        return replace(self, **fields, attachments=attachments)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Inbound:
        """The inverse of :meth:`to_dict`."""
        return cls(
            channel=data["channel"],
            message_id=data["message_id"],
            chat_id=data["chat_id"],
            sender_id=data["sender_id"],
            sender_name=data["sender_name"],
            username=data.get("username"),
            chat_type=data.get("chat_type", "private"),
            text=data.get("text", ""),
            sent_at=datetime.fromisoformat(data["sent_at"]),
            reply_to=data.get("reply_to"),
            attachments=tuple(Attachment(**a) for a in data.get("attachments", [])),
            forwarded=bool(data.get("forwarded")),
            action=data.get("action"),
            action_id=data.get("action_id"),
            platform_message_id=data.get("platform_message_id"),
            secrets_removed=tuple(data.get("secrets_removed", ())),
            secret_refused=bool(data.get("secret_refused")),
        )


@dataclass(frozen=True)
class Button:
    """An inline button: what it says and what pressing it sends back as ``Inbound.action``."""

    label: str
    data: str


@dataclass(frozen=True)
class Outbound:
    """One message to send (already cut to the channel's length limit)."""

    chat_id: str
    text: str  # Markdown; the adapter renders it as the platform does
    reply_to: str | None = None
    media: tuple[Path, ...] = ()
    buttons: tuple[Button, ...] = ()


@dataclass(frozen=True)
class Sent:
    """What the platform said it delivered."""

    message_ids: tuple[str, ...] = ()


@dataclass
class AdapterStatus:
    """How an adapter is doing, as ``doctor`` and ``channels status`` report it."""

    state: str = "stopped"  # starting | running | backoff | failed | stopped
    error: str | None = None
    identity: str | None = None  # the bot's own name (@memvault_bot)
    restarts: int = 0
    details: dict[str, Any] = field(default_factory=dict)


InboundHandler = Callable[[Inbound], Awaitable[None]]


class AdapterState(Protocol):
    """Where an adapter keeps what must survive a restart (the last UID seen per IMAP
    folder, the last message id per listener): named text values in state.db."""

    def get(self, name: str) -> str | None: ...

    def put(self, name: str, value: str) -> None: ...


class AdapterSettings(Protocol):
    """What the base reads of a channel's settings (each adapter reads the rest)."""

    @property
    def max_message_length(self) -> int: ...


class Adapter:
    """Base class of every channel adapter; subclasses override what they support."""

    name: ClassVar[str] = "adapter"
    # Replies longer than this are cut into several messages by the hub.
    max_message_length: int = 4096
    # Whether every part of a split reply goes to the thread of the message it answers
    # (Slack's threads), rather than only the first quoting it (Telegram's replies).
    threaded: ClassVar[bool] = False
    settings: AdapterSettings

    def __init__(self, settings: AdapterSettings, *, text_limit: int | None = None) -> None:
        """Keep the channel's settings; replies are cut at its ``max_message_length``,
        or at ``text_limit`` when the platform takes less (WhatsApp's 4,096)."""
        self.settings = settings
        self.max_message_length = settings.max_message_length
        if text_limit is not None:
            self.max_message_length = min(self.max_message_length, text_limit)

    @contextmanager
    def errors(self, what: str) -> Iterator[None]:
        """The platform's exceptions raised in the block, as the classes the hub acts on.

        ``what`` names the request in the sentence (``the message to 42``). memvault's
        own errors pass untouched; what :meth:`_classify` does not know passes too (a
        bug stays a bug, logged with its traceback by the hub). An error made with
        :func:`without_cause` is raised without the platform's exception chained to it
        (that exception's text may quote a token).
        """
        try:
            yield
        except MemvaultError:
            raise
        except Exception as exc:
            mapped = self._classify(exc, what)
            if mapped is None:
                raise
            if mapped.__suppress_context__:
                raise mapped from None
            raise mapped from exc

    def _classify(self, exc: Exception, what: str) -> ChannelError | None:
        """One platform exception as one sentence of the class the hub acts on (None:
        not the platform's, raised as it is). Each adapter says how for its platform."""
        return None

    @contextmanager
    def quietly(self, event: str, *also: type[Exception], **extra: Any) -> Iterator[None]:
        """For a call that only helps (typing..., acknowledging a button): a failure is
        logged as ``event`` with the reason, never raised, so it holds up no reply.
        A :class:`ChannelError` is caught, and the exception classes in ``also``."""
        caught: tuple[type[Exception], ...] = (ChannelError, *also)
        try:
            yield
        except caught as exc:
            reason = exc.message if isinstance(exc, MemvaultError) else str(exc)
            logging.getLogger(type(self).__module__).warning(
                event, extra={**extra, "error": reason}
            )

    async def start(self, handler: InboundHandler) -> None:
        """Receive messages until cancelled, awaiting ``handler`` before acknowledging each."""
        raise NotImplementedError

    async def send(self, message: Outbound) -> Sent:
        """Send one message."""
        raise NotImplementedError

    async def typing(self, chat_id: str) -> None:
        """Show that a reply is being written (where the platform can)."""
        return None

    async def answer_action(self, action_id: str, text: str | None = None) -> None:
        """Acknowledge a button press (where the platform wants it)."""
        return None

    async def retire_buttons(
        self, chat_id: str, message_ids: tuple[str, ...], text: str, outcome: str
    ) -> None:
        """Take the buttons off a sent message (``message_ids`` as :meth:`send` returned,
        ``text`` what it said) whose question was answered: ``outcome`` says how. Where
        the platform cannot, they stay; a failure is logged, never raised."""
        return None

    async def download(self, attachment: Attachment) -> bytes:
        """The bytes of a received attachment."""
        raise NotSupportedError(f"The {self.name} channel cannot fetch attachments.")

    async def conversations(self, limit: int) -> list[dict[str, Any]]:
        """Recent conversations as the platform lists them."""
        raise NotSupportedError(f"The {self.name} channel cannot list its conversations.")

    async def messages(self, chat_id: str, limit: int) -> list[dict[str, Any]]:
        """Recent messages of a conversation as the platform has them."""
        raise NotSupportedError(f"The {self.name} channel cannot read its messages.")

    async def context(self, chat_id: str | None) -> dict[str, Any]:
        """What the platform says about a conversation."""
        raise NotSupportedError(f"The {self.name} channel has no conversation context.")

    async def identify(self) -> str | None:
        """Check the credentials; the account's display name (raises ChannelFatalError)."""
        return None

    def receiving(self) -> str | None:
        """How new messages arrive now, for an adapter with more than one way (the
        OpenClaw bridge: its gateway's events, or polling and why); None for the others."""
        return None

    async def close(self) -> None:
        """Release connections."""
        return None


# -- what several platforms say alike --------------------------------------------------------


def without_cause(error: ChannelErrorT) -> ChannelErrorT:
    """``error``, to be raised by :meth:`Adapter.errors` without the platform's
    exception chained to it (its text may quote a token)."""
    error.__suppress_context__ = True
    return error


def token_refused(platform: str, token: str, reason: str, token_env: str) -> ChannelFatalError:
    """The channel cannot go on: ``platform`` refused its ``token`` (a bot token, an
    access token), for ``reason``; the sentence names the variable that holds it."""
    return without_cause(
        ChannelFatalError(
            f"{platform} refused the {token} ({reason}); check the token in ${token_env}."
        )
    )


def file_unreadable(path: Path, exc: OSError) -> MessageRejectedError:
    """A file to send that cannot be read (gone from the vault, no permission): that one
    message can never be sent, so it is not retried."""
    return MessageRejectedError(f"The file {path} cannot be read: {exc.strerror}.")


def read_media(path: Path) -> bytes:
    """The bytes of a file to send (:func:`file_unreadable` when they cannot be read)."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise file_unreadable(path, exc) from exc


def media_kind(mime: str | None, *, voice: bool = False) -> str:
    """An attachment's :attr:`Attachment.kind` by its MIME type's major part: photo,
    audio (voice, for a voice message), video, else document."""
    major = (mime or "").partition("/")[0]
    kinds = {"image": "photo", "audio": "voice" if voice else "audio", "video": "video"}
    return kinds.get(major, "document")


def json_object(value: Any) -> dict[str, Any]:
    """``value`` where a platform's JSON has an object, else an empty one: a field that
    is missing or of another shape than documented reads as nothing, never as a crash."""
    return value if isinstance(value, dict) else {}


def json_objects(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON array (none when ``value`` is not an array)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def make_room(kept: dict[Any, Any], most: int) -> None:
    """Make room for one more entry in ``kept`` (oldest first: a dict keeps the order of
    insertion) by forgetting the oldest, so what an adapter remembers never grows."""
    while len(kept) >= most:
        del kept[next(iter(kept))]


class RateLimitStreak:
    """How long to wait when a platform says "slow down" without saying how long
    (LINE's and Meta's 429s): from 2 s, doubling up to a minute while the limits come in
    a row, and from the start again once a request went through."""

    WAITS: ClassVar[tuple[float, ...]] = (2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

    def __init__(self) -> None:
        self._in_a_row = 0

    def next_wait(self) -> float:
        """Count one more rate limit; the seconds to wait before trying again."""
        self._in_a_row += 1
        return self.WAITS[min(self._in_a_row, len(self.WAITS)) - 1]

    def reset(self) -> None:
        """A request went through: the next limit waits the shortest time again."""
        self._in_a_row = 0


ClientT = TypeVar("ClientT")
ChannelErrorT = TypeVar("ChannelErrorT", bound=ChannelError)


class LoopBound(Generic[ClientT]):
    """A platform client made on first use on the running event loop, and made anew on
    another one: aiohttp's and httpx's connections belong to the loop that opened them,
    and a send from the command line runs a loop of its own beside the hub's."""

    def __init__(
        self, opened: Callable[[], ClientT], closing: Callable[[ClientT], Awaitable[None]]
    ) -> None:
        self._open = opened
        self._close = closing
        self._held: tuple[asyncio.AbstractEventLoop, ClientT] | None = None

    def get(self) -> ClientT:
        """The client of the running loop."""
        loop = asyncio.get_running_loop()
        if self._held is None or self._held[0] is not loop:
            self._held = (loop, self._open())
        return self._held[1]

    async def close(self) -> None:
        """Close the client if it belongs to the running loop (another loop's went with
        it); calling it again does nothing."""
        held, self._held = self._held, None
        if held is not None and held[0] is asyncio.get_running_loop():
            await self._close(held[1])
