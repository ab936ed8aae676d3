"""The two ways to reach a ``signal-cli daemon``: JSON-RPC 2.0 over HTTP, messages as
Server-Sent Events (:class:`HttpRpc`), or newline-delimited JSON-RPC both ways on one
UNIX socket connection (:class:`SocketRpc`). Each has ``call``, ``events`` and
``close``; an error answer is an :class:`RpcError`, which the Signal adapter
(:mod:`memvault.channels.signal`) maps onto the classes the hub acts on.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

import httpx2 as httpx

log = logging.getLogger(__name__)

_RPC_TIMEOUT = 60.0  # a send with files uploads them to Signal before it answers
_CONNECT_TIMEOUT = 5.0
_STREAM_IDLE = 60.0  # signal-cli writes a keep-alive every 15 s: silence this long is a dead link
_MAX_EVENT = 16 * 1024 * 1024
_MAX_LINE = 512 * 1024 * 1024  # a getAttachment answer is the whole file, base64


class RpcError(Exception):
    """signal-cli's JSON-RPC error answer: its code, message and data (the send results)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class HttpRpc:
    """``signal-cli daemon --http``: JSON-RPC by POST, messages as Server-Sent Events."""

    def __init__(self, url: str, account: str) -> None:
        self._base = url.rstrip("/").removesuffix("/api/v1/rpc")
        self._account = account
        self._client: httpx.AsyncClient | None = None
        self._ids = itertools.count(1)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:  # made in the loop that uses it (a CLI send runs its own)
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(_RPC_TIMEOUT, connect=_CONNECT_TIMEOUT)
            )
        return self._client

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """One JSON-RPC request; its result (an error answer raises :class:`RpcError`)."""
        request = {"jsonrpc": "2.0", "method": method, "params": params, "id": next(self._ids)}
        response = await self._http().post(f"{self._base}/api/v1/rpc", json=request)
        response.raise_for_status()
        return _answer(response.json())

    async def events(self) -> AsyncGenerator[Any]:
        """What signal-cli pushes, one payload at a time, until the link ends (EOFError)."""
        query = {"account": self._account} if self._account else None
        idle = httpx.Timeout(_STREAM_IDLE, connect=_CONNECT_TIMEOUT)
        async with self._http().sse(
            f"{self._base}/api/v1/events", params=query, timeout=idle, max_event_size=_MAX_EVENT
        ) as source:
            source.response.raise_for_status()
            async for event in source:
                if event.event == "receive" and event.data:
                    yield json.loads(event.data)
        raise EOFError("signal-cli ended the stream of messages")

    async def close(self) -> None:
        """Close the connection; calling it again does nothing."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


class SocketRpc:
    """``signal-cli daemon --socket``: newline-delimited JSON-RPC both ways on one connection;
    answers are matched to requests by id, ``receive`` notifications are queued."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._ids = itertools.count(1)
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._received: asyncio.Queue[Any] | None = None  # set while someone listens

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """One JSON-RPC request; its result (an error answer raises :class:`RpcError`)."""
        writer = await self._open()
        number = next(self._ids)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[number] = answer
        request = {"jsonrpc": "2.0", "method": method, "params": params, "id": number}
        try:
            writer.write(json.dumps(request).encode() + b"\n")
            await writer.drain()
            return _answer(await asyncio.wait_for(answer, _RPC_TIMEOUT))
        finally:
            self._waiting.pop(number, None)

    async def events(self) -> AsyncGenerator[Any]:
        """What signal-cli pushes, one payload at a time, until the link ends (EOFError)."""
        self._received = asyncio.Queue()
        # With --receive-mode manual, nothing is pushed until asked; with the other modes
        # every connection gets messages already, and this adds a second copy of each (the
        # adapter and the hub drop it).
        await self.call("subscribeReceive", {})
        while True:
            params = await self._received.get()
            if params is None:
                raise EOFError("signal-cli closed the connection")
            yield params

    async def close(self) -> None:
        """Close the connection; calling it again does nothing."""
        writer, reading = self._writer, self._reading
        self._writer = self._reading = None
        if reading is not None:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _open(self) -> asyncio.StreamWriter:
        if self._writer is None or self._writer.is_closing():
            reader, self._writer = await asyncio.open_unix_connection(self._path, limit=_MAX_LINE)
            self._reading = asyncio.create_task(self._read(reader))
        return self._writer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        failure: BaseException = EOFError("signal-cli closed the connection")
        try:
            while line := await reader.readline():
                try:
                    message = json.loads(line)
                except ValueError:
                    log.warning("signal-cli sent a line that is not JSON")
                    continue
                if not isinstance(message, dict):
                    continue
                if "method" in message:  # a notification
                    if message["method"] == "receive" and self._received is not None:
                        self._received.put_nowait(message.get("params"))
                    continue
                number = message.get("id")
                waiting = self._waiting.get(number) if isinstance(number, int) else None
                if waiting is not None and not waiting.done():
                    waiting.set_result(message)
        except (OSError, ValueError) as exc:  # a reset, or a line over the limit
            failure = exc
        finally:
            for waiting in self._waiting.values():
                if not waiting.done():
                    waiting.set_exception(failure)
            if self._received is not None:
                self._received.put_nowait(None)
            if self._writer is not None:
                self._writer.close()


def _answer(message: Any) -> Any:
    """A JSON-RPC response's result, or its error raised as :class:`RpcError`."""
    if not isinstance(message, dict):
        raise ValueError("not a JSON-RPC response")
    error = message.get("error")
    if isinstance(error, dict):
        raise RpcError(
            int(error.get("code") or 0), str(error.get("message") or ""), error.get("data")
        )
    return message.get("result")
