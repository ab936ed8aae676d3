"""File I/O on the vault: the :class:`Vault`, its paths and its file operations.

Everything that touches a file in the vault goes through :class:`Vault`.
It guarantees three things a person editing the same vault in Obsidian can
rely on: a path never leaves the vault; a write is all-or-nothing (temporary
file, fsync, rename); and a read-modify-write holds a cross-process lock on
the note, so two memvault processes editing one note never lose an update.

This module is the vault's API: paths resolved and checked, reads, listings,
writes, appends, edits, deletes and moves, and the hooks told before and after a
change. What it stands on is apart: where a path really leads
(:mod:`memvault.vault.bounds`), the bytes on disk and the note an edit saw
(:mod:`memvault.vault.disk`), the named locks (:mod:`memvault.vault.locks`) and
what an OSError means to the user (:mod:`memvault.vault.os_errors`).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import logging
import os
import stat as stat_mode
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memvault.errors import (
    ConflictError,
    InvalidInputError,
    MemvaultError,
    NotFoundError,
    UnsafePathError,
    VaultError,
)
from memvault.locations import (
    STATE_DIR,
    is_vault,
)
from memvault.text import unencodable
from memvault.vault.bounds import VaultBounds
from memvault.vault.carry import CARRY_DIR, finish, pending
from memvault.vault.disk import (
    UMASK,
    Keep,
    Seen,
    decode_text,
    detect_newline,
    fsync_dir,
    read_fd,
    removed_on_failure,
    replace_file,
    synced_temp,
    write_all,
)
from memvault.vault.locks import NamedLocks, digest
from memvault.vault.os_errors import explain, not_regular, require_regular
from memvault.vault.paths import normalize_relpath

# The names the rest of memvault imports from here (the disk's among them).
__all__ = [
    "Change",
    "FileEntry",
    "Intent",
    "Observer",
    "Vault",
    "decode_text",
    "detect_newline",
    "replace_file",
]

log = logging.getLogger(__name__)

# How often an edit is made again on a note that kept changing under it.
_EDIT_ATTEMPTS = 5


@dataclass(frozen=True)
class Change:
    """A file the vault changed: ``kind`` is write, append, delete or move (to ``new_path``)."""

    path: str
    kind: str
    new_path: str | None = None


Observer = Callable[[Change], None]
# Told (path, the bytes it is about to hold or None if it is about to go) before a change.
Intent = Callable[[str, bytes | None], None]


@dataclass(frozen=True)
class FileEntry:
    """One file or folder in a listing."""

    path: str
    size: int
    mtime_ns: int
    is_dir: bool = False
    # When the inode last changed: unlike the mtime, no sync tool can put it back.
    ctime_ns: int = 0

    @property
    def modified(self) -> datetime:
        """Modification time as an aware UTC datetime."""
        return datetime.fromtimestamp(self.mtime_ns / 1e9, tz=UTC)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form for ``--json`` output and APIs."""
        return {
            "path": self.path,
            "size": self.size,
            "modified": self.modified.isoformat(timespec="seconds"),
            "is_dir": self.is_dir,
        }


class Vault:
    """A folder of Markdown notes, addressed by vault-relative paths."""

    def __init__(self, root: Path, *, lock_timeout: float = 10.0) -> None:
        self.root = root.expanduser().absolute()
        self.lock_timeout = lock_timeout
        self._locks = NamedLocks(self.state_dir, lock_timeout)
        self._intents_guard = threading.Lock()
        self._observers: list[Observer] = []
        self._intents: tuple[Intent, ...] = ()
        self._bounds = VaultBounds(self.root)

    # -- change notification ---------------------------------------------------

    def observe(self, observer: Observer) -> None:
        """Call ``observer(change)`` after every successful write, append, delete or move."""
        self._observers.append(observer)

    def notify(self, change: Change) -> None:
        """Tell the observers about a change; an observer's failure never undoes the write."""
        for observer in self._observers:
            try:
                observer(change)
            except Exception:
                log.exception("vault observer failed", extra={"path": change.path})

    def intend(self, hook: Intent) -> Callable[[], None]:
        """Call ``hook(path, data)`` just before a write, append, delete or move becomes
        visible, ``data`` being what ``path`` will then hold (None: nothing). A hook that
        raises stops the change, so it can record the change first (a job run's write-ahead
        record, for undo after a crash). Returns what removes the hook."""
        with self._intents_guard:
            self._intents = (*self._intents, hook)

        def remove() -> None:
            with self._intents_guard:
                self._intents = tuple(h for h in self._intents if h is not hook)

        return remove

    def _announce(self, clean: str, data: bytes | None) -> None:
        for hook in self._intents:
            hook(clean, data)

    # -- paths ---------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        """``<vault>/.memvault``: index, config, token and locks; Obsidian ignores it."""
        return self.root / STATE_DIR

    def exists_on_disk(self) -> bool:
        """Whether the vault folder exists."""
        return self.root.is_dir()

    def require(self) -> None:
        """Raise a clear error unless the folder is a vault (``memvault init`` made it).

        Any other folder is refused, so a mistyped --vault never fills it with memvault's files.
        """
        if not self.root.is_dir():
            raise VaultError(
                f"No vault at {self.root}.",
                hint=f"Create one with `memvault init {self.root}` or pass --vault PATH.",
            )
        if not is_vault(self.root):
            raise VaultError(
                f"{self.root} is not a memvault vault; run `memvault init {self.root}` "
                "to make it one, or pass --vault PATH."
            )

    def resolve(self, relpath: str, *, allow_root: bool = False) -> Path:
        """Absolute path for a vault-relative one; refuses anything that escapes the vault.

        Symlinks are followed and must land inside the vault too, never in
        ``.memvault`` (the tokens, config and index) or another hidden folder,
        and never in a loop. Every file operation goes through here.
        """
        clean = normalize_relpath(relpath, allow_root=allow_root)
        target = self.root / clean if clean else self.root
        self.check_target(target, relpath)
        return target

    def check_target(self, path: Path, shown: str) -> None:
        """Refuse a path whose real location is outside the vault, hidden or a symlink loop
        (:meth:`VaultBounds.check`); ``shown`` names the path in the sentence a refusal gives.
        """
        self._bounds.check(path, shown)

    def relative(self, path: Path) -> str:
        """Vault-relative POSIX path of an absolute path inside the vault."""
        return path.relative_to(self.root).as_posix()

    def exists(self, relpath: str) -> bool:
        """Whether a file or folder exists at ``relpath``."""
        path = self.resolve(relpath)
        with self._explained(relpath, "look at"):
            return path.exists()

    def is_file(self, relpath: str) -> bool:
        """Whether a regular file exists at ``relpath``."""
        path = self.resolve(relpath)
        with self._explained(relpath, "look at"):
            return path.is_file()

    def check_regular(self, relpath: str) -> None:
        """Refuse what is at ``relpath`` when it is neither a regular file nor a folder.

        Named pipes, sockets and devices are never opened: reading a pipe
        would wait forever. Nothing there is fine.
        """
        path = self.resolve(relpath)
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return
        if not (stat_mode.S_ISREG(mode) or stat_mode.S_ISDIR(mode)):
            raise not_regular(normalize_relpath(relpath), mode)

    # -- what an OSError means to the user ---------------------------------------

    @contextlib.contextmanager
    def _explained(self, relpath: str, doing: str) -> Iterator[None]:
        """Turn an OSError a user's path can cause into a MemvaultError with one sentence."""
        try:
            yield
        except OSError as exc:
            raise self.explain(exc, relpath, doing) from exc

    def explain(self, exc: OSError, relpath: str, doing: str) -> MemvaultError:
        """The MemvaultError an OSError on ``relpath`` stands for (``doing``: 'read', ...)."""
        return explain(exc, self.root, relpath, doing)

    # -- reading -------------------------------------------------------------

    def read_bytes(self, relpath: str) -> bytes:
        """The file's bytes; NotFoundError when it does not exist.

        Only a regular file is opened: a named pipe would block the reader.
        """
        path = self.resolve(relpath)
        clean = normalize_relpath(relpath)
        with self._explained(clean, "read"):
            require_regular(os.stat(path).st_mode, clean)
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
            with os.fdopen(fd, "rb") as handle:
                require_regular(os.fstat(fd).st_mode, clean)  # swapped since the stat
                return handle.read()

    def read_text(self, relpath: str) -> str:
        """The file as UTF-8 text, byte for byte (CRLF and BOM kept)."""
        return decode_text(self.read_bytes(relpath), normalize_relpath(relpath))

    def stat(self, relpath: str) -> FileEntry:
        """Size and modification time of one file or folder."""
        path = self.resolve(relpath)
        clean = normalize_relpath(relpath)
        with self._explained(clean, "look at"):
            st = path.stat()
        return FileEntry(
            clean, st.st_size, st.st_mtime_ns, stat_mode.S_ISDIR(st.st_mode), st.st_ctime_ns
        )

    def list(
        self,
        folder: str = "",
        *,
        recursive: bool = True,
        notes_only: bool = True,
    ) -> list[FileEntry]:
        """Files under ``folder`` (vault root by default), sorted by path.

        Hidden files and folders (``.obsidian``, ``.memvault``, ``.git``,
        temporary files) are skipped, and so are symlinked folders, anything
        that is not a regular file (named pipes, sockets, devices) and links
        :meth:`resolve` refuses (into ``.memvault``, out of the vault, loops).
        ``notes_only`` keeps Markdown files.
        """
        base = self.resolve(folder, allow_root=True)
        prefix = normalize_relpath(folder, allow_root=True)
        with self._explained(prefix, "list"):
            try:
                mode = os.stat(base).st_mode
            except FileNotFoundError:
                raise NotFoundError(f"No folder at {prefix or '/'} in the vault.") from None
        if not stat_mode.S_ISDIR(mode):
            kind = "a note, not a folder" if stat_mode.S_ISREG(mode) else "not a folder"
            raise InvalidInputError(f"{prefix} is {kind}.")
        entries: list[FileEntry] = []
        pending = [(str(base), prefix)]
        while pending:
            directory, rel_dir = pending.pop()
            try:
                scanner = os.scandir(directory)
            except OSError as exc:
                if directory == str(base):
                    raise self.explain(exc, prefix, "list") from exc
                # A subfolder removed, or unreadable, while we walked.
                log.warning("cannot list a folder", extra={"path": rel_dir, "error": str(exc)})
                continue
            with scanner:
                for item in scanner:
                    if item.name.startswith("."):
                        continue
                    if unencodable(item.name):  # not UTF-8: no path, index or answer holds it
                        log.debug("skipping a name that is not UTF-8", extra={"in": rel_dir})
                        continue
                    rel = f"{rel_dir}/{item.name}" if rel_dir else item.name
                    try:
                        if item.is_dir(follow_symlinks=False):
                            if recursive:
                                pending.append((item.path, rel))
                            continue
                        if notes_only and not item.name.lower().endswith(".md"):
                            continue
                        if item.is_symlink():
                            self.check_target(Path(item.path), rel)
                            st = os.stat(item.path)  # where it leads (a linked folder is skipped)
                        elif item.is_file(follow_symlinks=False):
                            st = item.stat(follow_symlinks=False)
                        else:
                            continue  # a named pipe, socket or device
                    except (OSError, UnsafePathError):  # gone meanwhile, a loop, unsafe
                        continue
                    if stat_mode.S_ISREG(st.st_mode):
                        entries.append(
                            FileEntry(rel, st.st_size, st.st_mtime_ns, ctime_ns=st.st_ctime_ns)
                        )
        entries.sort(key=lambda e: e.path)
        return entries

    def list_folders(self, folder: str = "") -> builtins.list[str]:
        """Names of the folders directly under ``folder`` (hidden and unsafe links left out)."""
        base = self.resolve(folder, allow_root=True)
        prefix = normalize_relpath(folder, allow_root=True)
        names: builtins.list[str] = []
        with self._explained(prefix, "list"), os.scandir(base) as scanner:
            for item in scanner:
                if item.name.startswith(".") or unencodable(item.name):
                    continue
                try:
                    if item.is_symlink():
                        self.check_target(Path(item.path), item.name)
                    if item.is_dir():
                        names.append(item.name)
                except (OSError, UnsafePathError):
                    continue
        return sorted(names)

    # -- locking -------------------------------------------------------------

    def lock(self, key: str) -> contextlib.AbstractContextManager[None]:
        """Hold a cross-process lock named ``key`` (a note path or a namespace);
        re-entrant within one process (:class:`NamedLocks`)."""
        return self._locks.lock(key)

    # -- writing -------------------------------------------------------------

    def _atomic_write(self, target: Path, data: bytes, *, exclusive: bool = False) -> None:
        """Write via a synced temporary file; ``exclusive`` never replaces an existing file.

        ``target`` comes from :meth:`resolve`. Only a regular file is ever
        replaced (not a folder, a named pipe or a device); a failure is a
        MemvaultError with one sentence.
        """
        clean = self.relative(target)
        real = Path(os.path.realpath(target))  # write through an in-vault symlink, keep the link
        with self._explained(clean, "write"):
            real.parent.mkdir(parents=True, exist_ok=True)
            try:
                existing = real.stat().st_mode
            except FileNotFoundError:
                mode = 0o666 & ~UMASK
            else:
                require_regular(existing, clean)
                mode = existing & 0o7777
            tmp = synced_temp(real.parent, data, mode)
            with removed_on_failure(tmp):
                self._announce(clean, data)
                if exclusive:
                    try:
                        os.link(tmp, real)  # fails instead of clobbering
                    except FileExistsError:
                        raise ConflictError(
                            f"{clean} already exists; choose another name, "
                            "or write it again allowing an overwrite to replace it."
                        ) from None
                    os.unlink(tmp)
                else:
                    os.replace(tmp, real)
        fsync_dir(real.parent)

    def write_text(self, relpath: str, text: str, *, overwrite: bool = True) -> str:
        """Write a whole note atomically; returns the clean relative path.

        With ``overwrite=False`` an existing note is an error, never replaced.
        """
        clean = normalize_relpath(relpath)
        target = self.resolve(clean)
        with self._explained(clean, "write"), self.lock(clean):
            self._atomic_write(target, text.encode("utf-8"), exclusive=not overwrite)
        self.notify(Change(clean, "write"))
        return clean

    def create_bytes(self, relpath: str, data: bytes) -> str:
        """Write a new file (an attachment) atomically; an existing one is a ConflictError."""
        clean = normalize_relpath(relpath)
        target = self.resolve(clean)
        with self._explained(clean, "write"), self.lock(clean):
            self._atomic_write(target, data, exclusive=True)
        self.notify(Change(clean, "write"))
        return clean

    def create_text(self, relpath: str, text: str) -> bool:
        """Create a note only if nothing exists at ``relpath``; True if it was created."""
        try:
            self.write_text(relpath, text, overwrite=False)
        except ConflictError:
            return False
        return True

    def append_text(self, relpath: str, text: str, *, notify: bool = True) -> str:
        """Append ``text`` as new line(s) at the end of a note, creating it if needed.

        The existing bytes are never rewritten: the file is opened in append
        mode. A missing trailing newline is supplied first, and the appended
        text takes the note's own line ending (CRLF stays CRLF). With
        ``notify=False`` the caller announces the change itself (after
        updating what it caches).
        """
        clean = normalize_relpath(relpath)
        target = self.resolve(clean)
        with self._explained(clean, "append to"), self.lock(clean):
            real = os.path.realpath(target)
            Path(real).parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                require_regular(os.stat(real).st_mode, clean)  # a pipe is never opened
            fd = os.open(real, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o666)
            try:
                st = os.fstat(fd)
                require_regular(st.st_mode, clean)  # swapped since the stat
                size = st.st_size
                newline = "\n"
                prefix = ""
                if size:
                    head = decode_text(os.pread(fd, min(size, 4096), 0), clean)
                    newline = detect_newline(head) if "\n" in head else "\n"
                    if os.pread(fd, 1, size - 1) != b"\n":
                        prefix = newline
                body = text.replace("\r\n", "\n")
                if not body.endswith("\n"):
                    body += "\n"
                payload = (prefix + body.replace("\n", newline)).encode("utf-8")
                if self._intents:
                    self._announce(clean, read_fd(fd) + payload)
                write_all(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
        if notify:
            self.notify(Change(clean, "append"))
        return clean

    def edit_text(
        self, relpath: str, change: Callable[[str | None], str | None], *, must_exist: bool = True
    ) -> str | None:
        """Read-modify-write one note under its lock; returns the new text.

        ``change`` receives the current text (``None`` if the note is missing
        and ``must_exist`` is False) and returns the new text, or ``None`` to
        leave the note as it is. Nothing is written when the text is unchanged.

        A person may edit the note meanwhile without memvault's lock (an
        editor, ``echo >>``, a sync tool). The note is replaced only if it
        still holds what ``change`` saw, else ``change`` runs again on what it
        holds now; bytes appended to the old file while it was being replaced
        are carried over to the new one. A note that keeps changing is a
        ConflictError after a few attempts; nothing typed is ever dropped.
        """
        clean = normalize_relpath(relpath)
        target = self.resolve(clean)
        with self._explained(clean, "edit"), self.lock(clean):
            real = Path(os.path.realpath(target))
            keep = Keep(self.state_dir / CARRY_DIR, digest(clean))
            for kept in pending(keep.folder, keep.key):  # a crash cut an edit of it short
                finish(kept, real)
            for _ in range(_EDIT_ATTEMPTS):
                with Seen.read(real, clean) as seen:
                    if seen.data is None and must_exist:
                        raise NotFoundError(f"No note at {clean}.")
                    current = None if seen.data is None else decode_text(seen.data, clean)
                    updated = change(current)
                    if updated is None or updated == current:
                        return current if updated is None else updated
                    data = updated.encode("utf-8")
                    self._announce(clean, data)
                    if seen.replace_if_unchanged(real, data, keep):
                        break
            else:
                raise ConflictError(
                    f"{clean} kept changing while memvault was editing it; try again."
                )
        self.notify(Change(clean, "write"))
        return updated

    def finish_carries(self) -> builtins.list[str]:
        """Finish the carry-overs a crash cut short (:mod:`memvault.vault.carry`); the notes
        changed. A carry-over whose note is gone stays, and is logged."""
        folder = self.state_dir / CARRY_DIR
        keys = {kept.key for kept in pending(folder)}
        notes = [entry.path for entry in self.list(notes_only=False)] if keys else []
        changed = [clean for clean in notes if digest(clean) in keys]
        for clean in changed:
            with self.lock(clean):
                real = Path(os.path.realpath(self.resolve(clean)))
                for kept in pending(folder, digest(clean)):
                    finish(kept, real)  # what it cannot finish, it names
            self.notify(Change(clean, "write"))
        gone = keys - {digest(clean) for clean in changed}
        for kept in pending(folder):
            if kept.key in gone:
                log.warning(
                    "a replaced note's old text is kept: its note is gone",
                    extra={"kept": str(kept.path)},
                )
        return changed

    def delete(self, relpath: str) -> str:
        """Delete one note (or an empty folder); NotFoundError if it is missing."""
        clean = normalize_relpath(relpath)
        target = self.resolve(clean)
        with self._explained(clean, "delete"), self.lock(clean):
            if target.is_dir() and not target.is_symlink():
                try:
                    target.rmdir()
                except OSError as exc:
                    if exc.errno != errno.ENOTEMPTY:
                        raise
                    raise InvalidInputError(
                        f"Folder {clean} is not empty; delete its notes first."
                    ) from None
            else:
                self._announce(clean, None)
                target.unlink()
            fsync_dir(target.parent)
        self.notify(Change(clean, "delete"))
        return clean

    def move(self, source: str, destination: str, *, overwrite: bool = False) -> str:
        """Rename a note within the vault (atomic on one filesystem); returns the new path."""
        src = normalize_relpath(source)
        dst = normalize_relpath(destination)
        src_path, dst_path = self.resolve(src), self.resolve(dst)
        if src == dst:
            return dst
        first, second = sorted([src, dst])
        with self._explained(src, "move"), self.lock(first), self.lock(second):
            if not src_path.exists():
                raise NotFoundError(f"No note at {src}.")
            same = os.path.realpath(src_path) == os.path.realpath(dst_path)
            if dst_path.exists() and not overwrite and not same:
                raise ConflictError(
                    f"{dst} already exists; choose another destination, or delete it first."
                )
            if self._intents and src_path.is_file():
                self._announce(src, None)
                self._announce(dst, src_path.read_bytes())
            with self._explained(dst, "move a note to"):
                dst_path.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src_path, dst_path)
            fsync_dir(dst_path.parent)
            if src_path.parent != dst_path.parent:
                fsync_dir(src_path.parent)
        self.notify(Change(src, "move", dst))
        return dst
