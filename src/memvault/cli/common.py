"""What every command shares: the vault option, JSON output, rich tables, errors."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup
from typer.exceptions import TyperException

from memvault.config import load_settings
from memvault.errors import InvalidInputError, MemvaultError
from memvault.runtime import Runtime

# Markup and emoji codes are off: user text like "[/b]" or ":rocket:" prints as written.
stdout = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
stderr = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)

VaultOption = Annotated[
    Path | None,
    typer.Option(
        "--vault",
        help="Vault folder (default: $MEMVAULT_VAULT, else ~/memvault).",
        show_default=False,
        dir_okay=True,
        file_okay=False,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON for scripts instead of a table.")
]

EXIT_INTERNAL = 70


def report_error(exc: MemvaultError) -> None:
    """One sentence on stderr; the hint (if any) on the next line."""
    stderr.print(Text.assemble(("Error:", "bold red"), " ", exc.message))
    if exc.hint:
        stderr.print(exc.hint)


class ErrorBoundaryGroup(TyperGroup):
    """The root command group: turns memvault errors into a sentence and an exit code."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except MemvaultError as exc:
            report_error(exc)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            stderr.print("Interrupted.")
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort, TyperException):
            raise
        except Exception as exc:  # a bug, not a user mistake: say so briefly
            if os.environ.get("MEMVAULT_DEBUG"):
                raise
            stderr.print(
                f"Internal error: {type(exc).__name__}: {exc}. "
                "Re-run with MEMVAULT_DEBUG=1 for the traceback, and please report it."
            )
            raise typer.Exit(EXIT_INTERNAL) from None


def root_vault(ctx: typer.Context) -> Path | None:
    """The --vault given before the command name, if any."""
    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    value = obj.get("vault")
    return value if isinstance(value, Path) else None


def open_runtime(ctx: typer.Context, vault: Path | None, *, require: bool = True) -> Runtime:
    """Settings and services for the chosen vault; a missing vault is a clear error."""
    loaded = load_settings(vault or root_vault(ctx))
    runtime = Runtime.open(loaded.settings)
    ctx.call_on_close(runtime.close)
    if require:
        runtime.vault.require()
    return runtime


def emit_json(data: Any) -> None:
    """Pretty JSON on stdout (UTF-8, dates as ISO strings)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")
    sys.stdout.flush()


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A rich table with plain-text cells (no markup interpretation)."""
    grid = Table(title=title, title_justify="left", show_lines=False, highlight=False)
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*(Text("" if cell is None else str(cell)) for cell in row))
    return grid


def say(message: str) -> None:
    """A plain line for people; user text is printed as written."""
    stdout.print(message)


def emit_raw(text: str) -> None:
    """Text exactly as stored (a note's content), with a final newline."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def split_tags(values: Iterable[str] | None) -> list[str]:
    """Tags from repeated options and comma-separated lists: ``-t a,b -t c``."""
    out: list[str] = []
    for value in values or []:
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return out


def read_content(content: str | None) -> str:
    """Note content from --content, else from stdin; refuses an interactive stdin."""
    if content is not None:
        return content
    if sys.stdin is None or sys.stdin.isatty():
        raise InvalidInputError("Give the text with --content or pipe it on stdin.")
    return sys.stdin.read()
