"""Tasks: one note per task in ``Tasks/active/``, closed ones in ``Tasks/completed/``.

Frontmatter holds what a program filters on (status, priority, dates,
project, tags); the body holds what a person reads (Description, a Steps
checklist, Notes, Related). A task is named by its title, which is also its
file name, so ``[[Fix login bug]]`` links to it from anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any

from memvault.clock import Clock, parse_date
from memvault.errors import ConflictError, InvalidInputError, NotFoundError
from memvault.text import TextScreen
from memvault.vault.collection import Collection, stem, strip_link
from memvault.vault.markdown import (
    append_to_section,
    extract_links,
    normalize_tag,
    replace_section,
    section_range,
    section_text,
)
from memvault.vault.note import Note
from memvault.vault.notes import Notes
from memvault.vault.paths import safe_filename
from memvault.vault.store import Vault
from memvault.vocabulary import OPEN_STATUSES, PRIORITIES, STATUSES

ACTIVE_DIR = "Tasks/active"
COMPLETED_DIR = "Tasks/completed"
_STATUS_ALIASES = {
    "active": "todo",
    "open": "todo",
    "to do": "todo",
    "in progress": "in_progress",
    "in-progress": "in_progress",
    "doing": "in_progress",
    "started": "in_progress",
    "waiting": "blocked",
    "complete": "done",
    "completed": "done",
    "finished": "done",
    "canceled": "cancelled",
}
_PRIORITY_ALIASES = {"normal": "medium", "med": "medium", "critical": "urgent", "highest": "urgent"}
_LIST_ITEM = re.compile(r"^\s*[-*+]\s")
_CHECKBOX = re.compile(r"^\s*[-*+]\s+\[([ xX])\]\s*(.*)$")
_RESERVED_FIELDS = frozenset({"created", "completed"})
_FIELD_NAME = re.compile(r"^[A-Za-z_][\w-]{0,63}$")


def normalize_status(value: str) -> str:
    """A valid status from a loose spelling ("in progress", "completed" ...)."""
    raw = value.strip().lower()
    key = _STATUS_ALIASES.get(raw, raw.replace("-", "_").replace(" ", "_"))
    if key not in STATUSES:
        raise InvalidInputError(f"Unknown task status {value!r}; use one of {', '.join(STATUSES)}.")
    return key


def normalize_priority(value: str) -> str:
    """A valid priority from a loose spelling."""
    key = value.strip().lower()
    key = _PRIORITY_ALIASES.get(key, key)
    if key not in PRIORITIES:
        raise InvalidInputError(f"Unknown priority {value!r}; use one of {', '.join(PRIORITIES)}.")
    return key


@dataclass
class Step:
    """One checklist item of a task."""

    text: str
    done: bool


@dataclass
class Task:
    """A task as read from its note."""

    path: str
    title: str
    status: str
    priority: str
    created: date | None
    due: date | None
    completed: date | None
    project: str | None
    tags: list[str]
    description: str
    steps: list[Step] = field(default_factory=list)
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    due_time: time | None = None  # when the due date was written with a time of day

    @property
    def is_open(self) -> bool:
        """Whether the task still needs doing."""
        return self.status in OPEN_STATUSES

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": self.path,
            "title": self.title,
            "status": self.status,
            "priority": self.priority,
            "created": self.created.isoformat() if self.created else None,
            "due": self.due.isoformat() if self.due else None,
            "completed": self.completed.isoformat() if self.completed else None,
            "project": self.project,
            "tags": list(self.tags),
            "description": self.description,
            "steps": [{"text": s.text, "done": s.done} for s in self.steps],
            "notes": self.notes,
        }


def _as_date(value: Any) -> date | None:
    if isinstance(value, datetime):  # YAML reads 2026-11-23T14:30 as a timestamp
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str) and value.strip():
        try:
            return date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None
    return None


def _as_time(value: Any) -> time | None:
    """The time of day of a due date written with one ("2026-11-23 14:30"), else None."""
    if isinstance(value, datetime):
        return value.time().replace(tzinfo=None)
    if isinstance(value, str) and len(value.strip()) > 10:
        try:
            return datetime.fromisoformat(value.strip()).time().replace(tzinfo=None)
        except ValueError:
            return None
    return None


def _tag_list(value: Any) -> list[str]:
    if value is None:
        return []
    items = re.split(r"[,\s]+", value) if isinstance(value, str) else list(value)
    return [str(t).lstrip("#") for t in items if str(t).strip()]


def task_from_note(path: str, note: Note) -> Task:
    """Read a task from its note, tolerating hand-edited and older formats."""
    raw_status = str(note.get("status") or "todo")
    try:
        status = normalize_status(raw_status)
    except InvalidInputError:
        status = raw_status
    raw_priority = str(note.get("priority") or "medium")
    try:
        priority = normalize_priority(raw_priority)
    except InvalidInputError:
        priority = raw_priority
    project = note.get("project")
    steps = []
    for line in (section_text(note.body, "Steps") or "").split("\n"):
        m = _CHECKBOX.match(line)
        if m and m.group(2).strip():
            steps.append(Step(m.group(2).strip(), m.group(1).lower() == "x"))
    known = {"status", "priority", "created", "due", "completed", "project", "tags"}
    return Task(
        path=path,
        title=stem(path),
        status=status,
        priority=priority,
        created=_as_date(note.get("created")),
        due=_as_date(note.get("due")),
        due_time=_as_time(note.get("due")),
        completed=_as_date(note.get("completed")),
        project=strip_link(str(project)) if project else None,
        tags=_tag_list(note.get("tags")),
        description=section_text(note.body, "Description") or "",
        steps=steps,
        notes=section_text(note.body, "Notes") or "",
        extra={k: note.get(k) for k in note.field_names() if k not in known},
    )


_PRIORITY_RANK = {p: i for i, p in enumerate(reversed(PRIORITIES))}


def _exists(title: str, path: str) -> ConflictError:
    """The duplicate rule: a second task with a title an open task has is a conflict."""
    return ConflictError(
        f"A task named {title!r} already exists ({path}); "
        "change it with `memvault task update` or choose another title."
    )


class Tasks:
    """Create, update, complete and list task notes."""

    def __init__(self, vault: Vault, clock: Clock, *, screen: TextScreen | None = None) -> None:
        self.vault = vault
        self.clock = clock
        self.notes = Collection(vault, (ACTIVE_DIR, COMPLETED_DIR), "task", screen=screen)
        self.projects = Collection(vault, ("Projects",), "project", by_alias=True)

    def _screened(self, title: str) -> str:
        """A title with its secrets kept out: it names the file, which is stored text too."""
        return self.notes.screen(title) if self.notes.screen is not None and title else title

    def _date(self, value: str | date | None, name: str) -> date | None:
        if value is None or value == "":
            return None
        if isinstance(value, date):
            return value
        try:
            return parse_date(value, self.clock.today())
        except ValueError as exc:
            raise InvalidInputError(f"Invalid {name}: {exc}") from None

    def _project_name(self, project: str) -> tuple[str, str | None]:
        """The project's canonical name and note path (None when no such note exists yet)."""
        name = strip_link(project)
        if not name:
            raise InvalidInputError("The project name is empty.")
        try:
            path = self.projects.find(name)
        except (NotFoundError, InvalidInputError):
            return name, None
        return stem(path), path

    def create(
        self,
        title: str,
        description: str = "",
        *,
        priority: str = "medium",
        status: str = "todo",
        due: str | date | None = None,
        project: str | None = None,
        tags: Iterable[str] = (),
        steps: Sequence[str] = (),
    ) -> Task:
        """Create a task note in ``Tasks/active/`` from the task template.

        With a project whose note exists, the task is also listed under the
        project's Tasks section. An open task with the same title is a
        ConflictError (a closed one is not: a task may recur).
        """
        title = self._screened(" ".join(title.split()))
        if not title:
            raise InvalidInputError("A task needs a title.")
        status_value = normalize_status(status)
        if status_value not in OPEN_STATUSES:
            raise InvalidInputError("A new task must be open (todo, in_progress or blocked).")
        priority_value = normalize_priority(priority)
        due_value = self._date(due, "due date")
        tag_values = [normalize_tag(t) for t in tags]
        project_name, project_path = self._project_name(project) if project else (None, None)
        path = f"{ACTIVE_DIR}/{safe_filename(title)}.md"
        for existing in self.notes.paths((ACTIVE_DIR,)):
            if stem(existing).casefold() == stem(path).casefold():
                raise _exists(title, existing)
        now = self.clock.now()
        note = self.notes.blank(title, now)
        note.set("status", status_value)
        note.set("priority", priority_value)
        note.set("created", now.date())
        note.set("due", due_value)
        if "completed" in note.frontmatter:
            note.set("completed", None)
        note.set("project", f"[[{project_name}]]" if project_name else None)
        note.set("tags", tag_values)
        body = note.body
        if description.strip():
            body = replace_section(body, "Description", description.strip())
        if steps:
            body = replace_section(
                body, "Steps", "\n".join(f"- [ ] {s.strip()}" for s in steps if s.strip())
            )
        note.body = body
        self.notes.create(path, note)
        if project_path:
            self._list_in_project(project_path, stem(path))
        return task_from_note(path, note)

    def _list_in_project(self, project_path: str, task_title: str) -> None:
        link = f"[[{task_title}]]"

        def add(note: Note) -> None:
            if link.casefold() not in note.body.casefold():
                note.body = append_to_section(note.body, "Tasks", f"- {link}")

        self.projects.update(project_path, add)

    def _unlist_from_project(self, project_name: str, task_title: str) -> None:
        """Drop the task's line from a project's Tasks section (the project may be gone)."""
        try:
            project_path = self.projects.find(project_name)
        except (NotFoundError, InvalidInputError):
            return

        def drop(note: Note) -> None:
            where = section_range(note.body, "Tasks")
            if where is None:
                return
            lines = note.body.split("\n")
            _, start, end = where
            kept = [
                line
                for line in lines[start:end]
                if not (
                    _LIST_ITEM.match(line)
                    and [k.target.casefold() for k in extract_links(line)]
                    == [task_title.casefold()]
                )
            ]
            note.body = "\n".join([*lines[:start], *kept, *lines[end:]])

        self.projects.update(project_path, drop)

    def get(self, ref: str) -> Task:
        """The task ``ref`` names (title, file name, path or a unique part of the title)."""
        path = self.notes.find(ref)
        return task_from_note(path, self.notes.load(path))

    def update(self, ref: str, field_name: str, value: Any) -> Task:
        """Change one field of a task.

        ``status`` to done or cancelled closes the task (moves it to
        ``Tasks/completed/``); back to an open status reopens it. ``title``
        renames the note; ``description`` replaces that section; ``notes``
        adds a dated line under Notes; any other name sets a frontmatter field.
        """
        name = field_name.strip().lower()
        if name == "status":
            status = normalize_status(str(value))
            if status not in OPEN_STATUSES:
                return self._close(ref, status)
            return self._reopen(ref, status)
        if name == "title":
            return self._rename(ref, str(value))
        path = self.notes.find(ref)
        if name == "priority":
            priority = normalize_priority(str(value))
            self.notes.update(path, lambda n: n.set("priority", priority))
        elif name == "due":
            due = self._date(str(value) if value is not None else None, "due date")
            self.notes.update(path, lambda n: n.set("due", due))
        elif name == "project":
            previous = task_from_note(path, self.notes.load(path)).project
            project_name, project_path = self._project_name(str(value)) if value else (None, None)
            link = f"[[{project_name}]]" if project_name else None
            self.notes.update(path, lambda n: n.set("project", link))
            if previous and (project_name or "").casefold() != previous.casefold():
                self._unlist_from_project(previous, stem(path))
            if project_path:
                self._list_in_project(project_path, stem(path))
        elif name == "tags":
            tags = [normalize_tag(t) for t in _tag_list(value)]
            self.notes.update(path, lambda n: n.set("tags", tags))
        elif name == "description":
            text = str(value).strip()
            self.notes.update(
                path, lambda n: setattr(n, "body", replace_section(n.body, "Description", text))
            )
        elif name in ("notes", "note"):
            return self.add_note(ref, str(value))
        elif name in _RESERVED_FIELDS:
            raise InvalidInputError(f"{name!r} is set by memvault and cannot be changed by hand.")
        elif _FIELD_NAME.match(field_name.strip()):
            custom = str(value)
            self.notes.update(path, lambda n: n.set(field_name.strip(), custom))
        else:
            raise InvalidInputError(
                f"{field_name!r} is not a field name; use status, priority, due, project, tags, "
                "title, description, notes or a simple frontmatter key."
            )
        return self.get(path)

    def change(
        self,
        ref: str,
        fields: Mapping[str, Any],
        *,
        note: str | None = None,
        status: str | None = None,
    ) -> Task:
        """Change several fields, add a note, then set the status.

        The status comes last because closing or reopening moves the note;
        each step follows the task to where the one before left it.
        """
        path = self.notes.find(ref)
        for name, value in fields.items():
            path = self.update(path, name, value).path
        if note:
            path = self.add_note(path, note).path
        if status is not None:
            path = self.update(path, "status", status).path
        return self.get(path)

    def add_note(self, ref: str, text: str) -> Task:
        """Add a dated line under the task's Notes section."""
        line = " ".join(text.split())
        if not line:
            raise InvalidInputError("The note text is empty.")
        path = self.notes.find(ref)
        stamp = self.clock.now().strftime("%Y-%m-%d %H:%M")
        self.notes.update(
            path,
            lambda n: setattr(n, "body", append_to_section(n.body, "Notes", f"- {stamp}: {line}")),
        )
        return self.get(path)

    def complete(self, ref: str) -> Task:
        """Mark a task done, date it, and move it to ``Tasks/completed/``."""
        return self._close(ref, "done")

    def _close(self, ref: str, status: str) -> Task:
        path = self.notes.find(ref)
        today = self.clock.today()

        def close(note: Note) -> None:
            note.set("status", status)
            if status == "done" or note.get("completed") is None:
                note.set("completed", today)

        self.notes.update(path, close)
        return self._move(path, COMPLETED_DIR)

    def _reopen(self, ref: str, status: str) -> Task:
        path = self.notes.find(ref)

        def reopen(note: Note) -> None:
            note.set("status", status)
            if note.get("completed") is not None:
                note.set("completed", None)

        self.notes.update(path, reopen)
        return self._move(path, ACTIVE_DIR)

    def _move(self, path: str, folder: str) -> Task:
        if path.rsplit("/", 1)[0] != folder:
            target = f"{folder}/{path.rsplit('/', 1)[1]}"
            if self.vault.exists(target):
                target = Collection(self.vault, (folder,), "task").new_path(stem(path), folder)
            path = self.vault.move(path, target)
        return task_from_note(path, self.notes.load(path))

    def _rename(self, ref: str, title: str) -> Task:
        """Rename the note and its heading; links elsewhere follow, as in Obsidian."""
        new_title = self._screened(" ".join(title.split()))
        path = self.notes.find(ref)
        folder = path.rsplit("/", 1)[0]
        target = f"{folder}/{safe_filename(new_title)}.md"
        if target.casefold() != path.casefold() and self.vault.exists(target):
            raise _exists(new_title, target)
        old_title, new_stem = stem(path), stem(target)

        def retitle(note: Note) -> None:
            lines = note.body.split("\n")
            for i, line in enumerate(lines):
                if line.strip() == f"# {old_title}":
                    lines[i] = f"# {new_stem}"
                    break
            note.body = "\n".join(lines)

        self.notes.update(path, retitle)
        same = target.casefold() == path.casefold()
        path = Notes(self.vault).move(path, target, overwrite=same)
        return self.get(path)

    def list(
        self,
        *,
        status: str | Iterable[str] | None = None,
        project: str | None = None,
        tag: str | None = None,
        due_before: str | date | None = None,
        include_closed: bool = False,
    ) -> list[Task]:
        """Tasks matching every filter given, most urgent first.

        Without ``status``, only open tasks are listed unless
        ``include_closed``; ``due_before`` keeps tasks due on or before the day.
        """
        statuses: set[str] | None = None
        if status is not None and status != "all":
            items = [status] if isinstance(status, str) else list(status)
            statuses = {normalize_status(s) for s in items}
        elif status == "all":
            include_closed = True
        folders = [ACTIVE_DIR]
        if include_closed or (statuses is not None and not statuses <= OPEN_STATUSES):
            folders.append(COMPLETED_DIR)
        wanted_project = strip_link(project).casefold() if project else None
        wanted_tag = tag.lstrip("#").casefold() if tag else None
        limit = self._date(due_before, "due-before date") if due_before is not None else None
        tasks: list[Task] = []
        for path, note in self.notes.each(folders):
            task = task_from_note(path, note)
            if statuses is not None and task.status not in statuses:
                continue
            if statuses is None and not include_closed and not task.is_open:
                continue
            if wanted_project is not None and (task.project or "").casefold() != wanted_project:
                continue
            if wanted_tag is not None and wanted_tag not in (t.casefold() for t in task.tags):
                continue
            if limit is not None and (task.due is None or task.due > limit):
                continue
            tasks.append(task)
        tasks.sort(
            key=lambda t: (
                not t.is_open,
                _PRIORITY_RANK.get(t.priority, len(PRIORITIES)),
                t.due or date.max,
                t.created or date.max,
                t.title.casefold(),
            )
        )
        return tasks
