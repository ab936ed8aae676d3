"""What a job run changed in the vault, and how to put it back.

Before a job touches a file it calls :meth:`RunChanges.will_change`: the
file's bytes as they are (or the fact that it does not exist) are kept in
``.memvault/jobs/runs/RUN_ID/``. When the run ends, each file's new hash is
recorded in the run's metadata. :func:`undo` restores every file of a run
only if all of them still hold what the run left; if a person (or a later
run) edited one since, it names the file and changes nothing.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memvault.errors import ConflictError, InvalidInputError, MemvaultError
from memvault.locations import private_state_dir
from memvault.vault.paths import normalize_relpath
from memvault.vault.store import Vault, replace_file

RUNS_DIR = Path("jobs") / "runs"


def digest(data: bytes | None) -> str | None:
    """The sha256 of a file's bytes, or None for a file that does not exist."""
    return None if data is None else hashlib.sha256(data).hexdigest()


def _read(vault: Vault, relpath: str) -> bytes | None:
    return vault.read_bytes(relpath) if vault.is_file(relpath) else None


def snapshot_dir(vault: Vault, run_id: int) -> Path:
    """Where the files a run changed are kept as they were before it."""
    return vault.state_dir / RUNS_DIR / str(run_id)


@dataclass
class RunChanges:
    """The files one run is changing, with their bytes from before it."""

    vault: Vault
    run_id: int
    entries: dict[str, str | None] = field(default_factory=dict)  # path -> snapshot file name

    def will_change(self, relpath: str) -> str:
        """Keep ``relpath`` as it is now, once per run; call before changing (or creating,
        moving or deleting) it. Returns the clean relative path."""
        clean = normalize_relpath(relpath)
        if clean in self.entries:
            return clean
        before = _read(self.vault, clean)
        name: str | None = None
        if before is not None:
            folder = private_state_dir(self.vault.state_dir) / RUNS_DIR / str(self.run_id)
            folder.mkdir(parents=True, exist_ok=True)
            name = f"{len(self.entries)}.before"
            replace_file(folder / name, before)
        self.entries[clean] = name
        return clean

    @property
    def paths(self) -> list[str]:
        """The files this run has said it changes, in order."""
        return list(self.entries)

    def record(self) -> list[dict[str, Any]]:
        """Each file with its snapshot and its hash now (after the run), for the run's row."""
        return [
            {"path": path, "before": name, "after": digest(_read(self.vault, path))}
            for path, name in self.entries.items()
        ]


def undo(vault: Vault, run_id: int, changes: list[dict[str, Any]]) -> list[str]:
    """Restore the files ``changes`` lists to what they held before run ``run_id``.

    Returns the paths restored. A ConflictError, with nothing changed, when
    any file no longer holds what the run left there.
    """
    if not changes:
        raise InvalidInputError(f"Run {run_id} changed no files; there is nothing to undo.")
    folder = snapshot_dir(vault, run_id)
    edited = [c["path"] for c in changes if digest(_read(vault, c["path"])) != c.get("after")]
    if edited:
        raise ConflictError(
            f"{edited[0]} was edited after run {run_id}"
            + (f" (and {len(edited) - 1} more)" if len(edited) > 1 else "")
            + "; nothing was undone, so that edit is kept."
        )
    for change in changes:
        if change["before"] is not None and not (folder / change["before"]).is_file():
            raise MemvaultError(
                f"The copy of {change['path']} from before run {run_id} is gone "
                f"(looked in {folder}); nothing was undone."
            )
    restored = []
    for change in reversed(changes):
        path = change["path"]
        expected = change.get("after")
        if change["before"] is None:
            if vault.is_file(path):
                vault.delete(path)
            restored.append(path)
            continue
        data = (folder / change["before"]).read_bytes()

        def put_back(
            current: str | None,
            *,
            _path: str = path,
            _expected: Any = expected,
            _data: bytes = data,
        ) -> str:
            now = None if current is None else current.encode("utf-8")
            if digest(now) != _expected:
                raise ConflictError(
                    f"{_path} changed while run {run_id} was being undone; it was left as it is."
                )
            return _data.decode("utf-8")

        vault.edit_text(path, put_back, must_exist=False)
        restored.append(path)
    shutil.rmtree(folder, ignore_errors=True)
    return list(reversed(restored))
