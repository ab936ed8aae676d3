"""The Knowledge page: the entities (the notes of ``Contacts/``, ``Projects/`` and
``Entities/``), one entity's facts and relations with the dates they held, and what
mentions it; the insights the distill job wrote, each with its evidence.

An entity's facts are :func:`memvault.memory.knowledge.entity_facts` with every fact
(``memvault graph facts --history``, ``GET /v1/graph/entities/{name}/facts?history=true``),
and its mentions the edges into it of the graph around it
(:func:`~memvault.memory.knowledge.graph_view`, ``GET /v1/graph?entity=``). The
insights are the distill job's notes as it reads them
(:func:`memvault.jobs.distill.read_insights`); their evidence, the memories they were
distilled from, each shown only when the console may see it. The page only reads.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from memvault.acting import confined_agent, sees
from memvault.console.pages import Console, PageRefusedError
from memvault.console.stamped import Stamped
from memvault.errors import MemvaultError
from memvault.gateway.daemon import Daemon
from memvault.gateway.routes.memory import visible
from memvault.jobs.distill import MARKERS, read_insights
from memvault.memory.knowledge import MAX_NODES, entity_facts, graph_view
from memvault.vault.memories import MEMORY_DIR, Memory

ENTITIES_SHOWN = 200
INSIGHTS_SHOWN = 30
MENTIONS_SHOWN = 50
_MEMORY = "memory:"
_PLAIN = ("links_to", "mentions", "tagged")
_NOT_ENTITIES = ("tag", "memory")
_MAX_NAME = 300


def overview(daemon: Daemon) -> dict[str, Any]:
    """Every entity (name, type, how many of its relations hold), from the
    graph of every entity (the index: no note is read), and the insights."""
    daemon.fresh_index()
    graph = graph_view(daemon.runtime.index, None, include_ended=False, max_nodes=MAX_NODES)
    relations = Counter(e["source"] for e in graph["edges"] if e["relation"] not in _PLAIN)
    entities = sorted(
        (
            {
                "name": node["name"],
                "path": node["id"],
                "type": node["type"],
                "relations": relations[node["id"]],
            }
            for node in graph["nodes"]
            if node["id"].endswith(".md") and node["type"] not in _NOT_ENTITIES
        ),
        key=lambda e: str(e["name"]).casefold(),
    )
    return {
        "entities": entities[:ENTITIES_SHOWN],
        "more": max(len(entities) - ENTITIES_SHOWN, 0),
        **insights(daemon),
    }


def entity(daemon: Daemon, name: str) -> dict[str, Any]:
    """One entity: every fact and relation (closed ones marked), and what mentions it."""
    found = entity_facts(daemon.runtime.entities, name, history=True)
    daemon.fresh_index()
    graph = graph_view(daemon.runtime.index, found["path"], depth=1)
    names = {node["id"]: node for node in graph["nodes"]}
    mentions: list[dict[str, Any]] = []
    seen: set[str] = set()
    for edge in graph["edges"]:
        source = edge["source"]
        if edge["target"] != found["path"] or source in seen or len(mentions) >= MENTIONS_SHOWN:
            continue
        seen.add(source)
        if source.startswith(_MEMORY):
            memory_id = source.removeprefix(_MEMORY)
            if confined_agent() is None:  # sees every memory: the graph's text will do
                mentions.append(_mention(memory_id, None, names[source]["name"], edge["relation"]))
                continue
            with contextlib.suppress(MemvaultError):  # not this agent's to see
                memory = visible(daemon, memory_id)
                mentions.append(_mention(memory.id, None, memory.text, edge["relation"]))
        elif source in names:
            node = names[source]
            mentions.append(_mention(None, source, node["name"], edge["relation"]))
    return {"entity": found, "mentions": mentions}


def _mention(memory: str | None, note: str | None, text: str, how: str) -> dict[str, Any]:
    return {"memory": memory, "note": note, "text": text, "how": how}


@dataclass(frozen=True)
class _Insight:
    """An insight note as the page shows it, with the memories it came from that exist."""

    path: str
    title: str
    text: str
    evidence: tuple[Memory, ...]


# The insight notes read, kept while no note of theirs and no memory file changes.
_INSIGHTS: Stamped[tuple[list[_Insight], int]] = Stamped(keep=2)


def insights(daemon: Daemon) -> dict[str, Any]:
    """The distill job's insight notes: title, text and the memories they came from (those
    the console may see)."""
    runtime = daemon.runtime
    folder = runtime.settings.jobs.distill.folder
    found, more = _INSIGHTS.get(
        runtime.vault, (folder, MEMORY_DIR), lambda: _read_insights(daemon, folder), folder
    )
    shown = [
        {
            "path": insight.path,
            "title": insight.title,
            "text": insight.text,
            "evidence": [{"id": m.id, "text": m.text} for m in insight.evidence if sees(m.agent)],
        }
        for insight in found
    ]
    return {"insights": shown, "insights_more": more}


def _read_insights(daemon: Daemon, folder: str) -> tuple[list[_Insight], int]:
    """The insights shown and how many more there are; their evidence looked up in one pass
    over the memories (one lookup per memory read the memory files' listing each time)."""
    runtime = daemon.runtime
    found = read_insights(runtime, folder)
    chosen = sorted(found, key=lambda i: i.path)[:INSIGHTS_SHOWN]
    wanted = {memory_id for insight in chosen for memory_id in insight.sources}
    by_id: dict[str, Memory] = {}
    if wanted:
        for memory in runtime.memories.all():
            if memory.id in wanted:
                by_id.setdefault(memory.id, memory)
    out = []
    for insight in chosen:
        # Read again as text (read_insights parsed its frontmatter): the title and the block.
        whole = runtime.vault.read_text(insight.path)
        title = next(
            (line[2:].strip() for line in whole.splitlines() if line.startswith("# ")),
            insight.path,
        )
        text = ""
        with contextlib.suppress(MemvaultError):
            inner = MARKERS.inner(whole, insight.path) or ""
            text = inner.split("## Evidence")[0].replace("## Insight", "", 1).strip()
        evidence = tuple(by_id[i] for i in insight.sources if i in by_id)
        out.append(_Insight(insight.path, title, text, evidence))
    return out, max(len(found) - INSIGHTS_SHOWN, 0)


class KnowledgePage:
    """The Knowledge page's routes, on a console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.daemon = console.daemon

    def routes(self) -> list[BaseRoute]:
        """``/knowledge`` and an entity's page."""
        return [
            Route("/knowledge", self.knowledge_page),
            Route("/knowledge/{name:path}", self.entity_page),
        ]

    async def knowledge_page(self, request: Request) -> Response:
        """The entities and the insights."""
        return await self.console.show(
            request, "knowledge.html", "knowledge", overview, self.daemon
        )

    async def entity_page(self, request: Request) -> Response:
        """One entity's facts, relations and mentions."""
        console = self.console
        try:
            visit = console.visit(request)
            name = request.path_params["name"][:_MAX_NAME]
            console.plain(name, "entity")
            data = await console.run(visit, entity, self.daemon, name)
        except PageRefusedError as refusal:
            return console.refused(refusal)
        return console.render("entity.html", visit, page="knowledge", **data)
