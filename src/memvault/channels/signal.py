"""Signal through the JSON-RPC interface of ``signal-cli daemon``, which the owner runs.

memvault starts nothing here: the owner runs, say, ``signal-cli -a +NUMBER daemon
--http 127.0.0.1:8080 --receive-mode manual`` (or ``--socket PATH``), and the adapter
is its client. Over HTTP, requests are JSON-RPC 2.0 POSTs to ``/api/v1/rpc`` and
messages arrive as Server-Sent Events from ``/api/v1/events`` (``event: receive``,
data ``{"envelope": ..., "account": ...}``); over a UNIX socket, both travel as
newline-delimited JSON-RPC on one connection, messages as ``receive`` notifications
once ``subscribeReceive`` asked for them (see signal-cli-jsonrpc(5)).

What keeps messages safe: signal-cli has no acknowledgement. It takes a message
off Signal's servers only while a client listens (``--receive-mode manual`` or
``on-connection``; the default ``on-start`` takes them off while memvault is down,
and they are lost to it) and hands each one over once. The adapter gives it to the
hub, which stores it before returning; only then does it note the envelope's
timestamp per sender device (in :class:`AdapterState`), so an envelope signal-cli
hands over again (it re-reads its own cache after a crash) is skipped here, and the
hub drops it by its id, ``<sender uuid>_<timestamp>``, all the same (no colon: the
router names saved attachments after the id, and the vault refuses colons in names).

Replies are rendered from Markdown as Signal's text styles (bold, italic,
strikethrough and monospace ranges, counted in UTF-16 units); a reply quotes the
message it answers; files go as data URIs, so signal-cli may run in a container or
on another host. signal-cli's errors are mapped once, in :meth:`SignalAdapter._classify`;
the two transports are :mod:`memvault.channels.signal_rpc`.
"""

from __future__ import annotations

import base64
import binascii
import logging
import mimetypes
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

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
    Outbound,
    RateLimitedError,
    Sent,
    media_kind,
    read_media,
)
from memvault.channels.format import to_telegram_html
from memvault.channels.signal_rpc import HttpRpc, RpcError, SocketRpc
from memvault.config import SignalSettings

log = logging.getLogger(__name__)

GROUP_PREFIX = "group:"
ID_SEPARATOR = "_"  # between author and timestamp in a message id (neither contains it)
_DEFAULT_WAIT = 60.0  # a rate limit that names no wait

# The JSON-RPC error codes signal-cli answers with (SignalJsonRpcCommandHandler).
IO_ERROR = -3
UNTRUSTED_KEY = -4
RATE_LIMITED = -5
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class SignalAdapter(Adapter):
    """One Signal account, served by a signal-cli daemon over HTTP or a UNIX socket."""

    name = "signal"
    settings: SignalSettings

    def __init__(self, settings: SignalSettings, *, state: AdapterState | None = None) -> None:
        super().__init__(settings)
        self._state = state
        self._account = settings.account.strip()
        self._rpc = self._connection()
        # The ids the owner wrote in owner / allow, by their lower-case form (a UUID pasted
        # in capitals is still the owner).
        self._named = {v.strip().lower(): v for v in (*settings.owner, *settings.allow)}

    @property
    def where(self) -> str:
        """Where signal-cli is expected, as an error message names it."""
        if self.settings.socket:
            return f"the socket {self.settings.socket}"
        return self.settings.url

    async def identify(self) -> str:
        """The account and signal-cli's version (asking checks the account exists there)."""
        with self.errors("its version"):
            answer = await self._call("version")
        version = answer.get("version") if isinstance(answer, dict) else None
        who = self._account or "signal-cli"
        return f"{who} (signal-cli {version})" if version else who

    async def start(self, handler: InboundHandler) -> None:
        """Receive until cancelled; a message counts as seen only after ``handler`` returned."""
        # Over a socket, receiving takes a connection of its own (subscribed); over HTTP,
        # the event stream is one request of the same client.
        receiver = self._connection() if self.settings.socket else self._rpc
        events = receiver.events()
        try:
            while True:
                with self.errors("the stream of new messages"):
                    payload = await anext(events)
                await self._deliver(payload, handler)
        finally:
            await events.aclose()
            if receiver is not self._rpc:
                await receiver.close()

    async def send(self, message: Outbound) -> Sent:
        """Send the text (styled) with its files, quoting the message it answers."""
        params = _target(message.chat_id)
        text, styles = signal_text(message.text) if message.text.strip() else ("", [])
        params["message"] = text
        if styles:
            params["textStyle"] = styles
        if message.media:
            params["attachments"] = [_data_uri(path) for path in message.media]
        quoted = _quote(message.reply_to)
        if quoted is not None:
            params["quoteTimestamp"], params["quoteAuthor"] = quoted
        if not text and not message.media:
            return Sent()
        with self.errors(f"the message to {message.chat_id}"):
            answer = await self._call("send", params)
        timestamp = answer.get("timestamp") if isinstance(answer, dict) else None
        if timestamp is None:
            return Sent()
        mine = f"{self._account}{ID_SEPARATOR}{timestamp}" if self._account else str(timestamp)
        return Sent((mine,))

    async def typing(self, chat_id: str) -> None:
        """Show "typing…" in the chat; a failure is logged, never raised."""
        with (
            self.quietly("signal typing failed", chat_id=chat_id),
            self.errors("the typing indicator"),
        ):
            await self._call("sendTyping", _target(chat_id))

    async def download(self, attachment: Attachment) -> bytes:
        """The bytes of a received file, which signal-cli keeps in its data directory."""
        what = f"the file {attachment.name or attachment.file_id}"
        with self.errors(what):
            answer = await self._call("getAttachment", {"id": attachment.file_id})
        data = answer.get("data") if isinstance(answer, dict) else None
        try:
            if not isinstance(data, str):
                raise ValueError("no data")
            return base64.b64decode(data, validate=True)
        except (ValueError, binascii.Error) as exc:
            raise MessageRejectedError(
                f"signal-cli sent {what} in a form memvault cannot read."
            ) from exc

    async def close(self) -> None:
        """Close the connection to signal-cli; calling it again does nothing."""
        await self._rpc.close()

    # -- receiving -------------------------------------------------------------------------

    async def _deliver(self, payload: Any, handler: InboundHandler) -> None:
        envelope = _envelope(payload)
        if envelope is None:
            return
        try:
            inbound = self._inbound(envelope)
        except (TypeError, ValueError, AttributeError) as exc:  # not the shape signal-cli sends
            log.warning("skipped an envelope memvault cannot read", extra={"error": repr(exc)})
            return
        if inbound is None:
            return
        # The last timestamp handled per sender device: a device sends in order.
        author, _, stamp = inbound.message_id.rpartition(ID_SEPARATOR)
        mark = f"seen.{author}.{envelope.get('sourceDevice') or 1}"
        timestamp = int(stamp)
        seen = self._state.get(mark) if self._state is not None else None
        if seen is not None and seen.isdigit() and timestamp <= int(seen):
            log.info("signal-cli handed over a message again", extra={"id": inbound.message_id})
            return
        await handler(inbound)
        if self._state is not None:
            self._state.put(mark, str(timestamp))

    def _inbound(self, envelope: dict[str, Any]) -> Inbound | None:
        """The envelope as an :class:`Inbound`, or None when it carries nothing memvault reads
        (receipts, typing, reactions, the account's own devices' sync messages)."""
        data = envelope.get("dataMessage")
        edit = envelope.get("editMessage")
        if data is None and isinstance(edit, dict):
            data = edit.get("dataMessage")  # an edit reads as a new message, as on Telegram
        uuid, number = envelope.get("sourceUuid"), envelope.get("sourceNumber")
        author = uuid or envelope.get("source") or number
        if not isinstance(data, dict) or not author or envelope.get("timestamp") is None:
            return None
        attachments = _attachments(data)
        text = str(data.get("message") or "")
        if not text and data.get("sticker"):
            text = "[sticker]"
        if not text and not attachments:
            return None
        sender = self._sender_id(number, uuid) or str(author)
        group = (data.get("groupInfo") or {}).get("groupId")
        timestamp = int(envelope["timestamp"])
        message_id = f"{author}{ID_SEPARATOR}{timestamp}"
        return Inbound(
            channel=self.name,
            message_id=message_id,
            chat_id=f"{GROUP_PREFIX}{group}" if group else sender,
            sender_id=sender,
            sender_name=str(envelope.get("sourceName") or sender),
            chat_type="group" if group else "private",
            text=text,
            sent_at=datetime.fromtimestamp(timestamp / 1000, UTC),
            reply_to=_quoted(data.get("quote")),
            attachments=attachments,
            platform_message_id=message_id,
        )

    def _sender_id(self, number: Any, uuid: Any) -> str | None:
        """The sender as the owner named them in owner / allow (number or UUID), else the
        number where Signal shows it, else the UUID."""
        for candidate in (number, uuid):
            if isinstance(candidate, str) and candidate.lower() in self._named:
                return self._named[candidate.lower()]
        return next((c for c in (number, uuid) if isinstance(c, str) and c), None)

    # -- talking to signal-cli ----------------------------------------------------------------

    def _connection(self) -> HttpRpc | SocketRpc:
        if self.settings.socket:
            return SocketRpc(self.settings.socket)
        return HttpRpc(self.settings.url, self._account)

    async def _call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One JSON-RPC call, naming the account (which a multi-account daemon needs)."""
        sent = dict(params or {})
        if self._account:
            sent["account"] = self._account
        return await self._rpc.call(method, sent)

    def _classify(self, exc: Exception, what: str) -> ChannelError | None:
        """signal-cli's and the connection's errors as the classes the hub acts on."""
        if isinstance(exc, RpcError):
            return self._refusal(exc, what)
        if isinstance(exc, httpx.HTTPStatusError):
            return self._http_status(exc.response.status_code, what)
        if isinstance(exc, httpx.SSEError):
            return ChannelFatalError(
                f"{self.settings.url} does not serve signal-cli's event stream; "
                "start signal-cli with `daemon --http`."
            )
        if isinstance(exc, httpx.TimeoutException | TimeoutError):
            return ChannelError(f"signal-cli at {self.where} did not answer {what} in time.")
        if isinstance(exc, PermissionError):
            return ChannelFatalError(
                f"memvault may not open {self.where} ({exc.strerror}); let its user read and "
                "write the socket."
            )
        if isinstance(exc, EOFError):
            return ChannelError(f"signal-cli at {self.where} closed {what} (it may be restarting).")
        if isinstance(exc, httpx.TransportError | OSError):
            return ChannelError(
                f"signal-cli could not be reached at {self.where} for {what} ({_reason(exc)}); "
                "is `signal-cli daemon` running?"
            )
        if isinstance(exc, ValueError):  # an answer that is not JSON-RPC
            return ChannelError(f"signal-cli answered {what} with something unreadable.")
        return None

    def _http_status(self, status: int, what: str) -> ChannelError:
        """An HTTP error answer: signal-cli failing, or not signal-cli at all."""
        if status >= 500:
            return ChannelError(f"signal-cli failed on {what} (HTTP {status}).")
        if status == 421:
            return ChannelFatalError(
                f"signal-cli refused the host name in {self.settings.url} (HTTP 421); use "
                "the address its --http option names (or localhost / 127.0.0.1)."
            )
        if status == 400 and self._account:
            return ChannelFatalError(self._no_account())
        return ChannelFatalError(
            f"{self.settings.url} is not signal-cli's JSON-RPC endpoint (HTTP {status} for "
            f"{what}); start signal-cli with `daemon --http` and set channels.signal.url."
        )

    def _refusal(self, exc: RpcError, what: str) -> ChannelError:
        """One JSON-RPC error as a hub error class."""
        results = _results(exc.data)
        kinds = {str(r.get("type")) for r in results}
        text = exc.message.rstrip(".")
        if "AuthorizationFailedException" in text or (
            self._account and self._account in text and "not registered" in text
        ):
            account = self._account or "of the daemon"
            return ChannelFatalError(
                f"Signal no longer accepts the account {account} "
                "(it was unregistered, or registered again elsewhere); register or link it "
                "with signal-cli again."
            )
        if exc.code == INVALID_PARAMS and "account" in text.lower():
            return ChannelFatalError(self._no_account())
        if exc.code == RATE_LIMITED or "RATE_LIMIT_FAILURE" in kinds:
            wait = max((float(r.get("retryAfterSeconds") or 0) for r in results), default=0.0)
            wait = wait or _DEFAULT_WAIT
            return RateLimitedError(
                f"Signal asked memvault to wait {wait:g} seconds (rate limit).", retry_after=wait
            )
        if exc.code == UNTRUSTED_KEY or "IDENTITY_FAILURE" in kinds:
            return MessageRejectedError(
                f"Signal refused {what}: the recipient's safety number changed; verify it, "
                "then trust it with `signal-cli trust`."
            )
        if "UNREGISTERED_FAILURE" in kinds or "is not registered" in text:
            return MessageRejectedError(f"Signal refused {what}: the recipient is not on Signal.")
        if "NETWORK_FAILURE" in kinds or exc.code in (IO_ERROR, INTERNAL_ERROR):
            return ChannelError(f"signal-cli failed on {what}: {text}.")
        if exc.code == METHOD_NOT_FOUND:
            return MessageRejectedError(
                f"signal-cli does not know how to do {what} ({text}); update signal-cli."
            )
        return MessageRejectedError(f"signal-cli refused {what}: {text}.")

    def _no_account(self) -> str:
        if not self._account:
            return (
                "signal-cli serves several accounts; set channels.signal.account to the "
                "number memvault uses."
            )
        return (
            f"signal-cli has no account {self._account}; register or link it there "
            f"(`signal-cli -a {self._account} register`, or `link`), or correct "
            "channels.signal.account."
        )


# -- what signal-cli sends -----------------------------------------------------------------------


def _envelope(payload: Any) -> dict[str, Any] | None:
    """The envelope of what signal-cli pushed, in whichever shape: SSE data
    ``{"envelope", "account"}``, a socket notification's params, or a subscription's
    ``{"subscription", "result": {...}}``."""
    if isinstance(payload, dict) and payload.get("method") == "receive":
        payload = payload.get("params")  # a whole notification
    if isinstance(payload, dict) and "subscription" in payload:
        payload = payload.get("result")
    if not isinstance(payload, dict):
        return None
    envelope = payload.get("envelope")
    if payload.get("exception"):
        problem = payload["exception"]
        reason = problem.get("message") if isinstance(problem, dict) else problem
        source = envelope.get("source") if isinstance(envelope, dict) else None
        log.warning(
            "signal-cli could not read a message", extra={"source": source, "error": reason}
        )
    return envelope if isinstance(envelope, dict) else None


def _attachments(data: dict[str, Any]) -> tuple[Attachment, ...]:
    found = []
    for item in data.get("attachments") or []:
        if not isinstance(item, dict) or not item.get("id"):
            continue  # not downloaded (signal-cli runs with --ignore-attachments)
        mime = str(item.get("contentType") or "") or None
        kind = media_kind(mime)
        size = item.get("size")
        name = item.get("filename") or None
        found.append(Attachment(kind, str(item["id"]), name, mime, int(size) if size else None))
    return tuple(found)


def _quoted(quote_: Any) -> str | None:
    """The id of the message a quote answers, as :attr:`Inbound.message_id` spells it."""
    if not isinstance(quote_, dict) or quote_.get("id") is None:
        return None
    author = quote_.get("authorUuid") or quote_.get("author") or quote_.get("authorNumber")
    return f"{author}{ID_SEPARATOR}{quote_['id']}" if author else None


def _results(data: Any) -> list[dict[str, Any]]:
    """The per-recipient send results in an error's data (``{"response": {"results"}}``)."""
    response = data.get("response") if isinstance(data, dict) else None
    results = response.get("results") if isinstance(response, dict) else None
    return [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


# -- what memvault sends ---------------------------------------------------------------------------


def _target(chat_id: str) -> dict[str, Any]:
    """A chat id as signal-cli's recipient parameters: a group, or one person."""
    if chat_id.startswith(GROUP_PREFIX):
        return {"groupId": chat_id.removeprefix(GROUP_PREFIX)}
    return {"recipient": [chat_id]}


def _quote(reply_to: str | None) -> tuple[int, str] | None:
    """``(quoteTimestamp, quoteAuthor)`` from a message id ``<author>_<timestamp>``."""
    author, _, timestamp = (reply_to or "").rpartition(ID_SEPARATOR)
    return (int(timestamp), author) if author and timestamp.isdigit() else None


def _data_uri(path: Path) -> str:
    """A file as the data URI signal-cli accepts for an attachment (RFC 2397, with a name)."""
    data = read_media(path)
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    encoded = base64.b64encode(data).decode("ascii")
    return f"data:{mime};filename={quote(path.name, safe='')};base64,{encoded}"


_STYLES = {"b": "BOLD", "i": "ITALIC", "s": "STRIKETHROUGH", "code": "MONOSPACE"}


def signal_text(markdown: str) -> tuple[str, list[str]]:
    """``markdown`` as Signal shows it: the plain text, and its styles as signal-cli's
    ``start:length:STYLE`` ranges (UTF-16 units). Laid out as the Telegram rendering is
    (headings bold, bullets), then read back from that HTML subset."""
    reader = _StyleReader()
    reader.feed(to_telegram_html(markdown))
    reader.close()
    return "".join(reader.parts), reader.styles


class _StyleReader(HTMLParser):
    """Reads :func:`~memvault.channels.format.to_telegram_html` back into text and ranges."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.styles: list[str] = []
        self._at = 0  # UTF-16 units written so far
        # Open tags: the tag, where it began (UTF-16 units, and parts), the link's target.
        self._open: list[tuple[str, int, int, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _STYLES or tag == "a":
            self._open.append((tag, self._at, len(self.parts), dict(attrs).get("href") or ""))

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self._open) - 1, -1, -1):
            name, start, first_part, href = self._open[index]
            if name == tag:
                del self._open[index]
                break
        else:
            return
        if tag == "a":
            if href and "".join(self.parts[first_part:]) != href:  # Signal shows no link target
                self.handle_data(f" ({href})")
        elif self._at > start:
            self.styles.append(f"{start}:{self._at - start}:{_STYLES[tag]}")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)
        self._at += len(data.encode("utf-16-le")) // 2
