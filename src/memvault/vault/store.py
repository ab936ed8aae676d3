"""File I/O on the vault: safe paths, atomic writes, appends, locks.

Everything that touches a file in the vault goes through :class:`Vault`.
It guarantees three things a person editing the same vault in Obsidian can
rely on: a path never leaves the vault; a write is all-or-nothing (temporary
file, fsync, rename); and a read-modify-write holds a cross-process lock on
the note, so two memvault processes editing one note never lose an update.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import stat as stat_mode
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout

from memvault.errors import (
    ConflictError,
    InvalidInputError,
    MemvaultError,
    NotFoundError,
    NotTextError,
    UnsafePathError,
    VaultError,
)
from memvault.locations import (
    PRIVATE_DIR,
    PRIVATE_FILE,
    STATE_DIR,
    is_vault,
    private_state_dir,
)
from memvault.text import unencodable
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


def decode_text(data: bytes, relpath: str) -> str:
    """A file's bytes as UTF-8 text; NotTextError (naming ``relpath``) when they are not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotTextError(f"{relpath} is not UTF-8 text and cannot be read as a note.") from exc


def detect_newline(text: str) -> str:
    """The line ending a text uses: ``\\r\\n`` if its first line break is CRLF."""
    index = text.find("\n")
    return "\r\n" if index > 0 and text[index - 1] == "\r" else "\n"


class Vault:
    """A folder of Markdown notes, addressed by vault-relative paths."""

    def __init__(self, root: Path, *, lock_timeout: float = 10.0) -> None:
        self.root = root.expanduser().absolute()
        self.lock_timeout = lock_timeout
        # Per lock name: the file lock other processes share, and the in-process queue
        # this process's threads wait in before it (see lock()).
        self._locks: dict[str, tuple[FileLock, threading.RLock]] = {}
        self._locks_guard = threading.Lock()
        self._observers: list[Observer] = []
        self._intents: tuple[Intent, ...] = ()
        self._path_max_bytes: int | None = None
        self._real_root: str | None = None

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
        with self._locks_guard:
            self._intents = (*self._intents, hook)

        def remove() -> None:
            with self._locks_guard:
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
        """Refuse a path whose real location is outside the vault, hidden or a symlink loop.

        ``shown`` names the path in the sentence a refusal gives.
        """
        if len(os.fsencode(path)) >= self._path_max():
            raise UnsafePathError(f"Path {shown[:60]!r}... is too long for the vault's filesystem.")
        try:
            real = os.path.realpath(path, strict=True)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePathError(
                    f"Path {shown!r} is a symlink loop; fix or remove the link."
                ) from None
            real = os.path.realpath(path)  # not there yet: check where it would be
        real_root = self._resolved_root()
        if not _within(real, real_root):
            raise UnsafePathError(f"Path {shown!r} leads outside the vault through a symlink.")
        real_state = os.path.join(real_root, STATE_DIR)
        if os.path.islink(real_state):
            real_state = os.path.realpath(real_state)
        inside = real[len(real_root) :].strip(os.sep).split(os.sep) if real != real_root else []
        if _within(real, real_state) or (inside and inside[0] == STATE_DIR):
            raise UnsafePathError(
                f"Path {shown!r} leads into {STATE_DIR}, memvault's own folder "
                "(tokens, config, index), which no note may reach."
            )
        hidden = next((part for part in inside if part.startswith(".")), None)
        if hidden is not None:
            raise UnsafePathError(
                f"Path {shown!r} leads through a symlink to the hidden name {hidden!r}, "
                "and hidden files and folders are not notes."
            )

    def _resolved_root(self) -> str:
        """The vault folder's real location, found once it exists: a path is checked
        against where the vault was, so a root moved under a running process refuses
        paths rather than following it."""
        if self._real_root is not None:
            return self._real_root
        real = os.path.realpath(self.root)
        if os.path.isdir(real):
            self._real_root = real
        return real

    def _path_max(self) -> int:
        """The longest path the vault's filesystem takes, in bytes (4096 on Linux)."""
        if self._path_max_bytes is None:
            try:
                self._path_max_bytes = os.pathconf(self.root, "PC_PATH_MAX")
            except (OSError, ValueError):
                return 4096  # the vault is not there yet: ask again later
        return self._path_max_bytes

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
            raise _not_regular(normalize_relpath(relpath), mode)

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
        clean = normalize_relpath(relpath, allow_root=True) or "the vault root"
        code = exc.errno
        if code in (errno.ENOTDIR, errno.EEXIST):
            blocker = self._file_in_the_way(clean)
            if blocker is not None:
                kind = "a note" if blocker.lower().endswith(".md") else "a file"
                return InvalidInputError(
                    f"{blocker} is {kind}, not a folder, so {clean} cannot be inside it."
                )
        if code in (errno.ENOENT, errno.ENOTDIR):  # no file in the way: nothing is there
            return NotFoundError(f"No note at {clean}.")
        if code == errno.EEXIST:
            return ConflictError(f"{clean} already exists; choose another name.")
        if code == errno.ELOOP:
            return UnsafePathError(f"Path {clean!r} is a symlink loop; fix or remove the link.")
        if code == errno.EISDIR:
            return InvalidInputError(f"{clean} is a folder, not a note.")
        if code == errno.ENOTEMPTY:
            return InvalidInputError(f"Folder {clean} is not empty.")
        if code == errno.ENAMETOOLONG:
            return UnsafePathError(f"Path {clean!r} is too long for the vault's filesystem.")
        if code == errno.ENXIO:  # opening a socket
            return InvalidInputError(f"{clean} is not a regular file, so memvault cannot use it.")
        if code in (errno.EACCES, errno.EPERM):
            return VaultError(
                f"Permission denied: memvault cannot {doing} {clean}; "
                "check the permissions of the vault's files and folders."
            )
        if code == errno.EROFS:
            return VaultError(f"The vault is on a read-only filesystem; cannot {doing} {clean}.")
        if code in (errno.ENOSPC, errno.EDQUOT):
            return VaultError(f"No space left for the vault; cannot {doing} {clean}.")
        return VaultError(f"Cannot {doing} {clean}: {exc.strerror or exc}.")

    def _file_in_the_way(self, clean: str) -> str | None:
        """The first folder of ``clean``'s parents that exists as a file, if any."""
        parts = clean.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            try:
                mode = os.stat(self.root / prefix).st_mode
            except OSError:
                return None
            if not stat_mode.S_ISDIR(mode):
                return prefix
        return None

    # -- reading -------------------------------------------------------------

    def read_bytes(self, relpath: str) -> bytes:
        """The file's bytes; NotFoundError when it does not exist.

        Only a regular file is opened: a named pipe would block the reader.
        """
        path = self.resolve(relpath)
        clean = normalize_relpath(relpath)
        with self._explained(clean, "read"):
            _require_regular(os.stat(path).st_mode, clean)
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
            with os.fdopen(fd, "rb") as handle:
                _require_regular(os.fstat(fd).st_mode, clean)  # swapped since the stat
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

    def _lock_for(self, key: str) -> tuple[FileLock, threading.RLock]:
        digest = hashlib.sha1(key.casefold().encode("utf-8")).hexdigest()[:16]
        with self._locks_guard:
            pair = self._locks.get(digest)
            if pair is None:
                lock_dir = self.state_dir / "locks"
                try:
                    private_state_dir(self.state_dir)
                    lock_dir.mkdir(mode=PRIVATE_DIR, exist_ok=True)
                except OSError as exc:
                    raise VaultError(
                        f"Cannot create the lock folder {lock_dir}: {exc.strerror}."
                    ) from exc
                lock = FileLock(
                    str(lock_dir / f"{digest}.lock"), timeout=self.lock_timeout, mode=PRIVATE_FILE
                )
                pair = self._locks[digest] = (lock, threading.RLock())
            return pair

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold a cross-process lock named ``key`` (a note path or a namespace).

        Re-entrant within one process, so an operation holding a lock may call
        another that takes the same one. Threads of this process wait in a
        queue that wakes the next one at once; only the file lock, which other
        processes share, is polled.
        """
        lock, queue = self._lock_for(key)
        if not queue.acquire(timeout=self.lock_timeout):
            raise VaultError(f"{key} is busy in this process; try again in a moment.")
        try:
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
        finally:
            queue.release()

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
                mode = 0o666 & ~_UMASK
            else:
                _require_regular(existing, clean)
                mode = existing & 0o7777
            tmp = _synced_temp(real.parent, data, mode)
            try:
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
                _require_regular(os.stat(real).st_mode, clean)  # a pipe is never opened
            fd = os.open(real, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o666)
            try:
                st = os.fstat(fd)
                _require_regular(st.st_mode, clean)  # swapped since the stat
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
                    self._announce(clean, _read_fd(fd) + payload)
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
            for _ in range(_EDIT_ATTEMPTS):
                with _Seen.read(real, clean) as seen:
                    if seen.data is None and must_exist:
                        raise NotFoundError(f"No note at {clean}.")
                    current = None if seen.data is None else decode_text(seen.data, clean)
                    updated = change(current)
                    if updated is None or updated == current:
                        return current if updated is None else updated
                    data = updated.encode("utf-8")
                    self._announce(clean, data)
                    if self._replace_if_unchanged(real, seen, data):
                        break
            else:
                raise ConflictError(
                    f"{clean} kept changing while memvault was editing it; try again."
                )
        self.notify(Change(clean, "write"))
        return updated

    def _replace_if_unchanged(self, real: Path, seen: _Seen, data: bytes) -> bool:
        """Put ``data`` at ``real`` if the note still holds what was ``seen``; False if not.

        Checked just before the atomic rename; what a writer that opened the
        old file before the rename appends to it is then carried over.
        """
        if seen.fd is None:
            real.parent.mkdir(parents=True, exist_ok=True)
        mode = (os.fstat(seen.fd).st_mode & 0o7777) if seen.fd is not None else 0o666 & ~_UMASK
        tmp = _synced_temp(real.parent, data, mode)
        try:
            if not seen.still_at(real):
                return False
            if seen.fd is None:
                try:
                    os.link(tmp, real)  # created meanwhile: never clobbered
                except FileExistsError:
                    return False
            else:
                os.replace(tmp, real)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        _fsync_dir(real.parent)
        if seen.fd is None:
            return True
        late = seen.settle(_WRITER_PATIENCE)
        if late is None:
            # Rewritten in place between the check and the rename: put that text back
            # (with whatever was appended to ours meanwhile) and edit it afresh.
            self._restore(real, seen, data)
            return False
        if late:
            if not data.endswith(b"\n") and seen.data and seen.data.endswith(b"\n"):
                head = seen.data[:4096].decode("utf-8", errors="ignore")
                late = detect_newline(head).encode() + late
            _append_bytes(real, late)
        return True

    def _restore(self, real: Path, seen: _Seen, ours: bytes) -> None:
        """Put back the text a person wrote into the old file, plus lines appended to ours."""
        assert seen.fd is not None
        theirs = _read_fd(seen.fd)
        with open(real, "rb") as handle:
            now = handle.read()
        extra = now[len(ours) :] if now.startswith(ours) else b""
        tmp = _synced_temp(real.parent, theirs + extra, os.fstat(seen.fd).st_mode & 0o7777)
        try:
            os.replace(tmp, real)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        _fsync_dir(real.parent)

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
            _fsync_dir(dst_path.parent)
            if src_path.parent != dst_path.parent:
                _fsync_dir(src_path.parent)
        self.notify(Change(src, "move", dst))
        return dst


def _within(path: str, folder: str) -> bool:
    """Whether the real path ``path`` is ``folder`` or inside it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _not_regular(clean: str, mode: int) -> InvalidInputError:
    if stat_mode.S_ISFIFO(mode):
        kind = "a named pipe"
    elif stat_mode.S_ISSOCK(mode):
        kind = "a socket"
    elif stat_mode.S_ISCHR(mode) or stat_mode.S_ISBLK(mode):
        kind = "a device"
    else:
        kind = "a special file"
    return InvalidInputError(
        f"{clean} is not a regular file but {kind}; memvault only reads and writes regular files."
    )


def _require_regular(mode: int, clean: str) -> None:
    """Refuse a folder, a named pipe, a socket or a device where a note should be."""
    if stat_mode.S_ISDIR(mode):
        raise InvalidInputError(f"{clean} is a folder, not a note.")
    if not stat_mode.S_ISREG(mode):
        raise _not_regular(clean, mode)


_EDIT_ATTEMPTS = 5
# How long a rewrite waits for a writer that still has the replaced file open.
_WRITER_PATIENCE = 1.0
_SETLEASE: int | None = getattr(fcntl, "F_SETLEASE", None)  # Linux only


class _Seen:
    """A note as :meth:`Vault.edit_text` read it, its file kept open.

    The open descriptor still reaches the old file after a rename replaced
    it, so bytes a writer appended to it late can be found and carried over.
    """

    def __init__(self, fd: int | None, data: bytes | None) -> None:
        self.fd = fd
        self.data = data
        self._carried = len(data) if data is not None else 0

    @classmethod
    @contextlib.contextmanager
    def read(cls, real: Path, clean: str) -> Iterator[_Seen]:
        """Open and read the note (``data`` None when there is none); closed afterwards."""
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except FileNotFoundError:
            yield cls(None, None)
            return
        try:
            _require_regular(os.fstat(fd).st_mode, clean)  # a pipe is never read
            yield cls(fd, _read_fd(fd))
        finally:
            os.close(fd)

    def still_at(self, real: Path) -> bool:
        """Whether ``real`` is still this file, starting with the bytes read (or still absent).

        Bytes appended since are fine: they are carried over after the rename.
        """
        try:
            now = os.stat(real)
        except FileNotFoundError:
            return self.fd is None
        if self.fd is None or self.data is None:
            return False
        old = os.fstat(self.fd)
        if (now.st_dev, now.st_ino) != (old.st_dev, old.st_ino) or old.st_size < len(self.data):
            return False
        return os.pread(self.fd, len(self.data), 0) == self.data

    def settle(self, patience: float) -> bytes | None:
        """All that writers appended to the old file, once none has it open for writing.

        None if it was rewritten instead. The file was renamed away, so no
        one can open it anew; a read lease is granted only when no process has
        it open for writing, so once it is granted no more bytes can come.
        Where leases are not available (another owner's file, some network
        filesystems), one last look a moment later has to do.
        """
        assert self.fd is not None
        late = b""
        deadline = time.monotonic() + patience
        while True:
            more = self.appended_since()
            if more is None:
                return None
            late += more
            if _SETLEASE is None:
                break
            try:
                fcntl.fcntl(self.fd, _SETLEASE, fcntl.F_RDLCK)
            except BlockingIOError:  # a writer still has it open
                if time.monotonic() < deadline:
                    time.sleep(0.001)
                    continue
                log.warning("a writer kept a replaced note open", extra={"fd": self.fd})
                return late
            except OSError:
                break
            try:
                more = self.appended_since()
            finally:
                fcntl.fcntl(self.fd, _SETLEASE, fcntl.F_UNLCK)
            return None if more is None else late + more
        time.sleep(0.005)
        more = self.appended_since()
        return None if more is None else late + more

    def appended_since(self) -> bytes | None:
        """Bytes added to the old file since the last look; None if it was rewritten."""
        assert self.fd is not None and self.data is not None
        size = os.fstat(self.fd).st_size
        if size < self._carried or os.pread(self.fd, len(self.data), 0) != self.data:
            return None
        late = (
            os.pread(self.fd, size - self._carried, self._carried) if size > self._carried else b""
        )
        self._carried += len(late)
        return late


def _read_fd(fd: int) -> bytes:
    """Everything in an open file, from its start."""
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _synced_temp(folder: Path, data: bytes, mode: int) -> str:
    """A hidden temporary file in ``folder`` holding ``data``, synced; its path."""
    fd, tmp = tempfile.mkstemp(prefix=".mv-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def _append_bytes(real: Path, data: bytes) -> None:
    fd = os.open(real, os.O_WRONLY | os.O_APPEND)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


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


def replace_file(path: Path, data: bytes) -> None:
    """Replace (or create) a file outside the vault atomically, keeping its mode: a
    reader sees the old bytes or the new ones, never a mix, and a crash loses neither."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK
    tmp = _synced_temp(path.parent, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
