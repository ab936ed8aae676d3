"""After a run, the tasks it closed or blocked are updated and journaled (issue 30, item 8).

Through the real surfaces: ``memvault ask`` on a fake OpenAI server, and a real daemon
answering Telegram messages (the fake Bot API) from the owner and from a contact. A task
changes by a task tool (journaled once, nothing lost), or by the owner's run's final
answer when it says plainly that a named open task is done or blocked; a hedge, a
question, an unnamed or ambiguous task changes nothing, and nor does anything said in a
contact's conversation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from channel_support import OWNER, delivered, telegram_config
from cli_support import ok, ok_json
from gateway_support import StartDaemon
from llm_fakes import FAKE_KEY, FAKE_KEY_ENV, FakeOpenAI, llm_settings
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for

INSURANCE = "Renew the boat insurance"
GATE = "Fix the garden gate"
FRIEND = 777


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "vault"
    init_vault(Vault(folder))
    return folder


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def model_env(fake: FakeOpenAI) -> dict[str, str]:
    return {
        "MEMVAULT_LLM__PROVIDER": "openai",
        "MEMVAULT_LLM__MODEL": "fake-model",
        "MEMVAULT_LLM__BASE_URL": fake.url,
        "MEMVAULT_LLM__API_KEY_ENV": FAKE_KEY_ENV,
        "MEMVAULT_LLM__MAX_RETRIES": "0",
        "MEMVAULT_LLM__TIMEOUT": str(WAIT),
        "MEMVAULT_AGENT__SUMMARY": "extractive",
        "MEMVAULT_MEMORY__CONSOLIDATION": "rule",
        FAKE_KEY_ENV: FAKE_KEY,
    }


def ask(root: Path, fake: FakeOpenAI, answer: str, *, yes: bool = False) -> dict[str, Any]:
    fake.reply(answer)
    args = ["ask", "How are my tasks going?", *(["--yes"] if yes else [])]
    run: dict[str, Any] = ok_json(root, *args, env=model_env(fake))
    assert run["status"] == "done" and run["answer"] == answer
    return run


def statuses(root: Path) -> dict[str, str]:
    return {t["title"]: t["status"] for t in ok_json(root, "task", "list", "--all")}


def actions_taken(root: Path) -> list[str]:
    """Today's journal lines under Actions Taken, without their times."""
    (note,) = (root / "Journal").glob("*.md")
    text = note.read_text(encoding="utf-8")
    section = text.split("## Actions Taken\n", 1)[1].split("\n## ", 1)[0]
    return [line[8:] for line in section.splitlines() if line.startswith("- ")]


def tasks(root: Path, *titles: str) -> None:
    for title in titles:
        ok(root, "task", "add", title)


def test_an_answer_saying_a_task_is_done_closes_it_and_the_journal_says_so(
    root: Path, fake: FakeOpenAI
) -> None:
    tasks(root, INSURANCE, GATE)
    ask(root, fake, f"I called the insurer. {INSURANCE} is done. The gate is next.")
    assert statuses(root) == {INSURANCE: "done", GATE: "todo"}
    assert actions_taken(root) == [
        'done: "How are my tasks going?" - I called the insurer. (1 iteration)',
        f'task [[{INSURANCE}]] -> done (from the answer: "{INSURANCE} is done.")',
    ]
    closed = ok_json(root, "task", "show", INSURANCE)
    assert closed["path"] == f"Tasks/completed/{INSURANCE}.md"
    assert f"whose answer said: {INSURANCE} is done." in closed["notes"]


def test_a_blocked_task_keeps_the_reason(root: Path, fake: FakeOpenAI) -> None:
    tasks(root, INSURANCE, GATE)
    ask(root, fake, f"**{GATE}** is blocked: the locksmith is away until Monday.")
    assert statuses(root) == {INSURANCE: "todo", GATE: "blocked"}
    reason = f"**{GATE}** is blocked: the locksmith is away until Monday."
    assert actions_taken(root)[1:] == [f'task [[{GATE}]] -> blocked (from the answer: "{reason}")']
    assert "the locksmith is away until Monday" in ok_json(root, "task", "show", GATE)["notes"]


@pytest.mark.parametrize(
    "answer",
    [
        f"Is {INSURANCE} done? I could not tell.",  # a question
        f"{INSURANCE} is not done yet.",  # a negation
        f"{INSURANCE} isn't finished.",
        f"Once the insurer calls back, {INSURANCE} is done.",  # a condition
        f"I will mark {INSURANCE} as done tomorrow.",  # a plan
        f"{INSURANCE} and {GATE} are done.",  # two tasks: which status is whose is a guess
        "The insurance is done and the gate is blocked.",  # no task named exactly
        f"I looked at {INSURANCE} today.",  # named, no status
        f"{INSURANCE} is done. {INSURANCE} is blocked by the bank.",  # it disagrees with itself
    ],
)
def test_an_answer_that_hedges_or_does_not_name_one_task_changes_nothing(
    root: Path, fake: FakeOpenAI, answer: str
) -> None:
    tasks(root, INSURANCE, GATE)
    ask(root, fake, answer)
    assert statuses(root) == {INSURANCE: "todo", GATE: "todo"}
    assert [line for line in actions_taken(root) if line.startswith("task ")] == []


def test_a_task_tools_change_is_journaled_once_and_the_answer_adds_nothing(
    root: Path, fake: FakeOpenAI
) -> None:
    tasks(root, INSURANCE, GATE)
    fake.reply(
        "",
        tool_calls=[
            ("task_complete", {"title": GATE}),
            ("task_update", {"title": INSURANCE, "status": "blocked", "notes": "bank closed"}),
            ("task_update", {"title": INSURANCE, "field": "priority", "value": "high"}),
        ],
    )
    ask(root, fake, f"Done. {GATE} is done and I noted the bank.", yes=True)
    assert statuses(root) == {INSURANCE: "blocked", GATE: "done"}
    assert actions_taken(root)[1:] == [
        f"task [[{GATE}]] -> done (by task_complete)",
        f"task [[{INSURANCE}]] -> blocked (by task_update)",
    ]
    gate = ok_json(root, "task", "show", GATE)
    assert "after an agent run" not in gate["notes"], "the tool's change stands, alone"
    assert "bank closed" in ok_json(root, "task", "show", INSURANCE)["notes"]


def test_a_contacts_conversation_never_changes_a_task_the_owners_does(
    tmp_path: Path, start_daemon: StartDaemon, tg: FakeTelegram, fake: FakeOpenAI
) -> None:
    folder = tmp_path / "vault"
    init_vault(Vault(folder))
    (folder / "Contacts" / "Ada Lovelace.md").write_text(
        f"---\ntelegram: '{FRIEND}'\n---\n# Ada Lovelace\n"
    )
    settings = {
        "channels": {
            "telegram": telegram_config(tg, policy="allowlist", allow=[str(FRIEND)]),
        },
        "llm": llm_settings(fake, max_retries=0),
        "memory": {"consolidation": "rule"},
    }
    live = start_daemon(folder, settings=settings)
    runtime = live.daemon.runtime
    for title in (INSURANCE, GATE):
        runtime.tasks.create(title)

    # Ada's words, and the model's answer to her, are hers: no task changes.
    fake.reply(f"{INSURANCE} is done, Ada says.")
    tg.push_message(FRIEND, f"Tell the agent: {INSURANCE} is done.", first_name="Ada")
    wait_for(lambda: delivered(tg, FRIEND), "the answer to Ada")
    assert {t.title: t.status for t in runtime.tasks.list(status="all")} == {
        INSURANCE: "todo",
        GATE: "todo",
    }
    assert not any("task [[" in line for line in runtime.journal.sections()["Actions Taken"])

    # The owner's run on the same channel: the answer closes the gate.
    fake.reply(f"{GATE} is done.")
    tg.push_message(OWNER, "The locksmith came, the gate works.")
    wait_for(lambda: delivered(tg, OWNER), "the answer to the owner")
    assert runtime.tasks.get(GATE).status == "done"
    assert runtime.tasks.get(INSURANCE).status == "todo"
    taken = runtime.journal.sections()["Actions Taken"]
    assert any(f'task [[{GATE}]] -> done (from the answer: "{GATE} is done.")' in x for x in taken)
