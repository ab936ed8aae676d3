"""The ``openclaw`` command as memvault drives it: found, versioned, run, its JSON read.

memvault never edits OpenClaw's state behind its back while installing: the
plugin is linked with ``openclaw plugins install --link``, settings go
through ``openclaw config patch`` (OpenClaw validates them), and what is
installed is judged by OpenClaw's own ``plugins list``, ``plugins inspect``
and ``skills list``. Only an uninstall restores ``openclaw.json`` from its
backup, byte for byte.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memvault.errors import MemvaultError, NotFoundError

# The release whose plugin API, hooks and commands memvault was checked against.
MIN_VERSION = (2026, 9, 6)
_VERSION = re.compile(r"OpenClaw\s+(\d{4})\.(\d+)\.(\d+)")
# Cold starts of the CLI take seconds; ``plugins inspect --runtime`` loads plugins.
_TIMEOUT = 180.0


class OpenClawError(MemvaultError):
    """An ``openclaw`` command failed or answered something unexpected."""

    code = "openclaw_failed"
    exit_code = 1


def find_command(given: Path | str | None) -> Path:
    """The ``openclaw`` executable: the one given, else the one on PATH."""
    if given is not None:
        path = Path(given).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise NotFoundError(f"{path} is not an executable openclaw command.")
        return path.resolve()
    found = shutil.which("openclaw")
    if found is None:
        raise NotFoundError(
            "openclaw is not on PATH; install it (npm install -g openclaw) "
            "or name it with --openclaw PATH."
        )
    return Path(found).resolve()


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``(2026, 9, 6)`` from ``OpenClaw 2026.9.6 (eb377ac)``."""
    found = _VERSION.search(text)
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def shown(version: tuple[int, int, int]) -> str:
    return ".".join(str(part) for part in version)


@dataclass(frozen=True)
class OpenClaw:
    """One ``openclaw`` executable, run with this process's environment (HOME and
    ``OPENCLAW_STATE_DIR`` / ``OPENCLAW_CONFIG_PATH`` choose whose OpenClaw it is)."""

    command: Path

    def run(self, *args: str, stdin: str | None = None) -> str:
        """The command's standard output; a failure is one sentence with its last words."""
        try:
            done = subprocess.run(
                [str(self.command), *args],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise OpenClawError(
                f"openclaw {' '.join(args[:2])} did not finish in {_TIMEOUT:.0f} s."
            ) from None
        except OSError as exc:
            raise OpenClawError(f"{self.command} could not run: {exc.strerror}.") from None
        if done.returncode != 0:
            raise OpenClawError(
                f"openclaw {' '.join(args[:2])} failed (exit {done.returncode}): "
                f"{_last_words(done.stderr or done.stdout)}"
            )
        return done.stdout

    def json(self, *args: str) -> Any:
        """The JSON a ``--json`` command printed."""
        out = self.run(*args, "--json")
        try:
            return json.loads(out[out.index("{") if "{" in out else 0 :])
        except ValueError:
            raise OpenClawError(
                f"openclaw {' '.join(args[:2])} --json printed no JSON: {_last_words(out)}"
            ) from None

    def version(self) -> tuple[int, int, int]:
        """Its version, checked against the one memvault supports."""
        text = self.run("--version")
        version = parse_version(text)
        if version is None:
            raise OpenClawError(
                f"{self.command} does not say an OpenClaw version: {text.strip()!r}."
            )
        if version < MIN_VERSION:
            raise OpenClawError(
                f"OpenClaw {shown(version)} is older than {shown(MIN_VERSION)}, the first "
                "release memvault's plugin works with; update it (npm install -g openclaw)."
            )
        return version

    def config_path(self) -> Path:
        """The ``openclaw.json`` in use (``openclaw config file``)."""
        lines = [line.strip() for line in self.run("config", "file").splitlines() if line.strip()]
        if not lines:
            raise OpenClawError("openclaw config file printed no path.")
        return Path(lines[-1]).expanduser()

    def patch_config(self, patch: dict[str, Any]) -> None:
        """One validated write of ``patch`` into openclaw.json (null deletes a key)."""
        self.run("config", "patch", "--stdin", stdin=json.dumps(patch))


def _last_words(text: str) -> str:
    """The last meaningful line of a command's output, as the end of a sentence."""
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.startswith("[postinstall]")
    ]
    last = lines[-1] if lines else "no output"
    return last if last.endswith((".", "!", "?")) else f"{last}."
