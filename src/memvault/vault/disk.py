"""The bytes on disk: atomic replacement, appends and syncs, and the note an edit saw.

Every byte memvault puts in a file goes through here. A whole file is replaced by a
synced temporary file renamed over it (:func:`replace_file`, :func:`synced_temp`),
never written in place, so a reader sees the old bytes or the new ones and a crash
loses neither; the folder is synced after a rename (:func:`fsync_dir`). A
read-modify-write keeps the note it read open (:class:`Seen`): the note is replaced
only if it still holds what was read, and what a writer appended to the old file
while it was being replaced is carried over, so a person's concurrent edit is never
lost; until it has been, the old file is kept under a second name (:class:`Kept`), so a
crash in between loses nothing either (:mod:`memvault.vault.carry` finishes the work).
:mod:`memvault.vault.store` builds the vault's file operations on these.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memvault.errors import NotTextError
from memvault.locations import PRIVATE_DIR
from memvault.vault.os_errors import require_regular

log = logging.getLogger(__name__)

# Read once at import, while the process is single-threaded: os.umask has no getter.
UMASK = os.umask(0)
os.umask(UMASK)
# How long a rewrite waits for a writer that still has the replaced file open.
WRITER_PATIENCE = 1.0
_SETLEASE: int | None = getattr(fcntl, "F_SETLEASE", None)  # Linux only


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


@dataclass(frozen=True)
class Keep:
    """Where a note's old file is kept while it is replaced: ``folder``, names starting ``key``."""

    folder: Path
    key: str


def _fingerprint(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass(frozen=True)
class Kept:
    """A note's old file, hard-linked at ``path`` until what was appended to it is carried over.

    The name says what an unfinished carry-over needs: the note's key, and the length and
    fingerprint of the bytes that were read (``seen``) and of the bytes written in their place
    (``new``), so a crash at any point can be finished later without doing anything twice.
    """

    path: Path
    key: str
    seen: int
    seen_print: str
    new: int
    new_print: str

    @classmethod
    def name(cls, keep: Keep, seen: bytes, new: bytes) -> Kept:
        """Where ``keep.key``'s note's old file goes, read as ``seen``, replaced by ``new``."""
        fields = (keep.key, len(seen), _fingerprint(seen), len(new), _fingerprint(new))
        return cls(keep.folder / ("-".join(map(str, fields)) + ".old"), *fields)

    @classmethod
    def parse(cls, path: Path) -> Kept | None:
        """The Kept a file in the carry folder stands for; None for any other file."""
        parts = path.name.removesuffix(".old").split("-")
        if not path.name.endswith(".old") or len(parts) != 5:
            return None
        key, seen, seen_print, new, new_print = parts
        if not (seen.isdigit() and new.isdigit()):
            return None
        return cls(path, key, int(seen), seen_print, int(new), new_print)

    def holds_seen(self, old: bytes) -> bool:
        """Whether the kept file still starts with the bytes that were read."""
        return len(old) >= self.seen and _fingerprint(old[: self.seen]) == self.seen_print

    def ours_in(self, now: bytes) -> bytes | None:
        """The bytes written in the old file's place, if the note still starts with them."""
        head = now[: self.new]
        return head if len(head) == self.new and _fingerprint(head) == self.new_print else None

    def release(self) -> None:
        """Forget the old file: what it held is in the note now."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class Seen:
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
    def read(cls, real: Path, clean: str) -> Iterator[Seen]:
        """Open and read the note (``data`` None when there is none); closed afterwards."""
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except FileNotFoundError:
            yield cls(None, None)
            return
        try:
            require_regular(os.fstat(fd).st_mode, clean)  # a pipe is never read
            yield cls(fd, read_fd(fd))
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
        if not self.is_file_of(now) or os.fstat(self.fd).st_size < len(self.data):
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

    def replace_if_unchanged(self, real: Path, data: bytes, keep: Keep | None = None) -> bool:
        """Put ``data`` at ``real`` if the note still holds what was seen; False if not.

        Checked just before the atomic rename; what a writer that opened the
        old file before the rename appends to it is then carried over. With
        ``keep``, the old file keeps a second name there until that is done.
        """
        if self.fd is None:
            real.parent.mkdir(parents=True, exist_ok=True)
        mode = (os.fstat(self.fd).st_mode & 0o7777) if self.fd is not None else 0o666 & ~UMASK
        tmp = synced_temp(real.parent, data, mode)
        kept: Kept | None = None
        try:
            if not self.still_at(real):
                return False
            if self.fd is None:
                try:
                    os.link(tmp, real)  # created meanwhile: never clobbered
                except FileExistsError:
                    return False
            else:
                kept = None if keep is None else self._keep(keep, real, data)
                if kept is not None and not self.is_file_of(os.stat(kept.path)):  # replaced since
                    kept.release()
                    return False
                os.replace(tmp, real)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        fsync_dir(real.parent)
        if self.fd is None:
            return True
        done = self.carry_over(real, data, WRITER_PATIENCE)
        if kept is not None:  # not on a failure above: what is kept is carried over later
            kept.release()
        return done

    def _keep(self, keep: Keep, real: Path, data: bytes) -> Kept | None:
        """Link the old file under ``keep`` before ``data`` replaces it. None where no link
        can be made (another filesystem, one without hard links): the replacement goes on
        without, and a crash then risks what it always did."""
        assert self.data is not None
        kept = Kept.name(keep, self.data, data)
        try:
            keep.folder.mkdir(mode=PRIVATE_DIR, exist_ok=True)
            os.link(real, kept.path)
        except OSError as exc:
            log.debug("the old note cannot be kept", extra={"error": exc.strerror})
            return None
        fsync_dir(keep.folder)
        return kept

    def is_file_of(self, there: os.stat_result) -> bool:
        """Whether a file's status is the file that was read's (the same inode)."""
        assert self.fd is not None
        here = os.fstat(self.fd)
        return (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino)

    def carry_over(self, real: Path, ours: bytes, patience: float) -> bool:
        """Bring to ``real`` (which starts with ``ours`` now) what writers appended to the old
        file since it was read; False if the old file was rewritten instead, whose text is then
        put back with whatever followed ``ours``."""
        late = self.settle(patience)
        if late is None:
            # Rewritten in place between the check and the rename: put that text back
            # (with whatever was appended to ours meanwhile) and edit it afresh.
            self.restore(real, ours)
            return False
        if late:
            append_bytes(real, self.bridge(ours) + late)
        return True

    def bridge(self, ours: bytes) -> bytes:
        """What goes between ``ours`` and the old file's late lines: a line break, if ours
        lost the one the old text ended with."""
        if ours.endswith(b"\n") or not (self.data and self.data.endswith(b"\n")):
            return b""
        return detect_newline(self.data[:4096].decode("utf-8", errors="ignore")).encode()

    def restore(self, real: Path, ours: bytes) -> None:
        """Put back the text a person wrote into the old file, plus lines appended to ours."""
        assert self.fd is not None
        theirs = read_fd(self.fd)
        with open(real, "rb") as handle:
            now = handle.read()
        extra = now[len(ours) :] if now.startswith(ours) else b""
        tmp = synced_temp(real.parent, theirs + extra, os.fstat(self.fd).st_mode & 0o7777)
        put_in_place(tmp, real)


def read_fd(fd: int) -> bytes:
    """Everything in an open file, from its start."""
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def synced_temp(folder: Path, data: bytes, mode: int) -> str:
    """A hidden temporary file in ``folder`` holding ``data``, synced; its path."""
    fd, tmp = tempfile.mkstemp(prefix=".mv-", suffix=".tmp", dir=folder)
    with removed_on_failure(tmp):
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
    return tmp


@contextlib.contextmanager
def removed_on_failure(tmp: str) -> Iterator[None]:
    """Remove the temporary file ``tmp`` when what runs inside fails; the failure goes on."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def put_in_place(tmp: str, target: Path) -> None:
    """Rename the synced temporary file ``tmp`` over ``target`` (``tmp`` removed if that
    fails) and sync the folder, so the rename survives a crash."""
    with removed_on_failure(tmp):
        os.replace(tmp, target)
    fsync_dir(target.parent)


def append_bytes(real: Path, data: bytes) -> None:
    fd = os.open(real, os.O_WRONLY | os.O_APPEND)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(directory: Path) -> None:
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
        mode = 0o666 & ~UMASK
    tmp = synced_temp(path.parent, data, mode)
    put_in_place(tmp, path)
