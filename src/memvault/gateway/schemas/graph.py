"""The knowledge graph: nodes, edges, an entity's facts and relations."""

from __future__ import annotations

from pydantic import Field

from memvault.gateway.schemas.base import Result


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
