"""What an install of memvault into OpenClaw is: its steps, its record, its target.

The install (:mod:`memvault.openclaw.install`), its status and the uninstall
(:mod:`memvault.openclaw.uninstall`) share these: the steps in their order, the
record kept in ``<vault>/.memvault/openclaw/install.json`` (:class:`InstallState`:
the steps done, the backup's and the written files' hashes), the OpenClaw and daemon
an install works on (:class:`Target`), and the settings the ``configure`` step patches
into openclaw.json, which the uninstall takes out again.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memvault.errors import VaultError
from memvault.locations import state_dir
from memvault.openclaw_cli import OpenClaw
from memvault.vault.store import replace_file

PLUGIN_ID = "memvault"
PLUGIN_DIR = Path(__file__).with_name("plugin")
STATE_VERSION = 1
# The workspace files the install writes (relative to the workspace) and their templates.
WRITTEN_FILES = {
    "MEMVAULT.md": "MEMVAULT.md",
    "skills/memvault/SKILL.md": "skill/SKILL.md",
}
CONFIG_BACKUP = "openclaw.json"
TIMEOUT_MS = 1500


@dataclass(frozen=True)
class Step:
    name: str
    title: str


STEPS = (
    Step("verify_prereqs", "check openclaw, its config and workspace, and the memvault daemon"),
    Step("backup", "back up openclaw.json and the workspace files the install writes"),
    Step("import_memories", "import MEMORY.md, daily logs, TODO.md and LEARNINGS.md"),
    Step("link_plugin", "openclaw plugins install --link (memvault's plugin)"),
    Step(
        "configure",
        "openclaw config patch: memory slot, plugin settings, hook access, "
        "memory-core off, memory flush on",
    ),
    Step("workspace_files", "write MEMVAULT.md and the memvault skill into the workspace"),
    Step("verify", "openclaw plugins list / plugins inspect --runtime / skills list"),
)
STEP_NAMES = tuple(step.name for step in STEPS)

Say = Callable[[str], None]


def state_path(vault: Path) -> Path:
    """``<vault>/.memvault/openclaw/install.json``."""
    return state_dir(vault) / "openclaw" / "install.json"


def backup_dir(vault: Path) -> Path:
    return state_dir(vault) / "openclaw" / "backup"


def digest(path: Path) -> str | None:
    """The file's sha256, or None when there is no such file."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class InstallState:
    """What ``install.json`` records: the target, the steps done, the hashes."""

    started_at: str = field(default_factory=_now)
    status: str = "in_progress"  # in_progress | complete
    completed: list[str] = field(default_factory=list)
    current: str | None = None
    error: str | None = None
    # Where: openclaw's command, version, config and workspace; the daemon and token.
    target: dict[str, str] = field(default_factory=dict)
    # Each backed-up file (relative name) and its hash before the install (None: absent).
    backup: dict[str, str | None] = field(default_factory=dict)
    # The hash of openclaw.json as memvault last left it, and of each file it wrote.
    config_sha256: str | None = None
    written: dict[str, str] = field(default_factory=dict)
    created_dirs: list[str] = field(default_factory=list)
    imported: dict[str, Any] = field(default_factory=dict)
    verified: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, vault: Path) -> InstallState | None:
        path = state_path(vault)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise VaultError(f"{path} cannot be read ({exc}); remove it to start over.") from None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise VaultError(f"{path} is not an install state this memvault knows.")
        known = {name for name in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def save(self, vault: Path) -> None:
        data = {"version": STATE_VERSION, **self.__dict__}
        replace_file(state_path(vault), (json.dumps(data, indent=2) + "\n").encode("utf-8"))

    def to_dict(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, **self.__dict__}


@dataclass
class Target:
    """What an install works on, found by ``verify_prereqs``."""

    openclaw: OpenClaw
    version: str
    config_path: Path
    workspace: Path
    daemon_url: str
    token_file: Path
    vault: Path

    def to_dict(self) -> dict[str, str]:
        return {
            "command": str(self.openclaw.command),
            "version": self.version,
            "config_path": str(self.config_path),
            "workspace": str(self.workspace),
            "daemon_url": self.daemon_url,
            "token_file": str(self.token_file),
            "vault": str(self.vault),
        }

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> Target:
        return cls(
            openclaw=OpenClaw(Path(data["command"])),
            version=data["version"],
            config_path=Path(data["config_path"]),
            workspace=Path(data["workspace"]),
            daemon_url=data["daemon_url"],
            token_file=Path(data["token_file"]),
            vault=Path(data["vault"]),
        )


def memvault_command(vault: Path) -> str:
    """The shell words that run this memvault on this vault (from the agent's shell)."""
    script = Path(sys.executable).with_name("memvault")
    words = [str(script)] if script.is_file() else [sys.executable, "-m", "memvault"]
    return shlex.join([*words, "--vault", str(vault)])


def settings_patch(target: Target) -> dict[str, Any]:
    """The ``openclaw config patch`` the ``configure`` step applies."""
    return {
        "plugins": {
            "slots": {"memory": PLUGIN_ID},
            "entries": {
                PLUGIN_ID: {
                    "enabled": True,
                    "hooks": {"allowConversationAccess": True},
                    "config": {
                        "baseUrl": target.daemon_url,
                        "tokenFile": str(target.token_file),
                        "timeoutMs": TIMEOUT_MS,
                        "rememberCommand": f"{memvault_command(target.vault)} remember "
                        "--source openclaw",
                    },
                },
                "memory-core": {"enabled": False},
            },
        },
        "agents": {"defaults": {"compaction": {"memoryFlush": {"enabled": True}}}},
    }
