"""The file bridge: copy one file between the vault and an allowed folder outside it.

``read_file_from_path`` and ``write_file_to_path`` (tier 2, offered when
``[tools.files] enabled`` is true) are the earlier design's file tools. The
vault side goes through the vault's own API, so its path rules hold
(nothing in ``.memvault``). The outside side must lie in an allowed folder
and outside the vault, with no symlink below the allowed folder: it is opened
by descriptor, component by component (:func:`~memvault.tools.folders.folder_of`),
so a link another process swaps in between a check and a use is refused, not
followed. A file with more than one name (a hard link) is not read, since its
other names may be anywhere. A written file is never overwritten unless
asked, and is written atomically (a temporary file in the opened folder, then
a rename or a link).
"""

from __future__ import annotations

import contextlib
import mimetypes
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from pydantic import Field

from memvault.errors import ConflictError, InvalidInputError, NotFoundError
from memvault.locations import STATE_DIR
from memvault.tools.folders import folder_of, os_refusal, outside_vault, symlink_refusal
from memvault.tools.inputs import ToolInput, names
from memvault.tools.policy import FILE_WRITES, Tier
from memvault.tools.registry import Annotations, Tool, ToolContext
from memvault.vault.store import Vault

FILES_SETTING = "tools.files.enabled"
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class ReadFileFromPath(ToolInput):
    path: str = Field(
        description=(
            "Absolute path of the file to copy into the vault, in an allowed folder "
            "(not through a symlink)."
        ),
        validation_alias=names("path", "source", "file", "from"),
        min_length=1,
    )
    destination: str | None = Field(
        None,
        description="Vault-relative path for the copy; default 'Attachments/<file name>'.",
        validation_alias=names("destination", "dest", "to", "vault_path", "target"),
    )


class WriteFileToPath(ToolInput):
    source: str = Field(
        description="Vault-relative path of the file to copy out, e.g. 'Projects/Apollo.md'.",
        validation_alias=names("source", "vault_path", "note", "from", "file"),
        min_length=1,
    )
    path: str = Field(
        description=(
            "Absolute path to write, in an allowed folder (not through a symlink); its "
            "folder must exist."
        ),
        validation_alias=names("path", "destination", "dest", "to", "target"),
        min_length=1,
    )
    overwrite: bool = Field(False, description="Replace a file already at path (default: refuse).")


def _read_from_path(ctx: ToolContext, args: ReadFileFromPath) -> dict[str, Any]:
    settings = ctx.runtime.settings.tools.files
    given = Path(args.path).expanduser()
    if not given.is_absolute():
        raise InvalidInputError(f"path must be absolute, e.g. /home/me/report.pdf; got {given}.")
    with folder_of(given, settings.allowed_folders, "tools.files") as (folder_fd, name):
        outside_vault(folder_fd, ctx.runtime.vault, str(given))
        data = _read_outside(folder_fd, name, str(given), settings.max_bytes, ctx.runtime.vault)
    destination = args.destination or f"Attachments/{given.name}"
    if _is_text(data):  # a text file (an .env, say) brings no secret in ([privacy] secrets)
        data = ctx.runtime.secrets(data.decode("utf-8")).encode("utf-8")
    try:
        written = ctx.runtime.vault.create_bytes(destination, data)
    except ConflictError:
        raise ConflictError(
            f"{destination} already exists in the vault, and read_file_from_path never "
            "replaces a file; give another destination."
        ) from None
    media_type = mimetypes.guess_type(given.name)[0]
    if media_type is None:
        media_type = "text/plain" if _is_text(data) else "application/octet-stream"
    return {"path": written, "size_bytes": len(data), "media_type": media_type}


def _read_outside(folder_fd: int, name: str, shown: str, max_bytes: int, vault: Vault) -> bytes:
    """The bytes of the regular file ``name`` in ``folder_fd`` (never a pipe, a device or a
    file with names elsewhere), at most ``max_bytes``."""
    try:
        fd = os.open(name, _READ, dir_fd=folder_fd)
    except FileNotFoundError:
        raise NotFoundError(f"No file at {shown}.") from None
    except OSError as exc:
        raise os_refusal(exc, shown, "read") from None
    try:
        opened = os.fstat(fd)
        if stat.S_ISDIR(opened.st_mode):
            raise InvalidInputError(f"{shown} is a folder; give the path of a file.")
        if not stat.S_ISREG(opened.st_mode):
            raise InvalidInputError(f"{shown} is not a regular file, so it cannot be copied.")
        _single_name(opened, shown, vault)
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise os_refusal(exc, shown, "read") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise InvalidInputError(
            f"{shown} is larger than the {max_bytes} bytes [tools.files] max_bytes allows."
        )
    return data


def _single_name(opened: os.stat_result, shown: str, vault: Vault) -> None:
    """Refuse a file with more names than the one given: a hard link in an allowed folder
    may be another name of a file anywhere on the same disk (memvault's token, a key in
    ~/.ssh), and the other names cannot be found from here. A file with one name is judged
    by that name, which the caller has already checked (so memvault's own files, whose one
    name is in the vault, are refused there)."""
    if opened.st_nlink <= 1:
        return
    if (opened.st_dev, opened.st_ino) in _state_files(vault):
        raise InvalidInputError(
            f"{shown} is another name (a hard link) of one of memvault's own files in "
            f"{STATE_DIR}; memvault never copies those."
        )
    raise InvalidInputError(
        f"{shown} has {opened.st_nlink} names (hard links), and memvault cannot see where "
        "the others are, so it does not copy it; put a copy of the file there instead."
    )


def _state_files(vault: Vault) -> set[tuple[int, int]]:
    """The (device, inode) of every file under the vault's ``.memvault``."""
    found: set[tuple[int, int]] = set()
    for folder, _dirs, files in os.walk(vault.state_dir):
        for name in files:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(folder, name))
                found.add((info.st_dev, info.st_ino))
    return found


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in data


def _write_to_path(ctx: ToolContext, args: WriteFileToPath) -> dict[str, Any]:
    settings = ctx.runtime.settings.tools.files
    given = Path(args.path).expanduser()
    if not given.is_absolute() or given.name in ("", ".", ".."):
        raise InvalidInputError(
            f"path must be the absolute path of a file, e.g. /home/me/out.md; got {given}."
        )
    shown = str(given)
    data = ctx.runtime.vault.read_bytes(args.source)  # the vault's path rules: no .memvault
    if len(data) > settings.max_bytes:
        raise InvalidInputError(
            f"{args.source} is larger than the {settings.max_bytes} bytes [tools.files] "
            "max_bytes allows."
        )
    with folder_of(given, settings.allowed_folders, "tools.files") as (folder_fd, name):
        outside_vault(folder_fd, ctx.runtime.vault, shown)
        try:
            there = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            there = None
        except OSError as exc:
            raise os_refusal(exc, shown, "write") from None
        if there is not None:
            if stat.S_ISLNK(there.st_mode):
                raise symlink_refusal(shown)
            if stat.S_ISDIR(there.st_mode):
                raise InvalidInputError(f"{shown} is a folder; give the path of a file.")
            if not args.overwrite:
                raise ConflictError(f"{shown} already exists; pass overwrite true to replace it.")
            if not stat.S_ISREG(there.st_mode):
                raise InvalidInputError(f"{shown} is not a regular file, so it is not replaced.")
        mode = 0o644 if there is None else stat.S_IMODE(there.st_mode) & 0o777
        try:
            _place(folder_fd, name, data, mode, replace=there is not None, shown=shown)
        except OSError as exc:
            raise os_refusal(exc, shown, "write") from None
    return {
        "path": shown,
        "source": args.source,
        "size_bytes": len(data),
        "replaced": there is not None,
    }


def _place(folder_fd: int, name: str, data: bytes, mode: int, *, replace: bool, shown: str) -> None:
    """Write ``name`` in ``folder_fd`` atomically: a temporary file created in that very
    folder (never through a name that could be swapped), then a rename over the old file
    or, for a new one, a link that fails if something appeared there meanwhile. Neither
    follows a symlink at ``name``: a rename replaces the link itself."""
    temporary = f".memvault-{secrets.token_hex(8)}.tmp"
    fd = os.open(temporary, _CREATE, 0o600, dir_fd=folder_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        if replace:
            os.rename(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        else:
            try:
                os.link(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
            except FileExistsError:
                raise ConflictError(
                    f"{shown} already exists; pass overwrite true to replace it."
                ) from None
        with contextlib.suppress(OSError):  # durable; some filesystems refuse, harmlessly
            os.fsync(folder_fd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=folder_fd)


TOOLS = [
    Tool(
        name="read_file_from_path",
        title="Copy a file into the vault",
        description=(
            "Copy a file (text or binary) from an allowed folder on the owner's computer into "
            "the vault, by default to 'Attachments/<name>'; an existing vault file is never "
            "replaced. Returns the vault path, size and media type."
        ),
        input_model=ReadFileFromPath,
        handler=_read_from_path,
        tier=Tier.WRITE,
        category=FILE_WRITES,
        annotations=Annotations(),
        summarize=lambda a: f"copy {a.path} into the vault",
        enabled_by=FILES_SETTING,
    ),
    Tool(
        name="write_file_to_path",
        title="Copy a vault file out",
        description=(
            "Copy a vault file to an allowed folder on the owner's computer (an absolute "
            "path). An existing file there is replaced only with overwrite true."
        ),
        input_model=WriteFileToPath,
        handler=_write_to_path,
        tier=Tier.WRITE,
        category=FILE_WRITES,
        annotations=Annotations(destructive=True),
        summarize=lambda a: (
            f"copy {a.source} to {a.path}" + (" (replacing what is there)" if a.overwrite else "")
        ),
        enabled_by=FILES_SETTING,
    ),
]
