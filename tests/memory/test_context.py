from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memvault.config import ContextSettings
from memvault.errors import InvalidInputError
from memvault.index.chunking import estimate_tokens
from memvault.memory.context import ContextBuilder
from memvault.runtime import Runtime
from support import TZ, MovableClock

PROFILE = (
    "---\nname: Ada\n---\n# User Profile\n\n## About\nAda runs a small bakery in Leeds.\n\n"
    "## Preferences\n- Short answers, command first.\n"
)
STATUS = (
    "# Current Status\n\n- **Last active:** 2026-11-22 09:00\n- **Last command:** bake rye\n"
    "- **Last outcome:**\n"
)


@pytest.fixture
def rich(runtime: Runtime, write: Callable[[str, str], Path], clock: MovableClock) -> Runtime:
    write("User Profile.md", PROFILE)
    write("Current Status.md", STATUS)
    runtime.tasks.create("Fix the oven thermostat", priority="urgent", due="2026-11-23")
    runtime.tasks.create("Order flour", priority="high")
    runtime.tasks.create("Clean the shelves", priority="low")
    clock.set(datetime(2026, 11, 20, 8, 0, tzinfo=TZ))
    runtime.journal.append("Actions Taken", "Baked 40 loaves")
    runtime.journal.append("Sessions", "Talked about the new rye recipe")
    clock.set(datetime(2026, 11, 22, 8, 0, tzinfo=TZ))
    runtime.journal.append("Actions Taken", "Checked the sourdough starter")
    runtime.memories.remember("Ada is allergic to walnuts", tags=["core"], importance=0.9)
    runtime.memories.remember("Prefers invoices as PDF", category="preference")
    runtime.memories.remember("The rye recipe uses 20% whole grain", importance=0.7)
    runtime.memories.remember("Supplier Müller delivers on Thursdays", importance=0.4)
    clock.set(datetime(2026, 11, 22, 9, 30, tzinfo=TZ))
    runtime.index.sync()
    return runtime


def _builder(runtime: Runtime, **kwargs: object) -> ContextBuilder:
    """The runtime's context builder with other settings."""
    builder = copy.copy(runtime.context)
    builder.settings = ContextSettings(**kwargs)  # type: ignore[arg-type]
    return builder


def test_sections_in_priority_order(rich: Runtime) -> None:
    markdown = rich.context.build("rye recipe", budget_tokens=2000)
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Owner",
        "## Current status",
        "## Open tasks",
        "## Today's journal",
        "## Pinned memories",
        "## Relevant to: rye recipe",
        "## Important memories",
        "## Recent activity",
    ]
    assert "### About\nAda runs a small bakery in Leeds." in markdown  # headings demoted
    assert "**Last outcome:**" not in markdown  # empty template fields are left out
    assert "- Fix the oven thermostat (urgent, due 2026-11-23)" in markdown
    assert "Clean the shelves" not in markdown  # a low one is counted, not named
    assert "- 1 other open task (1 low), none with a due date" in markdown
    assert "- 08:00 Checked the sourdough starter (Actions Taken)" in markdown
    pinned = markdown.split("## Pinned memories")[1].split("##")[0]
    assert "walnuts" in pinned and "invoices as PDF" in pinned
    relevant = markdown.split("## Relevant to: rye recipe")[1].split("##")[0]
    assert "20% whole grain" in relevant
    assert markdown.count("walnuts") == 1  # nothing appears twice
    assert "2026-11-20 08:00 Talked about the new rye recipe (Sessions)" in markdown


def test_top_memories_follow_importance_and_recency(rich: Runtime, clock: MovableClock) -> None:
    clock.set(datetime(2026, 11, 22, 9, 31, tzinfo=TZ))
    rich.memories.remember("Fresh but trivial", importance=0.1)
    important = (
        _builder(rich, recency_bias=0.0).build(budget_tokens=2000).split("## Important memories")[1]
    )
    recent = (
        _builder(rich, recency_bias=1.0).build(budget_tokens=2000).split("## Important memories")[1]
    )
    assert important.index("20% whole grain") < important.index("Fresh but trivial")
    assert recent.index("Fresh but trivial") < recent.index("Supplier Müller")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(min_value=50, max_value=1200))
def test_budget_is_never_exceeded_and_lines_are_whole(rich: Runtime, budget: int) -> None:
    full = rich.context.build("rye recipe", budget_tokens=100_000)
    whole = set(full.splitlines())
    markdown = rich.context.build("rye recipe", budget_tokens=budget)
    assert estimate_tokens(markdown) <= budget
    for line in markdown.splitlines():
        assert line in whole or "left out" in line.lower(), line


def test_a_short_budget_keeps_the_first_sections_and_says_what_was_left_out(rich: Runtime) -> None:
    result = rich.context.build_result("rye recipe", budget_tokens=120)
    assert result.markdown.startswith("## Owner")
    assert "left out" in result.markdown.lower()
    dropped = [s for s in result.sections if s.left_out]
    assert dropped and all(s.left_out > 0 for s in dropped)
    shown_titles = [s.title for s in result.sections if s.shown]
    assert shown_titles[0] == "Owner"
    assert result.tokens <= 120


def test_a_new_vault_says_there_are_no_memories_yet(runtime: Runtime) -> None:
    assert runtime.context.build("anything") == (
        "## Working together\n"
        "- No memories yet: this may be the first session. Learn and remember.\n"
    )


def test_budget_below_fifty_is_refused(rich: Runtime) -> None:
    with pytest.raises(InvalidInputError, match="between 50 and 200000 tokens, not 10"):
        rich.context.build(budget_tokens=10)
    with pytest.raises(InvalidInputError, match="between 50 and 200000 tokens, not 200001"):
        rich.context.build(budget_tokens=200_001)


def test_more_pinned_memories_than_a_search_may_return_still_build(runtime: Runtime) -> None:
    many = [
        (f"Ada prefers tea blend number {n}", "preference", 0.5, (), "cli", None)
        for n in range(1100)
    ]
    runtime.memories.remember_many(many)
    runtime.memories.remember("The harbour office opens at eight", category="fact")
    result = runtime.context.build_result("when does the harbour office open", 500)
    relevant = next(s for s in result.sections if s.title.startswith("Relevant to"))
    assert any("harbour office opens at eight" in line for line in relevant.items)
    pinned = next(s for s in result.sections if s.title == "Pinned memories")
    assert pinned.left_out > 1000  # the budget said so, nothing failed
