"""Carry-overs a crash cut short, finished: what a person appended to a replaced note is kept.

When memvault replaces a note, what an editor appends to the old file meanwhile is carried
over to the new one (:meth:`Seen.carry_over`). Until that is done the old file has a second
name under ``.memvault/carry/`` (:class:`Kept`), so a process killed in between leaves it
behind rather than losing it. The next edit of that note, or the daemon's start, finishes
the work here, deciding from what the kept file and the note hold now:

- the note is still the kept file (the rename never happened): nothing to do;
- the kept file still starts with what was read: what follows is appended to the note,
  unless the note already holds it right after what was written (the crash came after the
  append), or anywhere (the note was saved whole since);
- the kept file was rewritten in place: its text is put back, with what followed ours.

Where the note is gone, or was rewritten since so that a rewritten old text has nowhere
to go, the kept file stays and a warning names it: nothing is guessed and nothing is lost.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from memvault.vault.disk import WRITER_PATIENCE, Kept, Seen, append_bytes, read_fd

log = logging.getLogger(__name__)

CARRY_DIR = "carry"


def pending(folder: Path, key: str | None = None) -> list[Kept]:
    """The unfinished carry-overs in ``folder`` (of one note's ``key``, if given)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    if key is not None:
        names = [name for name in names if name.startswith(key + "-")]
    found = (Kept.parse(folder / name) for name in sorted(names))
    return [kept for kept in found if kept is not None]


def finish(kept: Kept, real: Path, patience: float = WRITER_PATIENCE) -> bool:
    """Finish one carry-over into the note at ``real``; True once the kept file is released.

    The caller holds the note's lock, so no live edit of it is under way. A kept file that
    cannot be read or carried over (not a file, say) stays, and a warning names it.
    """
    try:
        fd = os.open(kept.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return True
    except OSError as exc:
        why: str | None = exc.strerror or str(exc)
    else:
        try:
            why = _finish(kept, fd, real, patience)
        except OSError as exc:
            why = exc.strerror or str(exc)
        finally:
            os.close(fd)
    if why is None:
        kept.release()
        return True
    log.warning(
        "a replaced note's old text could not be carried over; it is kept",
        extra={"kept": str(kept.path), "note": str(real), "why": why},
    )
    return False


def _finish(kept: Kept, fd: int, real: Path, patience: float) -> str | None:
    """Carry over what ``kept`` (open at ``fd``) holds; None when done, else why not."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return "it is not a file"
    old = read_fd(fd)
    seen = Seen(fd, old[: kept.seen])
    try:
        there = os.stat(real)
    except FileNotFoundError:
        return "its note is gone"
    if not stat.S_ISREG(there.st_mode):
        return "its note is not a file"
    if seen.is_file_of(there):
        return None  # never replaced
    late = seen.settle(patience) if kept.holds_seen(old) else None
    with open(real, "rb") as handle:
        now = handle.read()
    ours = kept.ours_in(now)
    if late is None:  # the old file was rewritten in place: its text goes back
        if ours is None:
            return "the note was rewritten since, and so was its old text"
        seen.restore(real, ours)
        return None
    if not late:
        return None
    if ours is not None:
        bridged = seen.bridge(ours) + late
        if not now[len(ours) :].startswith(bridged):
            append_bytes(real, bridged)
    elif late not in now:  # saved whole since: the late lines go at its end
        append_bytes(real, (b"" if not now or now.endswith(b"\n") else b"\n") + late)
    return None
