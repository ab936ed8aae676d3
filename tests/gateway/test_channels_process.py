"""The whole path through ``memvault serve`` as a process: Telegram in, the agent, the reply
out; SIGKILL between receiving and replying loses nothing and answers once."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import tomli_w

from channel_support import OWNER, delivered, telegram_config, wait_for
from daemon_process import DaemonProcess, daemon_env
from llm_fakes import FAKE_KEY, FAKE_KEY_ENV, FakeOpenAI
from memvault.config import load_settings
from memvault.memory.state import StateDB
from memvault.runtime import Runtime
from telegram_fake import FakeTelegram

pytestmark = pytest.mark.slow


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def vault(tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI) -> Path:
    root = tmp_path / "vault"
    Runtime.open(load_settings(root).settings, create=True).close()
    config = {
        "timezone": "Europe/Berlin",
        "llm": {
            "provider": "openai",
            "model": "fake-model",
            "base_url": llm.url,
            "api_key_env": FAKE_KEY_ENV,
            "max_retries": 0,
        },
        "channels": {"telegram": telegram_config(tg)},
    }
    (root / ".memvault/config.toml").write_text(tomli_w.dumps(config))
    return root


@pytest.fixture
def serve(vault: Path, tg: FakeTelegram) -> Iterator[Callable[[], DaemonProcess]]:
    started: list[DaemonProcess] = []
    env = daemon_env(TELEGRAM_BOT_TOKEN=tg.token, **{FAKE_KEY_ENV: FAKE_KEY})

    def start() -> DaemonProcess:
        started.append(DaemonProcess(vault, env=env))
        return started[-1]

    yield start
    for daemon in started:
        if daemon.process.poll() is None:
            daemon.kill()


def owner_messages(vault: Path) -> list[tuple[str, str]]:
    state = StateDB(vault / ".memvault")
    try:
        rows = state.query("SELECT role, text FROM messages ORDER BY id")
        return [(str(r["role"]), str(r["text"])) for r in rows]
    finally:
        state.close()


def test_a_message_round_trip_through_memvault_serve(
    serve: Callable[[], DaemonProcess], tg: FakeTelegram, llm: FakeOpenAI, vault: Path
) -> None:
    llm.reply("Hello from the agent.")
    daemon = serve()
    tg.push_message(OWNER, "hello?")
    assert wait_for(lambda: delivered(tg, OWNER), "the reply") == ["Hello from the agent."]
    with daemon.client() as client:
        status = client.get("/v1/doctor").json()
    checks = {c["name"]: c for c in status["result"]["checks"]}
    assert checks["channel_telegram"]["status"] == "ok", checks["channel_telegram"]
    code, err = daemon.stop()
    assert code == 0, err


def test_sigkill_between_receiving_and_replying_loses_nothing_and_answers_once(
    serve: Callable[[], DaemonProcess], tg: FakeTelegram, llm: FakeOpenAI, vault: Path
) -> None:
    llm.reply("too late: the daemon was killed", delay=30)
    first = serve()
    update = tg.push_message(OWNER, "What is on my list today?")
    wait_for(lambda: llm.requests, "the agent's model call")  # stored, captured, running
    first.kill()
    assert delivered(tg, OWNER) == []

    llm.reply("Two things: the cert and the dentist.")
    second = serve()
    assert wait_for(lambda: delivered(tg, OWNER), "the reply after restart") == [
        "Two things: the cert and the dentist."
    ]
    tg.wait_confirmed(update + 1)
    time.sleep(2.5)  # several polls and dispatcher passes later: still one answer
    assert delivered(tg, OWNER) == ["Two things: the cert and the dentist."]
    second.stop()
    said = owner_messages(vault)
    assert said.count(("user", "What is on my list today?")) == 1
    assert ("assistant", "Two things: the cert and the dentist.") in said


def test_sigkill_with_a_reply_still_in_the_outbox_sends_it_once_after_restart(
    serve: Callable[[], DaemonProcess], tg: FakeTelegram, llm: FakeOpenAI, vault: Path
) -> None:
    llm.reply("Queued answer.")
    tg.fail("sendMessage", 502)
    first = serve()
    tg.push_message(OWNER, "ping")
    wait_for(lambda: [s for s in tg.sent if s["error"]], "a failed send attempt")
    first.kill()  # the reply is in the outbox, waiting for its retry
    second = serve()
    assert wait_for(lambda: delivered(tg, OWNER), "the reply from the outbox") == ["Queued answer."]
    time.sleep(2.5)
    assert delivered(tg, OWNER) == ["Queued answer."]
    assert len(llm.requests) == 1  # the agent did not run again: its answer was kept
    second.stop()
    assert owner_messages(vault) == [("user", "ping"), ("assistant", "Queued answer.")]
