"""``memvault service``: the unit systemd itself accepts, installed once, never over a
person's edits; the launchd agent's plist, and its command run as launchd would run it.

The service manager is a small fake ``systemctl`` on PATH that answers as the real one
does (``is-active`` prints the state and exits 3 when inactive; a missing user bus is
an error on stderr): the tests never touch this machine's own services. The unit files
are checked by Debian's real ``systemd-analyze verify``.
"""

from __future__ import annotations

import os
import plistlib
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from cli_support import EXIT_CONFLICT, EXIT_VAULT, invoke, ok, ok_json
from memvault.gateway.service import ServiceError, plan
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault

FAKE_SYSTEMCTL = """#!/bin/sh
echo "$*" >> "{log}"
if [ -e "{down}" ]; then
  echo "Failed to connect to bus: No medium found" >&2; exit 1
fi
case "$2" in
  enable) touch "{units}/$4" ;;
  disable) rm -f "{units}/$4" ;;
  is-active) if [ -e "{units}/$3" ]; then echo active; else echo inactive; exit 3; fi ;;
esac
"""


class Machine:
    """A home folder, a fake systemctl on PATH, and what it was asked."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.home.mkdir()
        bin_dir, units = root / "bin", root / "enabled"
        bin_dir.mkdir()
        units.mkdir()
        self.log, self.down = root / "systemctl.log", root / "bus-down"
        script = bin_dir / "systemctl"
        script.write_text(FAKE_SYSTEMCTL.format(log=self.log, down=self.down, units=units))
        script.chmod(0o755)
        self.env = {
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": None,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        }

    def asked(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


def make_vault(folder: Path) -> Path:
    init_vault(Vault(folder))
    return folder


def verify(unit: Path) -> None:
    """systemd's own check of a unit file: it fails on what systemd would not run."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: `make test` installs Debian's systemd"
    done = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_install_writes_a_unit_systemd_accepts_and_starts_it(
    machine: Machine, tmp_path: Path
) -> None:
    vault = make_vault(tmp_path / "notes")
    out = ok_json(vault, "service", "install", env=machine.env)
    unit = Path(out["file"])
    assert unit.parent == machine.home / ".config/systemd/user"
    assert out["installed"] and out["changed"] and out["kind"] == "systemd"
    assert unit.name.startswith("memvault-notes-") and unit.suffix == ".service"
    text = unit.read_text()
    assert "Restart=on-failure" in text and "WantedBy=default.target" in text
    assert f"--vault {vault} serve" in text
    env_file = Path(out["env_file"])
    assert f"EnvironmentFile=-{env_file}" in text
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600  # it will hold secrets
    verify(unit)
    assert machine.asked() == [
        "--user daemon-reload",
        f"--user enable --now {unit.name}",
    ]
    status = ok_json(vault, "service", "status", env=machine.env)
    assert (status["installed"], status["edited"], status["state"]) == (True, False, "active")


def test_install_again_changes_nothing_and_never_replaces_a_hand_edit(
    machine: Machine, tmp_path: Path
) -> None:
    vault = make_vault(tmp_path / "notes")
    unit = Path(ok_json(vault, "service", "install", "--no-start", env=machine.env)["file"])
    first = unit.stat().st_mtime_ns
    again = ok(vault, "service", "install", "--no-start", env=machine.env).stdout
    assert again.startswith("Already installed") and unit.stat().st_mtime_ns == first
    # The owner gives the daemon more time to stop, by hand.
    edited = unit.read_text().replace("TimeoutStopSec=60", "TimeoutStopSec=120")
    unit.write_text(edited)
    refused = invoke(vault, "service", "install", env=machine.env)
    assert refused.exit_code == EXIT_CONFLICT
    assert "was edited since memvault wrote it" in refused.stderr
    assert unit.read_text() == edited
    assert ok_json(vault, "service", "status", env=machine.env)["edited"] is True
    assert invoke(vault, "service", "uninstall", env=machine.env).exit_code == EXIT_CONFLICT
    assert unit.read_text() == edited
    ok(vault, "service", "install", "--force", "--no-start", env=machine.env)
    assert "TimeoutStopSec=60" in unit.read_text()
    verify(unit)
    # --no-start: the service manager was only asked for the state, never to start it.
    assert [asked.split()[1] for asked in machine.asked()] == ["is-active"]


def test_uninstall_stops_removes_the_unit_and_keeps_the_secrets(
    machine: Machine, tmp_path: Path
) -> None:
    vault = make_vault(tmp_path / "notes")
    out = ok_json(vault, "service", "install", env=machine.env)
    env_file = Path(out["env_file"])
    env_file.write_text("TELEGRAM_BOT_TOKEN=123:abc\n")
    gone = ok_json(vault, "service", "uninstall", env=machine.env)
    assert gone["changed"] and not gone["installed"]
    assert not Path(out["file"]).exists()
    assert env_file.read_text() == "TELEGRAM_BOT_TOKEN=123:abc\n"
    assert machine.asked()[-2:] == [f"--user disable --now {out['name']}", "--user daemon-reload"]
    again = ok(vault, "service", "uninstall", env=machine.env).stdout
    assert "nothing to remove" in again
    status = ok_json(vault, "service", "status", env=machine.env)
    assert status["installed"] is False


def test_a_service_manager_that_does_not_answer_is_one_sentence_and_the_unit_stays(
    machine: Machine, tmp_path: Path
) -> None:
    vault = make_vault(tmp_path / "notes")
    machine.down.touch()
    failed = invoke(vault, "service", "install", env=machine.env)
    assert failed.exit_code == 1
    said = failed.stderr.strip()
    assert "Failed to connect to bus" in said and "systemctl --user enable --now" in said
    assert len(said.splitlines()) == 1
    machine.down.unlink()
    assert ok_json(vault, "service", "status", env=machine.env)["state"] == "inactive"
    ok(vault, "service", "install", env=machine.env)  # the same command, once it answers
    assert ok_json(vault, "service", "status", env=machine.env)["state"] == "active"


def test_two_vaults_get_two_services_and_a_folder_that_is_no_vault_gets_none(
    machine: Machine, tmp_path: Path
) -> None:
    first = ok_json(make_vault(tmp_path / "a" / "notes"), "service", "install", env=machine.env)
    second = ok_json(make_vault(tmp_path / "b" / "notes"), "service", "install", env=machine.env)
    assert first["name"] != second["name"] and first["env_file"] != second["env_file"]
    stray = tmp_path / "stray"
    stray.mkdir()
    refused = invoke(stray, "service", "install", env=machine.env)
    assert refused.exit_code == EXIT_VAULT and "memvault init" in refused.stderr
    assert sorted(p.name for p in (machine.home / ".config/systemd/user").iterdir()) == sorted(
        [first["name"], second["name"]]
    )


def test_a_vault_path_with_spaces_quotes_and_percent_signs_is_one_argument(
    tmp_path: Path,
) -> None:
    vault = tmp_path / 'My "100%" $HOME notes'
    service = plan(vault, platform="linux", home=tmp_path / "home")
    unit = tmp_path / service.name
    unit.write_text(service.text)
    verify(unit)
    line = next(x for x in service.text.splitlines() if x.startswith("ExecStart="))
    assert '"' + str(tmp_path) + '/My \\"100%%\\" $$HOME notes"' in line


def test_the_launchd_agent_runs_the_daemon_with_the_secrets_file(tmp_path: Path) -> None:
    vault = tmp_path / "it's my vault"
    shown = tmp_path / "argv"
    python = tmp_path / "python3"  # stands in for the interpreter: shows what it was given
    python.write_text(
        f'#!/bin/sh\nfor a in "$@"; do echo "$a"; done > "{shown}"\necho "$SECRET" >> "{shown}"\n'
    )
    python.chmod(0o755)
    service = plan(vault, platform="darwin", home=tmp_path / "home", python=str(python))
    assert service.path == tmp_path / "home/Library/LaunchAgents" / f"{service.name}.plist"
    agent = plistlib.loads(service.text.encode())
    assert agent["Label"] == service.name and agent["RunAtLoad"] is True
    assert agent["KeepAlive"] == {"SuccessfulExit": False}
    service.env_file.parent.mkdir(parents=True)
    service.env_file.write_text("SECRET='a b'\n")
    subprocess.run(agent["ProgramArguments"], check=True, env={"PATH": "/usr/bin:/bin"})
    assert shown.read_text().splitlines() == [
        "-m",
        "memvault",
        "--vault",
        str(vault),
        "serve",
        "a b",
    ]


def test_elsewhere_it_says_what_to_do_instead(tmp_path: Path) -> None:
    with pytest.raises(
        ServiceError, match=re.escape("systemd (Linux) and launchd (macOS), not win32")
    ):
        plan(tmp_path, platform="win32")


def test_a_vault_path_that_is_not_utf8_is_one_sentence(tmp_path: Path) -> None:
    vault = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))  # Latin-1 bytes
    with pytest.raises(ServiceError, match="is not valid UTF-8"):
        plan(vault, platform="linux", home=tmp_path / "home")
    assert not (tmp_path / "home").exists()
