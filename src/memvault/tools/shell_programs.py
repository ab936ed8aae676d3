"""What the shell guard knows of programs before it reads a command.

:mod:`memvault.tools.shell_guard` finds the programs a command runs; to follow
them as ``sh`` would it needs to know which words are shell syntax, which
programs are shells or built-ins, which run the program named after their
options (wrappers, and how each one's options are read), which run their
arguments in a way the guard does not follow (refused), and which are known not
to run their arguments at all. Those tables, and the name a program is compared
by, live here apart from the walk that uses them: they are what an owner or a
reviewer reads and extends.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# Words that are shell syntax, not programs: the command position stays open after them.
KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}"}
KEYWORDS |= {"esac", "coproc", "]]"}
# Shells: their -c string is a command line; without one they read a file or their input.
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "yash", "fish", "csh", "tcsh"}
# Built-ins that run nothing else: allowed even when allowed_commands lists programs.
HARMLESS_BUILTINS = {
    "cd", "pwd", "true", "false", ":", "echo", "printf", "test", "[", "exit", "export",
    "unset", "shift", "read", "wait", "set", "local", "return",
}  # fmt: skip
# What sh runs itself, whatever PATH holds: no file to look up.
BUILTINS = HARMLESS_BUILTINS | {
    "alias", "unalias", "bg", "fg", "jobs", "break", "continue", "chdir", "command", "builtin",
    "eval", "exec", "getopts", "hash", "kill", "readonly", "times", "trap", "type", "ulimit",
    "umask", "let", "declare", "typeset", "source", ".", "pushd", "popd", "dirs", "disown",
    "shopt", "help",
}  # fmt: skip
# Built-ins that change the folder a later relative program path is found from.
FOLDER_CHANGES = {"cd", "chdir", "pushd", "popd"}
# Built-ins whose NAME=VALUE arguments set variables (PATH among them).
SETTERS = {"export", "declare", "typeset", "readonly", "local"}
# Programs known not to run their arguments as a command (besides the built-ins). An
# interpreter or make runs code (a script, -c, a Makefile), not a program its arguments
# name; what that code does is beyond the guard.
PASSIVE = {
    "ls", "cat", "head", "tail", "less", "more", "wc", "grep", "egrep", "fgrep", "rg", "ag",
    "file", "stat", "which", "whereis", "whatis", "apropos", "man", "info", "tldr", "readlink",
    "realpath", "basename", "dirname", "sort", "uniq", "cut", "tr", "diff", "cmp", "comm",
    "du", "df", "tee", "touch", "mkdir", "rmdir", "cp", "mv", "ln", "date", "od", "hexdump",
    "xxd", "strings", "md5sum", "sha1sum", "sha256sum", "sha512sum", "tar", "zip", "unzip",
    "gzip", "gunzip", "zcat", "xz", "bzip2", "jq", "yq", "git", "hg", "svn", "apt",
    "apt-get", "apt-cache", "dpkg", "rpm", "dnf", "yum", "pacman", "brew", "pip", "pip3",
    "npm", "pnpm", "yarn", "cargo", "go", "uname", "id", "whoami", "hostname", "ps", "pgrep",
    "top", "free", "uptime", "lsof", "tree", "fd", "locate", "column", "paste", "join",
    "fold", "fmt", "nl", "rev", "tac", "seq", "yes", "sleep", "base64", "iconv", "printenv",
    "sed", "awk", "gawk", "make", "python", "python3", "node", "perl", "ruby", "php", "pytest",
}  # fmt: skip
# Multi-call binaries: what they do depends on the name they are called by, so their file
# says nothing (``reboot`` is systemctl; on Alpine every tool is busybox).
MULTI_CALL = {"busybox", "toybox", "coreutils", "systemctl", "systemd"}
# Folders searched besides PATH for the files of the listed programs.
SYSTEM_FOLDERS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


@dataclass(frozen=True)
class Wrapper:
    """A program that runs the program named after its options (and ``positional`` words)."""

    takes_value: frozenset[str] = frozenset()  # options whose value is the next word
    positional: int = 0  # words between the options and the program (timeout's duration)
    command_string: frozenset[str] = frozenset()  # options whose value is a command line
    changes_folder: frozenset[str] = frozenset()  # options that start the program elsewhere
    program_name: frozenset[str] = frozenset()  # options naming the program (exec -a)
    lone_dash: bool = False  # whether "-" is an option (env -), not the program
    runs_words: bool = True  # whether the words after the options are a command (not script's)


def _wrapper(
    values: str = "",
    positional: int = 0,
    strings: str = "",
    folders: str = "",
    names: str = "",
    *,
    lone_dash: bool = False,
    runs_words: bool = True,
) -> Wrapper:
    return Wrapper(
        frozenset((values + " " + folders + " " + names).split()),
        positional,
        frozenset(strings.split()),
        frozenset(folders.split()),
        frozenset(names.split()),
        lone_dash,
        runs_words,
    )


WRAPPERS = {
    "env": _wrapper(
        "-u --unset", strings="-S --split-string", folders="-C --chdir", lone_dash=True
    ),
    "command": _wrapper(),
    "builtin": _wrapper(),
    "exec": _wrapper(names="-a"),
    "nohup": _wrapper(),
    "setsid": _wrapper(),
    "nice": _wrapper("-n --adjustment"),
    "ionice": _wrapper("-c -n -p -P -u --class --classdata --pid --pgid --uid"),
    "stdbuf": _wrapper("-i -o -e --input --output --error"),
    "timeout": _wrapper("-s --signal -k --kill-after", positional=1),
    "time": _wrapper("-f -o --format --output"),
    "xargs": _wrapper(
        "-a -d -E -I -L -n -P -s --arg-file --delimiter --max-lines --max-args --max-procs "
        "--max-chars --process-slot-var"
    ),
    "flock": _wrapper("-w -E --timeout --conflict-exit-code", positional=1, strings="-c --command"),
    "chrt": _wrapper("-T -P -D --sched-runtime --sched-period --sched-deadline", positional=1),
    "taskset": _wrapper(positional=1),
    "busybox": _wrapper(),
    "toybox": _wrapper(),
    "doas": _wrapper("-u -C"),
    "sudo": _wrapper(
        "-u -g -h -p -C -r -t -U -T --user --group --host --prompt --close-from --role --type "
        "--other-user --command-timeout",
        folders="-D --chdir",
    ),
    "unshare": _wrapper(
        "-S -G --setuid --setgid --propagation --setgroups --map-user --map-group "
        "--map-users --map-groups --monotonic --boottime",
        folders="-w --wd",
    ),
    "setpriv": _wrapper(
        "--ruid --euid --reuid --rgid --egid --regid --groups --inh-caps --ambient-caps "
        "--bounding-set --securebits --pdeathsig --selinux-label --apparmor-profile "
        "--landlock-access --landlock-rule"
    ),
    "script": _wrapper(
        "-E -I -O -B -T -m --echo --log-in --log-out --log-io --log-timing --logging-format",
        strings="-c --command",
        runs_words=False,
    ),
    "strace": _wrapper(
        "-o -e -p -P -u -E -s -a -b -I -O -S -U -X --output --expr --attach --trace-path "
        "--user --env --string-limit --columns --detach-on --interruptible --overhead "
        "--summary-sort-by --summary-columns --const-print-style"
    ),
    "ltrace": _wrapper("-o -e -p -u -a -A -D -l -n -s -w -x -L --output --library --align"),
    "prlimit": _wrapper("-p -o --pid --output"),
}
# Programs that run a command in a way the guard does not follow (a new root, another
# namespace, a service or a later time, a syntax of their own): refused.
OPAQUE = {
    "chroot", "nsenter", "runuser", "sg", "newgrp", "pkexec", "parallel", "sem",
    "systemd-run", "systemd-nspawn", "machinectl", "run0", "at", "batch", "crontab",
    "tmux", "screen", "dtach", "abduco", "firejail", "bwrap", "proot", "fakeroot",
    "fakechroot", "valgrind", "gdb", "perf", "expect", "unbuffer", "chpst", "start-stop-daemon",
    "daemonize", "setarch", "linux32", "linux64", "cgexec", "numactl", "dbus-run-session",
    "xvfb-run", "systemd-inhibit", "enable",
}  # fmt: skip
# Programs the guard follows by name: a file that is one of them is read as one.
FOLLOWED = SHELLS | set(WRAPPERS) | {"find", "watch"}


def program_name(program: str) -> str:
    """The name a list entry or a command's program is compared by: no folder, any case."""
    return os.path.basename(program.rstrip("/")).casefold() or program
