"""The HTTP API's bodies: what requests carry and what responses promise.

Every response is an envelope: ``{"ok": true, "result": ...}`` (routes that
search add ``"notice"``) or ``{"ok": false, "error": {...}}``. The models
here are the OpenAPI spec; the results the services produce are validated
against them on the way out, so the spec stays true. Result models allow
extra fields: a client may rely on the fields listed, and memvault may add
more.

One module a route group (system, memory, notes, tools, sessions, events,
channels, jobs, graph); ``base`` holds the envelope and the rules every body and
result follows. Every model is importable from here.
"""

from memvault.gateway.schemas.base import (
    Body,
    Envelope,
    ErrorBody,
    ErrorEnvelope,
    Moment,
    NoticedEnvelope,
    Result,
    moment,
)
from memvault.gateway.schemas.channels import (
    ChannelContext,
    ChannelConversation,
    ChannelConversations,
    ChannelMessage,
    ChannelMessages,
    ChannelStatus,
    OutboxMessage,
    SendBody,
    SenderBody,
    SenderOut,
    SendPayload,
    SentMessage,
)
from memvault.gateway.schemas.events import EventOut, Poll, Sample, TelemetryAnswer, TelemetryBody
from memvault.gateway.schemas.graph import (
    EntityFact,
    EntityFactsOut,
    EntityRelation,
    GraphEdge,
    GraphNode,
    KnowledgeGraphOut,
)
from memvault.gateway.schemas.jobs import JobOut, JobRunOut, JobStarted, JobUndone
from memvault.gateway.schemas.memory import (
    Context,
    ContextSection,
    ForgetBody,
    ForgetPlace,
    ForgetPlan,
    ForgetReceipt,
    Forgotten,
    ForgottenMemory,
    Hit,
    MemoryChange,
    MemoryOut,
    MemoryRead,
    MemoryReview,
    RememberBody,
    Remembered,
)
from memvault.gateway.schemas.notes import (
    NoteAppendBody,
    NoteEntry,
    NoteOut,
    NoteWriteBody,
    NoteWritten,
    TaskCreateBody,
    TaskOut,
    TaskUpdateBody,
)
from memvault.gateway.schemas.sessions import (
    AgentRun,
    AgentRunBody,
    AgentUsage,
    EndBody,
    Logged,
    MessageBody,
    MessageOut,
    SessionDetail,
    SessionOut,
)
from memvault.gateway.schemas.system import Check, CheckSummary, Doctor, Health
from memvault.gateway.schemas.tools import ToolCall, ToolInfo

__all__ = [
    "AgentRun",
    "AgentRunBody",
    "AgentUsage",
    "Body",
    "ChannelContext",
    "ChannelConversation",
    "ChannelConversations",
    "ChannelMessage",
    "ChannelMessages",
    "ChannelStatus",
    "Check",
    "CheckSummary",
    "Context",
    "ContextSection",
    "Doctor",
    "EndBody",
    "EntityFact",
    "EntityFactsOut",
    "EntityRelation",
    "Envelope",
    "ErrorBody",
    "ErrorEnvelope",
    "EventOut",
    "ForgetBody",
    "ForgetPlace",
    "ForgetPlan",
    "ForgetReceipt",
    "Forgotten",
    "ForgottenMemory",
    "GraphEdge",
    "GraphNode",
    "Health",
    "Hit",
    "JobOut",
    "JobRunOut",
    "JobStarted",
    "JobUndone",
    "KnowledgeGraphOut",
    "Logged",
    "MemoryChange",
    "MemoryOut",
    "MemoryRead",
    "MemoryReview",
    "MessageBody",
    "MessageOut",
    "Moment",
    "NoteAppendBody",
    "NoteEntry",
    "NoteOut",
    "NoteWriteBody",
    "NoteWritten",
    "NoticedEnvelope",
    "OutboxMessage",
    "Poll",
    "RememberBody",
    "Remembered",
    "Result",
    "Sample",
    "SendBody",
    "SendPayload",
    "SenderBody",
    "SenderOut",
    "SentMessage",
    "SessionDetail",
    "SessionOut",
    "TaskCreateBody",
    "TaskOut",
    "TaskUpdateBody",
    "TelemetryAnswer",
    "TelemetryBody",
    "ToolCall",
    "ToolInfo",
    "moment",
]
