"""``memvault index | search | recall | context | tag | related | watch``.

``search``, ``recall`` and ``context`` go through the daemon when one serves
the vault (its index is current and its model loaded); when none does and the
local model would have to load here, they start one in the background first
(unless told not to). The rest work on the vault directly.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memvault.cli.common import (
    ArchivedOption,
    DirectOption,
    JsonOption,
    NoAutostartOption,
    VaultOption,
    emit_json,
    emit_raw,
    open_runtime,
    say,
    split_tags,
    stderr,
    stdout,
    table,
    via_daemon,
)
from memvault.cli.progress import INDEX_STAGES, QuietOption, progress
from memvault.errors import VaultError
from memvault.vocabulary import KINDS, counted

if TYPE_CHECKING:
    from memvault.index.filters import SearchFilters
    from memvault.index.index import SyncReport
    from memvault.runtime import Runtime

# A search fills at most this many pending embeddings, so it stays quick.
_EMBED_ON_SEARCH = 256
READ_ONLY_INDEX = (
    "The index at {path} cannot be updated (the vault is read-only for this user); "
    "searching a copy in memory."
)
_PROGRESS_AFTER = 50


def _sync(runtime: Runtime, *, quiet: bool) -> SyncReport:
    """Bring the index up to date, with a progress bar when there is a lot to do."""
    if runtime.index.in_memory:
        stderr.print(READ_ONLY_INDEX.format(path=runtime.index.path))
    with progress("Indexing", quiet=quiet, stages=INDEX_STAGES) as update:
        return runtime.index.sync(progress=update)


def _loading_model(runtime: Runtime) -> None:
    """Say why nothing moves while the embedding model loads (seconds, the first time)."""
    if not runtime.embedder.loaded:
        stderr.print(f"Loading the embedding model ({runtime.embedder.model}) ...")


def _summary(report: SyncReport) -> str:
    if not report.touched and not report.skipped:
        return f"nothing changed, {report.seconds:.2f}s"
    parts = [
        f"{len(report.added)} added",
        f"{len(report.changed)} changed",
        f"{len(report.moved)} moved",
        f"{len(report.deleted)} deleted",
        f"{report.unchanged} unchanged",
    ]
    text = ", ".join(parts) + f" in {report.seconds:.2f}s"
    if report.skipped:
        skipped = counted(len(report.skipped), "unreadable file")
        text += f"; skipped {skipped}: {', '.join(report.skipped[:3])}"
    return text


def index(
    ctx: typer.Context,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Delete the index and build it anew.")
    ] = False,
    reembed: Annotated[
        bool, typer.Option("--reembed", help="Recompute every vector with the configured embedder.")
    ] = False,
    no_embed: Annotated[
        bool, typer.Option("--no-embed", help="Keywords only; leave vectors pending.")
    ] = False,
    quiet: QuietOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Bring the search index up to date with the vault (incremental)."""
    from memvault.index.embedders import EmbeddingError

    runtime = open_runtime(ctx, vault)
    if runtime.index.in_memory:
        raise VaultError(
            f"Cannot update the index at {runtime.index.path}: the vault is read-only for this "
            "user (search, recall and context still work, from a copy in memory)."
        )
    hide = as_json or quiet
    with progress("Indexing", quiet=hide, stages=INDEX_STAGES) as update:
        report = runtime.index.rebuild(update) if rebuild else runtime.index.sync(update)
    embedded = 0
    problem = runtime.index.mismatch()
    if not no_embed and runtime.embedder.enabled and (reembed or problem is None):
        pending = runtime.index.pending()
        if reembed or pending:
            _loading_model(runtime)
        after = 0 if reembed else _PROGRESS_AFTER
        try:
            with progress("Embedding", quiet=hide, after=after, stages=INDEX_STAGES) as update:
                embedded = (
                    runtime.index.reembed(update)
                    if reembed
                    else runtime.index.embed_pending(progress=update)
                )
        except EmbeddingError as exc:
            raise EmbeddingError(
                f"Indexed the notes, but embedding failed: {exc.message}",
                hint="Keyword search works meanwhile; run `memvault index` again when the "
                "embedder answers, or `memvault index --no-embed` to skip vectors.",
            ) from exc
    status = runtime.index.status()
    if as_json:
        emit_json({"sync": report.to_dict(), "embedded": embedded, "status": status.to_dict()})
    else:
        say(f"Indexed {counted(status.notes, 'note')} ({_summary(report)}).")
        if embedded:
            say(f"Embedded {counted(embedded, 'chunk')} with {runtime.embedder.identity}.")
        if status.pending and runtime.embedder.enabled and not status.mismatch:
            say(
                f"{counted(status.pending, 'chunk')} still without a vector; "
                "run `memvault index` to embed."
            )
    if status.mismatch and not reembed:
        stderr.print(status.mismatch)


def _filters(
    kinds: list[str] | None,
    folder: str | None,
    category: str | None,
    tags: list[str] | None,
    since: str | None,
    until: str | None,
    archived: bool,
    runtime: Runtime,
) -> SearchFilters:
    from memvault.index.filters import SearchFilters, parse_day

    tz = runtime.clock.tz
    return SearchFilters(
        folder=folder,
        kinds=tuple(split_tags(kinds)),
        category=category,
        tags=tuple(split_tags(tags)),
        since=parse_day(since, tz),
        until=parse_day(until, tz),
        include_archived=archived,
    )


def _show_hits(hits: list[dict[str, Any]], title: str, query: str) -> None:
    if not hits:
        _nothing_relevant(query)
        return
    rows = []
    for hit in hits:
        where = f"{hit['path']}:{hit['start_line']}" + (f" ^{hit['id']}" if hit["id"] else "")
        snippet = hit["snippet"].replace("\n", " ")[:160]
        rows.append([f"{hit['score']:.2f}", hit["kind"], where, snippet])
    stdout.print(table(title, ["Score", "Kind", "Where", "Text"], rows))


def _search(
    runtime: Runtime,
    query: str,
    limit: int,
    filters: SearchFilters,
    *,
    keyword_only: bool,
    mmr: float | None,
    min_score: float | None,
    quiet: bool,
) -> list[dict[str, Any]]:
    _sync(runtime, quiet=quiet)
    if not keyword_only and not quiet and sys.stderr.isatty() and runtime.index.vectors.exists():
        _loading_model(runtime)  # the query is embedded next
    hits = runtime.searcher.search(
        query,
        limit=limit,
        filters=filters,
        mode="keyword" if keyword_only else "hybrid",
        mmr_lambda=mmr,
        min_score=min_score,
    )
    if hits.notice:
        stderr.print(hits.notice)
    # The model is loaded now: use it to fill some pending vectors for next time.
    if runtime.embedder.enabled and runtime.embedder.loaded and runtime.index.mismatch() is None:
        runtime.index.embed_pending(limit=_EMBED_ON_SEARCH)
    return [hit.to_dict() for hit in hits]


KindOption = Annotated[
    list[str] | None, typer.Option("--kind", "-k", help=f"Only these kinds: {', '.join(KINDS)}.")
]
LimitOption = Annotated[
    int, typer.Option("--limit", "-n", min=1, max=1000, help="How many results.")
]
KeywordOnlyOption = Annotated[
    bool, typer.Option("--keyword", help="Keywords only; no model is loaded.")
]
MinScoreOption = Annotated[
    float | None,
    typer.Option(
        "--min-score",
        min=0.0,
        max=5.0,
        help="Leave out results scoring below this (default: search.min_score, 0.3); "
        "0 lists the closest matches even when nothing is relevant.",
    ),
]
NOTHING_RELEVANT_HINT = (
    "Results scoring below the relevance floor (search.min_score) are left out; "
    "--min-score 0 lists the closest matches anyway."
)


def _nothing_relevant(what: str) -> None:
    say(f"Nothing relevant to {what!r}.")
    stderr.print(NOTHING_RELEVANT_HINT)


def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for, in your own words.")],
    limit: LimitOption = 10,
    kinds: KindOption = None,
    folder: Annotated[
        str | None, typer.Option("--folder", help="Only notes under this folder.")
    ] = None,
    category: Annotated[
        str | None, typer.Option("--category", "-c", help="Only memories of this category.")
    ] = None,
    tags: Annotated[
        list[str] | None, typer.Option("--tag", "-t", help="Only items with this tag.")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Created on or after YYYY-MM-DD.")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help="Created before YYYY-MM-DD.")] = None,
    archived: ArchivedOption = False,
    keyword_only: KeywordOnlyOption = False,
    mmr: Annotated[
        float | None,
        typer.Option("--mmr", min=0.0, max=1.0, help="Diversify results (0..1; 0.7 is mild)."),
    ] = None,
    min_score: MinScoreOption = None,
    direct: DirectOption = False,
    no_autostart: NoAutostartOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Search notes and memories by keywords and meaning.

    A query that starts with "-" goes after "--": memvault search -- "-sailboat".
    """
    params = {
        "q": query,
        "limit": limit,
        "kind": split_tags(kinds),
        "folder": folder,
        "category": category,
        "tag": split_tags(tags),
        "since": since,
        "until": until,
        "archived": archived,
        "keyword": keyword_only,
        "mmr": mmr,
        "min_score": min_score,
    }
    hits = via_daemon(ctx, vault, "GET", "/v1/search", query=params, autostart=not keyword_only)
    if hits is None:
        runtime = open_runtime(ctx, vault)
        filters = _filters(kinds, folder, category, tags, since, until, archived, runtime)
        hits = _search(
            runtime,
            query,
            limit,
            filters,
            keyword_only=keyword_only,
            mmr=mmr,
            min_score=min_score,
            quiet=as_json,
        )
    if as_json:
        emit_json(hits)
    else:
        _show_hits(hits, f"{counted(len(hits), 'result')} for {query!r}", query)


def recall(
    ctx: typer.Context,
    topic: Annotated[str, typer.Argument(help="The topic to recall memories about.")],
    limit: LimitOption = 10,
    category: Annotated[
        str | None, typer.Option("--category", "-c", help="Only this category.")
    ] = None,
    keyword_only: KeywordOnlyOption = False,
    min_score: MinScoreOption = None,
    direct: DirectOption = False,
    no_autostart: NoAutostartOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Recall memories about a topic (memories only, best first)."""
    params = {
        "q": topic,
        "limit": limit,
        "category": category,
        "keyword": keyword_only,
        "min_score": min_score,
    }
    hits = via_daemon(
        ctx, vault, "GET", "/v1/memories/search", query=params, autostart=not keyword_only
    )
    if hits is None:
        from memvault.index.filters import SearchFilters

        runtime = open_runtime(ctx, vault)
        filters = SearchFilters(kinds=("memory",), category=category)
        hits = _search(
            runtime,
            topic,
            limit,
            filters,
            keyword_only=keyword_only,
            mmr=None,
            min_score=min_score,
            quiet=as_json,
        )
    if as_json:
        emit_json(hits)
        return
    if not hits:
        _nothing_relevant(topic)
        return
    for hit in hits:
        say(f"- {hit['snippet']}  ({hit['category']}, {hit['score']:.2f}, ^{hit['id']})")


def context(
    ctx: typer.Context,
    query: Annotated[
        str | None, typer.Option("--query", "-q", help="The request the agent is about to handle.")
    ] = None,
    budget: Annotated[
        int | None, typer.Option("--budget", "-b", help="Token budget, at least 50 (default 2000).")
    ] = None,
    audience: Annotated[
        str | None,
        typer.Option(
            "--as",
            help="As this audience would get it: owner, group:NAME, or a contact "
            "(only what is shared with them).",
        ),
    ] = None,
    direct: DirectOption = False,
    no_autostart: NoAutostartOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the memory context an agent gets at the start of a run (or a contact's agent,
    with --as)."""
    result = via_daemon(
        ctx,
        vault,
        "GET",
        "/v1/context",
        query={"query": query, "budget": budget, "as": audience},
        autostart=bool(query),  # only a query is searched for
    )
    if result is None:
        runtime = open_runtime(ctx, vault)
        if query:
            _sync(runtime, quiet=True)
        built = runtime.build_context(query, budget, audience=audience)
        if built.notice:
            stderr.print(built.notice)
        result = built.to_dict()
    if as_json:
        emit_json(result)
    elif result["markdown"]:
        emit_raw(result["markdown"])
    else:
        say("The vault has nothing to put in a context yet.")


def tag(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(metavar="TAG", help="Tag to look for (nested tags included).")
    ],
    archived: ArchivedOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List notes and memories with a tag."""
    from memvault.index.graph import search_by_tag

    runtime = open_runtime(ctx, vault)
    _sync(runtime, quiet=as_json)
    items = search_by_tag(runtime.index, name, include_archived=archived)
    if as_json:
        emit_json([i.to_dict() for i in items])
        return
    if not items:
        say(f"Nothing is tagged #{name.lstrip('#')}.")
        return
    rows = [[i.kind, i.path + (f" ^{i.id}" if i.id else ""), i.title] for i in items]
    stdout.print(
        table(
            f"{counted(len(items), 'item')} tagged #{name.lstrip('#')}",
            ["Kind", "Where", "Title"],
            rows,
        )
    )


def related_notes(
    ctx: typer.Context,
    note: Annotated[str, typer.Argument(metavar="NOTE", help="Vault-relative path of a note.")],
    limit: LimitOption = 10,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Notes related to a note: links either way, shared tags, similar meaning."""
    from memvault.index.graph import backlinks, related

    runtime = open_runtime(ctx, vault)
    _sync(runtime, quiet=as_json)
    found = related(runtime.index, note, limit)
    incoming = backlinks(runtime.index, note)
    if as_json:
        emit_json(
            {"related": [r.to_dict() for r in found], "backlinks": [b.to_dict() for b in incoming]}
        )
        return
    if not found:
        say("No related notes found.")
        return
    rows = [[f"{r.score:.2f}", r.path, "; ".join(r.reasons)] for r in found]
    stdout.print(table(f"Related to {note}", ["Score", "Note", "Why"], rows))


def watch(
    ctx: typer.Context,
    debounce: Annotated[
        int, typer.Option("--debounce", min=50, max=10_000, help="Milliseconds to wait for quiet.")
    ] = 400,
    vault: VaultOption = None,
) -> None:
    """Keep the index current while you edit the vault (Ctrl-C stops)."""
    from memvault.index.watch import follow

    runtime = open_runtime(ctx, vault)
    stop = threading.Event()
    ready = threading.Event()

    def report(batch: SyncReport) -> None:
        say(_summary(batch))

    say(f"Watching {runtime.vault.root} (Ctrl-C to stop)...")
    # watchfiles logs "KeyboardInterrupt caught, stopping watch" on Ctrl-C; we say it ourselves.
    logging.getLogger("watchfiles").setLevel(logging.ERROR)
    try:
        follow(runtime.index, stop=stop, debounce_ms=debounce, on_batch=report, ready=ready)
    except KeyboardInterrupt:
        stop.set()
    say("Stopped watching.")


def register(app: typer.Typer) -> None:
    """Add the recall commands to the root app."""
    app.command()(index)
    app.command()(search)
    app.command()(recall)
    app.command()(context)
    app.command()(tag)
    app.command("related")(related_notes)
    app.command()(watch)
