"""``memvault ask`` (one run, streamed) and ``memvault chat`` (an interactive session).

Both run the agent in this process: the terminal is the approver, and the
answer streams as the model writes it. With a daemon serving the vault they
share its vault and session database; the daemon's watcher sees the notes
the run writes.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memvault.cli.common import (
    JsonOption,
    VaultOption,
    emit_json,
    open_runtime,
    report_error,
    stderr,
    stdout,
)
from memvault.errors import EXIT_FAILED, EXIT_INTERRUPTED
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from rich.text import Text

    from memvault.agent.loop import Agent, RunResult, Step
    from memvault.runtime import Runtime

SessionOption = Annotated[
    str,
    typer.Option("--session", "-s", help="Session key; turns of one session build on each other."),
]
YesOption = Annotated[
    bool,
    typer.Option("--yes", "-y", help="Approve every tool call without asking (tier 2 and 3)."),
]
CHAT_HELP = (
    "Commands: /new (end this session, start another), /remember TEXT, /recall TOPIC, "
    "/tasks, /help, /quit. Ctrl-C cancels a running answer."
)


class _Terminal:
    """Where the streamed answer and the step lines meet: each step on a line of its own.

    The answer goes to stdout; steps, approval questions and the footer go to
    stderr. Both usually end up on one terminal, so a step after half a line
    of answer text starts a new line. ``prefix`` (``agent > `` in chat) marks
    where the answer begins, and again where it resumes after steps.
    """

    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = prefix
        self.mid_line = False  # the last thing written to stdout left its line open
        self.resumed = False  # steps came in between: the next answer text gets the prefix

    def start(self) -> None:
        """Show the prefix before the model answers, so the wait is visibly the agent's."""
        self.resumed = False
        self._write_prefix()

    def text(self, chunk: str) -> None:
        """A piece of the answer as the model writes it."""
        if not chunk:
            return
        if self.resumed:
            self.resumed = False
            self._write_prefix()
        sys.stdout.write(chunk)
        sys.stdout.flush()
        self.mid_line = not chunk.endswith("\n")

    def step(self, step: Step) -> None:
        """A progress line (tool calls, failed tools, trimming) on stderr."""
        line = _step_line(step)
        if line is not None:
            self.end_line()
            stderr.print(line)
            self.resumed = True

    def note(self, message: str) -> None:
        """A warning (a retried model call, a summary not written) on a line of its own."""
        from rich.text import Text

        self.end_line()
        stderr.print(Text(f"  {message}", style="yellow"))
        self.resumed = True

    def ask(self, question: str) -> str:
        """An approval question on stderr, so a redirected or ``--json`` stdout stays clean."""
        self.end_line()
        self.resumed = True
        return stderr.get().input(f"[approval] {question}", markup=False)

    def end_line(self) -> None:
        """Finish the line the answer (or the prefix) left open."""
        if self.mid_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.mid_line = False

    def _write_prefix(self) -> None:
        from rich.text import Text

        if self.prefix:
            self.end_line()
            stdout.get().print(Text(self.prefix, style="bold cyan"), end="")
            self.mid_line = True


def _agent(runtime: Runtime, yes: bool, terminal: _Terminal) -> Agent:
    from memvault.agent.loop import Agent
    from memvault.channels.tools import full_registry
    from memvault.llm.factory import make_provider
    from memvault.tools.policy import AllowAll, TerminalApprover

    provider = make_provider(runtime.settings.llm)
    _show_warnings(terminal)
    approver = AllowAll() if yes else TerminalApprover(ask=terminal.ask)
    return Agent(runtime, provider, registry=full_registry(), approver=approver)


class _TerminalLog(logging.Handler):
    """Warnings of a run, for people: the message, its reason and wait, between the steps."""

    def __init__(self, terminal: _Terminal) -> None:
        super().__init__(logging.WARNING)
        self.terminal = terminal

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        detail = getattr(record, "error", None) or getattr(record, "reason", None)
        if detail:
            text += f": {detail}"
        wait = getattr(record, "wait_seconds", None)
        if wait is not None:
            text += f" (retrying in {wait} s)"
        self.terminal.note(text)


def _show_warnings(terminal: _Terminal | None) -> None:
    """Route memvault's warnings to ``terminal`` (the daemon logs JSON instead); None stops."""
    logger = logging.getLogger("memvault")
    for old in [h for h in logger.handlers if isinstance(h, _TerminalLog)]:
        logger.removeHandler(old)
    if terminal is not None:
        logger.addHandler(_TerminalLog(terminal))


def _step_line(step: Step) -> Text | None:
    from rich.text import Text

    if step.kind == "tool_call":
        return Text(f"  -> {step.data['name']} {_args(step.data['arguments'])}", style="dim")
    if step.kind == "tool_result" and not step.data["ok"]:
        return Text(f"  !! {step.data['name']}: {step.data['text']}", style="yellow")
    if step.kind == "defensive_memory":
        return Text("  (context nearly full: storing memories first)", style="dim")
    if step.kind == "trimmed":
        return Text(f"  (dropped {step.data['dropped']} older messages)", style="dim")
    if step.kind == "session_ended":
        return Text(f"  (the idle session {step.data['key']} was ended)", style="dim")
    return None


def _args(arguments: dict[str, Any]) -> str:
    import json

    text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def _footer(result: RunResult) -> None:
    from rich.text import Text

    calls = len(result.tool_calls)
    tokens = result.usage.input_tokens + result.usage.output_tokens
    parts = [
        result.status,
        counted(result.iterations, "model call"),
    ]
    if calls:
        parts.append(counted(calls, "tool call"))
    if tokens:
        parts.append(counted(tokens, "token"))
    if result.status == "failed":
        stderr.print(Text.assemble(("Failed:", "bold red"), " ", _sentence(result.summary)))
    elif result.status == "cancelled":
        stderr.print(Text("Cancelled.", style="yellow"))
    stderr.print(Text("(" + " · ".join(parts) + ")", style="dim"))


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def ask(
    ctx: typer.Context,
    command: Annotated[str, typer.Argument(help="What the agent should do or answer.")],
    session: SessionOption = "cli",
    yes: YesOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run the agent once: memory in, tools as needed, the answer streamed.

    Exit status: 0 done, 1 failed, 130 cancelled.
    """
    from memvault.errors import InvalidInputError

    if not command.strip():
        raise InvalidInputError("The command is empty; say what the agent should do.")
    runtime = open_runtime(ctx, vault)
    terminal = _Terminal()
    agent = _agent(runtime, yes, terminal)
    if as_json:
        result = agent.run(command, session=session, channel="cli")
        emit_json(result.to_dict())
    else:
        result = agent.run(
            command, session=session, channel="cli", on_text=terminal.text, on_step=terminal.step
        )
        terminal.end_line()
        _footer(result)
    runtime.close()
    _show_warnings(None)
    if result.status != "done":
        raise typer.Exit(EXIT_INTERRUPTED if result.status == "cancelled" else EXIT_FAILED)


def chat(
    ctx: typer.Context,
    session: SessionOption = "cli",
    yes: YesOption = False,
    vault: VaultOption = None,
) -> None:
    """Talk with the agent in the terminal; the session is summarised when it ends."""
    from rich.text import Text

    from memvault.errors import InvalidInputError, MemvaultError
    from memvault.memory.sessions import check_key
    from memvault.text import check_text

    session = check_key(session)  # a bad key fails now, not at every message
    runtime = open_runtime(ctx, vault)
    terminal = _Terminal(prefix="agent > ")
    agent = _agent(runtime, yes, terminal)
    console = stdout.get()
    console.print(
        Text.assemble(
            ("memvault chat", "bold"),
            f" · {agent.provider.name} {agent.provider.model} · session {session}",
        )
    )
    console.print(Text(CHAT_HELP, style="dim"))
    try:
        while True:
            try:
                line = console.input("\nyou > ", markup=False).strip()
            except (EOFError, KeyboardInterrupt):
                console.print()  # the shell's prompt starts on a line of its own
                break
            except UnicodeDecodeError:
                report_error(InvalidInputError("That line is not UTF-8 text; type it again."))
                continue
            if not line:
                continue
            try:
                check_text(line, "The line")
                if line.startswith("/"):
                    if not _slash(line, agent, runtime, session):
                        break
                    continue
                terminal.start()
                result = agent.run(
                    line,
                    session=session,
                    channel="cli",
                    on_text=terminal.text,
                    on_step=terminal.step,
                )
                terminal.end_line()
                _footer(result)
            except KeyboardInterrupt:
                # Ctrl-C before the run could cancel itself (or during a slash command)
                # stops this command, not the chat.
                terminal.end_line()
                stderr.print(Text("Cancelled.", style="yellow"))
            except MemvaultError as exc:
                # So does a command that cannot run (e.g. an idle session's summary failed).
                terminal.end_line()
                report_error(exc)
    finally:
        _end(agent, session)
        runtime.close()
        _show_warnings(None)


def _end(agent: Agent, session: str) -> None:
    from rich.text import Text

    from memvault.errors import MemvaultError, NotFoundError

    try:
        if agent.runtime.sessions.get(session).active:
            stderr.print(Text("Summarising the session...", style="dim"))
        ended = agent.end_session(session)
    except NotFoundError:
        return  # nothing was said in this session
    except MemvaultError as exc:
        report_error(exc)  # the session stays open; it is ended once it has been idle
        return
    summary = ended.summary or "no summary"
    stderr.print(Text(f"Session {ended.key} ended: {summary}", style="dim"))


def _slash(line: str, agent: Agent, runtime: Runtime, session: str) -> bool:
    """Run a slash command; False to quit."""
    from rich.text import Text

    from memvault.tools.policy import AllowAll, Policy
    from memvault.tools.registry import ToolContext

    name, _, rest = line[1:].partition(" ")
    name, rest = name.lower(), rest.strip()
    console = stdout.get()
    context = ToolContext(
        runtime, policy=Policy(approver=AllowAll()), surface="cli", session=session
    )
    if name in ("quit", "exit", "q"):
        return False
    if name == "help":
        console.print(Text(CHAT_HELP, style="dim"))
    elif name == "new":
        _end(agent, session)
        console.print(Text("New session.", style="dim"))
    elif name == "remember":
        if not rest:
            console.print(Text("Usage: /remember TEXT", style="yellow"))
        else:
            result = agent.registry.call("remember", {"fact": rest}, context)
            _print_result(
                result.ok, f"Remembered (^{(result.data or {}).get('id')}).", result.error
            )
    elif name == "recall":
        if not rest:
            console.print(Text("Usage: /recall TOPIC", style="yellow"))
        else:
            result = agent.registry.call("recall", {"topic": rest}, context)
            if result.ok:
                _print_hits(result.data)
            else:
                _print_result(False, "", result.error)
    elif name == "tasks":
        result = agent.registry.call("task_list", {}, context)
        if result.ok:
            _print_tasks(result.data)
        else:
            _print_result(False, "", result.error)
    else:
        console.print(Text(f"Unknown command /{name}. {CHAT_HELP}", style="yellow"))
    return True


def _print_result(ok: bool, message: str, error: str | None) -> None:
    from rich.text import Text

    if ok:
        stdout.print(Text(message, style="green"))
    else:
        stdout.print(Text(f"Error: {error}", style="red"))


def _print_hits(data: Any) -> None:
    from rich.text import Text

    hits = data.get("memories", []) if isinstance(data, dict) else data
    if not hits:
        stdout.print(Text("Nothing relevant.", style="dim"))
        return
    for hit in hits:
        text = hit.get("text") or hit.get("snippet") or ""
        stdout.print(Text(f"- {' '.join(str(text).split())}"))


def _print_tasks(data: Any) -> None:
    from memvault.cli.common import table

    tasks = data.get("tasks", []) if isinstance(data, dict) else data
    if not tasks:
        stdout.print("No open tasks.")
        return
    rows = [[t.get("title"), t.get("status"), t.get("priority"), t.get("due")] for t in tasks]
    stdout.print(table("Tasks", ["Title", "Status", "Priority", "Due"], rows))
