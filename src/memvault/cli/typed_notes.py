"""The command the typed-note groups share: ``memvault task | contact | project show``.

A typed note is a record the vault keeps as one Markdown note (a task, a
contact, a project), found through its service by a reference: a title, a
name, an alias or a file name. Showing one is the same command in every
group (resolve the reference, then print the record as JSON for scripts or
through the group's own renderer for people), so it is written once here and
each group registers it with its reference argument and its renderer.

The groups' other commands (add, list, update, log, note, link, done) take
options of their own kind and answer with sentences of their own, so they
stay in the group's module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import typer

from memvault.cli.common import JsonOption, Record, VaultOption, answer, open_runtime

if TYPE_CHECKING:
    from memvault.runtime import Runtime

Found = TypeVar("Found", bound=Record, covariant=True)
R = TypeVar("R", bound=Record)


class TypedNotes(Protocol[Found]):
    """A vault service that finds one typed note by a reference (or raises NotFoundError)."""

    def get(self, ref: str, /) -> Found: ...


def show_command(
    app: typer.Typer, reference: Any, summary: str, *, service: Callable[[Runtime], TypedNotes[R]]
) -> Callable[[Callable[[R], None]], Callable[[R], None]]:
    """Register ``show REFERENCE [--vault] [--json]`` on ``app`` for the renderer it decorates.

    ``reference`` is the group's ``typer.Argument`` for its records (metavar
    and help), the one its other commands use too; ``summary`` is the help
    line; ``service`` picks the group's service from the runtime. The
    decorated function prints one record for people and is returned as is.
    """

    def register(render: Callable[[R], None]) -> Callable[[R], None]:
        # The reference goes in as a default: Typer reads it as it reads an Annotated one,
        # while an annotation naming a local would not resolve (annotations are strings here).
        def show(
            ctx: typer.Context,
            ref: str = reference,
            vault: VaultOption = None,
            as_json: JsonOption = False,
        ) -> None:
            found = service(open_runtime(ctx, vault)).get(ref)
            answer(as_json, found, lambda: render(found))

        app.command("show", help=summary)(show)
        return render

    return register
