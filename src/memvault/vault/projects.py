"""Projects: one note per project in ``Projects/``, linking the tasks that belong to it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from memvault.clock import Clock
from memvault.errors import InvalidInputError
from memvault.text import TextScreen
from memvault.vault.collection import Collection, stem
from memvault.vault.markdown import (
    aliases,
    extract_links,
    normalize_tag,
    replace_section,
    section_text,
)
from memvault.vault.note import Note
from memvault.vault.store import Vault
from memvault.vault.tasks import Tasks

PROJECTS_DIR = "Projects"
PROJECT_STATUSES = ("active", "paused", "done", "archived")


@dataclass
class Project:
    """A project as read from its note."""

    path: str
    name: str
    status: str
    created: date | None
    tags: list[str]
    overview: str
    tasks: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": self.path,
            "name": self.name,
            "status": self.status,
            "created": self.created.isoformat() if self.created else None,
            "tags": list(self.tags),
            "overview": self.overview,
            "tasks": list(self.tasks),
            "aliases": list(self.aliases),
        }


def project_from_note(path: str, note: Note) -> Project:
    """Read a project from its note."""
    section = section_text(note.body, "Tasks") or ""
    created = note.get("created")
    raw_tags = note.get("tags") or []
    tags = raw_tags if isinstance(raw_tags, list) else re.split(r"[,\s]+", str(raw_tags))
    return Project(
        path=path,
        name=stem(path),
        status=str(note.get("status") or "active"),
        created=created if isinstance(created, date) else None,
        tags=[str(t).lstrip("#") for t in tags if str(t).strip()],
        overview=section_text(note.body, "Overview") or "",
        tasks=[link.target for link in extract_links(section) if link.target],
        aliases=aliases(note.frontmatter),
    )


class Projects:
    """Create, find and list projects; link tasks to them."""

    def __init__(
        self, vault: Vault, clock: Clock, tasks: Tasks, *, screen: TextScreen | None = None
    ) -> None:
        self.vault = vault
        self.clock = clock
        self.tasks = tasks
        self.notes = Collection(vault, (PROJECTS_DIR,), "project", by_alias=True, screen=screen)

    def create(
        self,
        name: str,
        description: str = "",
        *,
        status: str = "active",
        tags: Iterable[str] = (),
    ) -> Project:
        """Create a project note from the project template."""
        name = " ".join(name.split())
        if not name:
            raise InvalidInputError("A project needs a name.")
        state = status.strip().lower()
        if state not in PROJECT_STATUSES:
            raise InvalidInputError(
                f"Unknown project status {status!r}; use one of {', '.join(PROJECT_STATUSES)}."
            )
        now = self.clock.now()
        path, note = self.notes.start(
            name, now, advice="add tasks to it with `memvault project link`"
        )
        note.set("status", state)
        note.set("created", now.date())
        tag_values = [normalize_tag(t) for t in tags]
        if tag_values:
            current = [str(t) for t in note.get("tags") or []]
            note.set("tags", [*current, *(t for t in tag_values if t not in current)])
        if description.strip():
            note.body = replace_section(note.body, "Overview", description.strip())
        self.notes.create(path, note)
        return project_from_note(path, note)

    def get(self, ref: str) -> Project:
        """The project ``ref`` names (name, alias, file name or path)."""
        path = self.notes.find(ref)
        return project_from_note(path, self.notes.load(path))

    def list(self, *, status: str | None = None) -> list[Project]:
        """Projects by name, optionally only those with ``status``."""
        projects = [project_from_note(p, note) for p, note in self.notes.each()]
        if status:
            projects = [p for p in projects if p.status == status.strip().lower()]
        return sorted(projects, key=lambda p: p.name.casefold())

    def link_task(self, project_ref: str, task_ref: str) -> Project:
        """Make a task part of a project: sets the task's ``project``, lists it in the project."""
        project = self.get(project_ref)
        self.tasks.update(task_ref, "project", project.name)
        return self.get(project.path)
