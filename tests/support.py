"""Test helpers shared by several test modules (fixtures live in conftest.py)."""

from __future__ import annotations

import contextlib
import hashlib
import re
import socket
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt

from memvault.clock import Clock
from memvault.config import Settings
from memvault.index.embedders import BaseEmbedder
from memvault.tools.policy import ApprovalRequest
from waiting import WAIT

# What `memvault init` creates (DESIGN.md, "The vault"), spelled out independently of the code.
LAYOUT_FOLDERS = (
    "Memory",
    "Tasks/active",
    "Tasks/completed",
    "Contacts",
    "Projects",
    "Insights",
    "Skills",
    "Decisions",
    "Journal",
    "Templates",
)
# The fields of a search hit (OpenClaw's memory_search shape plus memvault's own).
HIT_KEYS = frozenset(
    {
        "path",
        "start_line",
        "end_line",
        "score",
        "vector_score",
        "text_score",
        "snippet",
        "kind",
        "source",
        "id",
        "title",
        "heading",
        "category",
        "created",
        "tags",
        "origin",
    }
)
LAYOUT_NOTES = (
    "Home.md",
    "MEMORY.md",
    "User Profile.md",
    "Current Status.md",
    "Known Issues.md",
    "Decisions/Decision Log.md",
    "Templates/task.md",
    "Templates/contact.md",
    "Templates/project.md",
    "Templates/journal.md",
    "Templates/insight.md",
    "Templates/skill.md",
)

TZ = ZoneInfo("Europe/Berlin")


class MovableClock(Clock):
    """A clock tests can set: real time never leaks into assertions."""

    def __init__(self, start: datetime) -> None:
        self.moment = start
        super().__init__(TZ, now=lambda: self.moment)

    def set(self, moment: datetime) -> None:
        self.moment = moment


class HashEmbedder(BaseEmbedder):
    """A deterministic stand-in for an embedding model: hashed bag of words.

    Texts sharing words get similar vectors; it implements the same
    interface as memvault's embedders, so the index cannot tell the difference.
    """

    provider = "test"

    def __init__(self, model: str = "hash-64", dim: int = 64) -> None:
        self.model = model
        self.dim = dim
        self.calls = 0

    def dimension(self) -> int:
        return self.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.sha1(word.encode()).digest()
                out[row, digest[0] % self.dim] += 1.0 if digest[1] % 2 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        result: npt.NDArray[np.float32] = out / norms
        return result


class RecordingApprover:
    """The owner answering approval questions: always ``answer``, and every question kept."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    def approve(self, request: ApprovalRequest) -> bool:
        self.asked.append(request)
        return self.answer


class LoopbackHandler(BaseHTTPRequestHandler):
    """What the fake servers (model, Telegram) share: HTTP/1.1 keep-alive, no log lines,
    no Nagle delay, and a client that hung up is not an error."""

    protocol_version = "HTTP/1.1"  # keep-alive, chunked streams: as the real APIs

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet test output

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's algorithm and
        # delayed ACKs add ~40 ms to every answer (the real services add none of it).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        # A client that gave up (a timeout, a long poll cancelled) or dropped a connection.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            super().handle()


class LoopbackServer:
    """An HTTP server on 127.0.0.1 (a free port) serving ``handler`` from a thread."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], name: str) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True  # a handler still sleeping must not block shutdown
        self.thread = threading.Thread(
            target=self.server.serve_forever, args=(0.02,), name=name, daemon=True
        )  # a short poll interval: shutdown() waits for one
        self.thread.start()

    @property
    def address(self) -> str:
        """``http://127.0.0.1:PORT``."""
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(WAIT)


def schema_problems(schema: dict[str, Any], where: str = "") -> list[str]:
    """What a model or an MCP client would find wrong in a tool's input schema: a
    ``required`` name that is no declared property, a property without a type or a
    description (in nested objects and array items too). Empty when all is well."""
    problems: list[str] = []
    properties = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in properties:
            problems.append(f"{where or 'the input'} requires {name!r}, which it does not declare")
    for name, prop in properties.items():
        shown = f"{where}.{name}" if where else name
        if "type" not in prop:
            problems.append(f"{shown} has no type")
        if not str(prop.get("description", "")).strip():
            problems.append(f"{shown} has no description")
        for nested, place in ((prop, shown), (prop.get("items"), f"{shown}[]")):
            if isinstance(nested, dict) and "properties" in nested:
                problems += schema_problems(nested, place)
    return problems


@contextlib.contextmanager
def reopened(root: Any, clock: Clock, storage: Any) -> Iterator[Any]:
    """The vault at ``root`` opened anew, as a daemon starting would (its index migrated
    to the schema of this memvault; ``storage`` the test's settings), closed after."""
    from memvault.runtime import Runtime

    runtime = Runtime.open(
        Settings(vault=root, timezone="Europe/Berlin", storage=storage),
        clock=clock,
        embedder=HashEmbedder(),
    )
    try:
        yield runtime
    finally:
        runtime.close()


def daytime_zone() -> str:
    """A timezone where it is now between 04:00 and 22:00 (the CLI runs on real time, and
    daily_note summarises the day before when run before 03:00)."""
    for name in ("UTC", "Etc/GMT-8", "Etc/GMT+8"):
        if 4 <= datetime.now(ZoneInfo(name)).hour < 22:
            return name
    raise AssertionError("one of three zones 8 hours apart is always in daytime")
