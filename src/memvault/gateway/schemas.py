"""The HTTP API's bodies: what requests carry and what responses promise.

Every response is an envelope: ``{"ok": true, "result": ...}`` (routes that
search add ``"notice"``) or ``{"ok": false, "error": {...}}``. The models
here are the OpenAPI spec; the results the services produce are validated
against them on the way out, so the spec stays true. Result models allow
extra fields: a client may rely on the fields listed, and memvault may add
more.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, Strict

from memvault.errors import InvalidInputError
from memvault.memory.sessions import CHANNEL_PATTERN, DIRECTIONS, MAX_TEXT, ROLES
from memvault.vault.memories import MAX_TEXT_CHARS
from memvault.vocabulary import CATEGORIES, PRIORITIES, STATUSES

T = TypeVar("T")


# A point in time: ISO 8601 text, or Unix time in seconds (milliseconds above 1e11).
Moment = Annotated[datetime, Strict(False)] | float
_MILLISECONDS = 1e11


def moment(value: datetime | float) -> datetime:
    """The datetime a :data:`Moment` names."""
    if isinstance(value, datetime):
        return value
    seconds = value / 1000 if abs(value) > _MILLISECONDS else value
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise InvalidInputError(f"{value} is not a Unix time.") from exc


class Body(BaseModel):
    """A request body: unknown fields are mistakes, reported rather than ignored.

    Strict: a JSON value must have the type the spec names (no "0.5" for a
    number, no 1 for a boolean); timestamps are the exception, parsed from text.
    """

    model_config = ConfigDict(extra="forbid", strict=True)


class Result(BaseModel):
    """A result object: the listed fields, and possibly more."""

    model_config = ConfigDict(extra="allow")


class Envelope(BaseModel, Generic[T]):
    """A successful answer."""

    ok: Literal[True] = True
    result: T


class NoticedEnvelope(Envelope[T], Generic[T]):
    """A successful answer that may come with a notice (a search's, a secret kept out)."""

    notice: str | None = Field(
        None,
        description="One sentence when the answer is less than asked, e.g. keywords only "
        "while the embedding model loads (searching again later uses meaning too), or "
        "when a secret was removed before storing; null otherwise.",
    )


class ErrorBody(BaseModel):
    """What went wrong, in a stable code and one sentence."""

    code: str = Field(description="Stable machine-readable code, e.g. not_found.")
    message: str = Field(description="One sentence for a person.")
    retriable: bool = Field(False, description="Whether the same request may succeed later.")
    failed_step: str | None = Field(None, description="The step that failed, when known.")
    details: Any = Field(None, description="More about the failure, e.g. the invalid fields.")


class ErrorEnvelope(BaseModel):
    """A failed answer."""

    ok: Literal[False] = False
    error: ErrorBody


# -- system ------------------------------------------------------------------------------


class Health(Result):
    status: Literal["ok"] = "ok"
    version: str
    uptime_seconds: float
    role: Literal["primary", "replica"] = Field(
        "primary",
        description="primary: owns and writes the vault; replica: answers "
        "searches from PostgreSQL and forwards the rest to primary_url",
    )
    primary_url: str | None = Field(None, description="where a replica forwards to")


class Check(Result):
    name: str
    status: Literal["ok", "warning", "error"]
    message: str
    details: Any = None


class CheckSummary(Result):
    total: int
    passed: int
    warnings: int
    errors: int


class Doctor(Result):
    version: str
    checks: list[Check]
    summary: CheckSummary
    timestamp: datetime


# -- memory ------------------------------------------------------------------------------


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


# -- notes and tasks ---------------------------------------------------------------------


class NoteWriteBody(Body):
    content: str = Field(description="The whole note, Markdown with optional frontmatter.")
    overwrite: bool = Field(True, description="False refuses to replace an existing note.")
    expected_hash: str | None = Field(
        None,
        max_length=200,
        description=(
            "The note's hash from GET: replace it only if unchanged since (else 409, "
            "nothing written). Same as the If-Match header."
        ),
    )


class NoteAppendBody(Body):
    content: str = Field(min_length=1, description="Lines to add at the end of the note.")


class NoteEntry(Result):
    path: str
    size: int
    modified: str
    is_dir: bool


class NoteOut(Result):
    path: str
    title: str
    hash: str = Field(description="sha256 of the note's bytes; send it back to write safely.")
    size: int
    modified: str
    frontmatter: dict[str, Any]
    tags: list[str]
    content: str


class NoteWritten(Result):
    path: str


class TaskCreateBody(Body):
    title: str = Field(min_length=1, max_length=200)
    description: str = ""
    priority: Literal[PRIORITIES] = "medium"  # type: ignore[valid-type]
    status: Literal["todo", "in_progress", "blocked"] = "todo"
    due: str | None = Field(None, description="YYYY-MM-DD, or +3d / tomorrow.")
    project: str | None = None
    tags: list[str] = Field(default_factory=list, max_length=50)
    steps: list[str] = Field(default_factory=list, max_length=100)


class TaskUpdateBody(Body):
    status: Literal[STATUSES] | None = None  # type: ignore[valid-type]
    priority: Literal[PRIORITIES] | None = None  # type: ignore[valid-type]
    due: str | None = Field(None, description="YYYY-MM-DD, or +3d / tomorrow.")
    project: str | None = None
    tags: list[str] | None = Field(None, max_length=50)
    title: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = None
    note: str | None = Field(None, min_length=1, description="A dated line for the Notes section.")


class TaskOut(Result):
    path: str
    title: str
    status: str
    priority: str
    created: str | None
    due: str | None
    completed: str | None
    project: str | None
    tags: list[str]


# -- tools -------------------------------------------------------------------------------


class ToolInfo(Result):
    name: str
    title: str
    description: str
    tier: int
    category: str
    input_schema: dict[str, Any]
    annotations: dict[str, bool]


class ToolCall(Result):
    tool: str
    result: Any


# -- sessions ----------------------------------------------------------------------------


class MessageBody(Body):
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    role: Literal[ROLES] = "user"  # type: ignore[valid-type]
    direction: Literal[DIRECTIONS] | None = Field(  # type: ignore[valid-type]
        None, description="inbound or outbound; default: inbound for the user, else outbound."
    )
    channel: str | None = Field(
        None,
        pattern=CHANNEL_PATTERN,
        description="Lowercase name; default: the key's prefix (telegram of telegram:42).",
    )
    sender: str | None = Field(None, max_length=200)
    timestamp: Moment | None = Field(
        None, description="When it was sent: ISO 8601 or Unix time; default now."
    )
    metadata: dict[str, Any] | None = None


class EndBody(Body):
    summary: str | None = Field(None, max_length=5000)


class AgentRunBody(Body):
    command: str = Field(min_length=1, max_length=MAX_TEXT, description="What the agent should do.")
    session: str = Field(
        "api",
        min_length=1,
        max_length=200,
        description="Session key; turns of a session build on each other.",
    )
    channel: str | None = Field(
        None,
        pattern=CHANNEL_PATTERN,
        description="Where the owner is, e.g. telegram; default the key's prefix.",
    )
    sender: str | None = Field(None, max_length=200)
    stream: bool = Field(
        False,
        description="Answer with Server-Sent Events of the run's steps and text as they happen.",
    )


class AgentUsage(Result):
    input_tokens: int
    output_tokens: int


class AgentRun(Result):
    status: Literal["done", "failed", "cancelled"]
    answer: str
    summary: str
    iterations: int
    session: str
    model: str | None
    usage: AgentUsage
    tool_calls: list[dict[str, Any]]
    error: str | None


class SessionOut(Result):
    id: int
    key: str
    channel: str
    active: bool
    started_at: str
    last_message_at: str | None
    ended_at: str | None
    message_count: int
    summary: str | None
    agent: str | None = Field(
        None, description="The named API token that opened it; null for the owner."
    )


class MessageOut(Result):
    id: int
    session_id: int
    channel: str
    direction: str
    role: str
    sender: str | None
    text: str
    sent_at: str
    metadata: dict[str, Any] | None


class Logged(Result):
    session: SessionOut
    message: MessageOut


class SessionDetail(Result):
    session: SessionOut
    messages: list[MessageOut]


# -- events and telemetry ----------------------------------------------------------------


class EventOut(Result):
    id: int
    type: str
    source: str
    payload: dict[str, Any]
    observed_at: str


class Poll(Result):
    events: list[EventOut]
    next_cursor: int = Field(description="Pass as ?since= to get what follows.")
    gap: bool = Field(description="True when events after the cursor fell out of the buffer.")


class Sample(Body):
    id: str = Field(min_length=1, max_length=200, description="Unique id of the sample (UUID).")
    lat: float = Field(ge=-90, le=90)
    lon: float = Field(ge=-180, le=180)
    accuracy: float | None = Field(None, ge=0, le=1_000_000, description="Metres.")
    timestamp: Moment = Field(
        description="When it was taken: ISO 8601, or Unix time in seconds (or milliseconds)."
    )


class TelemetryBody(Body):
    samples: list[Sample] = Field(max_length=5000)


class TelemetryAnswer(BaseModel):
    """The answer the phone app expects (no envelope, as the earlier design has it)."""

    received: int = Field(description="New samples stored (repeats are not counted).")
    duplicates: int
    journaled: int = Field(description="Samples that earned a line in the journal.")
    nextMinIntervalSec: int  # noqa: N815 - the phone app's field name


# -- channels ----------------------------------------------------------------------------


class SendPayload(Body):
    # Optional here, so an empty one is refused in the earlier design's words
    # (invalid_conversation_hint, invalid_text) rather than as validation_failed.
    conversation_hint: str | None = Field(
        None,
        description="Who to write to: 'owner', a chat id, or the name of a contact with an "
        "id on the channel (400 invalid_conversation_hint when empty).",
    )
    text: str | None = Field(
        None, description="The message, in Markdown (400 invalid_text when empty)."
    )
    enter_to_send: bool | None = Field(
        None, description="Accepted from the earlier design's clients; memvault always sends."
    )


class SendBody(Body):
    adapter: str | None = Field(
        None,
        description="The channel, e.g. telegram; default the owner's primary channel (the "
        "first enabled channel with an owner id); 400 adapter_not_found.",
    )
    action: str | None = Field(
        None,
        description="send_message, the only action (the default; 400 unsupported_action).",
    )
    payload: SendPayload | None = None


class SentMessage(Result):
    adapter: str
    action: Literal["send_message"]
    message_id: str = Field(description="The outbox ids of the message's parts, joined by ','.")
    status: Literal["sent", "queued", "failed", "suppressed"] = Field(
        description="sent; queued (the channel is not reachable now: it is retried); "
        "failed (the platform refused it: see error and the outbox); or suppressed (the "
        "text was only a protocol token such as HEARTBEAT_OK: nothing was sent)."
    )
    chat_id: str
    outbox_ids: list[int]
    parts: int
    error: str | None
    timestamp: str


class ChannelMessage(Result):
    id: int
    direction: Literal["inbound", "outbound"]
    status: str
    received_at: str
    chat_id: str | None
    sender_id: str | None
    sender_name: str | None
    text: str | None
    attachments: list[Any]


class ChannelMessages(Result):
    adapter: str
    conversation: str | None = Field(description="The chat shown, or null for every chat.")
    messages: list[ChannelMessage] = Field(description="Oldest first.")
    message_count: int


class ChannelConversation(Result):
    chat_id: str
    name: str | None = None
    messages: int | None = None
    last_message_at: str | None = None
    last_text: str | None = None


class ChannelConversations(Result):
    adapter: str
    conversations: list[ChannelConversation] = Field(description="The most recent first.")
    count: int
    source: Literal["platform", "memvault"] = Field(
        description="Who listed them: the platform, or memvault's own log of the channel."
    )


class ChannelContext(Result):
    adapter: str
    conversation: str = Field(description="The chat id.")
    conversation_name: str | None
    contact: str | None = Field(description="The sender's contact note, if there is one.")
    owner: bool
    session: dict[str, Any] | None
    platform: dict[str, Any] | None
    timestamp: str


class ChannelStatus(Result):
    channel: str
    enabled: bool
    state: str
    error: str | None
    identity: str | None
    restarts: int
    policy: str
    owner_set: bool
    respond: bool
    last_received: str | None
    outbox: dict[str, int] = Field(description="Outbox messages by status.")
    waiting_senders: int
    connected: bool = Field(False, description="Whether its adapter runs now (in the daemon).")
    running_since: str | None = Field(None, description="When its adapter started running.")
    uptime_seconds: int | None = Field(None, description="Seconds it has run since then.")
    receiving: str | None = Field(
        None,
        description="How its messages arrive now, when it has more than one way (the "
        "OpenClaw bridge: the gateway's events, or polling and why).",
    )


class SenderBody(Body):
    sender: str = Field(
        description="The sender's id, or the pairing code they were given (ABCD-EFGH)."
    )


class SenderOut(Result):
    channel: str
    sender_id: str
    chat_id: str | None
    name: str | None
    username: str | None
    status: Literal["pending", "approved", "blocked"]
    code: str | None
    code_expires_at: str | None
    first_seen: str
    last_seen: str
    messages: int
    decided_at: str | None
    decided_by: str | None


class OutboxMessage(Result):
    id: int
    channel: str
    chat_id: str
    kind: str
    text: str
    status: Literal["pending", "failed", "sent"]
    attempts: int
    part: int
    parts: int
    next_attempt_at: str
    last_error: str | None
    created_at: str
    sent_at: str | None


class JobRunOut(Result):
    id: int
    job: str
    started: str
    finished: str | None
    status: str = Field(description="running, ok, failed or skipped")
    output: str
    error: str | None
    metadata: dict[str, Any] = Field(
        description="what the run recorded: changes (files, for undo), model use, and more"
    )


class JobOut(Result):
    name: str
    description: str
    enabled: bool
    schedule: str
    uses_model: bool
    last_run: JobRunOut | None
    next_run: str | None = Field(description="when it runs next; null while switched off")
    failures_in_a_row: int


class JobStarted(Result):
    job: str
    run_id: int
    status: str


class JobUndone(Result):
    run_id: int
    restored: list[str]


# -- the knowledge graph -----------------------------------------------------------------


class GraphNode(Result):
    id: str = Field(description="A note's path, memory:<id>, #tag, or a name without a note.")
    name: str
    type: str = Field(
        description="person, project, place, ... for an entity; memory, tag, missing, or "
        "the kind of another note."
    )


class GraphEdge(Result):
    source: str
    target: str
    relation: str = Field(description="friend_of, works_at, ...; links_to, mentions, tagged")
    current: bool = Field(description="False once the relation has ended (valid_until).")


class KnowledgeGraphOut(Result):
    center: str | None = Field(description="The entity asked about; null for the whole vault.")
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    truncated: bool = Field(description="True when max_nodes left nodes out.")


class EntityFact(Result):
    category: str
    text: str
    tags: list[str]
    valid_from: str | None
    valid_until: str | None
    current: bool = Field(description="Whether it holds today (not closed).")
    source: str | None


class EntityRelation(Result):
    type: str
    target: str
    context: str
    valid_from: str | None
    valid_until: str | None
    current: bool


class EntityFactsOut(Result):
    name: str
    type: str
    aliases: list[str]
    path: str
    tags: list[str]
    as_of: str | None = Field(description="The day asked about, if one was.")
    history: bool
    facts: list[EntityFact]
    relations: list[EntityRelation]
