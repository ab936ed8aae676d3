"""memvault as OpenClaw's memory: ``install`` and ``status``.

The install is a state machine whose progress is kept in
``<vault>/.memvault/openclaw/install.json``: a step that finished is not run
again, a failed step is where a re-run resumes, and ``--force`` starts over
(keeping the first backup, so an uninstall still returns to the state
before memvault). The steps:

1. ``verify_prereqs``: openclaw found and recent enough, its openclaw.json
   and workspace there, the memvault daemon answering;
2. ``backup``: openclaw.json and the workspace files the install writes,
   copied to ``.memvault/openclaw/backup/`` with their hashes;
3. ``import_memories``: the workspace's MEMORY.md, daily logs, TODO.md and
   LEARNINGS.md into the vault (idempotent by content hash);
4. ``link_plugin``: ``openclaw plugins install --link`` of the plugin
   shipped in this package;
5. ``configure``: one validated ``openclaw config patch``: the memory slot,
   the plugin's settings (daemon URL, token file), conversation access for
   its hooks, memory-core off, the memory flush on (its prompt comes from
   the plugin and points at memvault);
6. ``workspace_files``: ``MEMVAULT.md`` (the plugin puts it in the system
   prompt) and the ``memvault`` skill in the workspace;
7. ``verify``: OpenClaw's own ``plugins list``, ``plugins inspect
   --runtime`` and ``skills list`` agree that it is loaded and in the slot.

What an install is (its steps, its record, its target, the settings it patches in)
is :mod:`memvault.openclaw.install_state`; the uninstall, which undoes it without
losing anything a person did meanwhile, is :mod:`memvault.openclaw.uninstall`. This
module runs the steps and says how an install stands (``status``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from memvault.errors import ConflictError, InvalidInputError, NotFoundError, VaultError
from memvault.locations import TOKEN_FILE, state_dir
from memvault.openclaw.install_state import (
    CONFIG_BACKUP,
    PLUGIN_DIR,
    PLUGIN_ID,
    STEP_NAMES,
    STEPS,
    WRITTEN_FILES,
    InstallState,
    Say,
    Target,
    backup_dir,
    digest,
    memvault_command,
    settings_patch,
)
from memvault.openclaw.uninstall import Uninstalled, uninstall
from memvault.openclaw_cli import OpenClaw, OpenClawError, find_command, shown
from memvault.vault.store import replace_file

if TYPE_CHECKING:
    from memvault.gateway.client import DaemonInfo
    from memvault.runtime import Runtime

# The names the CLI, the bench and the tests import from here.
__all__ = [
    "PLUGIN_DIR",
    "PLUGIN_ID",
    "InstallState",
    "Installer",
    "Target",
    "Uninstalled",
    "check_installed",
    "environment_note",
    "find_target",
    "is_ok",
    "status",
    "uninstall",
]

_TEMPLATES = Path(__file__).with_name("templates")
# Seconds a daemon that took the connection has to answer its health check: a loaded or
# cold machine's daemon may answer its first request late, and is running all the same.
HEALTH_TIMEOUT = 30.0


def render(template: str, vault: Path) -> bytes:
    """A workspace file from its template, with this memvault's commands filled in."""
    command = memvault_command(vault)
    text = Template((_TEMPLATES / template).read_text(encoding="utf-8")).substitute(
        remember=f"{command} remember --source openclaw",
        search=f"{command} search",
    )
    return text.encode("utf-8")


def _answers(running: DaemonInfo) -> bool:
    """Whether the daemon ``running`` names answers its health check."""
    from memvault.gateway.client import daemon_version_at

    found = daemon_version_at(running.connect_host, running.port, timeout=HEALTH_TIMEOUT)
    return found is not None


def find_target(vault: Path, command: Path | str | None) -> Target:
    """Check what an install needs, or say in one sentence what is missing."""
    from memvault.gateway.client import find_daemon

    openclaw = OpenClaw(find_command(command))
    version = openclaw.version()
    config_path = openclaw.config_path()
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotFoundError(
            f"OpenClaw has no config at {config_path}; set it up first (openclaw setup)."
        ) from None
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{config_path} cannot be read as JSON ({exc}).") from None
    workspace = _workspace_of(config, config_path)
    if not workspace.is_dir():
        raise NotFoundError(
            f"OpenClaw's workspace {workspace} does not exist; set it up first (openclaw setup)."
        )
    running = find_daemon(vault).running
    if running is None or not _answers(running):
        raise VaultError(
            f"The memvault daemon is not running for {vault}; start it first "
            f"(memvault --vault {vault} serve): OpenClaw's plugin talks to it."
        )
    return Target(
        openclaw=openclaw,
        version=shown(version),
        config_path=config_path,
        workspace=workspace,
        daemon_url=running.url,
        token_file=state_dir(vault) / TOKEN_FILE,
        vault=vault,
    )


def _workspace_of(config: Any, config_path: Path) -> Path:
    """``agents.defaults.workspace``, else OpenClaw's default beside its config."""
    try:
        value = config["agents"]["defaults"]["workspace"]
    except (KeyError, TypeError):
        value = None
    return Path(value).expanduser() if isinstance(value, str) else config_path.parent / "workspace"


# -- install --------------------------------------------------------------------


@dataclass
class Installer:
    """One run of ``memvault openclaw install``."""

    vault: Path
    command: Path | str | None
    open_runtime: Callable[[], Runtime]
    say: Say
    state: InstallState = field(default_factory=InstallState)
    target: Target | None = None

    def run(self, *, force: bool = False) -> InstallState:
        previous = InstallState.load(self.vault)
        if previous is not None and not force:
            self.state = previous
            if previous.status == "complete":
                self.say(
                    "memvault is already OpenClaw's memory; nothing to do (--force redoes it)."
                )
                return previous
        elif previous is not None:  # --force: start over, but keep the first backup
            self.state = InstallState(
                backup=previous.backup,
                created_dirs=previous.created_dirs,
                completed=["backup"] if previous.backup else [],
            )
        if self.state.target and "verify_prereqs" in self.state.completed:
            self.target = Target.from_dict(self.state.target)
        self._check_same_home()
        for step in STEPS:
            if step.name in self.state.completed:
                self.say(f"  done   {step.name}")
                continue
            self.state.current = step.name
            self.state.error = None
            try:
                detail = getattr(self, f"_{step.name}")()
            except Exception as exc:
                self.state.error = str(exc)
                self._save()
                self.say(f"  failed {step.name}: once fixed, run the install again to resume here.")
                raise
            self.state.completed.append(step.name)
            self._save()
            self.say(f"  ok     {step.name}: {detail}")
        self.state.status = "complete"
        self.state.current = None
        self._save()
        self.say("memvault is now OpenClaw's memory; restart the OpenClaw gateway to load it.")
        return self.state

    def plan(self) -> list[dict[str, str]]:
        """What a run would do, step by step (``--dry-run``): nothing is written."""
        previous = InstallState.load(self.vault) or InstallState()
        target = find_target(self.vault, self.command)
        rows = []
        for step in STEPS:
            done = step.name in previous.completed
            rows.append(
                {
                    "step": step.name,
                    "state": "done" if done else "to do",
                    "does": step.title,
                    "detail": self._detail(step.name, target),
                }
            )
        return rows

    def _detail(self, name: str, target: Target) -> str:
        if name == "verify_prereqs":
            where = target.openclaw.command
            return f"OpenClaw {target.version} at {where}; daemon {target.daemon_url}"
        if name == "backup":
            return (
                f"{target.config_path} and {', '.join(WRITTEN_FILES)} -> {backup_dir(self.vault)}"
            )
        if name == "import_memories":
            return f"from {target.workspace}"
        if name == "link_plugin":
            return str(PLUGIN_DIR)
        if name == "configure":
            return json.dumps(settings_patch(target))
        if name == "workspace_files":
            return ", ".join(str(target.workspace / rel) for rel in WRITTEN_FILES)
        return "plugin loaded, memory slot selected, skill eligible"

    def _save(self) -> None:
        self.state.save(self.vault)

    def _check_same_home(self) -> None:
        """An unfinished install into another OpenClaw is not silently redirected."""
        if self.target is None or self.command is None:
            return
        if find_command(self.command) != self.target.openclaw.command:
            raise ConflictError(
                f"An install into OpenClaw at {self.target.openclaw.command} is unfinished; "
                "finish it with the same --openclaw, or start over with --force."
            )

    def _need_target(self) -> Target:
        assert self.target is not None, "verify_prereqs runs first"
        return self.target

    # -- the steps (each returns what it did, in a few words) ----------------------

    def _verify_prereqs(self) -> str:
        self.target = find_target(self.vault, self.command)
        self.state.target = self.target.to_dict()
        return (
            f"OpenClaw {self.target.version}, workspace {self.target.workspace}, "
            f"daemon {self.target.daemon_url}"
        )

    def _backup(self) -> str:
        target = self._need_target()
        folder = backup_dir(self.vault)
        sources = {CONFIG_BACKUP: target.config_path} | {
            f"workspace/{rel}": target.workspace / rel for rel in WRITTEN_FILES
        }
        manifest: dict[str, str | None] = {}
        for name, source in sources.items():
            try:
                data = source.read_bytes()
            except FileNotFoundError:
                manifest[name] = None
                continue
            replace_file(folder / name, data)
            manifest[name] = hashlib.sha256(data).hexdigest()
        self.state.backup = manifest
        self.state.config_sha256 = manifest[CONFIG_BACKUP]
        kept = sum(1 for value in manifest.values() if value is not None)
        return f"{kept} file(s) in {folder}"

    def _import_memories(self) -> str:
        from memvault.openclaw.importers import WORKSPACE_FILES, holds_workspace, import_workspace

        workspace = self._need_target().workspace
        if not holds_workspace(workspace):
            self.state.imported = {"summary": "nothing to import", "counts": {}}
            return f"nothing to import (the workspace holds none of {', '.join(WORKSPACE_FILES)})"
        report = import_workspace(self.open_runtime(), workspace)
        self.state.imported = {"summary": report.summary(), "counts": report.counts()}
        return report.summary()

    def _link_plugin(self) -> str:
        target = self._need_target()
        target.openclaw.run(
            "plugins", "install", "--link", str(PLUGIN_DIR), "--force", "--accept-capabilities"
        )
        self.state.config_sha256 = digest(target.config_path)
        return f"linked {PLUGIN_DIR}"

    def _configure(self) -> str:
        target = self._need_target()
        target.openclaw.patch_config(settings_patch(target))
        self.state.config_sha256 = digest(target.config_path)
        return f"plugin talks to {target.daemon_url}"

    def _workspace_files(self) -> str:
        target = self._need_target()
        for rel, template in WRITTEN_FILES.items():
            path = target.workspace / rel
            for parent in reversed(Path(rel).parents[:-1]):
                folder = target.workspace / parent
                if not folder.exists() and str(parent) not in self.state.created_dirs:
                    self.state.created_dirs.append(str(parent))
            data = render(template, target.vault)
            replace_file(path, data)
            self.state.written[rel] = hashlib.sha256(data).hexdigest()
        return ", ".join(WRITTEN_FILES)

    def _verify(self) -> str:
        target = self._need_target()
        found = check_installed(target.openclaw)
        problems = [name for name, ok in found.items() if ok is False]
        self.state.verified = found
        if problems:
            raise OpenClawError(
                f"OpenClaw does not confirm the install ({', '.join(problems)}); "
                "see memvault openclaw status."
            )
        self.state.config_sha256 = digest(target.config_path)
        return "plugin loaded, memory slot selected, tools and skill visible"


def check_installed(openclaw: OpenClaw) -> dict[str, Any]:
    """What OpenClaw itself says: the plugin loaded, in the memory slot, its tools and hooks
    registered with none blocked, the skill eligible (each a bool)."""
    listed = openclaw.json("plugins", "list")
    plugins = listed.get("plugins", listed) if isinstance(listed, dict) else listed
    ours = next((p for p in plugins if isinstance(p, dict) and p.get("id") == PLUGIN_ID), None)
    loaded = bool(ours and ours.get("enabled") and ours.get("status") == "loaded")
    slot = tools = hooks = False
    if loaded:
        inspected = openclaw.json("plugins", "inspect", PLUGIN_ID, "--runtime")
        plugin = inspected.get("plugin", {})
        slot = plugin.get("memorySlotSelected") is True
        names = {t.get("name") if isinstance(t, dict) else t for t in inspected.get("tools", [])}
        names |= {
            n for t in inspected.get("tools", []) if isinstance(t, dict) for n in t.get("names", [])
        }
        tools = {"memory_search", "memory_get"} <= names
        said = json.dumps(inspected.get("diagnostics", []))
        hooks = bool(inspected.get("typedHooks")) and "blocked" not in said
    skills = openclaw.json("skills", "list").get("skills", [])
    skill = any(s.get("name") == "memvault" and s.get("eligible") for s in skills)
    return {
        "plugin_loaded": loaded,
        "memory_slot": slot,
        "tools": tools,
        "hooks": hooks,
        "skill": skill,
    }


# -- status ---------------------------------------------------------------------


def status(vault: Path, command: Path | str | None, *, check: bool = True) -> dict[str, Any]:
    """What is installed and whether it works (OpenClaw asked unless ``check`` is off)."""
    from memvault.gateway.client import find_daemon

    state = InstallState.load(vault)
    out: dict[str, Any] = {"installed": state is not None and state.status == "complete"}
    if state is None:
        out["state"] = "not installed"
        return out
    out["state"] = state.status
    out["steps"] = {name: name in state.completed for name in STEP_NAMES}
    if state.error:
        out["error"] = state.error
    out["target"] = state.target
    running = find_daemon(vault).running
    up = running is not None and _answers(running)
    out["daemon"] = {
        "running": up,
        "url": running.url if running else None,
        "matches_plugin": bool(running and running.url == state.target.get("daemon_url")),
    }
    if state.target:
        workspace = Path(state.target["workspace"])
        out["workspace_files"] = {
            rel: _file_state(workspace / rel, written) for rel, written in state.written.items()
        }
    if check and state.target:
        openclaw = (
            OpenClaw(find_command(command)) if command else OpenClaw(Path(state.target["command"]))
        )
        try:
            out["openclaw"] = check_installed(openclaw)
        except (OpenClawError, NotFoundError) as exc:
            out["openclaw"] = {"error": str(exc)}
    return out


def _file_state(path: Path, written: str) -> str:
    now = digest(path)
    if now is None:
        return "missing"
    return "as installed" if now == written else "changed since the install"


def is_ok(report: dict[str, Any]) -> bool:
    """Installed, the daemon where the plugin looks, and OpenClaw confirming each part."""
    checks = report.get("openclaw", {})
    return (
        bool(report.get("installed"))
        and bool(report.get("daemon", {}).get("running"))
        and bool(report.get("daemon", {}).get("matches_plugin"))
        and bool(checks)
        and "error" not in checks
        and all(checks.values())
    )


def environment_note() -> str:
    """Which OpenClaw the commands act on, as OpenClaw chooses it."""
    for name in ("OPENCLAW_CONFIG_PATH", "OPENCLAW_STATE_DIR"):
        if os.environ.get(name):
            return f"{name}={os.environ[name]}"
    return f"HOME={os.environ.get('HOME', '~')}"
