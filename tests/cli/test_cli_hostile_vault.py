"""The CLI, in real child processes, over a vault with a named pipe and links into .memvault.

Issue 11, items 3 and 9: ``index``, ``search`` and ``doctor`` used to hang on
a pipe called ``x.md`` (and show the token through a link). Each command
runs with a deadline, so a regression fails instead of hanging.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import EXIT_INVALID
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import WAIT

SECRET = "tokcli-5e1d-never-shown"


def memvault(vault: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m memvault --vault VAULT ARGS`` with no daemon and no model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env |= {
        "MEMVAULT_EMBEDDER__PROVIDER": "none",
        "MEMVAULT_CLI__AUTOSTART": "false",
        "COLUMNS": "200",
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memvault", "--vault", str(vault), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=WAIT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"memvault {' '.join(args)} hung on the hostile vault")
    output = done.stdout + done.stderr
    assert "Traceback" not in output and SECRET not in output, output
    return done


def test_index_search_and_doctor_finish_on_a_pipe_and_a_link_into_memvault(
    tmp_path: Path,
) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    (root / ".memvault" / "token").write_text(SECRET)
    os.symlink(".memvault", root / "Secrets")
    os.symlink(".memvault/token", root / "token.md")
    os.mkfifo(root / "x.md")
    (root / "Projects" / "Apollo.md").write_text("# Apollo\nLaunch window in May.\n")

    assert memvault(root, "index", "--rebuild").returncode == 0
    found = memvault(root, "search", "launch window", "--json")
    assert found.returncode == 0 and "Projects/Apollo.md" in found.stdout
    assert "token.md" not in memvault(root, "search", SECRET, "--json").stdout
    assert memvault(root, "doctor").returncode in (0, 1)  # a verdict, not a hang

    pipe = memvault(root, "note", "read", "x.md")
    assert pipe.returncode == EXIT_INVALID
    assert "x.md is not a regular file but a named pipe" in pipe.stderr
    link = memvault(root, "note", "read", "token.md")
    assert link.returncode == EXIT_INVALID and ".memvault, memvault's own folder" in link.stderr
    assert (root / ".memvault" / "token").read_text() == SECRET
