"""Run one ``run_shell_command`` command, and end everything it started when it ends.

The daemon starts this file as a script, ``python -I -S shell_launcher.py
PARENT_PID COMMAND``, in a session of its own and with the trimmed
environment only, so the command's parent holds no key the daemon holds.
It imports the standard library only and starts in tens of milliseconds.

1. It makes itself a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): a
   process the command starts that leaves the process group or session
   (``setsid -f``) or double-forks comes back to it as a child when its
   parent ends, instead of going to init.
2. It runs ``/bin/sh -c COMMAND``, which inherits its folder, its
   environment as it was started (the one ``/proc/self/environ`` shows) and
   its stdin, stdout and stderr: nothing is relayed.
3. While the shell runs it reaps whatever ends. When the shell ends, on
   SIGTERM (the daemon's timeout) or when the daemon dies (the parent-death
   signal), it kills every process left: it SIGKILLs its children, reaps
   them, and goes on until it has none (the orphans of the killed come back
   to it), so nothing the command started outlives it.
4. It exits with the shell's status (128 + N for signal N).

Where there is no subreaper (not Linux), the shell runs in a process group
of its own and that group is killed at the end instead.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# Python ignores these; a command must get them as any program does (yes | head ends).
_RESTORED = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def main(argv: list[str]) -> int:
    """Run the command, sweep its processes, and return its exit status."""
    parent, command = int(argv[1]), argv[2]
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    reaper = _prctl(PR_SET_CHILD_SUBREAPER, 1)
    for stop in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(stop, _stopped)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        return 128 + signal.SIGTERM  # the daemon ended before the signal was set
    try:
        shell = _spawn(command, own_group=not reaper)
    except OSError as exc:
        print(f"memvault cannot start /bin/sh: {exc.strerror}.", file=sys.stderr)
        return 127
    if not reaper:
        _group.append(shell)
    status = _wait_for(shell)
    _sweep()
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code  # killed by signal N: 128 + N, as sh says


# The shell's process group, where there is no subreaper to collect what it leaves.
_group: list[int] = []


def _stopped(signum: int, _frame: object) -> None:
    _sweep()
    os._exit(128 + signum)


def _spawn(command: str, *, own_group: bool) -> int:
    """Start /bin/sh -c ``command`` with signals as a program expects them."""
    argv = ["/bin/sh", "-c", command]
    if own_group:
        return os.posix_spawn(
            argv[0], argv, _environment(), setsigdef=_RESTORED, setsigmask=(), setpgroup=0
        )
    return os.posix_spawn(argv[0], argv, _environment(), setsigdef=_RESTORED, setsigmask=())


def _prctl(option: int, value: int) -> bool:
    """Call prctl(2); False where the system has none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _environment() -> dict[bytes, bytes]:
    """The environment this process was started with (Python may have added LC_CTYPE)."""
    try:
        with open("/proc/self/environ", "rb") as handle:
            entries = handle.read().split(b"\0")
    except OSError:
        return dict(os.environb)
    pairs = (entry.partition(b"=") for entry in entries if b"=" in entry[1:])
    return {name: value for name, _, value in pairs}


def _wait_for(shell: int) -> int:
    """The shell's wait status, reaping every other child that ends meanwhile."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == shell:
            return status


def _sweep() -> None:
    """Kill every process the command left, until none is left to reap."""
    for group in _group:
        _kill(group, group=True)
    while True:
        children = _children()
        for child in children:
            _kill(child)
        try:
            pid, _ = os.waitpid(-1, 0 if children else os.WNOHANG)
        except ChildProcessError:
            return  # none left
        if pid == 0:
            time.sleep(0.005)  # a child /proc does not list yet (it is being re-parented)


def _kill(pid: int, *, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return  # it ended, or it is not ours to end (a set-user-id program)


def _children() -> list[int]:
    """This process's children, as /proc lists them (empty without /proc)."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as handle:
            return [int(pid) for pid in handle.read().split()]
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        return []
    found = []  # a kernel without the children file: every process's parent, from stat
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []  # no /proc: the process group was killed instead
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat") as handle:
                if int(handle.read().rpartition(")")[2].split()[1]) == me:
                    found.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue  # it ended meanwhile
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv))
