"""``memvault tools list | export | call``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memvault.cli.common import (
    DirectOption,
    JsonOption,
    NoAutostartOption,
    VaultOption,
    emit_json,
    group,
    open_runtime,
    root_vault,
    say,
    stderr,
    stdout,
    table,
    via_daemon,
)
from memvault.errors import InvalidInputError, exit_code_for
from memvault.vocabulary import TOOL_FORMATS as FORMATS
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.tools.registry import ToolRegistry, ToolResult

app = group("The tools agents call: list, export as schemas, call one.")

# Exit codes of a failed call, by the tool error's code.


@app.command("list")
def list_tools(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the tools the vault offers, with their tiers."""
    registry = _offered(ctx)
    if as_json:
        emit_json(
            [
                {
                    "name": t.name,
                    "title": t.title,
                    "tier": int(t.tier),
                    "category": t.category,
                    "read_only": t.annotations.read_only,
                    "destructive": t.annotations.destructive,
                    "description": t.description,
                }
                for t in registry
            ]
        )
        return
    rows = [
        [
            t.name,
            int(t.tier),
            t.category.replace("_", " "),
            "read-only"
            if t.annotations.read_only
            else ("destructive" if t.annotations.destructive else "writes"),
            t.title,
        ]
        for t in registry
    ]
    stdout.print(
        table(
            counted(len(rows), "tool"), ["Tool", "Tier", "Category", "Effect", "What it does"], rows
        )
    )
    say(
        "Tier 1 runs freely; tier 2 needs approval once per category per session; "
        "tier 3 every time."
    )


@app.command("export")
def export_tools(
    ctx: typer.Context,
    fmt: Annotated[
        str, typer.Option("--format", "-f", help=f"One of: {', '.join(FORMATS)}.")
    ] = "mcp",
    max_tier: Annotated[
        int, typer.Option("--max-tier", min=1, max=3, help="Leave out tools above this tier.")
    ] = 3,
) -> None:
    """Print the tool schemas as JSON for Anthropic, OpenAI or MCP clients."""
    from memvault.tools.export import export

    emit_json(export(_offered(ctx, max_tier), fmt))


def _offered(ctx: typer.Context, max_tier: int = 3) -> ToolRegistry:
    """The tools the vault's settings offer (the shell only when turned on), up to a tier."""
    from memvault.channels.tools import full_registry
    from memvault.config import load_settings
    from memvault.tools.policy import Tier
    from memvault.tools.registry import ToolRegistry

    settings = load_settings(root_vault(ctx)).settings
    return ToolRegistry(full_registry().offered(settings, Tier(max_tier)))


@app.command("call")
def call(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="Tool name, e.g. vault_search.")],
    args: Annotated[
        str, typer.Option("--args", "-a", help='Arguments as a JSON object, e.g. {"query": "tea"}.')
    ] = "{}",
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve tier 2 and 3 calls without asking.")
    ] = False,
    direct: DirectOption = False,
    no_autostart: NoAutostartOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Call one tool, through the same tier policy an agent meets.

    Reads go through the daemon when one serves the vault (one is started for
    searches, as for `memvault search`); writes are asked for here.
    """
    from memvault.channels.tools import full_registry
    from memvault.tools.policy import Tier

    try:
        arguments: Any = json.loads(args)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"--args is not valid JSON ({exc.msg} at column {exc.colno})."
        ) from None
    registry = full_registry()
    tool = registry.get(name)  # an unknown name is a plain error, before anything is asked
    result = None
    if tool.tier == Tier.READ and isinstance(arguments, dict):
        result = _through_daemon(ctx, vault, name, arguments, autostart=tool.searches)
    if result is None:
        result = _here(ctx, vault, registry, name, arguments, yes=yes)
        if result.notice:
            stderr.print(result.notice)  # through the daemon, via_daemon printed it
    if as_json:
        emit_json(result.to_dict())
    elif result.ok:
        text = result.text()
        say(
            text
            if isinstance(result.data, str)
            else json.dumps(result.data, ensure_ascii=False, indent=2)
        )
    else:
        stderr.print(f"Error: {result.error}")
        if result.code == "not_approved" and tool.tier > Tier.READ:
            stderr.print("Run it again with --yes to approve it yourself.")
    if not result.ok:
        raise typer.Exit(exit_code_for(result.code))


def _through_daemon(
    ctx: typer.Context,
    vault: Path | None,
    name: str,
    arguments: dict[str, Any],
    *,
    autostart: bool,
) -> ToolResult | None:
    """A tier-1 call answered by the daemon (None: there is none; run it here)."""
    from memvault.gateway.client import RemoteError, path_part
    from memvault.tools.registry import ToolResult

    try:
        answer = via_daemon(
            ctx, vault, "POST", f"/v1/tools/{path_part(name)}", body=arguments, autostart=autostart
        )
    except RemoteError as exc:  # the tool's own failure, as a call here reports it
        return ToolResult(False, error=exc.message, code=exc.code)
    if answer is None:
        return None
    return ToolResult(True, data=answer["result"])


def _here(
    ctx: typer.Context,
    vault: Path | None,
    registry: ToolRegistry,
    name: str,
    arguments: Any,
    *,
    yes: bool,
) -> ToolResult:
    """The call run in this process, tier 2 and 3 asked for at the terminal."""
    from memvault.tools.policy import AllowAll, Policy, TerminalApprover
    from memvault.tools.registry import ToolContext

    runtime = open_runtime(ctx, vault)
    policy = Policy(
        approver=AllowAll() if yes else TerminalApprover(), mode=runtime.settings.tools.mode
    )
    return registry.call(
        name, arguments, ToolContext(runtime=runtime, policy=policy, surface="cli")
    )
