"""Which programs a shell command would run, checked against the owner's lists.

The blocked and allowed command lists of ``[tools.shell]`` are checked on
the parsed command, never on its text: ``shlex`` (POSIX rules, with ``;``,
``&&``, ``||``, ``|``, ``&``, ``(``, ``)`` and newlines as operators) splits
it into simple commands, and the program of every one is found as ``sh``
would find it: past ``VAR=x`` assignments, redirections, keywords (``if``,
``!``, ``{``) and wrappers that run another program (``env``, ``nice``,
``timeout 5``, ``xargs``, ``unshare``, ``strace -o f``, ``busybox``,
``find -exec``), and inside the command strings of ``sh -c``, ``eval``,
``trap``, ``watch``, ``script -c``. The bodies of here-documents are input,
not commands, and are left out.

A program is known by its name (without folder and quotes, in any case:
``/usr/bin/sudo``, ``"su"do`` and ``su\\do`` are all ``sudo``) and by the
file it runs: a name is looked up on ``PATH``, a path is followed through
its links, and the file is compared with the files of the programs the
lists and the wrapper tables name, by real path, by inode and, for a file
of the same size, by content. So a symlink, hard link or copy of ``rm``
under another name is still ``rm``, and a copy of ``env`` still wraps.

What cannot be checked is refused rather than guessed: command
substitution (backticks, ``$(``), a program name made from a variable or a
pattern (``$X``, ``su?o``), a shell reading its commands from a file or its
input, a path to a program that does not exist yet (the command would make
it), a relative path after ``cd``, a change of ``PATH``, a wrapper whose
syntax is not followed (``chroot``, ``parallel``, ``systemd-run``, ...),
and a program the guard does not know given a blocked program as an
argument (``eatmydata rm f``): unless it is known not to run its
arguments, it is taken for a wrapper. Parsing errs on the side of seeing a
program where ``sh`` sees an argument, which can only refuse more.

The lists guard against a slip, not a determined adversary: the files are
compared when the command is checked, not when it runs, and a script or an
interpreter (``python -c``) runs what it likes. The owner's approval of
every call (tier 3) is the real gate.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memvault.errors import InvalidInputError

_OPERATOR_CHARS = "();<>|&\n"
_NAME_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_PATH_ASSIGNMENT = re.compile(r"^PATH\+?=")
_FD_NUMBER = re.compile(r"^[0-9]+$")
_MAX_DEPTH = 8
_REFUSED = "run_shell_command refused the command"

# Words that are shell syntax, not programs: the command position stays open after them.
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}"}
_KEYWORDS |= {"esac", "coproc", "]]"}
# Shells: their -c string is a command line; without one they read a file or their input.
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "yash", "fish", "csh", "tcsh"}
# Built-ins that run nothing else: allowed even when allowed_commands lists programs.
HARMLESS_BUILTINS = {
    "cd", "pwd", "true", "false", ":", "echo", "printf", "test", "[", "exit", "export",
    "unset", "shift", "read", "wait", "set", "local", "return",
}  # fmt: skip
# What sh runs itself, whatever PATH holds: no file to look up.
_BUILTINS = HARMLESS_BUILTINS | {
    "alias", "unalias", "bg", "fg", "jobs", "break", "continue", "chdir", "command", "builtin",
    "eval", "exec", "getopts", "hash", "kill", "readonly", "times", "trap", "type", "ulimit",
    "umask", "let", "declare", "typeset", "source", ".", "pushd", "popd", "dirs", "disown",
    "shopt", "help",
}  # fmt: skip
# Built-ins that change the folder a later relative program path is found from.
_FOLDER_CHANGES = {"cd", "chdir", "pushd", "popd"}
# Built-ins whose NAME=VALUE arguments set variables (PATH among them).
_SETTERS = {"export", "declare", "typeset", "readonly", "local"}
# Programs known not to run their arguments as a command (besides the built-ins). An
# interpreter or make runs code (a script, -c, a Makefile), not a program its arguments
# name; what that code does is beyond the guard.
_PASSIVE = {
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
_MULTI_CALL = {"busybox", "toybox", "coreutils", "systemctl", "systemd"}
# Folders searched besides PATH for the files of the listed programs.
_SYSTEM_FOLDERS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


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


_WRAPPERS = {
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
_OPAQUE = {
    "chroot", "nsenter", "runuser", "sg", "newgrp", "pkexec", "parallel", "sem",
    "systemd-run", "systemd-nspawn", "machinectl", "run0", "at", "batch", "crontab",
    "tmux", "screen", "dtach", "abduco", "firejail", "bwrap", "proot", "fakeroot",
    "fakechroot", "valgrind", "gdb", "perf", "expect", "unbuffer", "chpst", "start-stop-daemon",
    "daemonize", "setarch", "linux32", "linux64", "cgexec", "numactl", "dbus-run-session",
    "xvfb-run", "systemd-inhibit", "enable",
}  # fmt: skip
# Programs the guard follows by name: a file that is one of them is read as one.
_FOLLOWED = _SHELLS | set(_WRAPPERS) | {"find", "watch"}


class RefusedCommandError(InvalidInputError):
    """A shell command run_shell_command will not run, with the reason in one sentence."""


# -- the files of known programs -----------------------------------------------------------


@dataclass(frozen=True)
class _File:
    """One program file, as the guard compares it."""

    path: str
    real: str
    device: int
    inode: int
    size: int
    mtime: int


def _file(path: str) -> _File | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return _File(
        path, os.path.realpath(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns
    )


_DIGESTS: dict[tuple[int, int, int, int], bytes] = {}


def _digest(file: _File) -> bytes | None:
    """The file's SHA-256, cached by its identity and modification time."""
    key = (file.device, file.inode, file.size, file.mtime)
    digest = _DIGESTS.get(key)
    if digest is None:
        try:
            with open(file.path, "rb") as handle:
                digest = hashlib.file_digest(handle, "sha256").digest()
        except OSError:
            return None
        if len(_DIGESTS) > 512:
            _DIGESTS.clear()
        _DIGESTS[key] = digest
    return digest


@dataclass
class _Known:
    """The files of the programs the guard knows by name, and the names of each file."""

    by_real: dict[str, set[str]] = field(default_factory=dict)
    by_inode: dict[tuple[int, int], set[str]] = field(default_factory=dict)
    by_size: dict[int, list[tuple[_File, str]]] = field(default_factory=dict)

    def add(self, name: str, file: _File) -> None:
        if program_name(file.real) in _MULTI_CALL:
            return  # its file is every name's: only the name it is called by tells
        self.by_real.setdefault(file.real, set()).add(name)
        self.by_inode.setdefault((file.device, file.inode), set()).add(name)
        self.by_size.setdefault(file.size, []).append((file, name))

    def names(self, file: _File, called: str) -> set[str]:
        """The names ``file`` is known by: its own, and those of the same file or a copy;
        a multi-call binary is only the name it is ``called`` by."""
        if program_name(file.real) in _MULTI_CALL:
            return {called}
        found = {program_name(file.real)}
        found |= self.by_real.get(file.real, set())
        found |= self.by_inode.get((file.device, file.inode), set())
        copies = [
            (other, name) for other, name in self.by_size.get(file.size, []) if name not in found
        ]
        if copies:
            digest = _digest(file)
            found |= {name for other, name in copies if digest and _digest(other) == digest}
        return found


_KNOWN_CACHE: dict[tuple[frozenset[str], tuple[str, ...]], tuple[list[int], _Known]] = {}


def _known(names: frozenset[str], folders: tuple[str, ...]) -> _Known:
    """The files of ``names`` found in ``folders``, rebuilt when a folder changes."""
    stamps = []
    for folder in folders:
        try:
            stamps.append(os.stat(folder).st_mtime_ns)
        except OSError:
            stamps.append(-1)
    cached = _KNOWN_CACHE.get((names, folders))
    if cached is not None and cached[0] == stamps:
        return cached[1]
    known = _Known()
    for name in names:
        places = [name] if "/" in name else [os.path.join(f, name) for f in folders]
        for place in places:
            file = _file(place)
            if file is not None:
                known.add(program_name(name), file)
    if len(_KNOWN_CACHE) > 16:
        _KNOWN_CACHE.clear()
    _KNOWN_CACHE[(names, folders)] = (stamps, known)
    return known


# -- the programs of a command ---------------------------------------------------------------


@dataclass
class _Program:
    """A program the command runs: the word naming it and the names its file is known by."""

    word: str
    names: set[str]


class _Programs:
    """The programs found so far; each is checked against the blocked list as it is found,
    so the refusal names the first blocked one, before anything else about the command."""

    def __init__(
        self,
        blocked: Iterable[str] = (),
        allowed: Iterable[str] = (),
        *,
        cwd: str | None = None,
        path: str | None = None,
    ) -> None:
        blocked = list(blocked)
        self.blocked = {program_name(b) for b in blocked}
        self.cwd = cwd or os.getcwd()
        entries = (path if path is not None else os.environ.get("PATH", os.defpath)).split(":")
        self.path = os.pathsep.join(os.path.join(self.cwd, entry) for entry in entries)
        folders = tuple(dict.fromkeys([*self.path.split(os.pathsep), *_SYSTEM_FOLDERS]))
        listed = frozenset([*blocked, *allowed, *_FOLLOWED, *_OPAQUE])
        self.known = _known(listed, folders)
        self.found: list[_Program] = []
        self.functions: set[str] = set()
        self.relative: list[str] = []  # programs named by a path relative to the folder
        self.moved = False  # whether the command changes folder on the way

    def add(self, word: str) -> str:
        """Check the program ``word`` names; the name it is followed by (its file's, when
        that is a wrapper or a shell under another name)."""
        _check_name(word)
        name = program_name(word)
        self._refuse_blocked(name, word)
        if name in _FOLDER_CHANGES:
            self.moved = True
        file = self._file(word)
        names = {name} if file is None else self.known.names(file, name)
        for other in sorted(names - {name}):
            self._refuse_blocked(other, word)
        if names & _OPAQUE:
            opaque = sorted(names & _OPAQUE)[0]
            raise RefusedCommandError(
                f"{_REFUSED}: {opaque} runs the command it is given in a way the guard does "
                "not follow (another root, namespace or user, a service, a later time or a "
                "syntax of its own); run the command directly."
            )
        self.found.append(_Program(word, names))
        followed = sorted(names & _FOLLOWED)
        return name if name in _FOLLOWED or not followed else followed[0]

    def check_argument(self, program: str, word: str) -> None:
        """Refuse a blocked program given to ``program``, which may run it: by its name, or
        by its file when ``word`` is a path (``s/a/rm/`` names no program)."""
        name = program_name(word)
        names = {name}
        if "/" in word:
            file = _file(self._place(word))
            names = self.known.names(file, name) if file is not None else set()
        hit = sorted(names & self.blocked)
        if hit:
            raise RefusedCommandError(
                f"{_REFUSED}: {program} is given {hit[0]}, a blocked command ([tools.shell] "
                f"blocked_commands), and may run it; the guard does not know {program}, so it "
                "takes it for a program that runs its arguments."
            )

    def name_only(self, word: str) -> None:
        """Refuse a blocked name given as the name a program runs under (``exec -a``)."""
        self._refuse_blocked(program_name(word), word)

    def _refuse_blocked(self, name: str, word: str) -> None:
        if name not in self.blocked:
            return
        if name == program_name(word):
            raise RefusedCommandError(
                f"{_REFUSED}: {name} is a blocked command ([tools.shell] blocked_commands); "
                "nothing was run."
            )
        raise RefusedCommandError(
            f"{_REFUSED}: {word} is {name} under another name, and {name} is a blocked "
            "command ([tools.shell] blocked_commands); nothing was run."
        )

    def _place(self, word: str) -> str:
        return os.path.join(self.cwd, os.path.expanduser(word))

    def _file(self, word: str) -> _File | None:
        """The file ``word`` runs, as sh would find it; None for a built-in, a function
        or a name on no PATH folder."""
        if "/" not in word:
            if word in _BUILTINS or word in self.functions:
                return None
            found = shutil.which(word, path=self.path)
            return _file(found) if found else None
        place = self._place(word)
        file = _file(place)
        if file is None:
            if os.path.isdir(place):
                return None  # sh refuses to run a folder
            raise RefusedCommandError(
                f"{_REFUSED}: the program {word} does not exist when the command is checked, "
                "so what it is cannot be checked; make it in one call and run it in the next."
            )
        if not os.path.isabs(os.path.expanduser(word)):
            self.relative.append(word)
        return file


def check_command(
    command: str,
    blocked: Iterable[str],
    allowed: Iterable[str],
    *,
    cwd: str | None = None,
    path: str | None = None,
) -> list[str]:
    """The programs of ``command``, after checking every one against the lists.

    ``blocked`` is checked first; a non-empty ``allowed`` then names the only programs
    that may run (shell built-ins that run nothing are always allowed). ``cwd`` and
    ``path`` are the folder the command starts in and its ``PATH`` (default: this
    process's), from which the files of its programs are found.
    """
    allowed = list(allowed)
    found = _Programs(list(blocked), allowed, cwd=cwd, path=path)
    _walk(command, found)
    if found.moved and found.relative:
        raise RefusedCommandError(
            f"{_REFUSED}: it runs {found.relative[0]} after changing folder (cd), so which "
            "file that is cannot be checked; set working_dir instead, or give the program's "
            "absolute path."
        )
    permitted = {program_name(a) for a in allowed}
    for program in found.found:
        name = program_name(program.word)
        if permitted and not program.names & permitted and name not in HARMLESS_BUILTINS:
            raise RefusedCommandError(
                f"{_REFUSED}: {name} is not one of the allowed "
                f"commands ([tools.shell] allowed_commands: {', '.join(sorted(permitted))}); "
                "nothing was run."
            )
    return [program.word for program in found.found]


def _walk(command: str, found: _Programs) -> _Programs:
    if "`" in command or "$(" in command:
        raise RefusedCommandError(
            "run_shell_command does not run command substitution (backticks or $(...)); "
            "run the inner command on its own first and use its output."
        )
    _programs(command, found, depth=0)
    return found


def program_name(program: str) -> str:
    """The name a list entry or a command's program is compared by: no folder, any case."""
    return os.path.basename(program.rstrip("/")).casefold() or program


def _tokens(command: str) -> list[str]:
    # A backslash-newline joins two lines in sh; shlex would keep the newline in the word.
    lexer = shlex.shlex(command.replace("\\\n", ""), posix=True, punctuation_chars=_OPERATOR_CHARS)
    lexer.whitespace = " \t\r"  # a newline ends a command: an operator, not a space
    lexer.whitespace_split = True
    lexer.commenters = ""  # sh starts a comment only at a word's start; seeing more is safe
    try:
        return list(lexer)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise RefusedCommandError(
            f"run_shell_command cannot read the command ({str(exc).lower()}); "
            "check its quotes and backslashes."
        ) from None


def commands_only(command: str) -> str:
    """``command`` without its comments and the lines of its here-documents (``<<EOF``
    ... ``EOF``): they are neither programs nor arguments. Where sh might read ``#`` or
    ``<<`` otherwise (arithmetic, ``${...}``, a backslash-newline) or a delimiter is
    unclear, ``command`` comes back whole, which can only refuse more."""
    if ("<<" not in command and "#" not in command) or "\\\n" in command:
        return command
    kept: list[str] = []
    pending: list[tuple[str, bool]] = []  # delimiters whose bodies start at the next line
    quote = ""
    word_start = True
    index = 0
    while index < len(command):
        char = command[index]
        if quote:
            if char == "\\" and quote == '"':
                kept.append(command[index : index + 2])
                index += 2
                continue
            quote = "" if char == quote else quote
        elif char == "\\":
            kept.append(command[index : index + 2])
            index += 2
            word_start = False
            continue
        elif char in "'\"":
            quote = char
        elif command.startswith(("((", "$[", "${"), index):
            return command
        elif char == "#" and word_start:  # a comment runs to the end of the line
            end = command.find("\n", index)
            index = len(command) if end < 0 else end
            continue
        elif command.startswith("<<", index) and not command.startswith("<<<", index):
            heredoc = _heredoc(command, index + 2)
            if heredoc is None:
                return command
            delimiter, strip_tabs, end = heredoc
            pending.append((delimiter, strip_tabs))
            kept.append(command[index:end])
            index = end
            word_start = True
            continue
        elif char == "\n" and pending:
            kept.append(char)
            index += 1
            for delimiter, strip_tabs in pending:
                index = _body_end(command, index, delimiter, strip_tabs)
            pending = []
            word_start = True
            continue
        kept.append(char)
        word_start = not quote and char in " \t\n;&|()<>"
        index += 1
    return "".join(kept)


def _heredoc(command: str, index: int) -> tuple[str, bool, int] | None:
    """The delimiter of the here-document whose ``<<`` ends before ``index``, whether its
    lines lose their leading tabs (``<<-``), and where its delimiter word ends."""
    strip_tabs = command.startswith("-", index)
    index += strip_tabs
    while index < len(command) and command[index] in " \t":
        index += 1
    delimiter: list[str] = []
    quote = ""
    while index < len(command):
        char = command[index]
        if quote:
            if char == quote:
                quote = ""
            else:
                delimiter.append(char)
        elif char in "'\"":
            quote = char
        elif char == "\\" and index + 1 < len(command):
            index += 1
            delimiter.append(command[index])
        elif char in " \t" or char in _OPERATOR_CHARS:
            break
        else:
            delimiter.append(char)
        index += 1
    if quote or not delimiter or "\n" in delimiter:
        return None
    return "".join(delimiter), strip_tabs, index


def _body_end(command: str, index: int, delimiter: str, strip_tabs: bool) -> int:
    """Where the text after a here-document's body and delimiter line starts."""
    while index < len(command):
        end = command.find("\n", index)
        end = len(command) if end < 0 else end
        line = command[index:end]
        index = end + 1
        if (line.lstrip("\t") if strip_tabs else line) == delimiter:
            break
    return min(index, len(command))


def _is_operator(token: str) -> bool:
    return bool(token) and all(char in _OPERATOR_CHARS for char in token)


def _is_redirection(token: str) -> bool:
    if set(token) & set(";|()\n"):
        return False
    return token[0] in "<>" or token in ("&>", "&>>")


def _programs(command: str, found: _Programs, depth: int) -> None:
    """Add the programs of one command line to ``found``."""
    if depth > _MAX_DEPTH:
        raise RefusedCommandError(f"{_REFUSED}: it nests shells too deeply to be checked.")
    tokens = _tokens(commands_only(command))
    for position, token in enumerate(tokens[:-1]):  # "name() { ...": a function, not a program
        if tokens[position + 1] in ("()", "(") and not _is_operator(token):
            found.functions.add(token)
    for words in _simple_commands(tokens):
        _simple(words, found, depth)


def _simple_commands(tokens: Sequence[str]) -> list[list[str]]:
    """Split tokens at the operators into simple commands, redirections left out."""
    commands: list[list[str]] = [[]]
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
            if not _is_operator(token):
                continue
        if _is_operator(token):
            if _is_redirection(token):
                current = commands[-1]
                # "2>&1": the number before a redirection is a file descriptor.
                if current and _FD_NUMBER.match(current[-1]):
                    current.pop()
                skip_next = True
            else:
                commands.append([])
            continue
        commands[-1].append(token)
    return [words for words in commands if words]


def _simple(words: list[str], found: _Programs, depth: int) -> None:
    """Find the program of one simple command (and those it runs) in ``words``."""
    index = 0
    while index < len(words):
        word = words[index]
        if _NAME_ASSIGNMENT.match(word):
            _refuse_path_change(word)
            index += 1
        elif word in _KEYWORDS:
            index += 1
        elif word == "function":  # "function name { ...": the name is no program
            if index + 1 < len(words):
                found.functions.add(words[index + 1])
            index += 2
        elif word in ("for", "select"):  # "for x in a b; do" or "for x do": the body is
            index = words.index("do", index) if "do" in words[index:] else len(words)
        elif word == "[[":
            index = words.index("]]", index) + 1 if "]]" in words[index:] else len(words)
        elif word == "case":  # "case x in PATTERN)": patterns up to the ")" that ends them
            return
        else:
            followed = found.add(word)
            _inner(program_name(word), followed, words[index + 1 :], found, depth)
            return


def _refuse_path_change(word: str) -> None:
    if _PATH_ASSIGNMENT.match(word):
        raise RefusedCommandError(
            f"{_REFUSED}: it changes PATH, so which programs its names run cannot be "
            "checked; name the program by its path instead."
        )


def _check_name(word: str) -> None:
    """Refuse a program name that sh would build at run time."""
    if "$" in word:
        raise RefusedCommandError(
            f"{_REFUSED}: the program {word!r} is built from a "
            "variable, so it cannot be checked; name the program itself."
        )
    if word != "[" and set(word) & set("*?[]{}"):
        raise RefusedCommandError(
            f"{_REFUSED}: the program {word!r} is a pattern, "
            "so it cannot be checked; name the program itself."
        )


def _inner(name: str, followed: str, args: list[str], found: _Programs, depth: int) -> None:
    """The programs a program runs in turn: a wrapper's, a shell's -c string, find -exec;
    ``name`` is the name it was called by, ``followed`` the one its file is known by."""
    if followed in _SHELLS:
        _shell(followed, args, found, depth)
    elif name in ("eval", "watch") or followed == "watch":
        start = 0
        while name != "eval" and start < len(args) and args[start].startswith("-"):
            start += 2 if args[start] in ("-n", "--interval") else 1
        _programs(" ".join(args[start:]), found, depth + 1)
    elif name in ("source", "."):
        raise RefusedCommandError(
            f"{_REFUSED}: it reads commands from a file "
            f"({name}), which cannot be checked; run them directly."
        )
    elif name == "trap":
        handlers = [arg for arg in args if arg != "--"]
        if handlers and not handlers[0].startswith("-"):
            _programs(handlers[0], found, depth + 1)
    elif name == "alias":
        for definition in args:
            _programs(definition.partition("=")[2], found, depth + 1)
    elif name in _SETTERS:
        for arg in args:
            _refuse_path_change(arg)
    elif name == "hash" and any(arg.startswith("-") and "p" in arg for arg in args):
        _refuse_path_change("PATH=")  # hash -p binds a name to any file
    elif followed == "find":
        for position, arg in enumerate(args):
            if arg in ("-exec", "-execdir", "-ok", "-okdir"):
                found.moved |= arg in ("-execdir", "-okdir")
                _simple(args[position + 1 :], found, depth + 1)
    elif followed in _WRAPPERS:
        _wrapped(_WRAPPERS[followed], args, found, depth)
    elif name not in _BUILTINS and name not in _PASSIVE:
        for arg in args:
            if not arg.startswith("-"):
                found.check_argument(name, arg)


def _wrapped(wrapper: Wrapper, args: list[str], found: _Programs, depth: int) -> None:
    """The program a wrapper runs, after its options, and any command line an option gives."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            index += 1
            break
        if not arg.startswith("-") or (arg == "-" and not wrapper.lone_dash):
            break
        option, _, attached = arg.partition("=")
        if option in wrapper.changes_folder or (option[:2] in wrapper.changes_folder):
            found.moved = True
        if option in wrapper.program_name:
            found.name_only(attached or (args[index + 1] if index + 1 < len(args) else ""))
        text, used = _command_string(wrapper, arg, args[index + 1 : index + 2])
        if text is not None:
            _programs(text, found, depth + 1)
            index += used
        elif arg in wrapper.takes_value:
            index += 2
        else:
            index += 1
    rest = args[index + wrapper.positional :]
    if rest and wrapper.runs_words:
        _simple(rest, found, depth + 1)


def _command_string(wrapper: Wrapper, arg: str, following: list[str]) -> tuple[str | None, int]:
    """The command line an option such as ``env -S`` gives (attached or the next word), and
    how many words it took; ``(None, 0)`` for any other option."""
    for option in wrapper.command_string:
        if option.startswith("--"):
            if arg == option:
                return (following[0] if following else ""), 2
            if arg.startswith(option + "="):
                return arg[len(option) + 1 :], 1
        elif not arg.startswith("--") and option[1] in arg[1:]:  # in a cluster: -iS'...'
            attached = arg[arg.index(option[1], 1) + 1 :]
            if attached:
                return attached, 1
            return (following[0] if following else ""), 2
    return None, 0


def _shell(name: str, args: list[str], found: _Programs, depth: int) -> None:
    """A shell runs its -c string; any other way it reads commands nobody can check."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            index += 2
            continue
        if len(arg) > 1 and arg[0] in "-+" and not arg.startswith("--") and "c" in arg[1:]:
            strings = [a for a in args[index + 1 :] if not a.startswith(("-", "+"))]
            if strings:
                _programs(strings[0], found, depth + 1)
                return
            break
        if arg.startswith("--") and arg != "--":
            index += 1
            continue
        if arg.startswith(("-", "+")) and arg != "--":
            index += 1
            continue
        break
    raise RefusedCommandError(
        f"{_REFUSED}: {name} would read its commands from a file "
        f"or its input, which cannot be checked; give them as {name} -c '...' or run them "
        "directly."
    )
