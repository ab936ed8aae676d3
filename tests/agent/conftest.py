"""An agent over a fresh vault, talking through the real SDKs to a fake model on loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from llm_fakes import FakeAnthropic, FakeLLMServer, FakeOpenAI, llm_settings
from memvault.agent.loop import Agent
from memvault.config import AgentSettings, Settings, ToolSettings
from memvault.llm.factory import make_provider
from memvault.runtime import Runtime
from memvault.vault.store import Vault
from support import HashEmbedder, MovableClock, RecordingApprover

Owner = RecordingApprover  # the person at the terminal


@pytest.fixture(params=["openai", "anthropic"])
def fake(request: pytest.FixtureRequest) -> Iterator[FakeLLMServer]:
    server: FakeLLMServer = FakeOpenAI() if request.param == "openai" else FakeAnthropic()
    with server:
        yield server


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


AgentFactory = Callable[..., Agent]


@pytest.fixture
def make_agent(vault: Vault, clock: MovableClock, embedder: HashEmbedder) -> Iterator[AgentFactory]:
    """``make_agent(fake, owner=..., mode=..., llm=..., **agent_settings)``."""
    opened: list[Runtime] = []

    def build(
        server: FakeLLMServer,
        *,
        owner: Owner | None = None,
        mode: str = "ask",
        llm: dict[str, Any] | None = None,
        **agent: Any,
    ) -> Agent:
        settings = Settings(
            vault=vault.root,
            timezone="Europe/Berlin",
            owner_name="Ada",
            llm=llm_settings(server, **(llm or {})),
            agent=AgentSettings(**agent),
            tools=ToolSettings(mode=mode),  # type: ignore[arg-type]
        )
        runtime = Runtime.open(settings, clock=clock, embedder=embedder)
        opened.append(runtime)
        return Agent(runtime, make_provider(settings.llm), approver=owner or Owner())

    yield build
    for runtime in opened:
        runtime.close()


def system_of(request: dict[str, Any]) -> str:
    """The system prompt a request carried (either API's shape)."""
    if "system" in request:
        system = request["system"]
        return system if isinstance(system, str) else "".join(b["text"] for b in system)
    return "".join(m["content"] for m in request["messages"] if m["role"] == "system")


def tool_results(request: dict[str, Any]) -> list[str]:
    """The text of every tool result in a request (either API's shape)."""
    out: list[str] = []
    for message in request["messages"]:
        if message["role"] == "tool":
            out.append(message["content"])
        elif isinstance(message.get("content"), list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    out.append(
                        content
                        if isinstance(content, str)
                        else "".join(c.get("text", "") for c in content)
                    )
    return out


def user_texts(request: dict[str, Any]) -> list[str]:
    """The text of every user message in a request (either API's shape)."""
    out: list[str] = []
    for message in request["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out.extend(b["text"] for b in content if b.get("type") == "text")
    return out
