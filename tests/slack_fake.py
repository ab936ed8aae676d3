"""A fake Slack on loopback: the Web API methods memvault calls, and Socket Mode.

slack_sdk talks to it over real HTTP and a real WebSocket (aiohttp on both
ends), so a test exercises the same request building, envelope parsing,
acknowledgement and error mapping as production::

    with FakeSlack() as slack:
        settings = SlackSettings(base_url=slack.base_url)
        slack.push_message(slack.dm(OWNER), OWNER, "hello")         # a direct message
        slack.push_mention("C0GENERAL", OWNER, "what now?")          # @memvault in a channel
        slack.push_action(slack.dm(OWNER), OWNER, "approve:...")     # a button press
        slack.fail("chat.postMessage", "ratelimited", retry_after=3) # HTTP 429 + Retry-After
        slack.drop("refresh_requested")                              # Slack asks to reconnect
        slack.wait_sent(1)                                           # what the bot posted

It behaves as Slack does where a test can tell:

- Web API answers are ``{"ok": true, ...}`` or ``{"ok": false, "error": "<code>"}``
  with HTTP 200; a rate limit is HTTP 429 with ``Retry-After``. The bot token
  (``Authorization: Bearer xoxb-...``) works on every method but
  ``apps.connections.open``, which takes only the app token (``xapp-...``);
  the other token gets ``not_allowed_token_type``, none ``not_authed``, a wrong
  one ``invalid_auth``. A method whose scope was not granted answers
  ``missing_scope`` with ``needed``.
- ``apps.connections.open`` returns a ``ws://`` URL with a one-time ticket.
  The socket says ``hello``, then pushes envelopes (``events_api``,
  ``interactive``), each under a fresh ``envelope_id``, and records the
  acknowledgements (``{"envelope_id": ...}``). An envelope not acknowledged on
  a socket that closed is sent again on the next socket, with
  ``retry_attempt`` counted up and ``retry_reason: "timeout"`` (so is every
  unacknowledged one on :meth:`FakeSlack.redeliver`). Envelopes pushed while
  no socket is open wait for one.
- ``chat.postMessage`` resolves a user id to that user's direct-message
  channel, refuses unknown channels (``channel_not_found``), channels the bot
  is not in (``not_in_channel``), empty text, text over 40,000 characters
  (``msg_too_long``) and malformed Block Kit (``invalid_blocks``). A message
  the bot posts in a direct-message channel comes back as a ``message``
  event with its ``bot_id``, as Slack echoes it.
- ``chat.update`` takes a conversation id only (a user id is
  ``channel_not_found``), edits only the bot's messages (``message_not_found``,
  ``cant_update_message``); an empty ``blocks``, or text without blocks, drops
  the message's blocks.
- Files are served at ``url_private`` to the bot token only; anyone else
  (or a token without ``files:read``) gets Slack's HTML sign-in page with
  HTTP 200. Uploads go through ``files.getUploadURLExternal``, a POST to the
  upload URL and ``files.completeUploadExternal``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web

from waiting import WAIT

BOT_TOKEN = "xoxb-fake-bot-token"
APP_TOKEN = "xapp-1-fake-app-token"
TEAM_ID = "T0FAKE"
TEAM_NAME = "Fake Team"
APP_ID = "A0FAKE"
BOT_USER = "U0BOT"
BOT_ID = "B0BOT"
BOT_NAME = "memvault"
ALL_SCOPES = frozenset(
    {
        "app_mentions:read",
        "chat:write",
        "files:read",
        "files:write",
        "im:history",
        "im:write",
        "users:read",
    }
)
# The scope each method needs (Slack's method reference).
_SCOPES = {
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "users.info": "users:read",
    "files.info": "files:read",
    "files.getUploadURLExternal": "files:write",
    "files.completeUploadExternal": "files:write",
    "conversations.open": "im:write",
}
_SIGN_IN_PAGE = b"<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in</body></html>"
_TEXT_LIMIT = 40_000
_SECTION_LIMIT = 3000


class ApiError(Exception):
    """An error answer of the Web API: ``{"ok": false, "error": code, ...}``."""

    def __init__(
        self,
        error: str | None,
        *,
        status: int = 200,
        retry_after: int | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(error)
        self.error, self.status, self.retry_after, self.fields = error, status, retry_after, fields


@dataclass
class _Envelope:
    """One event or interaction, and every attempt at delivering it."""

    kind: str  # events_api | interactive
    payload: dict[str, Any]
    ids: list[str] = field(default_factory=list)  # the envelope id of each attempt
    attempts: int = 0
    acked: bool = False
    socket: int | None = None  # the socket the last attempt went out on


@dataclass
class _Socket:
    number: int
    ws: web.WebSocketResponse
    outbox: asyncio.Queue[str]
    open: bool = True


class FakeSlack:
    """The Web API methods and the Socket Mode socket memvault uses (see the module docstring)."""

    def __init__(
        self,
        *,
        bot_token: str = BOT_TOKEN,
        app_token: str = APP_TOKEN,
        scopes: Iterable[str] = ALL_SCOPES,
        echo: bool = True,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.scopes = set(scopes)
        self.echo = echo
        self.lose_acks = False  # acknowledgements "lost in transit": recorded nowhere
        self.requests: list[str] = []  # Web API method names, in order
        self.sent: list[dict[str, Any]] = []  # every chat.postMessage attempt
        self.uploads: list[dict[str, Any]] = []  # files shared by the bot
        self.responses: list[dict[str, Any]] = []  # bodies posted to response_urls
        self.updates: list[dict[str, Any]] = []  # chat.update calls that took
        self.acks: list[str] = []  # envelope ids acknowledged, in order
        self.sockets_opened = 0
        self.users: dict[str, dict[str, Any]] = {}
        self.channels: dict[str, dict[str, Any]] = {}
        self._messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.files: dict[str, dict[str, Any]] = {}  # file id -> as files.info shows it
        self._file_data: dict[str, bytes] = {}
        self._deleted: set[str] = set()
        self._uploading: dict[str, tuple[str, bytes | None]] = {}  # key -> (file id, bytes)
        self._envelopes: list[_Envelope] = []
        self._sockets: list[_Socket] = []
        self._tickets: set[str] = set()
        self._failures: dict[str, deque[ApiError]] = defaultdict(deque)
        self._numbers = itertools.count(1)
        self._last_ts = 0.0
        self._cond = threading.Condition(threading.RLock())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._address = ""
        self.add_user(BOT_USER, "memvault", is_bot=True)

    # -- the workspace ---------------------------------------------------------------------

    def add_user(
        self, user_id: str, name: str | None = None, *, display_name: str = "", is_bot: bool = False
    ) -> str:
        """A member of the workspace; returns the id."""
        with self._cond:
            handle = name or user_id.lower()
            self.users[user_id] = {
                "id": user_id,
                "team_id": TEAM_ID,
                "name": handle,
                "real_name": handle.title(),
                "is_bot": is_bot,
                "profile": {"display_name": display_name, "real_name": handle.title()},
            }
            return user_id

    def add_channel(self, channel_id: str, name: str, *, member: bool = True) -> str:
        """A channel (C... public, G... private); ``member``: the bot is in it."""
        with self._cond:
            self.channels[channel_id] = {"id": channel_id, "name": name, "member": member}
            return channel_id

    def dm(self, user_id: str) -> str:
        """The direct-message channel between the bot and ``user_id`` (D...)."""
        with self._cond:
            if user_id not in self.users:
                self.add_user(user_id)
            return "D" + user_id[1:]

    def add_file(
        self, name: str, data: bytes, mimetype: str, *, user: str = "U0SOMEONE"
    ) -> dict[str, Any]:
        """A file as Slack describes it in a ``file_share`` message."""
        with self._cond:
            file_id = f"F{next(self._numbers):07d}"
            base = f"{self._address}/files-pri/{TEAM_ID}-{file_id}"
            file = {
                "id": file_id,
                "created": int(time.time()),
                "timestamp": int(time.time()),
                "name": name,
                "title": name,
                "mimetype": mimetype,
                "filetype": name.rsplit(".", 1)[-1] if "." in name else "binary",
                "pretty_type": mimetype,
                "user": user,
                "user_team": TEAM_ID,
                "editable": False,
                "size": len(data),
                "mode": "hosted",
                "is_external": False,
                "external_type": "",
                "is_public": False,
                "public_url_shared": False,
                "display_as_bot": False,
                "url_private": f"{base}/{name}",
                "url_private_download": f"{base}/download/{name}",
                "permalink": f"https://fake.slack.com/files/{user}/{file_id}/{name}",
            }
            self.files[file_id] = file
            self._file_data[file_id] = data
            return dict(file)

    def delete_file(self, file_id: str) -> None:
        """The file is gone: files.info answers ``file_deleted``, its URL 404."""
        with self._cond:
            self._deleted.add(file_id)

    # -- what people do ----------------------------------------------------------------------

    def push_message(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        thread_ts: str | None = None,
        files: Iterable[dict[str, Any]] = (),
        subtype: str | None = None,
        **extra: Any,
    ) -> str:
        """``user`` writes ``text`` in ``channel`` (a ``message`` event); returns its ts."""
        with self._cond:
            if user not in self.users:
                self.add_user(user)
            ts = self._stamp()
            event: dict[str, Any] = {
                "type": "message",
                "client_msg_id": str(uuid.uuid4()),
                "text": text,
                "user": user,
                "ts": ts,
                "team": TEAM_ID,
                "channel": channel,
                "event_ts": ts,
                "channel_type": self._channel_type(channel),
            }
            shared = list(files)
            if shared:
                event["subtype"] = "file_share"
                event["files"] = shared
                event["upload"] = False
            if subtype is not None:
                event["subtype"] = subtype
            if thread_ts is not None:
                event["thread_ts"] = thread_ts
                parent = self._messages.get((channel, thread_ts))
                event["parent_user_id"] = parent["user"] if parent else user
            event.update(extra)
            self._messages[(channel, ts)] = event
            self._push_event(event)
            return ts

    def push_mention(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        thread_ts: str | None = None,
        with_message: bool = False,
    ) -> str:
        """``user`` mentions the bot in ``channel`` (an ``app_mention`` event; with
        ``with_message``, the ``message`` event an app subscribed to channels also gets,
        first); returns the ts."""
        with self._cond:
            if user not in self.users:
                self.add_user(user)
            ts = self._stamp()
            said = f"<@{BOT_USER}> {text}"
            mention: dict[str, Any] = {
                "type": "app_mention",
                "client_msg_id": str(uuid.uuid4()),
                "text": said,
                "user": user,
                "ts": ts,
                "team": TEAM_ID,
                "channel": channel,
                "event_ts": ts,
            }
            if thread_ts is not None:
                mention["thread_ts"] = thread_ts
            message = {
                **mention,
                "type": "message",
                "channel_type": self._channel_type(channel),
            }
            self._messages[(channel, ts)] = message
            if with_message:
                self._push_event(message)
            self._push_event(mention)
            return ts

    def push_event(self, event: dict[str, Any]) -> None:
        """Any other event, as given."""
        with self._cond:
            self._push_event(event)

    def push_action(
        self, channel: str, user: str, value: str, *, message_ts: str | None = None
    ) -> str:
        """``user`` presses the button carrying ``value`` on a message of the bot in
        ``channel`` (default: its last one); returns the interaction's response_url."""
        with self._cond:
            if user not in self.users:
                self.add_user(user)
            if message_ts is None:
                own = [ts for (chat, ts), m in self._messages.items() if chat == channel]
                own = [ts for ts in own if self._messages[(channel, ts)].get("bot_id") == BOT_ID]
                message_ts = max(own, default=self._stamp())
            message = self._messages.get((channel, message_ts)) or {
                "type": "message",
                "text": "(a message)",
                "ts": message_ts,
                "user": BOT_USER,
                "bot_id": BOT_ID,
            }
            number = next(self._numbers)
            response_url = f"{self._address}/actions/{TEAM_ID}/{number}/fake{number}"
            person = self.users[user]
            payload = {
                "type": "block_actions",
                "user": {
                    "id": user,
                    "username": person["name"],
                    "name": person["name"],
                    "team_id": TEAM_ID,
                },
                "api_app_id": APP_ID,
                "token": "fake-verification-token",
                "container": {
                    "type": "message",
                    "message_ts": message_ts,
                    "channel_id": channel,
                    "is_ephemeral": False,
                },
                "trigger_id": f"{number}.{TEAM_ID}.fake",
                "team": {"id": TEAM_ID, "domain": "fake"},
                "enterprise": None,
                "is_enterprise_install": False,
                "channel": {"id": channel, "name": self._channel_name(channel)},
                "message": message,
                "state": {"values": {}},
                "response_url": response_url,
                "actions": [
                    {
                        "action_id": "memvault_0",
                        "block_id": "memvault_buttons",
                        "text": {"type": "plain_text", "text": value, "emoji": True},
                        "value": value,
                        "type": "button",
                        "action_ts": self._stamp(),
                    }
                ],
            }
            self._enqueue(_Envelope("interactive", payload))
            return response_url

    def fail(
        self,
        method: str,
        error: str | None = None,
        *,
        status: int = 200,
        retry_after: int | None = None,
        times: int = 1,
        **fields: Any,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with this error: ``retry_after``
        makes it a 429 (``ratelimited``); a 5xx without ``error`` has an HTML body."""
        if retry_after is not None:
            status, error = 429, error or "ratelimited"
        failure = ApiError(error, status=status, retry_after=retry_after, **fields)
        with self._cond:
            self._failures[method].extend([failure] * times)

    # -- the socket ----------------------------------------------------------------------------

    def drop(self, reason: str | None = None) -> None:
        """End the open sockets: with a ``disconnect`` message giving ``reason``
        (``refresh_requested``, ``warning``, ``link_disabled``), or just closed."""
        with self._cond:
            sockets = [s for s in self._sockets if s.open]
        loop = self._running_loop()
        for socket in sockets:
            if reason is not None:
                message = {
                    "type": "disconnect",
                    "reason": reason,
                    "debug_info": {"host": "applink-fake"},
                }
                loop.call_soon_threadsafe(socket.outbox.put_nowait, json.dumps(message))
            else:
                asyncio.run_coroutine_threadsafe(socket.ws.close(), loop).result(WAIT)

    def redeliver(self) -> None:
        """Send every envelope not acknowledged again (Slack's retry after a timeout)."""
        with self._cond:
            socket = self._current()
            if socket is None:
                return
            for envelope in self._envelopes:
                if not envelope.acked and envelope.attempts:
                    self._send(envelope, socket)

    # -- reading back --------------------------------------------------------------------------

    def unacknowledged(self) -> list[dict[str, Any]]:
        """The payloads of envelopes delivered or waiting and not acknowledged."""
        with self._cond:
            return [e.payload for e in self._envelopes if not e.acked]

    def deliveries(self) -> list[tuple[str, int]]:
        """``(envelope id, retry_attempt)`` of every attempt so far, in order."""
        with self._cond:
            attempts = [(i, n) for e in self._envelopes for n, i in enumerate(e.ids)]
            return sorted(attempts, key=lambda pair: int(pair[0].split("-")[1]))

    def attempts(self, text: str) -> int:
        """How often the message event saying ``text`` was delivered."""
        with self._cond:
            return sum(
                e.attempts
                for e in self._envelopes
                if (e.payload.get("event") or {}).get("text") == text
                and (e.payload.get("event") or {}).get("type") == "message"
            )

    def posted(self, channel: str) -> list[dict[str, Any]]:
        """The messages delivered to ``channel`` (a user id means their DM), refused ones
        left out."""
        target = self.dm(channel) if channel[:1] in ("U", "W") else channel
        with self._cond:
            return [s for s in self.sent if s["channel"] == target and not s["error"]]

    def wait_sent(self, count: int, timeout: float = WAIT) -> list[dict[str, Any]]:
        """The chat.postMessage attempts, once there are at least ``count``."""
        self.wait(lambda: len(self.sent) >= count, f"{count} chat.postMessage attempts", timeout)
        with self._cond:
            return list(self.sent)

    def wait_connected(self, count: int = 1, timeout: float = WAIT) -> None:
        """Return once ``count`` sockets were opened and one is open."""
        self.wait(
            lambda: self.sockets_opened >= count and self._current() is not None,
            f"socket number {count}",
            timeout,
        )

    def wait_acknowledged(self, timeout: float = WAIT) -> None:
        """Return once every envelope delivered so far is acknowledged."""
        self.wait(
            lambda: all(e.acked for e in self._envelopes if e.attempts),
            "the acknowledgements",
            timeout,
        )

    def wait(self, ready: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
        """Return once ``ready()`` (checked under the fake's lock) is true."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not ready():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"fake Slack: no {what} after {timeout} s")
                self._cond.wait(min(left, 0.2))

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``SlackSettings.base_url`` for this server."""
        if not self._address:
            raise RuntimeError("the fake server is not running; use it as a context manager")
        return self._address + "/api/"

    def __enter__(self) -> FakeSlack:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="FakeSlack", daemon=True
        )
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(WAIT)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        loop = self._running_loop()
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(WAIT)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(WAIT)
        loop.close()
        self._loop = None

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._web_api)
        app.router.add_get("/link/", self._socket_mode)
        app.router.add_get("/files-pri/{key}/{name}", self._file)
        app.router.add_get("/files-pri/{key}/download/{name}", self._file)
        app.router.add_post("/upload/v1/{key}", self._upload)
        app.router.add_post("/actions/{team}/{number}/{secret}", self._response_url)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self._address = f"http://{host}:{port}"

    async def _shutdown(self) -> None:
        with self._cond:
            sockets = list(self._sockets)
        for socket in sockets:
            await socket.ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("the fake server is not running; use it as a context manager")
        return self._loop

    # -- the Web API -------------------------------------------------------------------------

    async def _web_api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        body = await request.read()
        if request.content_type == "application/json" and body:
            params.update(json.loads(body))
        elif body:
            params.update(parse_qsl(body.decode()))
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        token = token or str(params.pop("token", "") or "")
        try:
            with self._cond:
                result = self.call(token, method, params)
        except ApiError as exc:
            if exc.error is None:  # a proxy's error page, not the API's JSON
                return web.Response(
                    status=exc.status,
                    body=b"<html>Service Unavailable</html>",
                    content_type="text/html",
                )
            headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else {}
            answer = {"ok": False, "error": exc.error, **exc.fields}
            return web.json_response(answer, status=exc.status, headers=headers)
        return web.json_response({"ok": True, **result})

    def call(self, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer one Web API call (the lock held): its fields, or raise :class:`ApiError`."""
        self.requests.append(method)
        self._cond.notify_all()
        app_method = method == "apps.connections.open"
        if not token:
            raise ApiError("not_authed")
        if token in (self.bot_token, self.app_token):
            if (token == self.app_token) != app_method:
                raise ApiError("not_allowed_token_type")
        else:
            raise ApiError("invalid_auth")
        handler = getattr(self, "_api_" + method.replace(".", "_"), None)
        if handler is None:
            raise ApiError("unknown_method")
        needed = _SCOPES.get(method)
        if needed and needed not in self.scopes:
            raise ApiError("missing_scope", needed=needed, provided=",".join(sorted(self.scopes)))
        if self._failures[method]:
            failure = self._failures[method].popleft()
            if method == "chat.postMessage":
                self._record(params, str(params.get("channel")), failure.error or "HTTP error")
            raise failure
        result: dict[str, Any] = handler(params)
        return result

    def _api_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake.slack.com/",
            "team": TEAM_NAME,
            "user": BOT_NAME,
            "team_id": TEAM_ID,
            "user_id": BOT_USER,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _api_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        ticket = str(uuid.uuid4())
        self._tickets.add(ticket)
        url = self._address.replace("http://", "ws://")
        return {"url": f"{url}/link/?ticket={ticket}&app_id={APP_ID}"}

    def _api_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        asked = str(params.get("channel") or "")
        try:
            channel = self._postable(asked)
            text, blocks = _content(params)
        except ApiError as exc:
            self._record(params, asked, str(exc.error))
            raise
        ts = self._stamp()
        message: dict[str, Any] = {
            "type": "message",
            "text": text,
            "user": BOT_USER,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "ts": ts,
            "team": TEAM_ID,
        }
        if blocks:
            message["blocks"] = blocks
        if params.get("thread_ts"):
            message["thread_ts"] = str(params["thread_ts"])
        self._messages[(channel, ts)] = message
        self._record(params, channel, None, ts)
        if self.echo and channel.startswith("D"):
            echoed = {**message, "channel": channel, "event_ts": ts, "channel_type": "im"}
            self._push_event(echoed)
        return {"channel": channel, "ts": ts, "message": message}

    def _api_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(params.get("channel") or ""), str(params.get("ts") or "")
        if channel[:1] in ("U", "W") or not self._known(channel):
            raise ApiError("channel_not_found")  # a DM is named by its D... id here
        message = self._messages.get((channel, ts))
        if message is None:
            raise ApiError("message_not_found")
        if message.get("bot_id") != BOT_ID:
            raise ApiError("cant_update_message")
        text, blocks = _content(params)
        if blocks:
            message["blocks"] = blocks
        elif blocks is not None or text:  # an empty list, or text alone, drops them
            message.pop("blocks", None)
        message["text"] = text or message["text"]
        message["edited"] = {"user": BOT_USER, "ts": self._stamp()}
        self.updates.append({"channel": channel, "ts": ts, "text": text, "blocks": blocks})
        self._cond.notify_all()
        return {"channel": channel, "ts": ts, "text": text, "message": message}

    def message(self, channel: str, ts: str) -> dict[str, Any] | None:
        """A posted message as it stands now (a user id means their DM)."""
        target = self.dm(channel) if channel[:1] in ("U", "W") else channel
        with self._cond:
            found = self._messages.get((target, ts))
            return dict(found) if found is not None else None

    def _api_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(params.get("user")))
        if user is None:
            raise ApiError("user_not_found")
        return {"user": user}

    def _api_files_info(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params.get("file"))
        if file_id in self._deleted:
            raise ApiError("file_deleted")
        if file_id not in self.files:
            raise ApiError("file_not_found")
        return {"file": self.files[file_id], "comments": [], "response_metadata": {}}

    def _api_conversations_open(self, params: dict[str, Any]) -> dict[str, Any]:
        users = str(params.get("users") or "").split(",")
        if len(users) != 1 or users[0] not in self.users:
            raise ApiError("user_not_found")
        return {"channel": {"id": self.dm(users[0])}}

    def _api_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        if not params.get("filename") or not str(params.get("length", "")).isdigit():
            raise ApiError("invalid_arguments")
        file_id = f"F{next(self._numbers):07d}"
        key = uuid.uuid4().hex
        self._uploading[key] = (file_id, None)
        self.files[file_id] = {"id": file_id, "name": str(params["filename"])}
        return {"upload_url": f"{self._address}/upload/v1/{key}", "file_id": file_id}

    def _api_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        files = json.loads(str(params.get("files") or "[]"))
        channel = str(params.get("channel_id") or "")
        if channel and (channel[:1] not in ("C", "G", "D") or not self._known(channel)):
            raise ApiError("channel_not_found")
        shared = []
        for item in files:
            key = next((k for k, (f, _) in self._uploading.items() if f == item["id"]), None)
            if key is None or self._uploading[key][1] is None:
                raise ApiError("file_not_found")
            data = self._uploading.pop(key)[1] or b""
            name = self.files[item["id"]]["name"]
            self.uploads.append(
                {
                    "channel": channel,
                    "thread_ts": params.get("thread_ts"),
                    "name": name,
                    "title": item.get("title"),
                    "data": data,
                    "file_id": item["id"],
                }
            )
            shared.append({"id": item["id"], "title": item.get("title") or name})
        self._cond.notify_all()
        return {"files": shared}

    # -- files, uploads, response URLs -----------------------------------------------------------

    async def _file(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["key"].removeprefix(f"{TEAM_ID}-")
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        with self._cond:
            if file_id in self._deleted or file_id not in self._file_data:
                return web.Response(status=404, text="Not Found")
            if token != self.bot_token or "files:read" not in self.scopes:
                return web.Response(body=_SIGN_IN_PAGE, content_type="text/html")
            data = self._file_data[file_id]
            mime = str(self.files[file_id].get("mimetype") or "application/octet-stream")
        return web.Response(body=data, content_type=mime)

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        data = await request.read()
        with self._cond:
            key = request.match_info["key"]
            if key not in self._uploading:
                return web.Response(status=404, text="Not Found")
            self._uploading[key] = (self._uploading[key][0], data)
        return web.Response(text=f"OK - {len(data)}", content_type="text/plain")

    async def _response_url(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        with self._cond:
            self.responses.append({"url": str(request.url), "body": body})
            self._cond.notify_all()
        return web.json_response({"ok": True})

    # -- Socket Mode -----------------------------------------------------------------------------

    async def _socket_mode(self, request: web.Request) -> web.StreamResponse:
        with self._cond:
            ticket = request.query.get("ticket", "")
            if ticket not in self._tickets:
                return web.Response(status=401, text="invalid ticket")
            self._tickets.discard(ticket)
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        with self._cond:
            self.sockets_opened += 1
            socket = _Socket(self.sockets_opened, ws, asyncio.Queue())
            self._sockets.append(socket)
            hello = {
                "type": "hello",
                "num_connections": sum(s.open for s in self._sockets),
                "debug_info": {"host": "applink-fake", "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP_ID},
            }
            socket.outbox.put_nowait(json.dumps(hello))
            self._resend(lambda e: e.socket is None or not self._socket(e.socket).open)
        pump = asyncio.create_task(self._pump(socket))
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._acknowledge(json.loads(message.data))
        finally:
            pump.cancel()
            with self._cond:
                socket.open = False
                self._resend(lambda e: e.socket == socket.number)  # to another open socket
        return ws

    def _resend(self, which: Callable[[_Envelope], bool]) -> None:
        """Send the unacknowledged envelopes ``which`` picks on the newest open socket."""
        socket = self._current()
        if socket is not None:
            for envelope in self._envelopes:
                if not envelope.acked and which(envelope):
                    self._send(envelope, socket)
        self._cond.notify_all()

    async def _pump(self, socket: _Socket) -> None:
        while True:
            text = await socket.outbox.get()
            if socket.ws.closed:
                return
            await socket.ws.send_str(text)

    def _acknowledge(self, message: dict[str, Any]) -> None:
        envelope_id = message.get("envelope_id")
        with self._cond:
            if not envelope_id or self.lose_acks:
                return
            self.acks.append(str(envelope_id))
            for envelope in self._envelopes:
                if envelope_id in envelope.ids:
                    envelope.acked = True
            self._cond.notify_all()

    # -- internals (called with the lock held) ---------------------------------------------------

    def _push_event(self, event: dict[str, Any]) -> None:
        payload = {
            "token": "fake-verification-token",
            "team_id": TEAM_ID,
            "context_team_id": TEAM_ID,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{next(self._numbers):08d}",
            "event_time": int(float(event.get("event_ts") or time.time())),
            "authorizations": [
                {
                    "team_id": TEAM_ID,
                    "user_id": BOT_USER,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
        }
        self._enqueue(_Envelope("events_api", payload))

    def _enqueue(self, envelope: _Envelope) -> None:
        self._envelopes.append(envelope)
        socket = self._current()
        if socket is not None:
            self._send(envelope, socket)
        self._cond.notify_all()

    def _send(self, envelope: _Envelope, socket: _Socket) -> None:
        envelope_id = f"{uuid.uuid4().hex[:8]}-{next(self._numbers)}"
        message = {
            "envelope_id": envelope_id,
            "payload": envelope.payload,
            "type": envelope.kind,
            "accepts_response_payload": False,
            "retry_attempt": envelope.attempts,
            "retry_reason": "timeout" if envelope.attempts else "",
        }
        envelope.ids.append(envelope_id)
        envelope.attempts += 1
        envelope.socket = socket.number
        self._running_loop().call_soon_threadsafe(socket.outbox.put_nowait, json.dumps(message))

    def _current(self) -> _Socket | None:
        """The newest open socket (Slack spreads envelopes over an app's sockets)."""
        return next((s for s in reversed(self._sockets) if s.open), None)

    def _socket(self, number: int) -> _Socket:
        return next(s for s in self._sockets if s.number == number)

    def _stamp(self) -> str:
        """A new message ts: seconds and microseconds, growing."""
        self._last_ts = max(time.time(), self._last_ts + 0.000001)
        return f"{self._last_ts:.6f}"

    def _channel_type(self, channel: str) -> str:
        if channel.startswith("D"):
            return "im"
        return "group" if channel.startswith("G") else "channel"

    def _channel_name(self, channel: str) -> str:
        if channel in self.channels:
            return str(self.channels[channel]["name"])
        return "directmessage" if channel.startswith("D") else "unknown"

    def _known(self, channel: str) -> bool:
        if channel.startswith("D"):
            return "U" + channel[1:] in self.users
        return channel in self.channels

    def _postable(self, asked: str) -> str:
        """The channel ``chat.postMessage`` posts to for ``asked``, or its error."""
        if asked[:1] in ("U", "W"):
            if asked not in self.users or self.users[asked]["is_bot"]:
                raise ApiError("channel_not_found")
            return self.dm(asked)
        if not self._known(asked):
            raise ApiError("channel_not_found")
        if asked in self.channels and not self.channels[asked]["member"]:
            raise ApiError("not_in_channel")
        return asked

    def _record(
        self, params: dict[str, Any], channel: str, error: str | None, ts: str | None = None
    ) -> None:
        blocks = params.get("blocks")
        self.sent.append(
            {
                "channel": channel,
                "asked": params.get("channel"),
                "text": params.get("text"),
                "thread_ts": params.get("thread_ts"),
                "blocks": json.loads(blocks) if isinstance(blocks, str) else blocks,
                "error": error,
                "ts": ts,
            }
        )
        self._cond.notify_all()


def _content(params: dict[str, Any]) -> tuple[str, Any]:
    """A message's text and Block Kit blocks (None: not given), refused as Slack refuses
    them: nothing to show, text too long, blocks malformed."""
    text = str(params.get("text") or "")
    blocks = params.get("blocks")
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    if not text.strip() and not blocks:
        raise ApiError("no_text")
    if len(text) > _TEXT_LIMIT:
        raise ApiError("msg_too_long")
    if blocks is not None:
        _check_blocks(blocks)
    return text, blocks


def _check_blocks(blocks: Any) -> None:
    """Block Kit's limits where memvault's messages could meet them."""
    if not isinstance(blocks, list) or len(blocks) > 50:
        raise ApiError("invalid_blocks")
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "section":
            text = block.get("text") or {}
            if text.get("type") not in ("mrkdwn", "plain_text") or not text.get("text"):
                raise ApiError("invalid_blocks")
            if len(text["text"]) > _SECTION_LIMIT:
                raise ApiError("invalid_blocks")
        elif kind == "actions":
            elements = block.get("elements") or []
            if not 1 <= len(elements) <= 25:
                raise ApiError("invalid_blocks")
            for element in elements:
                label = (element.get("text") or {}).get("text") or ""
                if element.get("type") != "button" or not 1 <= len(label) <= 75:
                    raise ApiError("invalid_blocks")
                if len(str(element.get("value") or "")) > 2000 or not element.get("action_id"):
                    raise ApiError("invalid_blocks")
        else:
            raise ApiError("invalid_blocks")
