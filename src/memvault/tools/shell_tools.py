"""The shell: ``run_shell_command``, an agent's hands on the owner's computer, off by default.

``run_shell_command`` (tier 3: the owner approves every call) runs one
command line with ``/bin/sh -c`` when ``[tools.shell] enabled`` is true.
Before the owner is asked, every program the line names is checked against
the blocked and allowed lists (:mod:`memvault.tools.shell_guard`) and the
working folder must lie, symlinks followed, inside ``allowed_folders`` and
outside the vault's ``.memvault``. The folder rule confines where a command
starts, not where it may go (``cd ..`` works); the command lists are a
guard, and the owner's approval of each call is the gate.

The command runs under a launcher (:mod:`memvault.tools.shell_launcher`),
a small process started with the trimmed environment only (no API keys or
tokens the daemon holds), so the command's parent has none to show. The
launcher is a child subreaper: whatever the command leaves running, in the
background, double-forked or in a session of its own, is killed when it
ends, and at the timeout all of it is.
Output is read as it comes, without waiting on a full pipe, and kept up to
``max_output_bytes`` per stream. On request the command and the start of
its output go to the day's journal, under "Shell"; with ``capture_as`` (the
earlier design's thought type, e.g. ``shell_output``) they are also kept as
a memory: of that category when it names one of memvault's (or an alias,
``contact``, ``general``), else of category ``context`` tagged with the type.
Such a memory is screened as any is (secrets kept out), and, as a command's
output is never the owner's own words, text in it that reads as an
instruction is marked low trust (:mod:`memvault.privacy.trust`).
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from memvault.config import ShellSettings
from memvault.errors import InvalidInputError, MemvaultError, NotFoundError
from memvault.processes import kill_tree
from memvault.text import scrub
from memvault.tools.folders import allowed_folders, confined, within
from memvault.tools.inputs import ToolInput, names
from memvault.tools.policy import SHELL, Tier
from memvault.tools.registry import Annotations, Tool, ToolContext
from memvault.tools.shell_guard import check_command
from memvault.vault.memories import Memories
from memvault.vault.store import Vault
from memvault.vocabulary import CONVERSATION

SHELL_SETTING = "tools.shell.enabled"
# The start of a command's output kept in the journal.
JOURNAL_OUTPUT_BYTES = 4096
# After the launcher ends, how long output still in the pipes is collected.
_DRAIN_SECONDS = 1.0
# After the timeout, how long the launcher has to kill the command's processes and exit.
_STOP_SECONDS = 5.0
# Runs the shell and ends all it started; a script, so no memvault module loads with it.
_LAUNCHER = str(Path(__file__).with_name("shell_launcher.py"))
# What a command inherits of the daemon's environment: no keys, tokens or passwords.
_KEPT_ENV = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM"}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min)?\s*$")
# The earlier design's default thought type for a command's output.
SHELL_OUTPUT = "shell_output"
# What a captured output's memory keeps of the command and of what it printed.
_CAPTURED_COMMAND_CHARS = 200
_CAPTURED_OUTPUT_CHARS = 2000
_CAPTURE_KIND = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")


# -- inputs -----------------------------------------------------------------------------


class ShellCommand(ToolInput):
    command: str = Field(
        description=(
            "One command line for /bin/sh, e.g. 'ls -la' or 'git status && git log -3'. "
            "Pipes and && are fine; command substitution ($(...), backticks) is not."
        ),
        validation_alias=names("command", "cmd", "script"),
        min_length=1,
        max_length=10_000,
    )
    working_dir: str | None = Field(
        None,
        description=(
            "Folder to run in (absolute, or relative to the default one); it must be inside "
            "the allowed folders. Default: the configured working folder."
        ),
        validation_alias=names("working_dir", "cwd", "workdir", "directory", "dir", "folder"),
    )
    timeout: float | None = Field(
        None,
        gt=0,
        description=(
            "Seconds before the command and its children are killed (also '30s', '2m'); "
            "at most the vault's limit, which is also the default."
        ),
        validation_alias=names("timeout", "timeout_seconds"),
    )
    save_output: bool | None = Field(
        None,
        description="Save the command and the start of its output to today's journal.",
        validation_alias=names("save_output", "save", "journal"),
    )
    capture_as: str | None = Field(
        None,
        description=(
            f"Also keep the output as a memory of this kind (e.g. '{SHELL_OUTPUT}'). A "
            "memory category (fact, context, issue, project ...; contact and general too) "
            f"files it there; any other kind, '{SHELL_OUTPUT}' included, files it under "
            "context, tagged with the kind. Secrets in it are kept out, and text in it that "
            "reads as an instruction is marked low trust."
        ),
        validation_alias=names("capture_as", "captureAs", "thought_type"),
    )

    @field_validator("capture_as")
    @classmethod
    def _kind(cls, value: str | None) -> str | None:
        if value is None:
            return None
        kind = value.strip().lower()
        if not _CAPTURE_KIND.match(kind):
            raise ValueError(
                f"name a kind in one word of at most 40 letters, digits, '_' or '-', "
                f"e.g. '{SHELL_OUTPUT}' or 'fact'"
            )
        return kind

    @field_validator("timeout", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        if isinstance(value, str):
            match = _DURATION.match(value)
            if match is None:
                raise ValueError("give seconds, e.g. 30, '30s' or '2m'")
            unit = match.group(2) or "s"
            scale = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60}[unit]
            return float(match.group(1)) * scale
        return value


# -- folders ----------------------------------------------------------------------------


def working_folder(requested: str | None, settings: ShellSettings, vault: Vault) -> str:
    """The real folder a command starts in, checked against the allowed folders."""
    folders = allowed_folders(settings.allowed_folders, "tools.shell")
    default = Path(folders[0])
    if settings.working_dir is not None:
        configured = settings.working_dir.expanduser()
        default = configured if configured.is_absolute() else default / configured
    chosen = Path(requested).expanduser() if requested else default
    if not chosen.is_absolute():
        chosen = default / chosen
    try:
        real = os.path.realpath(chosen)
    except OSError:  # a link swapped for a file between two steps of resolving it
        raise InvalidInputError(
            f"The working folder {chosen} changed while it was being checked; try again."
        ) from None
    confined(real, folders, "tools.shell", f"The working folder {chosen}")
    if within(real, os.path.realpath(vault.state_dir)):
        raise InvalidInputError(
            f"The working folder {chosen} is memvault's own folder (tokens, config, index); "
            "no command runs there."
        )
    if not os.path.isdir(real):
        raise NotFoundError(f"The working folder {chosen} does not exist or is not a folder.")
    return real


# -- running a command ------------------------------------------------------------------


@dataclass
class CommandRun:
    """What a finished (or killed) command gave back."""

    exit_code: int
    timed_out: bool
    stdout: bytes
    stderr: bytes
    stdout_bytes: int
    stderr_bytes: int
    seconds: float


def run_command(command: str, cwd: str, timeout: float, max_bytes: int) -> CommandRun:
    """Run ``command`` with /bin/sh in ``cwd``, under the launcher, and end all it started.

    The launcher (:mod:`memvault.tools.shell_launcher`) runs the shell and, when
    it ends, kills every process the shell left, those that left its session
    included. At ``timeout`` the launcher is told to stop (SIGTERM: it kills them
    all and exits; exit code -1); one that does not within ``_STOP_SECONDS`` is
    killed with its process tree. Each stream keeps its first ``max_bytes`` bytes;
    the rest is read and dropped, so the command never stalls on a full pipe.
    """
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", _LAUNCHER, str(os.getpid()), command],
        cwd=cwd,
        env=_trimmed_environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None and process.stderr is not None
    kept = {"stdout": bytearray(), "stderr": bytearray()}
    seen = dict.fromkeys(kept, 0)
    deadline = started + timeout
    timed_out = False
    ended = False
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ, "stdout")
            selector.register(process.stderr, selectors.EVENT_READ, "stderr")
            while selector.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if timed_out or ended:
                        break  # a process outside the launcher's tree holds the pipes
                    timed_out = True
                    _signal(process.pid, signal.SIGTERM)
                    deadline = time.monotonic() + _STOP_SECONDS
                    continue
                for key, _ in selector.select(min(remaining, 0.05)):
                    chunk = os.read(key.fd, 65_536)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    room = max_bytes - len(kept[key.data])
                    kept[key.data] += chunk[:room] if room > 0 else b""
                    seen[key.data] += len(chunk)
                if not ended and process.poll() is not None:
                    ended = True  # it swept its tree; what still holds the pipes escaped it
                    deadline = min(deadline, time.monotonic() + _DRAIN_SECONDS)
        # The pipes close as the launcher exits; after a timeout it has until the deadline.
        wait = max(deadline - time.monotonic(), 0) if timed_out else _DRAIN_SECONDS
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(wait)
    finally:
        if process.poll() is None:
            kill_tree(process.pid)  # the launcher did not stop: kill what /proc shows of it
        process.wait()
        process.stdout.close()
        process.stderr.close()
    return CommandRun(
        exit_code=-1 if timed_out else process.returncode,
        timed_out=timed_out,
        stdout=bytes(kept["stdout"]),
        stderr=bytes(kept["stderr"]),
        stdout_bytes=seen["stdout"],
        stderr_bytes=seen["stderr"],
        seconds=time.monotonic() - started,
    )


def _trimmed_environment() -> dict[str, str]:
    """What a command inherits of the daemon's environment: no keys, tokens or passwords."""
    return {k: v for k, v in os.environ.items() if k in _KEPT_ENV or k.startswith("LC_")}


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


# -- the shell tool ---------------------------------------------------------------------


def _check_shell(ctx: ToolContext, args: ShellCommand) -> str:
    """Refuse a blocked command or a folder outside the allowed ones; the real folder."""
    settings = ctx.runtime.settings.tools.shell
    cwd = working_folder(args.working_dir, settings, ctx.runtime.vault)
    check_command(
        args.command,
        settings.blocked_commands,
        settings.allowed_commands,
        cwd=cwd,
        path=_trimmed_environment().get("PATH", os.defpath),
    )
    return cwd


def _run_shell(ctx: ToolContext, args: ShellCommand) -> dict[str, Any]:
    settings = ctx.runtime.settings.tools.shell
    cwd = _check_shell(ctx, args)  # again: the precheck ran before the owner was asked
    timeout = min(args.timeout or settings.timeout_seconds, settings.timeout_seconds)
    run = run_command(args.command, cwd, timeout, settings.max_output_bytes)
    truncated = max(run.stdout_bytes, run.stderr_bytes) > settings.max_output_bytes
    result: dict[str, Any] = {
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "stdout": _text(run.stdout),
        "stderr": _text(run.stderr),
        "truncated": truncated,
        "stdout_bytes": run.stdout_bytes,
        "stderr_bytes": run.stderr_bytes,
        "working_dir": cwd,
        "seconds": round(run.seconds, 3),
    }
    if run.timed_out:
        result["note"] = f"Killed with its child processes after {timeout:g} s."
    elif truncated:
        result["note"] = f"Output cut at {settings.max_output_bytes} bytes per stream."
    save = settings.save_output_by_default if args.save_output is None else args.save_output
    if save:
        result["saved_to"] = _journal(ctx, args.command, cwd, run)
    if args.capture_as is not None:
        result.update(_capture(ctx, args.command, args.capture_as, run))
    return result


def capture_category(kind: str) -> tuple[str, list[str]]:
    """The memory category and tags a captured output of ``kind`` is kept with: the
    category ``kind`` names (an alias too), else ``context`` tagged with the kind."""
    try:
        category = Memories.check_category(kind)
    except InvalidInputError:
        return "context", ["shell", kind]
    if category == CONVERSATION:  # what was said in a chat: never a command's output
        return "context", ["shell", kind]
    return category, ["shell"]


def _capture(ctx: ToolContext, command: str, kind: str, run: CommandRun) -> dict[str, Any]:
    """Keep what the command printed as a memory; what became of it, for the result (the
    command ran whatever happens here)."""
    output = " ".join(_text(b"\n".join((run.stdout, run.stderr))).split())
    if not output:
        return {"captured": None, "capture_note": "The command printed nothing to keep."}
    if len(output) > _CAPTURED_OUTPUT_CHARS:
        output = output[: _CAPTURED_OUTPUT_CHARS - 1].rstrip() + "…"
    shown = " ".join(command.split())
    if len(shown) > _CAPTURED_COMMAND_CHARS:
        shown = shown[: _CAPTURED_COMMAND_CHARS - 1].rstrip() + "…"
    outcome = "timed out" if run.timed_out else f"exit {run.exit_code}"
    category, tags = capture_category(kind)
    # "shell:" marks the text as not the owner's own words: the trust screen judges it.
    source = f"shell:{ctx.session or ctx.surface}"
    try:
        kept = ctx.runtime.consolidation.remember(
            scrub(f"Output of `{shown}` ({outcome}): {output}"),
            category=category,
            tags=tags,
            source=source,
        )
    except MemvaultError as exc:
        return {"captured": None, "capture_error": exc.message}
    memory = kept.memory
    captured: dict[str, Any] = {
        "id": memory.id,
        "stored": kept.created,
        "category": memory.category,
        "tags": memory.tags,
        "path": memory.path,
    }
    if memory.trust is not None:
        captured["trust"] = memory.trust
        captured["trust_reason"] = memory.trust_reason
    return {"captured": captured}


def _journal(ctx: ToolContext, command: str, cwd: str, run: CommandRun) -> str:
    """Put the command, how it ended and the start of its output in today's journal."""
    outcome = "timed out" if run.timed_out else f"exit {run.exit_code}"
    output = b"\n".join(part.rstrip(b"\n") for part in (run.stdout, run.stderr) if part.strip())
    shown = _text(output[:JOURNAL_OUTPUT_BYTES])
    if len(output) > JOURNAL_OUTPUT_BYTES:
        shown += "\n[output cut]"
    block = scrub(f"$ {command}\n{shown}").rstrip()
    longest = max((len(run_) for run_ in re.findall(r"`+", block)), default=0)
    fence = "`" * max(3, longest + 1)  # a fence the output cannot close
    first_line = command.splitlines()[0] if command.strip() else command
    entry = f"Ran `{scrub(first_line)}` in {cwd} ({outcome})\n{fence}text\n{block}\n{fence}"
    return ctx.runtime.journal.append("Shell", entry).path


def _shell_summary(args: ShellCommand) -> str:
    command = args.command if len(args.command) <= 300 else args.command[:300] + "…"
    where = f" in {args.working_dir}" if args.working_dir else ""
    kept = f", keeping its output as a memory ({args.capture_as})" if args.capture_as else ""
    return f"run the shell command {command!r}{where}{kept}"


TOOLS = [
    Tool(
        name="run_shell_command",
        title="Run a shell command",
        description=(
            "Run one command line with /bin/sh on the owner's computer, in an allowed folder, "
            "and return its stdout, stderr and exit code. The owner approves every call. "
            "Blocked programs (sudo, rm, curl ...) are refused wherever they appear; command "
            "substitution is refused; the command is killed with its children at the timeout. "
            "With capture_as, its output is also kept as a memory. Prefer the vault tools for "
            "notes."
        ),
        input_model=ShellCommand,
        handler=_run_shell,
        tier=Tier.DANGEROUS,
        category=SHELL,
        annotations=Annotations(destructive=True, open_world=True),
        summarize=_shell_summary,
        enabled_by=SHELL_SETTING,
        precheck=_check_shell,
    ),
]
