"""What the agent's starting context draws on beyond memories, read through the real
surfaces: ``GET /v1/context`` of a running daemon and the ``get_context`` tool (the MCP
tool's call path). The day's journal after the daily note job ran, open tasks of every
priority, the last session without a summary, and how long the agent has known the owner.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx2 as httpx
import pytest

from gateway_support import Live, StartDaemon, ok
from memvault.channels.tools import full_registry
from memvault.runtime import Runtime
from memvault.tools import ToolContext
from memvault.tools.policy import AllowAll, Policy
from support import TZ, MovableClock
from waiting import wait_for

# Jobs that would run on their own at the clock's times are off; the test starts them.
QUIET = {"jobs": {name: {"enabled": False} for name in ("daily_note", "living_summary")}}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=TZ)


def part(markdown: str, title: str) -> str:
    """The lines of one section of a context (empty when it is not there)."""
    if f"## {title}\n" not in markdown:
        return ""
    rest = markdown.split(f"## {title}\n", 1)[1]
    return rest.split("\n## ", 1)[0].split("\n\n_", 1)[0].strip("\n")


def context(api: httpx.Client, budget: int = 4000) -> str:
    markdown: str = ok(api.get("/v1/context", params={"budget": budget}))["markdown"]
    return markdown


@pytest.fixture
def live(start_daemon: StartDaemon) -> Live:
    return start_daemon(settings=QUIET)


@pytest.fixture
def api(live: Live) -> httpx.Client:
    return live.client()


# -- today's journal ------------------------------------------------------------------------


def run_daily_note(api: httpx.Client) -> dict[str, Any]:
    """Start the daily note job as the owner would and wait for its run to end."""
    started = ok(api.post("/v1/jobs/daily_note/run"), 202)

    def ended() -> dict[str, Any] | None:
        run: dict[str, Any] = ok(api.get(f"/v1/jobs/runs/{started['run_id']}"))
        return run if run["status"] != "running" else None

    return wait_for(ended, "the daily note run to end")


def test_after_the_daily_note_the_latest_entries_stay_and_the_summary_follows(
    live: Live, api: httpx.Client, clock: MovableClock
) -> None:
    runtime = live.daemon.runtime
    clock.set(at("2026-11-22T07:00"))
    for n in range(6):  # a busy day: the digest gets more bullets than the section shows
        runtime.memories.remember(f"Bakery fact number {n} about rye and spelt", "fact")
        runtime.tasks.create(f"Bakery chore {n}", priority="low")
    for hour, section, text in [
        (8, "Actions Taken", "Baked 40 loaves"),
        (9, "Observations", "The starter rose slowly"),
        (11, "Actions Taken", "Cleaned the proofing baskets"),
        (13, "Decisions Made", "Rye bread moves to Fridays"),
        (15, "Actions Taken", "Ordered 50 kg of flour"),
        (17, "Follow-ups", "Call the oven technician"),
        (19, "Observations", "Sold out by noon"),
        (20, "Actions Taken", "Wrote the price list"),
    ]:
        clock.set(at(f"2026-11-22T{hour:02d}:15"))
        runtime.journal.append(section, text)

    clock.set(at("2026-11-22T21:00"))
    run = run_daily_note(api)
    assert run["status"] == "ok", run
    note = runtime.vault.read_text("Journal/2026-11-22.md")
    assert "<!-- memvault:daily-summary -->" in note and "## Summary" in note
    clock.set(at("2026-11-22T21:40"))
    runtime.journal.append("Actions Taken", "Locked the bakery")

    journal = part(context(api), "Today's journal").splitlines()
    entries, summary = journal[:-1], journal[-1]
    assert entries == [
        "- 09:15 The starter rose slowly (Observations)",
        "- 11:15 Cleaned the proofing baskets (Actions Taken)",
        "- 13:15 Rye bread moves to Fridays (Decisions Made)",
        "- 15:15 Ordered 50 kg of flour (Actions Taken)",
        "- 17:15 Call the oven technician (Follow-ups)",
        "- 19:15 Sold out by noon (Observations)",
        "- 20:15 Wrote the price list (Actions Taken)",
        "- 21:40 Locked the bakery (Actions Taken)",
    ]
    assert summary.startswith("- Summary of the day so far (daily note job): 6 memories remembered")
    assert "(Summary)" not in "\n".join(journal)  # the digest's bullets are not entries

    # Under a tighter budget the oldest entries go first: the latest three, then the
    # summary, keep their place, and what is shown still reads in the order it happened.
    partial = []
    for budget in range(150, 600, 25):
        shown = part(context(api, budget), "Today's journal").splitlines()
        assert shown == [line for line in journal if line in shown], budget
        kept = [line for line in shown if line != summary]
        assert kept == entries[len(entries) - len(kept) :], budget  # the latest ones
        if summary in shown:
            assert len(kept) >= 3, budget
        if kept and len(kept) < len(entries):
            partial.append(shown)
    assert partial, "no budget left out only the oldest entries"
    assert any(summary in shown for shown in partial)


# -- open tasks -----------------------------------------------------------------------------


def test_open_tasks_of_every_priority_are_represented_through_the_context_tool(
    runtime: Runtime, clock: MovableClock
) -> None:
    runtime.tasks.create("Renew the oven certificate", priority="urgent", due="2026-11-24")
    runtime.tasks.create("Order flour", priority="high")
    runtime.tasks.create("Pay the mill's invoice", priority="medium", due="2026-11-20")
    runtime.tasks.create("Paint the sign", priority="low", due="2026-12-05")
    runtime.tasks.create("Sort the recipe box", priority="low")
    runtime.tasks.create("Try a spelt loaf", priority="medium", due="2026-11-28")
    runtime.tasks.create("Clean the attic", priority="low", due="2027-01-10")
    runtime.tasks.create("Done already", priority="low")
    runtime.tasks.complete("Done already")

    result = full_registry().call(
        "get_context",
        {"budget": 2000},
        ToolContext(runtime=runtime, policy=Policy(approver=AllowAll()), surface="mcp"),
    )
    assert result.ok, result.error
    assert part(result.data, "Open tasks").splitlines() == [
        "- Renew the oven certificate (urgent, due 2026-11-24)",
        "- Order flour (high)",
        "- 5 other open tasks (2 medium, 3 low); due soonest: "
        "Pay the mill's invoice (overdue since 2026-11-20); "
        "Try a spelt loaf (due 2026-11-28); Paint the sign (due 2026-12-05)",
    ]


def test_without_urgent_tasks_the_rest_is_still_counted(runtime: Runtime) -> None:
    runtime.tasks.create("Sort the recipe box", priority="low")
    markdown = runtime.context.build(budget_tokens=500)
    assert part(markdown, "Open tasks") == "- 1 open task (1 low), none with a due date"


# -- the last session and the first ---------------------------------------------------------


def chat(api: httpx.Client, key: str, *turns: tuple[str, str]) -> None:
    for role, text in turns:
        ok(api.post(f"/v1/sessions/{key}/messages", json={"role": role, "text": text}))


def test_a_last_session_without_a_summary_shows_its_last_three_messages(
    api: httpx.Client, clock: MovableClock
) -> None:
    clock.set(at("2026-11-22T10:00"))
    chat(api, "api:small-talk", ("user", "hi"), ("assistant", "Hello!"))
    clock.set(at("2026-11-22T10:01"))
    chat(api, "api:small-talk", ("user", "ok thanks"), ("assistant", "Bye!"), ("tool", "{}"))
    ended = ok(api.post("/v1/sessions/api:small-talk/end"))
    assert ended["summary"] is None  # small talk: nothing to summarise

    last = part(context(api), "Last session")
    assert last == (
        "- api:small-talk (api), 5 messages, ended 2026-11-22 10:01, not summarised; "
        "its last messages:\n"
        "<vault-data>\n"
        "- 10:00 assistant: Hello!\n"
        "- 10:01 user: ok thanks\n"
        "- 10:01 assistant: Bye!\n"
        "</vault-data>"
    )

    chat(api, "api:plans", ("user", "Plan the Lisbon trip with Ana in March"))
    ok(api.post("/v1/sessions/api:plans/end", json={"summary": "Planned Lisbon with Ana."}))
    last = part(context(api), "Last session")
    assert last.endswith("ended 2026-11-22 10:01: Planned Lisbon with Ana.")
    assert "<vault-data>" not in last  # a summary stands on its own


def test_the_context_says_since_when_the_agent_knows_the_owner(
    api: httpx.Client, clock: MovableClock
) -> None:
    assert part(context(api), "Working together") == (
        "- No memories yet: this may be the first session. Learn and remember."
    )
    clock.set(at("2026-11-02T09:00"))
    chat(api, "api:first", ("user", "Hello, I run a bakery in Leeds"))
    assert part(context(api), "Working together") == (
        "- No memories yet; first session on 2026-11-02 (today)."
    )
    clock.set(at("2026-11-22T09:00"))
    for text in ("Ada runs a bakery in Leeds", "Ada is allergic to walnuts"):
        ok(api.post("/v1/memories", json={"text": text}))
    chat(api, "api:later", ("user", "What do you know about me?"))
    assert part(context(api), "Working together") == (
        "- Working with the owner since the first session on 2026-11-02 (20 days ago); 2 memories."
    )


def test_a_vault_with_memories_and_no_session_says_nothing_of_sessions(
    write: Callable[[str, str], Any], runtime: Runtime
) -> None:
    runtime.memories.remember("Ada runs a bakery in Leeds")
    assert part(runtime.context.build(budget_tokens=500), "Working together") == ""
