"""The memory-aware agent loop: load memory, use tools, persist the outcome.

:meth:`Agent.run` is one command of one session:

1. **Before**: the context builder's Markdown for the command goes into a
   system prompt (:mod:`memvault.agent.prompt`); earlier turns of the
   session are replayed; the tools come from the registry.
2. **During**: the model is called until it answers without tool calls, at
   most ``agent.max_iterations`` times. Every tool call goes through the
   registry, so the tier policy and the :class:`~memvault.tools.policy.Approver`
   decide; a refused or failed call is fed back to the model as an error.
   When the conversation nears the model's context window, the model is
   asked once to ``remember`` what is durable, then older turns are dropped.
3. **After**: the journal, ``Current Status.md`` and, on failure,
   ``Known Issues.md`` are written (:mod:`memvault.memory.outcomes`); the
   tasks the run closed or blocked, by its tools or, for the owner, as its
   answer says, are updated and journaled (:mod:`memvault.memory.task_outcomes`).
   What the run was given (its context section by section, the memories recalled
   with their scores, its tool calls) is recorded (:mod:`memvault.memory.runs`);
   a failure to record is logged, never the run's.

Every message (user, assistant, tool) is logged to the session. A run can be
cancelled (a :class:`threading.Event`, or Ctrl-C at the terminal); it then
stops cleanly between steps and records itself as cancelled.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from memvault.acting import acting_as, current_actor
from memvault.agent.prompt import PromptFacts, build_system_prompt
from memvault.agent.results import RunCancelledError, RunResult, Step, StepSink
from memvault.agent.sessions import SessionCloser
from memvault.agent.window import DEFENSIVE_PROMPT, request_tokens, trim_to_window
from memvault.errors import InvalidInputError, MemvaultError
from memvault.llm.base import (
    ChatMessage,
    Completion,
    LLMError,
    Provider,
    TextSink,
    ToolCall,
    ToolSpec,
    Usage,
)
from memvault.memory.context import Underway
from memvault.memory.context_budget import ContextResult, checked_budget
from memvault.memory.outcomes import RunOutcome, one_line
from memvault.memory.runs import RunRecord, context_record, tool_call_record
from memvault.memory.sessions import Message, Session, check_key
from memvault.memory.task_outcomes import TaskChange, TaskOutcomes, change_from_call
from memvault.privacy.audiences import OWNER_KIND, Audience
from memvault.privacy.reads import current_way, reading
from memvault.privacy.trust import as_kept
from memvault.privacy.views import AudienceView
from memvault.protocol_tokens import StreamFilter, is_only_protocol, strip_protocol_tokens
from memvault.runtime import Runtime
from memvault.tools import ToolRegistry, default_registry
from memvault.tools.audience_tools import audience_registry
from memvault.tools.policy import Approver, DenyAll, Policy
from memvault.tools.registry import Tool, ToolContext, ToolResult

# The names the rest of memvault imports from here (a run's shapes among them).
__all__ = [
    "DEFENSIVE_PROMPT",
    "MAX_LOGGED_TOOL_CHARS",
    "MAX_TOOL_RESULT_CHARS",
    "Agent",
    "RunCancelledError",
    "RunResult",
    "Step",
    "StepSink",
]

log = logging.getLogger(__name__)

MAX_TOOL_RESULT_CHARS = 16_000
MAX_LOGGED_TOOL_CHARS = 4_000

LogMessage = Callable[..., tuple[Session, Message]]


@dataclass
class _Run:
    key: str
    policy: Policy
    cancel: threading.Event
    emit: StepSink
    on_text: TextSink | None
    channel: str | None
    registry: ToolRegistry
    specs: list[ToolSpec]
    # A narrowed audience's view (a contact, a group); None: the owner's whole memory.
    view: AudienceView | None = None
    audience: Audience | None = None
    sender: str | None = None  # who writes, when not the owner at the terminal
    sender_note: str | None = None  # their contact note
    iterations: int = 0
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    last_prompt_tokens: int = 0
    warned: bool = False
    calls: list[dict[str, Any]] = field(default_factory=list)
    task_changes: list[TaskChange] = field(default_factory=list)  # by the run's task tools
    # What the run's record keeps (memvault.memory.runs).
    surface: str = "cli"
    started: datetime | None = None
    session_id: int | None = None
    turn: int | None = None  # the id of the message that asked
    context: ContextResult | None = None
    tool_records: list[dict[str, Any]] = field(default_factory=list)


class Agent:
    """Runs commands for the owner with memory, tools and approvals."""

    def __init__(
        self,
        runtime: Runtime,
        provider: Provider,
        *,
        registry: ToolRegistry | None = None,
        approver: Approver | None = None,
        mode: str | None = None,
        index_followed: bool = False,
        log_message: LogMessage | None = None,
        closer: SessionCloser | None = None,
    ) -> None:
        self.runtime = runtime
        self.provider = provider
        self.settings = runtime.settings.agent
        self.registry = registry or default_registry()
        self.approver: Approver = approver or DenyAll()
        self.mode = mode or runtime.settings.tools.mode
        self.index_followed = index_followed
        self._log = log_message or runtime.sessions.log
        self.closer = closer or SessionCloser(
            runtime.sessions, self.settings, provider, trust=runtime.settings.privacy.trust
        )
        self._policies: dict[str, Policy] = {}
        self._specs: list[ToolSpec] | None = None
        self._lock = threading.Lock()

    # -- sessions ---------------------------------------------------------------------

    def policy(self, key: str) -> Policy:
        """The approvals of one session (tier-2 categories are approved once per session)."""
        with self._lock:
            if key not in self._policies:
                self._policies[key] = Policy(approver=self.approver, mode=self.mode)
            return self._policies[key]

    def end_session(self, key: str) -> Session:
        """End the key's session with a summary; its approvals are forgotten."""
        with self._lock:
            self._policies.pop(key, None)
        return self.closer.end(key)

    def _history(self, key: str) -> list[ChatMessage]:
        """Earlier user and assistant turns of the key's open session."""
        limit = self.settings.history_messages
        if limit == 0:
            return []
        try:
            session = self.runtime.sessions.get(key)
        except MemvaultError:
            return []
        if not session.active:
            return []
        turns: list[ChatMessage] = []
        for message in self.runtime.sessions.messages(session.id, limit=limit):
            if message.role == "user":
                turns.append(ChatMessage("user", message.text))
            elif message.role == "assistant" and not (
                message.metadata and message.metadata.get("tool_calls")
            ):
                turns.append(ChatMessage("assistant", message.text))
        while turns and turns[0].role != "user":
            turns.pop(0)
        return turns

    # -- the run ----------------------------------------------------------------------

    def run(
        self,
        command: str,
        *,
        session: str = "cli",
        channel: str | None = None,
        sender: str | None = None,
        on_text: TextSink | None = None,
        on_step: StepSink | None = None,
        cancel: threading.Event | None = None,
        policy: Policy | None = None,
        recorded: bool = False,
        sender_note: str | None = None,
        audience: Audience | None = None,
        surface: str | None = None,
    ) -> RunResult:
        """Run one command in a session; the outcome is persisted whatever happens.

        ``recorded`` says the command is already the session's last message (a channel
        logged it when it arrived), so it is neither logged nor replayed twice.
        ``sender_note`` is the writer's contact note, shown to the model with ``sender``.
        ``audience`` is whom the conversation is with: a contact or a group gets only what
        is shared with them, and only the tools of that view (the owner: everything).
        ``surface`` is where the run came from, for its record (``cli``, ``channel``,
        ``http``; by default a recorded command's channel, else the request's way in).
        """
        command = command.strip()
        if not command:
            raise InvalidInputError("The command is empty; say what the agent should do.")
        key = check_key(session)
        if channel is None and key == "cli":
            channel = "cli"  # the terminal's own session
        view = None
        registry, specs = self.registry, self._tool_specs()
        if audience is not None and audience.narrowed:
            view = self.runtime.audience_view(audience)
            registry = audience_registry(view, by=sender or audience.display, channel=channel)
            specs = _specs(registry.offered(self.runtime.settings))
        run = _Run(
            key=key,
            policy=policy or self.policy(key),
            cancel=cancel or threading.Event(),
            emit=on_step or (lambda step: None),
            on_text=on_text,
            channel=channel,
            registry=registry,
            specs=specs,
            view=view,
            audience=audience,
            sender=sender,
            sender_note=sender_note,
            surface=surface or _surface(channel, recorded),
            started=self.runtime.clock.now(),
        )
        # Every layer below learns whom the conversation is with (records, trust of text).
        label = audience.label if audience is not None else None
        actor = replace(current_actor(), audience=label)
        with acting_as(actor), reading(surface="agent"):
            return self._go(command, run, recorded)

    def _go(self, command: str, run: _Run, recorded: bool) -> RunResult:
        key, channel = run.key, run.channel
        try:
            if recorded:
                history = self._history(key)
                if history and history[-1].role == "user":
                    history.pop()
                logged = self.runtime.sessions.get(key)
                run.turn = self._asked(logged, command)
            else:
                self._end_if_idle(run)
                history = self._history(key)
                logged, asked = self._log(
                    key, command, role="user", channel=channel, sender=run.sender
                )
                run.turn = asked.id
            run.session_id = logged.id
            run.emit(Step("run_started", {"session": key, "command": command}))
            result = self._run(command, logged, history, run)
        except (RunCancelledError, KeyboardInterrupt):
            result = self._result(run, "cancelled", "", "cancelled by the owner")
        except LLMError as exc:
            result = self._result(run, "failed", "", exc.message)
        someone_else = run.audience is not None and run.audience.kind != OWNER_KIND
        self._persist(command, result, someone_else=someone_else)
        self._persist_tasks(result, run, someone_else=someone_else)
        self._record_run(command, result, run)
        run.emit(Step("run_finished", result.to_dict()))
        return result

    def _tool_specs(self) -> list[ToolSpec]:
        """The registry's tools as the model sees them (schemas are built once)."""
        if self._specs is None:
            self._specs = _specs(self.registry.offered(self.runtime.settings))
        return self._specs

    def _end_if_idle(self, run: _Run) -> None:
        """End the session first when it has gone quiet; a failed summary leaves it open."""
        try:
            ended = self.closer.end_if_idle(run.key)
        except MemvaultError as exc:
            log.warning("could not end the idle session", extra={"error": exc.message})
            return
        if ended is not None:
            with self._lock:
                self._policies.pop(run.key, None)
            run.emit(Step("session_ended", ended.to_dict()))

    def _run(
        self,
        command: str,
        session: Session,
        history: list[ChatMessage],
        run: _Run,
    ) -> RunResult:
        budget = self.settings.context_budget
        # What this session said is in the messages below: search shows the rest.
        underway = Underway(session.key, session.started_at)
        if run.view is not None:
            within = checked_budget(budget, self.runtime.settings.context)
            run.context = run.view.context(command, within, underway=underway)
        else:
            run.context = self.runtime.context.build_result(
                query=command, budget_tokens=budget, underway=underway
            )
        context = run.context.markdown
        tools = run.specs
        system = build_system_prompt(
            PromptFacts(
                agent_name=self.settings.name,
                owner=self.runtime.settings.owner_name,
                now=self._now(),
                channel=session.channel if run.channel is None else run.channel,
                context=context,
                tool_names=tuple(t.name for t in tools),
                sender=run.sender if run.sender_note is not None else None,
                sender_note=run.sender_note,
                audience=run.audience.display if run.view and run.audience else None,
            )
        )
        messages = [ChatMessage("system", system), *history, ChatMessage("user", command)]
        tool_chars = len(json.dumps([t.input_schema for t in tools])) + sum(
            len(t.description) for t in tools
        )
        for iteration in range(1, self.settings.max_iterations + 1):
            self._check(run)
            messages = self._defend(messages, tool_chars, run)
            run.iterations = iteration  # counted when asked, so a failed call counts too
            completion = self._complete(messages, tools, run)
            messages.append(ChatMessage("assistant", completion.text, completion.tool_calls))
            self._log_assistant(completion, run)
            if not completion.tool_calls:
                if is_only_protocol(completion.text):
                    result = self._result(run, "done", "", "nothing to say (a protocol token)")
                    result.silent = True
                    return result
                # A protocol token never reaches a person, on any path that shows the answer.
                answer = strip_protocol_tokens(completion.text).strip()
                if completion.stop_reason == "length":
                    answer += "\n\n(The answer was cut off at the model's output limit.)"
                summary = _first_sentence(answer) if answer else "no answer text"
                return self._result(run, "done", answer, summary)
            for call in completion.tool_calls:
                self._check(run)
                messages.append(self._call_tool(call, run))
        limit = self.settings.max_iterations
        return self._result(
            run,
            "failed",
            "",
            f"stopped after {limit} model calls without a final answer "
            "(raise agent.max_iterations or split the request)",
        )

    def _complete(
        self, messages: list[ChatMessage], tools: list[ToolSpec], run: _Run
    ) -> Completion:
        # The streamed answer passes the protocol-token filter here, once for every
        # surface that shows it (the terminal, the HTTP event stream).
        tokens = StreamFilter()

        def sink(text: str) -> None:
            if run.cancel.is_set():
                raise RunCancelledError
            shown = tokens.feed(text)
            if run.on_text is not None and shown:
                run.on_text(shown)

        run.emit(Step("model_call", {"iteration": run.iterations}))
        completion = self.provider.complete(messages, tools, on_text=sink)
        rest = tokens.flush()
        if run.on_text is not None and rest:
            run.on_text(rest)
        run.usage = run.usage + completion.usage
        run.model = completion.model
        run.last_prompt_tokens = completion.usage.input_tokens + completion.usage.output_tokens
        return completion

    def _call_tool(self, call: ToolCall, run: _Run) -> ChatMessage:
        run.emit(Step("tool_call", {"id": call.id, "name": call.name, "arguments": call.arguments}))
        if call.invalid is not None:
            result = ToolResult(
                False,
                error=f"The arguments for {call.name} were not a JSON object "
                f"({one_line(call.invalid, 80)!r}); send them as a JSON object.",
                code="validation_failed",
            )
        else:
            context = ToolContext(
                self.runtime,
                policy=run.policy,
                surface="agent",
                session=run.key,
                index_followed=self.index_followed,
            )
            result = run.registry.call(call.name, call.arguments, context)
            if result.ok:
                run.task_changes += change_from_call(call.name, call.arguments, result.data)
        text = result.text()
        if len(text) > MAX_TOOL_RESULT_CHARS:
            text = text[:MAX_TOOL_RESULT_CHARS] + "\n[... cut: ask for less, e.g. a smaller limit]"
        record = {"name": call.name, "ok": result.ok, "code": result.code}
        run.calls.append(record)
        run.tool_records.append(
            tool_call_record(call.name, call.arguments, result.ok, result.code, text)
        )
        run.emit(Step("tool_result", {"id": call.id, **record, "text": one_line(text, 300)}))
        self._log(
            run.key,
            text[:MAX_LOGGED_TOOL_CHARS],
            role="tool",
            direction="outbound",
            channel=run.channel,
            metadata={"tool": call.name, "tool_call_id": call.id, "ok": result.ok},
        )
        return ChatMessage("tool", text, tool_call_id=call.id, is_error=not result.ok)

    def _log_assistant(self, completion: Completion, run: _Run) -> None:
        calls = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in completion.tool_calls
        ]
        # A protocol token is memvault's business, not a turn of the conversation.
        text = strip_protocol_tokens(completion.text).strip()
        if not text and not calls:
            return
        metadata: dict[str, Any] = {"model": completion.model}
        if calls:
            metadata["tool_calls"] = calls
        if not text:
            metadata["kind"] = "tool_calls"
            text = "(called " + ", ".join(c.name for c in completion.tool_calls) + ")"
        self._log(run.key, text, role="assistant", channel=run.channel, metadata=metadata)

    # -- defensive memory -------------------------------------------------------------

    def _defend(self, messages: list[ChatMessage], tool_chars: int, run: _Run) -> list[ChatMessage]:
        """Ask once for memories near the context limit; afterwards drop the oldest turns."""
        window = self.provider.context_window
        threshold = self.settings.defensive_ratio * window
        used = max(request_tokens(messages, tool_chars), run.last_prompt_tokens)
        if used < threshold:
            return messages
        if not run.warned:
            run.warned = True
            run.emit(Step("defensive_memory", {"tokens": used, "window": window}))
            return [*messages, ChatMessage("user", DEFENSIVE_PROMPT)]
        trimmed, dropped = trim_to_window(messages, tool_chars, int(threshold * 0.6))
        if dropped:
            run.last_prompt_tokens = 0
            run.emit(Step("trimmed", {"dropped": dropped, "window": window}))
        return trimmed

    # -- bookkeeping ------------------------------------------------------------------

    def _check(self, run: _Run) -> None:
        if run.cancel.is_set():
            raise RunCancelledError

    def _now(self) -> str:
        now = self.runtime.clock.now()
        return f"{now.strftime('%A %Y-%m-%d %H:%M')} ({self.runtime.clock.tz})"

    def _result(self, run: _Run, status: str, answer: str, summary: str) -> RunResult:
        return RunResult(
            status=status,
            answer=answer,
            summary=summary,
            iterations=run.iterations,
            session=run.key,
            model=run.model,
            usage=run.usage,
            tool_calls=list(run.calls),
            error=summary if status == "failed" else None,
        )

    def _persist(self, command: str, result: RunResult, *, someone_else: bool = False) -> None:
        # The journal and Current Status are in every agent's context, not as data: the
        # model's summary, and the command of anyone but the owner, are kept there only
        # when they do not read as an instruction (memvault.privacy.trust).
        mode = self.runtime.settings.privacy.trust
        outcome = RunOutcome(
            command=as_kept(command, mode) if someone_else else command,
            status=result.status,
            summary=as_kept(result.summary, mode),
            iterations=result.iterations,
            session=result.session,
        )
        try:
            self.runtime.outcomes.record(outcome)
        except MemvaultError as exc:
            # The answer still reaches the owner; the log says what could not be written.
            log.error("could not record the run's outcome", extra={"error": exc.message})

    def _asked(self, session: Session, command: str) -> int | None:
        """The id of the message a channel logged for ``command`` (the session's latest
        such user message), for the run's record."""
        for message in reversed(self.runtime.sessions.messages(session.id, limit=5)):
            if message.role == "user" and message.text.strip() == command:
                return message.id
        return None

    def _record_run(self, command: str, result: RunResult, run: _Run) -> None:
        """Record what the run was given and did (:mod:`memvault.memory.runs`); a failure
        is logged: the answer still goes out."""
        runs = self.runtime.runs
        try:
            if not runs.enabled:
                return
            actor = current_actor()
            usage = result.usage
            counted = usage.input_tokens or usage.output_tokens
            context, recalled = context_record(run.context) if run.context else ({}, [])
            runs.record(
                RunRecord(
                    started_at=run.started or self.runtime.clock.now(),
                    surface=run.surface,
                    command=command,
                    status=result.status,
                    summary=result.summary,
                    session_key=run.key,
                    session_id=run.session_id,
                    turn=run.turn,
                    channel=run.channel,
                    sender=run.sender,
                    agent=actor.agent,
                    audience=run.audience.label if run.audience is not None else None,
                    model=result.model,
                    input_tokens=usage.input_tokens if counted else None,
                    output_tokens=usage.output_tokens if counted else None,
                    iterations=result.iterations,
                    error=result.error,
                    context=context,
                    recalled=recalled,
                    tool_calls=run.tool_records,
                )
            )
        except Exception:  # whatever broke, the run's answer still goes out
            log.warning("could not record the agent run", exc_info=True)

    def _persist_tasks(self, result: RunResult, run: _Run, *, someone_else: bool) -> None:
        """The tasks the run closed or blocked (:mod:`memvault.memory.task_outcomes`): its
        task tools' changes are journaled; a finished owner's run's answer that says a named
        open task is done or blocked updates it. Anyone else's conversation never does."""
        mode = self.runtime.settings.privacy.trust
        answer = result.answer if result.ok and not someone_else else ""

        def keep(text: str) -> str:
            return self.runtime.secrets(as_kept(text, mode), refuse=False)

        try:
            changed = TaskOutcomes(self.runtime.tasks, self.runtime.journal).record(
                run.task_changes, answer=answer, keep=keep
            )
        except MemvaultError as exc:
            log.error("could not record the run's task changes", extra={"error": exc.message})
            return
        if changed:
            run.emit(Step("tasks_updated", {"tasks": [c.to_dict() for c in changed]}))


def _surface(channel: str | None, recorded: bool) -> str:
    """Where a run came from when its caller does not say: a command a channel logged is
    the channel's; the terminal's own session the CLI's; else the request's way in."""
    if recorded:
        return "channel"
    if channel == "cli":
        return "cli"
    way = current_way().surface
    return way if way in ("http", "mcp", "job", "channel") else "cli"


def _specs(tools: list[Tool]) -> list[ToolSpec]:
    """Tools as a model is offered them."""
    return [ToolSpec(t.name, t.description, t.input_schema()) for t in tools]


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    for end in (". ", "! ", "? "):
        cut = flat.find(end)
        if 0 < cut < 200:
            return flat[: cut + 1]
    return one_line(flat, 200)
