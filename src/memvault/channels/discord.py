"""Discord through a bot account (discord.py): DMs, and mentions in allowed guilds.

Messages arrive over the Gateway (a WebSocket): a DM to the bot, or a message
that mentions it in a channel of ``settings.guilds`` / ``settings.channels``.
Each goes to the hub's handler in order, one at a time, and only then does
the channel's cursor, the last handled message id kept in
:class:`~memvault.channels.base.AdapterState`, move past it.

Discord does not replay what was sent while a bot was offline, so on every
fresh Gateway session (READY) the adapter asks REST for the messages after
each cursor (``GET /channels/{id}/messages?after=``, bounded) and handles
them before anything newer. A message seen twice, once by that catch-up and
once live, is dropped by its id (snowflakes grow within a channel), and the
hub drops a redelivered id too: a restart neither replays nor drops.

Replies go out as Discord's own Markdown, to the channel (``chat_id`` is a
channel id) with a message reference; a ``chat_id`` that is a user id (the
owner, an approved sender) is reached through the DM channel Discord opens
for it. Errors are mapped once, in :meth:`DiscordAdapter._classify`.

discord.py aims every request at a class attribute (``Route.BASE``) and at a
fixed gateway host; to honour ``settings.api_base`` without touching either
for the whole process, each adapter's client gets an HTTP client of its own
(:class:`_RebasedHTTP`) that moves its own requests to ``api_base`` and its
own Gateway connections to the URL ``GET /gateway/bot`` names there.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import HTTPClient, Route

from memvault.channels.base import (
    Adapter,
    AdapterState,
    Attachment,
    ChannelError,
    ChannelFatalError,
    Inbound,
    InboundHandler,
    MessageRejectedError,
    Outbound,
    RateLimitedError,
    Sent,
    file_unreadable,
    media_kind,
    token_refused,
    without_cause,
)
from memvault.config import DiscordSettings

log = logging.getLogger(__name__)

# Discord's JSON error code for a channel id that names no channel (a user id, say).
UNKNOWN_CHANNEL = 10003
# discord.py waits out shorter rate limits itself; a longer one is the outbox's to wait.
RATE_LIMIT_WAIT = 30.0
# Channels whose cursors are kept (the most recently active), and what one catch-up reads.
TRACKED_CHANNELS = 50
CATCH_UP_MESSAGES = 500  # discord.py reads them 100 a request
FILES_PER_MESSAGE = 10
CURSORS = "last_message_ids"
INTENTS_REFUSED = (
    "Discord refused the Message Content intent; enable it for the bot in the Developer "
    "Portal (Bot, Privileged Gateway Intents)."
)
_READABLE = (discord.MessageType.default, discord.MessageType.reply)
# The gateway's close codes that no reconnect can mend.
_FATAL_CLOSES = {
    4010: "an invalid shard",
    4011: "a bot that needs sharding",
    4012: "an invalid API version",
    4013: "invalid intents",
}
_NO_PINGS = discord.AllowedMentions(everyone=False, users=False, roles=False, replied_user=True)


@dataclass(frozen=True)
class _Cursor:
    """Where a channel was read to: the last message handled, and its guild (None: a DM)."""

    after: int
    guild: int | None


class _RebasedHTTP(HTTPClient):
    """discord.py's HTTP client, sending this client's requests to ``api_base`` and its
    Gateway connections to the URL ``GET /gateway/bot`` names there."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, api_base: str) -> None:
        super().__init__(loop, max_ratelimit_timeout=RATE_LIMIT_WAIT)
        self.api_base = api_base.rstrip("/")
        self.gateway: yarl.URL | None = None

    async def request(self, route: Route, **kwargs: Any) -> Any:
        """The request, at ``api_base`` (the route's rate-limit bucket is unchanged)."""
        if self.api_base != Route.BASE and route.url.startswith(Route.BASE):
            route.url = self.api_base + route.url[len(Route.BASE) :]
        return await super().request(route, **kwargs)

    async def ws_connect(self, url: str, *, compress: int = 0) -> aiohttp.ClientWebSocketResponse:
        """A Gateway connection; discord.py's default host becomes the one asked of REST."""
        target = yarl.URL(url)
        default = DiscordWebSocket.DEFAULT_GATEWAY
        if self.gateway is not None and (target.scheme, target.host) == (
            default.scheme,
            default.host,
        ):
            target = self.gateway.with_query(target.query)
        return await super().ws_connect(str(target), compress=compress)

    async def find_gateway(self) -> None:
        """Ask ``GET /gateway/bot`` where the Gateway is."""
        _, url, _ = await self.get_bot_gateway()
        self.gateway = yarl.URL(url)


class _Bot(discord.Client):
    """A discord.py client that passes each (re)connect and each message to ``listener``."""

    def __init__(self, api_base: str) -> None:
        # memvault never joins voice: discord.py's warnings about its voice libraries are noise.
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        intents = discord.Intents.none()
        intents.guilds = True  # the channels of the guilds, to tell where a message is
        intents.dm_messages = True
        intents.guild_messages = True
        intents.message_content = True
        super().__init__(
            intents=intents,
            max_messages=None,
            chunk_guilds_at_startup=False,
            member_cache_flags=discord.MemberCacheFlags.none(),
            allowed_mentions=_NO_PINGS,
            max_ratelimit_timeout=RATE_LIMIT_WAIT,
        )
        self.rest = _RebasedHTTP(self.loop, api_base=api_base)
        self.http = self.rest
        self._connection.http = self.rest
        # None announces a fresh session (READY): what was missed is to be fetched.
        self.listener: Callable[[discord.Message | None], None] | None = None

    async def on_connect(self) -> None:
        """A new Gateway session began (not a resumed one)."""
        if self.listener is not None:
            self.listener(None)

    async def on_message(self, message: discord.Message) -> None:
        """Every message the bot can see, its own included."""
        if self.listener is not None:
            self.listener(message)


class DiscordAdapter(Adapter):
    """One Discord bot: DMs and mentions in, replies out."""

    name = "discord"
    settings: DiscordSettings

    def __init__(self, settings: DiscordSettings, token: str, *, state: AdapterState) -> None:
        super().__init__(settings)
        self._token = token
        self._state = state
        self._cursors = _load_cursors(state.get(CURSORS))
        self._users: set[str] = {*settings.owner, *settings.allow}  # ids that are people
        self._client: _Bot | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._login: asyncio.Task[None] | None = None

    async def identify(self) -> str | None:
        """``@name`` of the bot, asked of Discord (which checks the token)."""
        client = await self._open()
        return f"@{client.user.name}" if client.user is not None else None

    async def start(self, handler: InboundHandler) -> None:
        """Receive until cancelled; a channel's cursor moves only after ``handler`` returned."""
        client = await self._open()
        events: asyncio.Queue[discord.Message | None] = asyncio.Queue()
        client.listener = events.put_nowait
        try:
            with self.errors("the Gateway's address"):
                await client.rest.find_gateway()
            # discord.py resumes a dropped session itself; anything else ends the run, and
            # the hub's restart (a fresh session, with its catch-up) takes over.
            gateway = asyncio.ensure_future(client.connect(reconnect=False))
            try:
                while True:
                    event = await self._next(events, gateway)
                    if event is None:
                        await self._catch_up(client, handler)
                    else:
                        await self._take(client, event, handler)
            finally:
                gateway.cancel()
                await asyncio.wait([gateway], timeout=5)
        finally:
            client.listener = None
            await self._discard(client)

    async def send(self, message: Outbound) -> Sent:
        """Send the text (Discord renders its Markdown) with the media files attached."""
        if not message.text.strip() and not message.media:
            return Sent()
        client = await self._open()
        with self.errors(f"the message to {message.chat_id}"):
            target = await self._target(client, message.chat_id)
            try:
                return await self._deliver(target, message)
            except discord.NotFound as exc:
                if exc.code != UNKNOWN_CHANNEL or message.chat_id in self._users:
                    raise
            # Not a channel: an id of a person (an approved sender), reached in their DM.
            target = await client.create_dm(discord.Object(int(message.chat_id)))
            self._users.add(message.chat_id)
            return await self._deliver(target, message)

    async def typing(self, chat_id: str) -> None:
        """Show "typing…" for ten seconds; a failure is logged, never raised."""
        with self.quietly("discord typing failed", chat_id=chat_id):
            client = await self._open()
            with self.errors(f"typing in {chat_id}"):
                await (await self._target(client, chat_id)).typing()

    async def download(self, attachment: Attachment) -> bytes:
        """The bytes of a received file, from its attachment URL."""
        url = attachment.file_id
        if not url.startswith(("https://", "http://")):
            raise MessageRejectedError(f"{url!r} is not the URL of a Discord attachment.")
        client = await self._open()
        with self.errors(f"the file {attachment.name or url}"):
            return await client.rest.get_from_cdn(url)

    async def close(self) -> None:
        """Close the Gateway and HTTP connections; calling it again does nothing."""
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            with suppress(Exception):
                await client.close()

    # -- the client --------------------------------------------------------------------

    async def _open(self) -> _Bot:
        """The logged-in client of this event loop (one login shared by every caller)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.is_closed() or self._loop is not loop:
            self._client, self._loop = _Bot(self.settings.api_base), loop
            self._login = loop.create_task(self._log_in(self._client))
        client, login = self._client, self._login
        assert login is not None
        await asyncio.shield(login)
        return client

    async def _log_in(self, client: _Bot) -> None:
        try:
            with self.errors("the bot's identity"):
                await client.login(self._token)
        except BaseException:
            await self._discard(client)
            raise

    async def _discard(self, client: _Bot) -> None:
        """Close ``client``; the next call opens a new one."""
        if self._client is client:
            self._client = None
        with suppress(Exception):
            await client.close()

    # -- receiving ---------------------------------------------------------------------

    async def _next(
        self, events: asyncio.Queue[discord.Message | None], gateway: asyncio.Future[None]
    ) -> discord.Message | None:
        """The next event; what arrived is handled before the end of the connection."""
        if events.empty():
            getter = asyncio.ensure_future(events.get())
            either: list[asyncio.Future[Any]] = [getter, gateway]
            try:
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                arrived = getter.done()
                if not arrived:
                    getter.cancel()
            if arrived:
                return getter.result()
            with self.errors("the Gateway connection"):
                gateway.result()
            raise ChannelError("Discord closed the Gateway connection.")
        return events.get_nowait()

    async def _catch_up(self, client: _Bot, handler: InboundHandler) -> None:
        """Handle what each known channel received after its cursor while nobody listened."""
        for channel_id, cursor in sorted(self._cursors.items(), key=lambda item: item[1].after):
            kind = discord.ChannelType.private if cursor.guild is None else None
            channel = client.get_partial_messageable(channel_id, guild_id=cursor.guild, type=kind)
            try:
                with self.errors(f"the messages missed in channel {channel_id}"):
                    missed = [
                        message
                        async for message in channel.history(
                            limit=CATCH_UP_MESSAGES,
                            after=discord.Object(cursor.after),
                            oldest_first=True,
                        )
                    ]
            except MessageRejectedError as exc:  # the bot left the guild, the DM is gone
                log.warning(
                    "discord channel no longer readable",
                    extra={"channel_id": channel_id, "error": exc.message},
                )
                self._forget(channel_id)
                continue
            if len(missed) == CATCH_UP_MESSAGES:
                log.warning(
                    "discord catch-up stopped at its limit",
                    extra={"channel_id": channel_id, "limit": CATCH_UP_MESSAGES},
                )
            for message in missed:
                await self._take(client, message, handler)

    async def _take(self, client: _Bot, message: discord.Message, handler: InboundHandler) -> None:
        """Hand ``message`` to the handler if it is for memvault; then move its cursor."""
        cursor = self._cursors.get(message.channel.id)
        if cursor is not None and message.id <= cursor.after:
            return  # handled already (a catch-up and the live event both brought it)
        guild = _guild_id(message)
        watched = guild is None or self._allowed(message, guild)
        inbound = self._inbound(client, message, guild) if watched else None
        if inbound is not None:
            self._users.add(inbound.sender_id)
            await handler(inbound)
        if watched:
            self._advance(message.channel.id, _Cursor(message.id, guild))

    def _allowed(self, message: discord.Message, guild: int) -> bool:
        """Whether a guild message is in a channel (or a thread of one) memvault watches."""
        if self.settings.channels:
            parent = getattr(message.channel, "parent_id", None)
            places = {str(message.channel.id), str(parent)}
            return bool(places & set(self.settings.channels))
        return str(guild) in self.settings.guilds

    def _inbound(self, client: _Bot, message: discord.Message, guild: int | None) -> Inbound | None:
        """The message as an :class:`Inbound`, or None when it is not for memvault."""
        me = client.user
        author = message.author
        if me is None or author.bot or author.id == me.id or message.webhook_id is not None:
            return None
        if message.type not in _READABLE:
            return None
        if guild is not None and not any(user.id == me.id for user in message.mentions):
            return None
        reference = message.reference
        forwarded = reference is not None and reference.type is discord.MessageReferenceType.forward
        content = message.content
        attachments = list(message.attachments)
        if forwarded and message.message_snapshots:
            content = message.message_snapshots[0].content
            attachments += message.message_snapshots[0].attachments
        text = re.sub(rf"<@!?{me.id}>", "", content).strip()
        if not text and message.stickers:
            text = "[sticker]"
        files = tuple(_attachment(a, voice=message.flags.voice) for a in attachments)
        if not text and not files:
            return None
        return Inbound(
            channel=self.name,
            message_id=str(message.id),
            chat_id=str(message.channel.id),
            sender_id=str(author.id),
            sender_name=author.display_name,
            username=author.name,
            chat_type="private" if guild is None else "group",
            text=text,
            sent_at=message.created_at,
            reply_to=(
                str(reference.message_id)
                if reference is not None and not forwarded and reference.message_id
                else None
            ),
            attachments=files,
            forwarded=forwarded,
            platform_message_id=str(message.id),
        )

    def _advance(self, channel_id: int, cursor: _Cursor) -> None:
        self._cursors[channel_id] = cursor
        if len(self._cursors) > TRACKED_CHANNELS:
            oldest = min(self._cursors, key=lambda key: self._cursors[key].after)
            del self._cursors[oldest]
        self._save()

    def _forget(self, channel_id: int) -> None:
        self._cursors.pop(channel_id, None)
        self._save()

    def _save(self) -> None:
        saved = {
            str(channel): {
                "after": str(cursor.after),
                "guild": None if cursor.guild is None else str(cursor.guild),
            }
            for channel, cursor in self._cursors.items()
        }
        self._state.put(CURSORS, json.dumps(saved, sort_keys=True))

    # -- sending -----------------------------------------------------------------------

    async def _target(self, client: _Bot, chat_id: str) -> discord.abc.Messageable:
        """The channel ``chat_id`` names; a person's id means their DM channel."""
        if not chat_id.isdigit():
            raise MessageRejectedError(f"{chat_id!r} is not a Discord channel or user id.")
        if chat_id in self._users:
            return await client.create_dm(discord.Object(int(chat_id)))
        return client.get_partial_messageable(int(chat_id))

    async def _deliver(self, target: discord.abc.Messageable, message: Outbound) -> Sent:
        """The text with up to ten files per message, the first one a reply."""
        reference = None
        if message.reply_to and message.reply_to.isdigit():  # anything else: no reply link
            channel = getattr(target, "id", None)
            if isinstance(channel, int):
                reference = discord.MessageReference(
                    message_id=int(message.reply_to),
                    channel_id=channel,
                    fail_if_not_exists=False,
                )
        groups = [
            message.media[start : start + FILES_PER_MESSAGE]
            for start in range(0, len(message.media), FILES_PER_MESSAGE)
        ] or [()]
        sent: list[str] = []
        for number, group in enumerate(groups):
            text = message.text if number == 0 and message.text.strip() else None
            options: dict[str, Any] = {}
            if group:
                options["files"] = [_file(path) for path in group]
            if number == 0 and reference is not None:
                options["reference"] = reference
            done = await target.send(text, **options)
            sent.append(str(done.id))
        return Sent(tuple(sent))

    # -- errors ------------------------------------------------------------------------

    def _classify(self, exc: Exception, what: str) -> ChannelError | None:
        """discord.py's exceptions as the classes the hub acts on, each one sentence;
        nothing about the token is chained (nothing may quote it)."""
        if isinstance(exc, discord.LoginFailure):
            return self._refused_token()
        if isinstance(exc, discord.PrivilegedIntentsRequired):
            return without_cause(ChannelFatalError(INTENTS_REFUSED))
        if isinstance(exc, discord.RateLimited):
            return _limited(exc.retry_after)
        if isinstance(exc, discord.ConnectionClosed):
            if exc.code == 4004:
                return self._refused_token()
            if exc.code == 4014:
                return without_cause(ChannelFatalError(INTENTS_REFUSED))
            if exc.code in _FATAL_CLOSES:
                return ChannelFatalError(
                    f"Discord closed the Gateway for {_FATAL_CLOSES[exc.code]} ({exc.code})."
                )
            reason = exc.reason or "no reason"
            return ChannelError(f"Discord closed the Gateway during {what} ({exc.code}: {reason}).")
        if isinstance(exc, discord.HTTPException):
            return self._http_error(exc, what)
        if isinstance(exc, discord.GatewayNotFound):  # the wrapper of GET /gateway/bot's error
            if isinstance(exc.__cause__, discord.HTTPException):
                return self._http_error(exc.__cause__, what)
            return ChannelError(f"Discord did not say where its Gateway is ({what}).")
        if isinstance(exc, aiohttp.ClientError | OSError | TimeoutError):
            reason = str(exc) or type(exc).__name__
            return ChannelError(f"Discord could not be reached for {what}: {reason}.")
        return None

    def _refused_token(self) -> ChannelFatalError:
        return token_refused("Discord", "bot token", "401 Unauthorized", self.settings.token_env)

    def _http_error(self, exc: discord.HTTPException, what: str) -> ChannelError:
        status = exc.status
        if status == 401:
            return self._refused_token()
        if status == 429:
            return _limited(_retry_after(exc))
        detail = exc.text or exc.response.reason or "no detail"
        sentence = f"{detail.rstrip('.')} ({status}, code {exc.code})."
        if status >= 500:
            return ChannelError(f"Discord failed on {what}: {sentence}")
        if status in (400, 403, 404, 413):
            return MessageRejectedError(f"Discord refused {what}: {sentence}")
        return ChannelError(f"Discord failed on {what}: {sentence}")


def _load_cursors(saved: str | None) -> dict[int, _Cursor]:
    """The cursors as :meth:`DiscordAdapter._save` wrote them (nothing when unreadable)."""
    try:
        data = json.loads(saved) if saved else {}
        return {
            int(channel): _Cursor(
                int(value["after"]), int(value["guild"]) if value.get("guild") else None
            )
            for channel, value in data.items()
        }
    except (ValueError, TypeError, KeyError, AttributeError):
        log.warning("discord cursors unreadable; starting without them")
        return {}


def _guild_id(message: discord.Message) -> int | None:
    """The message's guild (None in a DM), whether or not the guild is cached."""
    if message.guild is not None:
        return message.guild.id
    guild: int | None = getattr(message.channel, "guild_id", None)
    return guild


def _attachment(attachment: discord.Attachment, *, voice: bool) -> Attachment:
    mime = attachment.content_type
    kind = media_kind(mime, voice=voice)
    return Attachment(kind, attachment.url, attachment.filename, mime, attachment.size)


def _file(path: Path) -> discord.File:
    try:
        return discord.File(path, filename=path.name)
    except OSError as exc:
        raise file_unreadable(path, exc) from exc


def _retry_after(exc: discord.HTTPException) -> float:
    """How long a 429 asked to wait (``Retry-After``), when discord.py did not wait itself."""
    headers = exc.response.headers
    for name in ("Retry-After", "X-RateLimit-Reset-After"):
        with suppress(TypeError, ValueError):
            return max(float(headers.get(name, "")), 0.0)
    return 5.0


def _limited(seconds: float) -> RateLimitedError:
    return RateLimitedError(
        f"Discord asked memvault to wait {seconds:g} seconds (rate limit).", retry_after=seconds
    )
