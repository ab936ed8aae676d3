"""Telegram through the Bot API (python-telegram-bot), by long polling.

:meth:`TelegramAdapter.start` asks ``getUpdates`` for what arrived, hands
each update to the hub's handler, and only then moves the offset past it
(saved through a :class:`Cursor`, so a restart resumes where it stopped):
Telegram forgets an update once a later ``getUpdates`` names a higher
offset, so a crash before that redelivers it instead of losing it.

Replies go out as Telegram's HTML (:func:`~memvault.channels.format.to_telegram_html`);
when Telegram cannot parse it, or it is longer than a message may be, the
same reply goes out as plain text. Telegram's errors are mapped once, in
:meth:`TelegramAdapter._classify`, onto the classes the hub acts on.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from telegram import (
    Bot,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
    Update,
)
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning

from memvault.channels.base import (
    Adapter,
    Attachment,
    ChannelError,
    Inbound,
    InboundHandler,
    MessageRejectedError,
    Outbound,
    PollingConflictError,
    RateLimitedError,
    Sent,
    file_unreadable,
    token_refused,
)
from memvault.channels.format import to_plain_text, to_telegram_html
from memvault.config import TelegramSettings

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
PHOTO_SUFFIXES = {".jpg", ".jpeg", ".png", ".gif", ".webp"}
CONFLICT = (
    "Another program is polling this Telegram bot token (or a webhook is set for it), "
    "so memvault would receive nothing; stop the other program or delete the webhook."
)


class Cursor(Protocol):
    """Where the polling offset is kept between runs (the hub's state database)."""

    def load(self) -> int | None:
        """The offset saved last, if any."""
        ...

    def save(self, offset: int) -> None:
        """Remember ``offset``: every update below it has been handled."""
        ...


class TelegramAdapter(Adapter):
    """One Telegram bot, polled for updates and used to send replies."""

    name = "telegram"
    settings: TelegramSettings

    def __init__(
        self, settings: TelegramSettings, token: str, *, cursor: Cursor | None = None
    ) -> None:
        super().__init__(settings)
        self._cursor = cursor
        self._offset: int | None = None
        self._ready = False
        self._requests = (
            HTTPXRequest(
                connection_pool_size=8, read_timeout=20, write_timeout=20, media_write_timeout=60
            ),
            # PTB adds the poll timeout to this read timeout for each getUpdates call.
            HTTPXRequest(connection_pool_size=1, read_timeout=10),
        )
        self._bot = Bot(
            token,
            base_url=settings.base_url,
            base_file_url=settings.base_file_url,
            request=self._requests[0],
            get_updates_request=self._requests[1],
        )

    async def identify(self) -> str:
        """``@username`` of the bot, asked of Telegram (which checks the token)."""
        await self._initialize()
        with self.errors("the bot's identity"):
            me = await self._bot.get_me()
        return f"@{me.username}"

    async def start(self, handler: InboundHandler) -> None:
        """Poll until cancelled; each update's offset moves only after ``handler`` returned."""
        await self._initialize()
        if self._offset is None and self._cursor is not None:
            self._offset = self._cursor.load()
        while True:
            try:
                with self.errors("the request for new messages"):
                    updates = await self._bot.get_updates(
                        offset=self._offset,
                        timeout=self.settings.poll_timeout,
                        allowed_updates=ALLOWED_UPDATES,
                    )
            except RateLimitedError as exc:
                await asyncio.sleep(exc.retry_after)
                continue
            for update in updates:
                inbound = self._inbound(update)
                if inbound is not None:
                    await handler(inbound)
                self._offset = update.update_id + 1
                if self._cursor is not None:
                    self._cursor.save(self._offset)
            if not updates and not self.settings.poll_timeout:
                await asyncio.sleep(1)  # short polling: do not spin

    async def send(self, message: Outbound) -> Sent:
        """Send the text (as HTML, else plain), then each media file."""
        await self._initialize()
        extra: dict[str, Any] = {}
        if message.reply_to and message.reply_to.isdigit():  # anything else: no reply link
            extra["reply_parameters"] = ReplyParameters(
                int(message.reply_to), allow_sending_without_reply=True
            )
        if message.buttons:
            keys = [InlineKeyboardButton(b.label, callback_data=b.data) for b in message.buttons]
            extra["reply_markup"] = InlineKeyboardMarkup(
                [keys[start : start + 3] for start in range(0, len(keys), 3)]
            )
        sent: list[Message] = []
        with self.errors(f"the message to chat {message.chat_id}"):
            if message.text.strip():
                sent.append(await self._send_text(message.chat_id, message.text, extra))
                extra = {}  # the reply and the buttons belong to the first message only
            for path in message.media:
                sent.append(await self._send_file(message.chat_id, path, extra))
                extra = {}
        return Sent(tuple(str(m.message_id) for m in sent))

    async def typing(self, chat_id: str) -> None:
        """Show "typing…" in the chat; a failure is logged, never raised."""
        with self.quietly("telegram typing failed", TelegramError, chat_id=chat_id):
            await self._initialize()
            await self._bot.send_chat_action(chat_id, ChatAction.TYPING)

    async def answer_action(self, action_id: str, text: str | None = None) -> None:
        """Acknowledge a button press (stops its spinner); a failure is logged, never raised."""
        with self.quietly("telegram callback answer failed", TelegramError, action_id=action_id):
            await self._initialize()
            await self._bot.answer_callback_query(action_id, text=text)

    async def retire_buttons(
        self, chat_id: str, message_ids: tuple[str, ...], text: str, outcome: str
    ) -> None:
        """Take the inline keyboard off the message that carried it (the first one sent);
        its text stays, and the outcome was told in a message of its own."""
        if not message_ids or not message_ids[0].isdigit():
            return
        with self.quietly("telegram buttons not taken back", TelegramError, chat_id=chat_id):
            await self._initialize()
            await self._bot.edit_message_reply_markup(
                chat_id, int(message_ids[0]), reply_markup=None
            )

    async def download(self, attachment: Attachment) -> bytes:
        """The bytes of a received photo or file."""
        await self._initialize()
        with self.errors(f"the file {attachment.name or attachment.file_id}"):
            file = await self._bot.get_file(attachment.file_id)
            try:
                return bytes(await file.download_as_bytearray())
            except InvalidToken as exc:  # PTB reads a 404 for the file itself as a bad token
                raise MessageRejectedError(
                    f"Telegram no longer has the file {attachment.name or attachment.file_id}."
                ) from exc

    async def close(self) -> None:
        """Close the HTTP connections; calling it again does nothing."""
        self._ready = False
        await self._bot.shutdown()
        for request in self._requests:  # never initialised: PTB's shutdown left them open
            await request.shutdown()

    # -- internals -------------------------------------------------------------------------

    async def _initialize(self) -> None:
        if not self._ready:
            with self.errors("the bot's identity"):
                await self._bot.initialize()
            self._ready = True

    async def _send_text(self, chat_id: str, text: str, extra: dict[str, Any]) -> Message:
        html = to_telegram_html(text)
        if len(html) <= self.max_message_length:
            try:
                return await self._bot.send_message(
                    chat_id, html, parse_mode=ParseMode.HTML, **extra
                )
            except BadRequest as exc:
                if "can't parse entities" not in exc.message.lower():
                    raise
                log.warning("telegram refused the HTML", extra={"error": exc.message})
        return await self._bot.send_message(chat_id, to_plain_text(text), **extra)

    async def _send_file(self, chat_id: str, path: Path, extra: dict[str, Any]) -> Message:
        try:
            with path.open("rb") as file:
                if path.suffix.lower() in PHOTO_SUFFIXES:
                    return await self._bot.send_photo(chat_id, file, **extra)
                return await self._bot.send_document(chat_id, file, filename=path.name, **extra)
        except OSError as exc:
            raise file_unreadable(path, exc) from exc

    def _classify(self, exc: Exception, what: str) -> ChannelError | None:
        """Telegram's exceptions as the classes the hub acts on, each one sentence
        (BadRequest is a NetworkError to PTB: the order matters)."""
        if isinstance(exc, RetryAfter):
            seconds = _seconds(exc)
            return RateLimitedError(
                f"Telegram asked memvault to wait {seconds:g} seconds (flood control).",
                retry_after=seconds,
            )
        if isinstance(exc, InvalidToken):  # not chained: PTB's message quotes the token
            return token_refused(
                "Telegram", "bot token", "401 Unauthorized", self.settings.token_env
            )
        if isinstance(exc, Conflict):
            return PollingConflictError(CONFLICT)
        if isinstance(exc, BadRequest | Forbidden):
            return MessageRejectedError(f"Telegram refused {what}: {_sentence(exc)}")
        if isinstance(exc, NetworkError):  # timeouts and 5xx answers too
            return ChannelError(f"Telegram could not be reached for {what}: {_sentence(exc)}")
        if isinstance(exc, TelegramError):
            return ChannelError(f"Telegram failed on {what}: {_sentence(exc)}")
        return None

    def _inbound(self, update: Update) -> Inbound | None:
        """The update as an :class:`Inbound`, or None when it carries nothing memvault reads."""
        if update.callback_query is not None:
            return self._action(update.update_id, update.callback_query)
        message = update.message or update.edited_message
        if message is None:
            return None
        attachments = _attachments(message)
        text = message.text or message.caption or ""
        if not text and message.sticker is not None:
            text = "[sticker]"
        if not text and not attachments:
            return None
        sender = message.from_user
        return Inbound(
            channel=self.name,
            message_id=str(update.update_id),
            chat_id=str(message.chat.id),
            sender_id=str(sender.id if sender else message.chat.id),
            sender_name=sender.full_name if sender else (message.chat.title or ""),
            username=sender.username if sender else None,
            chat_type=str(message.chat.type),
            text=text,
            sent_at=message.date,
            reply_to=(
                str(message.reply_to_message.message_id) if message.reply_to_message else None
            ),
            attachments=attachments,
            forwarded=message.forward_origin is not None,
            platform_message_id=str(message.message_id),
        )

    def _action(self, update_id: int, query: CallbackQuery) -> Inbound:
        message = query.message
        return Inbound(
            channel=self.name,
            message_id=str(update_id),
            chat_id=str(message.chat.id if message else query.from_user.id),
            sender_id=str(query.from_user.id),
            sender_name=query.from_user.full_name,
            username=query.from_user.username,
            chat_type=str(message.chat.type) if message else "private",
            text=query.data or "",
            sent_at=datetime.now(UTC),
            action=query.data,
            action_id=query.id,
            platform_message_id=str(message.message_id) if message else None,
        )


def _attachments(message: Message) -> tuple[Attachment, ...]:
    found: list[Attachment] = []
    if message.photo:
        largest = max(message.photo, key=lambda size: size.width * size.height)
        found.append(Attachment("photo", largest.file_id, None, "image/jpeg", largest.file_size))
    for kind in ("document", "voice", "audio", "video"):
        media = getattr(message, kind)
        if media is not None:
            name = getattr(media, "file_name", None)
            found.append(Attachment(kind, media.file_id, name, media.mime_type, media.file_size))
    return tuple(found)


def _seconds(exc: RetryAfter) -> float:
    """``retry_after`` in seconds, an int or a timedelta as ``$PTB_TIMEDELTA`` chooses."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)  # "int will become timedelta"
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _sentence(exc: TelegramError) -> str:
    return exc.message.rstrip(".") + "."
