"""A fake LINE Messaging API on loopback, and LINE's side of the webhook.

line-bot-sdk talks to it over real HTTP (aiohttp, JSON bodies, LINE's error
bodies ``{"message": ..., "details": [{"message", "property"}]}``), on two
hosts as LINE has them: the API (``api.line.me``) and the data host that
serves message content (``api-data.line.me``). The webhook side posts to the
daemon exactly as LINE does: ``{"destination", "events": [...]}`` as compact
JSON, signed with the channel secret (HMAC-SHA256, base64) in
``X-Line-Signature``::

    with FakeLine() as line:
        settings = LineSettings(api_base=line.api_base, data_api_base=line.data_api_base)
        event = line.text_event(OWNER, "hello")          # what the owner types
        answer = line.post(url, event)                    # LINE's POST; the daemon's answer
        line.post(url, line.redelivered(event))           # the same event, delivered again
        line.fail("push", 500)                            # the next push answers 500
        line.delivered(OWNER)                             # the texts that reached a chat

It behaves as LINE does where a test can tell: a reply token answers into
the chat of its event, once, until it expires (``expire_reply_tokens``);
reply and push take 1 to 5 messages of at most 5,000 characters (UTF-16) and
13 quick replies; a push repeated with an ``X-Line-Retry-Key`` LINE accepted
before answers 409 with the messages it sent then; a wrong access token gets
401 everywhere; message content is served only by the data host.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import re
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any

import httpx2 as httpx

from support import LoopbackHandler, LoopbackServer
from waiting import WAIT

FAKE_SECRET = "8a2b1f0c9d3e4f5a6b7c8d9e0f1a2b3c"
FAKE_TOKEN = "fake-line-channel-access-token/" + "x" * 120
BOT_USER = "U" + "b0" * 16
WEBHOOK_PATH = "/v1/channels/line/webhook"
_ID = re.compile(r"[UCR][0-9a-f]{32}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# LINE's words for its errors.
_MESSAGES = {
    400: "The request body has 1 error(s)",
    401: "Authentication failed. Confirm that the access token in the authorization header "
    "is valid.",
    403: "Access to this API is not available for your account",
    404: "Not found",
    429: "The API rate limit has been exceeded. Try again later.",
    500: "An error occurred in the server",
    502: "Bad gateway",
}
_LIMITS = {"text": 5000}


def user_id(number: int) -> str:
    """A LINE user id: ``U`` and 32 hex digits."""
    return f"U{number:032x}"


def group_id(number: int) -> str:
    """A LINE group id: ``C`` and 32 hex digits."""
    return f"C{number:032x}"


class ApiError(Exception):
    """An error answer of the Messaging API."""

    def __init__(
        self,
        status: int,
        message: str | None = None,
        *,
        details: list[dict[str, str]] | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body: dict[str, Any] = {"message": message or _MESSAGES.get(status, "Error")}
        if details:
            self.body["details"] = details
        self.body.update(extra or {})
        self.headers = headers or {}


class FakeLine:
    """The Messaging API endpoints memvault uses, scripted by the test (module docstring)."""

    def __init__(
        self,
        *,
        secret: str = FAKE_SECRET,
        token: str = FAKE_TOKEN,
        display_name: str = "memvault",
        token_ttl: float = 60.0,
    ) -> None:
        self.secret = secret
        self.token = token
        self.display_name = display_name
        self.token_ttl = token_ttl
        self.profiles: dict[str, str] = {}  # user id -> display name
        self.groups: dict[str, set[str]] = defaultdict(set)
        self.sent: list[dict[str, Any]] = []  # every reply and push attempt
        self.loading: list[str] = []
        self.requests: list[str] = []  # endpoint names, in order
        self._content: dict[str, tuple[bytes, str]] = {}
        self._reply_tokens: dict[str, tuple[str, float]] = {}  # token -> (chat, issued)
        self._used_tokens: set[str] = set()
        self._accepted: dict[str, list[dict[str, str]]] = {}  # retry key -> sent messages
        self._failures: dict[str, deque[tuple[ApiError, bool]]] = defaultdict(deque)
        self._ids = itertools.count(580000000000000001)
        self._cond = threading.Condition(threading.RLock())
        self._api: LoopbackServer | None = None
        self._data: LoopbackServer | None = None

    # -- LINE's side of the webhook ----------------------------------------------------------

    def add_user(self, user: str, name: str) -> str:
        """A user who added the bot as a friend (their profile is readable)."""
        with self._cond:
            self.profiles[user] = name
        return user

    def text_event(
        self, user: str, text: str, *, group: str | None = None, quoted: str | None = None
    ) -> dict[str, Any]:
        """A message event as LINE sends it when ``user`` writes ``text``."""
        message: dict[str, Any] = {
            "type": "text",
            "id": self._message_id(),
            "quoteToken": _token(),
            "markAsReadToken": _token(),
            "text": text,
        }
        if quoted is not None:
            message["quotedMessageId"] = quoted
        return self._event("message", user, group, message=message)

    def image_event(self, user: str, data: bytes, *, group: str | None = None) -> dict[str, Any]:
        """An image ``user`` sent; its bytes are served by the data host."""
        message = {
            "type": "image",
            "id": self._message_id(),
            "quoteToken": _token(),
            "contentProvider": {"type": "line"},
        }
        self._store(message["id"], data, "image/jpeg")
        return self._event("message", user, group, message=message)

    def file_event(self, user: str, name: str, data: bytes) -> dict[str, Any]:
        """A file ``user`` sent; its bytes are served by the data host."""
        message = {
            "type": "file",
            "id": self._message_id(),
            "fileName": name,
            "fileSize": len(data),
        }
        self._store(message["id"], data, "application/octet-stream")
        return self._event("message", user, None, message=message)

    def sticker_event(self, user: str, keywords: list[str]) -> dict[str, Any]:
        """A sticker ``user`` sent."""
        message = {
            "type": "sticker",
            "id": self._message_id(),
            "quoteToken": _token(),
            "packageId": "446",
            "stickerId": "1988",
            "stickerResourceType": "STATIC",
            "keywords": keywords,
        }
        return self._event("message", user, None, message=message)

    def postback_event(self, user: str, data: str) -> dict[str, Any]:
        """A quick-reply button ``user`` tapped (its postback data)."""
        return self._event("postback", user, None, postback={"data": data})

    def follow_event(self, user: str) -> dict[str, Any]:
        """``user`` added the bot as a friend."""
        return self._event("follow", user, None, follow={"isUnblocked": False})

    @staticmethod
    def redelivered(event: dict[str, Any]) -> dict[str, Any]:
        """``event`` as LINE delivers it again after a failed webhook: same ids."""
        return {**event, "deliveryContext": {"isRedelivery": True}}

    def body(self, *events: dict[str, Any]) -> bytes:
        """A webhook body as LINE writes it (compact JSON, UTF-8)."""
        payload = {"destination": BOT_USER, "events": list(events)}
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()

    def sign(self, body: bytes, secret: str | None = None) -> str:
        """LINE's ``X-Line-Signature`` of ``body``."""
        key = (secret or self.secret).encode()
        return base64.b64encode(hmac.new(key, body, hashlib.sha256).digest()).decode()

    def post(
        self,
        url: str,
        *events: dict[str, Any],
        signature: str | None = "sign",
        body: bytes | None = None,
        timeout: float = WAIT,
    ) -> httpx.Response:
        """POST a webhook to ``url`` as LINE does; ``signature=None`` leaves the header out."""
        data = self.body(*events) if body is None else body
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": "LineBotWebhook/2.0",
        }
        if signature is not None:
            headers["X-Line-Signature"] = self.sign(data) if signature == "sign" else signature
        return httpx.post(url, content=data, headers=headers, timeout=timeout)

    # -- scripting ---------------------------------------------------------------------------

    def fail(
        self,
        endpoint: str,
        status: int,
        *,
        message: str | None = None,
        retry_after: int | None = None,
        times: int = 1,
        accepted: bool = False,
    ) -> None:
        """Answer the next ``times`` calls of ``endpoint`` (reply, push, info, profile,
        content, loading) with this error; ``accepted``: after doing what was asked (the
        answer lost on its way back)."""
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        with self._cond:
            for _ in range(times):
                failure = ApiError(status, message, headers=headers)
                self._failures[endpoint].append((failure, accepted))

    def heal(self, endpoint: str) -> None:
        """The failures still queued for ``endpoint`` are dropped: it answers again."""
        with self._cond:
            self._failures[endpoint].clear()

    def expire_reply_tokens(self) -> None:
        """Every reply token issued so far is too old now."""
        with self._cond:
            self._reply_tokens = {
                token: (chat, issued - self.token_ttl - 1)
                for token, (chat, issued) in self._reply_tokens.items()
            }

    # -- reading back ------------------------------------------------------------------------

    def delivered(self, chat: str) -> list[str]:
        """The texts that reached ``chat``, by reply or push, in order."""
        with self._cond:
            return [
                text
                for s in self.sent
                if s["chat"] == chat and not s["error"]
                for text in s["texts"]
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

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def api_base(self) -> str:
        """The API host's base URL (``https://api.line.me``'s stand-in)."""
        assert self._api is not None, "the fake is not running"
        return self._api.address

    @property
    def data_api_base(self) -> str:
        """The data host's base URL (``https://api-data.line.me``'s stand-in)."""
        assert self._data is not None, "the fake is not running"
        return self._data.address

    def __enter__(self) -> FakeLine:
        self._api = LoopbackServer(_handler_for(self, data_host=False), "fake-line-api")
        self._data = LoopbackServer(_handler_for(self, data_host=True), "fake-line-data")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for server in (self._api, self._data):
            if server is not None:
                server.close()
        self._api = self._data = None

    # -- the API -------------------------------------------------------------------------------

    def call(
        self, method: str, path: str, headers: dict[str, str], body: bytes, *, data_host: bool
    ) -> tuple[int, bytes, str, dict[str, str]]:
        """Answer one request: ``(status, body, content type, headers)``, or raise ApiError."""
        endpoint, params, handler = self._route(method, path, data_host)
        with self._cond:
            self.requests.append(endpoint)
            if headers.get("authorization") != f"Bearer {self.token}":
                raise ApiError(401)
            if self._failures[endpoint]:
                failure, accepted = self._failures[endpoint].popleft()
                if accepted:
                    handler(params, _json(body) if body else {}, headers)
                elif endpoint in ("reply", "push"):
                    self._record(endpoint, "?", _json(body), failure.body["message"], headers)
                raise failure
            return handler(params, _json(body) if body else {}, headers)

    def _route(
        self, method: str, path: str, data_host: bool
    ) -> tuple[str, dict[str, str], Callable[..., tuple[int, bytes, str, dict[str, str]]]]:
        routes: list[tuple[str, str, str, Callable[..., Any]]] = [
            ("POST", r"/v2/bot/message/reply", "reply", self._reply),
            ("POST", r"/v2/bot/message/push", "push", self._push),
            ("GET", r"/v2/bot/info", "info", self._info),
            ("GET", r"/v2/bot/profile/(?P<user>[^/]+)", "profile", self._profile),
            (
                "GET",
                r"/v2/bot/group/(?P<group>[^/]+)/member/(?P<user>[^/]+)",
                "profile",
                self._member,
            ),
            ("POST", r"/v2/bot/chat/loading/start", "loading", self._loading),
        ]
        if data_host:  # the data host serves content and nothing else
            routes = [("GET", r"/v2/bot/message/(?P<id>\d+)/content", "content", self._content_of)]
        for verb, pattern, endpoint, handler in routes:
            match = re.fullmatch(pattern, path)
            if match is not None and verb == method:
                return endpoint, match.groupdict(), handler
        raise ApiError(404, "Not found")

    def _reply(
        self, params: dict[str, str], body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, bytes, str, dict[str, str]]:
        token = str(body.get("replyToken", ""))
        issued = self._reply_tokens.get(token)
        chat = issued[0] if issued else "?"
        if (
            issued is None
            or token in self._used_tokens
            or time.monotonic() - issued[1] > self.token_ttl
        ):
            self._record("reply", chat, body, "Invalid reply token", headers)
            raise ApiError(400, "Invalid reply token")
        self._check_messages("reply", chat, body, headers)
        self._used_tokens.add(token)
        sent = self._record("reply", chat, body, None, headers)
        return _ok({"sentMessages": sent})

    def _push(
        self, params: dict[str, str], body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, bytes, str, dict[str, str]]:
        chat = str(body.get("to", ""))
        key = headers.get("x-line-retry-key")
        if key is not None and not _UUID.fullmatch(key):
            self._record("push", chat, body, "bad retry key", headers)
            raise ApiError(400, "The value for the 'X-Line-Retry-Key' header is invalid")
        if key is not None and key in self._accepted:
            self._record("push", chat, body, "The retry key is already accepted", headers)
            raise ApiError(
                409,
                "The retry key is already accepted",
                extra={"sentMessages": self._accepted[key]},
                headers={"x-line-accepted-request-id": str(uuid.uuid4())},
            )
        if not _ID.fullmatch(chat):
            self._record("push", chat, body, "bad to", headers)
            raise ApiError(
                400, "The property, 'to', in the request body is invalid (line: -, column: -)"
            )
        if chat not in self.profiles and chat not in self.groups:
            self._record("push", chat, body, "Failed to send messages", headers)
            raise ApiError(400, "Failed to send messages")
        self._check_messages("push", chat, body, headers)
        sent = self._record("push", chat, body, None, headers)
        if key is not None:
            self._accepted[key] = sent
        return _ok({"sentMessages": sent})

    def _check_messages(
        self, endpoint: str, chat: str, body: dict[str, Any], headers: dict[str, str]
    ) -> None:
        messages = body.get("messages")
        problems: list[dict[str, str]] = []
        if not isinstance(messages, list) or not 1 <= len(messages) <= 5:
            problems.append({"message": "Size must be between 1 and 5", "property": "messages"})
            messages = []
        for number, message in enumerate(messages):
            where = f"messages[{number}]"
            text = message.get("text")
            if message.get("type") != "text" or not isinstance(text, str):
                problems.append(
                    {
                        "message": "Must be one of the following values: [text, ...]",
                        "property": f"{where}.type",
                    }
                )
            elif not text or len(text.encode("utf-16-le")) // 2 > _LIMITS["text"]:
                problems.append(
                    {"message": "Length must be between 1 and 5000", "property": f"{where}.text"}
                )
            items = (message.get("quickReply") or {}).get("items") or []
            if len(items) > 13:
                problems.append(
                    {
                        "message": "Size must be between 1 and 13",
                        "property": f"{where}.quickReply.items",
                    }
                )
            for index, item in enumerate(items):
                label = str((item.get("action") or {}).get("label", ""))
                if not 1 <= len(label) <= 20:
                    problems.append(
                        {
                            "message": "Length must be between 1 and 20",
                            "property": f"{where}.quickReply.items[{index}].action.label",
                        }
                    )
        if problems:
            said = f"The request body has {len(problems)} error(s)"
            self._record(endpoint, chat, body, said, headers)
            raise ApiError(400, said, details=problems)

    def _info(self, *_: Any) -> tuple[int, bytes, str, dict[str, str]]:
        return _ok(
            {
                "userId": BOT_USER,
                "basicId": "@123abcde",
                "displayName": self.display_name,
                "chatMode": "bot",
                "markAsReadMode": "auto",
            }
        )

    def _profile(self, params: dict[str, str], *_: Any) -> tuple[int, bytes, str, dict[str, str]]:
        name = self.profiles.get(params["user"])
        if name is None:
            raise ApiError(404, "Not found")
        return _ok({"displayName": name, "userId": params["user"], "language": "en"})

    def _member(self, params: dict[str, str], *_: Any) -> tuple[int, bytes, str, dict[str, str]]:
        if params["user"] not in self.groups.get(params["group"], set()):
            raise ApiError(404, "Not found")
        return self._profile(params)

    def _loading(
        self, params: dict[str, str], body: dict[str, Any], *_: Any
    ) -> tuple[int, bytes, str, dict[str, str]]:
        seconds = body.get("loadingSeconds", 20)
        chat = str(body.get("chatId", ""))
        if not chat.startswith("U") or seconds % 5 or not 5 <= seconds <= 60:
            raise ApiError(400, "The request body has 1 error(s)")
        self.loading.append(chat)
        self._cond.notify_all()
        return 202, b"{}", "application/json", {}

    def _content_of(
        self, params: dict[str, str], *_: Any
    ) -> tuple[int, bytes, str, dict[str, str]]:
        found = self._content.get(params["id"])
        if found is None:
            raise ApiError(404, "Not found")
        data, kind = found
        return 200, data, kind, {}

    # -- internals (called with the lock held) ---------------------------------------------------

    def _message_id(self) -> str:
        with self._cond:
            return str(next(self._ids))

    def _store(self, message_id: str, data: bytes, kind: str) -> None:
        with self._cond:
            self._content[message_id] = (data, kind)

    def _event(self, kind: str, user: str, group: str | None, **fields: Any) -> dict[str, Any]:
        source: dict[str, str] = {"type": "user", "userId": user}
        if group is not None:
            source = {"type": "group", "groupId": group, "userId": user}
            with self._cond:
                self.groups[group].add(user)
        event: dict[str, Any] = {
            "type": kind,
            **fields,
            "webhookEventId": _event_id(),
            "deliveryContext": {"isRedelivery": False},
            "timestamp": int(time.time() * 1000),
            "source": source,
            "mode": "active",
        }
        if kind in ("message", "postback", "follow"):
            token = uuid.uuid4().hex
            with self._cond:
                self._reply_tokens[token] = (group or user, time.monotonic())
            event["replyToken"] = token
        return event

    def _record(
        self,
        endpoint: str,
        chat: str,
        body: dict[str, Any],
        error: str | None,
        headers: dict[str, str],
    ) -> list[dict[str, str]]:
        if endpoint == "reply" and chat == "?":
            issued = self._reply_tokens.get(str(body.get("replyToken", "")))
            chat = issued[0] if issued else "?"
        elif endpoint == "push" and chat == "?":
            chat = str(body.get("to", "?"))
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        sent = [{"id": str(next(self._ids)), "quoteToken": _token()} for _ in messages]
        self.sent.append(
            {
                "kind": endpoint,
                "chat": chat,
                "texts": [str(m.get("text")) for m in messages],
                "messages": messages,
                "retry_key": headers.get("x-line-retry-key"),
                "error": error,
                "ids": [] if error else [s["id"] for s in sent],
            }
        )
        self._cond.notify_all()
        return sent


def _ok(data: dict[str, Any]) -> tuple[int, bytes, str, dict[str, str]]:
    return 200, json.dumps(data).encode(), "application/json", {}


def _json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except ValueError as exc:
        raise ApiError(400, "The request body could not be parsed as JSON") from exc
    if not isinstance(data, dict):
        raise ApiError(400, "The request body could not be parsed as JSON")
    return data


def _token() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes * 2).decode().rstrip("=")


def _event_id() -> str:
    """A webhook event id as LINE writes them (a ULID: 26 Crockford base-32 characters)."""
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    number = uuid.uuid4().int
    return "".join(alphabet[(number >> (5 * i)) & 31] for i in range(26))


def _handler_for(fake: FakeLine, *, data_host: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(LoopbackHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._answer("GET")

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self._answer("POST")

        def _answer(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            path = self.path.split("?", 1)[0]
            try:
                status, data, kind, extra = fake.call(
                    method, path, headers, body, data_host=data_host
                )
            except ApiError as exc:
                status, data, kind = exc.status, json.dumps(exc.body).encode(), "application/json"
                extra = exc.headers
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.send_header("x-line-request-id", str(uuid.uuid4()))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler
