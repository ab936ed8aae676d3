"""A failed ``memvault openclaw install`` step resumes, and uninstall keeps what a person
changed after the install, against the real OpenClaw 2026.9.6.

A module of its own (three installs and an uninstall, the longest OpenClaw test), so the
suite's workers run it beside ``test_install.py`` instead of after it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon_process import DaemonProcess
from openclaw_support import make_home, write_command
from waiting import WAIT

# A hang guard only, above the bounds the test may meet: three installs, an uninstall
# and several openclaw commands, each bounded by a multiple of WAIT (about twenty of
# WAIT in all; on a loaded 2-core machine it took 2.5 minutes).
pytestmark = [pytest.mark.timeout(25 * WAIT), pytest.mark.slow]


def test_a_failed_step_resumes_and_uninstall_keeps_later_changes(tmp_path: Path) -> None:
    real = write_command(tmp_path / "bin")
    # An openclaw whose first `plugins install` fails, as a broken npm cache would.
    flaky = tmp_path / "flaky" / "openclaw"
    flaky.parent.mkdir()
    marker = tmp_path / "failed-once"
    flaky.write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2" = "plugins install" ] && [ ! -e "{marker}" ]; then\n'
        f'  touch "{marker}"; echo "npm ERR! network unreachable" >&2; exit 1\n'
        "fi\n"
        f'exec "{real}" "$@"\n'
    )
    flaky.chmod(0o755)
    home = make_home(tmp_path, command=flaky)
    config_before = home.config.read_bytes()
    daemon = DaemonProcess(home.vault)
    try:
        failed = home.memvault("install", "--openclaw", str(flaky), code=1)
        assert "network unreachable" in failed.stderr and "Traceback" not in failed.stderr
        state = json.loads((home.vault / ".memvault/openclaw/install.json").read_text())
        assert state["completed"] == ["verify_prereqs", "backup", "import_memories"]
        assert state["current"] == "link_plugin"
        resumed = home.memvault("install", "--openclaw", str(flaky)).stdout
        assert "done   import_memories" in resumed and "ok     link_plugin" in resumed
        with daemon.client() as client:  # the import ran once, not twice
            memories = client.get("/v1/memories", params={"limit": 100}).json()["result"]
        assert sum("Kaffeerösterei" in m["text"] for m in memories) == 1
        # --force starts over but keeps the first backup.
        forced = home.memvault("install", "--openclaw", str(flaky), "--force").stdout
        assert "done   backup" in forced and "ok     link_plugin" in forced
        # A person changes OpenClaw's config and the note after the install.
        home.openclaw("config", "set", "gateway.port", "19001", "--strict-json")
        note = home.workspace / "MEMVAULT.md"
        note.write_text(note.read_text() + "\n- My own rule: search twice.\n")
        done = home.memvault("uninstall")
        assert "changed since the install" in done.stdout
        config = json.loads(home.config.read_text())
        assert config["gateway"]["port"] == 19001
        assert "memvault" not in config["plugins"].get("entries", {})
        assert "memory" not in config["plugins"].get("slots", {})
        assert "memory-core" not in config["plugins"].get("entries", {})
        assert config != json.loads(config_before)
        assert "My own rule" in note.read_text()
        assert not (home.workspace / "skills" / "memvault").exists()
        assert home.plugin("memory-core")["status"] == "loaded"
    finally:
        daemon.stop()
