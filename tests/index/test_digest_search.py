"""Search and digests: an insight the distill job wrote without a model (``digest: true``)
holds only its sources' words, so its sources answer in its place; an insight with words
of its own stays a result."""

from __future__ import annotations

import pytest

from memvault.index import db as dbmod
from memvault.index.filters import SearchFilters
from memvault.runtime import Runtime
from support import HashEmbedder

pytestmark = pytest.mark.both_backends

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


SAILING = "Zephyr held all afternoon"


def others(runtime: Runtime, count: int) -> list[str]:
    """``count`` memories on something else, for digests to embed; their ids."""
    return [
        runtime.memories.remember(f"Shopping list {d}: flour and eggs", "fact").memory.id
        for d in range(count)
    ]


def digests(runtime: Runtime, title: str, sources: list[str]) -> None:
    """A digest titled ``title`` for each of ``sources``, embedding it."""
    for d, source in enumerate(sources):
        write(
            runtime,
            f"Insights/Digest {d}.md",
            f"---\ntype: insight\ndigest: true\n---\n# {title}\n\n- ![[Memory/Facts#^{source}]]\n",
        )
    runtime.index.sync()
    runtime.index.embed_pending()


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_digests_take_no_candidate_slot(runtime: Runtime, mode: str) -> None:
    """Twelve memories answer, and six digests of other memories are nearer the query than
    most of them: the candidates still hold ten memories besides the digests, so
    distilling costs the search none of what it found before."""
    runtime.searcher.settings.candidates = 10
    things = ["boiler", "tiles", "invoice", "garden", "piano", "dentist", "train", "roof"]
    for i, thing in enumerate(things * 5):  # a vault at large, for meaning's yardstick
        runtime.memories.remember(f"The {thing} needs looking at before week {i}", "fact")
    answers = {
        runtime.memories.remember(
            f"On day {i} of the regatta the zephyr held all afternoon and we sailed on", "fact"
        ).memory.id
        for i in range(12)
    }
    digests(runtime, SAILING, others(runtime, 6))
    qvec, _ = runtime.index.embed_query(SAILING)
    assert qvec is not None
    digest_chunks = {
        int(r[0])
        for r in runtime.index.conn.execute(
            "SELECT c.id FROM chunks c JOIN notes n ON n.id = c.note_id"
            " WHERE n.path LIKE 'Insights/%'"
        )
    }
    nearest = [chunk_id for chunk_id, _ in runtime.index.vectors.search(qvec, 10)]
    assert len(digest_chunks & set(nearest)) >= 3  # they would take slots
    hits = runtime.searcher.search(SAILING, limit=10, mode=mode)
    assert len(hits) == 10
    assert {h.id for h in hits} <= answers


def test_a_digest_leaves_keyword_scores_alone(runtime: Runtime) -> None:
    """A digest's words are its sources' (a title from them, their embeds): counted in the
    keyword index they would count twice and move every other note's keyword score."""
    for i in range(5):
        runtime.memories.remember(f"On day {i} the zephyr held, said Ann", "fact")
    runtime.memories.remember("Ann bought a new sail", "fact")
    runtime.memories.remember("A zephyr at dawn", "fact")
    for text in DISTRACTORS:
        runtime.memories.remember(text, "fact")
    sources = others(runtime, 4)
    runtime.index.sync()

    def scores() -> dict[str | None, float]:
        hits = runtime.searcher.search("Ann zephyr sail", limit=20, mode="keyword")
        return {h.id: h.text_score for h in hits}

    before = scores()
    digests(runtime, "Zephyr, sail and Ann", sources)
    assert scores() == before
    # Found by meaning, a digest still answers where its sources cannot be shown.
    alone = runtime.searcher.search(
        "Zephyr, sail and Ann", filters=SearchFilters(kinds=("insight",))
    )
    assert alone and alone[0].path.startswith("Insights/Digest ")


def keyword_found(runtime: Runtime, query: str) -> list[str]:
    """The insight notes a keyword search finds for ``query``."""
    hits = runtime.searcher.search(query, mode="keyword", filters=SearchFilters(kinds=("insight",)))
    return [h.path for h in hits]


def test_a_digest_a_person_makes_their_own_joins_the_keyword_index(runtime: Runtime) -> None:
    """The note is the same, its flag changed: ``digest: false`` makes its words its own."""
    digests(runtime, "Zephyr, sail and Ann", others(runtime, 1))
    path = runtime.vault.root / "Insights/Digest 0.md"
    assert keyword_found(runtime, "zephyr") == []
    path.write_text(path.read_text().replace("digest: true", "digest: false"))
    runtime.index.sync()
    assert keyword_found(runtime, "zephyr") == ["Insights/Digest 0.md"]
    path.write_text(path.read_text().replace("digest: false", "digest: true"))
    runtime.index.sync()
    assert keyword_found(runtime, "zephyr") == []


@pytest.mark.sqlite_only
def test_an_index_from_before_keeps_no_digest_in_its_keywords(runtime: Runtime) -> None:
    """Schema 3 kept a digest's words: the next sync after the upgrade takes them out,
    keeping the chunk (and its vector)."""
    digests(runtime, "Zephyr, sail and Ann", others(runtime, 1))
    conn = runtime.index.conn
    (chunk_id,) = conn.execute(
        "SELECT c.id FROM chunks c JOIN notes n ON n.id = c.note_id WHERE n.kind = 'insight'"
    ).fetchone()
    conn.execute(  # as schema 3 stored it
        "INSERT INTO chunks_fts(rowid, text, context, title, tags) VALUES (?, ?, '', ?, '')",
        (chunk_id, "Zephyr, sail and Ann", "Zephyr, sail and Ann"),
    )
    conn.execute("PRAGMA user_version = 3")
    assert keyword_found(runtime, "zephyr") == ["Insights/Digest 0.md"]
    dbmod.migrate(conn)
    runtime.index.sync()
    assert keyword_found(runtime, "zephyr") == []
    kept = conn.execute(
        "SELECT c.id FROM chunks c JOIN notes n ON n.id = c.note_id WHERE n.kind = 'insight'"
    ).fetchone()
    assert kept[0] == chunk_id


def test_a_digest_means_what_its_memories_say(runtime: Runtime) -> None:
    """Embedded with its memories' text (as Obsidian shows them), not its links' ids: a
    digest none of whose words are in its title is found by what its memory says."""
    for text in DISTRACTORS:
        runtime.memories.remember(text, "fact")
    digests(runtime, "Weekly notes", others(runtime, 1))
    hits = runtime.searcher.search("flour and eggs", filters=SearchFilters(kinds=("insight",)))
    assert [h.path for h in hits] == ["Insights/Digest 0.md"]
    assert "Shopping list 0: flour and eggs" in hits[0].snippet


def test_a_refreshed_digest_means_what_its_memories_say_now(runtime: Runtime) -> None:
    """The distill job rewrites a digest whose sources changed (its embeds stay the same
    text): the digest is embedded again with the memories' new text."""
    for text in DISTRACTORS:
        runtime.memories.remember(text, "fact")
    (source,) = others(runtime, 1)
    digests(runtime, "Weekly notes", [source])
    runtime.memories.update_text(source, "Shopping list 0: saffron and vanilla pods")
    path = runtime.vault.root / "Insights/Digest 0.md"
    path.write_text(path.read_text().replace("digest: true", "digest: true\nsources_hash: 2"))
    runtime.index.sync()
    runtime.index.embed_pending()
    hits = runtime.searcher.search("saffron vanilla", filters=SearchFilters(kinds=("insight",)))
    assert [h.path for h in hits] == ["Insights/Digest 0.md"]


def test_a_digest_is_embedded_as_it_reads_without_its_fields(runtime: Runtime) -> None:
    """Its vector is its text with the memory shown, nothing of its fields (ids, a hash,
    dates) or its link's id: the same digest of the same memory means the same anywhere."""
    (source,) = others(runtime, 1)
    digests(runtime, "Weekly notes", [source])
    conn = runtime.index.conn
    (chunk_id, context) = conn.execute(
        "SELECT c.id, c.context FROM chunks c JOIN notes n ON n.id = c.note_id"
        " WHERE n.kind = 'insight'"
    ).fetchone()
    assert "digest: True" in context  # the fields are there, for a reader of the row
    expected = HashEmbedder().embed(["# Weekly notes\n\n- Shopping list 0: flour and eggs"])[0]
    stored = runtime.index.vectors.get([int(chunk_id)])[int(chunk_id)]
    assert float(stored @ expected) == pytest.approx(1.0, abs=1e-5)
