"""A fake WhatsApp Business Cloud API (Graph API) on loopback, and Meta's side of the webhook.

The adapter talks to it over real HTTP as to ``graph.facebook.com``: JSON bodies
under ``/{version}/...``, the bearer token on every call, media uploads as
``multipart/form-data``, files fetched from a separate download address (Meta's
``lookaside.fbsbx.com``) with the same token, and Meta's error envelope
``{"error": {"message": "(#131047) Re-engagement message", "type", "code",
"error_data": {"messaging_product", "details"}, "fbtrace_id"}}``. The webhook
side posts to the daemon as Meta does: ``{"object": "whatsapp_business_account",
"entry": [{"id", "changes": [{"value": {...}, "field": "messages"}]}]}`` as JSON
with non-ASCII escaped, signed with the app secret (``X-Hub-Signature-256:
sha256=<hex HMAC-SHA256>``), and the subscription check is its ``GET`` with
``hub.mode``, ``hub.verify_token`` and ``hub.challenge``::

    with FakeWhatsApp(now=clock.now) as wa:
        settings = WhatsAppSettings(api_base=wa.api_base, phone_number_id=PHONE_NUMBER_ID)
        message = wa.text(OWNER, "hello")            # what the owner types
        answer = wa.post(url, message)                # Meta's POST; the daemon's answer
        wa.post(url, message)                         # the same message, delivered again
        wa.fail("messages", 130429)                   # the next send answers "Rate limit hit"
        wa.delivered(OWNER)                           # the texts that reached a chat

It enforces what Meta enforces where a test can tell: free-form messages
(text, media, interactive) only within 24 hours of the person's last message,
by the fake's clock (``now``), else 131047; templates only by an approved name
and language, with as many body parameters as the template has, and no new
lines in them; 1 to 4,096 characters of text; 1 to 3 reply buttons with unique
titles of at most 20 characters, bodies of at most 1,024; media only by an id
uploaded to this number; read receipts only for a message the number received;
a wrong token gets 190 (401) everywhere.
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import hashlib
import hmac
import itertools
import json
import re
import secrets
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2 as httpx

from support import LoopbackHandler, LoopbackServer
from waiting import WAIT

FAKE_APP_SECRET = "3f0c9a7d21b84e6f9a5c0d1e2b3a4f5e"
FAKE_TOKEN = "EAAGm0PX4ZCpsBO" + "x" * 160
FAKE_VERIFY_TOKEN = "memvault-verify-9d2c"
PHONE_NUMBER_ID = "106540352242922"
WABA_ID = "102290129340398"
DISPLAY_NUMBER = "+1 555-010-0199"
VERIFIED_NAME = "memvault"
WEBHOOK_PATH = "/v1/channels/whatsapp/webhook"
# Approved templates: name -> (language, number of body variables).
TEMPLATES = {"memvault_reply": ("en_US", 1), "hello_world": ("en_US", 0)}
WINDOW = 24 * 3600

# Meta's words for its errors: code -> (HTTP status, title, details).
_ERRORS: dict[int, tuple[int, str, str]] = {
    4: (400, "Application request limit reached", "The app has reached its API call rate limit."),
    100: (400, "Invalid parameter", "Invalid parameter"),
    190: (401, "Invalid OAuth access token - Cannot parse access token", ""),
    80007: (400, "Rate limit issues", "The WhatsApp Business Account has reached its rate limit."),
    130429: (400, "Rate limit hit", "Cloud API message throughput has been reached."),
    131000: (500, "Something went wrong", "Message failed to send due to an unknown error."),
    131026: (
        400,
        "Message Undeliverable",
        "Unable to deliver message. Reasons can include: the recipient phone number is not a "
        "WhatsApp phone number.",
    ),
    131047: (
        400,
        "Re-engagement message",
        "Message failed to send because more than 24 hours have passed since the customer "
        "last replied to this number.",
    ),
    131053: (400, "Media upload error", "Unable to upload the media used in the message."),
    131056: (
        400,
        "(Business Account, Consumer Account) pair rate limit hit",
        "Message failed to send because there were too many messages sent from this phone "
        "number to the same phone number in a short period of time.",
    ),
    132000: (
        400,
        "Number of parameters does not match the expected number of params",
        "body: number of localizable_params does not match the expected number of params",
    ),
    132001: (404, "Template name does not exist in the translation", ""),
    132018: (
        400,
        "There was an issue with the parameters in your template.",
        "Param text cannot have new-line/tab characters or more than 4 consecutive spaces",
    ),
}


def wa_id(number: int) -> str:
    """A WhatsApp id: a phone number in international form, digits only."""
    return f"49151{number:08d}"


class GraphError(Exception):
    """An error answer of the Graph API, in Meta's envelope."""

    def __init__(self, code: int, details: str | None = None, *, status: int | None = None) -> None:
        known_status, title, known_details = _ERRORS.get(code, (400, "Error", ""))
        super().__init__(title)
        self.code = code
        self.status = status or known_status
        error: dict[str, Any] = {
            "message": title if code == 190 else f"(#{code}) {title}",
            "type": "OAuthException",
            "code": code,
            "fbtrace_id": "A" + secrets.token_urlsafe(16),
        }
        said = details if details is not None else known_details
        if said:
            error["error_data"] = {"messaging_product": "whatsapp", "details": said}
        self.body = {"error": error}


class FakeWhatsApp:
    """The Graph API endpoints memvault uses, scripted by the test (module docstring)."""

    def __init__(
        self,
        *,
        secret: str = FAKE_APP_SECRET,
        token: str = FAKE_TOKEN,
        phone_number_id: str = PHONE_NUMBER_ID,
        version: str = "v23.0",
        now: Callable[[], datetime] | None = None,
        templates: dict[str, tuple[str, int]] | None = None,
    ) -> None:
        self.secret = secret
        self.token = token
        self.phone_number_id = phone_number_id
        self.version = version
        self.now = now or (lambda: datetime.now(UTC))
        self.templates = dict(TEMPLATES if templates is None else templates)
        self.names: dict[str, str] = {}  # wa_id -> profile name
        self.last_inbound: dict[str, float] = {}  # wa_id -> its last message (epoch s)
        self.sent: list[dict[str, Any]] = []  # every send attempt
        self.reads: list[dict[str, Any]] = []  # read receipts: message id, typing shown
        self.uploads: dict[str, tuple[bytes, str, str]] = {}  # media id -> (data, mime, name)
        self.requests: list[str] = []  # endpoint names, in order
        self._media: dict[str, tuple[bytes, str]] = {}  # what people sent: id -> (data, mime)
        self._received: set[str] = set()  # message ids people sent the number
        self._damaged: set[str] = set()  # media served cut short
        self._failures: dict[str, deque[GraphError]] = defaultdict(deque)
        self._ids = itertools.count(1)
        self._cond = threading.Condition(threading.RLock())
        self._server: LoopbackServer | None = None

    # -- Meta's side of the webhook --------------------------------------------------------

    def add_user(self, user: str, name: str) -> str:
        """A person with a WhatsApp profile name."""
        with self._cond:
            self.names[user] = name
        return user

    def text(
        self,
        user: str,
        text: str,
        *,
        reply_to: str | None = None,
        forwarded: bool = False,
        at: datetime | None = None,
    ) -> dict[str, Any]:
        """A text message as Meta delivers it when ``user`` writes ``text``."""
        message = self._message(user, "text", {"body": text}, at)
        if reply_to is not None or forwarded:
            message["context"] = {"from": _digits(DISPLAY_NUMBER), "id": reply_to or ""}
            if forwarded:
                message["context"] = {"forwarded": True}
        return message

    def image(self, user: str, data: bytes, *, caption: str | None = None) -> dict[str, Any]:
        """A photo ``user`` sent; its bytes are served by the download address."""
        media = self._media_of(data, "image/jpeg")
        if caption is not None:
            media["caption"] = caption
        return self._message(user, "image", media)

    def document(self, user: str, name: str, data: bytes, mime: str) -> dict[str, Any]:
        """A file ``user`` sent."""
        return self._message(user, "document", {**self._media_of(data, mime), "filename": name})

    def voice(self, user: str, data: bytes) -> dict[str, Any]:
        """A voice message ``user`` recorded."""
        media = {**self._media_of(data, "audio/ogg; codecs=opus"), "voice": True}
        return self._message(user, "audio", media)

    def button_reply(self, user: str, button_id: str, title: str, *, on: str) -> dict[str, Any]:
        """``user`` tapped the reply button ``button_id`` of the message ``on``."""
        reply = {"type": "button_reply", "button_reply": {"id": button_id, "title": title}}
        message = self._message(user, "interactive", reply)
        message["context"] = {"from": _digits(DISPLAY_NUMBER), "id": on}
        return message

    def location(self, user: str, latitude: float, longitude: float, name: str) -> dict[str, Any]:
        """A place ``user`` shared."""
        place = {"latitude": latitude, "longitude": longitude, "name": name}
        return self._message(user, "location", place)

    def reaction(self, user: str, to: str, emoji: str) -> dict[str, Any]:
        """``user`` reacted to the message ``to``."""
        return self._message(user, "reaction", {"message_id": to, "emoji": emoji})

    def status(
        self, message_id: str, user: str, state: str, code: int | None = None
    ) -> dict[str, Any]:
        """A status webhook of a message the number sent (``failed`` with Meta's code)."""
        status: dict[str, Any] = {
            "id": message_id,
            "status": state,
            "timestamp": str(int(self.now().timestamp())),
            "recipient_id": user,
        }
        if code is not None:
            _, title, details = _ERRORS.get(code, (400, "Error", ""))
            status["errors"] = [
                {
                    "code": code,
                    "title": title,
                    "message": title,
                    "error_data": {"details": details},
                }
            ]
        return status

    def body(self, *messages: dict[str, Any], statuses: tuple[dict[str, Any], ...] = ()) -> bytes:
        """A webhook body as Meta writes it (non-ASCII escaped, as Meta sends it)."""
        value: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "metadata": {
                "display_phone_number": _digits(DISPLAY_NUMBER),
                "phone_number_id": self.phone_number_id,
            },
        }
        if messages:
            senders = dict.fromkeys(str(m["from"]) for m in messages)
            value["contacts"] = [
                {"profile": {"name": self.names.get(user, "")}, "wa_id": user} for user in senders
            ]
            value["messages"] = list(messages)
        if statuses:
            value["statuses"] = list(statuses)
        payload = {
            "object": "whatsapp_business_account",
            "entry": [{"id": WABA_ID, "changes": [{"value": value, "field": "messages"}]}],
        }
        return json.dumps(payload, separators=(",", ":")).encode()

    def sign(self, body: bytes, secret: str | None = None) -> str:
        """Meta's ``X-Hub-Signature-256`` of ``body``."""
        key = (secret or self.secret).encode()
        return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()

    def post(
        self,
        url: str,
        *messages: dict[str, Any],
        statuses: tuple[dict[str, Any], ...] = (),
        signature: str | None = "sign",
        body: bytes | None = None,
        timeout: float = WAIT,
    ) -> httpx.Response:
        """POST a webhook to ``url`` as Meta does; ``signature=None`` leaves the header out."""
        data = self.body(*messages, statuses=statuses) if body is None else body
        headers = {"Content-Type": "application/json", "User-Agent": "facebookexternalua"}
        if signature is not None:
            headers["X-Hub-Signature-256"] = self.sign(data) if signature == "sign" else signature
        return httpx.post(url, content=data, headers=headers, timeout=timeout)

    @staticmethod
    def verify(
        url: str,
        token: str | None,
        challenge: str = "1158201444",
        mode: str = "subscribe",
    ) -> httpx.Response:
        """Meta's subscription check, as the app's webhook settings send it."""
        params = {"hub.mode": mode, "hub.challenge": challenge}
        if token is not None:
            params["hub.verify_token"] = token
        return httpx.get(url, params=params, timeout=WAIT)

    # -- scripting -----------------------------------------------------------------------

    def fail(self, endpoint: str, code: int, *, times: int = 1, details: str | None = None) -> None:
        """Answer the next ``times`` calls of ``endpoint`` (messages, read, upload, media,
        download, phone) with Meta's error ``code``."""
        with self._cond:
            for _ in range(times):
                self._failures[endpoint].append(GraphError(code, details))

    def damage(self, media_id: str) -> None:
        """Serve the file ``media_id`` cut short (the Graph API still names its whole hash)."""
        with self._cond:
            self._damaged.add(media_id)

    def close_window(self, user: str) -> None:
        """``user`` wrote more than 24 hours ago, as far as Meta knows."""
        with self._cond:
            self.last_inbound[user] = self.now().timestamp() - WINDOW - 60

    # -- reading back --------------------------------------------------------------------

    def delivered(self, chat: str) -> list[str]:
        """The texts (text bodies, interactive bodies, template variables) that reached
        ``chat``, in order."""
        with self._cond:
            return [s["text"] for s in self.sent if s["chat"] == chat and s["error"] is None]

    def accepted(self, chat: str, kind: str | None = None) -> list[dict[str, Any]]:
        """The messages accepted for ``chat`` (of one kind: text, template, image, ...)."""
        with self._cond:
            return [
                s
                for s in self.sent
                if s["chat"] == chat and s["error"] is None and kind in (None, s["kind"])
            ]

    def wait_sent(self, count: int, timeout: float = WAIT) -> list[dict[str, Any]]:
        """The send attempts, once there are at least ``count`` of them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.sent) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {count} send attempts")
                self._cond.wait(left)
            return list(self.sent)

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def api_base(self) -> str:
        """The Graph API's base URL (``https://graph.facebook.com``'s stand-in)."""
        assert self._server is not None, "the fake is not running"
        return self._server.address

    def __enter__(self) -> FakeWhatsApp:
        self._server = LoopbackServer(_handler_for(self), "fake-whatsapp")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.close()
        self._server = None

    # -- the API -------------------------------------------------------------------------

    def call(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, bytes, str]:
        """Answer one request: ``(status, body, content type)``, or raise GraphError."""
        split = urlsplit(target)
        query = {k: v[0] for k, v in parse_qs(split.query).items()}
        with self._cond:
            if headers.get("authorization") != f"Bearer {self.token}":
                self.requests.append("unauthorized")
                raise GraphError(190)
            if split.path == "/whatsapp_business/attachments/" and method == "GET":
                return self._download(query)
            prefix = f"/{self.version}/"
            if not split.path.startswith(prefix):
                raise GraphError(100, f"Unknown path components: {split.path}")
            path = split.path[len(prefix) :]
            phone = self.phone_number_id
            if method == "GET" and path == phone:
                return self._answer("phone", lambda: self._phone(query))
            if method == "POST" and path == f"{phone}/messages":
                data = _json(body)
                if data.get("status") == "read":
                    return self._answer("read", lambda: self._read(data))
                return self._answer("messages", lambda: self._send(data), data)
            if method == "POST" and path == f"{phone}/media":
                return self._answer("upload", lambda: self._upload(headers, body))
            if method == "GET" and re.fullmatch(r"\d+", path):
                return self._answer("media", lambda: self._media_url(path))
            raise GraphError(100, f"Unsupported {method} request to {split.path}")

    def _answer(
        self,
        endpoint: str,
        handler: Callable[[], dict[str, Any]],
        attempt: dict[str, Any] | None = None,
    ) -> tuple[int, bytes, str]:
        self.requests.append(endpoint)
        if self._failures[endpoint]:
            failure = self._failures[endpoint].popleft()
            if attempt is not None:
                self._record(attempt, failure.code)
            raise failure
        return 200, json.dumps(handler()).encode(), "application/json"

    def _phone(self, query: dict[str, str]) -> dict[str, Any]:
        info = {
            "verified_name": VERIFIED_NAME,
            "display_phone_number": DISPLAY_NUMBER,
            "quality_rating": "GREEN",
            "code_verification_status": "VERIFIED",
            "id": self.phone_number_id,
        }
        fields = [f for f in query.get("fields", "").split(",") if f]
        return {k: v for k, v in info.items() if not fields or k in fields or k == "id"}

    def _read(self, data: dict[str, Any]) -> dict[str, Any]:
        message_id = str(data.get("message_id", ""))
        if data.get("messaging_product") != "whatsapp" or message_id not in self._received:
            raise GraphError(100, "Invalid parameter: message_id")
        typing = data.get("typing_indicator")
        if typing is not None and typing != {"type": "text"}:
            raise GraphError(100, "Invalid parameter: typing_indicator")
        self.reads.append({"message_id": message_id, "typing": typing is not None})
        self._cond.notify_all()
        return {"success": True}

    def _send(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("messaging_product") != "whatsapp":
            raise self._refused(data, 100, "The parameter messaging_product is required.")
        chat = str(data.get("to", ""))
        if not re.fullmatch(r"\d{6,15}", chat):
            raise self._refused(data, 100, "Invalid parameter: to")
        kind = data.get("type", "text")
        if kind != "template":
            last = self.last_inbound.get(chat)
            if last is None or self.now().timestamp() - last >= WINDOW:
                raise self._refused(data, 131047)
        checks = {
            "text": self._check_text,
            "interactive": self._check_interactive,
            "template": self._check_template,
            "image": self._check_media,
            "document": self._check_media,
            "audio": self._check_media,
            "video": self._check_media,
        }
        if kind not in checks:
            raise self._refused(data, 100, f"Invalid parameter: type {kind}")
        problem = checks[kind](data)
        if problem is not None:
            raise self._refused(data, *problem)
        message_id = self._record(data, None)
        return {
            "messaging_product": "whatsapp",
            "contacts": [{"input": chat, "wa_id": chat}],
            "messages": [{"id": message_id, "message_status": "accepted"}],
        }

    def _check_text(self, data: dict[str, Any]) -> tuple[int, str] | None:
        body = _get(data, "text", "body")
        if not isinstance(body, str) or not 1 <= len(body) <= 4096:
            return 100, "Invalid parameter: text.body must be 1 to 4096 characters"
        return None

    def _check_interactive(self, data: dict[str, Any]) -> tuple[int, str] | None:
        interactive = data.get("interactive") or {}
        body = _get(interactive, "body", "text")
        if not isinstance(body, str) or not 1 <= len(body) <= 1024:
            return 100, "Invalid parameter: interactive.body.text must be 1 to 1024 characters"
        action = interactive.get("action") or {}
        if interactive.get("type") == "button":
            buttons = action.get("buttons") or []
            titles = [_get(b, "reply", "title") for b in buttons]
            ids = [_get(b, "reply", "id") for b in buttons]
            if not 1 <= len(buttons) <= 3:
                return 131009, "Parameter value is not valid: 1 to 3 buttons"
            if any(not isinstance(t, str) or not 1 <= len(t) <= 20 for t in titles):
                return 131009, "Parameter value is not valid: button title length"
            if len(set(titles)) != len(titles) or len(set(ids)) != len(ids):
                return 131009, "Parameter value is not valid: buttons must be unique"
            if any(not isinstance(i, str) or not 1 <= len(i) <= 256 for i in ids):
                return 131009, "Parameter value is not valid: button id length"
            return None
        if interactive.get("type") == "list":
            rows = [r for s in action.get("sections") or [] for r in s.get("rows") or []]
            if not 1 <= len(rows) <= 10 or any(len(str(r.get("title"))) > 24 for r in rows):
                return 131009, "Parameter value is not valid: list rows"
            return None
        return 100, "Invalid parameter: interactive.type"

    def _check_template(self, data: dict[str, Any]) -> tuple[int, str] | None:
        template = data.get("template") or {}
        name = str(template.get("name", ""))
        language = str(_get(template, "language", "code") or "")
        known = self.templates.get(name)
        if known is None or known[0] != language:
            return 132001, f"template name ({name}) does not exist in {language}"
        parameters = [
            p
            for c in template.get("components") or []
            if c.get("type") == "body"
            for p in c.get("parameters") or []
        ]
        if len(parameters) != known[1]:
            return 132000, (
                f"body: number of localizable_params ({len(parameters)}) does not match the "
                f"expected number of params ({known[1]})"
            )
        for parameter in parameters:
            text = str(parameter.get("text", ""))
            if "\n" in text or "\t" in text or "     " in text or not text:
                return 132018, _ERRORS[132018][2]
        return None

    def _check_media(self, data: dict[str, Any]) -> tuple[int, str] | None:
        kind = str(data["type"])
        media = data.get(kind) or {}
        if str(media.get("id", "")) not in self.uploads:
            return 131053, "Unable to retrieve media by id"
        return None

    def _refused(self, data: dict[str, Any], code: int, details: str | None = None) -> GraphError:
        self._record(data, code)
        return GraphError(code, details)

    def _upload(self, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        fields = _multipart(headers.get("content-type", ""), body)
        if fields.get("messaging_product", (b"", ""))[0] != b"whatsapp":
            raise GraphError(100, "The parameter messaging_product is required.")
        if "file" not in fields:
            raise GraphError(100, "The parameter file is required.")
        data, name = fields["file"]
        mime = fields.get("type", (b"", ""))[0].decode()
        media_id = str(next(self._ids) + 900000000000000)
        self.uploads[media_id] = (data, mime, name)
        return {"id": media_id}

    def _media_url(self, media_id: str) -> dict[str, Any]:
        found = self._media.get(media_id)
        if found is None and media_id in self.uploads:
            found = self.uploads[media_id][:2]
        if found is None:
            raise GraphError(100, "Unsupported get request. Object with ID does not exist")
        data, mime = found
        assert self._server is not None
        expires = int(time.time()) + 300
        url = (
            f"{self._server.address}/whatsapp_business/attachments/"
            f"?mid={media_id}&ext={expires}&hash=ATu{secrets.token_urlsafe(12)}"
        )
        return {
            "url": url,
            "mime_type": mime,
            "sha256": hashlib.sha256(data).hexdigest(),
            "file_size": len(data),
            "id": media_id,
            "messaging_product": "whatsapp",
        }

    def _download(self, query: dict[str, str]) -> tuple[int, bytes, str]:
        self.requests.append("download")
        if self._failures["download"]:
            raise self._failures["download"].popleft()
        found = self._media.get(query.get("mid", ""))
        if found is None:
            raise GraphError(100, "Object with ID does not exist")
        data, mime = found
        if query.get("mid") in self._damaged:
            data = data[: len(data) // 2]
        return 200, data, mime.split(";")[0]

    # -- internals -----------------------------------------------------------------------

    def _message(
        self, user: str, kind: str, content: dict[str, Any], at: datetime | None = None
    ) -> dict[str, Any]:
        with self._cond:
            moment = (at or self.now()).timestamp()
            number = next(self._ids)
            message_id = _wamid(user, number)
            self._received.add(message_id)
            self.last_inbound[user] = max(self.last_inbound.get(user, 0.0), moment)
        return {
            "from": user,
            "id": message_id,
            "timestamp": str(int(moment)),
            "type": kind,
            kind: content,
        }

    def _media_of(self, data: bytes, mime: str) -> dict[str, Any]:
        with self._cond:
            media_id = str(next(self._ids) + 700000000000000)
            self._media[media_id] = (data, mime)
        return {"id": media_id, "mime_type": mime, "sha256": hashlib.sha256(data).hexdigest()}

    def _record(self, data: dict[str, Any], error: int | None) -> str:
        kind = str(data.get("type", "text"))
        if kind == "text":
            text = _get(data, "text", "body")
        elif kind == "interactive":
            text = _get(data, "interactive", "body", "text")
        elif kind == "template":
            parameters = [
                p.get("text")
                for c in _get(data, "template", "components") or []
                for p in c.get("parameters") or []
            ]
            text = parameters[0] if parameters else _get(data, "template", "name")
        else:
            text = _get(data, kind, "filename") or kind
        message_id = _wamid(self.phone_number_id, next(self._ids))
        self.sent.append(
            {
                "kind": kind,
                "chat": str(data.get("to", "?")),
                "text": str(text),
                "payload": data,
                "context": _get(data, "context", "message_id"),
                "error": error,
                "id": None if error else message_id,
            }
        )
        self._cond.notify_all()
        return message_id


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _digits(number: str) -> str:
    return re.sub(r"\D", "", number)


def _wamid(user: str, number: int) -> str:
    """A message id as Meta writes them: ``wamid.`` and base64 of the chat and a serial."""
    raw = f"\x15\x02\x00\x11\x18\x0c{user}\x15\x02\x00\x12\x18\x14{number:020X}".encode()
    return "wamid." + base64.b64encode(b"\x18\x0c" + raw).decode()


def _json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except ValueError as exc:
        raise GraphError(100, "The request body is not JSON") from exc
    if not isinstance(data, dict):
        raise GraphError(100, "The request body is not a JSON object")
    return data


def _multipart(content_type: str, body: bytes) -> dict[str, tuple[bytes, str]]:
    """The fields of a ``multipart/form-data`` body: name -> (bytes, file name)."""
    if not content_type.startswith("multipart/form-data"):
        raise GraphError(100, "The upload is not multipart/form-data")
    parsed = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    fields: dict[str, tuple[bytes, str]] = {}
    for part in parsed.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = (payload, str(part.get_filename() or ""))
    return fields


def _handler_for(fake: FakeWhatsApp) -> type[BaseHTTPRequestHandler]:
    class Handler(LoopbackHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._answer("GET")

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self._answer("POST")

        def _answer(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                status, data, kind = fake.call(method, self.path, headers, body)
            except GraphError as exc:
                status, data, kind = exc.status, json.dumps(exc.body).encode(), "application/json"
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.send_header("x-fb-trace-id", secrets.token_urlsafe(8))
            self.end_headers()
            self.wfile.write(data)

    return Handler
