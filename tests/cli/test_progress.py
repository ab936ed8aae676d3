"""Progress where a person waits: drawn on a terminal, nothing when piped or ``--quiet``.

Each command runs as its own process, its stderr a real pseudo-terminal (or a pipe), so
the check is rich's own decision about what it is writing to, not ours.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import WAIT

BAR = "━"  # rich's bar


def run(vault: Path, *args: str, terminal: bool) -> tuple[int, str, str]:
    """``memvault --vault VAULT ARGS``: exit code, stdout, and what stderr received."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MEMVAULT_") or key == "MEMVAULT_MODEL_CACHE"
    }
    env |= {"TERM": "xterm-256color", "COLUMNS": "120", "MEMVAULT_CLI__AUTOSTART": "false"}
    env["MEMVAULT_EMBEDDER__PROVIDER"] = "none"
    command = [sys.executable, "-m", "memvault", "--vault", str(vault), *args]
    if not terminal:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=WAIT)
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL, env=env
        )
        os.close(follower)
        received = bytearray()
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not chunk:
                break
            received += chunk
        assert process.stdout is not None
        out = process.stdout.read().decode()
        code = process.wait(timeout=WAIT)
    finally:
        os.close(leader)
    return code, out, received.decode(errors="replace")


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    vault = Vault(tmp_path / "vault")
    init_vault(vault)
    for n in range(120):
        vault.write_text(f"Notes/note {n}.md", f"# Note {n}\n\nThe shed needs paint, coat {n}.\n")
    return vault.root


def test_index_draws_a_bar_on_a_terminal_only(notes: Path) -> None:
    code, out, err = run(notes, "index", terminal=True)
    assert code == 0 and "Indexing" in err and BAR in err
    assert out.startswith("Indexed 1")  # the bar never reaches stdout
    code, out, err = run(notes, "index", "--rebuild", terminal=False)
    assert code == 0 and "Indexing" not in err and BAR not in err
    assert out.startswith("Indexed 1")


def test_quiet_draws_nothing_on_a_terminal(notes: Path) -> None:
    code, out, err = run(notes, "index", "--rebuild", "--quiet", terminal=True)
    assert code == 0 and out.startswith("Indexed 1")
    assert "Indexing" not in err and BAR not in err


def test_a_job_run_shows_a_spinner_and_json_stays_clean(notes: Path) -> None:
    code, _, err = run(notes, "jobs", "run", "daily_note", terminal=True)
    assert code == 0 and "Running daily_note" in err
    code, out, err = run(notes, "jobs", "run", "daily_note", "--json", terminal=True)
    assert code == 0 and "Running daily_note" not in err
    assert out.lstrip().startswith("{")
