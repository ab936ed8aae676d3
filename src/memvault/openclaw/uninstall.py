"""Uninstalling memvault from OpenClaw, without losing what a person did meanwhile.

An openclaw.json nobody touched since the install is restored byte for byte from the
backup; one changed since has only memvault's settings taken out (each key the
install set goes back to its value in the backup, or away). A workspace file edited
since the install is kept; one memvault wrote is removed, or the person's own copy
from before the install is put back. Memories stay in the vault.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memvault.errors import NotFoundError
from memvault.openclaw.install_state import (
    CONFIG_BACKUP,
    PLUGIN_ID,
    InstallState,
    Say,
    Target,
    backup_dir,
    digest,
    settings_patch,
    state_path,
)
from memvault.openclaw_cli import OpenClaw, OpenClawError, find_command
from memvault.vault.store import replace_file


@dataclass
class Uninstalled:
    """What an uninstall did and what it kept because a person changed it."""

    config: str
    removed: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def uninstall(vault: Path, command: Path | str | None, say: Say) -> Uninstalled:
    """Give OpenClaw its own memory back; every memory stays in the vault."""
    state = InstallState.load(vault)
    if state is None:
        raise NotFoundError("memvault is not installed into OpenClaw (no install state).")
    if not state.target:
        state_path(vault).unlink()
        return Uninstalled(config="untouched (the install had not started)")
    target = Target.from_dict(state.target)
    openclaw = OpenClaw(find_command(command)) if command else target.openclaw
    folder = backup_dir(vault)
    # Judged before OpenClaw's own uninstall rewrites it: did anyone else change it?
    untouched = digest(target.config_path) == state.config_sha256
    if "link_plugin" in state.completed or "configure" in state.completed:
        with contextlib.suppress(OpenClawError):  # already gone: nothing to unlink
            openclaw.run("plugins", "uninstall", PLUGIN_ID, "--force")
    original = state.backup.get(CONFIG_BACKUP)
    if untouched and original is not None:
        replace_file(target.config_path, (folder / CONFIG_BACKUP).read_bytes())
        done = Uninstalled(config="restored from the backup")
    else:
        reverse = _reverse_patch(folder / CONFIG_BACKUP, target.config_path, settings_patch(target))
        openclaw.patch_config(reverse)
        done = Uninstalled(
            config=f"changed since the install: memvault's settings were taken out and the "
            f"rest kept (the backup stays at {folder / CONFIG_BACKUP})"
        )
    say(f"  openclaw.json: {done.config}")
    for rel, written in state.written.items():
        path = target.workspace / rel
        now = digest(path)
        if now is not None and now != written:
            done.kept.append(rel)
            say(f"  kept   {rel}: changed since the install")
            continue
        before = state.backup.get(f"workspace/{rel}")
        if before is None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            done.removed.append(rel)
        else:
            replace_file(path, (folder / "workspace" / rel).read_bytes())
            done.restored.append(rel)
    for rel in sorted(state.created_dirs, key=lambda name: -len(Path(name).parts)):
        with contextlib.suppress(OSError):  # not empty: a person put something there
            (target.workspace / rel).rmdir()
    state_path(vault).unlink()
    if not done.kept and untouched:
        for name in state.backup:
            with contextlib.suppress(FileNotFoundError):
                (folder / name).unlink()
        for sub in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                sub.rmdir()
        with contextlib.suppress(OSError):
            folder.rmdir()
    return done


def _reverse_patch(backup: Path, current: Path, applied: dict[str, Any]) -> dict[str, Any]:
    """A patch putting back, for every key ``applied`` set, its value in the backup; a
    key the backup lacked is deleted (null), a whole new branch only when nothing but
    memvault's keys grew on it since."""

    def read(path: Path) -> Any:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def undo(patch: dict[str, Any], old: Any, now: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in patch.items():
            previous = old.get(key) if isinstance(old, dict) else None
            present = now.get(key) if isinstance(now, dict) else None
            if isinstance(value, dict) and isinstance(previous, dict):
                out[key] = undo(value, previous, present)
            elif (
                isinstance(value, dict) and isinstance(present, dict) and set(present) - set(value)
            ):
                out[key] = undo(value, None, present)  # others' keys grew here: keep them
            else:
                out[key] = previous  # None deletes
        return out

    return undo(applied, read(backup), read(current))
