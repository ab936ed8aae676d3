"""The CLI's daemon client: discovery through daemon.json, its small HTTP reader, errors."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway_support import Live
from memvault.gateway.client import (
    DaemonClient,
    DaemonInfo,
    DaemonLock,
    DaemonUnavailableError,
    RemoteError,
    Sighting,
    find_daemon,
    read_info,
    write_info,
)
from waiting import WAIT

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound


def one_shot_server(reply: bytes) -> Iterator[int]:
    """A loopback server answering one connection with ``reply`` (sent in pieces)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            for start in range(0, len(reply), 7):
                connection.sendall(reply[start : start + 7])
        listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    thread.join(WAIT)


@pytest.fixture
def chunked() -> Iterator[int]:
    body = json.dumps({"ok": True, "result": {"answer": 42, "text": "ä"}}).encode()
    chunks = b"".join(
        f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in (body[:10], body[10:])
    )
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    )
    yield from one_shot_server(reply)


def client_for(port: int) -> DaemonClient:
    info = DaemonInfo(pid=os.getpid(), host="127.0.0.1", port=port, version="t", started_at="")
    return DaemonClient(info, "token")


def test_chunked_answers_are_read(chunked: int) -> None:
    assert client_for(chunked).request("GET", "/v1/anything") == {"answer": 42, "text": "ä"}


def test_errors_keep_code_message_and_exit_code(live: Live) -> None:
    info = read_info(live.vault)
    assert info is not None and info.port == int(live.url.rsplit(":", 1)[1])
    client = DaemonClient(info, live.daemon.token)
    with pytest.raises(RemoteError) as caught:
        client.request("GET", "/v1/memories/m-00000000")
    assert caught.value.code == "not_found" and caught.value.exit_code == 3
    assert caught.value.message == "No memory with id 'm-00000000'."
    with pytest.raises(RemoteError) as caught:
        DaemonClient(info, "wrong").request("GET", "/v1/poll")
    assert caught.value.code == "unauthorized"
    hits = client.request("GET", "/v1/search", query={"q": "status", "kind": ["note", "memory"]})
    assert hits and {h["kind"] for h in hits} <= {"note", "memory"}


def test_nothing_listening_is_unavailable_and_nothing_is_sent(tmp_path: Path) -> None:
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with pytest.raises(DaemonUnavailableError):
        client_for(port).request("POST", "/v1/memories", body={"text": "x"})


def test_discovery_needs_the_daemon_lock_a_live_process_and_a_token(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / ".memvault").mkdir(parents=True)
    assert DaemonClient.discover(vault) is None
    lock = DaemonLock.claim(vault)  # what a running daemon holds
    info = DaemonInfo(pid=os.getpid(), host="0.0.0.0", port=9, version="t", started_at="")
    lock.announce(info)
    assert read_info(vault) == info and info.connect_host == "127.0.0.1"
    assert DaemonClient.discover(vault) is None, "no token file yet"
    (vault / ".memvault/token").write_text("secret\n")
    found = DaemonClient.discover(vault)
    assert found is not None and found.token == "secret"
    (vault / ".memvault/daemon.json").write_text("{not json")
    assert read_info(vault) is None and DaemonClient.discover(vault) is None
    lock.announce(info)
    lock.release()  # the daemon ended: its announcement goes with it
    assert read_info(vault) is None and DaemonClient.discover(vault) is None

    write_info(vault, info)  # announced, but nobody holds the lock: left by a crash
    assert find_daemon(vault) == Sighting(stale=info)
    assert read_info(vault) is None, "the stale file is removed"
