"""File I/O on the vault: safe paths, atomic writes, appends, locks.

Everything that touches a file in the vault goes through :class:`Vault`.
It guarantees three things a person editing the same vault in Obsidian can
rely on: a path never leaves the vault; a write is all-or-nothing (temporary
file, fsync, rename); and a read-modify-write holds a cross-process lock on
the note, so two memvault processes editing one note never lose an update.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout

from memvault.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    UnsafePathError,
    VaultError,
)
from memvault.locations import STATE_DIR
from memvault.vault.paths import normalize_relpath

log = logging.getLogger(__name__)


# Read once at import, while the process is single-threaded: os.umask has no getter.
_UMASK = os.umask(0)
os.umask(_UMASK)


@dataclass(frozen=True)
class Change:
    """A file the vault changed: ``kind`` is write, append, delete or move (to ``new_path``)."""

    path: str
    kind: str
    new_path: str | None = None


Observer = Callable[[Change], None]


@dataclass(frozen=True)
class FileEntry:
    """One file or folder in a listing."""

    path: str
    size: int
    mtime_ns: int
    is_dir: bool = False

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


def _decode(data: bytes, relpath: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{relpath} is not UTF-8 text and cannot be read as a note."
        ) from exc


def detect_newline(text: str) -> str:
    """The line ending a text uses: ``\\r\\n`` if its first line break is CRLF."""
    index = text.find("\n")
    return "\r\n" if index > 0 and text[index - 1] == "\r" else "\n"


class Vault:
    """A folder of Markdown notes, addressed by vault-relative paths."""

    def __init__(self, root: Path, *, lock_timeout: float = 10.0) -> None:
        self.root = root.expanduser().absolute()
        self.lock_timeout = lock_timeout
        self._locks: dict[str, FileLock] = {}
        self._locks_guard = threading.Lock()
        self._observers: list[Observer] = []

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

    # -- paths ---------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        """``<vault>/.memvault``: index, config, token and locks; Obsidian ignores it."""
        return self.root / STATE_DIR

    def exists_on_disk(self) -> bool:
        """Whether the vault folder exists."""
        return self.root.is_dir()

    def require(self) -> None:
        """Raise a clear error when the vault folder is missing."""
        if not self.root.is_dir():
            raise VaultError(
                f"No vault at {self.root}.",
                hint=f"Create one with `memvault init {self.root}` or pass --vault PATH.",
            )

    def resolve(self, relpath: str, *, allow_root: bool = False) -> Path:
        """Absolute path for a vault-relative one; refuses anything that escapes the vault.

        Symlinks are followed and must land inside the vault too.
        """
        clean = normalize_relpath(relpath, allow_root=allow_root)
        target = self.root / clean if clean else self.root
        real_root = os.path.realpath(self.root)
        real_target = os.path.realpath(target)
        if os.path.commonpath([real_root, real_target]) != real_root:
            raise UnsafePathError(f"Path {relpath!r} leads outside the vault through a symlink.")
        return target

    def relative(self, path: Path) -> str:
        """Vault-relative POSIX path of an absolute path inside the vault."""
        return path.relative_to(self.root).as_posix()

    def exists(self, relpath: str) -> bool:
        """Whether a file or folder exists at ``relpath``."""
        return self.resolve(relpath).exists()

    def is_file(self, relpath: str) -> bool:
        """Whether a regular file exists at ``relpath``."""
        return self.resolve(relpath).is_file()

    # -- reading -------------------------------------------------------------

    def read_bytes(self, relpath: str) -> bytes:
        """The file's bytes; NotFoundError when it does not exist."""
        path = self.resolve(relpath)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise NotFoundError(f"No note at {normalize_relpath(relpath)}.") from None
        except IsADirectoryError:
            raise InvalidInputError(
                f"{normalize_relpath(relpath)} is a folder, not a note."
            ) from None

    def read_text(self, relpath: str) -> str:
        """The file as UTF-8 text, byte for byte (CRLF and BOM kept)."""
        return _decode(self.read_bytes(relpath), normalize_relpath(relpath))

    def stat(self, relpath: str) -> FileEntry:
        """Size and modification time of one file or folder."""
        path = self.resolve(relpath)
        try:
            st = path.stat()
        except FileNotFoundError:
            raise NotFoundError(f"No note at {normalize_relpath(relpath)}.") from None
        return FileEntry(normalize_relpath(relpath), st.st_size, st.st_mtime_ns, path.is_dir())

    def list(
        self,
        folder: str = "",
        *,
        recursive: bool = True,
        notes_only: bool = True,
    ) -> list[FileEntry]:
        """Files under ``folder`` (vault root by default), sorted by path.

        Hidden files and folders (``.obsidian``, ``.memvault``, ``.git``,
        temporary files) are skipped, and so are symlinked folders.
        ``notes_only`` keeps Markdown files.
        """
        base = self.resolve(folder, allow_root=True)
        if not base.exists():
            raise NotFoundError(f"No folder at {folder or '/'} in the vault.")
        if not base.is_dir():
            raise InvalidInputError(f"{folder} is a note, not a folder.")
        prefix = normalize_relpath(folder, allow_root=True)
        entries: list[FileEntry] = []
        pending = [(str(base), prefix)]
        while pending:
            directory, rel_dir = pending.pop()
            try:
                scanner = os.scandir(directory)
            except (FileNotFoundError, NotADirectoryError):
                continue
            with scanner:
                for item in scanner:
                    if item.name.startswith("."):
                        continue
                    rel = f"{rel_dir}/{item.name}" if rel_dir else item.name
                    if item.is_dir(follow_symlinks=False):
                        if recursive:
                            pending.append((item.path, rel))
                        continue
                    if item.is_symlink() and item.is_dir():  # never walk out through a link
                        continue
                    if notes_only and not item.name.lower().endswith(".md"):
                        continue
                    try:
                        st = item.stat()
                    except FileNotFoundError:  # removed while we walked
                        continue
                    entries.append(FileEntry(rel, st.st_size, st.st_mtime_ns))
        entries.sort(key=lambda e: e.path)
        return entries

    # -- locking -------------------------------------------------------------

    def _lock_for(self, key: str) -> FileLock:
        digest = hashlib.sha1(key.casefold().encode("utf-8")).hexdigest()[:16]
        with self._locks_guard:
            lock = self._locks.get(digest)
            if lock is None:
                lock_dir = self.state_dir / "locks"
                try:
                    lock_dir.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise VaultError(
                        f"Cannot create the lock folder {lock_dir}: {exc.strerror}."
                    ) from exc
                lock = FileLock(str(lock_dir / f"{digest}.lock"), timeout=self.lock_timeout)
                self._locks[digest] = lock
            return lock

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold a cross-process lock named ``key`` (a note path or a namespace).

        Re-entrant within one process, so an operation holding a lock may call
        another that takes the same one.
        """
        lock = self._lock_for(key)
        try:
            lock.acquire()
        except Timeout:
            raise VaultError(
                f"{key} is locked by another memvault process; try again in a moment."
            ) from None
        try:
            yield
        finally:
            lock.release()

    # -- writing -------------------------------------------------------------

    def _atomic_write(self, target: Path, data: bytes, *, exclusive: bool = False) -> None:
        """Write via a synced temporary file; ``exclusive`` never replaces an existing file."""
        real = Path(os.path.realpath(target))  # write through an in-vault symlink, keep the link
        real.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = real.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_UMASK
        fd, tmp = tempfile.mkstemp(prefix=".mv-", suffix=".tmp", dir=real.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            if exclusive:
                os.link(tmp, real)  # fails with FileExistsError instead of clobbering
                os.unlink(tmp)
            else:
                os.replace(tmp, real)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        _fsync_dir(real.parent)

    def write_text(self, relpath: str, text: str, *, overwrite: bool = True) -> str:
        """Write a whole note atomically; returns the clean relative path.

        With ``overwrite=False`` an existing note is an error, never replaced.
        """
        clean = normalize_relpath(relpath)
        target = self.resolve(clean)
        with self.lock(clean):
            if target.is_dir():
                raise InvalidInputError(f"{clean} is a folder, not a note.")
            try:
                self._atomic_write(target, text.encode("utf-8"), exclusive=not overwrite)
            except FileExistsError:
                raise ConflictError(
                    f"{clean} already exists.", hint="Choose another name or allow overwriting."
                ) from None
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
        if target.is_dir():
            raise InvalidInputError(f"{clean} is a folder, not a note.")
        with self.lock(clean):
            target.parent.mkdir(parents=True, exist_ok=True)
            real = os.path.realpath(target)
            fd = os.open(real, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                size = os.fstat(fd).st_size
                newline = "\n"
                prefix = ""
                if size:
                    head = _decode(os.pread(fd, min(size, 4096), 0), clean)
                    newline = detect_newline(head) if "\n" in head else "\n"
                    if os.pread(fd, 1, size - 1) != b"\n":
                        prefix = newline
                body = text.replace("\r\n", "\n")
                if not body.endswith("\n"):
                    body += "\n"
                payload = (prefix + body.replace("\n", newline)).encode("utf-8")
                _write_all(fd, payload)
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
        """
        clean = normalize_relpath(relpath)
        target = self.resolve(clean)
        with self.lock(clean):
            current: str | None
            try:
                current = _decode(target.read_bytes(), clean)
            except FileNotFoundError:
                if must_exist:
                    raise NotFoundError(f"No note at {clean}.") from None
                current = None
            updated = change(current)
            changed = updated is not None and updated != current
            if changed:
                assert updated is not None
                self._atomic_write(target, updated.encode("utf-8"))
        if changed:
            self.notify(Change(clean, "write"))
        return updated if updated is not None else current

    def delete(self, relpath: str) -> str:
        """Delete one note (or an empty folder); NotFoundError if it is missing."""
        clean = normalize_relpath(relpath)
        target = self.resolve(clean)
        with self.lock(clean):
            if target.is_dir() and not target.is_symlink():
                try:
                    target.rmdir()
                except OSError:
                    raise InvalidInputError(
                        f"Folder {clean} is not empty; delete its notes first."
                    ) from None
            else:
                try:
                    target.unlink()
                except FileNotFoundError:
                    raise NotFoundError(f"No note at {clean}.") from None
            _fsync_dir(target.parent)
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
        with self.lock(first), self.lock(second):
            if not src_path.exists():
                raise NotFoundError(f"No note at {src}.")
            if dst_path.exists() and not overwrite and src_path.resolve() != dst_path.resolve():
                raise ConflictError(f"{dst} already exists.", hint="Choose another destination.")
            dst_path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src_path, dst_path)
            _fsync_dir(dst_path.parent)
            if src_path.parent != dst_path.parent:
                _fsync_dir(src_path.parent)
        self.notify(Change(src, "move", dst))
        return dst


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(directory: Path) -> None:
    """Make a rename or unlink durable; some filesystems refuse, which is harmless."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
