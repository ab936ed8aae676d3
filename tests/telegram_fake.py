"""A fake Telegram Bot API server on loopback, speaking the Bot API's wire format.

python-telegram-bot talks to it over real HTTP (form-encoded and multipart
bodies, ``{"ok": ..., "result": ...}`` answers), so a test exercises the same
request building, update parsing and error mapping as production::

    with FakeTelegram() as fake:
        settings = TelegramSettings(base_url=fake.base_url, base_file_url=fake.base_file_url)
        update_id = fake.push_message(42, "hello")      # what the owner types
        fake.push_callback(42, "approve:7")              # a button press
        fake.fail("sendMessage", 429, retry_after=3)     # the next sendMessage answers 429
        ...
        fake.wait_sent(1)                                # what the bot sent, once it did

It behaves as the Bot API does where a test can tell: ``getUpdates``
long-polls and forgets updates below a confirmed ``offset``; a second
``getUpdates`` ends the one still waiting with 409 Conflict; ``sendMessage``
validates ``parse_mode="HTML"`` (Telegram's tag subset, balanced) and the
4096-character limit; a wrong token gets 401 on every method; files are
served under ``/file/bot<token>/<file_path>``. With ``chats=`` given, a chat
not in it (nor pushed from) is "chat not found". ``editMessageReplyMarkup``
edits only the bot's own messages ("message can't be edited", "message to edit
not found") and refuses a keyboard it already shows ("message is not
modified"); :meth:`FakeTelegram.keyboard` is what a message shows now.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler
from pathlib import PurePath
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from support import LoopbackHandler, LoopbackServer
from waiting import WAIT

FAKE_TOKEN = "123456:fake-telegram-token"
BOT_ID = 123456
CONFLICT = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)
_DESCRIPTIONS = {
    400: "Bad Request: chat not found",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: CONFLICT,
    429: "Too Many Requests: retry after {retry_after}",
    500: "Internal Server Error",
    502: "Bad Gateway",
}
_JSON_FIELDS = {"reply_markup", "reply_parameters", "allowed_updates", "entities"}
_SEND_METHODS = {"sendMessage": "text", "sendPhoto": "photo", "sendDocument": "document"}
_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler"}
_TAGS |= {"a", "code", "pre", "blockquote", "tg-emoji"}
_TAG = re.compile(r"<(/?)([a-zA-Z][\w-]*)((?:\s+[\w-]+(?:=(?:\"[^\"]*\"|'[^']*'|[^\s>]+))?)*)\s*>")
_ENTITY = re.compile(r"&(?:(lt|gt|amp|quot)|#(\d+)|#x([0-9a-fA-F]+));")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


class ApiError(Exception):
    """An error answer of the Bot API."""

    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status, self.description, self.retry_after = status, description, retry_after


@dataclass(frozen=True)
class _Failure:
    status: int
    description: str
    retry_after: int | None


class FakeTelegram:
    """The Bot API methods memvault uses, scripted by the test (see the module docstring)."""

    def __init__(
        self,
        token: str = FAKE_TOKEN,
        *,
        username: str = "memvault_test_bot",
        chats: Iterable[int] | None = None,
    ) -> None:
        self.token = token
        self.username = username
        self.known_chats: set[int] | None = None if chats is None else set(chats)
        self.sent: list[dict[str, Any]] = []  # every send* attempt, delivered or refused
        self.actions: list[tuple[int | str, str]] = []
        self.answered_callbacks: list[tuple[str, str | None]] = []
        self.edits: list[dict[str, Any]] = []  # editMessageReplyMarkup calls that took
        self.requests: list[str] = []  # method names, in order
        self.confirmed_offset: int | None = None
        self._updates: list[dict[str, Any]] = []
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._keyboards: dict[tuple[int, int], Any] = {}  # the bot's messages' reply_markup
        self._last_id: dict[int, int] = defaultdict(int)
        self._files: dict[str, tuple[str, bytes]] = {}  # file_id -> (file_path, bytes)
        self._callbacks: set[str] = set()
        self._failures: dict[str, deque[_Failure]] = defaultdict(deque)
        self._update_ids = itertools.count(1000)
        self._ids = itertools.count(1)
        self._poll = 0  # the generation of the getUpdates call allowed to answer
        self._polling = 0  # getUpdates calls waiting
        self._allowed: set[str] | None = None
        self._closing = False
        self._cond = threading.Condition(threading.RLock())
        self._http: LoopbackServer | None = None

    # -- scripting ---------------------------------------------------------------------------

    def push_message(
        self,
        chat_id: int,
        text: str | None,
        *,
        sender_id: int | None = None,
        first_name: str = "Owner",
        username: str | None = None,
        forwarded: bool = False,
        reply_to: int | None = None,
        photo: bytes | None = None,
        document: tuple[str, bytes, str] | None = None,
        caption: str | None = None,
    ) -> int:
        """Queue a message from a user, as an update; returns its ``update_id``."""
        sender = _user(chat_id if sender_id is None else sender_id, first_name, username)
        with self._cond:
            message = self._message(chat_id, sender)
            if text is not None:
                message["text"] = text
            if caption is not None:
                message["caption"] = caption
            if forwarded:
                origin = {"id": 777, "is_bot": False, "first_name": "Someone"}
                message["forward_origin"] = {
                    "type": "user",
                    "date": message["date"],
                    "sender_user": origin,
                }
            if reply_to is not None:
                message["reply_to_message"] = self._messages.get(
                    (chat_id, reply_to),
                    {"message_id": reply_to, "date": message["date"], "chat": message["chat"]},
                )
            if photo is not None:
                thumb = self._file("photos", b"thumbnail", ".jpg")
                full = self._file("photos", photo, ".jpg")
                message["photo"] = [
                    {**thumb, "width": 90, "height": 60},
                    {**full, "width": 1280, "height": 853},
                ]
            if document is not None:
                name, data, mime = document
                entry = self._file("documents", data, PurePath(name).suffix)
                message["document"] = {**entry, "file_name": name, "mime_type": mime}
            return self._push({"message": message})

    def push_callback(
        self,
        chat_id: int,
        data: str,
        *,
        sender_id: int | None = None,
        message_id: int | None = None,
    ) -> int:
        """Queue a button press on a message of the chat (default: the bot's last one)."""
        sender = _user(chat_id if sender_id is None else sender_id, "Owner", None)
        with self._cond:
            query_id = str(next(self._ids))
            self._callbacks.add(query_id)
            if message_id is None:
                bot_messages = [key for key, m in self._messages.items() if m.get("from") == _BOT]
                message_id = max((mid for chat, mid in bot_messages if chat == chat_id), default=0)
            message = self._messages.get((chat_id, message_id)) or {
                **self._message(chat_id, _BOT),
                "text": "(a message)",
            }
            query = {
                "id": query_id,
                "from": sender,
                "chat_instance": f"ci{chat_id}",
                "data": data,
                "message": message,
            }
            return self._push({"callback_query": query})

    def push_update(self, **fields: Any) -> int:
        """Queue an update of any other kind (``edited_message={...}``, ``poll={...}``)."""
        with self._cond:
            return self._push(fields)

    def add_file(self, data: bytes, *, folder: str = "documents", suffix: str = "") -> str:
        """Store bytes the bot may fetch with getFile; returns their ``file_id``."""
        with self._cond:
            return str(self._file(folder, data, suffix)["file_id"])

    def message(self, chat_id: int, *, text: str = "(a message)", from_bot: bool = False) -> int:
        """Record a message in a chat without an update (one the bot could reply to)."""
        with self._cond:
            message = self._message(chat_id, _BOT if from_bot else _user(chat_id, "Owner", None))
            message["text"] = text
            return int(message["message_id"])

    def fail(
        self,
        method: str,
        status: int,
        *,
        description: str | None = None,
        retry_after: int | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with this error."""
        text = description or _DESCRIPTIONS.get(status, f"Error {status}")
        failure = _Failure(status, text.format(retry_after=retry_after), retry_after)
        with self._cond:
            self._failures[method].extend([failure] * times)

    # -- reading back ------------------------------------------------------------------------

    def pending_updates(self) -> list[int]:
        """The ids of updates not confirmed yet."""
        with self._cond:
            return [update["update_id"] for update in self._updates]

    def wait_sent(self, count: int, timeout: float = WAIT) -> list[dict[str, Any]]:
        """The send attempts, once there are at least ``count`` of them."""
        self._wait(lambda: len(self.sent) >= count, timeout, f"{count} send attempts")
        with self._cond:
            return list(self.sent)

    def wait_polling(self, timeout: float = WAIT) -> None:
        """Return once a getUpdates call is waiting for updates."""
        self._wait(lambda: self._polling > 0, timeout, "waiting getUpdates")

    def wait_confirmed(self, offset: int, timeout: float = WAIT) -> None:
        """Return once the bot confirmed every update below ``offset``."""
        done = lambda: (self.confirmed_offset or 0) >= offset  # noqa: E731
        self._wait(done, timeout, f"confirmation of offset {offset}")

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not ready():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"fake Telegram: no {what} after {timeout} s")
                self._cond.wait(left)

    # -- lifecycle ---------------------------------------------------------------------------

    def _address(self) -> str:
        if self._http is None:
            raise RuntimeError("the fake server is not running; use it as a context manager")
        return self._http.address

    @property
    def base_url(self) -> str:
        """``TelegramSettings.base_url`` for this server (the token is appended)."""
        return self._address() + "/bot"

    @property
    def base_file_url(self) -> str:
        """``TelegramSettings.base_file_url`` for this server."""
        return self._address() + "/file/bot"

    def __enter__(self) -> FakeTelegram:
        self._http = LoopbackServer(_handler_for(self), "FakeTelegram")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._cond:
            self._closing = True  # long polls still waiting answer now
            self._cond.notify_all()
        if self._http is not None:
            self._http.close()
        self._http = None

    # -- the API -------------------------------------------------------------------------------

    def call(self, token: str, method: str, params: dict[str, Any]) -> Any:
        """Answer one Bot API call: its ``result``, or raise :class:`ApiError`."""
        with self._cond:
            self.requests.append(method)
            if token != self.token:
                raise ApiError(401, "Unauthorized")
            handler = getattr(self, f"_api_{method}", None)
            if handler is None:
                raise ApiError(404, "Not Found")
            failure = self._failures[method].popleft() if self._failures[method] else None
            if failure is not None:
                if method in _SEND_METHODS:
                    self._record(method, params, {}, failure.description)
                raise ApiError(failure.status, failure.description, failure.retry_after)
            return handler(params)

    def file(self, token: str, path: str) -> bytes:
        """The bytes served under ``/file/bot<token>/<path>``."""
        with self._cond:
            if token != self.token:
                raise ApiError(401, "Unauthorized")
            for file_path, data in self._files.values():
                if file_path == path:
                    return data
        raise ApiError(404, "Not Found")

    def _api_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:  # noqa: N802
        offset = int(params.get("offset") or 0)
        limit = min(int(params.get("limit") or 100), 100)
        deadline = time.monotonic() + float(params.get("timeout") or 0)
        if params.get("allowed_updates"):
            self._allowed = set(params["allowed_updates"])  # kept for later calls, as Telegram does
        if offset:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
            self.confirmed_offset = max(offset, self.confirmed_offset or 0)
        self._poll += 1
        mine = self._poll
        self._polling += 1
        self._cond.notify_all()  # a getUpdates still waiting is now superseded
        try:
            while not self._deliverable() and not self._closing and self._poll == mine:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)  # the lock is an RLock: waiting releases it fully
            if self._poll != mine:
                raise ApiError(409, CONFLICT)
            return self._deliverable()[:limit]
        finally:
            self._polling -= 1

    def _deliverable(self) -> list[dict[str, Any]]:
        """The pending updates of the kinds the bot asked for (``allowed_updates``)."""
        if self._allowed is None:
            return self._updates
        return [u for u in self._updates if (u.keys() - {"update_id"}) & self._allowed]

    def _api_getMe(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        return {**_BOT, "username": self.username, "can_join_groups": True}

    def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        chat_id = self._chat(params)
        text = str(params.get("text", ""))
        try:
            shown = parse_html(text) if params.get("parse_mode") == "HTML" else text
            if not shown.strip():
                raise ApiError(400, "Bad Request: message text is empty")
            if len(shown.encode("utf-16-le")) // 2 > 4096:
                raise ApiError(400, "Bad Request: message is too long")
        except ApiError as exc:
            self._record("sendMessage", params, {}, exc.description)
            raise
        return self._deliver(chat_id, "sendMessage", params, {}, {"text": shown})

    def _api_sendPhoto(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        chat_id = self._chat(params)
        name, data = self._upload(params, "photo")
        photo = self._file("photos", data, ".jpg")
        fields = {"photo": [{**photo, "width": 800, "height": 600}]}
        return self._deliver(chat_id, "sendPhoto", params, {"photo": (name, data)}, fields)

    def _api_sendDocument(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        chat_id = self._chat(params)
        name, data = self._upload(params, "document")
        document = {**self._file("documents", data, ""), "file_name": name}
        files = {"document": (name, data)}
        return self._deliver(chat_id, "sendDocument", params, files, {"document": document})

    def _api_sendChatAction(self, params: dict[str, Any]) -> bool:  # noqa: N802
        self.actions.append((self._chat(params), str(params.get("action"))))
        self._cond.notify_all()
        return True

    def _api_answerCallbackQuery(self, params: dict[str, Any]) -> bool:  # noqa: N802
        query_id = str(params.get("callback_query_id"))
        if query_id not in self._callbacks:
            raise ApiError(
                400,
                "Bad Request: query is too old and response timeout expired or query ID is invalid",
            )
        self.answered_callbacks.append((query_id, params.get("text")))
        self._cond.notify_all()
        return True

    def _api_editMessageReplyMarkup(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        chat_id = self._chat(params)
        key = (chat_id, int(params.get("message_id") or 0))
        message = self._messages.get(key)
        if message is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if message.get("from") is not _BOT:
            raise ApiError(400, "Bad Request: message can't be edited")
        markup = params.get("reply_markup") or None  # none given: the keyboard goes
        if markup == self._keyboards.get(key):
            raise ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup "
                "of the message",
            )
        if markup is None:
            self._keyboards.pop(key)
        else:
            self._keyboards[key] = markup
        self.edits.append({"chat_id": chat_id, "message_id": key[1], "reply_markup": markup})
        self._cond.notify_all()
        return {**message, **({"reply_markup": markup} if markup else {})}

    def keyboard(self, chat_id: int, message_id: int) -> Any:
        """The inline keyboard a message of the bot shows now (None: none)."""
        with self._cond:
            return self._keyboards.get((chat_id, message_id))

    def _api_getFile(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        file_id = str(params.get("file_id"))
        if file_id not in self._files:
            raise ApiError(400, "Bad Request: invalid file_id")
        path, data = self._files[file_id]
        return {
            "file_id": file_id,
            "file_unique_id": "u" + file_id,
            "file_size": len(data),
            "file_path": path,
        }

    # -- internals (called with the lock held) ---------------------------------------------------

    def _push(self, fields: dict[str, Any]) -> int:
        update_id = next(self._update_ids)
        self._updates.append({"update_id": update_id, **fields})
        self._cond.notify_all()
        return update_id

    def _message(self, chat_id: int, sender: dict[str, Any] | None) -> dict[str, Any]:
        self._last_id[chat_id] += 1
        if self.known_chats is not None and sender is not _BOT:
            self.known_chats.add(chat_id)
        chat: dict[str, Any] = {"id": chat_id, "type": "private", "first_name": "Owner"}
        if chat_id < 0:
            chat = {"id": chat_id, "type": "group", "title": "A group"}
        message: dict[str, Any] = {
            "message_id": self._last_id[chat_id],
            "date": int(time.time()),
            "chat": chat,
        }
        if sender is not None:
            message["from"] = sender
        self._messages[(chat_id, message["message_id"])] = message
        return message

    def _file(self, folder: str, data: bytes, suffix: str) -> dict[str, Any]:
        number = next(self._ids)
        file_id = f"file{number}"
        self._files[file_id] = (f"{folder}/file_{number}{suffix}", data)
        return {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": len(data)}

    def _chat(self, params: dict[str, Any]) -> int:
        raw = str(params.get("chat_id", ""))
        if not re.fullmatch(r"-?\d+", raw) or (
            self.known_chats is not None and int(raw) not in self.known_chats
        ):
            raise ApiError(400, "Bad Request: chat not found")
        return int(raw)

    def _upload(self, params: dict[str, Any], field: str) -> tuple[str, bytes]:
        upload = params.get(field)
        if not isinstance(upload, tuple):
            raise ApiError(400, f"Bad Request: there is no {field} in the request")
        return upload

    def _deliver(
        self,
        chat_id: int,
        method: str,
        params: dict[str, Any],
        files: dict[str, tuple[str, bytes]],
        content: dict[str, Any],
    ) -> dict[str, Any]:
        reply = params.get("reply_parameters") or {}
        target = reply.get("message_id")
        known = target is None or (chat_id, target) in self._messages
        if not known and not reply.get("allow_sending_without_reply"):
            self._record(method, params, files, "Bad Request: message to be replied not found")
            raise ApiError(400, "Bad Request: message to be replied not found")
        message = {**self._message(chat_id, _BOT), **content}
        if target is not None and (chat_id, target) in self._messages:
            message["reply_to_message"] = self._messages[(chat_id, target)]
        if params.get("reply_markup"):
            message["reply_markup"] = params["reply_markup"]
            self._keyboards[(chat_id, message["message_id"])] = params["reply_markup"]
        self._record(method, params, files, None, message["message_id"])
        return message

    def _record(
        self,
        method: str,
        params: dict[str, Any],
        files: dict[str, tuple[str, bytes]],
        error: str | None,
        message_id: int | None = None,
    ) -> None:
        reply = params.get("reply_parameters") or {}
        self.sent.append(
            {
                "method": method,
                "chat_id": _int_or_str(params.get("chat_id")),
                "text": params.get("text"),
                "parse_mode": params.get("parse_mode"),
                "reply_markup": params.get("reply_markup"),
                "reply_to": reply.get("message_id"),
                "files": files,
                "error": error,
                "message_id": message_id,
            }
        )
        self._cond.notify_all()


_BOT: dict[str, Any] = {"id": BOT_ID, "is_bot": True, "first_name": "memvault"}


def _user(user_id: int, first_name: str, username: str | None) -> dict[str, Any]:
    user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
    if username:
        user["username"] = username
    return user


def _int_or_str(value: Any) -> Any:
    return int(value) if isinstance(value, str) and re.fullmatch(r"-?\d+", value) else value


def parse_html(text: str) -> str:
    """The text Telegram shows for ``text`` in parse_mode HTML, or the 400 it answers."""
    shown: list[str] = []
    open_tags: list[str] = []
    at = 0
    while at < len(text):
        char = text[at]
        tag = _TAG.match(text, at) if char == "<" else None
        entity = _ENTITY.match(text, at) if char == "&" else None
        where = f"at byte offset {len(text[:at].encode())}"
        if char == "<" and tag is None:
            raise ApiError(400, f"Bad Request: can't parse entities: Unexpected '<' {where}")
        if tag is not None:
            closing, name = tag[1] == "/", tag[2].lower()
            if name not in _TAGS:
                raise ApiError(
                    400,
                    f'Bad Request: can\'t parse entities: Unsupported start tag "{name}" {where}',
                )
            if not closing:
                open_tags.append(name)
            elif not open_tags or open_tags.pop() != name:
                raise ApiError(
                    400, f"Bad Request: can't parse entities: Unexpected end tag {where}"
                )
            at = tag.end()
        elif entity is not None:
            named, decimal, hexadecimal = entity.groups()
            code = int(decimal, 10) if decimal else int(hexadecimal or "0", 16)
            shown.append(_NAMED[named] if named else chr(code))
            at = entity.end()
        else:
            shown.append(char)
            at += 1
    if open_tags:
        raise ApiError(
            400,
            "Bad Request: can't parse entities: "
            f'Can\'t find end tag corresponding to start tag "{open_tags[-1]}"',
        )
    return "".join(shown)


def _parse_body(content_type: str, body: bytes, query: str) -> dict[str, Any]:
    """The parameters of a request, whichever way the client encoded them."""
    params: dict[str, Any] = dict(parse_qsl(query))
    if content_type.startswith("application/json"):
        params.update(json.loads(body or b"{}"))
        return params
    if content_type.startswith("multipart/form-data"):
        head = f"Content-Type: {content_type}\r\n\r\n".encode()
        form = BytesParser(policy=HTTP).parsebytes(head + body)
        files: dict[str, tuple[str, bytes]] = {}
        for part in form.iter_parts():
            name = str(part.get_param("name", header="content-disposition"))
            data = part.get_payload(decode=True)
            assert isinstance(data, bytes)
            if part.get_filename() is not None:
                files[name] = (str(part.get_filename()), data)
            else:
                params[name] = data.decode()
        for name, value in list(params.items()):  # "attach://<part>" points at a file part
            if isinstance(value, str) and value.startswith("attach://"):
                params[name] = files.pop(value.removeprefix("attach://"))
        params.update(files)
    else:
        params.update(parse_qsl(body.decode()))
    for name in _JSON_FIELDS & params.keys():
        if isinstance(params[name], str):
            params[name] = json.loads(params[name])
    return params


def _handler_for(fake: FakeTelegram) -> type[BaseHTTPRequestHandler]:
    class Handler(LoopbackHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.do_POST()

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            url = urlsplit(self.path)
            path = unquote(url.path)  # PTB quotes file paths, the token's colon included
            try:
                if match := re.fullmatch(r"/file/bot([^/]+)/(.+)", path):
                    self._send(200, fake.file(match[1], match[2]), "application/octet-stream")
                    return
                match = re.fullmatch(r"/bot([^/]+)/(\w+)", path)
                if match is None:
                    raise ApiError(404, "Not Found")
                params = _parse_body(self.headers.get("content-type", ""), body, url.query)
                result = fake.call(match[1], match[2], params)
            except ApiError as exc:
                answer: dict[str, Any] = {
                    "ok": False,
                    "error_code": exc.status,
                    "description": exc.description,
                }
                if exc.retry_after is not None:
                    answer["parameters"] = {"retry_after": exc.retry_after}
                self._send(exc.status, json.dumps(answer).encode())
                return
            self._send(200, json.dumps({"ok": True, "result": result}).encode())

        def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
