"""A fake Discord on loopback: the REST API (v10) and the Gateway, in Discord's wire format.

discord.py talks to it over real HTTP and a real WebSocket, so a test exercises
the same login, Gateway handshake, event parsing, rate-limit handling and
error mapping as production::

    with FakeDiscord(users={42: "ada"}, guilds={7: [70, 71]}) as fake:
        settings = DiscordSettings(api_base=fake.base_url)
        message_id = fake.push_dm(42, "hello")                 # what a user types
        fake.push_guild(70, 42, "hi @bot", mention=True)       # a mention in a guild
        fake.fail("POST /channels/{channel_id}/messages", 429, retry_after=3)
        fake.drop_connections()                                # the socket goes away
        fake.drop_connections(forget=True)                     # ... and its session too
        ...
        fake.delivered(fake.dm_channel(42))                    # what the bot said there

It behaves as Discord does where a test can tell:

- REST under ``/api/v10``: ``Authorization: Bot <token>`` or 401; errors as
  ``{"message": ..., "code": N}``; a 429 with ``retry_after`` / ``global`` in its
  body and ``Retry-After`` in its headers; rate-limit headers on every answer;
  ``GET /channels/{id}/messages`` pages newest first (``after`` / ``before`` /
  ``limit``); a send longer than 2,000 characters is "Invalid Form Body";
  a channel id that names no channel (a user id, say) is "Unknown Channel".
- The Gateway at ``/gateway``: HELLO, IDENTIFY (a wrong token closes 4004),
  READY then GUILD_CREATE per guild, heartbeats acknowledged, MESSAGE_CREATE
  dispatched with sequence numbers to the sessions whose intents ask for it
  (without MESSAGE_CONTENT, a guild message not mentioning the bot comes with
  no content), RESUME replaying what a dropped session missed (INVALID_SESSION for a
  session it forgot), and ``zlib-stream`` or ``zstd-stream`` transport compression
  when the URL asks for it (discord.py asks for zstd when ``zstandard`` is installed).
  ``FakeDiscord(message_content=False)`` is a bot whose Message Content
  intent is not enabled: an IDENTIFY asking for it is closed with 4014. A session closed normally
  (1000) is gone; a dropped one stays resumable. Nothing is replayed to a new
  session: what was sent while no bot listened is only in the channel's history.
- Attachments are served (without auth, as Discord's CDN) at their ``url``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
import threading
import time
import uuid
import zlib
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, TypeVar

import zstandard
from aiohttp import WSMsgType, web

from waiting import WAIT, wait_for

FAKE_TOKEN = "MTAxMDEw.fake-discord.token"
BOT_ID = 1_010_101_010_101_010_101
APP_ID = 1_010_101_010_101_010_100
DISCORD_EPOCH = 1_420_070_400_000
API = "/api/v10"
INTENT_GUILDS = 1 << 0
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DIRECT_MESSAGES = 1 << 12
INTENT_MESSAGE_CONTENT = 1 << 15
MESSAGES = "/channels/{channel_id}/messages"
COMPRESSIONS = (None, "zlib-stream", "zstd-stream")  # the Gateway's transport compressions
_ERRORS = {
    400: ("Invalid Form Body", 50035),
    401: ("401: Unauthorized", 0),
    403: ("Missing Access", 50001),
    404: ("Unknown Channel", 10003),
    500: ("500: Internal Server Error", 0),
    502: ("502: Bad Gateway", 0),
    503: ("503: Service Unavailable", 0),
}
T = TypeVar("T")


@dataclass(frozen=True)
class _Failure:
    status: int
    message: str
    code: int
    retry_after: float | None
    is_global: bool


class _Socket:
    """One Gateway connection: JSON text frames, or one compressed stream of binary frames
    (``zlib-stream``, each message ending in a sync flush; ``zstd-stream``, each message a
    flushed block of one zstd frame), as the URL's ``compress`` asks."""

    def __init__(
        self, request: web.Request, ws: web.WebSocketResponse, *, compression: str | None
    ) -> None:
        self.request = request
        self.ws = ws
        self.dropped = False  # closed by the fake (a network drop), not by the client
        self._zlib = zlib.compressobj() if compression == "zlib-stream" else None
        self._zstd = (
            zstandard.ZstdCompressor().compressobj() if compression == "zstd-stream" else None
        )

    async def send(self, payload: dict[str, Any]) -> None:
        text = json.dumps(payload)
        if self._zlib is not None:
            data = self._zlib.compress(text.encode()) + self._zlib.flush(zlib.Z_SYNC_FLUSH)
            await self.ws.send_bytes(data)
        elif self._zstd is not None:
            flush = zstandard.COMPRESSOBJ_FLUSH_BLOCK
            await self.ws.send_bytes(self._zstd.compress(text.encode()) + self._zstd.flush(flush))
        else:
            await self.ws.send_str(text)

    async def close(self, code: int, reason: bytes) -> None:
        """A close frame; a client that does not answer it has its connection cut."""
        try:
            await asyncio.wait_for(self.ws.close(code=code, message=reason), WAIT)
        except (TimeoutError, ConnectionError):
            self.cut()

    def cut(self) -> None:
        """The connection gone without a close frame, as a network failure leaves it."""
        transport = self.request.transport
        if transport is not None:
            transport.abort()


@dataclass
class _Session:
    """A Gateway session: what it was sent (to replay on RESUME) and where it listens."""

    id: str
    intents: int
    sequence: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)
    socket: _Socket | None = None


class FakeDiscord:
    """Discord's REST API and Gateway as a bot sees them (see the module docstring)."""

    def __init__(
        self,
        token: str = FAKE_TOKEN,
        *,
        username: str = "memvault_test_bot",
        users: dict[int, str] | None = None,
        guilds: dict[int, Iterable[int]] | None = None,
        heartbeat_ms: int = 41_250,
        message_content: bool = True,
    ) -> None:
        self.token = token
        self.message_content = message_content  # the privileged intent is enabled for the bot
        self.heartbeat_ms = heartbeat_ms
        self.bot = _user(BOT_ID, username, bot=True)
        self.users: dict[int, dict[str, Any]] = {BOT_ID: self.bot}
        for user_id, name in (users or {}).items():
            self.user(user_id, name)
        self.guilds: dict[int, list[int]] = {g: list(c) for g, c in (guilds or {}).items()}
        self.channels: dict[int, dict[str, Any]] = {}
        for guild_id, channel_ids in self.guilds.items():
            for position, channel_id in enumerate(channel_ids):
                self.channels[channel_id] = _text_channel(channel_id, guild_id, position)
        self.history: dict[int, list[dict[str, Any]]] = defaultdict(list)
        # What tests read: every request ("GET /users/@me"), every send attempt that reached
        # the handler (delivered or refused), typing, IDENTIFY / RESUME payloads, the URL
        # queries of Gateway connections, and the scripted failures served.
        self.requests: list[str] = []
        self.sent: list[dict[str, Any]] = []
        self.typing: list[int] = []
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.connections: list[dict[str, str]] = []
        self.failures_served: list[tuple[str, int]] = []
        self._dms: dict[int, int] = {}  # user id -> DM channel id
        self._refusing: set[int] = set()  # users whose DMs are closed to the bot
        self._files: dict[tuple[int, int, str], tuple[bytes, str]] = {}
        self._failures: dict[str, deque[_Failure]] = defaultdict(deque)
        self._sessions: dict[str, _Session] = {}
        self._sockets: set[_Socket] = set()
        self._last_id = 0
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fake-discord", daemon=True
        )
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> FakeDiscord:
        self._thread.start()
        self._run(self._serve())
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._run(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(WAIT)
        self._loop.close()

    @property
    def address(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The REST API's base, for ``DiscordSettings.api_base``."""
        return self.address + API

    @property
    def gateway_url(self) -> str:
        """The Gateway, as ``GET /gateway/bot`` names it."""
        return f"ws://127.0.0.1:{self.port}/gateway"

    # -- scripting -------------------------------------------------------------------------

    def user(self, user_id: int, name: str, *, bot: bool = False) -> dict[str, Any]:
        """Make ``user_id`` a Discord user the bot can reach (a DM can be opened to them)."""
        self.users[user_id] = _user(user_id, name, bot=bot)
        return self.users[user_id]

    def dm_channel(self, user_id: int) -> int:
        """The id of the DM channel between the bot and ``user_id`` (opened if needed)."""
        return self._run(self._async(lambda: self._open_dm(user_id)))

    def refuse_dms(self, user_id: int) -> None:
        """``user_id`` closed their DMs: sends there get 403 "Cannot send messages to this user"."""
        self._refusing.add(user_id)

    def push_dm(
        self,
        user_id: int,
        text: str,
        *,
        attachments: Iterable[tuple[str, bytes, str]] = (),
        reply_to: int | None = None,
        voice: bool = False,
        forwarded: str | None = None,
    ) -> int:
        """``user_id`` writes to the bot in their DM (``forwarded``: forwards a message
        that said this, from another channel); returns the message id."""
        if user_id not in self.users:
            self.user(user_id, f"user{user_id}")
        author = self.users[user_id]

        async def post() -> int:
            channel_id = self._open_dm(user_id)
            message = await self._post(
                channel_id, author, text, attachments, reply_to, voice=voice, forwarded=forwarded
            )
            return int(message["id"])

        return self._run(post())

    def push_guild(
        self,
        channel_id: int,
        user_id: int,
        text: str,
        *,
        mention: bool = False,
        bot: bool = False,
        reply_to: int | None = None,
    ) -> int:
        """``user_id`` writes in a guild channel (``mention``: ``<@bot>`` first); the id."""
        if user_id not in self.users:
            self.user(user_id, f"user{user_id}", bot=bot)
        author = self.users[user_id]
        content = f"<@{BOT_ID}> {text}" if mention else text
        message = self._run(self._post(channel_id, author, content, (), reply_to))
        return int(message["id"])

    def fail(
        self,
        route: str,
        status: int,
        *,
        times: int = 1,
        retry_after: float | None = None,
        is_global: bool = False,
        message: str | None = None,
        code: int | None = None,
    ) -> None:
        """The next ``times`` requests to ``route`` ("POST /channels/{channel_id}/messages",
        "GET /gateway/bot", ...) answer ``status`` with Discord's error body."""
        default_message, default_code = _ERRORS.get(status, (f"{status}: Error", 0))
        if status == 429:
            default_message = "You are being rate limited."
        failure = _Failure(
            status,
            message or default_message,
            default_code if code is None else code,
            retry_after if retry_after is not None else (1.0 if status == 429 else None),
            is_global,
        )
        self._failures[route].extend([failure] * times)

    def drop_connections(self, code: int = 4000, *, forget: bool = False) -> int:
        """Close every Gateway connection as a failing network would; the sessions stay
        resumable unless ``forget`` (then a RESUME is answered with INVALID_SESSION and
        the client must IDENTIFY anew). The number closed."""

        async def drop() -> int:
            sockets = list(self._sockets)
            for socket in sockets:
                socket.dropped = True
                await socket.close(code, b"Unknown error.")
            if forget:
                self._sessions.clear()
            return len(sockets)

        return self._run(drop())

    # -- reading -----------------------------------------------------------------------------

    def delivered(self, channel_id: int) -> list[str]:
        """What the bot posted in ``channel_id`` (refused attempts left out)."""
        return [
            str(s["content"] or "")
            for s in list(self.sent)
            if s["channel_id"] == channel_id and s["error"] is None
        ]

    def live_sessions(self) -> int:
        """Gateway sessions with a connection right now."""
        return sum(1 for s in list(self._sessions.values()) if s.socket is not None)

    def wait_identified(self, count: int = 1, timeout: float = WAIT) -> None:
        """Wait until ``count`` IDENTIFY payloads arrived in total."""
        wait_for(lambda: len(self.identifies) >= count, f"{count} IDENTIFY", timeout)

    def wait_listening(self, timeout: float = WAIT) -> None:
        """Wait until a Gateway session is connected and ready for events."""
        wait_for(lambda: self.live_sessions() > 0, "a connected Gateway session", timeout)

    # -- the server ------------------------------------------------------------------------

    def _run(self, work: Awaitable[T]) -> T:
        async def wrapped() -> T:
            return await work

        return asyncio.run_coroutine_threadsafe(wrapped(), self._loop).result(WAIT)

    @staticmethod
    async def _async(function: Callable[[], T]) -> T:
        return function()

    async def _serve(self) -> None:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        app.router.add_get(API + "/users/@me", self._me)
        app.router.add_get(API + "/oauth2/applications/@me", self._application)
        app.router.add_get(API + "/gateway/bot", self._gateway_bot)
        app.router.add_get(API + MESSAGES, self._read_messages)
        app.router.add_post(API + MESSAGES, self._create_message)
        app.router.add_post(API + "/channels/{channel_id}/typing", self._typing)
        app.router.add_post(API + "/users/@me/channels", self._create_dm)
        app.router.add_get("/attachments/{channel_id}/{attachment_id}/{filename}", self._file)
        app.router.add_get("/gateway", self._gateway)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def _shutdown(self) -> None:
        for socket in list(self._sockets):
            socket.cut()  # the server vanishes: clients still connected find out on their own
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not request.path.startswith(API + "/"):
            return await handler(request)
        resource = request.match_info.route.resource
        template = resource.canonical if resource is not None else request.path
        route = f"{request.method} {template.removeprefix(API)}"
        self.requests.append(route)
        if request.headers.get("Authorization") != f"Bot {self.token}":
            return _error(401)
        queue = self._failures.get(route)
        if queue:
            failure = queue.popleft()
            self.failures_served.append((route, failure.status))
            return _failure(failure)
        response = await handler(request)
        bucket = hashlib.md5(route.encode()).hexdigest()
        response.headers.update(
            {
                "X-RateLimit-Limit": "5",
                "X-RateLimit-Remaining": "4",
                "X-RateLimit-Reset": f"{time.time() + 1:.3f}",
                "X-RateLimit-Reset-After": "1.000",
                "X-RateLimit-Bucket": bucket,
                "Via": "1.1 google",
            }
        )
        return response

    # -- REST ------------------------------------------------------------------------------

    async def _me(self, request: web.Request) -> web.Response:
        return _json(
            {**self.bot, "verified": True, "mfa_enabled": False, "flags": 0, "locale": "en-US"}
        )

    async def _application(self, request: web.Request) -> web.Response:
        owner = next((u for u in self.users.values() if not u.get("bot")), self.bot)
        return _json(
            {
                "id": str(APP_ID),
                "name": self.bot["username"],
                "icon": None,
                "description": "",
                "summary": "",
                "type": None,
                "bot_public": True,
                "bot_require_code_grant": False,
                "verify_key": "0" * 64,
                "flags": 0,
                "owner": owner,
                "team": None,
                "bot": self.bot,
                "redirect_uris": [],
                "interactions_endpoint_url": None,
            }
        )

    async def _gateway_bot(self, request: web.Request) -> web.Response:
        return _json(
            {
                "url": self.gateway_url,
                "shards": 1,
                "session_start_limit": {
                    "total": 1000,
                    "remaining": 999,
                    "reset_after": 14_400_000,
                    "max_concurrency": 1,
                },
            }
        )

    async def _read_messages(self, request: web.Request) -> web.Response:
        channel_id = _snowflake_arg(request.match_info["channel_id"])
        if channel_id not in self.channels:
            return _error(404)
        limit = int(request.query.get("limit", "50"))
        if not 1 <= limit <= 100:
            return _error(400, "Invalid Form Body")
        messages = self.history[channel_id]
        if "after" in request.query:
            after = int(request.query["after"])
            page = [m for m in messages if int(m["id"]) > after][:limit]
        elif "before" in request.query:
            before = int(request.query["before"])
            page = [m for m in messages if int(m["id"]) < before][-limit:]
        else:
            page = messages[-limit:]
        return _json([self._as_seen(m) for m in reversed(page)])

    async def _create_message(self, request: web.Request) -> web.Response:
        channel_id = _snowflake_arg(request.match_info["channel_id"])
        payload, files = await _message_body(request)
        content = str(payload.get("content") or "")
        reference = payload.get("message_reference") or None
        attempt: dict[str, Any] = {
            "channel_id": channel_id,
            "content": content,
            "reference": reference,
            "allowed_mentions": payload.get("allowed_mentions"),
            "files": {name: data for name, data, _ in files},
            "error": None,
            "id": None,
        }
        self.sent.append(attempt)
        refusal = self._refusal(channel_id, content, files, reference)
        if refusal is not None:
            attempt["error"] = refusal.status
            return refusal
        reply_to = int(reference["message_id"]) if reference else None
        if reply_to is not None and self._find(channel_id, reply_to) is None:
            reply_to = None  # fail_if_not_exists is false: sent without the reference
        message = await self._post(channel_id, self.bot, content, files, reply_to)
        attempt["id"] = int(message["id"])
        return _json(message)

    def _refusal(
        self,
        channel_id: int,
        content: str,
        files: list[tuple[str, bytes, str]],
        reference: dict[str, Any] | None,
    ) -> web.Response | None:
        channel = self.channels.get(channel_id)
        if channel is None:
            return _error(404)
        if len(content) > 2000:
            return _error(
                400,
                errors={
                    "content": {
                        "_errors": [
                            {
                                "code": "BASE_TYPE_MAX_LENGTH",
                                "message": "Must be 2000 or fewer in length.",
                            }
                        ]
                    }
                },
            )
        if not content.strip() and not files:
            return _error(400, "Cannot send an empty message", 50006)
        recipients = [int(r["id"]) for r in channel.get("recipients", [])]
        if any(r in self._refusing for r in recipients):
            return _error(403, "Cannot send messages to this user", 50007)
        if (
            reference
            and reference.get("fail_if_not_exists", True)
            and self._find(channel_id, int(reference["message_id"])) is None
        ):
            return _error(400, "Unknown message", 10008)
        return None

    async def _typing(self, request: web.Request) -> web.Response:
        channel_id = _snowflake_arg(request.match_info["channel_id"])
        if channel_id not in self.channels:
            return _error(404)
        self.typing.append(channel_id)
        return web.Response(status=204)

    async def _create_dm(self, request: web.Request) -> web.Response:
        body = await request.json()
        recipient = _snowflake_arg(str(body.get("recipient_id", "")))
        if recipient not in self.users or recipient == BOT_ID:
            return _error(400, "Invalid Recipient(s)", 50033)
        return _json(self.channels[self._open_dm(recipient)])

    async def _file(self, request: web.Request) -> web.Response:
        key = (
            _snowflake_arg(request.match_info["channel_id"]),
            _snowflake_arg(request.match_info["attachment_id"]),
            request.match_info["filename"],
        )
        found = self._files.get(key)
        if found is None:
            return web.Response(status=404, text="This content is no longer available.")
        data, content_type = found
        return web.Response(body=data, content_type=content_type)

    # -- the Gateway -----------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        query = dict(request.query)
        self.connections.append(query)
        if query.get("encoding", "json") != "json" or query.get("compress") not in COMPRESSIONS:
            await ws.close(code=4002, message=b"Error while decoding payload.")
            return ws
        socket = _Socket(request, ws, compression=query.get("compress"))
        self._sockets.add(socket)
        session: _Session | None = None
        try:
            await socket.send(
                {"op": 10, "d": {"heartbeat_interval": self.heartbeat_ms}, "s": None, "t": None}
            )
            async for frame in ws:
                if frame.type is not WSMsgType.TEXT:
                    continue
                payload = json.loads(frame.data)
                session = await self._gateway_op(socket, session, payload)
        finally:
            self._sockets.discard(socket)
            if session is not None and session.socket is socket:
                session.socket = None
                if ws.close_code in (1000, 1001) and not socket.dropped:
                    self._sessions.pop(session.id, None)  # a normal close ends the session
        return ws

    async def _gateway_op(
        self, socket: _Socket, session: _Session | None, payload: dict[str, Any]
    ) -> _Session | None:
        op = payload.get("op")
        data: dict[str, Any] = payload.get("d") or {}
        if op == 1:  # HEARTBEAT
            await socket.send({"op": 11, "d": None, "s": None, "t": None})
        elif op == 2:  # IDENTIFY
            if data.get("token") != self.token:
                await socket.close(4004, b"Authentication failed.")
                return session
            if session is not None:
                await socket.close(4005, b"Already authenticated.")
                return session
            if int(data.get("intents", 0)) & INTENT_MESSAGE_CONTENT and not self.message_content:
                await socket.close(4014, b"Disallowed intent(s).")
                return session
            self.identifies.append({k: v for k, v in data.items() if k != "token"})
            session = _Session(uuid.uuid4().hex, int(data.get("intents", 0)))
            self._sessions[session.id] = session
            await self._ready(session, socket, shard=data.get("shard"))
        elif op == 6:  # RESUME
            if data.get("token") != self.token:
                await socket.close(4004, b"Authentication failed.")
                return session
            found = self._sessions.get(str(data.get("session_id")))
            if found is None or found.socket is not None:
                await socket.send({"op": 9, "d": False, "s": None, "t": None})
                return session
            self.resumes.append({k: v for k, v in data.items() if k != "token"})
            missed = int(data.get("seq") or 0)
            index = 0
            while index < len(found.sent):  # events dispatched meanwhile are replayed too
                event = found.sent[index]
                if event["s"] > missed:
                    await socket.send(event)
                index += 1
            found.socket = socket
            await self._dispatch_to(found, "RESUMED", {"_trace": ["fake-discord"]})
            session = found
        return session

    async def _ready(self, session: _Session, socket: _Socket, shard: Any) -> None:
        ready: dict[str, Any] = {
            "v": 10,
            "user": {**self.bot, "verified": True, "mfa_enabled": False, "flags": 0},
            "guilds": [{"id": str(g), "unavailable": True} for g in self.guilds],
            "session_id": session.id,
            "session_type": "normal",
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(APP_ID), "flags": 0},
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
            "user_settings": {},
            "_trace": ["fake-discord"],
        }
        if shard is not None:
            ready["shard"] = shard
        session.socket = socket
        await self._dispatch_to(session, "READY", ready)
        if session.intents & INTENT_GUILDS:
            for guild_id in self.guilds:
                await self._dispatch_to(session, "GUILD_CREATE", self._guild(guild_id))

    async def _dispatch_to(self, session: _Session, event: str, data: dict[str, Any]) -> None:
        session.sequence += 1
        payload = {"op": 0, "t": event, "s": session.sequence, "d": data}
        session.sent.append(payload)
        if session.socket is not None:
            try:
                await session.socket.send(payload)
            except ConnectionError:
                session.socket = None  # it is replayed on RESUME

    async def _dispatch_message(self, message: dict[str, Any]) -> None:
        guild = "guild_id" in message
        needed = INTENT_GUILD_MESSAGES if guild else INTENT_DIRECT_MESSAGES
        for session in list(self._sessions.values()):
            if not session.intents & needed:
                continue
            await self._dispatch_to(session, "MESSAGE_CREATE", self._as_seen(message, session))

    # -- the data ----------------------------------------------------------------------------

    def _snowflake(self) -> int:
        now = int(time.time() * 1000) - DISCORD_EPOCH
        self._last_id = max(now << 22, self._last_id + 1)
        return self._last_id

    def _open_dm(self, user_id: int) -> int:
        if user_id not in self._dms:
            channel_id = self._snowflake()
            self._dms[user_id] = channel_id
            self.channels[channel_id] = {
                "id": str(channel_id),
                "type": 1,
                "last_message_id": None,
                "flags": 0,
                "recipients": [self.users[user_id]],
            }
        return self._dms[user_id]

    def _find(self, channel_id: int, message_id: int) -> dict[str, Any] | None:
        return next((m for m in self.history[channel_id] if int(m["id"]) == message_id), None)

    async def _post(
        self,
        channel_id: int,
        author: dict[str, Any],
        content: str,
        files: Iterable[tuple[str, bytes, str]],
        reply_to: int | None,
        *,
        voice: bool = False,
        forwarded: str | None = None,
    ) -> dict[str, Any]:
        """Store a message in its channel's history and dispatch MESSAGE_CREATE."""
        channel = self.channels[channel_id]
        message_id = self._snowflake()
        attachments = []
        for name, data, content_type in files:
            attachment_id = next(self._ids)
            self._files[(channel_id, attachment_id, name)] = (data, content_type)
            url = f"{self.address}/attachments/{channel_id}/{attachment_id}/{name}"
            signed = f"{url}?ex={int(time.time()) + 86_400:x}&is={int(time.time()):x}&hm=fake"
            attachments.append(
                {
                    "id": str(attachment_id),
                    "filename": name,
                    "size": len(data),
                    "url": signed,
                    "proxy_url": signed,
                    "content_type": content_type,
                }
            )
        mentioned = [
            self.users[int(part)] for part in _mentioned_ids(content) if int(part) in self.users
        ]
        message: dict[str, Any] = {
            "id": str(message_id),
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": _timestamp(message_id),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": mentioned,
            "mention_roles": [],
            "attachments": attachments,
            "embeds": [],
            "components": [],
            "pinned": False,
            "type": 0,
            "flags": (1 << 13) if voice else 0,
            "nonce": None,
        }
        if "guild_id" in channel:
            message["guild_id"] = channel["guild_id"]
            message["member"] = _member()
            message["mentions"] = [{**user, "member": _member()} for user in mentioned]
        if reply_to is not None:
            referenced = self._find(channel_id, reply_to)
            message["type"] = 19
            message["message_reference"] = {
                "type": 0,
                "message_id": str(reply_to),
                "channel_id": str(channel_id),
                **({"guild_id": channel["guild_id"]} if "guild_id" in channel else {}),
            }
            message["referenced_message"] = referenced
        if forwarded is not None:
            origin = self._snowflake()
            message["message_reference"] = {
                "type": 1,
                "message_id": str(origin),
                "channel_id": str(origin - 1),
            }
            snapshot = {
                "type": 0,
                "content": forwarded,
                "embeds": [],
                "attachments": [],
                "timestamp": _timestamp(origin),
                "edited_timestamp": None,
                "flags": 0,
                "mentions": [],
                "mention_roles": [],
            }
            message["message_snapshots"] = [{"message": snapshot}]
        self.history[channel_id].append(message)
        channel["last_message_id"] = str(message_id)
        await self._dispatch_message(message)
        return message

    def _as_seen(self, message: dict[str, Any], session: _Session | None = None) -> dict[str, Any]:
        """``message`` as a bot sees it: without MESSAGE_CONTENT, a guild message that does
        not mention it (nor is its own) has no content, attachments or embeds."""
        if session is None or session.intents & INTENT_MESSAGE_CONTENT:
            return message
        if "guild_id" not in message or message["author"]["id"] == str(BOT_ID):
            return message
        if any(user["id"] == str(BOT_ID) for user in message["mentions"]):
            return message
        return {**message, "content": "", "attachments": [], "embeds": []}

    def _guild(self, guild_id: int) -> dict[str, Any]:
        channels = [
            {k: v for k, v in self.channels[c].items() if k != "guild_id"}
            for c in self.guilds[guild_id]
        ]
        return {
            "id": str(guild_id),
            "name": f"Guild {guild_id}",
            "icon": None,
            "owner_id": str(next(iter(self.users))),
            "unavailable": False,
            "large": False,
            "member_count": len(self.users),
            "joined_at": _timestamp(self._snowflake()),
            "features": [],
            "emojis": [],
            "stickers": [],
            "roles": [
                {
                    "id": str(guild_id),
                    "name": "@everyone",
                    "permissions": "1071698660929",
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "channels": channels,
            "threads": [],
            "members": [{**_member(), "user": self.bot}],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "system_channel_id": None,
            "nsfw_level": 0,
            "mfa_level": 0,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
        }


def _user(user_id: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    user: dict[str, Any] = {
        "id": str(user_id),
        "username": name,
        "discriminator": "0",
        "global_name": None if bot else name.title(),
        "avatar": None,
        "public_flags": 0,
    }
    if bot:
        user["bot"] = True
    return user


def _member() -> dict[str, Any]:
    return {
        "roles": [],
        "joined_at": "2025-01-01T00:00:00.000000+00:00",
        "deaf": False,
        "mute": False,
        "flags": 0,
        "nick": None,
        "avatar": None,
    }


def _text_channel(channel_id: int, guild_id: int, position: int) -> dict[str, Any]:
    return {
        "id": str(channel_id),
        "type": 0,
        "guild_id": str(guild_id),
        "name": f"channel-{channel_id}",
        "position": position,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "flags": 0,
    }


def _timestamp(snowflake: int) -> str:
    moment = datetime.fromtimestamp(((snowflake >> 22) + DISCORD_EPOCH) / 1000, UTC)
    return moment.isoformat()


def _mentioned_ids(content: str) -> list[str]:
    found = []
    for part in content.split("<@")[1:]:
        digits = part.removeprefix("!").split(">", 1)[0]
        if digits.isdigit():
            found.append(digits)
    return found


def _snowflake_arg(text: str) -> int:
    return int(text) if text.isdigit() else -1


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer as Discord sends it: ``Content-Type: application/json`` exactly
    (discord.py reads any other type as text)."""
    return web.Response(
        body=json.dumps(body).encode(),
        status=status,
        headers={**(headers or {}), "Content-Type": "application/json"},
    )


def _error(
    status: int, message: str | None = None, code: int | None = None, **extra: Any
) -> web.Response:
    default_message, default_code = _ERRORS.get(status, (f"{status}: Error", 0))
    body = {
        "message": message or default_message,
        "code": default_code if code is None else code,
        **extra,
    }
    return _json(body, status=status, headers={"Via": "1.1 google"})


def _failure(failure: _Failure) -> web.Response:
    if failure.status != 429:
        return _error(failure.status, failure.message, failure.code)
    seconds = failure.retry_after or 1.0
    headers = {
        "Retry-After": str(math.ceil(seconds)),
        "X-RateLimit-Scope": "shared" if not failure.is_global else "global",
        "Via": "1.1 google",
    }
    if failure.is_global:
        headers["X-RateLimit-Global"] = "true"
    body = {"message": failure.message, "retry_after": seconds, "global": failure.is_global}
    return _json(body, status=429, headers=headers)


async def _message_body(
    request: web.Request,
) -> tuple[dict[str, Any], list[tuple[str, bytes, str]]]:
    """A create-message body: JSON, or multipart with ``payload_json`` and ``files[n]``."""
    if request.content_type != "multipart/form-data":
        return await request.json(), []
    form = await request.post()
    payload = json.loads(str(form.get("payload_json") or "{}"))
    files = []
    for name, value in form.items():
        if name.startswith("files[") and isinstance(value, web.FileField):
            content_type = value.content_type or "application/octet-stream"
            files.append((value.filename, value.file.read(), content_type))
    return payload, files
