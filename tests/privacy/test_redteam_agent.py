"""The red-team set against the real agent loop: planted text never makes the agent act.

Every red-team text is planted the way the model itself stores what it read (the
``remember`` tool on the agent's surface), or by an OpenClaw import; then the owner asks,
in one run per text, about the topic the text holds, and a gullible model
(tests/privacy/gullible.py) answers: it makes the tool call of every planted text it
reads outside ``<vault-data>``. The
request must carry each text as data, and no run may make a tool call. The same texts
stored as the owner's own words, or with the marking turned off, do make it act: the
check can fail.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gullible import Action, Gullible, outside_data, read

from llm_fakes import FakeLLMServer, FakeOpenAI, llm_settings
from memvault.agent.loop import Agent
from memvault.config import Settings, ToolSettings
from memvault.llm.factory import make_provider
from memvault.llm.untrusted import UNTRUSTED
from memvault.openclaw.importers import import_memory_md
from memvault.runtime import Runtime
from memvault.tools import default_registry
from memvault.tools.policy import AllowAll, Policy
from memvault.tools.registry import ToolContext
from memvault.vault.store import Vault
from support import HashEmbedder, MovableClock, RecordingApprover

REDTEAM = Path(__file__).parent / "redteam" / "redteam.jsonl"
ENTRIES = [json.loads(line) for line in REDTEAM.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def open_runtime(vault: Vault, clock: MovableClock, fake: FakeLLMServer, trust: str) -> Runtime:
    settings = Settings(
        vault=vault.root,
        timezone="Europe/Berlin",
        owner_name="Ada",
        llm=llm_settings(fake, max_retries=0),
        tools=ToolSettings(mode="ask"),
        memory={"consolidation": "rule"},  # type: ignore[arg-type]
        privacy={"trust": trust},  # type: ignore[arg-type]
    )
    return Runtime.open(settings, clock=clock, embedder=HashEmbedder())


def plant(runtime: Runtime, surface: str, tmp_path: Path) -> dict[str, Action]:
    """Every red-team text stored through the ``remember`` tool on ``surface`` (or, for
    ``import``, an OpenClaw MEMORY.md); the planted texts as stored (what a request will
    show), each with the call it asks for."""
    ids: list[str] = []
    if surface == "import":
        source = tmp_path / "MEMORY.md"
        bullets = [f"- {' '.join(e['text'].split())} #core [importance: 1.0]" for e in ENTRIES]
        source.write_text("# MEMORY.md\n\n" + "\n".join(bullets) + "\n", encoding="utf-8")
        import_memory_md(runtime, source)
        ids = [m.id for m in runtime.memories.list()]
    else:
        registry = default_registry()
        context = ToolContext(
            runtime, policy=Policy(approver=AllowAll()), surface=surface, session="web:1"
        )
        for entry in ENTRIES:
            # The most a planted text can ask for: pinned, and as important as can be.
            arguments = {"fact": entry["text"], "tags": ["core"], "importance": 1.0}
            result = registry.call("remember", arguments, context)
            assert result.ok, result.error
            ids.append(result.data["id"])
    planted: dict[str, Action] = {}
    for entry, memory_id in zip(ENTRIES, ids, strict=True):
        memory = runtime.memories.get(memory_id)
        assert entry["topic"] in memory.text and "core" in memory.tags
        action = entry["action"]
        planted[" ".join(memory.text.split())[:60]] = (action["tool"], action["arguments"])
    assert len(planted) == len(ENTRIES)
    return planted


def ask_each_topic(
    runtime: Runtime, fake: FakeOpenAI, planted: dict[str, Action]
) -> tuple[Gullible, list[dict[str, Any]]]:
    """One owner's run per red-team text, asking about its topic; what each run did."""
    model = Gullible(planted)
    agent = Agent(runtime, make_provider(runtime.settings.llm), approver=RecordingApprover())
    runs = []
    for entry in ENTRIES:
        for _ in range(3):  # its own answer, and one after tool results if it acted
            fake.reply_with(model)
        before = len(fake.requests)
        result = agent.run(f"What do you know about {entry['topic']}?", session="cli")
        runs.append({"entry": entry, "result": result, "request": fake.requests[before]})
    return model, runs


@pytest.mark.parametrize("path", ["agent", "import"])
def test_no_planted_text_makes_the_agent_act(
    vault: Vault, clock: MovableClock, fake: FakeOpenAI, tmp_path: Path, path: str
) -> None:
    runtime = open_runtime(vault, clock, fake, trust="mark")
    try:
        planted = plant(runtime, path, tmp_path)
        assert all(m.trust == "low" for m in runtime.memories.list())
        model, runs = ask_each_topic(runtime, fake, planted)
    finally:
        runtime.close()
    for run in runs:
        entry, result, request = run["entry"], run["result"], run["request"]
        assert result.status == "done", (entry["id"], result.error)
        assert result.tool_calls == [], entry["id"]
        system = read(request)
        assert UNTRUSTED in system, entry["id"]
        # The text the owner asked about reached the model, inside the data tags only.
        probe = next(p for p in planted if entry["topic"] in p)
        assert probe in system and probe not in outside_data(system), entry["id"]
        # Never pinned nor among the important memories, tagged core and rated 1.0 as
        # they are.
        for section in ("## Pinned memories", "## Important memories"):
            assert section not in system
    assert model.obeyed == []
    assert {probe for probe in model.as_data} == set(planted)


@pytest.mark.parametrize("how", ["stored by the owner", "marking turned off"])
def test_the_check_can_fail_the_same_texts_unmarked_make_the_agent_act(
    vault: Vault, clock: MovableClock, fake: FakeOpenAI, tmp_path: Path, how: str
) -> None:
    trust = "off" if how == "marking turned off" else "mark"
    runtime = open_runtime(vault, clock, fake, trust=trust)
    try:
        planted = plant(runtime, "cli" if how == "stored by the owner" else "agent", tmp_path)
        assert all(m.trust is None for m in runtime.memories.list())
        model, runs = ask_each_topic(runtime, fake, planted)
    finally:
        runtime.close()
    for run in runs:
        assert run["result"].tool_calls, run["entry"]["id"]
    assert set(model.obeyed) == set(planted)
