"""The platforms' messages as the ``openclaw`` command line reads them.

``openclaw message read --json`` answers in each platform's own shape (Discord's,
Slack's, Matrix's, Telegram's, with OpenClaw's ``timestampMs``); :func:`read_messages`
reads the fields each one names differently into :class:`PlatformMessage`, oldest
first. A chat id is ``<channel>:<target>`` (:func:`split_chat`) and a sender id
``<channel>:<the target that reaches them>`` (:func:`sender_id`), so ids of different
platforms never collide. The adapter that drives the command is
:mod:`memvault.channels.openclaw_bridge`.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from memvault.channels.base import (
    Attachment,
    MessageRejectedError,
    json_object,
    json_objects,
    media_kind,
)

# Channels whose direct-message target is ``user:<id>`` (OpenClaw's target formats,
# docs/cli/message.md); elsewhere the sender's id is itself a target.
_USER_TARGETS = frozenset({"discord", "slack", "mattermost", "msteams"})
_CHANNEL_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_NUMBER = re.compile(r"^\d+(\.\d+)?$")


@dataclass(frozen=True)
class PlatformMessage:
    """One message as ``openclaw message read`` gave it, in the fields memvault reads."""

    id: str
    sender: str  # the platform's id of the author
    sender_name: str
    username: str | None
    text: str
    sent_at: datetime | None
    own: bool  # marked as the reading bot's own (Matrix's isSelf)
    bot: bool  # written by a bot (Discord's author.bot, Slack's bot_id)
    reply_to: str | None
    attachments: tuple[Attachment, ...]

    def to_dict(self, channel: str) -> dict[str, Any]:
        """JSON-ready form, the sender as memvault names them."""
        return {
            "id": self.id,
            "sender_id": sender_id(channel, self.sender),
            "sender_name": self.sender_name,
            "username": self.username,
            "text": self.text,
            "sent_at": self.sent_at.isoformat(timespec="seconds") if self.sent_at else None,
            "from_bot": self.own or self.bot,
            "reply_to": self.reply_to,
            "attachments": [a.to_dict() for a in self.attachments],
        }


def split_chat(chat_id: str) -> tuple[str, str]:
    """``("discord", "channel:123")`` from ``discord:channel:123``."""
    channel, _, target = chat_id.partition(":")
    if not _CHANNEL_NAME.match(channel) or not target.strip():
        raise MessageRejectedError(
            f"{chat_id!r} is not an OpenClaw conversation; write it as <channel>:<target>, "
            "e.g. 'telegram:123456789' or 'discord:channel:123'."
        )
    return channel, target


def sender_id(channel: str, author: str) -> str:
    """How memvault names a sender: ``<channel>:<the target that reaches them>``."""
    if channel in _USER_TARGETS and not author.startswith("user:"):
        author = f"user:{author}"
    return f"{channel}:{author}"


def read_messages(answer: dict[str, Any]) -> list[PlatformMessage]:
    """The messages of a ``message read --json`` answer, oldest first."""
    payload = answer.get("payload", answer)
    raw = payload.get("messages") if isinstance(payload, dict) else None
    if not isinstance(raw, list):
        return []
    found = [(n, m) for n, item in enumerate(raw) if (m := _message(item)) is not None]
    # Most platforms answer newest first (Telegram oldest first): order by time, then id.
    found.sort(key=lambda pair: (_moment(pair[1]), _rank(pair[1].id), -pair[0]))
    return [m for _, m in found]


def _message(raw: Any) -> PlatformMessage | None:
    """One platform message; None when it has no id."""
    if not isinstance(raw, dict):
        return None
    message_id = first_field(raw, "id", "messageId", "eventId", "ts")
    if message_id is None:
        return None
    author = json_object(raw.get("author"))
    profile = json_object(raw.get("user_profile"))
    props = json_object(raw.get("props"))
    sender = (
        first_field(author, "id")
        or first_field(raw, "senderId", "user_id", "userId", "user", "sender", "from")
        or "unknown"
    )
    # Telegram's ``sender`` is a display name beside ``senderId``; Matrix's is the id.
    named = first_field(raw, "sender") if raw.get("senderId") is not None else None
    name = (
        first_field(author, "global_name", "username")
        or first_field(raw, "authorTag")
        or first_field(profile, "display_name", "real_name")
        or named
        or first_field(raw, "senderUsername", "username")
        or sender
    )
    return PlatformMessage(
        id=message_id,
        sender=sender,
        sender_name=name,
        username=first_field(author, "username") or first_field(raw, "senderUsername", "username"),
        text=first_field(raw, "content", "text", "body", "message", "caption") or "",
        sent_at=_time(raw),
        own=any(_yes(raw.get(key)) for key in ("isSelf", "fromMe", "isFromMe", "self")),
        bot=_yes(author.get("bot"))
        or _yes(raw.get("fromBot"))
        or _yes(raw.get("isBot"))
        or raw.get("bot_id") is not None
        or raw.get("subtype") == "bot_message"
        or _yes(props.get("from_bot")),
        reply_to=_reply_to(raw, message_id),
        attachments=_attachments(raw),
    )


def _reply_to(raw: dict[str, Any], message_id: str) -> str | None:
    reference = raw.get("message_reference")
    if isinstance(reference, dict) and reference.get("message_id"):
        return str(reference["message_id"])
    relates = raw.get("relatesTo")
    if isinstance(relates, dict) and relates.get("eventId"):
        return str(relates["eventId"])
    thread = first_field(raw, "replyToId", "parent_id", "thread_ts")
    return thread if thread != message_id else None


def _attachments(raw: dict[str, Any]) -> tuple[Attachment, ...]:
    """Discord's ``attachments`` (with their CDN address), Slack's ``files``, Matrix's
    ``attachment`` and Telegram's ``mediaType``: what the read tells of each file."""
    found: list[Attachment] = []
    for item in [*json_objects(raw.get("attachments")), *json_objects(raw.get("files"))]:
        mime = first_field(item, "content_type", "mimetype", "mime")
        size = item.get("size")
        found.append(
            Attachment(
                kind=media_kind(mime),
                # Discord's ``url`` is public; Slack's ``url_private`` wants the bot's token.
                file_id=first_field(item, "url", "id") or "",
                name=first_field(item, "filename", "name", "title"),
                mime=mime,
                size=size if isinstance(size, int) else None,
            )
        )
    single = raw.get("attachment")
    if isinstance(single, dict):
        kind = {"image": "photo", "file": "document"}.get(str(single.get("kind")), "document")
        found.append(
            Attachment(kind, first_field(raw, "eventId") or "", first_field(single, "filename"))
        )
    media = first_field(raw, "mediaType")
    if media:
        kinds = {"photo": "photo", "voice": "voice", "audio": "audio", "video": "video"}
        found.append(Attachment(kinds.get(media, "document"), first_field(raw, "mediaRef") or ""))
    return tuple(found)


def _time(raw: dict[str, Any]) -> datetime | None:
    """When it was sent: OpenClaw's ``timestampMs``, else the platform's own field
    (ISO text, seconds, or milliseconds, as OpenClaw's normalizeTimestamp reads them)."""
    millis = raw.get("timestampMs")
    if isinstance(millis, int | float) and not isinstance(millis, bool):
        return datetime.fromtimestamp(millis / 1000, UTC)
    for key in ("timestamp", "ts", "create_at", "createdAt", "date"):
        value = raw.get(key)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value if value < 1e12 else value / 1000, UTC)
        text = str(value).strip()
        if _NUMBER.match(text):
            number = float(text)
            seconds = number / 1000 if "." not in text and len(text) >= 13 else number
            return datetime.fromtimestamp(seconds, UTC)
        with contextlib.suppress(ValueError):
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return None


def _moment(message: PlatformMessage) -> float:
    return message.sent_at.timestamp() if message.sent_at else 0.0


def _rank(message_id: str) -> Decimal:
    """A numeric id (Discord's snowflakes, Slack's ``ts``, Telegram's) as a number."""
    return Decimal(message_id) if _NUMBER.match(message_id) else Decimal(0)


def first_field(raw: dict[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` holding a non-empty text (or a number, as text)."""
    for key in keys:
        value = raw.get(key)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float | str) and str(value).strip():
            return str(value).strip()
    return None


def _yes(value: Any) -> bool:
    return value is True or value == "true"
