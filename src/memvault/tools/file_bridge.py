"""The file bridge: copy one file between the vault and an allowed folder outside it.

``read_file_from_path`` and ``write_file_to_path`` (tier 2, offered when
``[tools.files] enabled`` is true) are the earlier design's file tools. The
vault side goes through the vault's own API, so its path rules hold
(nothing in ``.memvault``); the outside side must lie, symlinks followed, in
an allowed folder and outside the vault, is never overwritten unless asked,
and is written atomically (a temporary file, then a rename or a link).
"""

from __future__ import annotations

import contextlib
import errno
import mimetypes
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from pydantic import Field

from memvault.errors import ConflictError, InvalidInputError, NotFoundError, VaultError
from memvault.tools.folders import allowed_folders, confined, outside_vault
from memvault.tools.inputs import ToolInput, names
from memvault.tools.policy import FILE_WRITES, Tier
from memvault.tools.registry import Annotations, Tool, ToolContext
from memvault.vault.store import replace_file

FILES_SETTING = "tools.files.enabled"


class ReadFileFromPath(ToolInput):
    path: str = Field(
        description="Absolute path of the file to copy into the vault, in an allowed folder.",
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
        description="Absolute path to write, in an allowed folder; its folder must exist.",
        validation_alias=names("path", "destination", "dest", "to", "target"),
        min_length=1,
    )
    overwrite: bool = Field(False, description="Replace a file already at path (default: refuse).")


def _read_from_path(ctx: ToolContext, args: ReadFileFromPath) -> dict[str, Any]:
    settings = ctx.runtime.settings.tools.files
    folders = allowed_folders(settings.allowed_folders, "tools.files")
    given = Path(args.path).expanduser()
    if not given.is_absolute():
        raise InvalidInputError(f"path must be absolute, e.g. /home/me/report.pdf; got {given}.")
    real = os.path.realpath(given)
    confined(real, folders, "tools.files", str(given))
    outside_vault(real, ctx.runtime.vault, str(given))
    data = _read_outside(real, str(given), settings.max_bytes)
    destination = args.destination or f"Attachments/{given.name}"
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


def _read_outside(real: str, shown: str, max_bytes: int) -> bytes:
    """A regular file's bytes (never a pipe or a device), at most ``max_bytes``."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY)
    except FileNotFoundError:
        raise NotFoundError(f"No file at {shown}.") from None
    except OSError as exc:
        raise _outside_error(exc, shown, "read") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise InvalidInputError(f"{shown} is a folder; give the path of a file.")
        raise InvalidInputError(f"{shown} is not a regular file, so it cannot be copied.")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InvalidInputError(
            f"{shown} is larger than the {max_bytes} bytes [tools.files] max_bytes allows."
        )
    return data


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in data


def _write_to_path(ctx: ToolContext, args: WriteFileToPath) -> dict[str, Any]:
    settings = ctx.runtime.settings.tools.files
    folders = allowed_folders(settings.allowed_folders, "tools.files")
    given = Path(args.path).expanduser()
    if not given.is_absolute() or given.name in ("", ".", ".."):
        raise InvalidInputError(
            f"path must be the absolute path of a file, e.g. /home/me/out.md; got {given}."
        )
    data = ctx.runtime.vault.read_bytes(args.source)  # the vault's path rules: no .memvault
    if len(data) > settings.max_bytes:
        raise InvalidInputError(
            f"{args.source} is larger than the {settings.max_bytes} bytes [tools.files] "
            "max_bytes allows."
        )
    folder = os.path.realpath(given.parent)
    target = os.path.join(folder, given.name)
    for real in (folder, os.path.realpath(target)):  # a link at the target must stay inside
        confined(real, folders, "tools.files", str(given))
        outside_vault(real, ctx.runtime.vault, str(given))
    if not os.path.isdir(folder):
        raise NotFoundError(f"The folder {given.parent} does not exist; create it first.")
    existed = os.path.lexists(target)
    if existed and os.path.isdir(target):
        raise InvalidInputError(f"{given} is a folder; give the path of a file.")
    if existed and not args.overwrite:
        raise ConflictError(f"{given} already exists; pass overwrite true to replace it.")
    try:
        if args.overwrite:
            replace_file(Path(target), data)
        else:
            _create_new(Path(target), data, str(given))
    except OSError as exc:
        raise _outside_error(exc, str(given), "write") from None
    return {"path": str(given), "source": args.source, "size_bytes": len(data), "replaced": existed}


def _create_new(target: Path, data: bytes, shown: str) -> None:
    """Write a new file atomically: a temporary file, then a link that fails if one exists."""
    fd, tmp = tempfile.mkstemp(prefix=".memvault-", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise ConflictError(
                f"{shown} already exists; pass overwrite true to replace it."
            ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _outside_error(exc: OSError, shown: str, doing: str) -> InvalidInputError | VaultError:
    if exc.errno == errno.ELOOP:
        return InvalidInputError(f"{shown} is a symlink; give the path of the file itself.")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return VaultError(f"Permission denied: memvault cannot {doing} {shown}.")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return VaultError(f"No space left to {doing} {shown}.")
    return VaultError(f"Cannot {doing} {shown}: {exc.strerror or exc}.")


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
