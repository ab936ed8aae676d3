"""A fake ``signal-cli daemon`` on loopback, speaking its JSON-RPC wire format.

``signal-cli -a ACCOUNT daemon --http HOST:PORT --socket PATH`` serves, and so does this::

    POST /api/v1/rpc     one JSON-RPC 2.0 request -> its response (415 without a JSON body
                         type, 405 for another verb, 421 for a Host it is not bound to)
    GET  /api/v1/events  Server-Sent Events: ``event:receive`` + ``data:{"envelope": ...,
                         "account": ...}``, a ``:`` keep-alive line in between (chunked)
    GET  /api/v1/check   200
    the UNIX socket      newline-delimited JSON-RPC; ``receive`` notifications on the same
                         connection: after ``subscribeReceive`` as ``{"subscription": n,
                         "result": {...}}``, or unwrapped on every connection unless
                         ``receive_mode="manual"``

Errors are signal-cli's (SignalJsonRpcCommandHandler): -1 user error (the send results
in ``data.response``), -3 I/O, -4 untrusted key, -5 rate limit, -32602 bad params
("Specified account does not exist" in multi-account mode), -32601 unknown method.

Like signal-cli, it takes a message off "the Signal server" (:meth:`push_message` queues
it there) only while someone listens, and hands it to every listener once; with
``receive_mode="on-start"`` it takes messages off even when nobody listens (which is how
that mode loses them for a client that is down)::

    with FakeSignalCli() as fake:
        settings = SignalSettings(account=fake.account, url=fake.url)  # or socket=fake.socket
        stamp = fake.push_message(OWNER, "hello")           # what the owner types
        fake.fail_send("RATE_LIMIT_FAILURE", retry_after=30)  # the next send is limited
        fake.drop_streams()                                  # the daemon restarts
        fake.wait_sent(1)                                    # what memvault sent
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import select
import shutil
import socket
import socketserver
import tempfile
import threading
import time
import uuid as uuids
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from support import LoopbackHandler, LoopbackServer
from waiting import WAIT

ACCOUNT = "+15550000001"
VERSION = "0.13.22"
STYLES = {"NONE", "BOLD", "ITALIC", "SPOILER", "STRIKETHROUGH", "MONOSPACE"}
_STYLE = re.compile(r"(\d+):(\d+):(.+)")
_DATA_URI = re.compile(
    r"\Adata:(?P<type>.+?/.+?)?(?P<parameters>;.+?=.+?)?(?P<base64>;base64)?,(?P<data>.+)\Z",
    re.IGNORECASE | re.DOTALL,
)
_DROP, _ABRUPT = "drop", "abrupt"
# Methods a multi-account daemon answers without an account (JsonRpcMultiCommand).
_ANY_ACCOUNT = {"version", "listAccounts", "subscribeReceive"}


def uuid_of(number: str) -> str:
    """The (made-up, stable) ACI of a phone number."""
    return str(uuids.uuid5(uuids.NAMESPACE_OID, number))


class RpcFailureError(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class _Listener:
    """One receive handler in signal-cli: an SSE stream, or a socket subscription."""

    def __init__(self, subscription: int | None) -> None:
        self.subscription = subscription
        self.queue: deque[Any] = deque()


class FakeSignalCli:
    """The signal-cli daemon memvault talks to, scripted by the test (see the module docstring)."""

    def __init__(
        self,
        account: str = ACCOUNT,
        *,
        receive_mode: str = "manual",
        accounts: Iterable[str] | None = None,
        registered: Iterable[str] | None = None,
        keepalive: float = 0.2,
    ) -> None:
        self.account = account
        self.receive_mode = receive_mode
        # Multi-account mode (started without -a) when given: requests must name one of them.
        self.accounts = None if accounts is None else list(accounts)
        self.registered = None if registered is None else set(registered)
        self.keepalive = keepalive
        self.sent: list[dict[str, Any]] = []  # every send attempt, delivered or refused
        self.typing: list[dict[str, Any]] = []
        self.requests: list[str] = []  # methods, in order
        self.handed: list[dict[str, Any]] = []  # payloads handed to a listener
        self.groups: dict[str, str] = {}  # id -> name
        self._server_queue: deque[dict[str, Any]] = deque()  # on Signal's servers, not fetched
        self._listeners: list[_Listener] = []
        self._files: dict[str, bytes] = {}
        self._failures: dict[str, deque[RpcFailureError]] = defaultdict(deque)
        self._http_failures: dict[str, deque[int]] = defaultdict(deque)
        self._subscriptions = iter(range(10**9))
        self._last_stamp = 0
        self._closing = False
        self._cond = threading.Condition(threading.RLock())
        self._http: LoopbackServer | None = None
        self._unix: socketserver.ThreadingUnixStreamServer | None = None
        self._unix_thread: threading.Thread | None = None
        self._folder: str | None = None

    # -- scripting ------------------------------------------------------------------------------

    def push_message(
        self,
        number: str | None,
        text: str | None,
        *,
        uuid: str | None = None,
        name: str = "Owner",
        group: str | None = None,
        quote: tuple[str, int] | None = None,
        attachments: Iterable[tuple[str | None, bytes, str]] = (),
        sticker: bool = False,
        device: int = 1,
        edit_of: int | None = None,
    ) -> int:
        """Queue a message from ``number`` (None: a sender who hides it) on the server;
        returns its timestamp."""
        aci = uuid or uuid_of(number or "hidden")
        with self._cond:
            stamp = self._stamp()
            data: dict[str, Any] = {
                "timestamp": stamp,
                "message": text,
                "expiresInSeconds": 0,
                "viewOnce": False,
            }
            if group is not None:
                self.groups.setdefault(group, "A group")
                data["groupInfo"] = {
                    "groupId": group,
                    "groupName": self.groups[group],
                    "revision": 3,
                    "type": "DELIVER",
                }
            if quote is not None:
                author, quoted = quote
                data["quote"] = {
                    "id": quoted,
                    "author": author,
                    "authorNumber": author if author.startswith("+") else None,
                    "authorUuid": uuid_of(author) if author.startswith("+") else author,
                    "text": "(the quoted text)",
                    "attachments": [],
                }
            if sticker:
                data["sticker"] = {"packId": "abc", "stickerId": 3}
            files = []
            for filename, content, mime in attachments:
                file_id = f"{uuids.uuid4().hex[:20]}{Path(filename or '').suffix}"
                self._files[file_id] = content
                files.append(
                    {
                        "contentType": mime,
                        "filename": filename,
                        "id": file_id,
                        "size": len(content),
                        "width": None,
                        "height": None,
                        "caption": None,
                        "uploadTimestamp": stamp - 50,
                    }
                )
            if files:
                data["attachments"] = files
            envelope = self._envelope(number, aci, name, device, stamp)
            if edit_of is None:
                envelope["dataMessage"] = data
            else:
                envelope["editMessage"] = {"targetSentTimestamp": edit_of, "dataMessage": data}
            self._arrive({"envelope": envelope, "account": self.account})
            return stamp

    def push_envelope(self, number: str, **content: Any) -> int:
        """Queue an envelope of another kind (``receiptMessage={...}``, ``typingMessage=``,
        ``syncMessage=``, ``dataMessage=`` as given); returns its timestamp."""
        with self._cond:
            stamp = self._stamp()
            envelope = {**self._envelope(number, uuid_of(number), "Owner", 1, stamp), **content}
            self._arrive({"envelope": envelope, "account": self.account})
            return stamp

    def push_exception(self, number: str, message: str, kind: str) -> None:
        """An envelope signal-cli could not decrypt, with its ``exception``."""
        with self._cond:
            stamp = self._stamp()
            envelope = self._envelope(number, uuid_of(number), "Owner", 1, stamp)
            self._arrive(
                {
                    "envelope": envelope,
                    "account": self.account,
                    "exception": {"message": message, "type": kind},
                }
            )

    def redeliver(self, stamp: int) -> None:
        """Hand over again a message handed over before, as signal-cli does when it re-reads
        its message cache after a crash."""
        with self._cond:
            payload = next(p for p in self.handed if p["envelope"]["timestamp"] == stamp)
            self._arrive(json.loads(json.dumps(payload)))

    def fail(
        self, method: str, code: int, message: str, *, data: Any = None, times: int = 1
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with this JSON-RPC error."""
        with self._cond:
            self._failures[method].extend([RpcFailureError(code, message, data)] * times)

    def fail_send(self, kind: str, *, retry_after: int | None = None, times: int = 1) -> None:
        """Fail the next sends as signal-cli does when Signal refuses every recipient:
        ``RATE_LIMIT_FAILURE`` (-5), ``IDENTITY_FAILURE`` (-4), ``NETWORK_FAILURE`` or
        ``UNREGISTERED_FAILURE`` (-1), the results in the error's data."""
        result: dict[str, Any] = {
            "recipientAddress": {"uuid": None, "number": None, "username": None},
            "type": kind,
        }
        if retry_after is not None:
            result["retryAfterSeconds"] = retry_after
        code, message = {
            "RATE_LIMIT_FAILURE": (-5, "Failed to send message due to rate limiting"),
            "IDENTITY_FAILURE": (-4, "Failed to send message due to untrusted identities"),
        }.get(kind, (-1, "Failed to send message"))
        data = {"response": {"timestamp": 0, "results": [result]}}
        self.fail("send", code, message, data=data, times=times)

    def fail_http(self, path: str, status: int, *, times: int = 1) -> None:
        """Answer the next ``times`` requests to ``path`` with this HTTP status."""
        with self._cond:
            self._http_failures[path].extend([status] * times)

    def drop_streams(self, *, abrupt: bool = False) -> None:
        """End every event stream and socket connection (the daemon restarts); ``abrupt``
        cuts HTTP streams mid-chunk instead of ending them."""
        with self._cond:
            for listener in self._listeners:
                listener.queue.append(_ABRUPT if abrupt else _DROP)
            self._cond.notify_all()

    def add_group(self, group_id: str, name: str = "A group") -> None:
        """A group the account is a member of (sends to other ids fail)."""
        with self._cond:
            self.groups[group_id] = name

    # -- reading back ---------------------------------------------------------------------------

    @property
    def listeners(self) -> int:
        """How many receive handlers are registered (open streams, subscriptions)."""
        with self._cond:
            return len(self._listeners)

    def pending(self) -> int:
        """Messages still on the server (not handed to anyone)."""
        with self._cond:
            return len(self._server_queue)

    def delivered(self, chat: str) -> list[str]:
        """The texts sent to ``chat`` (a number, or ``group:<id>``), refusals left out."""
        with self._cond:
            return [str(s["message"]) for s in self.sent if s["chat"] == chat and not s["error"]]

    def wait_sent(self, count: int, timeout: float = WAIT) -> list[dict[str, Any]]:
        """The send attempts, once there are at least ``count`` of them."""
        self._wait(lambda: len(self.sent) >= count, timeout, f"{count} send attempts")
        with self._cond:
            return list(self.sent)

    def wait_listeners(self, count: int, timeout: float = WAIT) -> None:
        """Return once exactly ``count`` receive handlers are registered."""
        self._wait(lambda: len(self._listeners) == count, timeout, f"{count} listeners")

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not ready():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"fake signal-cli: no {what} after {timeout} s")
                self._cond.wait(min(left, 0.1))

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``SignalSettings.url``: the --http address."""
        if self._http is None:
            raise RuntimeError("the fake is not running; use it as a context manager")
        return self._http.address

    @property
    def socket(self) -> str:
        """``SignalSettings.socket``: the --socket path (short: UNIX paths have a limit)."""
        if self._folder is None:
            raise RuntimeError("the fake is not running; use it as a context manager")
        return f"{self._folder}/socket"

    def __enter__(self) -> FakeSignalCli:
        self._http = LoopbackServer(_http_handler(self), "FakeSignalCli")
        self._folder = tempfile.mkdtemp(prefix="sigcli-", dir="/tmp")
        self._unix = socketserver.ThreadingUnixStreamServer(self.socket, _socket_handler(self))
        self._unix.daemon_threads = True
        self._unix_thread = threading.Thread(
            target=self._unix.serve_forever, args=(0.02,), name="FakeSignalCliSocket", daemon=True
        )
        self._unix_thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving (connections are refused from now on)."""
        with self._cond:
            self._closing = True
            for listener in self._listeners:
                listener.queue.append(_DROP)
            self._cond.notify_all()
        if self._http is not None:
            self._http.close()
        if self._unix is not None:
            self._unix.shutdown()
            self._unix.server_close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    # -- JSON-RPC -------------------------------------------------------------------------------

    def rpc(self, request: Any, *, transport: str, connection: Any = None) -> dict[str, Any] | None:
        """The response to one JSON-RPC request (None for a notification)."""
        if not isinstance(request, dict) or "method" not in request:
            return _error(None, RpcFailureError(-32600, "method field must be set"))
        number = request.get("id")
        params = request.get("params") or {}
        try:
            with self._cond:
                self.requests.append(str(request["method"]))
                result = self._call(str(request["method"]), dict(params), transport, connection)
        except RpcFailureError as failure:
            return _error(number, failure)
        if number is None:
            return None
        return {"jsonrpc": "2.0", "result": result, "id": number}

    def _call(self, method: str, params: dict[str, Any], transport: str, connection: Any) -> Any:
        account = params.pop("account", None)
        if self.accounts is not None:  # multi-account mode
            if account is not None and account not in self.accounts:
                raise RpcFailureError(-32602, "Specified account does not exist")
            if account is None and len(self.accounts) != 1 and method not in _ANY_ACCOUNT:
                raise RpcFailureError(-32602, "Method requires valid account parameter")
        handler = getattr(self, f"_rpc_{method}", None)
        if handler is None:
            raise RpcFailureError(-32601, "Method not implemented")
        if self._failures[method]:
            failure = self._failures[method].popleft()
            if method == "send":
                self._record(params, transport, failure.message)
            raise failure
        if method == "subscribeReceive":
            return handler(params, connection)
        if method == "send":
            return handler(params, transport)
        return handler(params)

    def _rpc_version(self, params: dict[str, Any]) -> Any:
        return {"version": VERSION}

    def _rpc_listGroups(self, params: dict[str, Any]) -> Any:  # noqa: N802
        return [{"id": g, "name": n, "isMember": True} for g, n in self.groups.items()]

    def _rpc_send(self, params: dict[str, Any], transport: str) -> Any:
        recipients = _as_list(params.get("recipient"))
        groups = _as_list(params.get("groupId"))
        try:
            if not recipients and not groups:
                raise RpcFailureError(-1, "No recipients given")
            for group in groups:
                if group not in self.groups:
                    raise RpcFailureError(-1, f"Group not found: {group}")
            styles = _as_list(params.get("textStyle"))
            for style in styles:
                match = _STYLE.fullmatch(str(style))
                if match is None:
                    raise RpcFailureError(
                        -1, f"Invalid textStyle syntax ({style}) expected 'start:length:STYLE'"
                    )
                if match[3] not in STYLES:
                    raise RpcFailureError(-1, f"Invalid style: {match[3]}")
            if "quoteTimestamp" in params:
                if not isinstance(params["quoteTimestamp"], int):
                    raise RpcFailureError(-32603, "Cannot cast to Long (ClassCastException)")
                if not params.get("quoteAuthor"):
                    raise RpcFailureError(-1, "Quote author parameter is missing")
            files = [_attachment(a) for a in _as_list(params.get("attachments"))]
            if not params.get("message") and not files:
                raise RpcFailureError(-1, "Message is empty")
            unknown = [r for r in recipients if not self._registered(str(r))]
            if unknown:
                result = {
                    "recipientAddress": {"uuid": None, "number": unknown[0], "username": None},
                    "type": "UNREGISTERED_FAILURE",
                }
                raise RpcFailureError(
                    -1,
                    "Failed to send message",
                    {"response": {"timestamp": self._stamp(), "results": [result]}},
                )
        except RpcFailureError as failure:
            self._record(params, transport, failure.message)
            raise
        stamp = self._stamp()
        self._record(params, transport, None, stamp, files)
        results = [
            {
                "recipientAddress": {"uuid": uuid_of(str(r)), "number": r, "username": None},
                "type": "SUCCESS",
            }
            for r in recipients
        ]
        return {"timestamp": stamp, "results": results}

    def _rpc_sendTyping(self, params: dict[str, Any]) -> Any:  # noqa: N802
        if not params.get("recipient") and not params.get("groupId"):
            raise RpcFailureError(-1, "No recipients given")
        for group in _as_list(params.get("groupId")):
            if group not in self.groups:
                raise RpcFailureError(-1, f"Group not found: {group}")
        self.typing.append(params)
        self._cond.notify_all()
        return {}

    def _rpc_getAttachment(self, params: dict[str, Any]) -> Any:  # noqa: N802
        file_id = params.get("id")
        if file_id is None:
            raise RpcFailureError(-1, "Missing attachment id parameter")
        if file_id not in self._files:
            raise RpcFailureError(-1, f"Could not find attachment with ID: {file_id}")
        return {"data": base64.b64encode(self._files[file_id]).decode()}

    def _rpc_subscribeReceive(self, params: dict[str, Any], connection: Any) -> Any:  # noqa: N802
        if connection is None:
            raise RpcFailureError(-32601, "Method not implemented")  # not over HTTP
        number = next(self._subscriptions)
        connection.subscribe(self._listen(number))
        return number

    # -- the server's queue and the listeners (called with the lock held) --------------------------

    def _listen(self, subscription: int | None) -> _Listener:
        listener = _Listener(subscription)
        self._listeners.append(listener)
        self._hand_over()
        self._cond.notify_all()
        return listener

    def _unlisten(self, listener: _Listener) -> None:
        with self._cond:
            if listener in self._listeners:
                self._listeners.remove(listener)
            self._cond.notify_all()

    def _arrive(self, payload: dict[str, Any]) -> None:
        self._server_queue.append(payload)
        self._hand_over()
        self._cond.notify_all()

    def _hand_over(self) -> None:
        """Fetch what waits on the server: to every listener, or to nobody under on-start."""
        if not self._listeners and self.receive_mode != "on-start":
            return
        while self._server_queue:
            payload = self._server_queue.popleft()
            self.handed.append(payload)
            for listener in self._listeners:
                listener.queue.append(payload)

    def _next(self, listener: _Listener, timeout: float) -> Any:
        """The listener's next payload, ``_DROP`` / ``_ABRUPT``, or None after ``timeout``."""
        with self._cond:
            if not listener.queue and not self._closing:
                self._cond.wait(timeout)
            if self._closing and not listener.queue:
                return _DROP
            return listener.queue.popleft() if listener.queue else None

    def _envelope(
        self, number: str | None, aci: str, name: str, device: int, stamp: int
    ) -> dict[str, Any]:
        return {
            "source": number or aci,
            "sourceNumber": number,
            "sourceUuid": aci,
            "sourceName": name,
            "sourceDevice": device,
            "timestamp": stamp,
            "serverReceivedTimestamp": stamp + 20,
            "serverDeliveredTimestamp": stamp + 40,
        }

    def _stamp(self) -> int:
        self._last_stamp = max(self._last_stamp + 1, int(time.time() * 1000))
        return self._last_stamp

    def _registered(self, recipient: str) -> bool:
        return self.registered is None or recipient in self.registered

    def _record(
        self,
        params: dict[str, Any],
        transport: str,
        error: str | None,
        stamp: int | None = None,
        files: list[tuple[str | None, str, bytes]] | None = None,
    ) -> None:
        recipients = _as_list(params.get("recipient"))
        groups = _as_list(params.get("groupId"))
        chat = f"group:{groups[0]}" if groups else str(recipients[0]) if recipients else ""
        self.sent.append(
            {
                "chat": chat,
                "message": params.get("message"),
                "textStyle": _as_list(params.get("textStyle")),
                "quoteTimestamp": params.get("quoteTimestamp"),
                "quoteAuthor": params.get("quoteAuthor"),
                "files": files or [],
                "transport": transport,
                "error": error,
                "timestamp": stamp,
            }
        )
        self._cond.notify_all()


def _as_list(value: Any) -> list[Any]:
    """signal-cli takes one value or a list where the CLI takes several (JsonRpcNamespace)."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _attachment(value: Any) -> tuple[str | None, str, bytes]:
    """``(file name, type, bytes)`` of a data URI, parsed as signal-cli's DataURI does; a
    path is refused (no file is shared with this fake)."""
    match = _DATA_URI.match(str(value))
    if match is None:
        raise RpcFailureError(
            -32603,
            f"Failed to send message: {value} (NoSuchFileException) (UnexpectedErrorException)",
        )
    parameters: dict[str, str] = {}
    for pair in (match["parameters"] or "").split(";")[1:]:
        key, _, raw = pair.partition("=")
        parameters[key] = unquote(raw)
    if not match["base64"]:
        raise RpcFailureError(-1, "Only base64 data URIs are supported by this fake")
    data = base64.b64decode(match["data"], validate=True)
    return parameters.get("filename"), match["type"] or "text/plain", data


def _error(number: Any, failure: RpcFailureError) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "error": {"code": failure.code, "message": failure.message, "data": failure.data},
        "id": number,
    }


# -- HTTP ------------------------------------------------------------------------------------------


def _http_handler(fake: FakeSignalCli) -> type[BaseHTTPRequestHandler]:
    class Handler(LoopbackHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = urlsplit(self.path).path
            if self._refused(path):
                return
            if path == "/api/v1/check":
                self._send(200, b"")
            elif path == "/api/v1/events":
                self._events()
            elif path == "/api/v1/rpc":
                self._send(405, b"")
            else:
                self._send(404, b"")

        def do_POST(self) -> None:  # noqa: N802
            path = urlsplit(self.path).path
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self._refused(path):
                return
            if path != "/api/v1/rpc":
                self._send(404 if path not in ("/api/v1/events", "/api/v1/check") else 405, b"")
                return
            if not self.headers.get("content-type", "").startswith("application/json"):
                self._send(415, b"")
                return
            try:
                request = json.loads(body)
            except ValueError:
                answer: Any = _error(None, RpcFailureError(-32700, "Parse error"))
            else:
                answer = fake.rpc(request, transport="http")
            if answer is None:
                self._send(201, b"")
            else:
                self._send(200, json.dumps(answer).encode(), "application/json")

        def _refused(self, path: str) -> bool:
            host = (self.headers.get("host") or "").rsplit(":", 1)[0].strip("[]").lower()
            if host not in ("127.0.0.1", "localhost", "::1"):
                self._send(421, b"")
                return True
            with fake._cond:
                status = fake._http_failures[path].popleft() if fake._http_failures[path] else None
            if status is not None:
                self._send(status, b"")
                return True
            return False

        def _events(self) -> None:
            query = dict(parse_qsl(urlsplit(self.path).query))
            if fake.accounts is not None and query.get("account") not in (None, *fake.accounts):
                self._send(400, b"")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            with fake._cond:
                listener = fake._listen(None)
            try:
                while True:
                    item = fake._next(listener, fake.keepalive)
                    if item == _ABRUPT:
                        self.close_connection = True
                        with contextlib.suppress(OSError):
                            self.wfile.write(b"5\r\nevent")  # a chunk cut short
                            self.wfile.flush()
                            self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if item == _DROP:
                        self._chunk(b"")
                        return
                    if item is None:
                        if _hung_up(self.connection):
                            return
                        self._chunk(b":\n")
                        continue
                    data = json.dumps(item, separators=(",", ":"))
                    self._chunk(f"event:receive\ndata:{data}\n\n".encode())
            except OSError:
                return
            finally:
                fake._unlisten(listener)

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _send(self, status: int, data: bytes, kind: str | None = None) -> None:
            self.send_response(status)
            if kind:
                self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _hung_up(connection: socket.socket) -> bool:
    """Whether the client closed its end (readable, and nothing to read)."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


# -- the UNIX socket -------------------------------------------------------------------------------


class _Connection:
    """One socket client: requests in, responses and notifications out."""

    def __init__(self, fake: FakeSignalCli, sock: socket.socket) -> None:
        self.fake = fake
        self.sock = sock
        self.lock = threading.Lock()
        self.listeners: list[_Listener] = []
        self.closed = threading.Event()

    def write(self, message: dict[str, Any]) -> None:
        with self.lock:
            self.sock.sendall(json.dumps(message).encode() + b"\n")

    def subscribe(self, listener: _Listener) -> None:
        self.listeners.append(listener)
        threading.Thread(target=self._pump, args=(listener,), daemon=True).start()

    def _pump(self, listener: _Listener) -> None:
        try:
            while not self.closed.is_set():
                item = self.fake._next(listener, self.fake.keepalive)
                if item in (_DROP, _ABRUPT):
                    with contextlib.suppress(OSError):
                        self.sock.shutdown(socket.SHUT_RDWR)
                    return
                if item is None:
                    continue
                params = (
                    item
                    if listener.subscription is None
                    else {
                        "subscription": listener.subscription,
                        "result": item,
                    }
                )
                self.write({"jsonrpc": "2.0", "method": "receive", "params": params})
        except OSError:
            return
        finally:
            self.fake._unlisten(listener)


def _socket_handler(fake: FakeSignalCli) -> type[socketserver.BaseRequestHandler]:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            connection = _Connection(fake, self.request)
            if fake.receive_mode != "manual":  # every connection receives (on-start, on-connection)
                with fake._cond:
                    connection.subscribe(fake._listen(None))
            try:
                for line in self.rfile:
                    if not line.strip():
                        continue
                    try:
                        request = json.loads(line)
                    except ValueError:
                        answer: Any = _error(None, RpcFailureError(-32700, "Parse error"))
                    else:
                        answer = fake.rpc(request, transport="socket", connection=connection)
                    if answer is not None:
                        connection.write(answer)
            except OSError:
                pass
            finally:
                connection.closed.set()
                for listener in connection.listeners:
                    fake._unlisten(listener)

    return Handler
