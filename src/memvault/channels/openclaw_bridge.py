"""Every platform OpenClaw is connected to, through its ``openclaw`` command line.

OpenClaw (a Node gateway) already speaks Telegram, WhatsApp, Discord, Slack,
Signal, Matrix, Microsoft Teams and more; this adapter drives its CLI instead of
each platform's API, as the first design's OpenClawBridge did:

- Out: ``openclaw message send --channel C --target T --message M [--reply-to ID]
  [--media FILE]... --json``. A chat id is ``<channel>:<target>``
  (``discord:channel:123``), so a reply goes back to the platform conversation the
  message came from; OpenClaw renders the Markdown for that platform.
- In, from the running gateway (``listen = "gateway"``, or ``"auto"`` while one
  answers at ``gateway_url``): memvault connects to its WebSocket as a read-only
  operator and is told of every message a session records
  (:mod:`memvault.channels.openclaw_events`), about a second after the platform
  delivered it, from every platform OpenClaw receives (Telegram, WhatsApp, Signal,
  iMessage, Discord, ...), with no process started per message. What was recorded
  while memvault was away is read from the sessions' history at each connect.
- In, by polling (``listen = "poll"``, or ``"auto"`` while no gateway answers):
  every ``poll_seconds``, ``openclaw message read --channel C --target T
  [--after ID] --limit N --json`` for each configured listener (Discord, Slack,
  Matrix, Teams, Mattermost: the platforms whose history OpenClaw can read). Each
  platform's messages come back in its own shape (Discord's, Slack's, Matrix's, with
  OpenClaw's ``timestampMs``); :mod:`memvault.channels.openclaw_messages` reads the
  fields each one names differently. Under ``"auto"`` the gateway is tried again every
  ``gateway_retry_seconds``; the log, ``doctor`` and the channel's status say which
  way messages arrive.
- Either way only the listeners' conversations are handed over; the bot's own
  messages (``self_ids``, what the read marks as its own or as a bot's, and what this
  process sent) and stale ones (older than ``max_age_minutes``) are skipped.
- What keeps messages safe: the last message id per listener (and the gateway's
  record time of the last message) is kept in :class:`AdapterState` and moved past a
  message only after the hub's handler returned, so a restart reads on from there
  instead of from the start, and a crash in between reads the message again, which
  the hub drops by its id, ``<channel>:<target>:<message id>`` (the same id whichever
  way it came).
- Errors: a call that fails (an exit status, a timeout) is a :class:`ChannelError`,
  retried with the hub's backoff (OpenClaw itself waits out each platform's rate
  limits); a gateway that wants credentials, a refused token, a missing or too old
  ``openclaw`` is a :class:`ChannelFatalError`, which ``doctor`` reports; a send
  OpenClaw can never make (a channel it does not have, a hook that suppressed it)
  is a :class:`MessageRejectedError`.

A sender id is ``<channel>:<the target that reaches them>`` (``discord:user:42``,
``matrix:@ada:example.org``), so ids of different platforms never collide and an
owner id is also the chat that reaches the owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections import deque
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2 as httpx

from memvault.channels.base import (
    Adapter,
    AdapterState,
    Attachment,
    ChannelError,
    ChannelFatalError,
    Inbound,
    InboundHandler,
    MessageRejectedError,
    NotSupportedError,
    Outbound,
    Sent,
    json_object,
)
from memvault.channels.openclaw_events import (
    ChannelMessage,
    GatewayRefusedError,
    GatewayUnavailableError,
    connect,
)
from memvault.channels.openclaw_messages import (
    PlatformMessage,
    first_field,
    read_messages,
    sender_id,
    split_chat,
)
from memvault.config import OpenClawBridgeSettings
from memvault.errors import NotFoundError
from memvault.openclaw_cli import MIN_VERSION, find_command, parse_version, shown
from memvault.processes import kill_tree

log = logging.getLogger(__name__)

# Messages asked for per read: a conversation rarely gets more between two polls.
READ_LIMIT = 50
# How long ``channels status`` may wait for a gateway that is starting.
_STATUS_WAIT_MS = 10_000
# Ids of messages this process sent, to know them when a read brings them back.
_SENT_KEPT = 500
# How OpenClaw says that the gateway wants credentials or a platform refused the token.
_AUTH_WORDS = (
    "requires credentials",
    "unauthorized",
    "token mismatch",
    "invalid token",
    "invalid_auth",
    "not_authed",
)
# How it says that a channel (or this action on it) is not there at all.
_UNAVAILABLE_WORDS = ("channel is unavailable", "unknown channel", "not supported for channel")
# How it says that a channel is there but its history cannot be read (Telegram's).
_UNREADABLE_WORDS = ("not supported for channel",)
# The name under which the gateway's record time of the last message is kept.
_GATEWAY_SEEN = "gateway.seen_ms"


class OpenClawBridge(Adapter):
    """The ``openclaw`` CLI as one channel: its listeners polled, its sends made."""

    name = "openclaw"
    settings: OpenClawBridgeSettings

    def __init__(self, settings: OpenClawBridgeSettings, *, state: AdapterState) -> None:
        super().__init__(settings)
        self._state = state
        self._command: Path | None = None
        self._sent: deque[str] = deque(maxlen=_SENT_KEPT)
        self._receiving: str | None = None
        # Listeners whose platform's history OpenClaw cannot read (Telegram's): under
        # "auto" they are listened to through the gateway only.
        self._unreadable: set[str] = set()

    # -- the adapter -------------------------------------------------------------------

    async def identify(self) -> str:
        """``OpenClaw 2026.9.6``: the command found and recent enough."""
        self._command = None  # found afresh at each start: it may have moved
        text = await self._text(["--version"], "its version")
        version = parse_version(text)
        if version is None:
            raise ChannelFatalError(
                f"{self._find()} does not say an OpenClaw version ({text.strip()[:80]!r}); "
                "set channels.openclaw.command to the openclaw command."
            )
        if version < MIN_VERSION:
            raise ChannelFatalError(
                f"OpenClaw {shown(version)} is older than {shown(MIN_VERSION)}, the first "
                "release the bridge was checked against; update it (npm install -g openclaw)."
            )
        return f"OpenClaw {shown(version)}"

    def receiving(self) -> str | None:
        """How new messages arrive now: the gateway's events, or polling and why."""
        return self._receiving

    async def start(self, handler: InboundHandler) -> None:
        """Receive the listeners' messages until cancelled, from the gateway's events or
        by polling (``listen``); a listener's position moves past a message only after
        ``handler`` returned."""
        if not self.settings.listeners:
            self._receive_by("nothing: no listeners, so sending only")
            await asyncio.Event().wait()
        listen = self.settings.listen
        while True:
            if listen == "poll":
                self._receive_by(f"polling `openclaw message read` every {self._every()}")
                await self._poll_for(None, handler)
            try:
                await self._listen(handler)
                why = f"the gateway at {self.settings.gateway_url} went away"
            except GatewayUnavailableError as exc:
                if listen == "gateway":
                    self._receive_by(f"nothing yet: {exc.message}")
                    raise
                why = exc.message.rstrip(".")
            except GatewayRefusedError as exc:
                if listen == "gateway":
                    self._receive_by(f"nothing: {exc.message}")
                    raise
                # A refused token does not get better by asking again: poll until restart.
                self._receive_by(
                    f"polling `openclaw message read` every {self._every()} "
                    f"({exc.message.rstrip('.')}; the gateway is not tried again until "
                    "memvault restarts)"
                )
                await self._poll_for(None, handler)
            if listen == "gateway":
                raise ChannelError(f"{why[0].upper()}{why[1:]}; connecting again.")
            self._receive_by(
                f"polling `openclaw message read` every {self._every()} ({why}; the gateway "
                f"is tried again every {self.settings.gateway_retry_seconds:g} s)"
            )
            await self._poll_for(self.settings.gateway_retry_seconds, handler)

    async def send(self, message: Outbound) -> Sent:
        """One ``openclaw message send``: the text, the reply link and the files."""
        channel, target = split_chat(message.chat_id)
        if not message.text.strip() and not message.media:
            raise MessageRejectedError("There is nothing to send: no text and no file.")
        args = ["message", "send", "--channel", channel, "--target", target]
        if message.text.strip():
            args.append(f"--message={message.text}")  # one argument, even if it starts with -
        if message.reply_to:
            args.append(f"--reply-to={message.reply_to}")
        for path in message.media:
            if not path.is_file():
                raise MessageRejectedError(f"The file {path} cannot be read.")
            args.append(f"--media={path}")
        answer = await self._json([*args, "--json"], f"the message to {message.chat_id}")
        ids = _sent_ids(answer)
        self._sent.extend(ids)
        return Sent(ids)

    async def download(self, attachment: Attachment) -> bytes:
        """The bytes of a file the platform serves at an address (Discord's CDN)."""
        if not attachment.file_id.startswith(("https://", "http://")):
            raise NotSupportedError(
                f"OpenClaw's read gives no address to fetch {attachment.name or 'the file'} "
                "from; open it on the platform."
            )
        try:
            async with httpx.AsyncClient(timeout=self.settings.timeout) as client:
                response = await client.get(attachment.file_id, follow_redirects=True)
        except httpx.HTTPError as exc:
            raise ChannelError(f"The file {attachment.name} could not be fetched: {exc}.") from exc
        if response.status_code in (403, 404, 410):
            raise MessageRejectedError(
                f"The platform no longer serves {attachment.name} (HTTP {response.status_code})."
            )
        if response.status_code >= 400:
            raise ChannelError(
                f"The file {attachment.name} could not be fetched (HTTP {response.status_code})."
            )
        return response.content

    async def messages(self, chat_id: str, limit: int) -> list[dict[str, Any]]:
        """The latest ``limit`` messages of a conversation as the platform has them,
        oldest first (``openclaw message read``)."""
        channel, target = split_chat(chat_id)
        answer = await self._read(channel, target, limit, after=None)
        return [m.to_dict(channel) for m in read_messages(answer)[-limit:]]

    async def context(self, chat_id: str | None) -> dict[str, Any]:
        """What OpenClaw says of its channels, and whether the conversation is listened to."""
        found = await self.platform_status()
        if chat_id is not None:
            found["conversation"] = chat_id
            found["listened"] = any(
                f"{listener.channel}:{listener.target}" == chat_id
                for listener in self.settings.listeners
            )
        return found

    async def platform_status(self) -> dict[str, Any]:
        """``openclaw channels list`` and ``channels status`` (both ``--json``), with the
        listeners; a hint when OpenClaw has no channel configured yet."""
        listed, status = await asyncio.gather(
            self._json(["channels", "list", "--json"], "its channel list"),
            self._json(
                ["channels", "status", "--json", "--timeout", str(_STATUS_WAIT_MS)],
                "its channel status",
            ),
        )
        channels = listed.get("chat", {})
        found: dict[str, Any] = {
            "command": str(self._find()),
            "receiving": self._receiving,
            "channels": channels,
            "status": status,
            "listeners": [
                {
                    "channel": listener.channel,
                    "target": listener.target,
                    "last_seen": self._state.get(_position(listener.channel, listener.target)),
                }
                for listener in self.settings.listeners
            ],
        }
        if not channels and not status.get("configuredChannels"):
            found["hint"] = (
                "OpenClaw has no channel configured yet; add one on its host, e.g. "
                "`openclaw channels add --channel telegram --token <bot token>` "
                "(`openclaw channels add --help` lists them)."
            )
        return found

    # -- the gateway's events ------------------------------------------------------------

    async def _listen(self, handler: InboundHandler) -> None:
        """Hand over the listeners' messages as the gateway records them (first what it
        recorded while memvault was away), until the connection ends."""
        url = self.settings.gateway_url
        token = os.environ.get(self.settings.gateway_token_env, "").strip() or None
        async with connect(
            url, token=token, state=self._state, timeout=self.settings.timeout
        ) as gateway:
            for message in await gateway.subscribe(self._gateway_seen()):
                await self._hand_over(message, handler)
            version = f" (OpenClaw {gateway.version})" if gateway.version else ""
            self._receive_by(f"the gateway's events at {url}{version}")
            async for message in gateway.messages():
                await self._hand_over(message, handler)

    async def _hand_over(self, message: ChannelMessage, handler: InboundHandler) -> None:
        """One recorded message to the hub when a listener hears its conversation; then
        its listener's position and the record time move past it."""
        listener = self._listener_for(message)
        if listener is not None:
            channel, target = listener
            found = PlatformMessage(
                id=message.id,
                sender=message.sender,
                sender_name=message.sender_name,
                username=message.username,
                text=message.text,
                sent_at=message.sent_at,
                own=False,
                bot=False,
                reply_to=None,
                attachments=(),
            )
            inbound = self._inbound(channel, target, found)
            if inbound is not None:
                await handler(inbound)
            self._state.put(_position(channel, target), message.id)
        if message.recorded_ms > self._gateway_seen():
            self._state.put(_GATEWAY_SEEN, str(message.recorded_ms))

    def _listener_for(self, message: ChannelMessage) -> tuple[str, str] | None:
        """The listener whose conversation the message is in (its target as the
        listener names it), or None."""
        for listener in self.settings.listeners:
            if listener.channel != message.channel:
                continue
            if listener.target.removeprefix(f"{listener.channel}:") in message.conversation:
                return listener.channel, listener.target
        return None

    def _gateway_seen(self) -> int:
        """The gateway's record time (ms) of the last message handed over; at the first
        connect, ``max_age_minutes`` ago (older messages would be stale anyway)."""
        kept = self._state.get(_GATEWAY_SEEN)
        if kept and kept.isdigit():
            return int(kept)
        since = datetime.now(UTC) - timedelta(minutes=self.settings.max_age_minutes)
        return int(since.timestamp() * 1000)

    def _receive_by(self, how: str) -> None:
        """Say (once per change) how messages arrive now."""
        if how != self._receiving:
            self._receiving = how
            log.info("openclaw receives by %s", how, extra={"receiving": how})

    def _every(self) -> str:
        return f"{self.settings.poll_seconds:g} s"

    # -- polling -----------------------------------------------------------------------

    async def _poll_for(self, seconds: float | None, handler: InboundHandler) -> None:
        """Poll every listener each ``poll_seconds``, for ``seconds`` (None: for good)."""
        deadline = None if seconds is None else asyncio.get_running_loop().time() + seconds
        while True:
            failures: list[str] = []
            for listener in self.settings.listeners:
                try:
                    await self._poll_listener(listener.channel, listener.target, handler)
                except ChannelFatalError:
                    raise
                except ChannelError as exc:  # the other listeners are read all the same
                    failures.append(exc.message)
            if failures:
                raise ChannelError(" ".join(failures))
            if deadline is not None and asyncio.get_running_loop().time() >= deadline:
                return
            await asyncio.sleep(self.settings.poll_seconds)

    async def _poll_listener(self, channel: str, target: str, handler: InboundHandler) -> None:
        """One listener's poll; under "auto", one OpenClaw cannot read is left to the
        gateway (said once in the log) instead of stopping the channel."""
        key = f"{channel}:{target}"
        if key in self._unreadable:
            return
        try:
            await self._poll(channel, target, handler)
        except ChannelFatalError as exc:
            said = exc.message.lower()
            if self.settings.listen != "auto" or not any(w in said for w in _UNREADABLE_WORDS):
                raise
            self._unreadable.add(key)
            log.warning(
                "openclaw cannot read %s; it is heard through the gateway only",
                key,
                extra={"listener": key, "error": exc.message},
            )

    async def _poll(self, channel: str, target: str, handler: InboundHandler) -> None:
        """Read one listener's new messages and hand each one over, in order."""
        key = _position(channel, target)
        last = self._state.get(key)
        answer = await self._read(channel, target, READ_LIMIT, after=last)
        messages = read_messages(answer)
        ids = [m.id for m in messages]
        if last in ids:  # a platform that ignores --after: only what came later
            messages = messages[ids.index(last) + 1 :]
        for message in messages:
            inbound = self._inbound(channel, target, message)
            if inbound is not None:
                await handler(inbound)
            self._state.put(key, message.id)

    async def _read(
        self, channel: str, target: str, limit: int, *, after: str | None
    ) -> dict[str, Any]:
        args = ["message", "read", "--channel", channel, "--target", target]
        args += ["--limit", str(limit)]
        if after:
            args.append(f"--after={after}")
        return await self._json(
            [*args, "--json"], f"the messages of {channel}:{target}", listening=True
        )

    def _inbound(self, channel: str, target: str, message: PlatformMessage) -> Inbound | None:
        """The message as an :class:`Inbound`, or None when it is skipped."""
        why = self._skip(channel, message)
        if why:
            log.debug("openclaw message skipped", extra={"id": message.id, "reason": why})
            return None
        chat = f"{channel}:{target}"
        return Inbound(
            channel=self.name,
            message_id=f"{chat}:{message.id}",
            chat_id=chat,
            sender_id=sender_id(channel, message.sender),
            sender_name=message.sender_name,
            username=message.username,
            chat_type="private" if _direct(channel, target) else "group",
            text=message.text,
            sent_at=message.sent_at or datetime.now(UTC),
            reply_to=message.reply_to,
            attachments=message.attachments,
            platform_message_id=message.id,
        )

    def _skip(self, channel: str, message: PlatformMessage) -> str | None:
        """Why a message is not handed over (the bot's own, stale, empty), or None."""
        own = {message.sender, sender_id(channel, message.sender), f"user:{message.sender}"}
        if message.own or message.bot or message.id in self._sent:
            return "the bot's own"
        if own & set(self.settings.self_ids):
            return "from self_ids"
        age = timedelta(minutes=self.settings.max_age_minutes)
        if message.sent_at is not None and datetime.now(UTC) - message.sent_at > age:
            return "stale"
        if not message.text.strip() and not message.attachments:
            return "empty"
        return None

    # -- the command -------------------------------------------------------------------

    def _find(self) -> Path:
        """The ``openclaw`` executable (``command``, else the one on PATH)."""
        if self._command is None:
            try:
                self._command = find_command(self.settings.command or None)
            except NotFoundError as exc:
                raise ChannelFatalError(
                    f"{exc.message.split(';')[0].rstrip('.')}; install OpenClaw "
                    "(npm install -g openclaw) or set channels.openclaw.command to its path."
                ) from None
        return self._command

    async def _run(self, args: list[str], what: str) -> tuple[int, str, str]:
        """Exit status, standard output and error of one call, within ``timeout``."""
        command = self._find()
        try:
            process = await asyncio.create_subprocess_exec(
                str(command),
                *args,
                env=self._env(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own process group: a timeout ends Node too
            )
        except OSError as exc:
            raise ChannelFatalError(f"{command} could not run: {exc.strerror}.") from None
        try:
            out, err = await asyncio.wait_for(process.communicate(), self.settings.timeout)
        except TimeoutError:
            _kill(process)
            await process.communicate()  # reaped, its pipes closed
            raise ChannelError(
                f"openclaw did not answer about {what} in {self.settings.timeout:g} s."
            ) from None
        except asyncio.CancelledError:
            _kill(process)
            with contextlib.suppress(asyncio.CancelledError):
                # Reaped and its pipes read to their end before the loop closes (a pipe
                # left open is closed later, on a closed loop, with an error).
                await process.communicate()
            raise
        code = process.returncode if process.returncode is not None else -1
        return code, out.decode(errors="replace"), err.decode(errors="replace")

    def _env(self) -> dict[str, str] | None:
        """The command's environment: this process's, with the gateway's token where
        OpenClaw's CLI reads it (``OPENCLAW_GATEWAY_TOKEN``) when another variable holds it."""
        name = self.settings.gateway_token_env
        token = os.environ.get(name, "").strip()
        if not token or name == "OPENCLAW_GATEWAY_TOKEN":
            return None  # inherited as it is
        return {**os.environ, "OPENCLAW_GATEWAY_TOKEN": token}

    async def _text(self, args: list[str], what: str) -> str:
        code, out, err = await self._run(args, what)
        if code != 0:
            raise ChannelError(f"openclaw failed on {what} (exit {code}): {_reason(None, err)}")
        return out

    async def _json(self, args: list[str], what: str, *, listening: bool = False) -> dict[str, Any]:
        """The JSON a ``--json`` call printed; its failure as the error class it is."""
        code, out, err = await self._run(args, what)
        answer = _parse(out)
        if code == 0 and isinstance(answer, dict) and answer.get("ok") is not False:
            return answer
        if code == 0 and answer is None:
            raise ChannelError(f"openclaw printed no JSON for {what}: {_reason(None, out)}")
        failure = answer if isinstance(answer, dict) else None
        reason = _reason(failure, err or out)
        said = reason.lower()
        if any(words in said for words in _AUTH_WORDS):
            raise ChannelFatalError(f"OpenClaw refused {what}: {reason}")
        if any(words in said for words in _UNAVAILABLE_WORDS):
            if listening:  # a listener on a channel OpenClaw does not have: fix the config
                raise ChannelFatalError(f"OpenClaw cannot give {what}: {reason}")
            raise MessageRejectedError(f"OpenClaw cannot deliver {what}: {reason}")
        if failure is not None and failure.get("deliveryStatus") == "suppressed":
            raise MessageRejectedError(f"OpenClaw did not send {what}: {reason}")
        raise ChannelError(f"openclaw failed on {what} (exit {code}): {reason}")


def _direct(channel: str, target: str) -> bool:
    """Whether a target names one person (a direct chat) rather than a room."""
    if target.startswith(("user:", "@", "+", "uuid:", "username:")):
        return True
    return channel == "telegram" and target.isdigit()


def _position(channel: str, target: str) -> str:
    """The name under which a listener's last message id is kept."""
    return f"last_seen.{channel}:{target}"


# -- reading the command's answers ---------------------------------------------------------


def _parse(out: str) -> Any:
    """The JSON document a ``--json`` call printed (after any line of log), or None."""
    start = out.find("{")
    if start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(out[start:])[0]
    except ValueError:
        return None


def _reason(failure: dict[str, Any] | None, text: str) -> str:
    """OpenClaw's explanation, as one or two sentences: its JSON ``error.message``, else
    the ``Reason:`` line it writes to standard error, else the last line."""
    said = ""
    if failure is not None:
        error = failure.get("error")
        said = str(error.get("message", "")) if isinstance(error, dict) else str(error or "")
    if not said:
        lines = [line.removeprefix("[openclaw]").strip() for line in text.splitlines()]
        lines = [line for line in lines if line]
        reasons = [line.removeprefix("Reason:").strip() for line in lines if "Reason:" in line]
        said = (reasons or lines[-1:] or ["no output"])[0]
    # The first lines say what and how to fix it; a "Config: path" line adds nothing.
    kept = [line.strip() for line in said.splitlines() if line.strip()][:2]
    sentence = " ".join(line if line.endswith((".", "!", "?")) else f"{line}." for line in kept)
    return sentence or "no explanation."


def _sent_ids(answer: dict[str, Any]) -> tuple[str, ...]:
    """The platform's id of what was sent (``messageId``, where OpenClaw's
    resolveMessageActionMessageId finds it); none for a dry run."""
    payload = json_object(answer.get("payload"))
    result = json_object(payload.get("result"))
    for source in (answer, payload, result):
        found = first_field(source, "messageId")
        if found:
            return (found,)
    return ()


def _kill(process: asyncio.subprocess.Process) -> None:
    """End a call and whatever it started: Node under a shell wrapper, and the worker the
    real CLI starts in a session of its own (it would go on, holding the call's pipes,
    and a send it was making could still go out after memvault gave up on it)."""
    kill_tree(process.pid)
