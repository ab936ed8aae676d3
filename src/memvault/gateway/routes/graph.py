"""The knowledge graph: ``GET /v1/graph`` (around an entity, or every entity) and
``GET /v1/graph/entities/{name}/facts`` (an entity's facts and relations)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from memvault.gateway.routes import COMMON_ERRORS, DaemonDep, errors
from memvault.gateway.schemas import EntityFactsOut, Envelope, KnowledgeGraphOut
from memvault.memory.knowledge import DEFAULT_NODES, MAX_DEPTH, MAX_NODES, entity_facts, graph_view

router = APIRouter(prefix="/v1", tags=["graph"])

# Values are checked by memory.knowledge, the code `memvault --direct graph` runs, so a
# mistake reads the same through the daemon; the parameters here check types only.
EntityName = Annotated[str, Path(description="A name, alias or note path, e.g. Melanie.")]


@router.get(
    "/graph", response_model=Envelope[KnowledgeGraphOut], responses=errors(*COMMON_ERRORS, 404)
)
def graph(
    daemon: DaemonDep,
    entity: Annotated[
        str | None,
        Query(description="The entity to centre on (name, alias or path); none: every entity."),
    ] = None,
    depth: Annotated[int, Query(description=f"Hops from the entity, 0 to {MAX_DEPTH}.")] = 1,
    include_ended: Annotated[
        bool, Query(description="Include ended relations (marked current: false).")
    ] = True,
    max_nodes: Annotated[
        int, Query(description=f"At most this many nodes, 1 to {MAX_NODES}.")
    ] = DEFAULT_NODES,
) -> dict[str, Any]:
    """Entities and their typed relations, with the notes, memories and tags linked to
    them: around one entity up to ``depth`` hops, or between every entity."""
    daemon.fresh_index()
    found = graph_view(
        daemon.runtime.index,
        entity,
        depth=depth,
        include_ended=include_ended,
        max_nodes=max_nodes,
    )
    return {"ok": True, "result": found}


@router.get(
    "/graph/entities/{name:path}/facts",
    response_model=Envelope[EntityFactsOut],
    responses=errors(*COMMON_ERRORS, 404),
)
def facts(
    name: EntityName,
    daemon: DaemonDep,
    as_of: Annotated[
        str | None, Query(description="A day, YYYY-MM-DD: the facts that held on it.")
    ] = None,
    history: Annotated[
        bool, Query(description="Every fact and relation, closed ones included.")
    ] = False,
) -> dict[str, Any]:
    """An entity's name, type, aliases and note, with the facts and relations that hold
    today, held on ``as_of``, or (``history``) all of them."""
    found = entity_facts(daemon.runtime.entities, name, as_of=as_of, history=history)
    return {"ok": True, "result": found}
