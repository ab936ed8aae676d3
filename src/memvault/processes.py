"""Whether a process still runs, told apart from a later one that reuses its id;
ending a process with everything it started; keeping a process's environment from
being read from outside.

Standard library only: the CLI asks before it imports anything heavy.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` from the state on (field 3 of proc(5) first),
    or None where /proc cannot say (no such process, or no /proc: macOS)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs (an exited one its parent has not reaped does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _proc_stat(pid)
    return fields is None or fields[:1] != ["Z"]  # without /proc the signal test is all


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), or None where /proc cannot say.

    Together with the pid it names one process: a pid reused after a crash
    has another start time.
    """
    fields = _proc_stat(pid)
    try:
        return int(fields[19]) if fields is not None else None  # field 22 of proc(5)
    except (IndexError, ValueError):
        return None


def descendants(pid: int) -> list[int]:
    """Every process ``pid`` started and they started in turn, as /proc lists them now
    (empty without /proc: macOS). A child that made a session of its own (``setsid``,
    Node's ``detached``) is listed too: it left the process group, not the family."""
    found: list[int] = []
    parents = [pid]
    while parents:
        parent = parents.pop()
        for children in Path(f"/proc/{parent}/task").glob("*/children"):
            try:
                kids = [int(kid) for kid in children.read_text().split()]
            except (OSError, ValueError):
                continue  # the thread or the process ended meanwhile
            found.extend(kids)
            parents.extend(kids)
    return found


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to ``pid``'s process group and to every descendant, those in other
    groups or sessions included (listed first: once the parent dies they move to init)."""
    family = descendants(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    for member in [pid, *family]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, sig)


def hide_environment() -> bool:
    """Blank the environment block this process was started with, the one any process of
    the same user reads in /proc/<pid>/environ; whether it was (Linux only).

    Each variable first gets a copy of its own (``setenv``), so ``os.environ``,
    ``getenv`` in libraries and the processes started later see the same values;
    only the view from outside goes. A long-running process that holds API keys
    calls it once at start, before any thread runs (``setenv`` is not thread-safe):
    a command it runs could otherwise read the keys from its ancestor.
    """
    fields = _proc_stat(os.getpid()) or []
    try:
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end: 50, 51 in proc(5)
    except (IndexError, ValueError):
        return False  # no /proc (macOS), or a kernel before 3.5
    if not 0 < start < end:
        return False
    import ctypes  # here: the CLI imports this module on every start

    for name, value in os.environb.items():
        os.putenv(name, value)
    ctypes.memset(start, 0, end - start)
    return True
