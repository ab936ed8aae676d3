"""The language models and the agent."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from memvault.config.base import Section


class LLMPurposeSettings(Section):
    """Another model for one purpose (``[llm.jobs]``, ``[llm.replies]``): every field is
    optional and falls back to ``[llm]``'s; a different ``provider`` does not inherit
    ``[llm]``'s model, base_url or api_key_env."""

    provider: Literal["none", "openai", "anthropic"] | None = Field(
        None, description="none (no model for this purpose), openai or anthropic; default [llm]'s"
    )
    model: str | None = Field(None, description="model name, e.g. llama3.2; default [llm]'s")
    base_url: str | None = Field(
        None, description="API endpoint, e.g. http://localhost:11434/v1; default [llm]'s"
    )
    api_key_env: str | None = Field(
        None, description="environment variable holding the API key; default [llm]'s"
    )
    max_tokens: int | None = Field(None, ge=16, le=200_000, description="longest answer, in tokens")
    temperature: float | None = Field(None, ge=0, le=2, description="sampling temperature")
    context_window: int | None = Field(
        None, ge=1000, le=10_000_000, description="the model's context size, in tokens"
    )
    timeout: float | None = Field(None, gt=0, le=3600, description="seconds per request")
    max_retries: int | None = Field(
        None, ge=0, le=20, description="retries on 429, 5xx and timeouts"
    )
    retry_base_seconds: float | None = Field(None, gt=0, le=60, description="first backoff delay")
    retry_cap_seconds: float | None = Field(None, gt=0, le=600, description="longest backoff delay")
    unhealthy_after: int | None = Field(
        None, ge=1, le=100, description="failed calls in a row before doctor reports the model"
    )


class LLMSettings(Section):
    """The language model the agent runs on; ``none`` is a normal state."""

    provider: Literal["none", "openai", "anthropic"] = Field(
        "none",
        description="none, openai (any OpenAI-compatible API: OpenAI, Ollama, vLLM, LM Studio, "
        "OpenRouter, Gemini) or anthropic",
    )
    model: str | None = Field(None, description="model name, e.g. gpt-4o-mini or claude-sonnet-4-5")
    base_url: str | None = Field(
        None, description="API endpoint, e.g. http://localhost:11434/v1 for Ollama"
    )
    api_key_env: str | None = Field(
        None,
        description="environment variable holding the API key "
        "(default OPENAI_API_KEY or ANTHROPIC_API_KEY); the key is never stored in the vault",
    )
    max_tokens: int = Field(4096, ge=16, le=200_000, description="longest answer, in tokens")
    temperature: float | None = Field(None, ge=0, le=2, description="sampling temperature")
    context_window: int = Field(
        128_000, ge=1000, le=10_000_000, description="the model's context size, in tokens"
    )
    timeout: float = Field(120.0, gt=0, le=3600, description="seconds per request")
    max_retries: int = Field(4, ge=0, le=20, description="retries on 429, 5xx and timeouts")
    retry_base_seconds: float = Field(1.0, gt=0, le=60, description="first backoff delay")
    retry_cap_seconds: float = Field(30.0, gt=0, le=600, description="longest backoff delay")
    unhealthy_after: int = Field(
        3, ge=1, le=100, description="failed calls in a row before doctor reports the model"
    )
    jobs: LLMPurposeSettings = Field(
        default_factory=LLMPurposeSettings,
        description="the model of the background jobs (distill, daily note, living summary, "
        "heartbeat, skill discovery, knowledge graph); unset fields are [llm]'s",
    )
    replies: LLMPurposeSettings = Field(
        default_factory=LLMPurposeSettings,
        description="the model that answers channel messages; unset fields are [llm]'s",
    )

    @model_validator(mode="after")
    def _purposes_name_their_model(self) -> LLMSettings:
        for purpose in ("jobs", "replies"):
            own: LLMPurposeSettings = getattr(self, purpose)
            provider = own.provider or self.provider
            if provider not in ("none", self.provider) and not own.model:
                raise ValueError(
                    f"llm.{purpose}.provider is {provider!r}, not [llm]'s {self.provider!r}, "
                    f"so llm.{purpose}.model must name its model"
                )
            given = sorted(own.model_dump(exclude_none=True))
            if provider == "none" and own.provider is None and given:
                raise ValueError(
                    f"[llm.{purpose}] sets {', '.join(given)} but no "
                    f"provider, and [llm] has none; set llm.{purpose}.provider"
                )
        return self


class AgentSettings(Section):
    """The agent loop (``memvault ask``, ``memvault chat``, ``POST /v1/agent/run``)."""

    name: str = Field("memvault", description="what the agent calls itself")
    max_iterations: int = Field(12, ge=1, le=200, description="model calls per run at most")
    context_budget: int | None = Field(
        None, ge=50, le=200_000, description="memory context tokens; default context.budget_tokens"
    )
    history_messages: int = Field(
        20, ge=0, le=1000, description="earlier messages of the session replayed to the model"
    )
    defensive_ratio: float = Field(
        0.8,
        gt=0,
        lt=1,
        description="share of the context window at which the agent is asked to store memories",
    )
    session_idle_minutes: float = Field(
        30.0, gt=0, description="a session quiet this long is ended and summarised"
    )
    summary: Literal["auto", "llm", "extractive"] = Field(
        "auto", description="session summaries: auto (LLM when configured), llm or extractive"
    )
    runs_keep_days: int = Field(
        30,
        ge=0,
        le=3650,
        description="days each agent run's record is kept (its context, recalled memories "
        "and tool calls: the console's Why page); 0 records none",
    )
