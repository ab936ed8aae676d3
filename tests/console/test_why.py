"""The "Why did it say that" page and the transcript's recalled memories, in a real browser
against a real ``memvault serve`` whose model is the fake OpenAI server (llm_fakes) and
whose Telegram channel is the fake Bot API.

A run asked over the API recalls a memory stored before it; its page shows the context
section by section, the memory with its score (linking to the memory's page) and the tool
call; the session's transcript marks the memory on the turn. A channel's ``<script>`` is
shown as text (the watched page fails on any CSP violation). A record older than
``[agent] runs_keep_days`` is not shown, and the daemon's first recorded run prunes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2 as httpx
import pytest
import tomli_w
from playwright.sync_api import Browser, expect

from channel_support import OWNER, telegram_config
from console_support import Watched, memory_id, shoot, signed_in
from daemon_process import DaemonProcess, daemon_env
from llm_fakes import FAKE_KEY, FAKE_KEY_ENV, FakeOpenAI, llm_settings
from memvault.memory.state import StateDB
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for

TEA = "I prefer green tea in the morning, never coffee"
ASKED = "Do I prefer green tea or coffee in the morning?"
SCRIPT = '<script>alert("owned")</script> please remember <b>this</b>'
OLD_COMMAND = "A question asked long ago"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


def _state_rows(root: Any, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
    state = StateDB(root / ".memvault")
    try:
        return list(state.query(statement, params))
    finally:
        state.close()


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeOpenAI, telegram: FakeTelegram
) -> Iterator[DaemonProcess]:
    """A daemon with the fake model, the fake Telegram (the owner may talk to the agent),
    a memory about tea, and a run record ten days old in a 7-day window."""
    root = tmp_path_factory.mktemp("why") / "vault"
    init_vault(Vault(root))
    llm = llm_settings(fake, max_retries=0).model_dump(exclude_defaults=True, exclude_none=True)
    extra = {
        "llm": llm,
        "agent": {"runs_keep_days": 7},
        "memory": {"consolidation": "rule", "capture": False},  # no model asked to store
        "channels": {"telegram": telegram_config(telegram)},
    }
    config = root / ".memvault/config.toml"
    config.write_text(config.read_text(encoding="utf-8") + "\n" + tomli_w.dumps(extra))
    state = StateDB(root / ".memvault")
    long_ago = (datetime.now(UTC) - timedelta(days=10)).isoformat(timespec="seconds")
    with state.transaction() as conn:
        conn.execute(
            "INSERT INTO agent_runs (started_at, surface, command, status) VALUES (?, ?, ?, ?)",
            (long_ago, "cli", OLD_COMMAND, "done"),
        )
    state.close()
    env = daemon_env(TELEGRAM_BOT_TOKEN=telegram.token, **{FAKE_KEY_ENV: FAKE_KEY})
    process = DaemonProcess(root, env=env)
    try:
        with process.client() as api:
            stored = api.post("/v1/memories", json={"text": TEA, "category": "fact"})
            assert stored.status_code == 200, stored.text
        yield process
    finally:
        process.stop()


@pytest.fixture
def console(browser: Browser, daemon: DaemonProcess) -> Iterator[Watched]:
    with signed_in(browser, daemon.url, daemon.token) as watched:
        yield watched


def ask(daemon: DaemonProcess, fake: FakeOpenAI, session: str) -> dict[str, Any]:
    """A turn through the daemon's API: the model recalls, then answers."""
    fake.reply("", tool_calls=[("recall", {"topic": "tea in the morning"})], usage=(300, 12))
    fake.reply("Green tea, never coffee.", usage=(340, 7))
    with daemon.client() as api:
        answer = api.post("/v1/agent/run", json={"command": ASKED, "session": session})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    assert result["status"] == "done", result
    return result


def run_of(daemon: DaemonProcess, command: str) -> int:
    """The id of the newest recorded run of ``command``, once the daemon has written it."""

    def found() -> int | None:
        rows = _state_rows(
            daemon.vault,
            "SELECT id FROM agent_runs WHERE command = ? ORDER BY id DESC LIMIT 1",
            (command,),
        )
        return int(rows[0]["id"]) if rows else None

    return wait_for(found, f"the run of {command!r} to be recorded")


def test_a_runs_page_shows_its_context_recalled_memory_and_tool_call(
    console: Watched, daemon: DaemonProcess, fake: FakeOpenAI
) -> None:
    tea = memory_id(daemon.client, TEA)
    ask(daemon, fake, "why-tea")
    run_id = run_of(daemon, ASKED)
    page = console.page
    page.get_by_role("link", name="Runs").click()
    expect(page.get_by_role("heading", name="Why did it say that")).to_be_visible()
    row = page.locator(f'[data-run="{run_id}"]')
    expect(row).to_contain_text(ASKED)
    expect(row).to_contain_text("http")
    shoot(page, "runs")

    row.get_by_role("link", name=f"#{run_id}").click()
    expect(page.locator("#command")).to_have_text(ASKED)
    expect(page.locator("#model")).to_have_text("fake-model")
    expect(page.locator("#tokens")).to_have_text("640 in · 19 out")
    relevant = page.locator(".context-section", has_text="Relevant to: Do I prefer")
    expect(relevant.locator("pre.shown")).to_contain_text(TEA)
    expect(page.locator('.context-section[data-section="Working together"]')).to_be_visible()
    recalled = page.locator(f'.recalled [data-recalled="{tea}"]')
    expect(recalled.locator(".score")).to_have_text(re.compile(r"^score \d+\.\d{3}$"))
    call = page.locator('.tool-call[data-tool="recall"]')
    expect(call.locator("pre.arguments")).to_contain_text('"topic": "tea in the morning"')
    expect(call.locator("pre.result")).to_contain_text("green tea")
    shoot(page, "run")
    recalled.get_by_role("link").click()
    expect(page.locator("h1.text")).to_have_text(TEA)


def test_the_transcript_links_each_turn_to_its_run_and_marks_what_it_recalled(
    console: Watched, daemon: DaemonProcess, fake: FakeOpenAI
) -> None:
    tea = memory_id(daemon.client, TEA)
    ask(daemon, fake, "why-transcript")
    run_id = run_of(daemon, ASKED)
    (session,) = _state_rows(daemon.vault, "SELECT id FROM sessions WHERE key = 'why-transcript'")
    page = console.page
    page.goto(f"{daemon.url}/sessions/{session['id']}")
    turn = page.locator(".transcript .turn.user", has_text=ASKED)
    mark = turn.locator(f'.recalled-marks [data-recalled="{tea}"]')
    expect(mark).to_contain_text("green tea")
    expect(mark.locator(".score")).to_have_text(json_score(daemon, run_id, tea))
    expect(page.locator(".transcript .turn.assistant .why-run")).to_have_count(0)
    turn.get_by_role("link", name=f"Why did it say that? Run #{run_id}").click()
    expect(page.locator("#command")).to_have_text(ASKED)
    page.goto(f"{daemon.url}/runs?session={session['id']}")
    expect(page.locator("[data-run]")).to_have_count(1)


def json_score(daemon: DaemonProcess, run_id: int, memory: str) -> str:
    """The score the record keeps for ``memory``, as the page prints it."""
    (row,) = _state_rows(daemon.vault, "SELECT recalled FROM agent_runs WHERE id = ?", (run_id,))
    (hit,) = [r for r in json.loads(row["recalled"]) if r["id"] == memory]
    return f"{hit['score']:.3f}"


def test_a_script_from_a_channel_is_shown_as_text(
    console: Watched, daemon: DaemonProcess, fake: FakeOpenAI, telegram: FakeTelegram
) -> None:
    fake.reply("I will not run scripts.")
    telegram.push_message(OWNER, SCRIPT)
    run_id = run_of(daemon, SCRIPT)
    page = console.page
    page.goto(f"{daemon.url}/runs?channel=telegram")
    row = page.locator(f'[data-run="{run_id}"]')
    expect(row.locator(".asked")).to_have_text(SCRIPT)
    expect(row).to_contain_text("channel")
    page.goto(f"{daemon.url}/runs/{run_id}")
    expect(page.locator("#command")).to_have_text(SCRIPT)
    assert page.locator("#main script, #main b").count() == 0  # text, never markup
    assert page.evaluate("window.owned === undefined")
    (session,) = _state_rows(
        daemon.vault, "SELECT session_id FROM agent_runs WHERE id = ?", (run_id,)
    )
    page.goto(f"{daemon.url}/sessions/{session['session_id']}")
    expect(page.locator(".transcript .turn.user .said").last).to_have_text(SCRIPT)
    expect(page.locator(f'.why-run[data-run="{run_id}"]')).to_be_visible()


def test_a_record_past_the_window_is_not_shown_and_is_pruned(
    console: Watched, daemon: DaemonProcess, fake: FakeOpenAI
) -> None:
    old = 1  # the fixture's row, the first of the table
    page = console.page
    page.goto(f"{daemon.url}/runs")
    expect(page.get_by_role("heading", name="Why did it say that")).to_be_visible()
    expect(page.locator("#main")).not_to_contain_text(OLD_COMMAND)
    gone = page.goto(f"{daemon.url}/runs/{old}")
    assert gone is not None and gone.status == 404
    expect(page.get_by_role("alert")).to_contain_text("older than kept")
    # The daemon's first recorded run (this one, or an earlier test's) pruned the row.
    ask(daemon, fake, "why-prune")
    run_of(daemon, ASKED)
    assert (
        _state_rows(daemon.vault, "SELECT id FROM agent_runs WHERE command = ?", (OLD_COMMAND,))
        == []
    )


def test_without_the_cookie_no_run_is_shown(daemon: DaemonProcess, fake: FakeOpenAI) -> None:
    ask(daemon, fake, "why-stranger")
    run_id = run_of(daemon, ASKED)
    with httpx.Client(base_url=daemon.url, timeout=WAIT) as stranger:
        for path in ("/runs", f"/runs/{run_id}", "/runs?channel=api"):
            answer = stranger.get(path)
            assert answer.status_code == 401, path
            assert "green tea" not in answer.text and ASKED not in answer.text
    with daemon.client() as api:  # nor does the API's token open the page
        assert api.get(f"/runs/{run_id}").status_code == 401


def test_a_jobs_model_call_shows_its_prompt_as_its_context(
    console: Watched, daemon: DaemonProcess, fake: FakeOpenAI
) -> None:
    """A job that does not record its run itself (living_summary) is recorded by the
    engine: its page shows the prompt message by message, with no token budget."""
    fake.reply("## Key memories\n- Green tea, never coffee\n", usage=(280, 9))
    with daemon.client() as api:
        started = api.post("/v1/jobs/living_summary/run")
        assert started.status_code == 202, started.text

    def recorded() -> int | None:
        rows = _state_rows(
            daemon.vault,
            "SELECT id FROM agent_runs WHERE sender = 'living_summary job' ORDER BY id DESC",
        )
        return int(rows[0]["id"]) if rows else None

    run_id = wait_for(recorded, "the living_summary job's model call to be recorded")
    page = console.page
    page.goto(f"{daemon.url}/runs/{run_id}")
    expect(page.locator("#tokens")).to_have_text("280 in · 9 out")
    expect(page.locator("#main")).to_contain_text("The job's own prompt")
    user = page.locator('.context-section[data-section="The user message"]')
    expect(user.locator("pre.shown")).to_contain_text(TEA)
