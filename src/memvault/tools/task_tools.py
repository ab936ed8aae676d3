"""Task, contact and journal tools."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from memvault.tools.inputs import ToolInput, names
from memvault.tools.policy import FILE_WRITES, Tier
from memvault.tools.registry import Annotations, Tool, ToolContext
from memvault.vocabulary import KNOWN_CHANNELS, PRIORITIES, SECTIONS, STATUSES

TASK_REF = names("title", "filename", "task", "name", "file", "path")
_TASKS = "Try task_list to see the open tasks (status 'all' includes closed ones)."


class TaskCreate(ToolInput):
    title: str = Field(description="Short task title; also its note's name.", min_length=1)
    description: str = Field(
        "",
        description="What needs to be done.",
        validation_alias=names("description", "details", "body", "notes"),
    )
    priority: str = Field("medium", description=f"One of: {', '.join(PRIORITIES)}.")
    due: str | None = Field(None, description="Due day: YYYY-MM-DD, 'today', 'tomorrow' or '+3d'.")
    project: str | None = Field(None, description="Project name; linked as [[Project]].")
    tags: list[str] = Field(default_factory=list, description="Tags, without '#'.")
    steps: list[str] = Field(default_factory=list, description="Checklist steps, in order.")


class TaskUpdate(ToolInput):
    title: str = Field(
        description="The task's title or file name (exact, or a unique part of it).",
        validation_alias=TASK_REF,
        min_length=1,
    )
    status: str | None = Field(
        None,
        description=f"New status: {', '.join(STATUSES)}. done/cancelled close the task.",
    )
    field: str | None = Field(
        None,
        description="Another field to change: priority, due, project, tags, title, description.",
    )
    value: str | None = Field(None, description="The new value of `field`.")
    notes: str | None = Field(
        None,
        description="A note to add to the task (dated).",
        validation_alias=names("notes", "note", "comment"),
    )

    @model_validator(mode="after")
    def _something_to_do(self) -> TaskUpdate:
        if self.status is None and self.field is None and self.notes is None:
            raise ValueError("give a status, a field with a value, or notes")
        if self.field is not None and self.value is None:
            raise ValueError(f"'value' is required with field {self.field!r}")
        return self


class TaskComplete(ToolInput):
    title: str = Field(
        description="The task's title or file name.", validation_alias=TASK_REF, min_length=1
    )


class TaskList(ToolInput):
    status: str | None = Field(
        None, description=f"Only tasks with this status ({', '.join(STATUSES)}, or 'all')."
    )
    project: str | None = Field(None, description="Only this project's tasks.")
    tag: str | None = Field(None, description="Only tasks with this tag.")
    due_before: str | None = Field(
        None,
        description="Only tasks due on or before this day (YYYY-MM-DD).",
        validation_alias=names("due_before", "dueBefore", "before"),
    )


class ContactCreate(ToolInput):
    name: str = Field(description="The person's name; also the note's name.", min_length=1)
    relationship: str | None = Field(None, description="e.g. colleague, friend, client.")
    email: str | None = Field(None, description="Email address.")
    phone: str | None = Field(None, description="Phone number.")
    notes: str = Field("", description="Context about this person.")
    aliases: list[str] = Field(default_factory=list, description="Other names they go by.")
    identities: dict[str, str] = Field(
        default_factory=dict,
        description=(
            f"Their id per channel, e.g. {{'telegram': '123456'}} ({', '.join(KNOWN_CHANNELS)})."
        ),
        validation_alias=names("identities", "channels", "ids"),
    )


class ContactUpdate(ToolInput):
    name: str = Field(
        description="The contact's name, alias, file name, or CHANNEL:ID such as telegram:123456.",
        validation_alias=names("name", "filename", "contact", "file", "path"),
        min_length=1,
    )
    interaction: str = Field(
        description="What happened, e.g. 'Called about the contract renewal'.",
        validation_alias=names("interaction", "text", "note", "entry", "notes"),
        min_length=1,
    )


class JournalAppend(ToolInput):
    section: str = Field("Observations", description=f"{', '.join(SECTIONS)}, or another heading.")
    entry: str = Field(
        description="The entry; it is timestamped.",
        validation_alias=names("entry", "text", "content", "message"),
        min_length=1,
    )


def _task_create(ctx: ToolContext, args: TaskCreate) -> dict[str, Any]:
    task = ctx.runtime.tasks.create(
        args.title,
        args.description,
        priority=args.priority,
        due=args.due,
        project=args.project,
        tags=args.tags,
        steps=args.steps,
    )
    return task.to_dict()


def _task_update(ctx: ToolContext, args: TaskUpdate) -> dict[str, Any]:
    fields = {args.field: args.value} if args.field is not None else {}
    task = ctx.runtime.tasks.change(args.title, fields, note=args.notes, status=args.status)
    return task.to_dict()


def _task_complete(ctx: ToolContext, args: TaskComplete) -> dict[str, Any]:
    return ctx.runtime.tasks.complete(args.title).to_dict()


def _task_list(ctx: ToolContext, args: TaskList) -> dict[str, Any]:
    found = ctx.runtime.tasks.list(
        status=args.status, project=args.project, tag=args.tag, due_before=args.due_before
    )
    return {"tasks": [task.to_dict() for task in found]}


def _contact_create(ctx: ToolContext, args: ContactCreate) -> dict[str, Any]:
    contact = ctx.runtime.contacts.create(
        args.name,
        relationship=args.relationship,
        email=args.email,
        phone=args.phone,
        notes=args.notes,
        aliases=args.aliases,
        identities=args.identities,
    )
    return contact.to_dict()


def _contact_update(ctx: ToolContext, args: ContactUpdate) -> dict[str, Any]:
    return ctx.runtime.contacts.log(args.name, args.interaction).to_dict()


def _journal_append(ctx: ToolContext, args: JournalAppend) -> dict[str, Any]:
    return ctx.runtime.journal.append(args.section, args.entry).to_dict()


EDITS = Annotations()

TOOLS = [
    Tool(
        name="task_create",
        title="Create a task",
        description=(
            "Create a task (a note in Tasks/active/) for work that spans sessions or needs "
            "follow-up. Give it a short title, what needs doing, and optionally a priority, "
            "due day, project, tags and checklist steps."
        ),
        input_model=TaskCreate,
        handler=_task_create,
        tier=Tier.WRITE,
        category=FILE_WRITES,
        annotations=EDITS,
        summarize=lambda a: f"create task {a.title!r}",
    ),
    Tool(
        name="task_update",
        title="Update a task",
        description=(
            "Update a task: change its status (todo, in_progress, blocked, done, cancelled), "
            "change another field (field + value), and/or add a note. Refer to the task by "
            "its title or file name."
        ),
        input_model=TaskUpdate,
        handler=_task_update,
        tier=Tier.WRITE,
        category=FILE_WRITES,
        annotations=Annotations(idempotent=True),
        summarize=lambda a: f"update task {a.title!r}",
        not_found_hint=_TASKS,
    ),
    Tool(
        name="task_complete",
        title="Complete a task",
        description="Mark a task done: it is dated and moved to Tasks/completed/.",
        input_model=TaskComplete,
        handler=_task_complete,
        tier=Tier.WRITE,
        category=FILE_WRITES,
        annotations=Annotations(idempotent=True),
        summarize=lambda a: f"complete task {a.title!r}",
        not_found_hint=_TASKS,
    ),
    Tool(
        name="task_list",
        title="List tasks",
        description=(
            "List tasks, most urgent first: open ones by default, or by status "
            "('all' includes closed ones), project, tag or due day. Check it at the "
            "start of a session to see unfinished work."
        ),
        input_model=TaskList,
        handler=_task_list,
    ),
    Tool(
        name="contact_create",
        title="Create a contact",
        description=(
            "Create a contact (a note in Contacts/) for a person the owner mentions: "
            "relationship, email, phone, notes, aliases, and their id on chat channels."
        ),
        input_model=ContactCreate,
        handler=_contact_create,
        tier=Tier.WRITE,
        category=FILE_WRITES,
        annotations=EDITS,
        summarize=lambda a: f"create contact {a.name!r}",
    ),
    Tool(
        name="contact_update",
        title="Log an interaction",
        description="Add a dated interaction to a contact's note: what happened, and when.",
        input_model=ContactUpdate,
        handler=_contact_update,
        tier=Tier.WRITE,
        category=FILE_WRITES,
        annotations=EDITS,
        summarize=lambda a: f"log an interaction with {a.name!r}",
        not_found_hint="Try vault_list with folder 'Contacts', or contact_create.",
    ),
    Tool(
        name="journal_append",
        title="Write in today's journal",
        description=(
            "Add a timestamped entry to today's journal under a section: Actions Taken, "
            "Commands Received, Observations, Decisions Made or Follow-ups."
        ),
        input_model=JournalAppend,
        handler=_journal_append,
        tier=Tier.WRITE,
        category=FILE_WRITES,
        annotations=EDITS,
        summarize=lambda a: f"write in the journal under {a.section!r}",
    ),
]
