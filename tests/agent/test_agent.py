"""The agent loop: memory before, tools during, outcome after (real SDKs, a fake model)."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta

from agent.conftest import AgentFactory, Owner, system_of, tool_results, user_texts
from llm_fakes import FakeLLMServer, FakeOpenAI
from memvault.agent.loop import DEFENSIVE_PROMPT, Step
from support import TZ, MovableClock


def test_a_memory_stored_in_one_run_is_in_the_next_runs_system_prompt(
    fake: FakeLLMServer, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake)
    fake.reply(
        "", tool_calls=[("remember", {"fact": "Ada's dog is called Biscuit", "category": "fact"})]
    )
    fake.reply("Noted: your dog is Biscuit.")
    first = agent.run("Remember that my dog is called Biscuit", session="cli")

    assert first.status == "done" and first.answer == "Noted: your dog is Biscuit."
    assert first.iterations == 2 and first.tool_calls[0]["name"] == "remember"
    stored = [m.text for m in agent.runtime.memories.list()]
    assert stored == ["Ada's dog is called Biscuit"]
    assert "called Biscuit" in agent.runtime.notes.read("Memory/Facts.md").text
    # The tool result the model saw says it was stored.
    assert json.loads(tool_results(fake.requests[1])[0])["stored"] is True

    fake.reply("Your dog is Biscuit.")
    second = agent.run("What is my dog called?", session="telegram:7")
    assert second.ok
    prompt = system_of(fake.requests[2])
    assert "Ada's dog is called Biscuit" in prompt
    assert "You work for Ada" in prompt
    assert "When to remember" in prompt  # the memory guide
    assert "over telegram" in prompt
    # The tools came from the registry, with their schemas.
    tools = fake.requests[2]["tools"]
    names = {t.get("name") or t["function"]["name"] for t in tools}
    assert {"remember", "recall", "vault_search", "task_create"} <= names


def test_after_a_run_the_journal_and_current_status_say_what_happened(
    fake: FakeLLMServer, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake)
    fake.reply("The oven is booked for Tuesday. Anything else?")
    agent.run("Book the oven service", session="cli")

    actions = agent.runtime.journal.sections()["Actions Taken"]
    assert actions == [
        '09:30 done: "Book the oven service" - The oven is booked for Tuesday. (1 iteration)'
    ]
    status = agent.runtime.notes.read("Current Status.md").text
    assert '- **Last command:** "Book the oven service"' in status
    assert "- **Last outcome:** done - The oven is booked for Tuesday." in status
    # Every message of the conversation is in the session log.
    session = agent.runtime.sessions.get("cli")
    messages = agent.runtime.sessions.messages(session.id)
    assert [(m.role, m.channel) for m in messages] == [("user", "cli"), ("assistant", "cli")]


def test_a_failed_run_writes_known_issues_and_the_next_run_sees_them(
    fake: FakeLLMServer, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake, llm={"max_retries": 0})
    fake.fail(500, message="upstream exploded")
    failed = agent.run("Send the invoice to Bram", session="cli")

    assert failed.status == "failed"
    assert failed.error is not None and "upstream exploded" in failed.error
    assert "did not answer" in failed.error
    issues = agent.runtime.notes.read("Known Issues.md").text
    assert '"Send the invoice to Bram" failed after 1 iteration: The model' in issues
    actions = agent.runtime.journal.sections()["Actions Taken"]
    assert actions[-1].startswith('09:30 failed: "Send the invoice to Bram"')

    fake.reply("I will try a different way this time.")
    agent.run("Send the invoice to Bram again", session="cli")
    prompt = system_of(fake.requests[-1])
    section = prompt.split("## Known issues (do not repeat these)\n", 1)[1].split("\n## ")[0]
    assert '"Send the invoice to Bram" failed after 1 iteration' in section


def test_a_run_that_never_finishes_stops_at_the_iteration_cap(
    fake_openai: FakeOpenAI, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake_openai, max_iterations=3)
    for _ in range(3):
        fake_openai.reply("", tool_calls=[("task_list", {})])
    result = agent.run("Loop forever", session="cli")

    assert result.status == "failed" and result.iterations == 3
    assert "stopped after 3 model calls" in result.summary
    assert len(fake_openai.requests) == 3
    assert "Loop forever" in agent.runtime.notes.read("Known Issues.md").text


def test_tier_two_is_asked_once_per_session_and_tier_three_every_time(
    fake: FakeLLMServer, make_agent: AgentFactory
) -> None:
    owner = Owner(answer=True)
    agent = make_agent(fake, owner=owner)
    agent.runtime.vault.write_text("Scratch/a.md", "a\n")
    agent.runtime.vault.write_text("Scratch/b.md", "b\n")
    fake.reply(
        "",
        tool_calls=[
            ("task_create", {"title": "Water the plants"}),
            ("remember", {"fact": "The plants need water on Sundays"}),
            ("vault_delete", {"path": "Scratch/a.md"}),
        ],
    )
    fake.reply("", tool_calls=[("vault_delete", {"path": "Scratch/b.md"}), ("task_list", {})])
    fake.reply("Done.")
    result = agent.run("Tidy up", session="cli")

    assert result.ok
    asked = [(r.tool, int(r.tier)) for r in owner.asked]
    # file_writes approved once (task_create), remember rides on it; each deletion asked.
    assert asked == [("task_create", 2), ("vault_delete", 3), ("vault_delete", 3)]
    assert not (agent.runtime.vault.root / "Scratch/a.md").exists()
    assert not (agent.runtime.vault.root / "Scratch/b.md").exists()

    # The same session later: file writes stay approved; a new session asks again.
    fake.reply("", tool_calls=[("remember", {"fact": "Ada waters on Sunday mornings"})])
    fake.reply("Stored.")
    agent.run("Remember Sunday mornings", session="cli")
    assert len(owner.asked) == 3
    fake.reply("", tool_calls=[("remember", {"fact": "Ada likes ferns"})])
    fake.reply("Stored.")
    agent.run("Remember the ferns", session="telegram:1")
    assert [r.tool for r in owner.asked[3:]] == ["remember"]


def test_a_refused_call_is_fed_back_to_the_model_and_changes_nothing(
    fake: FakeLLMServer, make_agent: AgentFactory
) -> None:
    owner = Owner(answer=False)
    agent = make_agent(fake, owner=owner)
    fake.reply("", tool_calls=[("remember", {"fact": "Secret plan"})])
    fake.reply("I could not store that: you did not approve it.")
    result = agent.run("Remember my secret plan", session="cli")

    assert result.ok
    assert result.tool_calls == [{"name": "remember", "ok": False, "code": "not_approved"}]
    fed_back = tool_results(fake.requests[1])[0]
    assert "did not approve remember" in fed_back
    assert agent.runtime.memories.list() == []


def test_autonomous_mode_skips_tier_two_questions_but_not_tier_three(
    fake_openai: FakeOpenAI, make_agent: AgentFactory
) -> None:
    owner = Owner(answer=False)
    agent = make_agent(fake_openai, owner=owner, mode="autonomous")
    agent.runtime.vault.write_text("Old.md", "old\n")
    fake_openai.reply(
        "",
        tool_calls=[
            ("remember", {"fact": "Autonomy works"}),
            ("vault_delete", {"path": "Old.md"}),
        ],
    )
    fake_openai.reply("Remembered; the delete was refused.")
    agent.run("Do both", session="cli")

    assert [r.tool for r in owner.asked] == ["vault_delete"]
    assert [m.text for m in agent.runtime.memories.list()] == ["Autonomy works"]
    assert (agent.runtime.vault.root / "Old.md").exists()


def test_tool_errors_and_invalid_arguments_go_back_to_the_model(
    fake: FakeLLMServer, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake)
    fake.reply(
        "",
        tool_calls=[
            ("vault_read", {"path": "Nowhere/missing.md"}),
            ("vault_read", "{not json"),
            ("vault_raed", {"path": "x.md"}),
            ("vault_read", {"path": "../../etc/passwd"}),
        ],
    )
    fake.reply("Those did not work.")
    result = agent.run("Read some notes", session="cli")

    assert result.ok
    errors = tool_results(fake.requests[1])
    assert len(errors) == 4
    assert all(e.startswith("Error:") for e in errors)
    assert "Nowhere/missing.md" in errors[0]
    assert "not a JSON object" in errors[1]
    assert "Did you mean vault_read" in errors[2]
    assert "vault" in errors[3].lower()
    assert [c["ok"] for c in result.tool_calls] == [False] * 4


def test_the_answer_streams_and_steps_are_reported(
    fake: FakeLLMServer, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake)
    fake.reply("", tool_calls=[("task_list", {})])
    fake.reply("You have no open tasks, so the day is yours.")
    pieces: list[str] = []
    steps: list[Step] = []
    result = agent.run("What is on my list?", on_text=pieces.append, on_step=steps.append)

    assert len(pieces) > 1 and "".join(pieces) == result.answer
    kinds = [s.kind for s in steps]
    assert kinds == [
        "run_started",
        "model_call",
        "tool_call",
        "tool_result",
        "model_call",
        "run_finished",
    ]
    assert steps[-1].data["status"] == "done"


def test_a_cancelled_run_stops_between_steps_and_is_recorded(
    fake: FakeLLMServer, make_agent: AgentFactory
) -> None:
    agent = make_agent(fake)
    cancel = threading.Event()
    fake.reply("", tool_calls=[("task_list", {}), ("task_list", {})])

    def on_step(step: Step) -> None:
        if step.kind == "tool_result":
            cancel.set()

    result = agent.run("Start something long", cancel=cancel, on_step=on_step)
    assert result.status == "cancelled"
    assert len(result.tool_calls) == 1  # the second call never ran
    assert len(fake.requests) == 1
    actions = agent.runtime.journal.sections()["Actions Taken"]
    assert actions[-1].startswith('09:30 cancelled: "Start something long"')
    assert "Start something long" not in agent.runtime.notes.read("Known Issues.md").text


def test_a_session_replays_its_earlier_turns(fake: FakeLLMServer, make_agent: AgentFactory) -> None:
    agent = make_agent(fake)
    fake.reply("Nice to meet you, Ada.")
    agent.run("Hi, I am Ada", session="cli")
    fake.reply("You told me you are Ada.")
    agent.run("Who am I?", session="cli")
    texts = user_texts(fake.requests[1])
    assert texts[0] == "Hi, I am Ada" and texts[-1] == "Who am I?"
    assistant = [m for m in fake.requests[1]["messages"] if m["role"] == "assistant"]
    assert len(assistant) == 1

    fake.reply("Hello stranger.")
    agent.run("Who am I?", session="other")
    assert user_texts(fake.requests[2]) == ["Who am I?"]


def test_near_the_context_limit_the_model_is_asked_once_to_remember(
    fake_openai: FakeOpenAI, make_agent: AgentFactory
) -> None:
    # Measure the fixed part of a request first (system prompt, tools, command).
    probe = make_agent(fake_openai)
    fake_openai.reply("ok")
    probe.run("Summarise Big.md", session="probe")
    base = len(json.dumps(fake_openai.requests[0])) // 4
    probe.runtime.sessions.end("probe")

    window = int((base + 2500) / 0.8)
    agent = make_agent(fake_openai, llm={"context_window": window})
    agent.runtime.vault.write_text("Big.md", "# Big\n\n" + "The harbour log goes on. " * 2000)
    fake_openai.reply("", tool_calls=[("vault_read", {"path": "Big.md"})])
    fake_openai.reply("", tool_calls=[("remember", {"fact": "Big.md is the harbour log"})])
    fake_openai.reply("Big.md is a long harbour log.")
    steps: list[Step] = []
    result = agent.run("Summarise Big.md", session="cli", on_step=steps.append)

    assert result.ok, result.summary
    requests = fake_openai.requests[1:]
    assert DEFENSIVE_PROMPT not in user_texts(requests[0])
    assert user_texts(requests[1])[-1] == DEFENSIVE_PROMPT
    # After the memories were stored, the big tool result was dropped.
    assert any("The harbour log goes on." in t for t in tool_results(requests[1]))
    assert not any("The harbour log goes on." in t for t in tool_results(requests[2]))
    assert any(
        "were dropped to stay within the context window" in t for t in user_texts(requests[2])
    )
    assert user_texts(requests[2])[0] == "Summarise Big.md"
    assert [m.text for m in agent.runtime.memories.list()] == ["Big.md is the harbour log"]
    kinds = [s.kind for s in steps]
    assert kinds.count("defensive_memory") == 1 and "trimmed" in kinds


def test_an_idle_session_is_ended_and_summarised_before_a_new_message(
    fake_openai: FakeOpenAI, make_agent: AgentFactory, clock: MovableClock
) -> None:
    agent = make_agent(fake_openai, session_idle_minutes=30, summary="extractive")
    fake_openai.reply("Lisbon in March sounds lovely.")
    agent.run("We decided to fly to Lisbon with Maria on 12 March.", session="cli")
    clock.set(datetime(2026, 11, 22, 11, 0, tzinfo=TZ))
    fake_openai.reply("Fresh start.")
    steps: list[Step] = []
    agent.run("Something new", session="cli", on_step=steps.append)

    assert steps[0].kind == "session_ended"
    ended = agent.runtime.sessions.last_ended()
    assert ended is not None and ended.summary and "Lisbon" in ended.summary
    assert user_texts(fake_openai.requests[-1]) == ["Something new"]  # no replay
    assert "## Last session" in system_of(fake_openai.requests[-1])
    assert clock.now() - timedelta(minutes=1) < clock.now()
