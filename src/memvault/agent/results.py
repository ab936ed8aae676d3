"""What a run of the agent tells its callers: the steps as they happen and the result.

Apart from the loop so the surfaces that show a run (the daemon's event stream, the
HTTP route, the CLI) read its shapes without the loop's machinery.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memvault.llm.base import Usage


class RunCancelledError(Exception):
    """The run was cancelled."""


@dataclass(frozen=True)
class Step:
    """Something that happened during a run, for progress displays and event streams."""

    # run_started, model_call, tool_call, tool_result, defensive_memory, trimmed,
    # session_ended, tasks_updated, run_finished
    kind: str
    data: dict[str, Any]


StepSink = Callable[[Step], None]


@dataclass
class RunResult:
    """How a run went."""

    status: str  # done | failed | cancelled
    answer: str
    summary: str
    iterations: int
    session: str
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    # The model answered only a protocol token (HEARTBEAT_OK, NO_REPLY): nothing to send.
    silent: bool = False

    @property
    def ok(self) -> bool:
        """True when the run finished with an answer."""
        return self.status == "done"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "status": self.status,
            "answer": self.answer,
            "summary": self.summary,
            "iterations": self.iterations,
            "session": self.session,
            "model": self.model,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
            "tool_calls": self.tool_calls,
            "error": self.error,
        }
