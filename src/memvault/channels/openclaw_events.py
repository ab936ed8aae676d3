"""OpenClaw's running gateway as an event stream: platform messages as its sessions record them.

The gateway (``openclaw gateway run``) receives every platform OpenClaw is connected to
and records each inbound message in an agent session. Its WebSocket protocol (protocol 4
in openclaw 2026.9.6; docs/gateway/protocol/*.md in its package) lets an operator client
watch those sessions, so memvault hears a message about a second after the platform
delivered it, with no ``openclaw`` process started for it. What this module speaks:

- Frames are JSON text: requests ``{type: "req", id, method, params}``, answers
  ``{type: "res", id, ok, payload | error}``, events ``{type: "event", event, payload}``.
- The handshake: the gateway sends ``connect.challenge`` ``{nonce, ts}``; the client
  answers ``connect`` as a local backend operator (client ``gateway-client``, mode
  ``backend``, role ``operator``, scope ``operator.read``) with the gateway's shared token
  and an Ed25519 device identity that signs the v3 proof
  ``v3|device|client|mode|role|scopes|ts|token|nonce|platform|family``
  (``buildDeviceAuthPayloadV3``, dist/device-auth-*.mjs). On loopback this needs no
  pairing (docs/gateway/protocol/handshake.md, "trusted local backend clients").
- ``sessions.subscribe`` makes the gateway send ``session.message`` for every new
  transcript entry of every session (dist/server-session-events-*.mjs), and, given list
  parameters, answers with the sessions themselves. A platform's message is an entry of
  role ``user`` whose ``__openclaw`` says who sent it and through which platform
  (``senderId``, ``senderName``, ``senderUsername``, ``transport: {channel, messageId}``,
  ``recordTimestampMs``); the session row says where (``chatType``, ``origin.to``).
- ``chat.history`` gives a session's entries in the same shape: what was recorded while
  memvault was not listening is read from there, not from the platform.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import itertools
import json
import os
import sys
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from memvault import __version__
from memvault.channels.base import AdapterState, ChannelError, ChannelFatalError, json_object

PROTOCOL = 4
CLIENT_ID = "gateway-client"  # a local backend, as OpenClaw's own helpers connect
CLIENT_MODE = "backend"
ROLE = "operator"
SCOPES = ("operator.read",)  # sessions and their messages; nothing that changes them
# Sessions listed at a (re)connect, and entries read from each one updated since.
SESSIONS_LISTED = 200
HISTORY_READ = 100
# The gateway ticks every 15 s (hello-ok.policy.tickIntervalMs): silence this long
# means the connection is gone even if no close frame came.
_SILENCE_TICKS = 4
_DEFAULT_TICK_MS = 15_000
_KEY_NAME = "gateway.device_key"
# Entry ids handed over lately: catch-up and live events may bring one twice.
_SEEN_KEPT = 2000
# What a session key names when its conversation is not one person's.
_ROOMS = ("group", "channel", "room", "thread")
# The gateway's frames reach 25 MiB (hello-ok.policy.maxPayload); aiohttp's default is 4.
_MAX_FRAME = 32 * 1024 * 1024


class GatewayUnavailableError(ChannelError):
    """No gateway answers at the address (not running, starting, or gone)."""


class GatewayRefusedError(ChannelFatalError):
    """The gateway answered and refused the connection (a token, a pairing)."""


@dataclass(frozen=True)
class ChannelMessage:
    """A platform's message as the gateway recorded it in a session."""

    channel: str  # the OpenClaw channel: telegram, whatsapp, discord, ...
    id: str  # the platform's own id of the message
    entry: str  # the session entry's id (unique across the gateway)
    sender: str  # the platform's id of the author
    sender_name: str
    username: str | None
    text: str
    sent_at: datetime | None
    recorded_ms: int  # when the gateway recorded it
    direct: bool  # a one-to-one chat (else a group, a room, a channel)
    conversation: frozenset[str]  # the targets that name its conversation there


class DeviceIdentity:
    """memvault's Ed25519 device key for the gateway, kept in the adapter's state."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    @classmethod
    def of(cls, state: AdapterState) -> DeviceIdentity:
        """The identity kept in ``state``, made (and kept) on first use."""
        kept = state.get(_KEY_NAME)
        if kept:
            with contextlib.suppress(ValueError):
                return cls(Ed25519PrivateKey.from_private_bytes(base64.b64decode(kept)))
        key = Ed25519PrivateKey.generate()
        raw = key.private_bytes_raw()
        state.put(_KEY_NAME, base64.b64encode(raw).decode())
        return cls(key)

    @property
    def id(self) -> str:
        """OpenClaw's device id: the SHA-256 of the raw public key, in hex."""
        return hashlib.sha256(self.public).hexdigest()

    def proof(self, *, token: str | None, nonce: str, signed_at: int) -> dict[str, Any]:
        """The ``device`` of a ``connect`` request, signing the challenge (proof v3)."""
        signed = "|".join(
            [
                "v3",
                self.id,
                CLIENT_ID,
                CLIENT_MODE,
                ROLE,
                ",".join(SCOPES),
                str(signed_at),
                token or "",
                nonce,
                _platform(),
                "",  # no device family
            ]
        )
        return {
            "id": self.id,
            "publicKey": _b64url(self.public),
            "signature": _b64url(self._key.sign(signed.encode())),
            "signedAt": signed_at,
            "nonce": nonce,
        }


class Gateway:
    """One WebSocket connection to the gateway, handshake done: calls and events."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        socket: aiohttp.ClientWebSocketResponse,
        url: str,
        hello: dict[str, Any],
        timeout: float,
    ) -> None:
        self._session = session
        self._socket = socket
        self.url = url
        self.hello = hello
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._events: deque[tuple[str, dict[str, Any]]] = deque()
        policy = hello.get("policy") if isinstance(hello.get("policy"), dict) else {}
        tick = policy.get("tickIntervalMs") if isinstance(policy, dict) else None
        tick_ms = tick if isinstance(tick, int) and tick > 0 else _DEFAULT_TICK_MS
        self._silence = max(_SILENCE_TICKS * tick_ms / 1000, timeout)
        self._seen: deque[str] = deque(maxlen=_SEEN_KEPT)

    @property
    def version(self) -> str | None:
        """The gateway's OpenClaw version, as its hello says."""
        server = self.hello.get("server")
        found = server.get("version") if isinstance(server, dict) else None
        return str(found) if found else None

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request's answer; events that come meanwhile are kept for :meth:`messages`."""
        request_id = f"memvault-{next(self._ids)}"
        await self._send({"type": "req", "id": request_id, "method": method, "params": params})
        deadline = asyncio.get_running_loop().time() + self._timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise GatewayUnavailableError(
                    f"OpenClaw's gateway did not answer {method} in {self._timeout:g} s."
                )
            frame = await self._frame(left)
            if frame.get("type") == "event":
                self._keep(frame)
            elif frame.get("type") == "res" and frame.get("id") == request_id:
                if frame.get("ok"):
                    payload = frame.get("payload")
                    return payload if isinstance(payload, dict) else {}
                raise ChannelError(f"OpenClaw's gateway refused {method}: {_said(frame)}")

    async def subscribe(self, since_ms: int) -> list[ChannelMessage]:
        """Subscribe to every session's new entries; what was recorded after
        ``since_ms`` (and so missed), oldest first."""
        answer = await self.call("sessions.subscribe", {"limit": SESSIONS_LISTED})
        listed = answer.get("list")
        rows = listed.get("sessions") if isinstance(listed, dict) else None
        missed: list[ChannelMessage] = []
        for row in rows if isinstance(rows, list) else []:
            if not isinstance(row, dict) or not isinstance(row.get("key"), str):
                continue
            updated = row.get("updatedAt")
            if isinstance(updated, int | float) and updated <= since_ms:
                continue
            history = await self.call(
                "chat.history", {"sessionKey": row["key"], "limit": HISTORY_READ}
            )
            session = history.get("sessionInfo") if isinstance(history, dict) else None
            entries = history.get("messages") if isinstance(history, dict) else None
            for entry in entries if isinstance(entries, list) else []:
                message = channel_message(entry, session or row, row["key"])
                if message is not None and message.recorded_ms > since_ms:
                    missed.append(message)
        missed.sort(key=lambda m: m.recorded_ms)
        return [m for m in missed if self._first_time(m)]

    async def messages(self) -> AsyncIterator[ChannelMessage]:
        """Platform messages as the gateway records them, until the connection ends
        (:class:`GatewayUnavailableError` then)."""
        while True:
            if self._events:
                name, payload = self._events.popleft()
            else:
                frame = await self._frame(self._silence)
                if frame.get("type") != "event":
                    continue
                name, payload = _event(frame)
            if name == "shutdown":
                raise GatewayUnavailableError("OpenClaw's gateway is shutting down.")
            if name != "session.message":
                continue
            key = payload.get("sessionKey")
            message = channel_message(
                payload.get("message"), payload.get("session"), key if isinstance(key, str) else ""
            )
            if message is not None and self._first_time(message):
                yield message

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._socket.close()
        await self._session.close()

    def _first_time(self, message: ChannelMessage) -> bool:
        if message.entry in self._seen:
            return False
        self._seen.append(message.entry)
        return True

    def _keep(self, frame: dict[str, Any]) -> None:
        self._events.append(_event(frame))

    async def _send(self, frame: dict[str, Any]) -> None:
        try:
            await self._socket.send_str(json.dumps(frame))
        except (aiohttp.ClientError, ConnectionError, RuntimeError) as exc:
            raise GatewayUnavailableError(
                f"The connection to OpenClaw's gateway broke: {exc}."
            ) from None

    async def _frame(self, timeout: float) -> dict[str, Any]:
        return await _frame(self._socket, timeout, self.url)


@contextlib.asynccontextmanager
async def connect(
    url: str, *, token: str | None, state: AdapterState, timeout: float
) -> AsyncIterator[Gateway]:
    """The gateway at ``url``, connected as memvault's device with ``token``."""
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, connect=timeout))
    try:
        try:
            socket = await session.ws_connect(url, heartbeat=30.0, max_msg_size=_MAX_FRAME)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise GatewayUnavailableError(
                f"No OpenClaw gateway answers at {url} ({_why(exc)})."
            ) from None
        gateway = await _handshake(session, socket, url, token, state, timeout)
    except BaseException:
        await session.close()
        raise
    try:
        yield gateway
    finally:
        await gateway.close()


async def _handshake(
    session: aiohttp.ClientSession,
    socket: aiohttp.ClientWebSocketResponse,
    url: str,
    token: str | None,
    state: AdapterState,
    timeout: float,
) -> Gateway:
    challenge = await _frame(socket, timeout, url)
    name, payload = _event(challenge)
    nonce, signed_at = payload.get("nonce"), payload.get("ts")
    if name != "connect.challenge" or not isinstance(nonce, str) or not isinstance(signed_at, int):
        raise GatewayUnavailableError(f"{url} did not greet as an OpenClaw gateway does.")
    params: dict[str, Any] = {
        "minProtocol": PROTOCOL,
        "maxProtocol": PROTOCOL,
        "client": {
            "id": CLIENT_ID,
            "displayName": "memvault",
            "version": __version__,
            "platform": _platform(),
            "mode": CLIENT_MODE,
        },
        "role": ROLE,
        "scopes": list(SCOPES),
        "caps": [],
        "auth": {"token": token} if token else {},
        "device": DeviceIdentity.of(state).proof(token=token, nonce=nonce, signed_at=signed_at),
    }
    await socket.send_str(json.dumps({"type": "req", "id": "connect", "method": "connect",
                                      "params": params}))  # fmt: skip
    while True:
        frame = await _frame(socket, timeout, url)
        if frame.get("type") == "res" and frame.get("id") == "connect":
            break
    if frame.get("ok") and isinstance(frame.get("payload"), dict):
        return Gateway(session, socket, url, frame["payload"], timeout)
    raise _refusal(frame, url)


def _refusal(frame: dict[str, Any], url: str) -> ChannelError:
    """A refused ``connect`` as the error it is: starting (try later), or refused."""
    error = frame.get("error") if isinstance(frame.get("error"), dict) else {}
    assert isinstance(error, dict)
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    assert isinstance(details, dict)
    said = _said(frame)
    if error.get("retryable") or error.get("code") == "UNAVAILABLE":
        return GatewayUnavailableError(f"OpenClaw's gateway at {url} is not ready: {said}")
    if details.get("code") == "PAIRING_REQUIRED" or "pairing" in said.lower():
        request = details.get("requestId")
        approve = f"openclaw devices approve {request}" if request else "openclaw devices approve"
        return GatewayRefusedError(
            f"OpenClaw's gateway at {url} asks to pair memvault's device: {said} "
            f"Approve it on the gateway's host (`{approve}`)."
        )
    return GatewayRefusedError(
        f"OpenClaw's gateway at {url} refused memvault: {said} Put its token "
        "(gateway.auth.token) in the variable channels.openclaw.gateway_token_env names."
    )


def channel_message(message: Any, session: Any, session_key: str) -> ChannelMessage | None:
    """A session entry as a platform message; None for anything else (the agent's
    answers, tool results, what an operator typed in OpenClaw's own chat)."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return None
    meta = json_object(message.get("__openclaw"))
    transport = json_object(meta.get("transport"))
    identity = json_object(meta.get("senderIdentity"))
    channel = _text(transport.get("channel")) or _text(identity.get("pluginId"))
    platform_id = _text(transport.get("messageId"))
    entry = _text(meta.get("id"))
    if not channel or not platform_id or not entry:
        return None
    sender = _text(meta.get("senderId")) or _text(identity.get("id")) or "unknown"
    row = json_object(session)
    origin = json_object(row.get("origin"))
    kind = _text(row.get("chatType")) or _text(origin.get("chatType"))
    if kind:
        direct = kind in ("direct", "dm")
    else:  # a row without its chat type: the session key says it (agent:main:telegram:group:-1)
        direct = not any(f":{place}:" in session_key for place in _ROOMS)
    recorded = meta.get("recordTimestampMs")
    sent = message.get("timestamp")
    return ChannelMessage(
        channel=channel,
        id=platform_id,
        entry=entry,
        sender=sender,
        sender_name=_text(meta.get("senderName")) or _text(meta.get("senderUsername")) or sender,
        username=_text(meta.get("senderUsername")),
        text=_content(message.get("content")),
        sent_at=(
            datetime.fromtimestamp(sent / 1000, UTC)
            if isinstance(sent, int | float) and not isinstance(sent, bool)
            else None
        ),
        recorded_ms=int(recorded) if isinstance(recorded, int | float) else 0,
        direct=direct,
        conversation=_conversation(channel, sender, direct, row, session_key),
    )


def _conversation(
    channel: str, sender: str, direct: bool, row: dict[str, Any], session_key: str
) -> frozenset[str]:
    """The targets that name a message's conversation on its platform, as ``openclaw
    message`` takes them: a direct chat is its sender (``4242``, ``user:42``, ``+4915...``);
    a group is where the session delivers (``origin.to``) and what its key names
    (``agent:main:telegram:group:-100123`` gives ``group:-100123`` and ``-100123``)."""
    if direct:
        # The session row of a direct chat may be shared by every direct chat (OpenClaw's
        # dmScope "main"): only the sender says which one this is.
        return frozenset({sender, f"user:{sender}"})
    found: set[str] = set()
    for place in (json_object(row.get("origin")), json_object(row.get("deliveryContext"))):
        target = _text(place.get("to"))
        if target:
            found.add(target.removeprefix(f"{channel}:"))
    marker = f":{channel}:"
    if marker in session_key:
        tail = session_key.split(marker, 1)[1]
        found.add(tail)
        found.add(tail.split(":", 1)[1] if ":" in tail else tail)
    return frozenset(found)


def _content(content: Any) -> str:
    """The text of an entry: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(part.get("text"))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and part.get("text")
        ]
        return "\n".join(parts)
    return ""


async def _frame(
    socket: aiohttp.ClientWebSocketResponse, timeout: float, url: str
) -> dict[str, Any]:
    """The next JSON frame; GatewayUnavailableError when the connection ends or stays silent."""
    try:
        received = await socket.receive(timeout=timeout)
    except TimeoutError:
        raise GatewayUnavailableError(
            f"OpenClaw's gateway at {url} said nothing for {timeout:g} s."
        ) from None
    if received.type != aiohttp.WSMsgType.TEXT:
        raise GatewayUnavailableError(f"OpenClaw's gateway at {url} closed the connection.")
    try:
        frame = json.loads(received.data)
    except ValueError:
        raise GatewayUnavailableError(f"{url} sent something that is not JSON.") from None
    if not isinstance(frame, dict):
        raise GatewayUnavailableError(f"{url} sent something that is not a gateway frame.")
    return frame


def _event(frame: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return str(frame.get("event") or ""), json_object(frame.get("payload"))


def _said(frame: dict[str, Any]) -> str:
    """The gateway's explanation of a refusal, as a sentence."""
    error = json_object(frame.get("error"))
    said = _text(error.get("message")) or _text(error.get("code")) or "no reason given"
    return said if said.endswith((".", "!", "?")) else f"{said}."


def _why(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.WSServerHandshakeError):
        return f"HTTP {exc.status}, not a WebSocket"
    if isinstance(exc, TimeoutError):
        return "no answer"
    cause = getattr(exc, "os_error", None) or exc
    number = getattr(cause, "errno", None)
    if isinstance(number, int):
        return os.strerror(number)  # "Connection refused", not aiohttp's wording
    return str(cause) or type(exc).__name__


def _platform() -> str:
    """The platform as Node's process.platform names it (linux, darwin, win32)."""
    return sys.platform


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | str) and str(value).strip():
        return str(value).strip()
    return None
