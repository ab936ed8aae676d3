"""Command-line text memvault cannot keep, refused before any command runs.

A terminal hands Python bytes. One that is not UTF-8 (a Latin-1 "é", a stray
byte from a paste) reaches ``sys.argv`` as a lone surrogate (Python's
surrogateescape); stored, it would break the vault's index, and sent to a
daemon, its JSON. So every text argument is checked (:mod:`memvault.text`)
before the command runs, the same in direct and in client mode, and the
message names the option or argument. Paths are left alone: a file name may
be any bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typer.core import TyperGroup, TyperOption
from typer.exceptions import TyperException

from memvault.text import bad_text, flaw, strings


def refuse_bad_text(ctx: Any, args: Sequence[str]) -> None:
    """Raise InvalidInputError when a text argument in ``args`` (what follows the root
    command's own options) cannot be kept; a path may hold any bytes."""
    if not any(flaw(arg, from_bytes=True) for arg in args):
        return  # the usual case costs one scan
    culprit = _culprit(ctx, list(args))
    if culprit is not None:
        raise bad_text(*culprit)


def _culprit(ctx: Any, args: list[str]) -> tuple[str, str] | None:
    """The text parameter holding a bad character, and what the character is.

    The command line is parsed again without effects (resilient parsing) to
    learn which parameter each value went to; None when no text parameter
    took the bad value (a path did, or the parser rejects it itself).
    """
    command, context = ctx.command, ctx
    try:
        while isinstance(command, TyperGroup) and args:
            name, sub, args = command.resolve_command(context, args)
            if sub is None:
                return None
            context = sub.make_context(name, list(args), parent=context, resilient_parsing=True)
            command = sub
            found = _in_params(command, context)
            if found is not None:
                return found
            args = [*context._protected_args, *context.args]
    except TyperException:
        return None  # an unknown command or option: the parser says so itself
    return None


def _in_params(command: Any, context: Any) -> tuple[str, str] | None:
    for param in command.get_params(context):
        for text in strings(context.params.get(param.name)) if param.name else ():
            problem = flaw(text, from_bytes=True)
            if problem is not None:
                return _label(param), problem
    return None


def _label(param: Any) -> str:
    if isinstance(param, TyperOption):
        return f"The option {max(param.opts, key=len)}"
    return f"The argument {param.human_readable_name.upper()}"
