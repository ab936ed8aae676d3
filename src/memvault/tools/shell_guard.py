"""Which programs a shell command would run, checked against the owner's lists.

The blocked and allowed command lists of ``[tools.shell]`` are checked on
the parsed command, never on its text: ``shlex`` (POSIX rules, with ``;``,
``&&``, ``||``, ``|``, ``&``, ``(``, ``)`` and newlines as operators) splits
it into simple commands, and the program of every one is found as ``sh``
would find it: past ``VAR=x`` assignments, redirections, keywords (``if``,
``!``, ``{``, ``time``) and wrappers that run another program (``env``,
``nice``, ``timeout 5``, ``xargs``, ``busybox``, ``find -exec``), and inside
the command strings of ``sh -c``, ``eval``, ``trap``, ``watch``. A name is
compared without its folder and quotes (``/usr/bin/sudo``, ``"su"do`` and
``su\\do`` are all ``sudo``) and regardless of case.

What cannot be checked is refused rather than guessed: command
substitution (backticks, ``$(``), a program name made from a variable or a
pattern (``$X``, ``su?o``), a shell reading its commands from a file or its
input. Parsing errs on the side of seeing a program where ``sh`` sees an
argument (a quoted ``";"`` still splits), which can only refuse more.

The lists guard against a slip, not a determined adversary: a script or an
interpreter (``python -c``) runs what it likes. The owner's approval of
every call (tier 3) is the real gate.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memvault.errors import InvalidInputError

_OPERATOR_CHARS = "();<>|&\n"
_NAME_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_FD_NUMBER = re.compile(r"^[0-9]+$")
_MAX_DEPTH = 8

# Words that are shell syntax, not programs: the command position stays open after them.
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}"}
_KEYWORDS |= {"esac", "time", "coproc", "]]"}
# Shells: their -c string is a command line; without one they read a file or their input.
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "yash", "fish", "csh", "tcsh"}
# Built-ins that run nothing else: allowed even when allowed_commands lists programs.
HARMLESS_BUILTINS = {
    "cd", "pwd", "true", "false", ":", "echo", "printf", "test", "[", "exit", "export",
    "unset", "shift", "read", "wait", "set", "local", "return",
}  # fmt: skip


@dataclass(frozen=True)
class Wrapper:
    """A program that runs the program named after its options (and ``positional`` words)."""

    takes_value: frozenset[str] = frozenset()  # options whose value is the next word
    positional: int = 0  # words between the options and the program (timeout's duration)
    command_string: frozenset[str] = frozenset()  # options whose value is a command line


def _wrapper(values: str = "", positional: int = 0, strings: str = "") -> Wrapper:
    return Wrapper(frozenset(values.split()), positional, frozenset(strings.split()))


_WRAPPERS = {
    "env": _wrapper("-u --unset -C --chdir", strings="-S --split-string"),
    "command": _wrapper(),
    "builtin": _wrapper(),
    "exec": _wrapper("-a"),
    "nohup": _wrapper(),
    "setsid": _wrapper(),
    "nice": _wrapper("-n --adjustment"),
    "ionice": _wrapper("-c -n --class --classdata"),
    "stdbuf": _wrapper("-i -o -e --input --output --error"),
    "timeout": _wrapper("-s --signal -k --kill-after", positional=1),
    "xargs": _wrapper(
        "-a -d -E -I -L -n -P -s --arg-file --delimiter --max-lines --max-args --max-procs "
        "--max-chars --process-slot-var"
    ),
    "flock": _wrapper("-w -E --timeout --conflict-exit-code", positional=1, strings="-c"),
    "chrt": _wrapper(positional=1),
    "taskset": _wrapper(positional=1),
    "busybox": _wrapper(),
    "toybox": _wrapper(),
    "doas": _wrapper("-u -C"),
    "sudo": _wrapper("-u -g -h -p -C -D -r -t -U"),
}


class RefusedCommandError(InvalidInputError):
    """A shell command run_shell_command will not run, with the reason in one sentence."""


class _Programs:
    """The programs found so far; each is checked against the blocked list as it is found,
    so the refusal names the first blocked one, before anything else about the command."""

    def __init__(self, blocked: Iterable[str] = ()) -> None:
        self.blocked = {program_name(b) for b in blocked}
        self.found: list[str] = []

    def add(self, word: str) -> None:
        _check_name(word)
        name = program_name(word)
        if name in self.blocked:
            raise RefusedCommandError(
                f"run_shell_command refused the command: {name} is a blocked command "
                "([tools.shell] blocked_commands); nothing was run."
            )
        self.found.append(word)


def check_command(command: str, blocked: Iterable[str], allowed: Iterable[str]) -> list[str]:
    """The programs of ``command``, after checking every one against the lists.

    ``blocked`` is checked first; a non-empty ``allowed`` then names the only programs
    that may run (shell built-ins that run nothing are always allowed).
    """
    programs = _walk(command, _Programs(blocked)).found
    permitted = {program_name(a) for a in allowed}
    for name in map(program_name, programs):
        if permitted and name not in permitted and name not in HARMLESS_BUILTINS:
            raise RefusedCommandError(
                f"run_shell_command refused the command: {name} is not one of the allowed "
                f"commands ([tools.shell] allowed_commands: {', '.join(sorted(permitted))}); "
                "nothing was run."
            )
    return programs


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


def _is_operator(token: str) -> bool:
    return bool(token) and all(char in _OPERATOR_CHARS for char in token)


def _is_redirection(token: str) -> bool:
    if set(token) & set(";|()\n"):
        return False
    return token[0] in "<>" or token in ("&>", "&>>")


def _programs(command: str, found: _Programs, depth: int) -> None:
    """Add the programs of one command line to ``found``."""
    if depth > _MAX_DEPTH:
        raise RefusedCommandError(
            "run_shell_command refused the command: it nests shells too deeply to be checked."
        )
    for words in _simple_commands(_tokens(command)):
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
        if word in _KEYWORDS or _NAME_ASSIGNMENT.match(word):
            index += 1
        elif word == "function":  # "function name { ...": the name is no program
            index += 2
        elif word in ("for", "select"):  # "for x in a b; do" or "for x do": the body is
            index = words.index("do", index) if "do" in words[index:] else len(words)
        elif word == "[[":
            index = words.index("]]", index) + 1 if "]]" in words[index:] else len(words)
        elif word == "case":  # "case x in PATTERN)": patterns up to the ")" that ends them
            return
        else:
            found.add(word)
            _inner(program_name(word), words[index + 1 :], found, depth)
            return


def _check_name(word: str) -> None:
    """Refuse a program name that sh would build at run time."""
    if "$" in word:
        raise RefusedCommandError(
            f"run_shell_command refused the command: the program {word!r} is built from a "
            "variable, so it cannot be checked; name the program itself."
        )
    if word != "[" and set(word) & set("*?[]{}"):
        raise RefusedCommandError(
            f"run_shell_command refused the command: the program {word!r} is a pattern, "
            "so it cannot be checked; name the program itself."
        )


def _inner(name: str, args: list[str], found: _Programs, depth: int) -> None:
    """The programs a program runs in turn: a wrapper's, a shell's -c string, find -exec."""
    if name in _SHELLS:
        _shell(name, args, found, depth)
    elif name in ("eval", "watch"):
        start = 0
        while name == "watch" and start < len(args) and args[start].startswith("-"):
            start += 2 if args[start] in ("-n", "--interval") else 1
        _programs(" ".join(args[start:]), found, depth + 1)
    elif name in ("source", "."):
        raise RefusedCommandError(
            "run_shell_command refused the command: it reads commands from a file "
            f"({name}), which cannot be checked; run them directly."
        )
    elif name == "trap":
        handlers = [arg for arg in args if arg != "--"]
        if handlers and not handlers[0].startswith("-"):
            _programs(handlers[0], found, depth + 1)
    elif name == "alias":
        for definition in args:
            _programs(definition.partition("=")[2], found, depth + 1)
    elif name == "find":
        for position, arg in enumerate(args):
            if arg in ("-exec", "-execdir", "-ok", "-okdir"):
                _simple(args[position + 1 :], found, depth + 1)
    elif name in _WRAPPERS:
        _wrapped(_WRAPPERS[name], args, found, depth)


def _wrapped(wrapper: Wrapper, args: list[str], found: _Programs, depth: int) -> None:
    """The program a wrapper runs, after its options, and any command line an option gives."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            index += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        text, used = _command_string(wrapper, arg, args[index + 1 : index + 2])
        if text is not None:
            _programs(text, found, depth + 1)
            index += used
        elif arg in wrapper.takes_value:
            index += 2
        else:
            index += 1
    rest = args[index + wrapper.positional :]
    if rest:
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
        f"run_shell_command refused the command: {name} would read its commands from a file "
        f"or its input, which cannot be checked; give them as {name} -c '...' or run them "
        "directly."
    )
