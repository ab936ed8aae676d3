"""What a job run changed in the vault, and how to put it back.

Before a job touches a file it calls :meth:`RunChanges.will_change`: the
file's bytes as they are (or the fact that it does not exist) are kept in
``.memvault/jobs/runs/RUN_ID/``. When the run ends, each file's new hash is
recorded in the run's metadata. :func:`undo` restores every file of a run
only if all of them still hold what the run left; if a person (or a later
run) edited one since, it names the file and changes nothing.

A run killed before it ends records no hashes, so what it did is written
ahead in ``changes.json`` beside the copies: each file as :meth:`will_change`
kept it, and, told by the vault just before each write becomes visible, the
hash of every content the run was about to give it. Undo of such a run
restores a file that holds its old content or one of those (nothing else
can have written it), and refuses, naming it, a file that holds anything else.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memvault.errors import ConflictError, InvalidInputError, MemvaultError, VaultError
from memvault.locations import PRIVATE_DIR, private_file, private_state_dir
from memvault.vault.paths import normalize_relpath
from memvault.vault.store import Vault, replace_file

log = logging.getLogger(__name__)

RUNS_DIR = Path("jobs") / "runs"
MANIFEST = "changes.json"


def digest(data: bytes | None) -> str | None:
    """The sha256 of a file's bytes, or None for a file that does not exist."""
    return None if data is None else hashlib.sha256(data).hexdigest()


def _read(vault: Vault, relpath: str) -> bytes | None:
    return vault.read_bytes(relpath) if vault.is_file(relpath) else None


def snapshot_dir(vault: Vault, run_id: int) -> Path:
    """Where the files a run changed are kept as they were before it."""
    return vault.state_dir / RUNS_DIR / str(run_id)


@dataclass
class FileChange:
    """One file a run is changing: its copy from before (None: it did not exist), that
    content's hash, and the hash of each content the run went on to write there."""

    path: str
    before: str | None
    before_hash: str | None
    written: list[str | None] = field(default_factory=list)


@dataclass
class RunChanges:
    """The files one run is changing, with their bytes from before it.

    It listens to the vault until :meth:`close`, for the writes of the thread
    that made it (the run's) to files it keeps, and records each before the
    write is made.
    """

    vault: Vault
    run_id: int
    entries: dict[str, FileChange] = field(default_factory=dict)
    _thread: int = field(default_factory=threading.get_ident, repr=False)
    _stop: Callable[[], None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._stop = self.vault.intend(self._intended)

    @property
    def folder(self) -> Path:
        """Where this run's copies and its ``changes.json`` are."""
        return snapshot_dir(self.vault, self.run_id)

    def will_change(self, relpath: str) -> str:
        """Keep ``relpath`` as it is now, once per run; call before changing (or creating,
        moving or deleting) it. Returns the clean relative path."""
        clean = normalize_relpath(relpath)
        if clean in self.entries:
            return clean
        before = _read(self.vault, clean)
        name: str | None = None
        if before is not None:
            name = f"{len(self.entries)}.before"
            self._keep(name, before)
        self.entries[clean] = FileChange(clean, name, digest(before))
        self._save()
        return clean

    def forget(self, relpath: str) -> None:
        """Drop a file from the run's changes: it turned out not to be the run's to change
        (someone created it first), so undo must leave it alone."""
        if self.entries.pop(normalize_relpath(relpath), None) is not None:
            self._save()

    def close(self) -> None:
        """Stop listening to the vault (the run has ended)."""
        if self._stop is not None:
            self._stop()
            self._stop = None

    @property
    def paths(self) -> list[str]:
        """The files this run has said it changes, in order."""
        return list(self.entries)

    def record(self) -> list[dict[str, Any]]:
        """Each file with its snapshot and its hash now (after the run), for the run's row."""
        return [
            {"path": path, "before": entry.before, "after": digest(_read(self.vault, path))}
            for path, entry in self.entries.items()
        ]

    def _intended(self, path: str, data: bytes | None) -> None:
        """The vault is about to give ``path`` the content ``data``: record it first."""
        entry = self.entries.get(path)
        if entry is None or threading.get_ident() != self._thread:
            return  # not this run's file, or another thread's write (a person's request)
        hashed = digest(data)
        if hashed not in entry.written:
            entry.written.append(hashed)
            self._save()

    def _keep(self, name: str, data: bytes) -> None:
        try:
            private_state_dir(self.vault.state_dir)
            self.folder.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
            replace_file(private_file(self.folder / name), data)
        except OSError as exc:
            raise VaultError(
                f"Cannot keep a copy for undo in {self.folder}: {exc.strerror}; "
                "the run changed nothing there."
            ) from exc

    def _save(self) -> None:
        """Write ``changes.json`` atomically, before the change it lists is made."""
        listed = {"run_id": self.run_id, "changes": [asdict(e) for e in self.entries.values()]}
        self._keep(MANIFEST, (json.dumps(listed, indent=1) + "\n").encode("utf-8"))


def written_ahead(vault: Vault, run_id: int) -> list[dict[str, Any]]:
    """What ``changes.json`` says run ``run_id`` was changing (for a run that never
    finished): each file's path, copy, old hash and the hashes it was about to write."""
    manifest = snapshot_dir(vault, run_id) / MANIFEST
    try:
        listed = json.loads(manifest.read_bytes())
        return [
            asdict(
                FileChange(
                    normalize_relpath(c["path"]),
                    _optional_text(c["before"]),
                    _optional_text(c["before_hash"]),
                    [_optional_text(h) for h in c["written"]],
                )
            )
            for c in listed["changes"]
        ]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, TypeError, KeyError, MemvaultError):
        log.warning("jobs: unreadable %s", manifest, exc_info=True)
        return []


def _optional_text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"expected text or null, not {type(value).__name__}")


def _left_by_run(change: dict[str, Any]) -> set[str | None]:
    """The hashes a file may hold and still be as the run left it: the one recorded when
    it ended, or (a run that never ended) its old content or one the run wrote."""
    if "after" in change:
        return {change["after"]}
    return {change.get("before_hash"), *change.get("written", [])}


@dataclass(frozen=True)
class FileVersions:
    """One file a run changed, for showing what it did: its bytes before the run (None: it
    did not exist), its bytes now (None: it does not exist), whether it still holds what
    the run left, and whether the copy from before is still kept (undo removes it)."""

    path: str
    before: bytes | None
    now: bytes | None
    as_left: bool
    kept: bool


def versions(vault: Vault, run_id: int, changes: Iterable[dict[str, Any]]) -> list[FileVersions]:
    """Each file of ``changes`` (a run's metadata) as it was before run ``run_id`` and as
    it is now; read only, nothing is changed."""
    folder = snapshot_dir(vault, run_id)
    found = []
    for change in changes:
        path = change["path"]
        now = _read(vault, path)
        before: bytes | None = None
        kept = True
        if change.get("before") is not None:
            copy = folder / change["before"]
            kept = copy.is_file()
            before = copy.read_bytes() if kept else None
        found.append(FileVersions(path, before, now, digest(now) in _left_by_run(change), kept))
    return found


def undo(vault: Vault, run_id: int, changes: Iterable[dict[str, Any]]) -> list[str]:
    """Restore the files ``changes`` lists to what they held before run ``run_id``.

    Returns the paths restored. A ConflictError, with nothing changed, when
    any file no longer holds what the run left there.
    """
    changes = list(changes)
    if not changes:
        raise InvalidInputError(f"Run {run_id} changed no files; there is nothing to undo.")
    folder = snapshot_dir(vault, run_id)
    edited = [c["path"] for c in changes if digest(_read(vault, c["path"])) not in _left_by_run(c)]
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
        expected = _left_by_run(change)
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
            _expected: set[str | None] = expected,
            _data: bytes = data,
        ) -> str:
            now = None if current is None else current.encode("utf-8")
            if digest(now) not in _expected:
                raise ConflictError(
                    f"{_path} changed while run {run_id} was being undone; it was left as it is."
                )
            return _data.decode("utf-8")

        vault.edit_text(path, put_back, must_exist=False)
        restored.append(path)
    shutil.rmtree(folder, ignore_errors=True)
    return list(reversed(restored))
