"""Memories: remembering, forgetting, reading, search hits and the context built from them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memvault.gateway.schemas.base import Body, Result
from memvault.vault.memories import MAX_TEXT_CHARS
from memvault.vocabulary import CATEGORIES

# Values are checked where they are used, by the same code `memvault --direct` runs, so a
# mistake reads the same with and without the daemon; these models check types only.


class RememberBody(Body):
    text: str = Field(
        description=f"The memory, one self-contained sentence (at most {MAX_TEXT_CHARS} "
        "characters)."
    )
    category: str | None = Field(
        None,
        description=f"One of: {', '.join(CATEGORIES)} (default: the vault's default); the "
        "earlier designs' contact and general are taken as person and fact.",
    )
    importance: float | None = Field(None, description="0 (trivia) to 1 (essential).")
    tags: list[str] = Field(default_factory=list, description="Tags, without '#'.")
    source: str | None = Field(
        None, description="Where it came from, e.g. telegram:42 (cut at 200 characters)."
    )


class MemoryEditBody(Body):
    text: str | None = Field(
        None, description="The memory's new text (its id, date, source and fields kept)."
    )
    expected_hash: str | None = Field(
        None,
        description="With text: the hash of the memory's note as read (GET /v1/notes/PATH); "
        "a note changed since, in Obsidian say, is a 409 and nothing is written.",
    )
    category: str | None = Field(None, description="Move it to this category.")
    add_tags: list[str] = Field(default_factory=list, description="Tags to add, without '#'.")


class MemoryOut(Result):
    id: str
    text: str
    category: str
    importance: float
    tags: list[str]
    created: str | None
    source: str | None
    path: str
    line: int
    archived: bool
    agent: str | None = Field(
        None, description="The named API token that stored it; null for the owner."
    )
    trust: str | None = Field(
        None,
        description="low: text from someone other than the owner that reads as an "
        "instruction to the agent; null when nothing marks it.",
    )
    trust_reason: str | None = Field(None, description="Why it is marked low trust.")


class Remembered(MemoryOut):
    created_new: bool = Field(description="False when an identical memory already existed.")


class ForgetPlace(Result):
    place: str = Field(description="A file, a table of a database, the index or the graph.")
    action: str = Field(
        description="removed, refreshed, dropped, deleted, redacted, verified, checked, "
        "left or not touched"
    )
    detail: str
    count: int


class ForgottenMemory(Result):
    id: str
    text: str
    path: str


class ForgetReceipt(Result):
    subject: str | None = Field(None, description="contact:PATH or about:TOPIC, if either")
    forgotten: list[ForgottenMemory]
    places: list[ForgetPlace] = Field(description="Each place looked at, and what was done.")
    untouched: list[ForgetPlace] = Field(
        description="What is left alone by design: git history, the jobs' undo copies."
    )
    still_found: list[str] = Field(
        description="Notes of the owner's own that still hold a trace (not changed)."
    )


class Forgotten(MemoryOut):
    forgotten: Literal[True] = True
    receipt: ForgetReceipt


class ForgetBody(Body):
    contact: str | None = Field(None, description="A contact's name, alias or note path.")
    about: str | None = Field(None, description="A topic: what a search for it finds.")
    dry_run: bool = Field(False, description="Only say what would be removed.")
    memory_ids: list[str] | None = Field(
        None,
        description="Of the plan's memories only these (those shown before saying yes); "
        "default all.",
    )


class ForgetPlan(Result):
    kind: Literal["contact", "about"]
    subject: str
    memories: list[ForgottenMemory]
    notes: list[str] = Field(description="Notes dropped whole.")
    identities: dict[str, list[str]] = Field(description="The person's ids per channel.")
    chat_messages: int


class MemoryRead(Result):
    memory_id: str
    at: str = Field(description="When, ISO 8601 in UTC.")
    path: Literal["search", "context", "tool", "get"]
    surface: str = Field(description="cli, http, mcp, agent, channel or job")
    agent: str | None = Field(description="The named API token's agent; null for the owner.")
    observer: bool = Field(description="Whether the token only reads (read scope).")
    audience: str | None = Field(
        description="Whom the conversation was with (contact:PATH, group:NAME); null: the owner."
    )


class Hit(Result):
    path: str
    start_line: int
    end_line: int
    score: float
    vector_score: float
    text_score: float
    snippet: str
    kind: str
    source: str
    id: str | None


class ContextSection(Result):
    title: str
    shown: int
    left_out: int


class Context(Result):
    markdown: str
    tokens: int
    budget_tokens: int
    sections: list[ContextSection]
    notice: str | None = Field(
        None, description="Why what is relevant was found by keywords only, if it was."
    )


class MemoryReview(Result):
    id: int
    memory_id: str = Field(description="The memory, added as it was while the decision waits.")
    text: str
    action: str | None = Field(description="What was nominated: add, update, supersede or noop.")
    target: str | None = Field(description="The memory the nomination names, if any.")
    merged_text: str | None
    reason: str
    confidence: float | None
    problem: str | None = Field(description="Why the decision was held for the owner.")
    candidates: list[str]
    status: str = Field(description="pending, applied or dismissed")
    created_at: str
    applicable: bool = Field(description="Whether the nomination can be applied as it stands.")


class MemoryChange(Result):
    memory_id: str
    action: str = Field(description="add, update, supersede, superseded or noop")
    old_text: str | None
    new_text: str | None
    related_id: str | None
    reason: str
    decided_by: str = Field(description="rule, model or owner")
    at: str
