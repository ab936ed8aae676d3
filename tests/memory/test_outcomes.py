"""What a run leaves behind: journal line, Current Status, Known Issues, and the next context."""

from __future__ import annotations

from datetime import datetime

from memvault.memory.outcomes import RunOutcome
from memvault.runtime import Runtime
from support import TZ, MovableClock


def _read(runtime: Runtime, path: str) -> str:
    return runtime.notes.read(path).text


def test_a_finished_run_is_journaled_and_becomes_the_current_status(runtime: Runtime) -> None:
    runtime.outcomes.record(
        RunOutcome(
            command="Plan the week",
            status="done",
            summary="Made three tasks.",
            iterations=2,
            session="cli",
        )
    )
    actions = runtime.journal.sections()["Actions Taken"]
    assert actions == ['09:30 done: "Plan the week" - Made three tasks. (2 iterations)']
    status = _read(runtime, "Current Status.md")
    assert "- **Last active:** 2026-11-22 09:30" in status
    assert '- **Last command:** "Plan the week"' in status
    assert "- **Last outcome:** done - Made three tasks." in status
    assert "- **Session:** cli" in status
    assert status.count("**Last command:**") == 1
    assert "2026-11-22" not in _read(runtime, "Known Issues.md")


def test_a_failed_run_adds_a_known_issue_the_next_context_shows(
    runtime: Runtime, clock: MovableClock
) -> None:
    runtime.outcomes.record(
        RunOutcome("Email the bank", "failed", "no mail tool is configured", 1, "cli")
    )
    clock.set(datetime(2026, 11, 22, 10, 0, tzinfo=TZ))
    runtime.outcomes.record(
        RunOutcome("Book the dentist", "failed", "the calendar was unreachable", 3, "cli")
    )
    issues = _read(runtime, "Known Issues.md")
    assert (
        '- 2026-11-22 09:30 "Email the bank" failed after 1 iteration: no mail tool is configured'
        in issues
    )
    assert issues.index("Email the bank") < issues.index("Book the dentist")
    assert "Problems the agent ran into" in issues  # the template's text stays
    context = runtime.context.build("something else entirely")
    section = context.split("## Known issues (do not repeat these)\n", 1)[1]
    first, second = section.split("\n")[:2]
    assert "Book the dentist" in first and "Email the bank" in second  # newest first
    assert "failed: the calendar was unreachable" not in context  # status line says "failed - "
    assert "- **Last outcome:** failed - the calendar was unreachable" in _read(
        runtime, "Current Status.md"
    )


def test_status_fields_are_replaced_in_place_and_the_owners_text_kept(runtime: Runtime) -> None:
    runtime.vault.write_text(
        "Current Status.md",
        "---\ntags: [status]\n---\n# Current Status\n\n- **Last active:** never\n"
        "- **Focus:** the bakery launch\n\n## Notes\nKeep this paragraph.\n",
    )
    runtime.outcomes.record(RunOutcome("Check stock", "done", "Flour is low.", 1))
    status = _read(runtime, "Current Status.md")
    assert status.startswith("---\ntags: [status]\n---\n# Current Status\n")
    assert "- **Focus:** the bakery launch" in status
    assert "Keep this paragraph." in status
    assert "- **Last active:** 2026-11-22 09:30" in status
    assert '- **Last command:** "Check stock"' in status
    assert "never" not in status
    assert "**Session:**" not in status  # no session given


def test_a_missing_status_note_is_created_from_the_template(runtime: Runtime) -> None:
    runtime.vault.delete("Current Status.md")
    runtime.vault.delete("Known Issues.md")
    runtime.outcomes.record(RunOutcome("x" * 500, "failed", "word " * 100, 4))
    status = _read(runtime, "Current Status.md")
    assert status.startswith("# Current Status\n")
    command_line = next(line for line in status.split("\n") if "Last command" in line)
    assert len(command_line) < 160 and command_line.endswith('…"')
    issues = _read(runtime, "Known Issues.md")
    assert issues.startswith("# Known Issues\n")
    assert "failed after 4 iterations" in issues


def test_the_last_ended_session_feeds_the_context(runtime: Runtime) -> None:
    assert "## Last session" not in runtime.context.build()
    runtime.sessions.log("telegram:42", "Book a table for Friday", role="user")
    runtime.sessions.end("telegram:42", "Booked Luigi's for Friday 19:00 for four.")
    runtime.sessions.log("cli", "hello", role="user")  # still open: not "last"
    context = runtime.context.build()
    assert (
        "## Last session\n- telegram:42 (telegram), 1 message, ended 2026-11-22 09:30: " in context
    )
    assert "Booked Luigi's for Friday 19:00 for four." in context


def test_reading_context_does_not_create_the_state_database(runtime: Runtime) -> None:
    state = runtime.vault.state_dir / "state.db"
    assert not state.exists()
    runtime.context.build("anything")
    assert not state.exists()
