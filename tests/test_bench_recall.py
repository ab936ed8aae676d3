"""The recall benchmarks' own logic: LoCoMo per conversation, the chit-chat benchmark's
questions and evidence, the levers' exact-word guard and lever e's second model (issue 31).

The figures themselves are measured in bench/, not asserted here; these check that
what is measured is what the benchmarks say they measure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memvault.index.embedders import BaseEmbedder, Vectors, normalize_rows
from test_bench_qa import BENCH, locomo_file
from waiting import WAIT

sys.path.insert(0, str(BENCH))

import chitchat
import levers
import locomo


def test_per_conversation_figures_add_up_to_the_overall_ones() -> None:
    scores = locomo.Scores()
    # conv-a: both questions found whole; conv-b: one found in part, one not at all.
    scores.add(4, ["D1:1"], ["D1:1", "D1:2"], "conv-a")
    scores.add(1, ["D1:3", "D2:1"], ["D2:1", "D1:3"], "conv-a")
    scores.add(1, ["D1:3", "D2:1"], ["D2:1", "D1:1"], "conv-b")
    scores.add(4, ["D2:2"], ["D1:1"], "conv-b")
    per = scores.by_conversation()
    assert per["conv-a"]["recall_any@10"] == 1.0 and per["conv-a"]["recall_all@10"] == 1.0
    assert per["conv-b"]["recall_any@10"] == 0.5 and per["conv-b"]["recall_all@10"] == 0.0
    assert per["conv-a"]["n"] == per["conv-b"]["n"] == 2
    overall = scores.metrics()
    assert overall["recall_any@10"] == 0.75 and overall["recall_all@10"] == 0.5
    assert locomo.spread(per)["recall_any@10"] == (0.5, 1.0)
    table = locomo.render_conversations({c: {"memvault": m} for c, m in per.items()})
    assert "| spread (min..max) | | 0.500..1.000 | 0.500..1.000 | 0.000..1.000" in table


def test_the_locomo_bench_reports_each_conversation(tmp_path: Path) -> None:
    one = json.loads(locomo_file(tmp_path).read_text())[0]
    two = json.loads(json.dumps(one)) | {"sample_id": "conv-u"}
    two["qa"] = two["qa"][:1]  # the second conversation asks one question only
    data = tmp_path / "two.json"
    data.write_text(json.dumps([one, two]))
    done = subprocess.run(
        [sys.executable, "locomo.py", str(data), "--json"],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=2.5 * WAIT,  # a hang guard
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    per = result["by_conversation"]
    assert list(per) == ["conv-t", "conv-u"]
    assert per["conv-t"]["memvault"]["n"] == 3 and per["conv-u"]["memvault"]["n"] == 1
    for method in ("memvault", "bm25", "cosine", "hybrid_0.7"):
        weighted = sum(p[method]["recall_any@10"] * p[method]["n"] for p in per.values()) / 4
        assert weighted == pytest.approx(result[method]["recall_any@10"])
        low, high = result["spread"][method]["recall_all@10"]
        assert low <= high


def _chat(start: str, turns: list[tuple[str, list[str]]]) -> dict[str, Any]:
    return {
        "start": start,
        "messages": [
            [{"text": t, "sender": sender, "timestamp": start} for t in texts]
            for sender, texts in turns
        ],
    }


def test_chit_chat_questions_are_answered_by_the_next_turn_and_leave_the_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chitchat, "MIN_SESSIONS", 2)
    monkeypatch.setattr(chitchat, "MIN_TURNS", 4)
    monkeypatch.setattr(chitchat, "MIN_QUESTIONS", 0)
    ann, bob, cy = "aaaa-1", "bbbb-2", "cccc-3"
    data = {
        "c1": _chat(
            "2018-05-01T10:00:00",
            [
                (ann, ["hey", "Which hiking trail did your family pick?"]),
                (bob, ["We went up the canyon trail near the reservoir"]),
                (ann, ["What kind of music keeps you going?"]),
                (ann, ["sorry, double text"]),
                (bob, ["How is the weather today?"]),  # answered by nobody: the last turn
            ],
        ),
        "c2": _chat(
            "2018-05-03T09:00:00",
            [
                (bob, ["Which hiking trail did your family pick?"]),  # said twice: left out
                (ann, ["The short one by the lake, it was lovely really"]),
                (bob, ["Where does your brother study engineering now?"]),
                (ann, ["Is that a trick question?"]),  # an answer that asks back: left out
            ],
        ),
        # A pair with a single session is no conversation of the benchmark.
        "c3": _chat(
            "2018-05-02T09:00:00",
            [(ann, ["What movies do you love most?"]), (cy, ["Long enough answer for this one"])],
        ),
    }
    [sample] = chitchat.samples(data)
    assert sample["sample_id"] == "aaaa-bbbb" and sample["sessions"] == 2
    assert sample["questions"] == []  # the only candidate was said twice
    data["c2"]["messages"][0][0]["text"] = "Which trail did your family pick in the end?"
    [sample] = chitchat.samples(data)
    assert [(q["question"], q["evidence"]) for q in sample["questions"]] == [
        ("Which hiking trail did your family pick?", ["D1:2"]),
        ("Which trail did your family pick in the end?", ["D2:2"]),
    ]
    ids = [t["id"] for t in sample["turns"]]
    assert "D1:1" not in ids and "D2:1" not in ids  # the questions' own turns
    assert "D1:2" in ids and "D2:2" in ids  # their answers
    first = next(t for t in sample["turns"] if t["id"] == "D1:2")
    assert first["text"] == "B: We went up the canyon trail near the reservoir"
    assert first["session"] == "session_1" and first["created"].day == 1


def _case(*items: tuple[str, float]) -> levers.Case:
    return levers.Case(
        "q",
        [],
        4,
        [levers.Item(m, 1.0, 0.5, keyword, "s1") for m, keyword in items],
        np.zeros(3, dtype=np.float32),
    )


def test_a_reordering_lever_never_moves_an_exact_word_hit_down() -> None:
    case = _case(("m1", 0.2), ("m2", 1.0), ("m3", 0.1), ("m4", 1.0), ("m5", 0.3))
    # A second view that puts the exact hits last and brings in m6.
    reordered = ["m6", "m5", "m3", "m1", "m2", "m4"]
    out = levers.protect_exact(case, reordered)
    assert out[1] == "m2" and out[3] == "m4"  # their own slots
    assert [m for m in out if m not in ("m2", "m4")] == ["m6", "m5", "m3", "m1"]


def test_rank_fusion_puts_what_both_lists_hold_first() -> None:
    assert levers.rrf([["a", "b"], ["b", "c"]], 60) == ["b", "a", "c"]


class _Words(BaseEmbedder):
    """A stand-in model: a text's vector counts the words of a fixed vocabulary in it,
    so the ranking it makes is known."""

    def __init__(self, vocabulary: list[str]) -> None:
        self.vocabulary = vocabulary
        self.seen: list[str] = []

    def dimension(self) -> int:
        return len(self.vocabulary)

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.seen.extend(texts)
        counts = [[t.lower().split().count(w) for w in self.vocabulary] for t in texts]
        return normalize_rows(np.array(counts, dtype=np.float32).reshape(len(texts), -1))


def test_the_second_model_ranks_by_its_own_vectors_and_exact_hits_keep_their_slots() -> None:
    first, second = _Words(["zebra"]), _Words(["cat", "dog", "sat"])
    texts = ["A: the cat sat", "B: a dog barked", "A: cat and dog"]
    store = levers.Store(
        name="conv-t",
        conversation=None,  # type: ignore[arg-type]  # dias() is not asked for here
        memories=["m1", "m2", "m3"],
        sessions=["s1", "s1", "s1"],
        texts=texts,
        vectors=first.embed(texts),
        idf={},
        embedder=first,
        second=second,
    )
    # memvault put m2 first on an exact-word hit (keyword share 1), m1 second.
    case = levers.Case(
        "which dog barked",
        [],
        4,
        [levers.Item("m2", 1.0, 0.5, 1.0, "s1"), levers.Item("m1", 0.9, 0.5, 0.2, "s1")],
        first.embed(["zebra"])[0],
        second.embed(["cat sat"])[0],  # the second model's own query vector
    )
    alone = levers.neighbour_view(0, 60, None, second=True)(store, case)
    assert alone == ["m1", "m3", "m2"]  # by the second model's cosine with "cat sat"
    assert second.seen[-3:] == texts  # it embedded the turns as they are (window 0)
    fused = levers.neighbour_view(0, 10, 1.0, second=True)(store, case)
    assert fused == ["m2", "m1", "m3"]  # fused, m1 would lead: the exact hit keeps slot 1
    within = levers.neighbour_view(0, 10, 1.0, second=True, within=True)(store, case)
    assert within == ["m2", "m1"]  # a reranking of memvault's own: m3 is not brought in
    assert [levers.label(lever) for lever in levers.levers(quick=True, only=["e"])] == ["e"]
