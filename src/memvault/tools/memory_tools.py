"""Memory tools: remember, recall, forget, OpenClaw's memory_search / memory_get,
the context builder, and the link graph."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from memvault.errors import InvalidInputError, MemvaultError
from memvault.index.filters import SearchFilters
from memvault.index.graph import backlinks, related
from memvault.index.search import Hit
from memvault.llm.untrusted import wrap_material
from memvault.tools.inputs import ToolInput, limit_field, min_score_field, names, path_field
from memvault.tools.policy import DELETIONS, FILE_WRITES, Tier
from memvault.tools.registry import Annotations, Tool, ToolContext, noted
from memvault.vault.memories import LOW_TRUST, Memory
from memvault.vocabulary import CATEGORIES, CATEGORY_ALIASES, CONVERSATION

_MEMORY_ID = names("id", "memory_id", "memoryId")
# What a model may file a memory under: memvault's categories (conversation turns are
# captured by memvault itself), and the earlier designs' names for two of them.
REMEMBERED_CATEGORIES = [c for c in CATEGORIES if c != CONVERSATION]
_ALIASES_SAID = ", ".join(f"'{alias}' is {target}" for alias, target in CATEGORY_ALIASES.items())


def category_field(what: str) -> Any:
    """A memory category parameter: memvault's names, the earlier designs' aliases too."""
    return Field(
        None,
        description=(
            f"{what}: one of {', '.join(REMEMBERED_CATEGORIES)} (default: fact). The earlier "
            f"designs' names are taken as memvault's: {_ALIASES_SAID}."
        ),
        json_schema_extra={"enum": [*REMEMBERED_CATEGORIES, *CATEGORY_ALIASES]},
    )


class Remember(ToolInput):
    fact: str = Field(
        description=(
            "The fact, preference or decision to keep, as one self-contained sentence, e.g. "
            "'The owner prefers short answers'."
        ),
        validation_alias=names("fact", "text", "content", "memory", "note"),
        min_length=1,
    )
    category: str | None = category_field("What kind of memory it is")
    importance: float | None = Field(
        None, ge=0, le=1, description="0 (trivia) to 1 (essential); default 0.5."
    )
    tags: list[str] = Field(default_factory=list, description="Tags, without '#'.")


class Recall(ToolInput):
    topic: str = Field(
        description="What to recall, e.g. 'user preferences' or 'the Apollo project'.",
        validation_alias=names("topic", "query", "about", "subject"),
        min_length=1,
    )
    category: str | None = Field(
        None, description=f"Only memories of this category ({_ALIASES_SAID})."
    )
    limit: int = limit_field(10)
    min_score: float | None = min_score_field()


class Forget(ToolInput):
    id: str = Field(
        description="The memory's id, e.g. 'm-3f9a1c2b' (from recall or memory_search).",
        validation_alias=_MEMORY_ID,
        min_length=1,
    )


class MemorySearch(ToolInput):
    query: str = Field(description="Search query text.", min_length=1)
    maxResults: int = Field(  # noqa: N815 - OpenClaw's parameter name
        6,
        ge=1,
        le=50,
        description="Maximum results to return (default 6).",
        validation_alias=names("maxResults", "max_results", "limit", "k"),
    )
    minScore: float | None = min_score_field()  # noqa: N815 - OpenClaw's parameter name


class MemoryGet(ToolInput):
    path: str = path_field(
        "A vault path from memory_search (e.g. 'Memory/Facts.md'), "
        "or a memory id such as 'm-3f9a1c2b'."
    )
    from_: int | None = Field(
        None,
        ge=1,
        description="First line to read (1-based); default the start.",
        validation_alias=names("from", "from_", "startLine", "start_line", "line"),
    )
    lines: int | None = Field(
        None,
        ge=1,
        description="How many lines to read; default to the end.",
        validation_alias=names("lines", "numLines", "count"),
    )


class GetContext(ToolInput):
    query: str | None = Field(
        None,
        description="The request about to be handled, to include what is relevant to it.",
        validation_alias=names("query", "task", "request", "topic"),
    )
    budget: int | None = Field(
        None,
        ge=50,
        le=200_000,
        description="Token budget (default 2000).",
        validation_alias=names("budget", "budget_tokens", "maxTokens", "max_tokens"),
    )


class NoteRef(ToolInput):
    path: str = path_field("Vault-relative path of a note, e.g. 'Projects/Apollo.md'.")
    limit: int = limit_field(10)


def _remember(ctx: ToolContext, args: Remember) -> dict[str, Any]:
    source = f"{ctx.surface}:{ctx.session}" if ctx.session else ctx.surface
    result = ctx.runtime.consolidation.remember(
        args.fact, category=args.category, importance=args.importance, tags=args.tags, source=source
    )
    memory = result.memory
    return {
        "id": memory.id,
        "stored": result.created,
        "note": result.note(),
        "action": result.action,
        "target": result.target,
        "category": memory.category,
        "path": memory.path,
        "line": memory.line,
        **_trust(memory),
    }


def _doubted(ctx: ToolContext, hit: Hit) -> Memory | None:
    """The memory a hit shows, when it is marked low trust (:mod:`memvault.privacy.trust`)."""
    if hit.id is None:
        return None
    try:
        memory = ctx.runtime.memories.read(hit.path).find(hit.id)
    except MemvaultError:
        return None
    return memory if memory is not None and memory.trust == LOW_TRUST else None


def _trust(memory: Memory | None) -> dict[str, Any]:
    """A low-trust memory's mark, for a tool's answer (nothing for any other)."""
    if memory is None or memory.trust != LOW_TRUST:
        return {}
    where = memory.fields.get("trust_from") or memory.source
    return {"trust": LOW_TRUST, "trust_reason": memory.trust_reason, "from": where}


def _shown(text: str, memory: Memory | None) -> str:
    """What a model reads of a memory: a low-trust one's text only inside the data tags."""
    return wrap_material(text) if memory is not None else text


def _recall(ctx: ToolContext, args: Recall) -> dict[str, Any]:
    ctx.fresh_index()
    filters = SearchFilters(kinds=("memory",), category=args.category)
    hits = ctx.search(args.topic, limit=args.limit, filters=filters, min_score=args.min_score)
    data = {
        "topic": args.topic,
        "memories": [
            {
                "id": h.id,
                "text": _shown(h.snippet, doubted),
                "category": h.category,
                "tags": h.tags,
                "created": h.created.isoformat(timespec="minutes") if h.created else None,
                "score": round(h.score, 3),
                **_trust(doubted),
            }
            for h in hits
            for doubted in [_doubted(ctx, h)]
        ],
    }
    return noted(data, hits)


def _forget(ctx: ToolContext, args: Forget) -> dict[str, Any]:
    receipt = ctx.runtime.forgetter.forget(args.id)
    (memory,) = receipt.forgotten
    return {"id": memory.id, "forgotten": True, "text": memory.text, "receipt": receipt.to_dict()}


def _memory_search(ctx: ToolContext, args: MemorySearch) -> dict[str, Any]:
    ctx.fresh_index()
    hits = ctx.search(args.query, limit=args.maxResults, min_score=args.minScore)
    data = {
        "results": [
            {
                "path": h.path,
                "startLine": h.start_line,
                "endLine": h.end_line,
                "score": round(h.score, 4),
                "snippet": _shown(h.snippet, doubted),
                "source": "memory",
                "citation": f"Source: {h.path}#L{h.start_line}-L{h.end_line}",
                "kind": h.kind,
                "id": h.id,
                **_trust(doubted),
            }
            for h in hits
            for doubted in [_doubted(ctx, h)]
        ],
        "backend": "memvault",
        "provider": ctx.runtime.embedder.identity,
    }
    return noted(data, hits)


def _memory_get(ctx: ToolContext, args: MemoryGet) -> dict[str, Any]:
    ref = args.path.strip().lstrip("^")
    if ref.startswith("m-") and "/" not in ref and not ref.endswith(".md"):
        memory = ctx.runtime.memories.get(ref)
        with ctx.reading():
            ctx.runtime.record_reads([memory.id])
        doubted = memory if memory.trust == LOW_TRUST else None
        return {
            "path": memory.path,
            "text": _shown(memory.text, doubted),
            "startLine": memory.line,
            "endLine": memory.line,
            "id": memory.id,
            "category": memory.category,
            **_trust(doubted),
        }
    view = ctx.runtime.notes.read(args.path)
    lines = view.text.splitlines()
    start = args.from_ or 1
    if start > max(len(lines), 1):
        raise InvalidInputError(
            f"{view.path} has {len(lines)} lines; 'from' {start} is past its end."
        )
    count = args.lines if args.lines is not None else len(lines) - start + 1
    chosen = lines[start - 1 : start - 1 + count]
    return {
        "path": view.path,
        "text": "\n".join(chosen),
        "startLine": start,
        "endLine": start + max(len(chosen), 1) - 1,
        "totalLines": len(lines),
    }


def _get_context(ctx: ToolContext, args: GetContext) -> str:
    if args.query:
        ctx.fresh_index()
    with ctx.reading():  # the context's reads: this surface's, by path "context"
        built = ctx.runtime.context.build_result(
            args.query, args.budget, wait_for_model=ctx.wait_for_model
        )
    ctx.notice = built.notice
    return built.text()


def _related(ctx: ToolContext, args: NoteRef) -> dict[str, Any]:
    ctx.fresh_index()
    return {
        "path": args.path,
        "related": [r.to_dict() for r in related(ctx.runtime.index, args.path, args.limit)],
    }


def _backlinks(ctx: ToolContext, args: NoteRef) -> dict[str, Any]:
    ctx.fresh_index()
    links = backlinks(ctx.runtime.index, args.path)
    return {"path": args.path, "backlinks": [b.to_dict() for b in links[: args.limit]]}


_NOT_INDEXED = "Check the path with vault_list; a note written just now is indexed at once."

TOOLS = [
    Tool(
        name="remember",
        title="Remember a fact",
        description=(
            "Store one fact, preference, decision or correction for future sessions. Do it "
            "when the owner asks you to remember something, when a decision is made, a "
            "preference or correction is stated, or an important fact comes up. One "
            "self-contained sentence per memory; it is checked against the nearest memories: a "
            "duplicate is not stored twice, a correction supersedes what it corrects."
        ),
        input_model=Remember,
        handler=_remember,
        tier=Tier.WRITE,
        category=FILE_WRITES,
        annotations=Annotations(idempotent=True),
        summarize=lambda a: f"remember {a.fact[:60]!r}",
    ),
    Tool(
        name="recall",
        title="Recall memories",
        description=(
            "Recall memories about a topic (memories only, best first, with ids). Use it "
            "before answering about the owner, their preferences, people, projects or "
            "past decisions."
        ),
        input_model=Recall,
        handler=_recall,
        searches=True,
    ),
    Tool(
        name="forget",
        title="Forget a memory",
        description=(
            "Delete one memory by id (from recall or memory_search) everywhere: its line, "
            "the index, insights, entity notes, MEMORY.md, the journal and chat copies; the "
            "receipt lists each place. Needs the owner's approval every time; prefer "
            "remembering a correction when something changed."
        ),
        input_model=Forget,
        handler=_forget,
        tier=Tier.DANGEROUS,
        category=DELETIONS,
        annotations=Annotations(destructive=True, idempotent=True),
        summarize=lambda a: f"forget memory {a.id}",
        not_found_hint="Find its id with recall first.",
    ),
    Tool(
        name="memory_search",
        title="Search memory",
        description=(
            "Mandatory recall step: search the owner's memory (memories, notes, journal, "
            "tasks, contacts) before answering questions about prior work, decisions, "
            "dates, people, preferences or todos; returns the top snippets with path and "
            "line numbers. Follow up with memory_get to read more around a result."
        ),
        input_model=MemorySearch,
        handler=_memory_search,
        searches=True,
    ),
    Tool(
        name="memory_get",
        title="Read memory lines",
        description=(
            "Read lines from a vault note found by memory_search (path, from, lines), or "
            "one memory by its id. Read only what you need to keep the context small."
        ),
        input_model=MemoryGet,
        handler=_memory_get,
        not_found_hint="Use a path or id from memory_search.",
    ),
    Tool(
        name="get_context",
        title="Get the memory context",
        description=(
            "The owner's profile, status, urgent tasks, pinned and important memories, what "
            "is relevant to a request and recent activity, within a token budget. Call it "
            "at the start of a task when the context was not given to you."
        ),
        input_model=GetContext,
        handler=_get_context,
        searches=True,
    ),
    Tool(
        name="related_notes",
        title="Related notes",
        description=(
            "Notes related to a note: linked either way, sharing tags, or close in meaning."
        ),
        input_model=NoteRef,
        handler=_related,
        searches=True,
        not_found_hint=_NOT_INDEXED,
    ),
    Tool(
        name="backlinks",
        title="Backlinks",
        description="Notes that link to a note, with the line of each link.",
        input_model=NoteRef,
        handler=_backlinks,
        not_found_hint=_NOT_INDEXED,
    ),
]
