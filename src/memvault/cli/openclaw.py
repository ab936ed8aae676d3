"""``memvault openclaw install | uninstall | status``: memvault as OpenClaw's memory.

``openclaw/install.py`` holds the steps; these commands print their progress
and answers. The OpenClaw acted on is the one its own command would use
(HOME, or ``OPENCLAW_STATE_DIR`` / ``OPENCLAW_CONFIG_PATH``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memvault.cli.common import (
    JsonOption,
    VaultOption,
    emit_json,
    group,
    open_runtime,
    root_vault,
    say,
    stdout,
    table,
)

if TYPE_CHECKING:
    from memvault.runtime import Runtime

app = group("Make memvault OpenClaw's memory: install, uninstall, status.")

OpenClawOption = Annotated[
    Path | None,
    typer.Option(
        "--openclaw",
        help="The openclaw command (default: the one on PATH).",
        metavar="PATH",
    ),
]


def _vault(ctx: typer.Context, vault: Path | None) -> Path:
    from memvault.locations import choose_vault

    return choose_vault(vault or root_vault(ctx))


@app.command("install")
def install(
    ctx: typer.Context,
    openclaw: OpenClawOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Start over (the first backup is kept).")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; change nothing.")
    ] = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Install memvault as OpenClaw's memory (resumable; a second run changes nothing)."""
    from memvault.openclaw.install import Installer

    root = _vault(ctx, vault)

    def runtime() -> Runtime:
        return open_runtime(ctx, vault)

    quiet = as_json or dry_run
    installer = Installer(root, openclaw, runtime, say=(lambda _: None) if quiet else say)
    if dry_run:
        rows = installer.plan()
        if as_json:
            emit_json(rows)
            return
        stdout.print(
            table(
                "memvault openclaw install (dry run: nothing changes)",
                ["Step", "State", "Does", "Detail"],
                [[r["step"], r["state"], r["does"], r["detail"]] for r in rows],
            )
        )
        return
    state = installer.run(force=force)
    if as_json:
        emit_json(state.to_dict())


@app.command("uninstall")
def uninstall(
    ctx: typer.Context,
    openclaw: OpenClawOption = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Give OpenClaw its own memory back: restore the backup, unlink the plugin, remove
    the skill and note. Every memory stays in the vault."""
    from memvault.openclaw import install as setup

    done = setup.uninstall(_vault(ctx, vault), openclaw, (lambda _: None) if as_json else say)
    if as_json:
        emit_json(done.to_dict())
        return
    say(
        "memvault is no longer OpenClaw's memory (memory-core is back); "
        "the vault keeps every memory."
    )


@app.command("status")
def status(
    ctx: typer.Context,
    openclaw: OpenClawOption = None,
    offline: Annotated[
        bool, typer.Option("--offline", help="Only the install state; do not ask OpenClaw.")
    ] = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Say what is installed and whether it works (exit 1 when something is wrong)."""
    from memvault.openclaw import install as setup

    report = setup.status(_vault(ctx, vault), openclaw, check=not offline)
    healthy = setup.is_ok(report) if not offline else bool(report.get("installed"))
    if as_json:
        emit_json({**report, "ok": healthy})
    else:
        _show(report)
    if not healthy:
        sys.exit(1)


def _show(report: dict[str, Any]) -> None:
    if report["state"] == "not installed":
        say("memvault is not installed into OpenClaw (memvault openclaw install does it).")
        return
    target = report.get("target", {})
    rows: list[list[Any]] = [
        ["install", report["state"] + (f" ({report['error']})" if report.get("error") else "")],
        ["openclaw", f"{target.get('version', '?')} at {target.get('command', '?')}"],
        ["workspace", target.get("workspace", "?")],
    ]
    daemon = report.get("daemon", {})
    rows.append(
        [
            "daemon",
            ("running at " + str(daemon.get("url")) if daemon.get("running") else "not running")
            + (
                ""
                if daemon.get("matches_plugin")
                else f" (the plugin expects {target.get('daemon_url')})"
            ),
        ]
    )
    for rel, state in report.get("workspace_files", {}).items():
        rows.append([rel, state])
    for name, value in report.get("openclaw", {}).items():
        rows.append([name.replace("_", " "), value if isinstance(value, str) else _yes(value)])
    stdout.print(table("memvault in OpenClaw", ["Part", "State"], rows))


def _yes(value: Any) -> str:
    return "yes" if value else "no"
