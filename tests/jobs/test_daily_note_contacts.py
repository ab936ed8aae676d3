"""The daily note names the day's contact interactions: who wrote, on which channel, how
many messages, and the agent's replies in their chats (issue 30, item 8).

Once on sessions logged as the channel router logs them, run by the real job engine, and
once end to end: a real daemon, the fake Telegram Bot API and a fake model.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, time
from pathlib import Path
from typing import Any

import pytest

from channel_support import OWNER, delivered, telegram_config
from gateway_support import StartDaemon, ok
from job_support import run_job
from llm_fakes import FakeOpenAI, llm_settings
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import TZ, MovableClock
from telegram_fake import FakeTelegram
from waiting import wait_for

NOTE = "Journal/2026-11-22.md"
ANA = "7"
BOB = "8"
FRIEND = 777


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=TZ)


def inbound(runtime: Runtime, key: str, channel: str, sender_id: str, name: str | None) -> None:
    """A message as the router logs it: the sender's name, their channel id in metadata."""
    runtime.sessions.log(
        key,
        f"a message from {name or sender_id}",
        role="user",
        channel=channel,
        sender=name or sender_id,
        metadata={"sender_id": sender_id},
    )


def reply(runtime: Runtime, key: str, channel: str, *, tool_calls: bool = False) -> None:
    metadata: dict[str, Any] = {"model": "m"}
    if tool_calls:
        metadata["tool_calls"] = [{"id": "c1", "name": "recall", "arguments": {}}]
    runtime.sessions.log(key, "an answer", role="assistant", channel=channel, metadata=metadata)


def contact_lines(text: str) -> list[str]:
    """The lines under the summary's **Contacts** label."""
    block = text.split("**Contacts**\n", 1)[1].split("\n\n", 1)[0]
    return [line for line in block.splitlines() if line.startswith("- ")]


def test_the_note_lists_who_wrote_on_which_channel(
    telegram_runtime: Runtime, clock: MovableClock
) -> None:
    runtime = telegram_runtime
    runtime.contacts.create("Ana Pereira", identities={"telegram": ANA}, email="ana@example.net")
    clock.set(at("2026-11-21T20:00"))
    inbound(runtime, "telegram:8", "telegram", BOB, "Bob")  # the day before: not listed
    clock.set(at("2026-11-22T08:00"))
    for _ in range(3):
        inbound(runtime, f"telegram:{ANA}", "telegram", ANA, "Ana")
    reply(runtime, f"telegram:{ANA}", "telegram", tool_calls=True)  # not a reply to her
    reply(runtime, f"telegram:{ANA}", "telegram")
    reply(runtime, f"telegram:{ANA}", "telegram")
    # A group: both write; the agent's reply there is nobody's alone.
    inbound(runtime, "telegram:-100", "telegram", ANA, "Ana")
    inbound(runtime, "telegram:-100", "telegram", BOB, "Bob")
    inbound(runtime, "telegram:-100", "telegram", BOB, "Bob")
    reply(runtime, "telegram:-100", "telegram")
    inbound(runtime, "email:ana@example.net", "email", "ana@example.net", "Ana Pereira")
    # The owner, and the terminal (no sender), are not contact interactions.
    inbound(runtime, f"telegram:{OWNER}", "telegram", str(OWNER), "Me")
    runtime.sessions.log("cli", "what is on today?", role="user", channel="cli")

    clock.set(at("2026-11-22T21:00"))
    run_job(runtime, clock, "daily_note")
    text = runtime.vault.read_text(NOTE)
    assert contact_lines(text) == [
        "- [[Ana Pereira]] on telegram: 4 messages, 2 replies",
        "- Bob on telegram (id 8, not a contact): 2 messages",
        "- [[Ana Pereira]] on email: 1 message",
    ]
    assert "2 people wrote" in text


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def test_a_contacts_telegram_chat_reaches_the_daily_note(
    tmp_path: Path,
    start_daemon: StartDaemon,
    tg: FakeTelegram,
    llm: FakeOpenAI,
    clock: MovableClock,
) -> None:
    # The fake Bot API dates messages now: the daemon's day is today (after 03:00, so the
    # daily note is today's and not the catch-up of the day before).
    now = datetime.now(TZ)
    clock.set(now if now.time() >= time(3) else now.replace(hour=3, minute=30))
    folder = tmp_path / "vault"
    init_vault(Vault(folder))
    (folder / "Contacts" / "Ada Lovelace.md").write_text(
        f"---\ntelegram: '{FRIEND}'\n---\n# Ada Lovelace\n"
    )
    settings = {
        "channels": {"telegram": telegram_config(tg, policy="allowlist", allow=[str(FRIEND)])},
        "llm": llm_settings(llm, max_retries=0),
        "memory": {"consolidation": "rule"},
        "jobs": {"daily_note": {"use_model": False}},
    }
    live = start_daemon(folder, settings=settings)
    for number, text in enumerate(("Are we still on for Friday?", "Bring the maps.")):
        llm.reply(f"Noted ({number}).")
        tg.push_message(FRIEND, text, first_name="Ada")
        wait_for(lambda n=number: len(delivered(tg, FRIEND)) == n + 1, "the answer to Ada")
    llm.reply("Hello.")
    tg.push_message(OWNER, "Hi")
    wait_for(lambda: delivered(tg, OWNER), "the answer to the owner")

    with live.client() as api:
        started = ok(api.post("/v1/jobs/daily_note/run"), status=202)

        def finished() -> dict[str, Any] | None:
            run: dict[str, Any] = ok(api.get(f"/v1/jobs/runs/{started['run_id']}"))
            return run if run["status"] != "running" else None

        run = wait_for(finished, "the daily note")
    assert run["status"] == "ok", run["error"]
    runtime = live.daemon.runtime
    text = runtime.vault.read_text(runtime.journal.path_for(clock.now().date()))
    assert contact_lines(text) == ["- [[Ada Lovelace]] on telegram: 2 messages, 2 replies"]
    assert "1 person wrote" in text
