"""Slack by Socket Mode (slack_sdk): direct messages, and mentions in channels.

Socket Mode needs no public URL. :meth:`SlackAdapter.start` asks
``apps.connections.open`` (with the app-level token) for a WebSocket URL and
hands it to slack_sdk's :class:`SocketModeClient`, which keeps the socket up
and reconnects when Slack asks it to refresh. Every envelope Slack pushes
goes to the hub's handler first and is acknowledged (by its ``envelope_id``)
only after the handler returned. Slack redelivers an envelope nobody
acknowledged (``retry_attempt`` counts up), and the hub drops the copy,
because a message's id is stable: ``<channel>:<ts>``.

What is read: direct messages (``message`` events in ``im`` conversations)
and mentions of the bot elsewhere (``app_mention``), only in
``settings.channels`` when that is set. The bot's own messages, edits, joins
and other subtypes are acknowledged and skipped. Files shared with a message
become attachments, fetched with the bot token through ``files.info`` and
``url_private``. Button presses (Block Kit ``block_actions``) arrive as
actions.

Where answers go: a message inside a thread is answered in that thread, a
mention in a channel in a new thread under it, and a direct message outside
a thread in the conversation itself. The thread's ``ts`` travels as
``Inbound.platform_message_id`` and comes back as ``Outbound.reply_to``.

Replies are Markdown rendered as Slack's mrkdwn
(:func:`~memvault.channels.slack_text.to_mrkdwn`). Slack's
errors are mapped once, in :meth:`SlackAdapter._classify`, onto the classes
the hub acts on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from memvault.channels.base import (
    Adapter,
    AdapterState,
    Attachment,
    Button,
    ChannelError,
    ChannelFatalError,
    Inbound,
    InboundHandler,
    MessageRejectedError,
    Outbound,
    RateLimitedError,
    Sent,
    media_kind,
    read_media,
    without_cause,
)
from memvault.channels.slack_text import escape, plain_text, to_mrkdwn
from memvault.config import SlackSettings

# What tests import from here; Slack's text lives in slack_text.
__all__ = ["SlackAdapter", "plain_text", "to_mrkdwn"]

log = logging.getLogger(__name__)

# Message subtypes a person's words arrive with; edits, joins, bot posts and the rest
# are acknowledged and skipped.
READ_SUBTYPES = {None, "file_share", "thread_broadcast"}
# Errors that no retry can fix: the token or the app is wrong (Slack's error codes).
FATAL_ERRORS = {
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "not_allowed_token_type",
    "no_permission",
    "org_login_required",
    "team_access_not_granted",
    "ekm_access_denied",
}
# Errors about one message or one conversation: retrying the same request cannot help.
REJECTED_ERRORS = {
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "msg_too_long",
    "no_text",
    "too_many_attachments",
    "invalid_blocks",
    "invalid_blocks_format",
    "cannot_dm_bot",
    "messages_tab_disabled",
    "user_not_found",
    "users_not_found",
    "user_not_visible",
    "restricted_action",
    "restricted_action_read_only_channel",
    "restricted_action_thread_only_channel",
    "restricted_action_non_threadable_channel",
    "file_not_found",
    "file_deleted",
    "invalid_arguments",
}
_TS = re.compile(r"\d+\.\d+")
_SECTION_LIMIT = 3000  # a section block's text (Block Kit)
_BUTTON_LABEL_LIMIT = 75
_CONNECT_TIMEOUT = 30.0
_WATCH_EVERY = 1.0  # seconds between checks of the socket while nothing arrives
_KEPT_QUESTIONS = 200
# The one request made with the app-level token: a refused token there is that one.
_SOCKET_MODE_CONNECTION = "a Socket Mode connection"


@dataclass(frozen=True)
class _Identity:
    """Who the bot is, as ``auth.test`` says."""

    user_id: str
    bot_id: str | None
    name: str
    team: str


class SlackAdapter(Adapter):
    """One Slack app: events over Socket Mode in, the Web API out."""

    name = "slack"
    settings: SlackSettings
    threaded = True  # a split reply stays in its thread
    # How long the socket may stay down while slack_sdk reconnects on its own before
    # start() gives up, so the hub restarts it and a revoked app token gets reported.
    reconnect_grace: float = 60.0

    def __init__(
        self,
        settings: SlackSettings,
        bot_token: str,
        app_token: str,
        *,
        state: AdapterState | None = None,
    ) -> None:
        del state  # no cursor to keep: Slack itself redelivers what was not acknowledged
        super().__init__(settings)
        self._app_token = app_token
        self._bot_token = bot_token
        self._web = AsyncWebClient(token=bot_token, base_url=settings.base_url, retry_handlers=[])
        self._me: _Identity | None = None
        self._people: dict[str, tuple[str, str | None]] = {}  # user id -> (name, username)
        self._dms: dict[str, str] = {}  # user id -> their direct-message channel
        self._questions: dict[str, str] = {}  # response_url -> the text its buttons ask

    async def identify(self) -> str:
        """``@name in Team``, asked of Slack with the bot token (``auth.test``)."""
        self._me = None
        me = await self._identity()
        return f"@{me.name} in {me.team}"

    async def start(self, handler: InboundHandler) -> None:
        """Receive envelopes until cancelled; each is acknowledged after ``handler`` returned."""
        me = await self._identity()
        envelopes: asyncio.Queue[SocketModeRequest] = asyncio.Queue()

        async def listen(client: AsyncBaseSocketModeClient, request: SocketModeRequest) -> None:
            envelopes.put_nowait(request)  # handled in order, one at a time, below

        client = SocketModeClient(
            self._app_token,
            logger=logging.getLogger(f"{__name__}.socket"),
            web_client=AsyncWebClient(base_url=self.settings.base_url, retry_handlers=[]),
        )
        client.socket_mode_request_listeners.append(listen)
        try:
            await self._connect(client)
            down_since: float | None = None
            while True:
                try:
                    # Not wait_for: on Python 3.11 it can swallow the hub's cancellation.
                    async with asyncio.timeout(_WATCH_EVERY):
                        request = await envelopes.get()
                except TimeoutError:
                    down_since = await self._watch(client, down_since)
                    continue
                inbound = await self._inbound(request, me)
                if inbound is not None:
                    await handler(inbound)
                await self._acknowledge(client, request)
        finally:
            with contextlib.suppress(Exception):
                await client.close()  # type: ignore[no-untyped-call]

    async def send(self, message: Outbound) -> Sent:
        """Post the text (mrkdwn, with buttons as Block Kit), then upload each file; in the
        thread ``reply_to`` names, if any."""
        thread = message.reply_to if message.reply_to and _TS.fullmatch(message.reply_to) else None
        text = to_mrkdwn(message.text) if message.text.strip() else ""
        ids: list[str] = []
        with self.errors(f"the message to {message.chat_id}"):
            for post in _posts(message.chat_id, text, thread, message.buttons):
                response = await self._web.chat_postMessage(**post)
                ids.append(str(response.get("ts", "")))
            if message.media:
                channel = await self._conversation(message.chat_id)
                for path in message.media:
                    ids.append(await self._upload(channel, path, thread))
        return Sent(tuple(ids))

    async def answer_action(self, action_id: str, text: str | None = None) -> None:
        """Replace the pressed message's buttons with ``text`` (through its response_url);
        a failure is logged, never raised."""
        if not text or not self._trusted(action_id):
            return
        question = self._questions.pop(action_id, "")
        body = {"replace_original": True, "text": f"{question}\n\n{escape(text)}".strip()}
        with self.quietly("slack action answer failed", aiohttp.ClientError, TimeoutError):
            timeout = aiohttp.ClientTimeout(total=30)
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(action_id, json=body) as response,
            ):
                if response.status >= 400:
                    raise ChannelError(f"Slack answered HTTP {response.status}.")

    async def retire_buttons(
        self, chat_id: str, message_ids: tuple[str, ...], text: str, outcome: str
    ) -> None:
        """Replace the post that held the buttons (the last one sent) with its text and
        the outcome, as a press answers through its response_url (``chat.update``; an
        empty ``blocks`` takes the buttons away)."""
        if not message_ids:
            return
        said = to_mrkdwn(text) if len(message_ids) == 1 and text.strip() else ""
        shown = f"{said}\n\n{escape(outcome)}".strip()
        with (
            self.quietly("slack buttons not taken back", SlackClientError, chat_id=chat_id),
            self.errors("the answered question"),
        ):
            channel = await self._conversation(chat_id)
            await self._web.chat_update(channel=channel, ts=message_ids[-1], text=shown, blocks=[])

    async def download(self, attachment: Attachment) -> bytes:
        """The bytes of a shared file: ``files.info`` names its ``url_private``, fetched
        with the bot token."""
        what = f"the file {attachment.name or attachment.file_id}"
        with self.errors(what):
            info = await self._web.files_info(file=attachment.file_id)
        file: dict[str, Any] = info.get("file") or {}
        url = str(file.get("url_private_download") or file.get("url_private") or "")
        if not url:
            raise MessageRejectedError(f"Slack keeps no copy of {what} (an external file?).")
        if not self._trusted(url):
            raise MessageRejectedError(f"Slack names {what} at {url}, outside Slack.")
        return await self._fetch(url, what, html=str(file.get("mimetype")) == "text/html")

    # -- receiving -----------------------------------------------------------------------

    async def _identity(self) -> _Identity:
        if self._me is None:
            with self.errors("the bot's identity"):
                answer = await self._web.auth_test()
            self._me = _Identity(
                user_id=str(answer.get("user_id", "")),
                bot_id=answer.get("bot_id"),
                name=str(answer.get("user", "")),
                team=str(answer.get("team", "")),
            )
        return self._me

    async def _connect(self, client: SocketModeClient) -> None:
        """Open the socket; the first URL is asked for here so a refused app token is
        fatal at once (slack_sdk alone would retry it forever)."""
        while True:
            try:
                with self.errors(_SOCKET_MODE_CONNECTION):
                    opened = await client.web_client.apps_connections_open(
                        app_token=self._app_token
                    )
                break
            except RateLimitedError as exc:
                await asyncio.sleep(exc.retry_after)
        client.wss_uri = str(opened.get("url", ""))
        try:
            await asyncio.wait_for(client.connect(), _CONNECT_TIMEOUT)  # type: ignore[no-untyped-call]
        except TimeoutError as exc:
            raise ChannelError(
                f"Slack's Socket Mode endpoint did not answer within {_CONNECT_TIMEOUT:g} s."
            ) from exc

    async def _watch(self, client: SocketModeClient, down_since: float | None) -> float | None:
        """When the socket went down (None: it is up); ChannelError once it stayed down
        longer than :attr:`reconnect_grace`."""
        if await client.is_connected():
            return None
        now = asyncio.get_running_loop().time()
        if down_since is None:
            return now
        if now - down_since > self.reconnect_grace:
            raise ChannelError(
                f"Slack's Socket Mode connection stayed down for {self.reconnect_grace:g} s."
            )
        return down_since

    async def _acknowledge(self, client: SocketModeClient, request: SocketModeRequest) -> None:
        """Tell Slack the envelope arrived; if the socket is gone, Slack redelivers it and
        the hub drops the copy."""
        try:
            await client.send_socket_mode_response(SocketModeResponse(request.envelope_id))
        except Exception as exc:
            log.warning(
                "slack acknowledgement failed",
                extra={"envelope_id": request.envelope_id, "error": repr(exc)},
            )

    async def _inbound(self, request: SocketModeRequest, me: _Identity) -> Inbound | None:
        """The envelope as an :class:`Inbound`, or None when it carries nothing to read."""
        payload = request.payload
        if request.type == "events_api" and isinstance(payload.get("event"), dict):
            return await self._message(payload["event"], me)
        if request.type == "interactive" and payload.get("type") == "block_actions":
            return await self._action(payload)
        return None

    async def _message(self, event: dict[str, Any], me: _Identity) -> Inbound | None:
        if event.get("type") not in ("message", "app_mention"):
            return None
        if event.get("subtype") not in READ_SUBTYPES:
            return None
        user = str(event.get("user") or "")
        if not user or user == me.user_id or (me.bot_id and event.get("bot_id") == me.bot_id):
            return None
        channel, ts = str(event.get("channel", "")), str(event.get("ts", ""))
        if not channel or not ts:
            return None
        raw = str(event.get("text") or "")
        chat_type = _chat_type(channel, event.get("channel_type"))
        direct = chat_type == "private"
        if not direct:
            mentioned = event.get("type") == "app_mention" or f"<@{me.user_id}>" in raw
            if not mentioned or (self.settings.channels and channel not in self.settings.channels):
                return None
        files = tuple(filter(None, map(_attachment, event.get("files") or [])))
        text = plain_text(raw, me.user_id)
        if not text and not files:
            return None
        thread = event.get("thread_ts")
        name, username = await self._person(user)
        return Inbound(
            channel=self.name,
            message_id=f"{channel}:{ts}",
            chat_id=channel,
            sender_id=user,
            sender_name=name,
            username=username,
            chat_type=chat_type,
            text=text,
            sent_at=_when(ts),
            reply_to=str(thread) if thread and thread != ts else None,
            attachments=files,
            # The thread to answer in: the message's own, else a new one under a mention.
            platform_message_id=str(thread) if thread else (None if direct else ts),
        )

    async def _action(self, payload: dict[str, Any]) -> Inbound | None:
        actions = payload.get("actions") or []
        user = payload.get("user") or {}
        container = payload.get("container") or {}
        channel = str((payload.get("channel") or {}).get("id") or container.get("channel_id") or "")
        if not actions or not user.get("id") or not channel:
            return None
        action = actions[0]
        value, stamp = action.get("value"), str(action.get("action_ts") or "")
        if value is None or not stamp:
            return None
        message = payload.get("message") or {}
        response_url = str(payload.get("response_url") or "")
        if response_url:
            self._questions[response_url] = str(message.get("text") or "")
            while len(self._questions) > _KEPT_QUESTIONS:
                self._questions.pop(next(iter(self._questions)))
        name, username = await self._person(str(user["id"]))
        thread = message.get("thread_ts")
        return Inbound(
            channel=self.name,
            message_id=f"{channel}:{stamp}",
            chat_id=channel,
            sender_id=str(user["id"]),
            sender_name=name,
            username=username or user.get("username"),
            chat_type=_chat_type(channel, None),
            text=str(value),
            sent_at=_when(stamp),
            action=str(value),
            action_id=response_url or stamp,
            platform_message_id=str(thread) if thread else None,
        )

    async def _person(self, user_id: str) -> tuple[str, str | None]:
        """``(display name, username)`` of a user (``users.info``, remembered); the id
        itself when Slack cannot say (the ``users:read`` scope is missing)."""
        known = self._people.get(user_id)
        if known is not None:
            return known
        try:
            with self.errors(f"the user {user_id}"):
                answer = await self._web.users_info(user=user_id)
        except ChannelError as exc:
            log.warning("slack user lookup failed", extra={"user": user_id, "error": exc.message})
            return user_id, None
        user: dict[str, Any] = answer.get("user") or {}
        profile = user.get("profile") or {}
        name = str(
            profile.get("display_name") or profile.get("real_name") or user.get("real_name") or ""
        )
        username = str(user.get("name")) if user.get("name") else None
        self._people[user_id] = (name or username or user_id, username)
        return self._people[user_id]

    # -- sending -------------------------------------------------------------------------

    async def _conversation(self, chat_id: str) -> str:
        """The channel a chat id names: a user id (U..., W...) opens their direct messages."""
        if not chat_id.startswith(("U", "W")):
            return chat_id
        if chat_id not in self._dms:
            opened = await self._web.conversations_open(users=chat_id)
            self._dms[chat_id] = str((opened.get("channel") or {}).get("id", ""))
        return self._dms[chat_id]

    async def _upload(self, channel: str, path: Path, thread: str | None) -> str:
        data = read_media(path)
        uploaded = await self._web.files_upload_v2(
            channel=channel, file=data, filename=path.name, title=path.name, thread_ts=thread
        )
        return str((uploaded.get("file") or {}).get("id", ""))

    async def _fetch(self, url: str, what: str, *, html: bool) -> bytes:
        headers = {"Authorization": f"Bearer {self._bot_token}"}
        try:
            timeout = aiohttp.ClientTimeout(total=300)
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url, headers=headers) as response,
            ):
                if response.status == 429:
                    seconds = float(response.headers.get("Retry-After") or 30)
                    raise RateLimitedError(
                        f"Slack asked memvault to wait {seconds:g} seconds for {what}.",
                        retry_after=seconds,
                    )
                if response.status >= 500:
                    raise ChannelError(f"Slack failed to serve {what} (HTTP {response.status}).")
                if response.status >= 400:
                    raise MessageRejectedError(f"Slack refused {what} (HTTP {response.status}).")
                if response.content_type == "text/html" and not html:
                    raise MessageRejectedError(
                        f"Slack answered {what} with its sign-in page: give the app the "
                        "files:read scope and reinstall it."
                    )
                return await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ChannelError(f"Slack could not be reached for {what}: {exc!r}.") from exc

    def _trusted(self, url: str) -> bool:
        """Whether ``url`` is Slack's own (https, ``*.slack.com``) or on the configured
        endpoint's host: only there does the bot token, or an answer, go."""
        parts, home = urlsplit(url), urlsplit(self.settings.base_url)
        host = parts.hostname or ""
        if host == home.hostname and parts.scheme == home.scheme:
            return True
        return parts.scheme == "https" and (host == "slack.com" or host.endswith(".slack.com"))

    # -- errors --------------------------------------------------------------------------

    def _classify(self, exc: Exception, what: str) -> ChannelError | None:
        """Slack's errors as the classes the hub acts on, each one sentence (no token:
        an API error is never chained)."""
        if isinstance(exc, SlackApiError):
            if what == _SOCKET_MODE_CONNECTION:
                token_env = self.settings.app_token_env
            else:
                token_env = self.settings.bot_token_env
            return without_cause(self._api_error(exc, what, token_env))
        if isinstance(exc, SlackClientError):
            return ChannelError(f"Slack failed on {what}: {exc}")
        if isinstance(exc, aiohttp.ClientError | TimeoutError):
            return ChannelError(f"Slack could not be reached for {what}: {exc!r}.")
        return None

    def _api_error(self, exc: SlackApiError, what: str, token_env: str) -> ChannelError:
        response = exc.response
        # An AsyncSlackResponse, or aiohttp's own response when the body was not JSON.
        status = getattr(response, "status_code", None) or getattr(response, "status", 0)
        data = getattr(response, "data", None)
        body: dict[str, Any] = data if isinstance(data, dict) else {}
        error = str(body.get("error") or "")
        if status == 429 or error == "ratelimited":
            headers = getattr(response, "headers", None) or {}
            seconds = float(headers.get("Retry-After") or 30)
            return RateLimitedError(
                f"Slack asked memvault to wait {seconds:g} seconds (rate limit on {what}).",
                retry_after=seconds,
            )
        if error in FATAL_ERRORS:
            return ChannelFatalError(
                f"Slack refused the token in ${token_env} ({error}) for {what}; "
                "check that variable and that the app is installed."
            )
        if error == "missing_scope":
            needed = body.get("needed") or "another scope"
            return ChannelFatalError(
                f"The Slack app lacks the {needed} scope for {what}; add it under OAuth & "
                "Permissions and reinstall the app."
            )
        if error in REJECTED_ERRORS:
            return MessageRejectedError(f"Slack refused {what}: {error}.")
        return ChannelError(f"Slack failed on {what}: {error or f'HTTP {status}'}.")


def _posts(
    chat_id: str, text: str, thread: str | None, buttons: tuple[Button, ...]
) -> list[dict[str, Any]]:
    """The ``chat.postMessage`` calls one message takes: its text, with the buttons as a
    Block Kit actions block (in a message of their own when the text is too long for a
    section block)."""
    base: dict[str, Any] = {"channel": chat_id, "thread_ts": thread}
    if not buttons:
        return [{**base, "text": text}] if text else []
    actions = {
        "type": "actions",
        "block_id": "memvault_buttons",
        "elements": [
            {
                "type": "button",
                "action_id": f"memvault_{number}",
                "text": {"type": "plain_text", "text": button.label[:_BUTTON_LABEL_LIMIT]},
                "value": button.data,
            }
            for number, button in enumerate(buttons)
        ],
    }
    if text and len(text) <= _SECTION_LIMIT:
        section = {"type": "section", "text": {"type": "mrkdwn", "text": text}}
        return [{**base, "text": text, "blocks": [section, actions]}]
    first = [{**base, "text": text}] if text else []
    return [*first, {**base, "text": "Choose one:", "blocks": [actions]}]


def _attachment(file: dict[str, Any]) -> Attachment | None:
    """A shared file as an :class:`Attachment` (None for one deleted or hidden)."""
    if not file.get("id") or file.get("mode") in ("tombstone", "hidden_by_limit"):
        return None
    mime = str(file.get("mimetype") or "") or None
    kind = "voice" if file.get("subtype") == "slack_audio" else media_kind(mime)
    size = file.get("size")
    return Attachment(
        kind,
        str(file["id"]),
        str(file.get("name") or file.get("title") or "") or None,
        mime,
        int(size) if isinstance(size, int) else None,
    )


def _chat_type(channel: str, channel_type: Any) -> str:
    """``private`` for direct messages, ``group`` for private channels and group DMs,
    ``channel`` otherwise."""
    if channel_type == "im" or (channel_type is None and channel.startswith("D")):
        return "private"
    if channel_type in ("mpim", "group") or (channel_type is None and channel.startswith("G")):
        return "group"
    return "channel"


def _when(ts: str) -> datetime:
    try:
        return datetime.fromtimestamp(float(ts), UTC)
    except ValueError:
        return datetime.now(UTC)
