"""The distill job: related memories become one insight note, linked to each of them.

The method, stated before the code:

1. *Refresh.* Every insight note in the folder (frontmatter ``type:
   insight``) lists its source memory ids and ``sources_hash``, a hash of
   their texts when it was written. When the hash of the sources as they
   read now differs (a text edited, a source deleted or marked
   ``superseded``), the note's memvault block is written again from the
   sources that are left.
2. *Cluster.* The memories not yet distilled (no ``distilled`` field), not
   archived or superseded, and at least ``min_age_days`` old are compared
   pairwise: by their vectors in the index (cosine, at least
   ``similarity``), or, with no embedder, by the share of search words they
   have in common (Jaccard, at least ``keyword_similarity``), and the output
   says which. Greedily, the memory with the most related ones still free
   gathers them (the closest ``max_cluster_size - 1``) into a cluster, as
   long as a cluster reaches ``min_cluster_size``. The same memories always
   give the same clusters.
3. *Write.* Per cluster, the model writes a titled insight of a few
   sentences (the memories go to it as untrusted data, see
   :mod:`memvault.jobs.model_draft`); without a model, or when its answer
   is cut off, empty or untitled, the insight is a digest (``digest: true``):
   a title from the words the memories share and, embedded, the most
   central memories (highest mean similarity to the others); no words of
   its own, so search finds its sources, which answer in its place
   (:mod:`memvault.index.search`). Each source is embedded by block reference
   (``![[Memory/Facts#^m-3f9a1c2b]]``) and marked ``[distilled::
   Insights/<name>]``, so a later run leaves it alone, and the archival
   job, which spares linked memories, keeps it. A cluster whose memories
   are exactly an existing insight's sources goes to that note.

The insight text sits between memvault's markers (:mod:`memvault.jobs.
marked_section`): a person's edits around it are kept. Every file is kept
before it changes, so ``memvault jobs undo RUN_ID`` restores a run.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from memvault.config import DistillJob
from memvault.errors import MemvaultError
from memvault.index.db import DatabaseError
from memvault.index.keyword_backends import keywords_for
from memvault.index.query import terms_of
from memvault.jobs.engine import JobContext
from memvault.jobs.marked_section import Markers, item_line
from memvault.jobs.model_draft import draft
from memvault.vault.collection import Collection, stem
from memvault.vault.memories import LOW_TRUST, Memory
from memvault.vault.note import Note
from memvault.vault.paths import normalize_relpath
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.runtime import Runtime

DESCRIPTION = "Distils clusters of related memories into insight notes that link to each source."

MARKERS = Markers("insight")
DISTILLED = "distilled"  # the inline field that marks a memory distilled, and into which note
SUPERSEDED = ("superseded", "superseded_by")  # fields of a memory another one replaced
INSIGHT_TYPE = "insight"
DIGEST_SHOWN = 3  # the most central memories a digest embeds in its Insight section
# Memories compared in one run at most (the newest); the rest wait for a later run.
MAX_CANDIDATES = 2000
MAX_ANSWER_TOKENS = 400
MAX_ANSWER_BYTES = 2400
INSTRUCTIONS = (
    "You distil related memories of the owner into one insight: what they add up to, "
    "in two to four plain sentences about the owner. Keep every fact exact and add none. "
    "Answer in Markdown: the first line is '# ' and a title of at most eight words, then "
    "the sentences. No list of the memories, no preamble, no HTML comments."
)

Similarity = npt.NDArray[np.float32]


@dataclass
class Insight:
    """An insight note as it reads now."""

    path: str
    sources: list[str]
    sources_hash: str
    quoting: bool = False  # an older digest, quoting its sources (see ``quotes_its_sources``)


@dataclass(frozen=True)
class Written:
    """What one insight's text came to: the title, the block's text and how it was made."""

    title: str
    text: str
    how: str
    digest: bool = False  # no text of its own: its sources' words and a title from them


def run(ctx: JobContext) -> str:
    """Refresh insights whose sources changed, then distil new clusters of memories."""
    settings: DistillJob = ctx.settings or DistillJob()
    runtime = ctx.services
    folder = normalize_relpath(settings.folder)
    insights = read_insights(runtime, folder)
    # What was said in conversations is not distilled: the memories people and models kept are.
    memories = {m.id: m for m in runtime.memories.all() if not m.said}
    refreshed = 0
    for insight in insights:
        current = [memories[i] for i in insight.sources if i in memories]
        current = [m for m in current if not superseded(m)]
        changed = sources_hash(current) != insight.sources_hash
        if not changed and not insight.quoting:
            continue
        try:
            how = write_insight(ctx, settings, insight.path, current)
        except MemvaultError as exc:  # a note broken by hand breaks only itself
            ctx.record(f"could not refresh {insight.path}: {exc.message}")
            continue
        why = "its sources changed" if changed else "a digest now embeds its memories"
        ctx.record(f"refreshed {insight.path}: {why} ({how})")
        refreshed += 1

    candidates = waiting(runtime, settings, list(memories.values()))
    matrix, related_by = similarities(runtime, candidates)
    threshold = settings.similarity if related_by == "embeddings" else settings.keyword_similarity
    clusters = cluster(matrix, threshold, settings.min_cluster_size, settings.max_cluster_size)
    by_sources = {frozenset(i.sources): i.path for i in insights}
    written = 0
    distilled = 0
    for members in clusters:
        group = [candidates[i] for i in members]
        path = by_sources.get(frozenset(m.id for m in group))
        how = write_new(ctx, settings, folder, group, path)
        written += 1
        distilled += len(group)
        ctx.record(how)
    if related_by != "embeddings":
        ctx.record(f"related by shared words, not embeddings: {related_by}")
    if written or refreshed:
        ctx.metadata["insights"] = {"written": written, "refreshed": refreshed}
    summary = (
        f"{counted(written, 'new insight')} from {counted(distilled, 'memory')}, "
        f"{counted(refreshed, 'insight')} refreshed"
    )
    left = len(candidates) - distilled
    how_related = "embeddings" if related_by == "embeddings" else "shared words"
    return (
        f"{summary}; {counted(left, 'memory')} left waiting for a cluster of "
        f"{settings.min_cluster_size} (related by {how_related})."
    )


# -- reading ------------------------------------------------------------------------------


def read_insights(runtime: Runtime, folder: str) -> list[Insight]:
    """The insight notes in ``folder``: notes whose frontmatter says ``type: insight``."""
    found = []
    for path, note in Collection(runtime.vault, (folder,), "insight").each():
        if note.frontmatter_error or str(note.get("type", "")) != INSIGHT_TYPE:
            continue
        sources = note.get("sources") or []
        if not isinstance(sources, list):
            continue
        found.append(
            Insight(
                path,
                [str(s).strip().lstrip("^") for s in sources],
                str(note.get("sources_hash") or ""),
                quotes_its_sources(note, path),
            )
        )
    return found


def quotes_its_sources(note: Note, path: str) -> bool:
    """Whether ``note`` is a digest written before digests embedded their memories: no
    ``digest`` field, and a block that quotes them after a count ("A digest of 3 related
    memories, ..."). Search would find it by its sources' words and by the count's."""
    if note.get("digest") is not None:
        return False
    try:
        inner = MARKERS.inner(note.body, path)
    except MemvaultError:  # broken markers: left for a person to mend
        return False
    return inner is not None and "A digest of " in inner


def superseded(memory: Memory) -> bool:
    """Whether another memory replaced this one."""
    return any(key in memory.fields for key in SUPERSEDED)


def sources_hash(memories: Sequence[Memory]) -> str:
    """A hash of the sources' ids and texts: it changes when one is edited, added or gone."""
    lines = sorted(f"{m.id}\t{m.text}" for m in memories)
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


def waiting(runtime: Runtime, settings: DistillJob, memories: list[Memory]) -> list[Memory]:
    """The memories a run may distil: not yet distilled, archived or superseded, old enough
    (a bullet typed without a date counts as old), the newest ``MAX_CANDIDATES``. A
    low-trust memory is never distilled: an insight note would show it as the owner's."""
    cutoff = runtime.clock.now() - timedelta(days=settings.min_age_days)
    chosen = [
        m
        for m in memories
        if DISTILLED not in m.fields
        and m.trust != LOW_TRUST
        and not m.archived
        and not superseded(m)
        and (m.created is None or m.created <= cutoff)
    ]
    return chosen[-MAX_CANDIDATES:]


# -- relating -----------------------------------------------------------------------------


def similarities(runtime: Runtime, memories: list[Memory]) -> tuple[Similarity, str]:
    """Pairwise similarity of ``memories`` and what it was measured by: ``"embeddings"``,
    or why not (then by the share of search words two memories have in common)."""
    if len(memories) < 2:
        return np.zeros((len(memories), len(memories)), dtype=np.float32), "embeddings"
    vectors, why_not = memory_vectors(runtime, memories)
    if vectors is not None:
        return vectors @ vectors.T, "embeddings"
    return word_overlap([m.text for m in memories]), why_not


def memory_vectors(runtime: Runtime, memories: list[Memory]) -> tuple[Similarity | None, str]:
    """The memories' vectors, one row each, or None and why they cannot be used.

    They come from the index (what waits for a vector is embedded first). A
    memory said in a conversation is indexed with its neighbours as context,
    which would relate it to whatever was said next to it: its own text is
    embedded instead.
    """
    index = runtime.index
    if not index.embedder.enabled:
        return None, "the embedder is off (embedder.provider = 'none')"
    ids = [m.id for m in memories]
    chunk_of: dict[str, int] = {}
    with_context: set[str] = set()
    try:
        index.sync()
        index.embed_pending()
        if not index.semantic:
            return None, index.mismatch() or "the index holds no vectors yet"
        with index.lock:
            for start in range(0, len(ids), 500):
                batch = ids[start : start + 500]
                rows = index.conn.execute(
                    "SELECT m.id, m.chunk_id, c.context != '' FROM memories m "
                    "JOIN chunks c ON c.id = m.chunk_id "
                    f"WHERE m.id IN ({','.join('?' * len(batch))})",
                    batch,
                ).fetchall()
                chunk_of.update({str(r[0]): int(r[1]) for r in rows})
                with_context.update(str(r[0]) for r in rows if r[2])
            found = index.vectors.get(list(chunk_of.values()))
        vectors = {i: found[chunk_of[i]] for i in ids if chunk_of.get(i) in found}
        own = [m for m in memories if m.id in with_context]
        if own:
            fresh = index.embedder.embed([m.text for m in own])
            vectors.update(zip([m.id for m in own], fresh, strict=True))
    except MemvaultError as exc:
        return None, f"the embedder failed ({exc.message})"
    missing = [i for i in ids if i not in vectors]
    if missing:
        return None, f"{counted(len(missing), 'memory')} not embedded yet"
    matrix = np.stack([vectors[i] for i in ids]).astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    result: Similarity = matrix / norms
    return result, "embeddings"


def word_overlap(texts: Sequence[str]) -> Similarity:
    """Pairwise Jaccard similarity of the texts' search words (function words left out)."""
    terms = [set(terms_of(t)) for t in texts]
    vocabulary = {w: i for i, w in enumerate(sorted(set().union(*terms)))}
    present = np.zeros((len(texts), max(len(vocabulary), 1)), dtype=np.float32)
    for row, words in enumerate(terms):
        present[row, [vocabulary[w] for w in words]] = 1.0
    shared = present @ present.T
    sizes = present.sum(axis=1)
    union = sizes[:, None] + sizes[None, :] - shared
    union[union == 0] = 1.0
    result: Similarity = (shared / union).astype(np.float32)
    return result


def cluster(matrix: Similarity, threshold: float, min_size: int, max_size: int) -> list[list[int]]:
    """Clusters of row numbers, each central member first (see the module docstring)."""
    n = len(matrix)
    related = (matrix >= threshold) & ~np.eye(n, dtype=bool)
    free = np.ones(n, dtype=bool)
    clusters: list[list[int]] = []
    while True:
        counts = (related & free[None, :]).sum(axis=1) * free
        if not n or int(counts.max()) + 1 < min_size:
            return clusters
        best = int(np.argmax(counts))  # the first of equals: the same input, the same clusters
        near = [j for j in np.flatnonzero(related[best] & free)]
        near.sort(key=lambda j: (-float(matrix[best, j]), j))
        members = [best, *(int(j) for j in near[: max_size - 1])]
        free[members] = False
        clusters.append(central_first(matrix, members))


def central_first(matrix: Similarity, members: list[int]) -> list[int]:
    """``members`` ordered by their mean similarity to the others, highest first."""
    sub = matrix[np.ix_(members, members)]
    mean = (sub.sum(axis=1) - np.diag(sub)) / max(len(members) - 1, 1)
    order = sorted(range(len(members)), key=lambda i: (-float(mean[i]), members[i]))
    return [members[i] for i in order]


# -- writing ------------------------------------------------------------------------------


def write_new(
    ctx: JobContext,
    settings: DistillJob,
    folder: str,
    group: list[Memory],
    path: str | None,
) -> str:
    """Write one cluster's insight (to ``path`` when one already has exactly these sources)
    and mark its sources distilled; returns the run's line about it."""
    runtime = ctx.services
    written = compose(ctx, settings, group)
    if path is None:
        path = Collection(runtime.vault, (folder,), "insight").new_path(written.title, folder)
    marked = []
    for memory in group:
        ctx.will_change(memory.path)
        value = path.removesuffix(".md")
        marked.append(runtime.memories.update_fields(memory.id, **{DISTILLED: value}))
    put_insight(ctx, path, written, marked)
    return f"wrote {path} from {counted(len(group), 'memory')} ({written.how})"


def write_insight(ctx: JobContext, settings: DistillJob, path: str, sources: list[Memory]) -> str:
    """Write an existing insight's block again from ``sources`` (central first, by the
    words they share); returns how it was made."""
    if sources:
        order = central_first(word_overlap([m.text for m in sources]), list(range(len(sources))))
        written = compose(ctx, settings, [sources[i] for i in order])
    else:
        written = Written(
            stem(path),
            "The memories this insight was distilled from are gone (deleted or superseded); "
            "keep this note as it is, or delete it.",
            "no sources left",
        )
    put_insight(ctx, path, written, sources)
    return written.how


def compose(ctx: JobContext, settings: DistillJob, group: list[Memory]) -> Written:
    """The insight's title and text (``group`` central first): by the model when there is
    one, else a digest."""
    problem = "no model configured" if ctx.model is None else "use_model is off"
    if ctx.model is not None and settings.use_model:
        material = "\n".join(
            f"- {m.text} ({m.category}"
            + (f", {m.created:%Y-%m-%d}" if m.created is not None else "")
            + ")"
            for m in group
        )
        answer = draft(
            ctx.model,
            INSTRUCTIONS,
            material,
            markers=MARKERS,
            max_tokens=min(MAX_ANSWER_TOKENS, max(64, ctx.model.tokens_left // 2)),
            max_bytes=MAX_ANSWER_BYTES,
        )
        titled = split_title(answer.text) if answer.text is not None else None
        if titled is not None:
            return Written(titled[0], titled[1], "by the model")
        problem = answer.problem or "the model's answer had no '# ' title line and text"
    return digest(group, problem, rarity(ctx, group))


def rarity(ctx: JobContext, group: list[Memory]) -> dict[str, float]:
    """How rare each word of ``group`` is among the vault's memories (inverse document
    frequency from the keyword index): a title names what sets the cluster apart, not a
    name every memory holds."""
    words = {w for m in group for w in terms_of(m.text) if not w.isdigit()}
    index = ctx.services.index
    conn = index.conn
    try:
        total = int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
        keywords = keywords_for(conn, index.dialect)
        found = {word: keywords.text_frequency(word) for word in words}
    except DatabaseError:  # an index that cannot answer: every word counts alike
        return {}
    return {word: math.log((total + 1) / (count + 1)) + 1.0 for word, count in found.items()}


def split_title(text: str) -> tuple[str, str] | None:
    """``("Title", "sentences")`` from an answer whose first line is ``# Title``."""
    first, _, rest = text.strip().partition("\n")
    title = first.strip()
    if not title.startswith("# "):
        return None
    title = " ".join(title.lstrip("#").split()).strip(" .:")
    rest = rest.strip()
    if not title or not rest or rest.startswith("#"):
        return None
    return title, rest


def digest(group: list[Memory], problem: str, rare: dict[str, float] | None = None) -> Written:
    """The insight without a model: a title from the words the memories share, the rarer
    in the vault the better (``rare``: a word's weight, 1 when absent), and the most central
    memories (``group`` is central first)."""
    weight = rare or {}
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for memory in group:
        for word in terms_of(memory.text):
            counts[word] += 1
            first_seen.setdefault(word, len(first_seen))
    shared = sorted(
        (w for w, c in counts.items() if c > 1),
        key=lambda w: (-counts[w] * weight.get(w, 1.0), first_seen[w]),
    )
    words = [w for w in shared if not w.isdigit()][:3]
    if len(words) >= 2:
        title = ", ".join(words[:-1]).capitalize() + " and " + words[-1]
    elif words:
        title = words[0].capitalize()
    else:
        title = item_line(group[0].text, 60)
    # Only embeds: words of its own (a count, "digest", "first") would be found by queries
    # that have nothing to do with its memories, and skew what search counts as rare.
    text = "\n".join(f"- {source_link(m)}" for m in group[:DIGEST_SHOWN])
    return Written(title, text, f"digest: {problem}", digest=True)


def put_insight(ctx: JobContext, path: str, written: Written, sources: list[Memory]) -> None:
    """Create the insight note, or replace its block and source fields, keeping the rest."""
    runtime = ctx.services
    today = ctx.clock.today()
    links = "\n".join(f"- {source_link(m)}" for m in sources)
    # The sections of the vault's insight template (Templates/insight.md).
    body = f"## Insight\n\n{written.text}" + (f"\n\n## Evidence\n\n{links}" if links else "")
    fields: dict[str, Any] = {
        "sources": [m.id for m in sources],
        "sources_hash": sources_hash(sources),
        # Search shows a digest's sources in its place (memvault.index.search).
        "digest": written.digest,
        "updated": today,
    }

    def change(text: str | None) -> str:
        if text is None:
            note = Note(
                # Another date object than ``updated``'s: the same one would be a YAML alias.
                {
                    "type": INSIGHT_TYPE,
                    "tags": ["insight"],
                    "created": date.fromordinal(today.toordinal()),
                    **fields,
                },
                f"# {written.title}\n\n",
            )
        else:
            note = Note.parse(text)
        for key, value in fields.items():
            note.set(key, value)
        note.body = MARKERS.put(note.body, body, path)
        return note.render()

    ctx.will_change(path)
    runtime.vault.edit_text(path, change, must_exist=False)


def source_link(memory: Memory) -> str:
    """A block reference to the memory, embedded: ``![[Memory/Facts#^m-1]]``. Obsidian shows
    the memory's text in its place; the note holds only the link, so search does not find
    an insight by every word of its sources (they are found themselves)."""
    return f"![[{memory.path.removesuffix('.md')}#^{memory.id}]]"
