"""Agent runs as recorded: what each was given, what it recalled and what it called."""

from __future__ import annotations

from pydantic import Field

from memvault.gateway.schemas.base import Result


class RunOut(Result):
    id: int
    started_at: str
    finished_at: str | None
    surface: str = Field(description="Where it came from: cli, channel, http, mcp or job.")
    command: str = Field(description="What it was asked (capped).")
    status: str = Field(description="done, failed or cancelled")
    summary: str
    session_key: str | None
    session_id: int | None
    turn: int | None = Field(description="The id of the session's message that asked.")
    channel: str | None
    sender: str | None
    agent: str | None = Field(description="The named token's agent; null for the owner.")
    audience: str | None
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    iterations: int
    error: str | None


class RunSection(Result):
    title: str
    shown: list[str] = Field(description="The lines the context held.")
    left_out: list[str] = Field(description="Lines the token budget left out (the first 40).")
    left_out_count: int


class RunContext(Result):
    """Empty when the run built no context."""

    budget_tokens: int | None = Field(None, description="null for a job's own prompt")
    tokens: int | None = None
    notice: str | None = None
    sections: list[RunSection] = Field(default_factory=list)


class RecalledHit(Result):
    id: str | None = Field(description="The memory's id; null for a note.")
    path: str
    score: float
    vector_score: float
    text_score: float
    line: str
    shown: bool = Field(description="Whether the budget let it into the context.")


class RunToolCall(Result):
    name: str
    arguments: str = Field(description="As JSON text (capped).")
    ok: bool
    code: str | None
    result: str = Field(description="The result text (capped).")


class RunDetail(RunOut):
    context: RunContext = Field(description="Section by section, with what the budget left out.")
    recalled: list[RecalledHit]
    tool_calls: list[RunToolCall]
