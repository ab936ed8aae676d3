"""Memories, search and context: ``/v1/memories``, ``/v1/search``, ``/v1/context``
(which also answers a channel conversation's context, with ``adapter=``), and what
consolidation on write held for review or changed in a memory.

A token bound to an agent (:mod:`memvault.acting`) lists, reads, searches and forgets
only that agent's memories; another's answers as a memory that does not exist would.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from memvault.acting import confined_agent, sees
from memvault.errors import InvalidInputError, NotFoundError
from memvault.gateway.daemon import Daemon
from memvault.gateway.routes import COMMON_ERRORS, DaemonDep, errors
from memvault.gateway.schemas import (
    ChannelContext,
    Context,
    Envelope,
    ForgetBody,
    ForgetPlan,
    ForgetReceipt,
    Forgotten,
    Hit,
    MemoryChange,
    MemoryEditBody,
    MemoryOut,
    MemoryRead,
    MemoryReview,
    NoticedEnvelope,
    RememberBody,
    Remembered,
)
from memvault.index.filters import SearchFilters, parse_day
from memvault.index.search import snippet
from memvault.privacy.secrets import noticed
from memvault.vault.memories import LOW_TRUST, Memory

router = APIRouter(prefix="/v1", tags=["memory"])

# Values are checked by the services themselves, the code `memvault --direct` runs, so
# a mistake reads the same through the daemon; the parameters here check types only.
MemoryId = Annotated[str, Path(description="A memory id, e.g. m-3f9a1c2b.")]
Limit = Annotated[int, Query(description="How many results (1 to 1000).")]
QueryText = Annotated[str, Query(description="What to look for, in your own words.")]
Keyword = Annotated[bool, Query(description="Keywords only: no embedding model is used.")]
Mmr = Annotated[
    float | None, Query(ge=0, le=1, description="Diversify results (0..1; 0.7 is mild).")
]
MinScore = Annotated[
    float | None,
    Query(
        ge=0,
        le=5,
        description="Leave out results scoring below this (default search.min_score); "
        "0 lists the closest matches even when nothing is relevant.",
    ),
]


def run_search(
    daemon: Daemon,
    query: str,
    limit: int,
    filters: SearchFilters,
    *,
    keyword: bool,
    mmr: float | None,
    min_score: float | None,
) -> dict[str, Any]:
    """Hybrid search as the CLI's ``search`` and ``recall`` run it: the envelope of hit dicts.

    A model still loading is not waited for: the hits come from keywords
    and the notice says so. A token bound to an agent finds that agent's memories
    only, each shown as written (a memory it embeds is not shown for it).
    """
    daemon.fresh_index()
    agent = confined_agent()
    own: dict[str, Memory] = {}
    if agent is not None:
        own = daemon.runtime.memories.of_agent(agent)
        mine = frozenset(own)
        asked = filters.memory_ids  # a caller's own narrowing holds within the agent's
        filters = replace(filters, memory_ids=mine if asked is None else mine & asked)
    hits = daemon.runtime.searcher.search(
        query,
        limit=limit,
        filters=filters,
        mode="keyword" if keyword else "hybrid",
        mmr_lambda=mmr,
        min_score=min_score,
        wait_for_model=False,
    )
    if agent is not None:
        for hit in hits:
            if hit.id in own:
                hit.snippet = snippet(own[hit.id].text)
    return {"ok": True, "result": [hit.to_dict() for hit in hits], "notice": hits.notice}


def visible(daemon: Daemon, memory_id: str) -> Memory:
    """The memory ``memory_id``, if the caller may see it: for a token bound to an agent,
    another's is not found, in the words of one that does not exist."""
    memory = daemon.runtime.memories.get(memory_id)
    if not sees(memory.agent):
        raise NotFoundError(
            f"No memory with id {memory.id!r}.", hint="List memories with `memvault memories`."
        )
    return memory


@router.post(
    "/memories",
    response_model=NoticedEnvelope[Remembered],
    responses=errors(*COMMON_ERRORS, 422),
)
def remember(body: RememberBody, daemon: DaemonDep) -> dict[str, Any]:
    """Store a memory with consolidation on write; a duplicate, or an update merged into an
    existing memory, returns that memory (``created_new`` false); ``consolidation`` says
    what was decided. A secret in the text is replaced by a marker (``secrets_removed``
    and the notice name it) or, with ``[privacy] secrets = "refuse"``, is a 422."""
    with noticed() as removed:
        result = daemon.runtime.consolidation.remember(
            body.text,
            category=body.category,
            importance=body.importance,
            tags=body.tags,
            source=body.source if body.source is not None else "api",
        )
    answer = {**result.response(), **removed.field()}
    return {"ok": True, "result": answer, "notice": removed.notice()}


@router.get("/memories", response_model=Envelope[list[MemoryOut]], responses=errors(*COMMON_ERRORS))
def list_memories(
    daemon: DaemonDep,
    category: Annotated[str | None, Query(description="Only this category.")] = None,
    tag: Annotated[str | None, Query(description="Only memories with this tag.")] = None,
    archived: Annotated[bool, Query(description="Include archived memories.")] = False,
    limit: Annotated[int | None, Query(ge=1, description="At most this many (newest).")] = None,
    trust: Annotated[
        str | None,
        Query(
            description="Only memories of this trust: low (text from someone else that "
            "reads as an instruction to the agent)."
        ),
    ] = None,
) -> dict[str, Any]:
    """Memories, oldest first."""
    if trust is not None and trust.strip().casefold() != LOW_TRUST:
        raise InvalidInputError(f"trust takes only {LOW_TRUST!r}, not {trust[:40]!r}.")
    found = daemon.runtime.memories.list(category=category, tag=tag, include_archived=archived)
    found = [m for m in found if sees(m.agent) and (trust is None or m.trust == LOW_TRUST)]
    if limit is not None:
        found = found[-limit:]
    return {"ok": True, "result": [m.to_dict() for m in found]}


@router.get(
    "/memories/search",
    response_model=NoticedEnvelope[list[Hit]],
    responses=errors(*COMMON_ERRORS),
)
def recall(
    daemon: DaemonDep,
    q: QueryText,
    limit: Limit = 10,
    category: Annotated[str | None, Query(description="Only this category.")] = None,
    keyword: Keyword = False,
    min_score: MinScore = None,
) -> dict[str, Any]:
    """Memories about a topic, best first (hybrid search over memories only)."""
    filters = SearchFilters(kinds=("memory",), category=category)
    return run_search(daemon, q, limit, filters, keyword=keyword, mmr=None, min_score=min_score)


# Before /memories/{memory_id:path}, which would take these paths for memory ids.


@router.get(
    "/memories/reviews",
    response_model=Envelope[list[MemoryReview]],
    responses=errors(*COMMON_ERRORS),
)
def memory_reviews(daemon: DaemonDep) -> dict[str, Any]:
    """The consolidation decisions held for the owner's review, oldest first (what
    ``memvault memory review`` lists); each memory was added as it was meanwhile."""
    pending = daemon.runtime.consolidation.reviews()
    return {"ok": True, "result": [r.to_dict() for r in pending]}


@router.get(
    "/memories/{memory_id:path}/history",
    response_model=Envelope[list[MemoryChange]],
    responses=errors(*COMMON_ERRORS),
)
def memory_history(memory_id: MemoryId, daemon: DaemonDep) -> dict[str, Any]:
    """What consolidation and reviews changed in a memory, oldest first (what
    ``memvault memory history`` shows); empty when nothing did."""
    if confined_agent() is not None:
        visible(daemon, memory_id)
    changes = daemon.runtime.consolidation.history(memory_id)
    return {"ok": True, "result": [c.to_dict() for c in changes]}


@router.get(
    "/memories/{memory_id:path}/access",
    response_model=Envelope[list[MemoryRead]],
    responses=errors(*COMMON_ERRORS, 404),
)
def memory_access(
    memory_id: MemoryId,
    daemon: DaemonDep,
    limit: Annotated[int, Query(ge=1, le=10_000, description="At most this many.")] = 100,
) -> dict[str, Any]:
    """Who read a memory, when and how (what ``memvault memory access`` shows), newest
    first, within ``[privacy] reads_keep_days``."""
    memory = visible(daemon, memory_id)
    reads = daemon.runtime.reads.of(memory.id, limit)
    return {"ok": True, "result": [r.to_dict() for r in reads]}


@router.get(
    "/memories/{memory_id:path}",
    response_model=Envelope[MemoryOut],
    responses=errors(*COMMON_ERRORS, 404),
)
def get_memory(memory_id: MemoryId, daemon: DaemonDep) -> dict[str, Any]:
    """One memory (its read is recorded, path ``get``)."""
    memory = visible(daemon, memory_id)
    daemon.runtime.record_reads([memory.id], "get")
    return {"ok": True, "result": memory.to_dict()}


@router.patch(  # no :path: PATCH .../history or .../access is a 405, not this route
    "/memories/{memory_id}",
    response_model=Envelope[MemoryOut],
    responses=errors(*COMMON_ERRORS, 404, 409),
)
def change_memory(memory_id: MemoryId, body: MemoryEditBody, daemon: DaemonDep) -> dict[str, Any]:
    """The owner's change to a memory, what the console's edit and bulk actions do: new
    ``text`` (with ``expected_hash``, the hash of its note as ``GET /v1/notes/{path}``
    gave it: a note changed since is a 409 and nothing is written), another ``category``,
    tags added (``add_tags``). Each change is in its ``/history``, by owner."""
    if body.text is None and body.category is None and not body.add_tags:
        raise InvalidInputError("Name a change: text (with expected_hash), category or add_tags.")
    if body.text is not None and not body.expected_hash:
        raise InvalidInputError(
            "A new text needs expected_hash, the hash of the memory's note as read "
            "(GET /v1/notes/PATH), so an edit made meanwhile is never overwritten."
        )
    # Everything checked before the first change: a bad part changes nothing.
    memories = daemon.runtime.memories
    category = memories.check_category(body.category) if body.category is not None else None
    if body.add_tags and not any(t.strip().lstrip("#") for t in body.add_tags):
        raise InvalidInputError("add_tags holds no tag.")
    memory = visible(daemon, memory_id)
    consolidation = daemon.runtime.consolidation
    if body.text is not None:
        memory = consolidation.edit(memory.id, body.text, expected_hash=body.expected_hash or "")
    if category is not None:
        memory = consolidation.recategorize(memory.id, category)
    if body.add_tags:
        memory = consolidation.tag(memory.id, body.add_tags)
    return {"ok": True, "result": memory.to_dict()}


@router.delete(
    "/memories/{memory_id:path}",
    response_model=Envelope[Forgotten],
    responses=errors(*COMMON_ERRORS, 404),
)
def forget(memory_id: MemoryId, daemon: DaemonDep) -> dict[str, Any]:
    """Forget a memory everywhere (its line, the index, insights, entity notes, MEMORY.md,
    the journal, chat copies); ``receipt`` lists each place and what was done there."""
    if confined_agent() is not None:
        visible(daemon, memory_id)
    receipt = daemon.runtime.forgetter.forget(memory_id)
    (memory,) = receipt.forgotten
    answer = {**memory.to_dict(), "forgotten": True, "receipt": receipt.to_dict()}
    return {"ok": True, "result": answer}


@router.post(
    "/forget",
    response_model=Envelope[ForgetPlan | ForgetReceipt],
    responses=errors(*COMMON_ERRORS, 404),
)
def forget_everything(body: ForgetBody, daemon: DaemonDep) -> dict[str, Any]:
    """Forget everything about a person (``contact``) or a topic (``about``): with
    ``dry_run`` what would be removed (the plan), else the receipt of removing it."""
    if (body.contact is None) == (body.about is None):
        raise InvalidInputError("Name one thing to forget: contact or about.")
    forgetter = daemon.runtime.forgetter
    if body.contact is not None:
        plan = forgetter.plan_contact(body.contact)
    else:
        plan = forgetter.plan_about(body.about or "")
    if body.dry_run:
        return {"ok": True, "result": plan.to_dict()}
    return {"ok": True, "result": forgetter.apply(plan, body.memory_ids).to_dict()}


@router.get("/search", response_model=NoticedEnvelope[list[Hit]], responses=errors(*COMMON_ERRORS))
def search(
    daemon: DaemonDep,
    q: QueryText,
    limit: Limit = 10,
    kind: Annotated[
        list[str] | None, Query(description="Only these kinds (note, memory, task, ...).")
    ] = None,
    folder: Annotated[str | None, Query(description="Only notes under this folder.")] = None,
    category: Annotated[str | None, Query(description="Only memories of this category.")] = None,
    tag: Annotated[list[str] | None, Query(description="Only items with these tags.")] = None,
    since: Annotated[str | None, Query(description="Created on or after YYYY-MM-DD.")] = None,
    until: Annotated[str | None, Query(description="Created before YYYY-MM-DD.")] = None,
    archived: Annotated[bool, Query(description="Include archived memories.")] = False,
    keyword: Keyword = False,
    mmr: Mmr = None,
    min_score: MinScore = None,
) -> dict[str, Any]:
    """Notes and memories by keywords and meaning, fused (OpenClaw's memory_search shape)."""
    tz = daemon.runtime.clock.tz
    filters = SearchFilters(
        folder=folder,
        kinds=tuple(kind or ()),
        category=category,
        tags=tuple(tag or ()),
        since=parse_day(since, tz),
        until=parse_day(until, tz),
        include_archived=archived,
    )
    return run_search(daemon, q, limit, filters, keyword=keyword, mmr=mmr, min_score=min_score)


@router.get(
    "/context",
    response_model=NoticedEnvelope[Context | ChannelContext],
    responses=errors(*COMMON_ERRORS, 404),
)
def context(
    daemon: DaemonDep,
    query: Annotated[str | None, Query(description="The request about to be handled.")] = None,
    budget: Annotated[
        int | None, Query(description="Token budget, 50 to 200000 (default 2000).")
    ] = None,
    adapter: Annotated[
        str | None,
        Query(description="A channel, e.g. telegram: its conversation's context instead."),
    ] = None,
    conversation: Annotated[
        str | None,
        Query(description="With adapter: 'owner' (the default), a chat id, or a contact's name."),
    ] = None,
    audience: Annotated[
        str | None,
        Query(
            alias="as",
            description="Build it as this audience would get it: owner, group:NAME, or a "
            "contact (name, alias, note path).",
        ),
    ] = None,
) -> dict[str, Any]:
    """The Markdown an agent gets at the start of a run, within a token budget.

    While the embedding model loads, what is relevant is found by keywords
    and the notice says so.

    With ``adapter`` (the earlier design's ``GET /v1/context?adapter=``), the
    context of a conversation on that channel instead: the chat, its name, the
    sender's contact note, the session, and what the platform says of it.
    With ``as``, the context a contact or a group would be given: only what is
    shared with them.
    """
    if adapter:
        channel = daemon.hub.channel_named(adapter)
        found = daemon.hub.context(channel, conversation or None)
        return {"ok": True, "result": found, "notice": None}
    if query:
        daemon.fresh_index()
    result = daemon.runtime.build_context(
        query or None, budget, audience=audience, wait_for_model=False
    )
    return {"ok": True, "result": result.to_dict(), "notice": result.notice}
