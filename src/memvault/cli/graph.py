"""``memvault graph show [ENTITY] | facts ENTITY``: the knowledge graph.

Both go through the daemon when one serves the vault (``GET /v1/graph``,
``GET /v1/graph/entities/{name}/facts``) and read the vault here otherwise;
either way :mod:`memvault.memory.knowledge` answers, so the output and the
mistakes read the same.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from memvault.cli.common import (
    DirectOption,
    JsonOption,
    VaultOption,
    emit_json,
    group,
    open_runtime,
    say,
    stdout,
    table,
    via_daemon,
)
from memvault.text import one_line
from memvault.vocabulary import counted

app = group("The knowledge graph: entities, their relations and their facts.")

ARROW = "—{relation}→"
# Edges that are links rather than relations a note states: listed after the typed ones.
_PLAIN = ("links_to", "mentions", "tagged")


def _label(node: dict[str, Any] | None, key: str) -> str:
    """How a node reads in an edge line."""
    if node is None:
        return key
    if node["type"] == "memory" and key.startswith("memory:"):
        return f'memory "{one_line(node["name"], 50)}"'
    if node["type"] == "missing":
        return f"{node['name']} (no note yet)"
    return str(node["name"])


def render_graph(graph: dict[str, Any], depth: int) -> None:
    """The centre, then each edge as ``source —relation→ target``; ended ones marked."""
    from rich.text import Text

    nodes = {n["id"]: n for n in graph["nodes"]}
    center = graph["center"]
    if center is None:
        entities = [n for n in graph["nodes"] if n["type"] != "tag"]
        say(f"Knowledge graph of the vault: {counted(len(entities), 'entity')}.")
    else:
        node = nodes[center]
        hops = counted(depth, "hop")
        say(f"{node['name']} ({node['type']}), {center}: what lies within {hops}.")
    order = sorted(
        range(len(graph["edges"])), key=lambda i: graph["edges"][i]["relation"] in _PLAIN
    )
    for i in order:
        edge = graph["edges"][i]
        line = Text("  ")
        line.append(_label(nodes.get(edge["source"]), edge["source"]))
        line.append(f" {ARROW.format(relation=edge['relation'])} ", style="cyan")
        line.append(_label(nodes.get(edge["target"]), edge["target"]))
        if not edge["current"]:
            line.append("  (ended)", style="dim")
            line.stylize("dim")
        stdout.print(line)
    if not graph["edges"]:
        say("  No relations or links yet.")
    say(f"{counted(len(graph['nodes']), 'node')}, {counted(len(graph['edges']), 'edge')}.")
    if graph["truncated"]:
        say("More nodes were left out; raise --max-nodes to see them.")


@app.command()
def show(
    ctx: typer.Context,
    entity: Annotated[
        str | None,
        typer.Argument(
            metavar="[ENTITY]", help="Name, alias or path of the entity; none: every entity."
        ),
    ] = None,
    depth: Annotated[int, typer.Option("--depth", "-d", help="Hops from the entity, 0 to 5.")] = 1,
    ended: Annotated[
        bool,
        typer.Option("--ended/--current", help="Show relations that have ended (the default)."),
    ] = True,
    max_nodes: Annotated[
        int, typer.Option("--max-nodes", help="At most this many nodes, 1 to 5000.")
    ] = 500,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the knowledge graph around an entity, or between every entity."""
    params = {"entity": entity, "depth": depth, "include_ended": ended, "max_nodes": max_nodes}
    graph = via_daemon(ctx, vault, "GET", "/v1/graph", query=params)
    if graph is None:
        from memvault.memory.knowledge import graph_view

        runtime = open_runtime(ctx, vault)
        runtime.index.sync()
        graph = graph_view(
            runtime.index, entity, depth=depth, include_ended=ended, max_nodes=max_nodes
        )
    if as_json:
        emit_json(graph)
    else:
        render_graph(graph, depth)


def _when(fact: dict[str, Any]) -> str:
    start, end = fact["valid_from"], fact["valid_until"]
    if start and end:
        return f"{start} to {end}"
    if start:
        return f"since {start}"
    return f"until {end}" if end else ""


def render_facts(found: dict[str, Any]) -> None:
    """The entity, a table of its facts, then its relations as edge lines."""
    from rich.text import Text

    aka = f", also {', '.join(found['aliases'])}" if found["aliases"] else ""
    say(f"{found['name']} ({found['type']}{aka}): {found['path']}")
    if found["history"]:
        which = "every fact, ended ones too"
    elif found["as_of"]:
        which = f"facts that held on {found['as_of']}"
    else:
        which = "facts that hold today"
    facts = found["facts"]
    if facts:
        rows = [
            [
                f["category"],
                f["text"],
                _when(f),
                "holds" if f["current"] else "ended",
                f["source"] or "",
            ]
            for f in facts
        ]
        title = f"{counted(len(facts), 'fact')}: {which}"
        stdout.print(table(title, ["Category", "Fact", "When", "Today", "Source"], rows))
    else:
        say(f"No {which}.")
    for relation in found["relations"]:
        line = Text(f"  {found['name']} ")
        line.append(ARROW.format(relation=relation["type"]), style="cyan")
        line.append(f" {relation['target']}")
        if relation["context"]:
            line.append(f" {relation['context']}")
        if not relation["current"]:
            line.append("  (ended)", style="dim")
            line.stylize("dim")
        stdout.print(line)


@app.command()
def facts(
    ctx: typer.Context,
    entity: Annotated[str, typer.Argument(metavar="ENTITY", help="Name or alias of the entity.")],
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="The facts that held on this day (YYYY-MM-DD).")
    ] = None,
    history: Annotated[bool, typer.Option("--history", help="Every fact, ended ones too.")] = False,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show what is known of an entity: its facts and relations, today or on a day."""
    from memvault.gateway.client import path_part

    found = via_daemon(
        ctx,
        vault,
        "GET",
        f"/v1/graph/entities/{path_part(entity)}/facts",
        query={"as_of": as_of, "history": history},
    )
    if found is None:
        from memvault.memory.knowledge import entity_facts

        runtime = open_runtime(ctx, vault)
        found = entity_facts(runtime.entities, entity, as_of=as_of, history=history)
    if as_json:
        emit_json(found)
    else:
        render_facts(found)
