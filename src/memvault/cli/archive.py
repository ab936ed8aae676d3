"""``memvault unarchive``: bring back what the archival job retired.

Memories get their ``[archived:: ...]`` field removed (default search finds
them again); tasks move from the archive folder back to ``Tasks/completed/``.
Works on the vault files directly, as the task commands do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from memvault.cli.common import JsonOption, VaultOption, emit_json, open_runtime, say
from memvault.errors import InvalidInputError
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.jobs.archival import Retired
    from memvault.runtime import Runtime


def unarchive(
    ctx: typer.Context,
    memory_ids: Annotated[
        list[str] | None,
        typer.Argument(metavar="[MEMORY_ID]...", help="Memories to bring back, e.g. m-3f9a1c2b."),
    ] = None,
    task: Annotated[
        list[str] | None,
        typer.Option("--task", help="An archived task to move back to Tasks/completed/."),
    ] = None,
    all_since: Annotated[
        str | None,
        typer.Option(
            "--all-since",
            metavar="DATE",
            help="Everything archived on or after DATE (2026-11-01, yesterday ...).",
        ),
    ] = None,
    show: Annotated[bool, typer.Option("--list", help="List what is archived.")] = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Bring archived memories and tasks back (or --list them)."""
    from memvault.clock import parse_date
    from memvault.jobs.archival import Archive, Retired

    ids, tasks = list(memory_ids or []), list(task or [])
    if not (ids or tasks or all_since or show):
        raise InvalidInputError(
            "Name what to bring back: memory ids, --task NAME or --all-since DATE "
            "(or --list what is archived)."
        )
    runtime = open_runtime(ctx, vault)
    archive = Archive(runtime, runtime.settings.jobs.archival.tasks_folder)
    if show:
        _show(archive.listing(), runtime, as_json)
        return
    since = None
    if all_since is not None:
        try:
            since = parse_date(all_since, runtime.clock.today())
        except ValueError as exc:
            raise InvalidInputError(f"Invalid --all-since date: {exc}") from None
    # Every id is checked before anything changes: one unknown id changes nothing.
    for memory_id in ids:
        if not runtime.memories.get(memory_id).archived:
            raise InvalidInputError(f"Memory {memory_id} is not archived; nothing was changed.")
    for name in tasks:
        archive.archived_task(name)
    back = Retired(
        [archive.unarchive_memory(memory_id).id for memory_id in ids],
        [archive.unarchive_task(name) for name in tasks],
    )
    if since is not None:
        more = archive.unarchive_since(since)
        back.memories.extend(more.memories)
        back.tasks.extend(more.tasks)
    if as_json:
        emit_json(back.to_dict())
        return
    if not back.memories and not back.tasks:
        say(f"Nothing was archived on or after {since}.")
        return
    for memory_id in back.memories:
        say(f"Unarchived memory {memory_id}: {runtime.memories.get(memory_id).text}")
    for moved in back.tasks:
        say(f"Moved task {moved['title']!r} back to {moved['to']}")


def _show(archived: Retired, runtime: Runtime, as_json: bool) -> None:
    memories = {m.id: m for m in runtime.memories.all() if m.archived}
    if as_json:
        emit_json(
            {
                "memories": [memories[i].to_dict() for i in archived.memories],
                "tasks": [{"title": t["title"], "path": t["to"]} for t in archived.tasks],
            }
        )
        return
    if not archived.memories and not archived.tasks:
        say("Nothing is archived.")
        return
    say(
        f"Archived: {counted(len(archived.memories), 'memory')}, "
        f"{counted(len(archived.tasks), 'task')}."
    )
    for memory_id in archived.memories:
        memory = memories[memory_id]
        say(f"  {memory_id} (since {memory.fields.get('archived', '?')}): {memory.text}")
    for moved in archived.tasks:
        say(f"  task {moved['title']!r} (since {moved['archived'] or '?'}): {moved['to']}")
