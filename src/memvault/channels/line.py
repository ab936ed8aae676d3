"""LINE through the Messaging API (line-bot-sdk v3): a signed webhook in, reply and push out.

LINE cannot be polled: it POSTs every event to the bot's webhook URL, signed
with the channel secret. The daemon serves that URL
(:mod:`memvault.gateway.routes.line`) and hands each body to
:meth:`LineAdapter.receive_webhook`, which checks the signature, reads the
events and passes the messages to :meth:`LineAdapter.start`, running on the
hub's loop, which awaits the hub's handler for each. The route answers 200
only after that, so what LINE was told it delivered is stored. A webhook that
failed is delivered again (with redelivery on in the LINE console) and keeps
its message ids, which the hub's inbox stores once: a restart neither replays
nor drops a message.

Replies go out with the reply token of the message they answer: usable once,
for about a minute, and free. A reply that comes later, a second part, or a
message nobody asked for is pushed to the chat instead (pushes count against
the plan's monthly quota), with a retry key, so a push retried after a lost
answer is delivered once. LINE shows plain text: Markdown is laid out as
:func:`~memvault.channels.format.to_plain_text`. LINE's errors are mapped
once, in :meth:`LineAdapter._classify`, onto the classes the hub acts on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import mimetypes
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import aiohttp
from linebot.v3.exceptions import InvalidSignatureError  # type: ignore[import-untyped]
from linebot.v3.messaging import (  # type: ignore[import-untyped]
    ApiException,
    AsyncApiClient,
    AsyncMessagingApi,
    AsyncMessagingApiBlob,
    Configuration,
    PostbackAction,
    PushMessageRequest,
    QuickReply,
    QuickReplyItem,
    ReplyMessageRequest,
    ShowLoadingAnimationRequest,
    TextMessage,
)
from linebot.v3.webhook import WebhookParser  # type: ignore[import-untyped]
from linebot.v3.webhooks import (  # type: ignore[import-untyped]
    AudioMessageContent,
    FileMessageContent,
    GroupSource,
    ImageMessageContent,
    LocationMessageContent,
    MessageEvent,
    PostbackEvent,
    RoomSource,
    StickerMessageContent,
    TextMessageContent,
    UserSource,
    VideoMessageContent,
)

from memvault.channels.base import (
    Adapter,
    AdapterState,
    Attachment,
    ChannelError,
    Inbound,
    InboundHandler,
    LoopBound,
    MessageRejectedError,
    Outbound,
    RateLimitedError,
    RateLimitStreak,
    Sent,
    make_room,
    token_refused,
)
from memvault.channels.format import split_text, to_plain_text
from memvault.channels.webhook import WebhookBodyError, WebhookInbox, WebhookSignatureError
from memvault.config import LineSettings
from memvault.errors import MemvaultError

log = logging.getLogger(__name__)

# LINE: "use the reply token within one minute of receiving the webhook"; a margin kept.
REPLY_WINDOW = 50.0
REQUEST_TIMEOUT = 20.0
DOWNLOAD_TIMEOUT = 120.0
# A sender's name is asked of LINE before the message is stored: never for long.
NAME_TIMEOUT = 3.0
MONTHLY_LIMIT_WAIT = 3600.0
MESSAGES_PER_REQUEST = 5
TEXT_LIMIT = 5000  # characters as LINE counts them: UTF-16 code units
QUICK_REPLY_ITEMS = 13
LABEL_LIMIT = 20
LOADING_SECONDS = 20
_REMEMBERED = 1000  # reply tokens, names and retry keys kept at most


class _StaleReplyTokenError(MessageRejectedError):
    """LINE refused a reply token (used, or too old): the message is pushed instead."""


class _AlreadyAcceptedError(MessageRejectedError):
    """A push LINE accepted before under the same retry key (a lost answer, retried)."""

    def __init__(self, message: str, ids: tuple[str, ...]) -> None:
        super().__init__(message)
        self.ids = ids


@dataclass(frozen=True)
class _ReplyToken:
    chat_id: str
    token: str
    expires: float  # time.monotonic()


@dataclass(frozen=True)
class _Received:
    """One message of a webhook, with its reply token and when the webhook came."""

    message: Inbound
    reply_token: str | None
    received: float  # time.monotonic()


@dataclass(frozen=True)
class _Clients:
    """The SDK's clients of one event loop (aiohttp's belong to the loop that opened them)."""

    api: AsyncApiClient
    data: AsyncApiClient
    messaging: AsyncMessagingApi
    blob: AsyncMessagingApiBlob

    async def close(self) -> None:
        """Close both HTTP clients."""
        await self.api.close()
        await self.data.close()


class LineAdapter(Adapter):
    """One LINE Official Account's Messaging API channel.

    ``state`` is taken as every adapter's is; a webhook keeps no position to save, and
    reply tokens outlive no restart worth keeping them for.
    """

    name = "line"
    settings: LineSettings

    def __init__(
        self,
        settings: LineSettings,
        secret: str,
        token: str,
        *,
        state: AdapterState | None = None,
    ) -> None:
        super().__init__(settings)
        self._token = token
        self._parser = WebhookParser(secret)
        self._state = state
        self._clients = LoopBound(self._open_clients, _Clients.close)
        self._inbox: WebhookInbox[_Received] = WebhookInbox("LINE", "LINE")
        self._reply_tokens: dict[str, _ReplyToken] = {}  # by message (or event) id
        self._names: dict[tuple[str, str], str] = {}
        self._retry_keys: dict[tuple[str, str], str] = {}
        self._rate_limits = RateLimitStreak()  # a 429 seldom says how long to wait

    # -- the platform --------------------------------------------------------------------

    async def identify(self) -> str:
        """The bot's name and basic id (``memvault (@123abcde)``), asked of LINE."""
        with self.errors("the bot's identity"):
            info = await self._api().messaging.get_bot_info(_request_timeout=REQUEST_TIMEOUT)
        return f"{info.display_name} ({info.basic_id})"

    async def start(self, handler: InboundHandler) -> None:
        """Hand what the webhook receives to ``handler``, in order, until cancelled."""

        async def take(item: _Received) -> None:
            self._keep_reply_token(item.message, item.reply_token, item.received)
            await handler(await self._named(item.message))

        await self._inbox.serve(take)

    async def receive_webhook(self, body: bytes, signature: str | None) -> int:
        """Check and read one webhook body LINE posted, and return once the hub stored its
        messages (how many). Callable from any thread's loop: the daemon's HTTP server.

        Raises :class:`WebhookSignatureError` when LINE did not sign it,
        :class:`WebhookBodyError` when it is not LINE's JSON, and :class:`ChannelError`
        when the channel does not run or storing failed (LINE should deliver it again).
        """
        events = self._parse(body, signature)
        received = time.monotonic()
        messages = [
            _Received(message, token, received)
            for message, token in filter(None, map(self._inbound, events))
        ]
        if not messages:
            return 0  # the console's "Verify", a follow, an unsend: nothing to store
        await self._inbox.hand_over(messages)
        return len(messages)

    async def send(self, message: Outbound) -> Sent:
        """Send the text as a reply while its token is fresh, else as a push; buttons become
        quick replies, and files are named (LINE takes files only by public URL)."""
        texts = self._texts(message)
        if not texts:
            raise MessageRejectedError("There is nothing to send to LINE: the text is empty.")
        bubbles = [TextMessage(text=text) for text in texts]
        if message.buttons:
            bubbles[-1] = TextMessage(text=texts[-1], quickReply=_quick_reply(message))
        ids: list[str] = []
        for start in range(0, len(bubbles), MESSAGES_PER_REQUEST):
            batch = bubbles[start : start + MESSAGES_PER_REQUEST]
            ids += await self._deliver(message.chat_id, message.reply_to, batch)
        return Sent(tuple(ids))

    async def typing(self, chat_id: str) -> None:
        """Show LINE's loading animation (one-on-one chats only); a failure is logged."""
        if not chat_id.startswith("U"):
            return  # groups and rooms have no loading animation
        request = ShowLoadingAnimationRequest(chatId=chat_id, loadingSeconds=LOADING_SECONDS)
        with self.quietly("line loading animation failed"), self.errors("the loading animation"):
            await self._api().messaging.show_loading_animation(
                request, _request_timeout=REQUEST_TIMEOUT
            )

    async def download(self, attachment: Attachment) -> bytes:
        """The bytes of a received image, video, audio or file, from LINE's data host."""
        with self.errors(f"the file {attachment.name or attachment.file_id}"):
            data = await self._api().blob.get_message_content(
                attachment.file_id, _request_timeout=DOWNLOAD_TIMEOUT
            )
        if not data:  # 202: LINE is still converting a video or audio
            raise ChannelError(f"LINE has not finished preparing {attachment.kind} yet.")
        return bytes(data)

    async def close(self) -> None:
        """Close the HTTP connections; calling it again does nothing."""
        await self._clients.close()

    # -- receiving -----------------------------------------------------------------------

    def _parse(self, body: bytes, signature: str | None) -> list[Any]:
        """The events of a webhook body, once its signature is LINE's."""
        if not signature:
            raise WebhookSignatureError(
                "The request has no X-Line-Signature header; only LINE posts to this webhook."
            )
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WebhookBodyError("The webhook body is not UTF-8 text.") from exc
        try:
            payload = self._parser.parse(text, signature, as_payload=True)
        except InvalidSignatureError:
            log.warning(
                "a webhook with a wrong signature was refused; if LINE sent it, check "
                f"${self.settings.secret_env}",
                extra={"channel": self.name},
            )
            raise WebhookSignatureError(
                "The X-Line-Signature does not match the body; only LINE, signing with this "
                "channel's secret, posts to this webhook."
            ) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise WebhookBodyError(
                "The webhook body is not the JSON LINE sends (destination, events)."
            ) from exc
        return list(payload.events or [])

    def _inbound(self, event: Any) -> tuple[Inbound, str | None] | None:
        """A message or button event as an :class:`Inbound` and its reply token."""
        if not isinstance(event, MessageEvent | PostbackEvent):
            return None  # follow, join, unsend, ...: nothing anyone said
        chat_id, chat_type, user_id = _where(event.source)
        if chat_id is None:
            return None
        if event.delivery_context.is_redelivery:
            log.info("line redelivered an event", extra={"event": event.webhook_event_id})
        common: dict[str, Any] = {
            "channel": self.name,
            "chat_id": chat_id,
            "chat_type": chat_type,
            "sender_id": user_id or chat_id,
            "sender_name": "",
            "sent_at": datetime.fromtimestamp(event.timestamp / 1000, UTC),
        }
        if isinstance(event, PostbackEvent):
            data = str(event.postback.data)
            # A postback has no message id; its event id is as stable across redeliveries.
            inbound = Inbound(
                message_id=str(event.webhook_event_id),
                text=data,
                action=data,
                action_id=str(event.webhook_event_id),
                **common,
            )
            return inbound, event.reply_token
        content = event.message
        text, attachments, quoted = _content(content)
        inbound = Inbound(
            message_id=str(content.id),
            text=text,
            attachments=attachments,
            reply_to=quoted,
            platform_message_id=str(content.id),
            **common,
        )
        return inbound, event.reply_token

    def _keep_reply_token(self, message: Inbound, token: str | None, received: float) -> None:
        now = time.monotonic()
        for key in [k for k, kept in self._reply_tokens.items() if kept.expires <= now]:
            del self._reply_tokens[key]
        if token:
            make_room(self._reply_tokens, _REMEMBERED)
            expires = received + REPLY_WINDOW
            self._reply_tokens[message.message_id] = _ReplyToken(message.chat_id, token, expires)

    async def _named(self, message: Inbound) -> Inbound:
        """The message with its sender's display name, as LINE's profile says it."""
        if message.sender_name or (
            message.chat_type != "private" and message.sender_id == message.chat_id
        ):
            return message  # a group member LINE did not name (no user id): no profile
        key = (message.chat_id, message.sender_id)
        name = self._names.get(key)
        if name is None:
            try:
                name = await asyncio.wait_for(self._profile_name(message), NAME_TIMEOUT)
            except (MemvaultError, TimeoutError) as exc:
                text = exc.message if isinstance(exc, MemvaultError) else "no answer in time"
                log.info("line profile unavailable", extra={"error": text})
                return message
            make_room(self._names, _REMEMBERED)
            self._names[key] = name
        return replace(message, sender_name=name)

    async def _profile_name(self, message: Inbound) -> str:
        api = self._api().messaging
        user, chat = message.sender_id, message.chat_id
        with self.errors(f"the profile of {user}"):
            if message.chat_type == "group":
                profile = await api.get_group_member_profile(chat, user)
            elif message.chat_type == "room":
                profile = await api.get_room_member_profile(chat, user)
            else:
                profile = await api.get_profile(user)
        return str(profile.display_name)

    # -- sending -------------------------------------------------------------------------

    def _texts(self, message: Outbound) -> list[str]:
        """The message as LINE text bubbles, each within LINE's 5,000 characters."""
        text = to_plain_text(message.text).strip() if message.text.strip() else ""
        if message.media:
            names = ", ".join(path.name for path in message.media)
            note = f"(Not sent: {names}; LINE takes files only by public URL. It is in the vault.)"
            text = f"{text}\n\n{note}" if text else note
        if not text:
            return []
        parts: list[str] = []
        for part in split_text(text, TEXT_LIMIT):
            # Characters beyond the BMP count twice: half the limit always fits.
            fits = len(part.encode("utf-16-le")) // 2 <= TEXT_LIMIT
            parts += [part] if fits else split_text(part, TEXT_LIMIT // 2)
        return parts

    async def _deliver(self, chat_id: str, reply_to: str | None, batch: list[Any]) -> list[str]:
        """Reply with a fresh token of the chat, else push; the ids LINE gave the messages."""
        token = self._take_reply_token(chat_id, reply_to)
        if token is not None:
            try:
                with self.errors(f"the reply in chat {chat_id}"):
                    answer = await self._api().messaging.reply_message(
                        ReplyMessageRequest(replyToken=token, messages=batch),
                        _request_timeout=REQUEST_TIMEOUT,
                    )
                return [str(sent.id) for sent in answer.sent_messages]
            except _StaleReplyTokenError:
                log.info("line refused a reply token; pushing instead", extra={"chat": chat_id})
        return await self._push(chat_id, batch)

    async def _push(self, chat_id: str, batch: list[Any]) -> list[str]:
        # The same messages retried carry the same key: LINE delivers them once.
        what = (chat_id, json.dumps([bubble.to_dict() for bubble in batch], sort_keys=True))
        if what not in self._retry_keys:
            make_room(self._retry_keys, _REMEMBERED)
            self._retry_keys[what] = str(uuid.uuid4())
        try:
            with self.errors(f"the message to chat {chat_id}"):
                answer = await self._api().messaging.push_message(
                    PushMessageRequest(to=chat_id, messages=batch),
                    x_line_retry_key=self._retry_keys[what],
                    _request_timeout=REQUEST_TIMEOUT,
                )
            ids = [str(sent.id) for sent in answer.sent_messages]
        except _AlreadyAcceptedError as exc:
            ids = list(exc.ids)
        except ChannelError as exc:
            if not exc.retriable:
                self._retry_keys.pop(what, None)
            raise
        self._retry_keys.pop(what, None)
        return ids

    def _take_reply_token(self, chat_id: str, reply_to: str | None) -> str | None:
        """The unexpired reply token of the message replied to, else the chat's newest one
        (any of a chat's tokens answers into that chat); each is used once."""
        now = time.monotonic()
        key = reply_to if reply_to in self._reply_tokens else None
        if key is None:
            fresh = [k for k, kept in self._reply_tokens.items() if kept.chat_id == chat_id]
            key = fresh[-1] if fresh else None
        kept = self._reply_tokens.pop(key, None) if key is not None else None
        if kept is None or kept.chat_id != chat_id or kept.expires <= now:
            return None
        return kept.token

    # -- errors and clients --------------------------------------------------------------

    def _api(self) -> _Clients:
        """The SDK's clients on the running loop (opened on first use there)."""
        return self._clients.get()

    def _open_clients(self) -> _Clients:
        api = AsyncApiClient(
            Configuration(host=self.settings.api_base.rstrip("/"), access_token=self._token)
        )
        data = AsyncApiClient(
            Configuration(host=self.settings.data_api_base.rstrip("/"), access_token=self._token)
        )
        return _Clients(api, data, AsyncMessagingApi(api), AsyncMessagingApiBlob(data))

    @contextmanager
    def errors(self, what: str) -> Iterator[None]:
        """As every adapter's; a request that went through ends a streak of rate limits."""
        with super().errors(what):
            yield
        self._rate_limits.reset()

    def _classify(self, exc: Exception, what: str) -> ChannelError | None:
        """LINE's errors as the classes the hub acts on, each one sentence."""
        if isinstance(exc, ApiException):
            return self._classed(exc, what)
        if isinstance(exc, aiohttp.ClientError | TimeoutError):
            reason = str(exc).rstrip(".") or type(exc).__name__
            return ChannelError(f"LINE could not be reached for {what}: {reason}.")
        return None

    def _classed(self, exc: Any, what: str) -> ChannelError:
        status = int(exc.status or 0)
        said, ids = _said(exc.body)
        if status == 401:
            return token_refused(
                "LINE", "channel access token", "401 Unauthorized", self.settings.token_env
            )
        if status == 429:
            streak_wait = self._rate_limits.next_wait()
            if "monthly limit" in said.lower():
                return RateLimitedError(
                    f"LINE's monthly message limit for this channel is reached ({said}); "
                    f"trying again in {MONTHLY_LIMIT_WAIT / 60:g} minutes.",
                    retry_after=MONTHLY_LIMIT_WAIT,
                )
            wait = _retry_after(exc.headers) or streak_wait
            return RateLimitedError(
                f"LINE asked memvault to slow down ({said}); trying again in {wait:g} s.",
                retry_after=wait,
            )
        if status == 409 and "retry key" in said.lower():
            return _AlreadyAcceptedError(f"LINE had already accepted {what}.", ids)
        if status == 400 and "reply token" in said.lower():
            return _StaleReplyTokenError(f"LINE refused the reply token for {what}: {said}")
        if 400 <= status < 500:
            return MessageRejectedError(f"LINE refused {what} ({status}): {said}")
        return ChannelError(f"LINE failed on {what} ({status or 'no answer'}): {said}")


# -- helpers -----------------------------------------------------------------------------------


def _where(source: Any) -> tuple[str | None, str, str | None]:
    """``(chat_id, chat_type, user_id)`` of an event's source."""
    if isinstance(source, GroupSource):
        return str(source.group_id), "group", source.user_id
    if isinstance(source, RoomSource):
        return str(source.room_id), "room", source.user_id
    if isinstance(source, UserSource) and source.user_id:
        return str(source.user_id), "private", str(source.user_id)
    return None, "private", None


def _content(content: Any) -> tuple[str, tuple[Attachment, ...], str | None]:
    """``(text, attachments, quoted message id)`` of a message's content."""
    message_id = str(content.id)
    if isinstance(content, TextMessageContent):
        return str(content.text), (), content.quoted_message_id
    if isinstance(content, ImageMessageContent | VideoMessageContent | AudioMessageContent):
        kind, mime = {
            "image": ("photo", "image/jpeg"),
            "video": ("video", "video/mp4"),
            "audio": ("voice", "audio/mp4"),
        }[content.type]
        provider = content.content_provider
        if provider.type != "line":  # sent through another service: LINE holds no bytes
            return f"[{content.type}: {provider.original_content_url}]", (), None
        return "", (Attachment(kind, message_id, None, mime, None),), None
    if isinstance(content, FileMessageContent):
        guessed = mimetypes.guess_type(content.file_name)[0]
        file = Attachment("document", message_id, content.file_name, guessed, content.file_size)
        return "", (file,), None
    if isinstance(content, StickerMessageContent):
        words = ", ".join((content.keywords or [])[:3])
        text = content.text or (f"[sticker: {words}]" if words else "[sticker]")
        return str(text), (), content.quoted_message_id
    if isinstance(content, LocationMessageContent):
        place = ", ".join(str(p) for p in (content.title, content.address) if p)
        where = f"{content.latitude}, {content.longitude}"
        return f"[location] {place} ({where})" if place else f"[location] {where}", (), None
    return f"[{content.type} message]", (), None


def _quick_reply(message: Outbound) -> Any:
    """The buttons as LINE quick replies: a postback each, shown as its label when tapped."""
    items = [
        QuickReplyItem(
            action=PostbackAction(
                label=button.label[:LABEL_LIMIT], data=button.data, displayText=button.label
            )
        )
        for button in message.buttons[:QUICK_REPLY_ITEMS]
    ]
    return QuickReply(items=items)


def _said(body: Any) -> tuple[str, tuple[str, ...]]:
    """LINE's error body (``{"message", "details": [{"message", "property"}]}``) as one
    sentence, and the ids of messages it says were sent (a retried push)."""
    try:
        data = json.loads(body) if body else {}
    except (TypeError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    said = str(data.get("message") or "no reason given").rstrip(".")
    details = [
        f"{d.get('property')}: {d.get('message')}" if d.get("property") else str(d.get("message"))
        for d in data.get("details") or []
        if isinstance(d, dict)
    ]
    if details:
        said += " (" + "; ".join(details) + ")"
    ids = tuple(str(m.get("id")) for m in data.get("sentMessages") or [] if isinstance(m, dict))
    return said + ".", ids


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(float(value), 1.0) if value is not None else None
    except ValueError:
        return None
