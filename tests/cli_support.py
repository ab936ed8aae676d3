"""Running the ``memvault`` CLI in tests: in-process, in a clean environment."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner, Result

from memvault.cli.app import app
from memvault.locations import MODEL_CACHE_ENV

# The click command tree, built once: typer's ``CliRunner.invoke(app)`` builds it anew on
# every call (half the time of a small command). Its lazy groups stay built once used.
COMMAND = get_command(app)

# Exit codes of memvault.errors: a stable contract for scripts.
EXIT_INVALID = 2  # InvalidInputError and UnsafePathError
EXIT_NOT_FOUND = 3  # NotFoundError
EXIT_CONFLICT = 4  # ConflictError
EXIT_VAULT = 5  # VaultError
EXIT_CONFIG = 6  # ConfigError


def clean_env(
    vault: Path | None, embedder: str | None, extra: Mapping[str, str | None] | None
) -> dict[str, str | None]:
    """A clean MEMVAULT_* environment: only what the test sets, never the caller's.

    The model cache stays: the session's one export of the local model serves every test.
    """
    env: dict[str, str | None] = {
        key: None for key in os.environ if key.startswith("MEMVAULT_") and key != MODEL_CACHE_ENV
    }
    env["COLUMNS"] = "200"  # rich tables are not folded, so rows can be asserted on
    env["MEMVAULT_CLI__AUTOSTART"] = "false"  # no daemon starts unless a test asks for one
    if embedder is not None:
        env["MEMVAULT_EMBEDDER__PROVIDER"] = embedder
    if vault is not None:
        env["MEMVAULT_VAULT"] = str(vault)
    env.update(extra or {})
    return env


def invoke(
    vault: Path | None,
    *args: object,
    stdin: str | None = None,
    embedder: str | None = "none",
    env: Mapping[str, str | None] | None = None,
) -> Result:
    """Run ``memvault ARGS`` in-process; a crash (not a clean exit) fails the test.

    The embedder is ``none`` unless a test asks for one: no model loads by accident;
    nor does a daemon start in the background (``cli.autostart`` is off).
    """
    result = run_command([str(arg) for arg in args], stdin, clean_env(vault, embedder, env))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        assert result.exc_info is not None
        pytest.fail("memvault crashed:\n" + "".join(traceback.format_exception(*result.exc_info)))
    assert "Traceback" not in result.output
    assert "Internal error" not in result.stderr
    return result


def run_command(args: list[str], stdin: str | None, env: Mapping[str, str | None]) -> Result:
    """``memvault ARGS`` through ``COMMAND``, isolated as typer's ``CliRunner.invoke`` does
    (its streams, stdin and environment) and with the same ``Result``."""
    runner = CliRunner()
    exception: BaseException | None = None
    exc_info: Any = None
    exit_code = 0
    with runner.isolation(input=stdin, env=env) as (stdout, stderr, output):
        try:
            COMMAND.main(args=args, prog_name=COMMAND.name)
        except SystemExit as exc:
            code: Any = 0 if exc.code is None else exc.code
            exc_info = sys.exc_info()
            if code != 0:
                exception = exc
            if not isinstance(code, int):
                sys.stdout.write(f"{code}\n")
                code = 1
            exit_code = code
        except Exception as exc:
            exception, exc_info, exit_code = exc, sys.exc_info(), 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            streams = stdout.getvalue(), stderr.getvalue(), output.getvalue()
    return Result(runner, *streams, None, exit_code, exception, exc_info)


def ok(vault: Path | None, *args: object, **kwargs: Any) -> Result:
    """Run a command that must succeed."""
    result = invoke(vault, *args, **kwargs)
    assert result.exit_code == 0, result.output
    return result


def ok_json(vault: Path | None, *args: object, **kwargs: Any) -> Any:
    """Run a command with ``--json``; its stdout must be JSON and nothing else."""
    return json.loads(ok(vault, *args, "--json", **kwargs).stdout)


def fail(vault: Path | None, *args: object, code: int, **kwargs: Any) -> str:
    """Run a user mistake: exit ``code``, one sentence on stderr, nothing on stdout."""
    result = invoke(vault, *args, **kwargs)
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines, "no error message on stderr"
    assert lines[0].startswith("Error: "), lines
    assert lines[0].endswith("."), lines
    assert len(lines) <= 2, lines  # the sentence, then at most one hint line
    return lines[0]


def snapshot(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` (hidden ones too), derived state aside.

    Lock files and the search index (``.memvault/index.db*``, rebuildable) are left out.
    """
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        derived = rel.startswith((".memvault/locks/", ".memvault/index.db"))
        if path.is_file() and not derived:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out
