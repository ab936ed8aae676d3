"""``memvault ask`` (one run, streamed) and ``memvault chat`` (an interactive session).

Both run the agent in this process: the terminal is the approver, and the
answer streams as the model writes it. With a daemon serving the vault they
share its vault and session database; the daemon's watcher sees the notes
the run writes.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memvault.cli.common import JsonOption, VaultOption, emit_json, open_runtime, stderr, stdout

if TYPE_CHECKING:
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


def _agent(runtime: Runtime, yes: bool) -> Agent:
    from memvault.agent.loop import Agent
    from memvault.llm.factory import make_provider
    from memvault.tools.policy import AllowAll, TerminalApprover

    provider = make_provider(runtime.settings.llm)
    approver = AllowAll() if yes else TerminalApprover(ask=_ask)
    return Agent(runtime, provider, approver=approver)


def _ask(question: str) -> str:
    sys.stdout.write("\n")
    return stdout.get().input(f"[approval] {question}", markup=False)


def _stream(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _show_step(step: Step) -> None:
    from rich.text import Text

    if step.kind == "tool_call":
        stderr.print(Text(f"  -> {step.data['name']} {_args(step.data['arguments'])}", style="dim"))
    elif step.kind == "tool_result" and not step.data["ok"]:
        stderr.print(Text(f"  !! {step.data['name']}: {step.data['text']}", style="yellow"))
    elif step.kind == "defensive_memory":
        stderr.print(Text("  (context nearly full: storing memories first)", style="dim"))
    elif step.kind == "trimmed":
        stderr.print(Text(f"  (dropped {step.data['dropped']} older messages)", style="dim"))
    elif step.kind == "session_ended":
        stderr.print(Text(f"  (the idle session {step.data['key']} was ended)", style="dim"))


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
        f"{result.iterations} model call{'s' if result.iterations != 1 else ''}",
    ]
    if calls:
        parts.append(f"{calls} tool call{'s' if calls != 1 else ''}")
    if tokens:
        parts.append(f"{tokens} tokens")
    style = {"done": "dim", "failed": "bold red", "cancelled": "yellow"}[result.status]
    if result.status != "done":
        stderr.print(Text(f"{result.status}: {result.summary}", style=style))
    stderr.print(Text("(" + " · ".join(parts) + ")", style="dim"))


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
    runtime = open_runtime(ctx, vault)
    agent = _agent(runtime, yes)
    if as_json:
        result = agent.run(command, session=session, channel="cli")
        emit_json(result.to_dict())
    else:
        result = agent.run(
            command, session=session, channel="cli", on_text=_stream, on_step=_show_step
        )
        sys.stdout.write("\n")
        _footer(result)
    runtime.close()
    if result.status != "done":
        raise typer.Exit(130 if result.status == "cancelled" else 1)


def chat(
    ctx: typer.Context,
    session: SessionOption = "cli",
    yes: YesOption = False,
    vault: VaultOption = None,
) -> None:
    """Talk with the agent in the terminal; the session is summarised when it ends."""
    from rich.text import Text

    runtime = open_runtime(ctx, vault)
    agent = _agent(runtime, yes)
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
                break
            if not line:
                continue
            if line.startswith("/"):
                if not _slash(line, agent, runtime, session):
                    break
                continue
            console.print(Text("agent > ", style="bold cyan"), end="")
            result = agent.run(
                line, session=session, channel="cli", on_text=_stream, on_step=_show_step
            )
            sys.stdout.write("\n")
            _footer(result)
    finally:
        _end(agent, session)
        runtime.close()


def _end(agent: Agent, session: str) -> None:
    from rich.text import Text

    from memvault.errors import MemvaultError

    try:
        ended = agent.end_session(session)
    except MemvaultError:
        return  # nothing was said in this session
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
        stdout.print(Text("Nothing found.", style="dim"))
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
