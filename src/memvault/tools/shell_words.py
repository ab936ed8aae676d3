"""A shell command read as ``sh`` reads it: simple commands, not text.

Comments and the bodies of here-documents are dropped (they are neither
programs nor arguments), and the tokens of a command line are split at its
operators into simple commands, with redirections and their targets left out.
Apart from :mod:`memvault.tools.shell_guard`, which judges the programs of
those simple commands, because this is the shell's syntax alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# The characters shell operators are made of.
OPERATOR_CHARS = "();<>|&\n"
# A file descriptor's number before a redirection ("2>&1").
FD_NUMBER = re.compile(r"^[0-9]+$")


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
        elif char in " \t" or char in OPERATOR_CHARS:
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


def is_operator(token: str) -> bool:
    """Whether ``token`` is a shell operator (``;``, ``&&``, ``|``, ``(``, a newline ...)."""
    return bool(token) and all(char in OPERATOR_CHARS for char in token)


def is_redirection(token: str) -> bool:
    """Whether the operator ``token`` redirects (``>``, ``2>``, ``&>>``, ``<<``)."""
    if set(token) & set(";|()\n"):
        return False
    return token[0] in "<>" or token in ("&>", "&>>")


def simple_commands(tokens: Sequence[str]) -> list[list[str]]:
    """Split tokens at the operators into simple commands, redirections left out."""
    commands: list[list[str]] = [[]]
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
            if not is_operator(token):
                continue
        if is_operator(token):
            if is_redirection(token):
                current = commands[-1]
                # "2>&1": the number before a redirection is a file descriptor.
                if current and FD_NUMBER.match(current[-1]):
                    current.pop()
                skip_next = True
            else:
                commands.append([])
            continue
        commands[-1].append(token)
    return [words for words in commands if words]
