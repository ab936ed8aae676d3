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

This module walks the command and refuses; what it reads with lives beside it:
the shell's syntax in :mod:`~memvault.tools.shell_words`, the tables of known
programs in :mod:`~memvault.tools.shell_programs`, and the comparing of program
files in :mod:`~memvault.tools.program_files`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Iterable
from dataclasses import dataclass

from memvault.errors import InvalidInputError
from memvault.tools.program_files import ProgramFile, known_programs, program_file
from memvault.tools.shell_programs import (
    BUILTINS,
    FOLDER_CHANGES,
    FOLLOWED,
    HARMLESS_BUILTINS,
    KEYWORDS,
    OPAQUE,
    PASSIVE,
    SETTERS,
    SHELLS,
    SYSTEM_FOLDERS,
    WRAPPERS,
    Wrapper,
    program_name,
)
from memvault.tools.shell_words import (
    OPERATOR_CHARS,
    commands_only,
    is_operator,
    simple_commands,
)

# The guard's whole surface, imported from here by the tools.
__all__ = [
    "HARMLESS_BUILTINS",
    "RefusedCommandError",
    "check_command",
    "commands_only",
    "program_name",
]

_NAME_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_PATH_ASSIGNMENT = re.compile(r"^PATH\+?=")
_MAX_DEPTH = 8
_REFUSED = "run_shell_command refused the command"


class RefusedCommandError(InvalidInputError):
    """A shell command run_shell_command will not run, with the reason in one sentence."""


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
        folders = tuple(dict.fromkeys([*self.path.split(os.pathsep), *SYSTEM_FOLDERS]))
        listed = frozenset([*blocked, *allowed, *FOLLOWED, *OPAQUE])
        self.known = known_programs(listed, folders)
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
        if name in FOLDER_CHANGES:
            self.moved = True
        file = self._file(word)
        names = {name} if file is None else self.known.names(file, name)
        for other in sorted(names - {name}):
            self._refuse_blocked(other, word)
        if names & OPAQUE:
            opaque = sorted(names & OPAQUE)[0]
            raise RefusedCommandError(
                f"{_REFUSED}: {opaque} runs the command it is given in a way the guard does "
                "not follow (another root, namespace or user, a service, a later time or a "
                "syntax of its own); run the command directly."
            )
        self.found.append(_Program(word, names))
        followed = sorted(names & FOLLOWED)
        return name if name in FOLLOWED or not followed else followed[0]

    def check_argument(self, program: str, word: str) -> None:
        """Refuse a blocked program given to ``program``, which may run it: by its name, or
        by its file when ``word`` is a path (``s/a/rm/`` names no program)."""
        name = program_name(word)
        names = {name}
        if "/" in word:
            file = program_file(self._place(word))
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

    def _file(self, word: str) -> ProgramFile | None:
        """The file ``word`` runs, as sh would find it; None for a built-in, a function
        or a name on no PATH folder."""
        if "/" not in word:
            if word in BUILTINS or word in self.functions:
                return None
            found = shutil.which(word, path=self.path)
            return program_file(found) if found else None
        place = self._place(word)
        file = program_file(place)
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


def _tokens(command: str) -> list[str]:
    # A backslash-newline joins two lines in sh; shlex would keep the newline in the word.
    lexer = shlex.shlex(command.replace("\\\n", ""), posix=True, punctuation_chars=OPERATOR_CHARS)
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


def _programs(command: str, found: _Programs, depth: int) -> None:
    """Add the programs of one command line to ``found``."""
    if depth > _MAX_DEPTH:
        raise RefusedCommandError(f"{_REFUSED}: it nests shells too deeply to be checked.")
    tokens = _tokens(commands_only(command))
    for position, token in enumerate(tokens[:-1]):  # "name() { ...": a function, not a program
        if tokens[position + 1] in ("()", "(") and not is_operator(token):
            found.functions.add(token)
    for words in simple_commands(tokens):
        _simple(words, found, depth)


def _simple(words: list[str], found: _Programs, depth: int) -> None:
    """Find the program of one simple command (and those it runs) in ``words``."""
    index = 0
    while index < len(words):
        word = words[index]
        if _NAME_ASSIGNMENT.match(word):
            _refuse_path_change(word)
            index += 1
        elif word in KEYWORDS:
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
    if followed in SHELLS:
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
    elif name in SETTERS:
        for arg in args:
            _refuse_path_change(arg)
    elif name == "hash" and any(arg.startswith("-") and "p" in arg for arg in args):
        _refuse_path_change("PATH=")  # hash -p binds a name to any file
    elif followed == "find":
        for position, arg in enumerate(args):
            if arg in ("-exec", "-execdir", "-ok", "-okdir"):
                found.moved |= arg in ("-execdir", "-okdir")
                _simple(args[position + 1 :], found, depth + 1)
    elif followed in WRAPPERS:
        _wrapped(WRAPPERS[followed], args, found, depth)
    elif name not in BUILTINS and name not in PASSIVE:
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
