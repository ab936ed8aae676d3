"""``memvault channels``: the real CLI, the real hub and Telegram adapter, a fake Bot API
on loopback; with no daemon (a send is delivered from the CLI's own process) and with a
real daemon on loopback (status and send go through it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w

import gateway_support
from channel_support import OWNER, delivered, telegram_config
from cli_support import EXIT_CONFLICT, EXIT_INVALID, EXIT_NOT_FOUND, fail, invoke, ok, ok_json
from gateway_support import Live
from memvault.channels.hub import Hub
from memvault.channels.store import Sender
from memvault.config import load_settings
from memvault.errors import EXIT_FAILED, EXIT_NOT_APPROVED
from memvault.runtime import Runtime
from support import HashEmbedder
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound

STRANGER = 555
EXIT_REFUSED = EXIT_NOT_APPROVED  # SendRefusedError: a recipient nobody let in


def configure(root: Path, tg: FakeTelegram, **telegram: Any) -> None:
    config = {
        "timezone": "Europe/Berlin",
        "channels": {"telegram": telegram_config(tg, **telegram)},
    }
    (root / ".memvault/config.toml").write_text(tomli_w.dumps(config))


@pytest.fixture
def vault(tmp_path: Path, tg: FakeTelegram) -> Path:
    root = tmp_path / "vault"
    Runtime.open(load_settings(root).settings, create=True).close()
    configure(root, tg)
    return root


@pytest.fixture
def serve(vault: Path) -> Iterator[Callable[[], Live]]:
    """Start a real daemon for the vault on loopback (found by the CLI through daemon.json)."""
    started: list[Live] = []

    def start() -> Live:
        runtime = Runtime.open(load_settings(vault).settings, embedder=HashEmbedder())
        live = gateway_support.serve(runtime)
        started.append(live)
        hub = live.daemon.hub
        wait_for(lambda: hub.statuses["telegram"].state == "running", "the channel to run")
        return live

    yield start
    for live in started:
        if live.thread.is_alive():
            live.stop()


def stranger_writes(
    vault: Path,
    tg: FakeTelegram,
    text: str = "Hi, is this Ada's bot?",
    judged: Callable[[Sender], bool] = lambda sender: True,
) -> None:
    """Bob writes while a hub runs (as the daemon's does), until it has judged him: he is
    recorded and ``judged`` holds of his record (his pairing code is given a moment after
    he is recorded)."""
    runtime = Runtime.open(load_settings(vault).settings)
    hub = Hub(runtime)
    hub.start()

    def seen() -> bool:
        sender = hub.store.sender("telegram", str(STRANGER))
        return sender is not None and judged(sender)

    try:
        tg.push_message(STRANGER, text, first_name="Bob", username="bob")
        wait_for(seen, "Bob to be seen and judged")
    finally:
        hub.stop()
        runtime.close()


def test_list_shows_the_channels_without_a_daemon(vault: Path) -> None:
    rows = ok_json(vault, "channels", "list")
    names = [row["channel"] for row in rows]
    assert names == [
        "telegram",
        "email",
        "slack",
        "discord",
        "signal",
        "line",
        "whatsapp",
        "openclaw",
    ]
    assert [row["channel"] for row in rows if row["enabled"]] == ["telegram"]
    assert rows[0] == {
        "channel": "telegram",
        "enabled": True,
        "policy": "quiet",
        "owner_set": True,
        "allowed": 0,
        "respond": True,
    }
    shown = ok(vault, "channels", "list").stdout
    assert "telegram" in shown and "quiet" in shown


def test_send_without_a_daemon_delivers_from_this_process(vault: Path, tg: FakeTelegram) -> None:
    out = ok(vault, "channels", "send", "telegram", "owner", "Renew the **cert**").stdout
    assert out == f"Sent to owner on telegram (chat {OWNER}).\n"
    assert delivered(tg, OWNER) == ["Renew the <b>cert</b>"]
    result = ok_json(vault, "channels", "send", "Telegram", str(OWNER), "Again")
    assert (result["status"], result["chat_id"], result["parts"]) == ("sent", str(OWNER), 1)
    assert delivered(tg, OWNER)[-1] == "Again"


def test_a_stranger_is_refused_until_approved_and_again_once_blocked(
    vault: Path, tg: FakeTelegram
) -> None:
    error = fail(vault, "channels", "send", "telegram", str(STRANGER), "Hi", code=EXIT_REFUSED)
    assert "is not allowed on telegram" in error and "nothing was sent" in error
    assert "Nobody is waiting" in ok(vault, "channels", "pending").stdout

    stranger_writes(vault, tg)
    waiting = ok_json(vault, "channels", "pending", "telegram")
    assert [(s["sender_id"], s["name"], s["status"]) for s in waiting] == [
        (str(STRANGER), "Bob", "pending")
    ]
    assert "Bob" in ok(vault, "channels", "pending").stdout
    fail(vault, "channels", "send", "telegram", str(STRANGER), "Hi", code=EXIT_REFUSED)
    assert delivered(tg, STRANGER) == []

    out = ok(vault, "channels", "approve", "telegram", str(STRANGER)).stdout
    assert out.startswith(f"Approved Bob @bob (id {STRANGER}) on telegram;")
    assert "Contacts/Bob.md" in out
    ok(vault, "channels", "send", "telegram", "Bob", "Hi Bob")
    assert delivered(tg, STRANGER) == ["Hi Bob"]

    blocked = ok_json(vault, "channels", "block", "telegram", str(STRANGER))
    assert blocked["status"] == "blocked" and blocked["decided_by"] == "cli"
    fail(vault, "channels", "send", "telegram", str(STRANGER), "Hi", code=EXIT_REFUSED)
    assert delivered(tg, STRANGER) == ["Hi Bob"]


def test_a_pairing_code_approves_its_sender(vault: Path, tg: FakeTelegram) -> None:
    configure(vault, tg, policy="pairing")
    stranger_writes(vault, tg, judged=lambda sender: sender.code is not None)
    (waiting,) = ok_json(vault, "channels", "pending")
    code = waiting["code"]
    assert code and len(code) == 8
    shown = f"{code[:4]}-{code[4:]}".lower()
    assert f"{code[:4]}-{code[4:]}" in ok(vault, "channels", "pending").stdout
    approved = ok_json(vault, "channels", "approve", "telegram", shown)
    assert approved["sender_id"] == str(STRANGER) and approved["code"] is None
    fail(vault, "channels", "approve", "telegram", "ZZZZ-ZZZZ", code=EXIT_NOT_FOUND)


def test_the_owner_cannot_be_blocked_and_unknown_names_are_errors(vault: Path) -> None:
    fail(vault, "channels", "block", "telegram", str(OWNER), code=EXIT_CONFLICT)
    fail(vault, "channels", "approve", "telegram", "999", code=EXIT_NOT_FOUND)
    error = fail(vault, "channels", "pending", "fax", code=EXIT_NOT_FOUND)
    assert error == (
        "Error: There is no channel named 'fax'; "
        "channels: telegram, email, slack, discord, signal, line, whatsapp, openclaw."
    )
    fail(vault, "channels", "send", "telegram", "owner", "", code=EXIT_INVALID)
    fail(vault, "channels", "outbox", "--status", "lost", code=EXIT_INVALID)


def test_the_outbox_lists_a_failed_message_and_retry_queues_it_again(
    vault: Path, tg: FakeTelegram
) -> None:
    tg.fail("sendMessage", 400)  # "Bad Request: chat not found"
    result = invoke(vault, "channels", "send", "telegram", "owner", "Is anyone there?")
    assert result.exit_code == EXIT_FAILED and result.stdout == ""
    error, hint = result.stderr.strip().splitlines()
    assert error == f"Error: Telegram refused the message to chat {OWNER}: Chat not found."
    assert hint == "It is in the outbox; `memvault channels outbox --retry 1` sends it again."
    assert delivered(tg, OWNER) == []

    (row,) = ok_json(vault, "channels", "outbox", "--status", "failed")
    assert (row["id"], row["status"], row["text"]) == (1, "failed", "Is anyone there?")
    assert "chat not found" in row["last_error"].lower()
    listing = ok(vault, "channels", "outbox").stdout
    assert "failed" in listing and "--retry ID" in listing
    assert ok_json(vault, "channels", "outbox", "--status", "pending") == []

    # Without a daemon, the retry sends it from this process at once.
    out = ok(vault, "channels", "outbox", "--retry", "1").stdout
    assert out == f"Sent message 1 to telegram chat {OWNER}.\n"
    (again,) = ok_json(vault, "channels", "outbox", "--status", "sent")
    assert again["id"] == 1 and again["attempts"] == 1
    fail(vault, "channels", "outbox", "--retry", "1", code=EXIT_CONFLICT)
    fail(vault, "channels", "outbox", "--retry", "99", code=EXIT_NOT_FOUND)
    ok(vault, "channels", "send", "telegram", "owner", "Hello?")
    assert delivered(tg, OWNER) == ["Is anyone there?", "Hello?"]


def test_status_says_who_runs_the_channels(
    vault: Path, tg: FakeTelegram, serve: Callable[[], Live]
) -> None:
    here, *others = ok_json(vault, "channels", "status")
    assert here["channel"] == "telegram" and len(others) == 7
    assert here["state"] == "not running (the daemon runs channels)"
    text = ok(vault, "channels", "status").stdout
    assert "No daemon serves this vault: the daemon runs the channels (`memvault serve`)." in text

    serve()
    live = ok_json(vault, "channels", "status")[0]
    assert live["state"] == "running" and live["identity"] == "@memvault_test_bot"
    assert "No daemon serves" not in ok(vault, "channels", "status").stdout
    # --direct asks this process, which runs no channel.
    direct = ok_json(vault, "channels", "status", "--direct")[0]
    assert direct["state"] == "not running (the daemon runs channels)"


def test_send_goes_through_a_running_daemon(
    vault: Path, tg: FakeTelegram, serve: Callable[[], Live]
) -> None:
    live = serve()
    out = ok(vault, "channels", "send", "telegram", "owner", "Via the daemon").stdout
    assert out == f"Sent to owner on telegram (chat {OWNER}).\n"
    assert delivered(tg, OWNER) == ["Via the daemon"]
    sent = [e.payload for e in live.daemon.bus.since(0) if e.type == "outbound_message"]
    assert [p["text"] for p in sent] == ["Via the daemon"], "the daemon's hub sent it"
    # A refused recipient exits the same through the daemon as without one.
    through = fail(vault, "channels", "send", "telegram", str(STRANGER), "Hi", code=EXIT_REFUSED)
    here = fail(
        vault, "--direct", "channels", "send", "telegram", str(STRANGER), "Hi", code=EXIT_REFUSED
    )
    assert through == here
    assert delivered(tg, STRANGER) == []
