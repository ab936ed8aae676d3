"""The OpenClaw bridge through a real daemon: messages read from a listener (a stand-in
``openclaw`` answering ``message read`` with recorded Discord messages), the router and
the agent, the reply through ``message send`` to the same conversation; strangers,
retries, a restart on the same vault, and the real OpenClaw refusing a gateway call
without credentials."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest

from gateway_support import Live, StartDaemon
from llm_fakes import FakeOpenAI, llm_settings
from memvault.channels.router import HELP
from openclaw_bridge_fake import CLI_TIMEOUT, UNREACHABLE, FakeOpenClaw, real_home
from support import LoopbackHandler, LoopbackServer, MovableClock
from waiting import WAIT, wait_for

pytestmark = pytest.mark.slow  # the real OpenClaw CLI: seconds a call

ROOM = ("discord", "channel:100")
CHAT = "discord:channel:100"
OWNER = "discord:user:42"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return real_home(tmp_path_factory.mktemp("openclaw"))


@pytest.fixture
def fake(tmp_path: Path, home: Path) -> FakeOpenClaw:
    return FakeOpenClaw(tmp_path / "openclaw", home)


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def channels(fake: FakeOpenClaw, llm: FakeOpenAI | None = None, **openclaw: Any) -> dict[str, Any]:
    section: dict[str, Any] = {
        "enabled": True,
        "owner": [OWNER],
        "command": str(fake.command),
        "listeners": [{"channel": ROOM[0], "target": ROOM[1]}],
        "listen": "poll",
        "poll_seconds": 1,
        "timeout": CLI_TIMEOUT,
        **openclaw,
    }
    out: dict[str, Any] = {"channels": {"openclaw": section}}
    if llm is not None:
        out["llm"] = llm_settings(llm)
    return out


def sent_to(fake: FakeOpenClaw, target: str) -> list[str]:
    return [str(s["message"]) for s in fake.sent if s["target"] == target]


def inbox(live: Live) -> list[tuple[str, str]]:
    rows = live.daemon.state.query("SELECT message_id, status FROM channel_inbox ORDER BY id")
    return [(str(r["message_id"]), str(r["status"])) for r in rows]


def test_an_owner_message_gets_one_reply_in_the_same_conversation(
    start_daemon: StartDaemon, fake: FakeOpenClaw, llm: FakeOpenAI
) -> None:
    llm.reply("The **cert** is renewed on Friday.")
    live = start_daemon(settings=channels(fake, llm))
    asked = fake.say(*ROOM, "When is the cert renewed?", author="42", name="Ada")

    wait_for(lambda: fake.sent, "the reply")
    (reply,) = fake.sent
    assert (reply["channel"], reply["target"], reply["reply_to"]) == (
        "discord",
        "channel:100",
        asked,
    )
    assert reply["message"] == "The **cert** is renewed on Friday."  # OpenClaw renders it
    # Two more polls read the bot's own reply back: it is not taken for a message.
    reads = len(fake.reads())
    wait_for(lambda: len(fake.reads()) >= reads + 2, "two more polls")
    assert len(fake.sent) == 1
    assert wait_for(lambda: inbox(live) == [(f"{CHAT}:{asked}", "done")], "one inbox row")
    users = [m for m in llm.requests[0]["messages"] if m["role"] == "user"]
    assert [m["content"] for m in users] == ["When is the cert renewed?"]
    session = live.daemon.sessions.get(f"openclaw:{CHAT}")
    said = live.daemon.sessions.messages(session.id)
    assert [(m.role, m.text) for m in said] == [
        ("user", "When is the cert renewed?"),
        ("assistant", "The **cert** is renewed on Friday."),
    ]
    status = live.daemon.hub.statuses["openclaw"]
    assert status.state == "running" and status.identity == "OpenClaw 2026.9.6"


def test_a_stranger_is_refused_quietly_and_under_pairing_gets_a_code(
    start_daemon: StartDaemon, fake: FakeOpenClaw, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(fake, llm))
    fake.say(*ROOM, "hi, who is this?", author="66", name="Eve")
    notice = wait_for(lambda: sent_to(fake, "user:42"), "the owner's notice")
    assert "Eve" in notice[0] and "/approve discord:user:66" in notice[0]
    wait_for(lambda: [s for _, s in inbox(live)] == ["held"], "held")
    time.sleep(1.5)
    assert sent_to(fake, "channel:100") == [] and llm.requests == []
    live.stop()

    fake.say(*ROOM, "hello again", author="77", name="Mallory")
    live = start_daemon(live.vault, settings=channels(fake, llm, policy="pairing"))
    code = wait_for(lambda: sent_to(fake, "channel:100"), "the pairing code")
    assert "approve the code" in code[0]
    sender = live.daemon.hub.store.sender("openclaw", "discord:user:77")
    assert sender is not None and sender.code and sender.code[:4] in code[0]
    assert llm.requests == []


def test_a_failed_read_and_a_failed_send_are_retried(
    start_daemon: StartDaemon, fake: FakeOpenClaw, clock: MovableClock
) -> None:
    fake.fail("message read", UNREACHABLE)
    fake.fail("message read", "timeout")
    fake.fail("message send", UNREACHABLE)
    asked = fake.say(*ROOM, "/help", author="42", name="Ada")
    # Short, for the read that never answers; yet every other call must fit in it: the
    # stand-in's (a Python start) and the real `openclaw --version` (a fraction of a second).
    live = start_daemon(settings=channels(fake, timeout=10))
    status = live.daemon.hub.statuses["openclaw"]
    wait_for(lambda: status.restarts >= 2, "two restarts")
    hub = live.daemon.hub
    row = wait_for(lambda: [r for r in hub.store.outbox() if r.last_error], "the failed send")[0]
    assert "Gateway not reachable" in str(row.last_error) and row.status == "pending"
    deadline = time.monotonic() + WAIT
    while not fake.sent:  # time passes for the outbox: the retry goes out
        assert time.monotonic() < deadline, "the reply was never retried"
        clock.set(clock.now() + timedelta(minutes=5))
        time.sleep(0.3)
    assert [(s["message"], s["reply_to"]) for s in fake.sent] == [(HELP, asked)]
    assert len([c for c in fake.calls if c[:2] == ["message", "send"]]) == 2
    assert inbox(live) == [(f"{CHAT}:{asked}", "done")]
    states = [
        e.payload.get("state") for e in live.daemon.bus.since(0) if e.type == "channel_status"
    ]
    assert "backoff" in states and status.state == "running"


def test_a_restart_neither_replays_nor_drops_a_message(
    start_daemon: StartDaemon, fake: FakeOpenClaw
) -> None:
    live = start_daemon(settings=channels(fake))
    first = fake.say(*ROOM, "/tasks", author="42")
    wait_for(lambda: fake.sent, "the first answer")
    live.stop()

    second = fake.say(*ROOM, "/help", author="42")  # while memvault is down
    calls = len(fake.calls)
    live = start_daemon(live.vault, settings=channels(fake))
    wait_for(lambda: len(fake.sent) == 2, "the second answer")
    time.sleep(1.5)  # more polls: nothing more
    assert [s["reply_to"] for s in fake.sent] == [first, second]
    assert [m for m, _ in inbox(live)] == [f"{CHAT}:{first}", f"{CHAT}:{second}"]
    resumed = next(c for c in fake.calls[calls:] if c[:2] == ["message", "read"])
    # It read on from where the first daemon stopped: the first message, or its reply.
    after = next(word for word in resumed if word.startswith("--after="))
    assert after.removeprefix("--after=") in (first, fake.sent[0]["id"])


def test_a_gateway_without_credentials_stops_the_channel_and_doctor_says_why(
    start_daemon: StartDaemon, fake: FakeOpenClaw
) -> None:
    """The real OpenClaw reads a Telegram chat (a fresh home: no gateway credentials)."""
    fake.fail("message read", "real")
    listeners = [{"channel": "telegram", "target": "123456789"}]
    live = start_daemon(settings=channels(fake, listeners=listeners))
    status = live.daemon.hub.statuses["openclaw"]
    wait_for(lambda: status.state == "failed", "the failure")
    checks = {c.name: c for c in live.daemon.doctor().checks}
    check = checks["channel_openclaw"]
    assert check.status == "error"
    assert "requires credentials" in check.message and "gateway.auth" in check.message
    assert status.restarts == 0  # not retried: it cannot get better on its own


class _Cdn(LoopbackHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = b"%PDF-1.4 the plan"
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/pdf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_file_is_saved_into_the_vault(start_daemon: StartDaemon, fake: FakeOpenClaw) -> None:
    cdn = LoopbackServer(_Cdn, "fake-cdn")
    try:
        live = start_daemon(settings=channels(fake))
        attachment = {
            "id": "9",
            "filename": "plan.pdf",
            "content_type": "application/pdf",
            "size": 17,
            "url": f"{cdn.address}/attachments/1/9/plan.pdf",
        }
        fake.say(*ROOM, "the plan", author="42", attachments=[attachment])
        wait_for(lambda: fake.sent, "the answer")
    finally:
        cdn.close()
    saved = [p for p in (live.vault / "Attachments" / "openclaw").rglob("*") if p.is_file()]
    assert [p.read_bytes() for p in saved] == [b"%PDF-1.4 the plan"]
    assert saved[0].name.endswith("-1-plan.pdf") and ":" not in saved[0].name
    journal = "\n".join(live.daemon.runtime.journal.sections()["Commands Received"])
    assert "the plan" in journal and "![[Attachments/openclaw/" in journal


def test_a_platform_call_outlasting_the_hub_is_one_sentence(
    start_daemon: StartDaemon, fake: FakeOpenClaw, home: Path
) -> None:
    """A conversation's context asks OpenClaw for its channels (two calls at once); one
    that does not answer within the hub's bound is a 503 with a sentence (not a 500),
    and both calls end, with the worker the real CLI starts in a session of its own."""
    live = start_daemon(settings=channels(fake, listeners=[]))
    live.daemon.hub.call_timeout = 2.0  # the bridge itself would wait CLI_TIMEOUT
    fake.fail("channels status", "timeout")
    with live.client() as api:
        answer = api.get("/v1/context", params={"adapter": "openclaw", "conversation": CHAT})
    assert answer.status_code == HTTPStatus.SERVICE_UNAVAILABLE, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["message"]) == (
        "channel_failed",
        "openclaw did not answer within 2 s; try again.",
    )
    wait_for(lambda: not running_in(home), "every process of the abandoned calls to end")


def running_in(home: Path) -> list[int]:
    """The processes whose HOME is ``home`` (the stand-in and the real CLI it runs)."""
    marker = f"HOME={home}\0".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:  # ended meanwhile, or not ours to read
            continue
    return found
