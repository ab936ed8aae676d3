"""The OpenClaw bridge listening to the real OpenClaw gateway (2026.9.6, Node 24), through a
real daemon.

Where the messages come from: the gateway's own Telegram plugin, pointed (``apiRoot``) at
the fake Bot API on loopback (tests/telegram_fake.py), long-polls it as it polls Telegram;
a test pushes an update there, so the message reaches the gateway exactly as a Telegram
user's does, is recorded in its session, and comes to memvault as the gateway's
``session.message`` event. memvault's replies go out through ``openclaw message send``,
the gateway and the same fake Bot API. OpenClaw's own agent is kept from answering there
by ``session.sendPolicy`` (the README's recipe); it has no model here anyway.

The gateway starts once for the module (15-55 s cold); a test that stops it starts it
again before it ends."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway_support import Live, StartDaemon
from llm_fakes import FakeOpenAI, llm_settings
from openclaw_bridge_fake import CLI_TIMEOUT, FakeOpenClaw
from openclaw_support import (
    Gateway,
    OpenClawTelegram,
    fresh_home,
    logging_command,
    receive_telegram,
    write_command,
)
from waiting import wait_for

pytestmark = pytest.mark.slow  # the real gateway and CLI: seconds a call

ADA = 4242  # a Telegram user, and the id of their direct chat with the bot
CHAT = f"telegram:{ADA}"
TOKEN_ENV = "MEMVAULT_TEST_OPENCLAW_GATEWAY_TOKEN"
ROOM = ("discord", "channel:100")  # a conversation the stand-in's `message read` answers


@dataclass
class Host:
    """One OpenClaw host: its home, the Telegram its gateway receives, the gateway."""

    root: Path
    home: Path
    telegram: OpenClawTelegram
    gateway: Gateway
    polls_before: int = 0  # Telegram's getUpdates calls before this gateway started

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.gateway.port}"

    def running(self) -> bool:
        return self.gateway.process.poll() is None

    def stop(self) -> None:
        self.gateway.stop()

    def start(self) -> None:
        """The gateway (again, on the same port and token), once it answers and has polled
        Telegram. (Not a poll after this call: one running already may be in the middle of
        a long poll of 30 s, and waiting for its next one only waits out the clock.)"""
        if not self.running():
            self.polls_before = self.telegram.requests.count("getUpdates")
            self.gateway = Gateway(
                write_command(self.root / "bin"),
                self.home,
                port=self.gateway.port,
                token=self.gateway.token,
            )
        self.gateway.wait_ready()
        wait_for(
            lambda: self.telegram.requests.count("getUpdates") > self.polls_before,
            "Telegram polled",
        )


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    root = tmp_path_factory.mktemp("openclaw-host")
    command = write_command(root / "bin")
    home = root / "home"
    fresh_home(command, home)
    with OpenClawTelegram() as telegram:
        config = home / ".openclaw" / "openclaw.json"
        gateway = Gateway(command, home, lambda port: receive_telegram(config, telegram, port=port))
        host = Host(root, home, telegram, gateway)
        try:
            host.start()
            yield host
        finally:
            host.stop()


@pytest.fixture
def running(host: Host, monkeypatch: pytest.MonkeyPatch) -> Host:
    """The module's host with its gateway answering, its token where memvault reads it."""
    host.start()
    monkeypatch.setenv(TOKEN_ENV, host.gateway.token)
    return host


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def bridge(host: Host, command: Path, **openclaw: Any) -> dict[str, Any]:
    """The ``[channels.openclaw]`` a user of this host writes: their Telegram chat as owner
    and listener, the gateway's address and the variable holding its token."""
    section: dict[str, Any] = {
        "enabled": True,
        "owner": [CHAT],
        "command": str(command),
        "listeners": [{"channel": "telegram", "target": str(ADA)}],
        "listen": "auto",
        "gateway_url": host.url,
        "gateway_token_env": TOKEN_ENV,
        "poll_seconds": 1,
        "timeout": CLI_TIMEOUT,
        **openclaw,
    }
    return {"channels": {"openclaw": section}}


def inbox(live: Live) -> list[str]:
    rows = live.daemon.state.query("SELECT message_id FROM channel_inbox ORDER BY id")
    return [str(r["message_id"]) for r in rows]


def receiving(live: Live) -> str:
    return live.daemon.hub.adapters["openclaw"].receiving() or ""


def listening(live: Live) -> str:
    return wait_for(
        lambda: receiving(live).startswith("the gateway's events") and receiving(live),
        "the bridge to subscribe to the gateway's events",
    )


def doctor_says(live: Live) -> str:
    checks = {c.name: c for c in live.daemon.doctor().checks}
    return str(checks["channel_openclaw"].message)


def test_a_telegram_message_arrives_through_the_gateways_events_and_is_answered(
    start_daemon: StartDaemon, running: Host, llm: FakeOpenAI, tmp_path: Path
) -> None:
    """No ``openclaw message read`` is started, for Telegram, which it cannot even read."""
    llm.reply("The **cert** is renewed on Friday.")
    llm.reply("You are welcome.")
    command, calls = logging_command(tmp_path / "openclaw", running.home)
    live = start_daemon(settings={**bridge(running, command), "llm": llm_settings(llm)})
    how = listening(live)
    assert how == f"the gateway's events at {running.url} (OpenClaw 2026.9.6)"
    assert doctor_says(live).endswith(f"receiving by {how}")
    (status,) = [s for s in live.daemon.hub.status() if s["channel"] == "openclaw"]
    assert status["receiving"] == how

    before = inbox(live)  # what the gateway recorded lately was caught up with by now
    sent_before = len(running.telegram.sent)
    pushed = time.monotonic()
    running.telegram.push_message(
        ADA, "When is the cert renewed?", sender_id=ADA, first_name="Ada", username="ada"
    )
    (stored,) = wait_for(lambda: inbox(live)[len(before) :], "the message in the channel store")
    first = time.monotonic() - pushed
    asked = stored.removeprefix(f"{CHAT}:")
    assert stored == f"{CHAT}:{asked}" and asked.isdigit()  # Telegram's own message id

    (reply,) = running.telegram.wait_sent(sent_before + 1)[sent_before:]
    assert (reply["chat_id"], reply["reply_to"], reply["error"]) == (ADA, int(asked), None)
    assert "renewed on Friday" in str(reply["text"])  # OpenClaw renders the Markdown
    users = [m for m in llm.requests[0]["messages"] if m["role"] == "user"]
    assert [m["content"] for m in users] == ["When is the cert renewed?"]

    pushed = time.monotonic()  # the session exists now: what a conversation sees
    running.telegram.push_message(ADA, "Thanks!", sender_id=ADA, first_name="Ada")
    wait_for(lambda: len(inbox(live)) == len(before) + 2, "the second message in the store")
    second = time.monotonic() - pushed
    print(f"\nfrom Telegram to memvault's channel store: {first:.2f} s, then {second:.2f} s")
    running.telegram.wait_sent(sent_before + 2)
    called = calls.read_text().splitlines()
    assert [c for c in called if c.startswith("message read")] == []
    assert [c.split(" ")[:2] for c in called if c.startswith("message")] == [
        ["message", "send"]
    ] * 2


def test_what_the_gateway_recorded_while_memvault_was_away_is_handed_over_at_restart(
    start_daemon: StartDaemon, running: Host, tmp_path: Path
) -> None:
    command, calls = logging_command(tmp_path / "openclaw", running.home)
    live = start_daemon(settings=bridge(running, command, respond=False))
    listening(live)
    before = inbox(live)
    live.stop()

    running.telegram.push_message(ADA, "written while memvault was away", sender_id=ADA)
    # The gateway took it from Telegram (its offset moved past it) while memvault was down.
    wait_for(lambda: not running.telegram.pending_updates(), "the gateway to take the update")
    live = start_daemon(live.vault, settings=bridge(running, command, respond=False))
    (stored,) = wait_for(lambda: inbox(live)[len(before) :], "the missed message handed over")
    assert stored.startswith(f"{CHAT}:")
    (row,) = live.daemon.state.query(
        "SELECT payload FROM channel_inbox WHERE message_id = ?", (stored,)
    )
    assert json.loads(row["payload"])["text"] == "written while memvault was away"
    assert not [c for c in calls.read_text().splitlines() if c.startswith("message read")]


def test_without_the_gateways_events_the_bridge_polls_and_comes_back_when_it_answers(
    start_daemon: StartDaemon, running: Host, tmp_path: Path
) -> None:
    """The stand-in ``openclaw`` answers ``message read`` from a recorded Discord room (a
    platform OpenClaw reads); Telegram comes through the real gateway's events."""
    fake = FakeOpenClaw(tmp_path / "openclaw", running.home)
    listeners = [
        {"channel": ROOM[0], "target": ROOM[1]},
        {"channel": "telegram", "target": str(ADA)},
    ]
    settings = bridge(
        running,
        fake.command,
        listeners=listeners,
        owner=[CHAT, "discord:user:42"],
        respond=False,
        gateway_retry_seconds=1,
    )
    live = start_daemon(settings=settings)
    listening(live)

    running.stop()  # the gateway goes away: polling takes over
    # Polling starts as the gateway says it shuts down; its next try finds no gateway.
    unreachable = f"No OpenClaw gateway answers at {running.url}"
    how = wait_for(
        lambda: (
            receiving(live).startswith("polling")
            and unreachable in receiving(live)
            and receiving(live)
        ),
        "polling, the gateway unreachable",
    )
    assert how.startswith("polling `openclaw message read` every 1 s (")
    assert unreachable in how
    assert "the gateway is tried again every 1 s" in how
    assert doctor_says(live).endswith(f"receiving by {how}")
    polled = fake.say(*ROOM, "read by polling", author="42")
    wait_for(lambda: f"discord:channel:100:{polled}" in inbox(live), "the polled message")

    running.start()  # back: the events take over again, and polling stops
    listening(live)
    reads = len(fake.reads())
    running.telegram.push_message(ADA, "heard through the gateway again", sender_id=ADA)
    wait_for(lambda: any(m.startswith(f"{CHAT}:") for m in inbox(live)), "the Telegram message")
    assert len(fake.reads()) == reads


def test_a_refused_token_stops_a_gateway_only_channel_and_doctor_says_why(
    start_daemon: StartDaemon, running: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "not-the-gateways-token")
    command, _ = logging_command(tmp_path / "openclaw", running.home)
    live = start_daemon(settings=bridge(running, command, listen="gateway"))
    status = live.daemon.hub.statuses["openclaw"]
    wait_for(lambda: status.state == "failed", "the channel to stop")
    check = {c.name: c for c in live.daemon.doctor().checks}["channel_openclaw"]
    assert check.status == "error"
    assert f"OpenClaw's gateway at {running.url} refused memvault: " in check.message
    assert "channels.openclaw.gateway_token_env" in check.message
    assert status.restarts == 0  # not retried: it cannot get better on its own
