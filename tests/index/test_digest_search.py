"""Search and digests: an insight the distill job wrote without a model (``digest: true``)
holds only its sources' words, so its sources answer in its place; an insight with words
of its own stays a result."""

from __future__ import annotations

import pytest

from memvault.index.filters import SearchFilters
from memvault.runtime import Runtime

DISTRACTORS = [
    "The glazed tiles for the bathroom arrived on Monday",
    "Tom fired the boiler up for the winter",
    "The pottery shop on the corner sells bowls",
]


def write(runtime: Runtime, path: str, text: str) -> None:
    target = runtime.vault.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def insight(runtime: Runtime, *, digest: bool | None) -> list[str]:
    """Three pottery memories, the distractors and an insight on the pottery ones: a digest
    as the distill job writes it without a model (title and embeds), or with ``digest``
    false (the model's) or None (by hand) a sentence of its own; returns the sources' ids."""
    for text in DISTRACTORS:
        runtime.memories.remember(text, "fact")
    sources = [
        runtime.memories.remember(text, "fact").memory
        for text in (
            "Mel fired the glazed bowl in the kiln",
            "Mel signed up for the Thursday pottery class",
            "Mel wants a second kiln for the garden shed",
        )
    ]
    flag = "" if digest is None else f"digest: {str(digest).lower()}\n"
    embeds = "\n".join(f"- ![[Memory/Facts#^{m.id}]]" for m in sources)
    own = embeds if digest else "Mel has taken up pottery and means to fire at home."
    write(
        runtime,
        "Insights/Mel, kiln and pottery.md",
        f"---\ntype: insight\n{flag}---\n# Mel, kiln and pottery\n\n## Insight\n\n{own}\n"
        f"\n## Evidence\n\n{embeds}\n",
    )
    runtime.index.sync()
    runtime.index.embed_pending()
    return [m.id for m in sources]


def test_a_digest_never_outranks_its_own_source(runtime: Runtime) -> None:
    sources = insight(runtime, digest=True)
    for query in ("glazed bowl kiln", "Mel pottery class", "Mel kiln pottery"):
        hits = runtime.searcher.search(query, limit=10)
        assert not any(h.path.startswith("Insights/") for h in hits), query
        assert hits[0].id in sources, query


def test_a_digest_answers_only_where_its_sources_cannot(runtime: Runtime) -> None:
    sources = insight(runtime, digest=True)
    query = "Mel kiln pottery"  # no one memory holds all three words; the digest's title does
    hits = runtime.searcher.search(query, limit=10)
    assert hits[0].id in sources
    assert set(sources) <= {h.id for h in hits}
    # Where its sources cannot be shown (a filter leaves memories out), the digest answers,
    # its snippet showing the memories it embeds.
    alone = runtime.searcher.search(query, limit=10, filters=SearchFilters(kinds=("insight",)))
    assert alone[0].path == "Insights/Mel, kiln and pottery.md"
    assert "Mel fired the glazed bowl in the kiln" in alone[0].snippet


@pytest.mark.parametrize("digest", [False, None])
def test_an_insight_with_words_of_its_own_stays_a_result(
    runtime: Runtime, digest: bool | None
) -> None:
    insight(runtime, digest=digest)
    hits = runtime.searcher.search("Mel kiln pottery", limit=10)
    assert "Insights/Mel, kiln and pottery.md" in [h.path for h in hits]
