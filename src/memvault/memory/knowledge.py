"""The knowledge graph as every surface answers it: the graph around an entity, and
what is known of one entity (its facts and relations, today, on a day, or all).

The tools, the HTTP routes and the CLI in direct mode all call these two
functions, so one question gets one answer and a mistake reads as the same
sentence everywhere. Values arrive as the caller typed them (a day as text)
and are checked here.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from memvault.errors import InvalidInputError
from memvault.index.graph import knowledge_graph
from memvault.index.index import MemoryIndex
from memvault.vault.entities import Entities

MAX_DEPTH = 5
MAX_NODES = 5000
DEFAULT_NODES = 500


def graph_view(
    index: MemoryIndex,
    entity: str | None = None,
    *,
    depth: int = 1,
    include_ended: bool = True,
    max_nodes: int = DEFAULT_NODES,
) -> dict[str, Any]:
    """The graph around ``entity`` up to ``depth`` hops, or every entity's when it is None
    (:func:`memvault.index.graph.knowledge_graph`), as JSON-ready data."""
    if not 1 <= max_nodes <= MAX_NODES:
        raise InvalidInputError(f"max_nodes must be between 1 and {MAX_NODES}, not {max_nodes}.")
    graph = knowledge_graph(
        index, entity, depth=depth, max_nodes=max_nodes, include_ended=include_ended
    )
    return graph.to_dict()


def parse_day(text: str | None) -> date | None:
    """A day given as YYYY-MM-DD (None when not given); one sentence when it is not one."""
    if text is None:
        return None
    cleaned = text.strip()
    try:
        return date.fromisoformat(cleaned)
    except ValueError:
        raise InvalidInputError(
            f"{cleaned!r} is not a date; give the day as YYYY-MM-DD, e.g. 2025-06-01."
        ) from None


def entity_facts(
    entities: Entities,
    name: str,
    *,
    as_of: str | None = None,
    history: bool = False,
) -> dict[str, Any]:
    """The entity called ``name`` (file name, title or alias) with its facts and relations.

    By default the ones that hold today (not closed with ``valid_until``);
    ``as_of`` (YYYY-MM-DD) the ones that held on that day; ``history`` every
    one, closed ones included, each marked ``current`` or not.
    """
    if not name.strip():
        raise InvalidInputError("Name an entity, e.g. 'Caroline'.")
    day = parse_day(as_of)
    if day is not None and history:
        raise InvalidInputError(
            "Ask for the facts on one day (as_of) or for every fact (history), not both."
        )
    entity = entities.get(name)
    if history:
        facts, relations = entity.facts, entity.relations
    else:
        facts = [f for f in entity.facts if f.current(day)]
        relations = [r for r in entity.relations if r.current(day)]
    return {
        "name": entity.name,
        "type": entity.type,
        "aliases": entity.aliases,
        "path": entity.path,
        "tags": entity.tags,
        "as_of": day.isoformat() if day else None,
        "history": history,
        "facts": [f.to_dict() for f in facts],
        "relations": [r.to_dict() for r in relations],
    }
