"""The embedder comparison's own logic (bench/embedders.py, issue 31 B and issue 32).

The figures are measured in bench/, not asserted here; these check that a query and a
stored text reach the model in their own roles, that fusing a second view never moves
an exact-word hit down, that an embedder's settings are carried over by percentile, and
that the multilingual set is what it says it is.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable

import numpy as np

from test_bench_qa import BENCH

sys.path.insert(0, str(BENCH))

import embedders


def _role_model(seen: list[tuple[str, str]]) -> embedders.Asymmetric:
    """A two-role model whose vector says which role embedded the text."""

    def encoder(role: str, axis: int) -> Callable[[list[str]], embedders.Vectors]:
        def encode(texts: list[str]) -> embedders.Vectors:
            seen.extend((role, t) for t in texts)
            out = np.zeros((len(texts), 2), dtype=np.float32)
            out[:, axis] = 3.0  # not unit length: the embedder normalises
            return out

        return encode

    query = embedders.PackagedEmbedder("fake", "query", encoder("query", 0), 2)
    passage = embedders.PackagedEmbedder("fake", "passage", encoder("passage", 1), 2)
    return embedders.Asymmetric("fake", query, passage)


def test_a_query_is_embedded_as_a_query_and_everything_else_as_a_passage() -> None:
    seen: list[tuple[str, str]] = []
    model = _role_model(seen)
    model.queries = {"where are my keys?"}
    vectors = model.embed(["Luis has the spare keys.", "where are my keys?", "a note"])
    assert vectors.tolist() == [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]  # in order, unit length
    assert sorted(seen) == [
        ("passage", "Luis has the spare keys."),
        ("passage", "a note"),
        ("query", "where are my keys?"),
    ]
    assert model.identity == "bench:fake"
    assert model.query.identity != model.passage.identity  # cached apart
    assert model.embed([]).shape == (0, 2)


def test_fusing_a_second_view_never_moves_an_exact_word_hit_down() -> None:
    # memvault's ranking with its keyword share: b and d hold every query word.
    items = [("a", 0.2), ("b", 1.0), ("c", 0.1), ("d", 1.0), ("e", 0.3)]
    view = ["e", "f", "c", "d", "b", "a"]  # the second model puts the exact hits low
    fused = embedders.fuse(items, view, k=10, w=1.0)
    # b and d keep their slots; around them e (first in the view) overtakes a (last).
    assert fused == ["e", "b", "c", "d", "a", "f"]
    # Without exact hits it is plain rank fusion: what both lists hold comes first.
    assert embedders.fuse([("x", 0.0), ("y", 0.0)], ["y", "z"], k=60, w=1.0) == ["y", "x", "z"]


def test_an_embedders_cosine_settings_are_carried_over_by_percentile() -> None:
    reference = np.linspace(-0.2, 0.8, 1001, dtype=np.float32)  # MiniLM-like cosines
    other = np.linspace(0.7, 0.95, 1001, dtype=np.float32)  # compressed, like e5's
    value, share = embedders.carry_over(0.3, reference, other)
    assert abs(share - 0.5) < 0.01
    assert abs(value - 0.825) < 0.005  # the other model's median
    top, share = embedders.carry_over(2.0, reference, other)  # above every reference cosine
    assert share == 1.0 and top <= 0.95


def test_the_multilingual_set_has_one_answer_per_question_in_eight_languages() -> None:
    data = json.loads(embedders.MULTILINGUAL.read_text(encoding="utf-8"))
    memories = data["memories"]
    languages = Counter(m["lang"] for m in memories)
    assert set(languages) == {"zh", "ja", "ko", "de", "fr", "es", "ru", "en"}
    assert min(languages.values()) >= 6
    for field in ("text", "query", "query_en"):
        assert all(m[field].strip() for m in memories), field
    assert len({m["text"] for m in memories}) == len(memories)
    assert len({m["query_en"] for m in memories}) == len(memories)  # a topic each
    english = [m for m in memories if m["lang"] == "en"]
    assert all(m["query"] == m["query_en"] for m in english)
    # Questions in the other languages are written in them: not a Latin-only line.
    for m in memories:
        if m["lang"] in ("zh", "ja", "ko", "ru"):
            assert any(ord(c) > 0x3FF for c in m["query"]), m["query"]
