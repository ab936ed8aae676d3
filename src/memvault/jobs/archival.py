"""The archival job: retire what memory no longer uses, and bring it back on request.

A memory is archived when all of these hold: it was created at least
``older_than_days`` ago, its importance is at most ``max_importance``, it is
not pinned (tagged or categorised as one of ``context.pinned_tags``),
nothing links to it (no ``[[...#^id]]`` anywhere in the vault, read from the
freshly synced index) and no search returned it within
``recall_window_days`` (memory/recalls.py; until that log covers a whole
window, no memory is archived). Archiving adds
``[archived:: YYYY-MM-DD]`` to its line: it stays in the vault, and default
searches, listings and the agent's context leave it out.

A task closed (done or cancelled) at least ``tasks_done_days`` ago moves from
``Tasks/completed/`` to ``tasks_folder`` with ``archived: YYYY-MM-DD`` in its
frontmatter; links to it that would stop resolving follow it, as in Obsidian.

Every file is kept before it changes, so ``memvault jobs undo RUN_ID``
restores a run; ``memvault unarchive`` brings back single items
(:class:`Archive`). No model is used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from memvault.config import ArchivalJob
from memvault.errors import InvalidInputError, MemvaultError, NotFoundError
from memvault.index.graph import backlinks
from memvault.jobs.mentions import MARKERS as MENTIONS
from memvault.vault.collection import Collection, stem
from memvault.vault.entities import ENTITY_FOLDERS
from memvault.vault.memories import Memory
from memvault.vault.note import Note
from memvault.vault.paths import normalize_relpath
from memvault.vault.tasks import ACTIVE_DIR, COMPLETED_DIR, Task
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.jobs.engine import JobContext
    from memvault.runtime import Runtime

DESCRIPTION = "Archive old, unimportant, unused memories and move long-finished tasks away."

ARCHIVED = "archived"  # the inline field of a memory, and the frontmatter key of a task


@dataclass
class Retired:
    """What one archival pass (or one unarchive) changed."""

    memories: list[str]
    tasks: list[dict[str, str]]  # {"title", "from", "to"}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"memories": list(self.memories), "tasks": [dict(t) for t in self.tasks]}


def archive_folder(folder: str) -> str:
    """The configured task archive folder, checked: inside the vault, not a task folder."""
    clean = normalize_relpath(folder)
    if clean in (ACTIVE_DIR, COMPLETED_DIR):
        raise InvalidInputError(
            f"jobs.archival.tasks_folder cannot be {clean}; choose a folder of its own, "
            "such as Tasks/Archive."
        )
    return clean


class Archive:
    """Archives and unarchives memories and tasks of one vault.

    ``keep`` is called with each vault path before it changes (a job run's
    ``will_change``), so the change can be undone.
    """

    def __init__(
        self, runtime: Runtime, tasks_folder: str, keep: Callable[[str], object] | None = None
    ) -> None:
        self.runtime = runtime
        self.folder = archive_folder(tasks_folder)
        self._keep = keep

    def _before(self, path: str) -> None:
        if self._keep is not None:
            self._keep(path)

    # -- choosing --------------------------------------------------------------

    def linked_ids(self) -> set[str]:
        """Block ids some link in the vault points at (``[[Note#^id]]``), case-folded.

        Not the links of an entity's Mentions block: the knowledge_graph job lists
        there whatever names the entity, which says nothing about keeping it.
        """
        index = self.runtime.index
        index.sync()
        with index.lock:
            rows = index.conn.execute(
                "SELECT DISTINCT n.path, l.line, l.subpath FROM links l"
                " JOIN notes n ON n.id = l.note_id WHERE l.subpath LIKE '^%'"
            ).fetchall()
        listed = self._mention_lines({str(r[0]) for r in rows})
        return {
            str(r[2])[1:].strip().casefold()
            for r in rows
            if not (
                str(r[0]) in listed and listed[str(r[0])][0] <= int(r[1]) <= listed[str(r[0])][1]
            )
        }

    def _mention_lines(self, paths: set[str]) -> dict[str, tuple[int, int]]:
        """The first and last line of the Mentions block of each entity note among ``paths``."""
        out: dict[str, tuple[int, int]] = {}
        for path in paths:
            if path.split("/", 1)[0] not in ENTITY_FOLDERS:
                continue
            try:
                text = self.runtime.vault.read_text(path)
                span = MENTIONS.span(text, path)
            except MemvaultError:  # gone, not text, or a broken block: its links count
                continue
            if span is not None:
                out[path] = (text.count("\n", 0, span[0]) + 1, text.count("\n", 0, span[1]) + 1)
        return out

    def stale_memories(self, settings: ArchivalJob, now: datetime) -> list[Memory]:
        """The memories the settings say to archive now."""
        created_before = now - timedelta(days=settings.older_than_days)
        pinned = {t.casefold() for t in self.runtime.settings.context.pinned_tags}
        linked = self.linked_ids()
        recalled = self.runtime.recalls.recalled_since(
            now - timedelta(days=settings.recall_window_days)
        )
        return [
            m
            for m in self.runtime.memories.all(include_archived=False)
            if m.created is not None
            and m.created <= created_before
            and m.importance <= settings.max_importance
            and not pinned & ({t.casefold() for t in m.tags} | {m.category.casefold()})
            and m.id.casefold() not in linked
            and m.id not in recalled
        ]

    def stale_tasks(self, done_days: int, today: date) -> list[Task]:
        """Closed tasks in ``Tasks/completed/`` closed at least ``done_days`` days ago."""
        cutoff = today - timedelta(days=done_days)
        return [
            t
            for t in self.runtime.tasks.list(status=["done", "cancelled"])
            if t.path.startswith(COMPLETED_DIR + "/")
            and t.completed is not None
            and t.completed <= cutoff
        ]

    # -- changing --------------------------------------------------------------

    def archive_memory(self, memory: Memory, day: date) -> str:
        """Mark one memory archived on ``day``; returns its id (a new one if it had none)."""
        self._before(memory.path)
        return self.runtime.memories.update_fields(memory.id, **{ARCHIVED: day.isoformat()}).id

    def archive_task(self, task: Task, day: date) -> dict[str, str]:
        """Date the task archived and move it to the archive folder."""
        return self._move_task(task.path, self.folder, day)

    def unarchive_memory(self, memory_id: str) -> Memory:
        """Clear a memory's archived field; InvalidInputError if it is not archived."""
        memory = self.runtime.memories.get(memory_id)
        if not memory.archived:
            raise InvalidInputError(f"Memory {memory.id} is not archived.")
        self._before(memory.path)
        return self.runtime.memories.update_fields(memory.id, **{ARCHIVED: None})

    def archived_tasks(self) -> Collection:
        """The archived task notes."""
        return Collection(self.runtime.vault, (self.folder,), "archived task")

    def archived_task(self, name: str) -> str:
        """The path of the archived task ``name`` names."""
        try:
            return self.archived_tasks().find(name)
        except NotFoundError:
            raise NotFoundError(
                f"No archived task named {name!r} in {self.folder}.",
                hint="List them with `memvault unarchive --list`.",
            ) from None

    def unarchive_task(self, name: str) -> dict[str, str]:
        """Move an archived task back to ``Tasks/completed/``."""
        return self._move_task(self.archived_task(name), COMPLETED_DIR, None)

    def unarchive_since(self, day: date) -> Retired:
        """Bring back every memory and task archived on or after ``day``."""
        memories = [
            self.unarchive_memory(m.id).id
            for m in self.runtime.memories.all()
            if m.archived and _day(m.fields.get(ARCHIVED)) >= day
        ]
        tasks = [
            self._move_task(path, COMPLETED_DIR, None)
            for path, note in self.archived_tasks().each()
            if _day(note.get(ARCHIVED)) >= day
        ]
        return Retired(memories, tasks)

    def listing(self) -> Retired:
        """What is archived now: memory ids and task notes."""
        memories = [m.id for m in self.runtime.memories.all() if m.archived]
        tasks = [
            {"title": stem(path), "from": path, "to": path, ARCHIVED: str(note.get(ARCHIVED) or "")}
            for path, note in self.archived_tasks().each()
        ]
        return Retired(memories, tasks)

    def _move_task(self, path: str, folder: str, archived: date | None) -> dict[str, str]:
        """Set (or clear) the task's archived date and move it into ``folder``.

        The files linking to it are kept first too: a link that would stop
        resolving is rewritten by the move.
        """
        vault = self.runtime.vault
        name = path.rsplit("/", 1)[-1]
        target = f"{folder}/{name}"
        if vault.exists(target):
            target = Collection(vault, (folder,), "task").new_path(stem(path), folder)
        self._before(path)
        self._before(target)
        for ref in backlinks(self.runtime.index, path):
            self._before(ref.source)

        def mark(note: Note) -> None:
            if archived is None:
                note.delete(ARCHIVED)
            else:
                note.set(ARCHIVED, archived)

        self.runtime.tasks.notes.update(path, mark)
        moved = self.runtime.notes.move(path, target)
        return {"title": stem(moved), "from": path, "to": moved}


def _day(value: Any) -> date:
    """An archived date as written (date or text); date.min when unreadable."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value or "").strip()[:10])
    except ValueError:
        return date.min


def run(ctx: JobContext) -> str:
    """Archive what the settings say is stale; every file is kept first for undo."""
    settings: ArchivalJob = ctx.settings or ArchivalJob()
    runtime = ctx.services
    now = ctx.clock.now()
    today = now.date()
    archive = Archive(runtime, settings.tasks_folder, keep=ctx.will_change)
    window = timedelta(days=settings.recall_window_days)
    since = runtime.recalls.begin(now)
    if since > now - window:
        memories: list[str] = []
        ctx.record(
            f"memories wait: recalls are recorded since {since.astimezone(ctx.clock.tz):%Y-%m-%d}, "
            f"not yet for the {settings.recall_window_days} days the recall window needs"
        )
    else:
        memories = [archive.archive_memory(m, today) for m in archive.stale_memories(settings, now)]
    tasks = [
        archive.archive_task(t, today) for t in archive.stale_tasks(settings.tasks_done_days, today)
    ]
    ctx.metadata["archived"] = Retired(memories, tasks).to_dict()
    for memory_id in memories:
        ctx.record(f"archived memory {memory_id}")
    for task in tasks:
        ctx.record(f"moved task {task['title']!r} to {task['to']}")
    if not memories and not tasks:
        return "nothing to archive"
    return (
        f"archived {counted(len(memories), 'memory')} and moved "
        f"{counted(len(tasks), 'task')} to {archive.folder}"
    )
