"""Vault-relative paths: validation and safe file names.

Every path that enters memvault from a user, a model or a channel is a
vault-relative POSIX path. It is checked here once: no absolute paths, no
``..``, no hidden components (``.memvault`` holds the API token, ``.git`` and
``.obsidian`` are not notes), and only names that are valid on Linux, macOS
and Windows alike, so a vault synced between machines never breaks.
"""

from __future__ import annotations

import re
import unicodedata

from memvault.errors import UnsafePathError
from memvault.text import unencodable

# Characters Windows refuses in file names; '/' is the separator itself.
_FORBIDDEN_CHARS = set('<>:"|?*\\')
_RESERVED_NAMES = {
    "con",
    "prn",
    "aux",
    "nul",
    *(f"com{i}" for i in range(1, 10)),
    *(f"lpt{i}" for i in range(1, 10)),
}
_MAX_COMPONENT_BYTES = 255
_MAX_PATH_CHARS = 1024
_DRIVE = re.compile(r"^[A-Za-z]:(?:[\\/]|$)")

NOTE_SUFFIX = ".md"


def _component_problem(part: str) -> str | None:
    """Explain why ``part`` is not a portable file or folder name, or return None."""
    if part == "..":
        return "'..' is not allowed; paths must stay inside the vault"
    if part.startswith("."):
        return (
            f"hidden name {part!r} is not allowed "
            "(dot-folders hold memvault's and Obsidian's own state)"
        )
    bad = sorted({c for c in part if c in _FORBIDDEN_CHARS or ord(c) < 32 or ord(c) == 127})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        return f"name {part!r} contains characters that are invalid on common filesystems ({shown})"
    if part != part.rstrip(" ."):
        return f"name {part!r} ends with a space or a dot, which Windows cannot store"
    if part != part.lstrip(" "):
        return f"name {part!r} starts with a space"
    if part.split(".", 1)[0].lower() in _RESERVED_NAMES:
        return f"name {part!r} is reserved on Windows"
    if len(part.encode("utf-8")) > _MAX_COMPONENT_BYTES:
        return f"name {part[:40]!r}... is longer than {_MAX_COMPONENT_BYTES} bytes"
    return None


def normalize_relpath(raw: str, *, allow_root: bool = False) -> str:
    """Return ``raw`` as a clean vault-relative POSIX path, or raise UnsafePathError.

    ``./`` components and repeated slashes are dropped; everything that could
    leave the vault or break on another filesystem is refused with a reason.
    ``allow_root`` accepts the empty path (the vault root) for listings.
    """
    if not isinstance(raw, str):
        raise UnsafePathError(f"Path must be a string, not {type(raw).__name__}.")
    path = raw.strip()
    if "\x00" in path:
        raise UnsafePathError("Path contains a NUL character.")
    if unencodable(path):  # no file system, index or answer can hold it
        raise UnsafePathError("Path contains a lone surrogate, which is not valid text.")
    if len(path) > _MAX_PATH_CHARS:
        raise UnsafePathError(f"Path is longer than {_MAX_PATH_CHARS} characters.")
    home = path == "~" or path.startswith("~/")
    if home or path.startswith(("/", "\\")) or _DRIVE.match(path):
        raise UnsafePathError(
            f"Path {raw!r} is absolute; "
            "use a path relative to the vault, e.g. 'Projects/Apollo.md'."
        )
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts:
        if allow_root:
            return ""
        raise UnsafePathError("Path is empty; name a note such as 'Projects/Apollo.md'.")
    for part in parts:
        problem = _component_problem(part)
        if problem:
            raise UnsafePathError(f"Path {raw!r} is not allowed: {problem}.")
    return unicodedata.normalize("NFC", "/".join(parts))


# Extensions Obsidian opens or embeds; any other name is taken to be a note title.
KNOWN_EXTENSIONS = frozenset(
    {"md", "markdown", "txt", "canvas", "base", "json", "csv", "pdf"}
    | {"png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "avif"}
    | {"mp3", "wav", "m4a", "ogg", "flac", "webm", "mp4", "mov", "mkv"}
)


def ensure_note_suffix(relpath: str) -> str:
    """Add ``.md`` unless the path already ends in an extension Obsidian knows.

    ``Projects/Apollo`` becomes ``Projects/Apollo.md``; ``Notes v1.2`` becomes
    ``Notes v1.2.md``; ``diagram.png`` stays as it is.
    """
    ext = relpath.rsplit("/", 1)[-1].rpartition(".")[2].lower()
    return (
        relpath
        if "." in relpath.rsplit("/", 1)[-1] and ext in KNOWN_EXTENSIONS
        else relpath + NOTE_SUFFIX
    )


# Characters that break Obsidian links ([[a#b]], [[a|b]], [[a^b]], [[a]]]) or filesystems:
# separators become a dash, the rest disappear.
_SEPARATORS_IN_TITLE = re.compile(r"\s*[:|]\s*|[/\\]")
_DROPPED_FROM_TITLE = re.compile(r'[<>"?*#^\[\]\x00-\x1f\x7f]')


def safe_filename(title: str, *, max_chars: int = 120) -> str:
    """Turn a human title into a file name that is portable and linkable.

    Keeps the title readable (spaces and case survive, so ``[[Fix login bug]]``
    links to ``Fix login bug.md``); replaces characters that break links or
    filesystems; refuses a title with nothing usable left.
    """
    name = unicodedata.normalize("NFC", title)
    name = _DROPPED_FROM_TITLE.sub("", _SEPARATORS_IN_TITLE.sub(" - ", name))
    name = re.sub(r"\s+", " ", name).lstrip("~ .-").rstrip(" .-")
    name = re.sub(r"-{2,}", "-", name)
    while len(name.encode("utf-8")) > min(max_chars * 4, 200) or len(name) > max_chars:
        name = name[:-1]
    name = name.rstrip(" .-")
    if not name:
        raise UnsafePathError(f"Title {title!r} has no characters usable in a file name.")
    if name.split(".", 1)[0].lower() in _RESERVED_NAMES:
        name = f"{name}_"
    return name
