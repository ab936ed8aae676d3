"""``memvault openclaw install | uninstall | status`` against the real OpenClaw 2026.9.6.

Each OpenClaw lives in a temporary HOME made by ``openclaw setup --baseline``;
memvault runs as a process (``python -m memvault``) beside a real ``memvault
serve``, and what is installed is judged by OpenClaw's own commands.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon_process import DaemonProcess
from memvault.openclaw.install import Installer, Target
from memvault.openclaw_cli import OpenClaw
from openclaw_support import Home, make_home, snapshot
from waiting import WAIT

# A hang guard only, above the bounds a test may meet: an install and several openclaw
# commands, each bounded by a multiple of WAIT. (A failed step resumed is
# test_install_resume.py: a module of its own, so another worker runs it meanwhile.)
pytestmark = [pytest.mark.timeout(25 * WAIT), pytest.mark.slow]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A home with a filled workspace, its files before, and one install done."""
    home = make_home(tmp_path_factory.mktemp("oc"))
    config_before = home.config.read_bytes()
    workspace_before = snapshot(home.workspace)
    daemon = DaemonProcess(home.vault)
    try:
        done = home.memvault("install", "--openclaw", str(home.command))
        yield {
            "home": home,
            "daemon": daemon,
            "config_before": config_before,
            "workspace_before": workspace_before,
            "output": done.stdout,
        }
    finally:
        daemon.stop()


def test_install_runs_every_step_and_openclaw_confirms_it(installed: dict[str, Any]) -> None:
    home: Home = installed["home"]
    out = installed["output"]
    for step in ("verify_prereqs", "backup", "import_memories", "link_plugin", "configure"):
        assert f"ok     {step}" in out, out
    assert "Imported 3 memories" in out and "2 tasks" in out and "2 learnings" in out, out
    listed = home.plugins()
    ours = listed["memvault"]
    assert ours["status"] == "loaded" and ours["enabled"] is True and ours["kind"] == "memory"
    assert set(ours["toolNames"]) == {"memory_search", "memory_get"}
    assert listed["memory-core"]["status"] == "disabled"
    inspected = home.openclaw_json("plugins", "inspect", "memvault", "--runtime")
    assert inspected["plugin"]["memorySlotSelected"] is True
    hooks = json.dumps(inspected["typedHooks"])
    for hook in ("before_prompt_build", "agent_end", "message_received", "message_sent"):
        assert hook in hooks, hooks
    assert "blocked" not in json.dumps(inspected["diagnostics"])
    skills = home.openclaw_json("skills", "list")["skills"]
    skill = next(s for s in skills if s["name"] == "memvault")
    assert skill["eligible"] is True and skill["modelVisible"] is True
    config = json.loads(home.config.read_text())
    entry = config["plugins"]["entries"]["memvault"]
    daemon: DaemonProcess = installed["daemon"]
    assert entry["config"]["baseUrl"] == daemon.url
    assert entry["config"]["tokenFile"] == str(home.vault / ".memvault" / "token")
    assert entry["hooks"]["allowConversationAccess"] is True
    assert config["agents"]["defaults"]["compaction"]["memoryFlush"]["enabled"] is True
    note = (home.workspace / "MEMVAULT.md").read_text()
    assert f"--vault {home.vault} remember --source openclaw" in note
    assert "$remember" not in note and "$search" not in note


def test_install_imported_the_workspace_into_the_vault(installed: dict[str, Any]) -> None:
    daemon: DaemonProcess = installed["daemon"]
    with daemon.client() as client:
        found = client.post(
            "/v1/tools/memory_search", json={"query": "Kaffeerösterei coffee"}
        ).json()
        tasks = client.get("/v1/tasks", params={"include_closed": True}).json()["result"]
    assert "Kaffeerösterei" in json.dumps(found, ensure_ascii=False), found
    titles = {task["title"]: task["status"] for task in tasks}
    assert titles.get("Renew the passport before March") == "todo", titles
    assert titles.get("Book the dentist") == "done", titles


def test_a_second_install_changes_nothing(installed: dict[str, Any]) -> None:
    home: Home = installed["home"]
    state = home.vault / ".memvault" / "openclaw" / "install.json"
    before = (home.config.read_bytes(), snapshot(home.workspace), state.read_bytes())
    done = home.memvault("install", "--openclaw", str(home.command))
    assert "already OpenClaw's memory; nothing to do" in done.stdout
    assert (home.config.read_bytes(), snapshot(home.workspace), state.read_bytes()) == before


def test_status_says_everything_works(installed: dict[str, Any]) -> None:
    home: Home = installed["home"]
    report = json.loads(home.memvault("status", "--json").stdout)
    assert report["ok"] is True, report
    assert report["openclaw"] == {
        "plugin_loaded": True,
        "memory_slot": True,
        "tools": True,
        "hooks": True,
        "skill": True,
    }
    assert report["daemon"]["running"] and report["daemon"]["matches_plugin"]
    assert set(report["workspace_files"].values()) == {"as installed"}
    table = home.memvault("status").stdout
    assert "memory slot" in table and "as installed" in table


def test_uninstall_restores_openclaw_and_keeps_the_memories(installed: dict[str, Any]) -> None:
    home: Home = installed["home"]
    done = home.memvault("uninstall")
    assert "restored from the backup" in done.stdout, done.stdout
    assert home.config.read_bytes() == installed["config_before"]
    assert snapshot(home.workspace) == installed["workspace_before"]
    listed = home.plugins()
    core = listed["memory-core"]
    assert core["status"] == "loaded" and core["enabled"] is True
    assert "memvault" not in listed
    back = home.openclaw_json("plugins", "inspect", "memory-core", "--runtime")
    assert back["plugin"]["memorySlotSelected"] is True, back["plugin"]
    assert not (home.vault / ".memvault" / "openclaw" / "install.json").exists()
    daemon: DaemonProcess = installed["daemon"]
    with daemon.client() as client:
        found = client.post("/v1/tools/memory_search", json={"query": "kayak Lake Bled"}).json()
    assert "Lake Bled" in json.dumps(found), found
    report = json.loads(home.memvault("status", "--json", code=1).stdout)
    assert report["state"] == "not installed" and report["ok"] is False


# -- the paths a person takes when something is off ------------------------------------------


def test_dry_run_and_prerequisites(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    config_before, workspace_before = home.config.read_bytes(), snapshot(home.workspace)
    # No daemon yet: one sentence, exit 5, and the failed step is where a re-run resumes.
    done = home.memvault("install", "--openclaw", str(home.command), code=5)
    assert "memvault daemon is not running" in done.stderr and "Traceback" not in done.stderr
    state = json.loads((home.vault / ".memvault/openclaw/install.json").read_text())
    assert state["completed"] == [] and state["current"] == "verify_prereqs"
    missing = home.memvault("install", "--openclaw", str(tmp_path / "nowhere"), code=3)
    assert "is not an executable openclaw command" in missing.stderr
    daemon = DaemonProcess(home.vault)
    try:
        plan = json.loads(
            home.memvault("install", "--openclaw", str(home.command), "--dry-run", "--json").stdout
        )
        assert [row["step"] for row in plan] == [
            "verify_prereqs",
            "backup",
            "import_memories",
            "link_plugin",
            "configure",
            "workspace_files",
            "verify",
        ]
        assert {row["state"] for row in plan} == {"to do"}
        assert daemon.url in plan[0]["detail"]
        assert home.config.read_bytes() == config_before
        assert snapshot(home.workspace) == workspace_before
        with daemon.client() as client:
            assert client.get("/v1/memories").json()["result"] == []
    finally:
        daemon.stop()


def test_a_workspace_with_nothing_to_import_is_not_a_failure(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("# Agents\n")
    installer = Installer(
        tmp_path / "vault", None, lambda: pytest.fail("nothing needs the vault"), say=print
    )
    installer.target = Target(
        openclaw=OpenClaw(tmp_path / "openclaw"),
        version="2026.9.6",
        config_path=tmp_path / "openclaw.json",
        workspace=workspace,
        daemon_url="http://127.0.0.1:1",
        token_file=tmp_path / "token",
        vault=tmp_path / "vault",
    )
    assert installer._import_memories().startswith("nothing to import")
    assert installer.state.imported == {"summary": "nothing to import", "counts": {}}
