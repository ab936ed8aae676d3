"""Knowledge graph tools: ``get_knowledge_graph`` (entities and their typed relations,
around one entity or for the whole vault) and ``entity_facts`` (what is known of one
entity, today, on a given day, or with its history)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from memvault.memory.knowledge import DEFAULT_NODES, MAX_DEPTH, MAX_NODES, entity_facts, graph_view
from memvault.tools.inputs import ToolInput, names
from memvault.tools.registry import Tool, ToolContext

_ENTITY = names("entity", "name", "center", "node", "person", "about")
_HINT = (
    "Entities are the notes in Contacts/, Projects/ and Entities/; call get_knowledge_graph "
    "without an entity to see them all."
)


class KnowledgeGraphInput(ToolInput):
    entity: str | None = Field(
        None,
        description=(
            "The entity to centre on: a name, alias or note path, e.g. 'Melanie' or "
            "'Projects/Apollo.md'. Leave it out for every entity in the vault."
        ),
        validation_alias=_ENTITY,
    )
    depth: int = Field(
        1,
        ge=0,
        le=MAX_DEPTH,
        description=f"Hops to walk from the entity (0 to {MAX_DEPTH}, default 1).",
        validation_alias=names("depth", "hops"),
    )
    include_ended: bool = Field(
        True,
        description="Include relations that have ended (marked current: false). Default true.",
        validation_alias=names("include_ended", "ended", "history"),
    )
    max_nodes: int = Field(
        DEFAULT_NODES,
        ge=1,
        le=MAX_NODES,
        description=f"At most this many nodes (default {DEFAULT_NODES}); 'truncated' says when "
        "more were left out.",
        validation_alias=names("max_nodes", "limit", "maxNodes"),
    )


class EntityFactsInput(ToolInput):
    entity: str = Field(
        description="The entity: a name or alias, e.g. 'Melanie' or 'Mel'.",
        validation_alias=_ENTITY,
        min_length=1,
    )
    as_of: str | None = Field(
        None,
        description="A day, YYYY-MM-DD: the facts and relations that held on it.",
        validation_alias=names("as_of", "asOf", "date", "on", "day"),
    )
    history: bool = Field(
        False,
        description="Every fact and relation, closed ones included (each marked current "
        "or not). Default false: only what holds today.",
        validation_alias=names("history", "all", "include_ended"),
    )


def _graph(ctx: ToolContext, args: KnowledgeGraphInput) -> dict[str, Any]:
    ctx.fresh_index()
    return graph_view(
        ctx.runtime.index,
        args.entity,
        depth=args.depth,
        include_ended=args.include_ended,
        max_nodes=args.max_nodes,
    )


def _facts(ctx: ToolContext, args: EntityFactsInput) -> dict[str, Any]:
    return entity_facts(ctx.runtime.entities, args.entity, as_of=args.as_of, history=args.history)


TOOLS = [
    Tool(
        name="get_knowledge_graph",
        title="Knowledge graph",
        description=(
            "The knowledge graph: entities (people, projects, places, organisations, things) "
            "and their typed relations (friend_of, works_at, ...), plus the notes, memories "
            "and tags linked to them. Give an entity for its neighbourhood up to 'depth' "
            "hops; leave it out for every entity in the vault. Returns nodes (id, name, "
            "type) and edges (source, target, relation, current: false once ended)."
        ),
        input_model=KnowledgeGraphInput,
        handler=_graph,
        not_found_hint=_HINT,
    ),
    Tool(
        name="entity_facts",
        title="Facts about an entity",
        description=(
            "What is known of one entity: its name, type, aliases, note path, facts "
            "(category, text, valid_from, valid_until, source) and relations. By default "
            "what holds today; as_of (YYYY-MM-DD) for what held on that day, e.g. a "
            "favourite that has since changed; history for every fact, closed ones too."
        ),
        input_model=EntityFactsInput,
        handler=_facts,
        not_found_hint=_HINT,
    ),
]
