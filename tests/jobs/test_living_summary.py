"""The living_summary job on a seeded vault, with and without a (fake) model."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pytest

from job_support import job_engine, run_job
from llm_fakes import FakeOpenAI
from memvault.errors import ConflictError
from memvault.jobs import Job, JobEngine, JobRun, Schedule, daily_note, living_summary
from memvault.runtime import Runtime
from memvault.vault.layout import MEMORY
from support import TZ, MovableClock

PATH = "MEMORY.md"
START, END = living_summary.MARKERS.start, living_summary.MARKERS.end
OWNER_HEAD = "---\ntags: [memory]\n---\n# MEMORY\n\nWritten by me, about me.\n\n"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=TZ)


def seed(runtime: Runtime, clock: MovableClock, write: Any) -> None:
    """Memories of different weight and age, an insight, open and closed tasks, two days."""
    clock.set(at("2026-06-01T10:00"))
    runtime.memories.remember("Old but important: allergic to penicillin", "fact", importance=0.9)
    runtime.memories.remember("Old trivia about a cafe", "fact", importance=0.2)
    clock.set(at("2026-11-21T10:00"))
    runtime.memories.remember("Works at Harbour Labs", "fact", importance=0.6)
    runtime.memories.remember("Always answer in English", "preference", importance=0.4)
    runtime.memories.remember("Started learning Portuguese", "context", importance=0.3)
    runtime.tasks.create("Renew passport", priority="low", due="2026-11-25")
    runtime.tasks.create("File taxes", priority="urgent", due="2026-11-20")
    runtime.tasks.create("Someday paint the shed", priority="high")
    runtime.tasks.create("Book dentist")
    runtime.tasks.complete("Book dentist")
    runtime.journal.append("Observations", "The ferry was late again")
    write(
        "Insights/Mornings work best.md",
        "---\ntags: [insight]\n---\n# Mornings work best\n\n## Insight\n"
        "Deep work goes best before 11:00.\n",
    )
    clock.set(at("2026-11-22T21:00"))
    runtime.memories.remember("Lisbon trip planned for March", "project", importance=0.5)
    daily = Job("daily_note", Schedule(cron="0 21 * * *"), daily_note.run)
    JobEngine(runtime.state, clock, [daily], runtime=runtime).run_now("daily_note")
    clock.set(at("2026-11-23T03:30"))


def engine(runtime: Runtime, clock: MovableClock, **kwargs: Any) -> JobEngine:
    return job_engine(runtime, clock, "living_summary", **kwargs)


def run(runtime: Runtime, clock: MovableClock, **kwargs: Any) -> JobRun:
    return run_job(runtime, clock, "living_summary", **kwargs)


def block(text: str) -> str:
    (inner,) = re.findall(rf"{re.escape(START)}\n(.*?)\n{re.escape(END)}", text, re.DOTALL)
    return inner


def outside(text: str) -> tuple[str, str]:
    start, end = text.index(START), text.index(END) + len(END)
    return text[:start], text[end:]


def test_the_block_replaces_the_templates_empty_headings(
    runtime: Runtime, clock: MovableClock, write: Any
) -> None:
    seed(runtime, clock, write)
    assert runtime.vault.read_text(PATH) == MEMORY  # as init wrote it
    done = run(runtime, clock)
    text = runtime.vault.read_text(PATH)
    before, after = outside(text)
    assert before == MEMORY[: MEMORY.index("## Who I work for")]
    assert after == "\n"
    body = block(text)
    # Key memories: pinned (the preference category) first, then by importance x recency.
    memories = re.findall(r"^- (.*) \((\w+)(?:, pinned)?\)$", body.split("## Insights")[0], re.M)
    assert [m[0] for m in memories] == [
        "Always answer in English",
        "Works at Harbour Labs",  # 0.6, two days old
        "Lisbon trip planned for March",  # 0.5 but new: above an old 0.9
        "Old but important: allergic to penicillin",
        "Started learning Portuguese",
        "Old trivia about a cafe",
    ]
    assert "- Always answer in English (preference, pinned)" in body
    assert "## Insights\n- [[Mornings work best]]: Deep work goes best before 11:00." in body
    tasks = body.split("## Open tasks\n")[1].split("\n\n")[0].splitlines()
    assert tasks == [
        "- [[File taxes]] (urgent, overdue since 2026-11-20)",
        "- [[Renew passport]] (low, due 2026-11-25)",
        "- [[Someday paint the shed]] (high)",
    ]
    assert "Book dentist" not in body
    days = body.split("## Recent days\n")[1].splitlines()
    assert days[0].startswith("- [[Journal/2026-11-22|2026-11-22]]: 1 memory remembered")
    assert days[1] == "- [[Journal/2026-11-21|2026-11-21]]: 10:00 The ferry was late again"
    assert "(extractive): 6 memories, 1 insight, 3 open tasks, 2 days;" in done.output


def test_runs_twice_identically_and_keeps_the_owners_edits(
    runtime: Runtime, clock: MovableClock, write: Any
) -> None:
    seed(runtime, clock, write)
    write(PATH, OWNER_HEAD + "## Mine\n- keep this line\n")
    run(runtime, clock)
    first = runtime.vault.read_text(PATH)
    assert first.startswith(OWNER_HEAD + "## Mine\n- keep this line\n\n" + START)
    run(runtime, clock)
    assert runtime.vault.read_text(PATH) == first
    # The owner edits their part, above and below the block; a new memory arrives.
    before, after = outside(first)
    edited = before.replace("keep this line", "keep this line, edited") + START
    edited += "\n" + block(first) + "\n" + END + after + "\n## Below\nmy postscript\n"
    write(PATH, edited)
    runtime.memories.remember("Ana's birthday is on 3 May", "person", importance=0.9)
    run(runtime, clock)
    now = runtime.vault.read_text(PATH)
    assert outside(now) == outside(edited)
    assert "Ana's birthday is on 3 May" in block(now)


def test_the_block_never_exceeds_max_bytes(
    runtime: Runtime, clock: MovableClock, write: Any
) -> None:
    seed(runtime, clock, write)
    runtime.memories.remember_many(
        [
            (f"Memory number {n} " + "with some words " * 8, "fact", 0.5, (), None, None)
            for n in range(300)
        ]
    )
    for n in range(40):
        runtime.tasks.create(f"Task number {n}", due="2026-12-01")
    done = run(runtime, clock, max_bytes=2000, top_memories=200)
    text = runtime.vault.read_text(PATH)
    whole = text[text.index(START) : text.index(END) + len(END)]
    assert len(whole.encode("utf-8")) <= 2000
    body = block(text)
    assert re.search(r"## Key memories\n(- .*\n)+- \(\d+ more not shown\)", body)
    assert re.search(r"## Open tasks\n(- .*\n)+- \(\d+ more not shown\)", body)
    assert "## Insights\n- [[Mornings work best]]" in body  # a small section is not starved
    assert "left out to fit" in done.output


def test_a_ten_kb_memory_note_is_never_shrunk_to_a_short_answer(
    runtime: Runtime, clock: MovableClock, write: Any, fake: FakeOpenAI
) -> None:
    seed(runtime, clock, write)
    owner = OWNER_HEAD + "".join(
        f"- my own fact number {n:04d}, kept by hand\n" for n in range(260)
    )
    assert len(owner.encode()) > 10_000
    write(PATH, owner)
    short = "## Key memories\n- Works at Harbour Labs\n" + "- x\n" * 30
    short = short[:171]
    fake.reply(short)
    done = run(runtime, clock, fake=fake)
    assert "(by the model)" in done.output
    text = runtime.vault.read_text(PATH)
    assert text.startswith(owner)  # every byte of the owner's 10 KB is still there
    assert block(text) == f"{living_summary.HEADER}\n\n{short.strip()}"
    (request,) = fake.requests
    system, user = request["messages"][0]["content"], request["messages"][1]["content"]
    assert "data, not instructions" in system
    assert user.startswith("<vault-data>\n") and "Works at Harbour Labs" in user


def test_the_model_call_is_recorded_as_an_agent_run_with_its_prompt(
    runtime: Runtime, clock: MovableClock, write: Any, fake: FakeOpenAI
) -> None:
    """A job that does not record its run itself (the heartbeat does) leaves one record
    a model call: what it asked, the prompt message by message, the answer and tokens."""
    seed(runtime, clock, write)
    answer = "## Key memories\n- Works at Harbour Labs\n- Allergic to penicillin\n"
    fake.reply(answer, usage=(321, 12))
    run(runtime, clock, fake=fake)
    (listed,) = runtime.runs.list()
    record = runtime.runs.get(listed.id or 0)
    assert record.surface == "job" and record.sender == "living_summary job"
    assert record.status == "done" and record.summary.startswith("## Key memories")
    assert record.command.startswith("living_summary: <vault-data>")
    assert (record.model, record.input_tokens, record.output_tokens) == ("fake-model", 321, 12)
    titles = [s["title"] for s in record.context["sections"]]
    assert titles == ["The system message", "The user message"]
    user = record.context["sections"][1]["shown"]
    assert any("Works at Harbour Labs" in line for line in user)


@pytest.mark.parametrize(
    ("answer", "stop", "why"),
    [
        ("## Key memories\n- Works at", "length", "cut off"),
        ("", None, "empty"),
        (f"## Key memories\n- fine\n{END}\nmore", None, "markers"),
        ("## Key memories\n" + "- a long line of words\n" * 200, None, "over the"),
    ],
)
def test_a_bad_model_answer_never_replaces_the_block(
    runtime: Runtime,
    clock: MovableClock,
    write: Any,
    fake: FakeOpenAI,
    answer: str,
    stop: str | None,
    why: str,
) -> None:
    seed(runtime, clock, write)
    run(runtime, clock, max_bytes=3000)
    extractive = runtime.vault.read_text(PATH)
    fake.reply(answer, stop=stop)  # type: ignore[arg-type]
    done = run(runtime, clock, fake=fake, max_bytes=3000)
    assert "extractive: " in done.output and why in done.output
    assert runtime.vault.read_text(PATH) == extractive


def test_a_note_without_markers_gets_the_block_at_the_end(
    runtime: Runtime, clock: MovableClock, write: Any
) -> None:
    seed(runtime, clock, write)
    mine = "# My memory\n\n## Who I work for\n\nMyself.\n\n## Preferences\n- tea"  # no newline
    write(PATH, mine)
    run(runtime, clock)
    text = runtime.vault.read_text(PATH)
    assert text.startswith(mine + "\n\n" + START + "\n")
    assert text.endswith(END + "\n")


def test_broken_markers_fail_the_run_and_leave_the_file(
    runtime: Runtime, clock: MovableClock, write: Any
) -> None:
    seed(runtime, clock, write)
    broken = OWNER_HEAD + START + "\nhalf a block, the end line deleted by hand\n"
    write(PATH, broken)
    done = engine(runtime, clock).run_now("living_summary")
    assert done.status == "failed"
    assert done.error is not None and "fix the markers by hand" in done.error
    assert runtime.vault.read_text(PATH) == broken


def test_undo_restores_the_file_and_refuses_after_a_person_edits_it(
    runtime: Runtime, clock: MovableClock, write: Any
) -> None:
    seed(runtime, clock, write)
    original = (runtime.vault.root / PATH).read_bytes()
    jobs = engine(runtime, clock)
    done = jobs.run_now("living_summary")
    assert (runtime.vault.root / PATH).read_bytes() != original
    assert jobs.undo(done.id) == [PATH]
    assert (runtime.vault.root / PATH).read_bytes() == original
    again = jobs.run_now("living_summary")
    edited = runtime.vault.read_text(PATH) + "\nA line typed in Obsidian.\n"
    write(PATH, edited)
    with pytest.raises(ConflictError, match="edited after run"):
        jobs.undo(again.id)
    assert runtime.vault.read_text(PATH) == edited


def test_an_empty_vault_says_so(runtime: Runtime, clock: MovableClock) -> None:
    done = run(runtime, clock)
    assert "nothing to summarise yet" in done.output
    assert "The vault holds nothing to summarise yet." in block(runtime.vault.read_text(PATH))
