"""WhatsApp's wire format: what Meta's webhook POSTs and what memvault sends it.

The adapter (:mod:`memvault.channels.whatsapp`) owns the life of the channel: the
webhook's signature, the 24-hour windows, retries and errors. This module only reads
and writes Meta's JSON: a webhook's ``messages`` changes as :class:`Inbound` messages
and ``failed`` statuses, a file's message kind within Meta's limits, reply buttons (or
a list, past three), a text as a template variable, and Meta's error as a phrase.
Payloads: developers.facebook.com/docs/whatsapp/cloud-api/webhooks/payload-examples.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2 as httpx

from memvault.channels.base import Attachment, Button, Inbound, json_object, json_objects
from memvault.channels.format import StarMarkup

log = logging.getLogger("memvault.channels.whatsapp")

CHANNEL = "whatsapp"
BODY_LIMIT = 1024  # an interactive message's body
BUTTON_TITLE = 20
ROW_TITLE = 24
BUTTON_ID = 256
REPLY_BUTTONS = 3
LIST_ROWS = 10
TEMPLATE_TEXT_LIMIT = 900  # the variable's share of a template body of at most 1,024
# Which files go as which kind of message, and how large each may be (Meta's limits).
MEDIA = {
    "image": ({"image/jpeg", "image/png"}, 5 * 1024 * 1024),
    "video": ({"video/mp4", "video/3gpp"}, 16 * 1024 * 1024),
    "audio": (
        {"audio/aac", "audio/amr", "audio/mpeg", "audio/mp4", "audio/ogg"},
        16 * 1024 * 1024,
    ),
}
DOCUMENT_LIMIT = 100 * 1024 * 1024


def wa_id(chat_id: str) -> str:
    """A chat id as WhatsApp writes it: the number's digits (``+49 151…`` -> ``49151…``)."""
    return re.sub(r"[\s()+-]", "", chat_id)


def is_wamid(value: str | None) -> bool:
    return bool(value) and str(value).startswith("wamid.")


def message_values(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``value`` of every ``messages`` change of every entry."""
    return [
        json_object(change.get("value"))
        for entry in json_objects(payload.get("entry"))
        for change in json_objects(entry.get("changes"))
        if change.get("field") == "messages"
    ]


def inbound(item: dict[str, Any], names: dict[str, str]) -> Inbound | None:
    """One webhook message as an :class:`Inbound` (None for reactions and the like)."""
    sender = str(item.get("from") or "")
    message_id = str(item.get("id") or "")
    kind = str(item.get("type") or "")
    if not sender or not message_id or kind in ("reaction", "system", "ephemeral"):
        return None
    context = json_object(item.get("context"))
    try:
        sent_at = datetime.fromtimestamp(int(item.get("timestamp") or 0), UTC)
    except (TypeError, ValueError, OverflowError):
        sent_at = datetime.now(UTC)
    action = None
    attachments: tuple[Attachment, ...] = ()
    if kind == "interactive":
        chosen = json_object(item.get("interactive"))
        reply = json_object(chosen.get("button_reply") or chosen.get("list_reply"))
        action = str(reply.get("id") or "") or None
        text = action or str(reply.get("title") or "")
    else:
        text, attachments = _content(kind, item, message_id)
    return Inbound(
        channel=CHANNEL,
        message_id=message_id,
        chat_id=sender,
        sender_id=sender,
        sender_name=names.get(sender, ""),
        text=text,
        sent_at=sent_at,
        chat_type="private",
        reply_to=str(context["id"]) if context.get("id") and action is None else None,
        attachments=attachments,
        forwarded=bool(context.get("forwarded") or context.get("frequently_forwarded")),
        action=action,
        action_id=message_id if action else None,
        platform_message_id=message_id,
    )


def _content(
    kind: str, item: dict[str, Any], message_id: str
) -> tuple[str, tuple[Attachment, ...]]:
    """``(text, attachments)`` of a message that is not a button tap."""
    body = json_object(item.get(kind))
    if kind == "text":
        return str(body.get("body") or ""), ()
    if kind in ("image", "video", "audio", "document") and body.get("id"):
        voice = kind == "audio" and bool(body.get("voice"))
        shown = {"image": "photo", "audio": "voice" if voice else "audio"}.get(kind, kind)
        file = Attachment(
            shown, str(body["id"]), body.get("filename") or None, body.get("mime_type") or None
        )
        return str(body.get("caption") or ""), (file,)
    if kind == "sticker":
        return "[sticker]", ()
    if kind == "button":  # a quick-reply button of a template: what it says
        return str(body.get("text") or body.get("payload") or ""), ()
    if kind == "location":
        place = ", ".join(str(p) for p in (body.get("name"), body.get("address")) if p)
        where = f"{body.get('latitude')}, {body.get('longitude')}"
        return (f"[location] {place} ({where})" if place else f"[location] {where}"), ()
    if kind == "contacts":
        cards = []
        for card in json_objects(item.get("contacts")):
            name = str(json_object(card.get("name")).get("formatted_name") or "")
            phones = ", ".join(str(p.get("phone")) for p in json_objects(card.get("phones")))
            cards.append(f"[contact: {name}{', ' + phones if phones else ''}]")
        return " ".join(cards) or "[contact]", ()
    log.info("whatsapp: a message of a kind memvault does not read", extra={"kind": kind})
    return f"[{kind or 'unknown'} message]", ()


@dataclass(frozen=True)
class Failure:
    """A ``failed`` status webhook: a message Meta accepted and then could not deliver."""

    message_id: str
    chat_id: str
    code: int
    said: str


def failure(status: dict[str, Any]) -> Failure | None:
    """A ``failed`` status as a :class:`Failure` (None for sent, delivered, read)."""
    if status.get("status") != "failed":
        return None
    errors = json_objects(status.get("errors"))
    first = errors[0] if errors else {}
    try:
        code = int(first.get("code") or 0)
    except (TypeError, ValueError):
        code = 0
    said = str(first.get("title") or first.get("message") or "no reason given")
    return Failure(str(status.get("id") or ""), str(status.get("recipient_id") or ""), code, said)


class WhatsAppMarkup(StarMarkup):
    """WhatsApp's markup (``*bold*``, ``_italic_``, ``~strike~``, ```` `code` ````), on the
    chat layout :class:`Renderer` shares."""

    indent = "   "

    def code(self, content: str) -> str:
        return f"`{content}`" if content else ""

    def code_block(self, content: str, language: str) -> str:
        return f"```{content}```" if content else ""


def kind_of(mime: str, size: int) -> str:
    """The message kind a file goes as: image, video or audio within their limits, else a
    document."""
    for kind, (types, limit) in MEDIA.items():
        if mime in types and size <= limit:
            return kind
    return "document"


def interactive(body: str, buttons: tuple[Button, ...]) -> dict[str, Any]:
    """Up to three reply buttons; more become a list (up to ten rows)."""
    if len(buttons) <= REPLY_BUTTONS:
        return {
            "type": "button",
            "body": {"text": body},
            "action": {
                "buttons": [
                    {
                        "type": "reply",
                        "reply": {"id": b.data[:BUTTON_ID], "title": b.label[:BUTTON_TITLE]},
                    }
                    for b in buttons
                ]
            },
        }
    rows = [{"id": b.data[:BUTTON_ID], "title": b.label[:ROW_TITLE]} for b in buttons[:LIST_ROWS]]
    return {
        "type": "list",
        "body": {"text": body},
        "action": {"button": "Choose", "sections": [{"title": "Options", "rows": rows}]},
    }


def template_text(text: str, media: tuple[Path, ...]) -> str:
    """The text as a template variable: one line (Meta refuses new lines, tabs and more
    than four spaces in a row there), within its share of the body."""
    if media:
        names = ", ".join(path.name for path in media)
        text = f"{text} (Files not sent: {names}.)" if text else f"(Files not sent: {names}.)"
    flat = re.sub(r"\s*\n\s*", " · ", text.strip())
    flat = re.sub(r"[\t ]+", " ", flat) or "…"
    return flat if len(flat) <= TEMPLATE_TEXT_LIMIT else flat[: TEMPLATE_TEXT_LIMIT - 1] + "…"


def json_of(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def said(error: dict[str, Any], status: int) -> str:
    """Meta's error as a phrase: its message without the ``(#code)`` prefix, and the
    details it gives."""
    message = re.sub(r"^\(#\d+\)\s*", "", str(error.get("message") or "")).strip()
    details = str(json_object(error.get("error_data")).get("details") or "").strip()
    said = message or f"HTTP {status}"
    if details and details.rstrip(".") != said.rstrip("."):
        said = f"{said.rstrip('.')}: {details}"
    return said.rstrip(".")
