"""What every command shares: the vault option, JSON output, rich tables, errors."""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Protocol, TypeVar

import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from memvault.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    InvalidInputError,
    MemvaultError,
    VaultError,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from memvault.gateway.client import Answer, DaemonClient
    from memvault.runtime import Runtime


class LazyConsole:
    """A rich Console made on first use: commands that print plain lines never import rich."""

    def __init__(self, *, to_stderr: bool) -> None:
        self._to_stderr = to_stderr
        self._console: Console | None = None

    def get(self) -> Console:
        """The console (markup and emoji codes off: "[/b]" or ":rocket:" print as written)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(
                stderr=self._to_stderr, highlight=False, soft_wrap=True, markup=False, emoji=False
            )
        return self._console

    def print(self, *objects: Any) -> None:
        """Print renderables (tables, progress, styled text)."""
        self.get().print(*objects)


stdout = LazyConsole(to_stderr=False)
stderr = LazyConsole(to_stderr=True)

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
# Read with split_tags: -t a,b -t c.
TagsOption = Annotated[
    list[str] | None, typer.Option("--tags", "-t", help="Tags, comma-separated or repeated.")
]
# Also accepted before the command name (memvault --direct remember ...); either place works.
DirectOption = Annotated[
    bool,
    typer.Option(
        "--direct", help="Work on the vault files even when a daemon serves the vault; start none."
    ),
]
# Shared by the memory, memories, reads and recall commands.
MemoryIdArgument = Annotated[str, typer.Argument(metavar="ID", help="Memory id, e.g. m-3f9a1c2b.")]
ArchivedOption = Annotated[bool, typer.Option("--archived", help="Include archived memories.")]
NoAutostartOption = Annotated[
    bool,
    typer.Option(
        "--no-autostart",
        help="Never start a daemon in the background; search in this process instead.",
    ),
]


def report_error(exc: MemvaultError) -> None:
    """One sentence on stderr; the hint (if any) on the next line."""
    from rich.text import Text

    stderr.print(Text.assemble(("Error:", "bold red"), " ", exc.message))
    if exc.hint:
        stderr.print(exc.hint)


def read_only_error(exc: BaseException) -> VaultError | None:
    """A write refused by the system (a read-only vault, folder or disk) as a VaultError.

    Where memvault writes, it says so itself; this catches the rest at the edge,
    so a read-only vault reads as exit 5 and one sentence, never as a bug.
    """
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        where = f" {exc.filename}" if exc.filename else ""
        return VaultError(
            f"memvault cannot write{where}: {exc.strerror}; the vault is read-only for "
            "this user (commands that only read still work)."
        )
    if type(exc).__name__ == "OperationalError" and "readonly" in str(exc):  # sqlite3's
        return VaultError(
            "memvault cannot write its database in .memvault: the vault is read-only for "
            "this user (commands that only read still work)."
        )
    return None


class ErrorBoundaryGroup(TyperGroup):
    """The root command group: turns memvault errors into a sentence and an exit code.

    Sub-command groups named in ``lazy_groups`` (name -> module with a Typer
    ``app``) are imported only when used, so ``memvault remember`` does not pay
    for ``memvault task`` and the rest.
    """

    lazy_groups: ClassVar[dict[str, str]] = {}

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        listed = super().list_commands(ctx)
        return [*listed, *(name for name in self.lazy_groups if name not in listed)]

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:  # type: ignore[override]
        if cmd_name not in self.commands and cmd_name in self.lazy_groups:
            import importlib

            from typer.main import get_group

            module = importlib.import_module(self.lazy_groups[cmd_name])
            command = get_group(module.app)
            command.name = cmd_name
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            from memvault.cli.arguments import refuse_bad_text

            refuse_bad_text(ctx, [*ctx._protected_args, *ctx.args])
            return super().invoke(ctx)
        except MemvaultError as exc:
            report_error(exc)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            stderr.print("Interrupted.")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except (typer.Exit, typer.Abort, TyperException):
            raise
        except Exception as exc:  # a bug, not a user mistake: say so briefly
            if os.environ.get("MEMVAULT_DEBUG"):
                raise
            unwritable = read_only_error(exc)
            if unwritable is not None:
                report_error(unwritable)
                raise typer.Exit(unwritable.exit_code) from None
            stderr.print(
                f"Internal error: {type(exc).__name__}: {exc}. "
                "Re-run with MEMVAULT_DEBUG=1 for the traceback, and please report it."
            )
            raise typer.Exit(EXIT_INTERNAL) from None


def group(help: str) -> typer.Typer:
    """A command group with the root's settings (plain help, no completion options)."""
    return typer.Typer(
        help=help,
        no_args_is_help=True,
        rich_markup_mode=None,
        add_completion=False,
        pretty_exceptions_enable=False,
    )


def root_vault(ctx: typer.Context) -> Path | None:
    """The --vault given before the command name, if any."""
    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    value = obj.get("vault")
    return value if isinstance(value, Path) else None


def open_runtime(ctx: typer.Context, vault: Path | None, *, require: bool = True) -> Runtime:
    """Settings and services for the chosen vault.

    A folder that is not a vault (missing, or never initialised) is a clear
    error; ``require=False`` (doctor) wires the services without that check.
    """
    # Imported here: commands served by a running daemon never load them.
    from memvault.clock import Clock, load_timezone
    from memvault.config import load_settings
    from memvault.runtime import Runtime

    settings = load_settings(vault or root_vault(ctx)).settings
    if require:
        runtime = Runtime.open(settings)
    else:
        runtime = Runtime(settings, Clock(load_timezone(settings.timezone)))
    ctx.call_on_close(runtime.close)
    return runtime


def flag(ctx: typer.Context, name: str) -> bool:
    """A flag given before the command name or after it (``direct``, ``no_autostart``)."""
    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    return bool(obj.get(name) or ctx.params.get(name))


def daemon_client(ctx: typer.Context, vault: Path | None) -> DaemonClient | None:
    """A client for the daemon serving the chosen vault, unless --direct or none runs."""
    from memvault.gateway.client import DaemonClient
    from memvault.locations import choose_vault

    if flag(ctx, "direct") or os.environ.get("MEMVAULT_DIRECT"):
        return None
    return DaemonClient.discover(choose_vault(vault or root_vault(ctx)))


def autostarted_client(ctx: typer.Context, vault: Path | None) -> DaemonClient | None:
    """A daemon started now for a command that would load the local model, when allowed.

    Not with --direct or --no-autostart, nor when ``cli.autostart`` is off,
    the embedder loads no model in this process, or the folder is not a vault
    (the command then says so itself, having written nothing). A daemon that
    cannot be started is explained in one sentence, and the command runs here.
    """
    if flag(ctx, "direct") or flag(ctx, "no_autostart") or os.environ.get("MEMVAULT_DIRECT"):
        return None
    from memvault.config import load_settings

    settings = load_settings(vault or root_vault(ctx)).settings
    if not settings.cli.autostart or settings.embedder.provider != "local":
        return None
    from memvault.locations import is_vault

    if not is_vault(settings.vault):
        return None
    from memvault.gateway.autostart import AutostartError, ensure_daemon

    try:
        running = ensure_daemon(settings.vault, port=settings.server.port)
    except AutostartError as exc:
        stderr.print(f"{exc.message}; answering in this process instead.")
        return None
    if running.started:
        info = running.client.info
        stderr.print(
            f"Started a memvault daemon for {settings.vault} at {info.url} (pid {info.pid}, "
            f"log {running.log}); this and later commands use it, so the model loads once."
        )
        stderr.print(
            "Stop it with `memvault serve --stop`; opt out with --no-autostart or "
            "`[cli] autostart = false` in .memvault/config.toml."
        )
    return running.client


def via_daemon(
    ctx: typer.Context,
    vault: Path | None,
    method: str,
    path: str,
    *,
    query: dict[str, Any] | None = None,
    body: Any = None,
    autostart: bool = False,
) -> Any:
    """The daemon's answer when one serves the vault; None means: work on the vault directly.

    With ``autostart`` (a command that would load the embedding model) a
    daemon is started when none runs (see :func:`autostarted_client`). A
    notice the daemon sends with its answer goes to stderr, as the same
    command prints it in-process. An error the daemon answers with is raised
    as a MemvaultError, so it reads (and exits) the same as in direct mode.
    """
    answer = _send(daemon_client(ctx, vault), method, path, query, body)
    if answer is None and autostart:
        answer = _send(autostarted_client(ctx, vault), method, path, query, body)
    if answer is None:
        return None
    if answer.notice:
        stderr.print(answer.notice)
    return answer.result


def _send(
    client: DaemonClient | None, method: str, path: str, query: dict[str, Any] | None, body: Any
) -> Answer | None:
    """The daemon's answer; None when there is no daemon or it went away (nothing was sent)."""
    if client is None:
        return None
    from memvault.gateway.client import DaemonUnavailableError

    try:
        return client.send(method, path, query=query, body=body)
    except DaemonUnavailableError:
        return None


def emit_json(data: Any) -> None:
    """Pretty JSON on stdout (UTF-8, dates as ISO strings)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")
    sys.stdout.flush()


class Record(Protocol):
    """What a command answers with: a note, a task, a contact ... that has a JSON form."""

    def to_dict(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=Record)


def answer(as_json: bool, record: Record, said: str | Callable[[], None]) -> None:
    """A command's result: the record as JSON for scripts; for people ``said``, a
    sentence, or a function that prints the record."""
    if as_json:
        emit_json(record.to_dict())
    elif callable(said):
        said()
    else:
        say(said)


def listing(
    as_json: bool,
    records: Sequence[R],
    *,
    noun: str,
    empty: str,
    columns: Sequence[str],
    row: Callable[[R], Sequence[Any]],
) -> None:
    """A list of records: JSON for scripts; for people a table titled with their count,
    or ``empty`` when there are none."""
    from memvault.vocabulary import counted

    if as_json:
        emit_json([record.to_dict() for record in records])
    elif not records:
        say(empty)
    else:
        stdout.print(table(counted(len(records), noun), columns, [row(r) for r in records]))


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A rich table with plain-text cells (no markup interpretation)."""
    from rich.table import Table
    from rich.text import Text

    grid = Table(title=title, title_justify="left", show_lines=False, highlight=False)
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*(Text("" if cell is None else str(cell)) for cell in row))
    return grid


def minute(stamp: str | None) -> str:
    """An ISO time as a table shows it, to the minute (``2026-11-28 09:30``); "" for none."""
    return (stamp or "")[:16].replace("T", " ")


def say(message: str) -> None:
    """A plain line for people; user text is printed as written."""
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


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
    from memvault.text import check_text

    try:
        text = sys.stdin.read()
    except UnicodeDecodeError:
        raise InvalidInputError("The text on stdin is not UTF-8.") from None
    return check_text(text, "The text on stdin")
