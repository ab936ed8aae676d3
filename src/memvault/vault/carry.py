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
from pathlib import Path

from memvault.vault.disk import (
    WRITER_PATIENCE,
    Kept,
    Seen,
    append_bytes,
    put_in_place,
    read_fd,
    synced_temp,
)

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

    The caller holds the note's lock, so no live edit of it is under way.
    """
    try:
        fd = os.open(kept.path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return True
    try:
        done = _finish(kept, fd, real, patience)
    finally:
        os.close(fd)
    if done:
        kept.release()
    else:
        log.warning(
            "a replaced note's old text could not be carried over; it is kept",
            extra={"kept": str(kept.path), "note": str(real)},
        )
    return done


def _finish(kept: Kept, fd: int, real: Path, patience: float) -> bool:
    try:
        there = os.stat(real)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    if (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino):
        return True  # never replaced
    old = read_fd(fd)
    seen = Seen(fd, old[: kept.seen])
    late = seen.settle(patience) if kept.holds_seen(old) else None
    with open(real, "rb") as handle:
        now = handle.read()
    ours = kept.ours_in(now)
    if late is None:  # the old file was rewritten in place: its text goes back
        if ours is None:
            return False
        tmp = synced_temp(real.parent, read_fd(fd) + now[len(ours) :], here.st_mode & 0o7777)
        put_in_place(tmp, real)
        return True
    if not late:
        return True
    if ours is not None:
        bridged = seen.bridge(ours) + late
        if not now[len(ours) :].startswith(bridged):
            append_bytes(real, bridged)
    elif late not in now:  # saved whole since: the late lines go at its end
        append_bytes(real, (b"" if not now or now.endswith(b"\n") else b"\n") + late)
    return True
