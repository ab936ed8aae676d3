"""What each agent run was given (``agent_runs`` in state.db, or PostgreSQL's).

The console's "Why did it say that" page answers from here. A run of the agent (the
CLI's ``ask`` and ``chat``, a channel's message, ``POST /v1/agent/run``, a job that asks
the model) is recorded once it ends, in one row: its session and the turn (the id of
the message that asked), where it came from, the context it was given section by
section (the lines shown, and those left out for the token budget), the memories and
notes the context's search recalled with their scores, each tool call with its
arguments and (capped) result, the model and its tokens.

What is recorded is data, never instructions: a channel's text is kept as it came
(secrets redacted, as in the sessions' log) and a page shows it escaped. The log is
bounded: rows older than ``[agent] runs_keep_days`` go (checked at most once a minute
as runs are written, and by :meth:`RunRecords.prune`); ``runs_keep_days = 0`` records
nothing. Recording never fails a run: the agent logs what could not be written.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memvault.acting import confined_agent, sees
from memvault.errors import NotFoundError
from memvault.memory.context_budget import ContextResult
from memvault.memory.state import StateStore
from memvault.memory.windowed import WindowedLog, utc_text
from memvault.text import TextScreen, cut

LISTED = 50  # runs a list shows by default
MAX_COMMAND = 4_000
MAX_LINE = 600  # a context line kept
MAX_RECALLED_LINE = 200  # a recalled hit's line (its whole line is in its section)
MAX_LEFT_OUT = 40  # left-out lines kept per section (the rest counted)
MAX_ARGUMENTS = 4_000  # a tool call's arguments, as JSON
MAX_RESULT = 2_000  # a tool call's result text
MAX_CALLS = 50
MARKS = 3  # recalled memories a transcript marks on a turn (the run's page lists them all)
MARK_CHARS = 90
SURFACES = ("cli", "channel", "http", "mcp", "job")
_LIGHT = (
    "id, session_id, turn, session_key, started_at, finished_at, surface, channel, sender, "
    "agent, audience, command, status, summary, model, input_tokens, output_tokens, "
    "iterations, error"
)


def context_record(result: ContextResult) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A built context as a run keeps it: each section's lines shown and left out (long
    lines and long lists capped) and the budget; and the search's recalled hits, each
    with its scores, its line and whether the budget let it in."""
    sections = []
    relevant = None
    for section in result.sections:
        shown = set(section.shown)
        left = [line for line in section.items if line not in shown]
        sections.append(
            {
                "title": section.title,
                "shown": [cut(line, MAX_LINE) for line in section.shown],
                "left_out": [cut(line, MAX_LINE) for line in left[:MAX_LEFT_OUT]],
                "left_out_count": len(left),
            }
        )
        if relevant is None and section.title.startswith("Relevant to:"):
            relevant = section
    relevant_shown = set(relevant.shown) if relevant is not None else set()
    recalled = []
    for n, hit in enumerate(result.recalled):
        line = relevant.items[n] if relevant is not None and n < len(relevant.items) else ""
        recalled.append(
            {
                "id": hit.id,
                "path": hit.path,
                "score": round(hit.score, 4),
                "vector_score": round(hit.vector_score, 4),
                "text_score": round(hit.text_score, 4),
                "line": cut(line, MAX_RECALLED_LINE),
                # A hit the audience's context found (no "Relevant" section of the owner's
                # builder) was shown unless the budget cut its section.
                "shown": line in relevant_shown if relevant is not None else True,
            }
        )
    context = {
        "budget_tokens": result.budget_tokens,
        "tokens": result.tokens,
        "notice": result.notice,
        "sections": sections,
    }
    return context, recalled


MAX_PROMPT_LINES = 200  # a prompt message's lines kept (the rest counted as left out)


def prompt_record(messages: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """A job's prompt as a run keeps its context: a section per message (``role``,
    ``content``), its lines capped; a job builds its prompt itself, with no budget, so
    nothing is left out (a long message's last lines are counted, not kept)."""
    sections = []
    for role, content in messages:
        lines = [line for line in content.splitlines() if line.strip()]
        kept = [cut(line, MAX_LINE) for line in lines[:MAX_PROMPT_LINES]]
        if len(lines) > MAX_PROMPT_LINES:
            kept.append(f"… and {len(lines) - MAX_PROMPT_LINES} more lines, not kept")
        sections.append(
            {"title": f"The {role} message", "shown": kept, "left_out": [], "left_out_count": 0}
        )
    return {"budget_tokens": None, "tokens": None, "notice": None, "sections": sections}


def tool_call_record(
    name: str, arguments: Any, ok: bool, code: str | None, result: str
) -> dict[str, Any]:
    """One tool call as a run keeps it (arguments and result capped)."""
    shown = json.dumps(arguments, ensure_ascii=False, indent=2, default=str)
    return {
        "name": name,
        "arguments": cut(shown, MAX_ARGUMENTS),
        "ok": ok,
        "code": code,
        "result": cut(result, MAX_RESULT),
    }


@dataclass
class RunRecord:
    """One agent run: where it came from, what it was given, what it did."""

    started_at: datetime
    surface: str
    command: str
    status: str = "done"
    summary: str = ""
    finished_at: datetime | None = None
    session_key: str | None = None
    session_id: int | None = None
    turn: int | None = None  # the id of the session's message that asked
    channel: str | None = None
    sender: str | None = None
    agent: str | None = None
    audience: str | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    iterations: int = 0
    error: str | None = None
    context: dict[str, Any] = field(default_factory=dict)
    # The memories and notes the context's search recalled, with their scores.
    recalled: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "started_at": self.started_at.isoformat(timespec="seconds"),
            "finished_at": self.finished_at.isoformat(timespec="seconds")
            if self.finished_at
            else None,
            "surface": self.surface,
            "command": self.command,
            "status": self.status,
            "summary": self.summary,
            "session_key": self.session_key,
            "session_id": self.session_id,
            "turn": self.turn,
            "channel": self.channel,
            "sender": self.sender,
            "agent": self.agent,
            "audience": self.audience,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "iterations": self.iterations,
            "error": self.error,
            "context": self.context,
            "recalled": self.recalled,
            "tool_calls": self.tool_calls,
        }

    def to_listed_dict(self) -> dict[str, Any]:
        """JSON-ready form of a listed run: without its context, recalled hits and tool
        calls (a list never reads them)."""
        out = self.to_dict()
        for heavy in ("context", "recalled", "tool_calls"):
            del out[heavy]
        return out


class RunRecords(WindowedLog):
    """Records agent runs and answers which runs there were and what each was given
    (kept ``runs_keep_days``)."""

    table = "agent_runs"
    column = "started_at"

    def __init__(
        self,
        state: StateStore,
        now: Callable[[], datetime],
        *,
        keep_days: int = 30,
        screen: TextScreen | None = None,
    ) -> None:
        super().__init__(state, now, keep_days)
        self.screen = screen

    def record(self, run: RunRecord) -> int | None:
        """Store ``run`` (secrets redacted); its id, or None when nothing is recorded."""
        if not self.enabled:
            return None
        command = self._screened(cut(run.command, MAX_COMMAND))
        context = self._screened(run.context)
        recalled = self._screened(run.recalled)
        marks = _marks(recalled)
        calls = self._screened(run.tool_calls[:MAX_CALLS])
        finished = run.finished_at or self.now()
        with self.state.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO agent_runs (session_id, turn, session_key, started_at, "
                "finished_at, surface, channel, sender, agent, audience, command, status, "
                "summary, model, input_tokens, output_tokens, iterations, error, context, "
                "recalled, marks, tool_calls) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.session_id,
                    run.turn,
                    run.session_key,
                    utc_text(run.started_at),
                    utc_text(finished),
                    run.surface,
                    run.channel,
                    run.sender,
                    run.agent,
                    run.audience,
                    command,
                    run.status,
                    self._screened(run.summary),
                    run.model,
                    run.input_tokens,
                    run.output_tokens,
                    run.iterations,
                    self._screened(run.error) if run.error else None,
                    json.dumps(context, ensure_ascii=False),
                    json.dumps(recalled, ensure_ascii=False),
                    json.dumps(marks, ensure_ascii=False),
                    json.dumps(calls, ensure_ascii=False),
                ),
            )
            run_id = int(cursor.lastrowid or 0)
            self.prune_within(conn)
        run.id = run_id
        return run_id

    def _screened(self, value: Any) -> Any:
        """``value`` with the secrets of its text redacted (never refused: it was said)."""
        if self.screen is None:
            return value
        if isinstance(value, str):
            return self.screen(value, refuse=False)
        if isinstance(value, list):
            return [self._screened(v) for v in value]
        if isinstance(value, dict):
            return {k: self._screened(v) for k, v in value.items()}
        return value

    def list(
        self,
        *,
        session_id: int | None = None,
        channel: str | None = None,
        limit: int = LISTED,
    ) -> builtins.list[RunRecord]:
        """The newest runs within the window (of one session, or one channel), newest
        first, without their context and tool calls; a request confined to an agent gets
        that agent's runs only."""
        where = ["started_at >= ?"]
        params: builtins.list[Any] = [self.cutoff()]
        agent = confined_agent()
        if agent is not None:
            where.append("agent = ?")
            params.append(agent)
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        if channel:
            where.append("channel = ?")
            params.append(channel)
        rows = self.state.query(
            f"SELECT {_LIGHT} FROM agent_runs WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?",
            (*params, limit),
        )
        return [_record(row) for row in rows]

    def channels(self) -> builtins.list[str]:
        """The channels runs within the window came from, by name."""
        rows = self.state.query(
            "SELECT DISTINCT channel FROM agent_runs WHERE channel IS NOT NULL "
            "AND started_at >= ? ORDER BY channel",
            (self.cutoff(),),
        )
        return [str(row["channel"]) for row in rows]

    def get(self, run_id: int) -> RunRecord:
        """One run with everything it was given; NotFoundError when there is none (or it
        is past the window, or another agent's than the one a request is confined to)."""
        rows = self.state.query(
            f"SELECT {_LIGHT}, context, recalled, tool_calls FROM agent_runs "
            "WHERE id = ? AND started_at >= ?",
            (run_id, self.cutoff()),
        )
        if not rows or not sees(rows[0]["agent"]):
            raise NotFoundError(f"There is no agent run {run_id} (or it is older than kept).")
        row = rows[0]
        record = _record(row)
        record.context = json.loads(row["context"] or "{}")
        record.recalled = json.loads(row["recalled"] or "[]")
        record.tool_calls = json.loads(row["tool_calls"] or "[]")
        return record

    def of_session(self, session_id: int, since_turn: int = 0) -> dict[int, dict[str, Any]]:
        """The runs of a session asked by a turn (a message id) from ``since_turn`` on, by
        that turn: each run's ``id``, the best :data:`MARKS` memories its context recalled
        (``top``: their ids, scores and lines cut short) and how many ``more`` it did."""
        rows = self.state.query(
            "SELECT id, turn, marks FROM agent_runs WHERE session_id = ? AND turn >= ? "
            "AND started_at >= ? ORDER BY id",
            (session_id, since_turn, self.cutoff()),
        )
        out: dict[int, dict[str, Any]] = {}
        for row in rows:
            marks = json.loads(row["marks"] or "{}")
            out[int(row["turn"])] = {
                "id": int(row["id"]),
                "top": marks.get("top", []),
                "more": int(marks.get("more", 0)),
            }
        return out


def _marks(recalled: list[dict[str, Any]]) -> dict[str, Any]:
    """What a transcript marks of a run's recalled hits: the best :data:`MARKS` memories
    (id, score as shown, line cut short), and how many more memories it recalled."""
    memories = [hit for hit in recalled if str(hit.get("id") or "").startswith("m-")]
    top = []
    for hit in memories[:MARKS]:
        line = str(hit.get("line", "")).removeprefix("- ")
        top.append(
            {
                "id": str(hit["id"]),
                "score": f"{float(hit.get('score', 0)):.3f}",
                "line": cut(line, MARK_CHARS),
            }
        )
    return {"top": top, "more": max(len(memories) - MARKS, 0)}


def _when(value: Any) -> datetime | None:
    return datetime.fromisoformat(str(value)) if value else None


def _record(row: Any) -> RunRecord:
    started = _when(row["started_at"])
    assert started is not None  # NOT NULL
    return RunRecord(
        id=int(row["id"]),
        started_at=started,
        finished_at=_when(row["finished_at"]),
        surface=str(row["surface"]),
        command=str(row["command"]),
        status=str(row["status"]),
        summary=str(row["summary"] or ""),
        session_key=row["session_key"],
        session_id=row["session_id"],
        turn=row["turn"],
        channel=row["channel"],
        sender=row["sender"],
        agent=row["agent"],
        audience=row["audience"],
        model=row["model"],
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        iterations=int(row["iterations"] or 0),
        error=row["error"],
    )
