"""bench/locomo_qa.py end to end on a tiny LoCoMo-format conversation, against the fake model.

The scripted answer model answers a question with its gold answer only when that answer is
written in the memories it was handed; the scripted judge says CORRECT only when the gold
answer is in the generated one. So the J figures follow from what retrieval handed over:
full context is always right, no memory never, memvault exactly when its turns held it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llm_fakes import FakeOpenAI
from waiting import WAIT

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

from locomo_qa import CONDITIONS, judge_label, render  # noqa: E402

QUESTIONS = [
    # (question, gold, evidence, category)
    ("What did Caroline buy in Hawaii?", "a shell necklace", ["D1:3"], 4),
    ("Which instrument does Melanie play?", "the cello", ["D2:2"], 4),
    ("When did Caroline start pottery?", "7 May 2023", ["D1:5", "D2:4"], 2),
]
TURNS = {
    "session_1": [
        ("Caroline", "Hi Mel! How was your weekend?"),
        ("Melanie", "Lovely, we went hiking near the lake with the kids."),
        ("Caroline", "I just got back from Hawaii, I bought a shell necklace there!"),
        ("Melanie", "That sounds wonderful, I love the beach."),
        ("Caroline", "Also I start pottery classes on 7 May 2023, I am so excited."),
    ],
    "session_2": [
        ("Melanie", "Guess what, I joined the city orchestra this month."),
        ("Melanie", "I play the cello there, every Thursday evening."),
        ("Caroline", "Amazing! My dog Oscar keeps stealing socks."),
        ("Caroline", "The pottery classes that began in May are going really well."),
        ("Melanie", "Send me pictures of your bowls, please."),
    ],
}
DATES = {"session_1": "1:56 pm on 8 May, 2023", "session_2": "10:15 am on 20 May, 2023"}


def locomo_file(root: Path) -> Path:
    conversation: dict[str, Any] = {"speaker_a": "Caroline", "speaker_b": "Melanie"}
    for number, (session, turns) in enumerate(TURNS.items(), start=1):
        conversation[session] = [
            {"speaker": speaker, "dia_id": f"D{number}:{i}", "text": text}
            for i, (speaker, text) in enumerate(turns, start=1)
        ]
        conversation[f"{session}_date_time"] = DATES[session]
    qa = [
        {"question": q, "answer": gold, "evidence": evidence, "category": category}
        for q, gold, evidence, category in QUESTIONS
    ]
    qa.append({"question": "Adversarial?", "answer": "n/a", "evidence": ["D1:1"], "category": 5})
    path = root / "locomo_tiny.json"
    path.write_text(json.dumps([{"sample_id": "conv-t", "conversation": conversation, "qa": qa}]))
    return path


def text_of(dia: str) -> str:
    session, turn = dia[1:].split(":")
    return TURNS[f"session_{session}"][int(turn) - 1][1]


def scripted(request: dict[str, Any]) -> str:
    prompt = request["messages"][-1]["content"]
    if prompt.startswith("Label an answer"):
        # The last "Gold answer:" line: the prompt's worked example comes first.
        gold = re.findall(r"^Gold answer: (.*)$", prompt, re.M)[-1]
        answer = re.findall(r"^Generated answer: (.*)$", prompt, re.M)[-1]
        if gold.lower() in answer.lower():
            return 'Same thing as the gold answer. {"label": "CORRECT"}'
        return "WRONG"
    question = re.search(r"^Question: (.*)$", prompt, re.M)
    assert question
    memories = prompt.split("Memories:", 1)[1].split("Question:", 1)[0]
    gold = next(g for q, g, _, _ in QUESTIONS if q == question.group(1))
    return gold if gold in memories else "I do not know."


def run_bench(data: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_QA_")}
    clean["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run(
        [sys.executable, "locomo_qa.py", str(data), "--k", "3", "--progress", "1", *args],
        cwd=BENCH,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )


def test_the_three_conditions_score_what_the_model_and_judge_imply(tmp_path: Path) -> None:
    data = locomo_file(tmp_path)
    with FakeOpenAI() as fake:
        calls = len(QUESTIONS) * len(CONDITIONS) * 2  # an answer and its verdict each
        for _ in range(calls):
            fake.reply_with(scripted)
        env = {
            "MEMVAULT_QA_BASE_URL": fake.url,
            "MEMVAULT_QA_MODEL": "fake-model",
            "MEMVAULT_QA_API_KEY": "fake-key",
        }
        done = run_bench(data, env, "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        assert fake.pending == 0 and len(fake.requests) == calls
    result = json.loads(done.stdout)

    assert result["skipped"] is None and result["model"] == "fake-model"
    rows = result["answers"]
    assert [row["question"] for row in rows] == [q for q, *_ in QUESTIONS]  # no category 5
    for row in rows:
        assert 0 < len(row["retrieved"]) <= 3
        handed = " ".join(text_of(dia) for dia in row["retrieved"])
        assert row["correct"] == {
            "memvault": row["gold"] in handed,
            "full_context": True,
            "no_memory": False,
        }
    # The Hawaii turn shares its words with the question: memvault hands it over.
    assert rows[0]["correct"]["memvault"] and "D1:3" in rows[0]["retrieved"]

    overall = result["overall"]
    n = len(rows)
    assert overall["J"]["memvault"] == sum(r["correct"]["memvault"] for r in rows) / n
    assert overall["J"]["full_context"] == 1.0 and overall["J"]["no_memory"] == 0.0
    assert overall["memvault_evidence_all"] == pytest.approx(
        sum(set(r["evidence"]) <= set(r["retrieved"]) for r in rows) / n
    )
    assert overall["memvault_evidence_any"] == pytest.approx(
        sum(bool(set(r["evidence"]) & set(r["retrieved"])) for r in rows) / n
    )
    assert overall["full_context_evidence_all"] == 1.0
    assert set(result["by_category"]) == {"2", "4"}
    assert result["by_category"]["4"]["questions"] == 2

    usage = result["usage"]
    for condition in CONDITIONS:
        assert usage[condition]["answer_calls"] == usage[condition]["judge_calls"] == n
        assert usage[condition]["answer_input_tokens"] > 0
        assert usage[condition]["judge_failures"] == 0
    # The whole conversation costs more prompt tokens than its top 3 turns, and they than none.
    spent = {c: usage[c]["answer_input_tokens"] for c in CONDITIONS}
    assert spent["full_context"] > spent["memvault"] > spent["no_memory"]

    table = render(result)
    header = table.splitlines()[0]
    assert all(f"J {c}" in header for c in CONDITIONS)
    assert "memvault evidence all@3" in header
    assert "| overall | 3 |" in table
    assert "3/3 questions" in done.stderr


def test_without_a_model_only_the_retrieval_part_is_reported(tmp_path: Path) -> None:
    done = run_bench(locomo_file(tmp_path), {})
    assert done.returncode == 0, done.stderr[-2000:]
    table = done.stdout
    assert "J " not in table.splitlines()[0]
    assert "memvault evidence all@3" in table and "memvault evidence any@3" in table
    assert "QA skipped" in table and "MEMVAULT_QA_MODEL" in table
    overall = next(line for line in table.splitlines() if line.startswith("| overall |"))
    any_at_3 = float(overall.split("|")[4])
    assert 0 < any_at_3 <= 1


def test_a_refusing_server_or_a_missing_file_ends_in_one_sentence(tmp_path: Path) -> None:
    data = locomo_file(tmp_path)
    with FakeOpenAI() as fake:
        fake.fail(401, times=len(QUESTIONS))  # the questions are asked at once
        env = {"MEMVAULT_QA_BASE_URL": fake.url, "MEMVAULT_QA_MODEL": "fake-model"}
        done = run_bench(data, env)
    assert done.returncode == 1
    assert "did not answer" in done.stderr and "Traceback" not in done.stderr

    missing = run_bench(tmp_path / "nowhere.json", {})
    assert missing.returncode == 2
    assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ('{"label": "CORRECT"}', "CORRECT"),
        ('The dates agree.\n```json\n{"label": "wrong"}\n```', "WRONG"),
        ("<think>is it CORRECT or WRONG?</think>CORRECT", "CORRECT"),
        ("WRONG", "WRONG"),
        ("Either CORRECT or WRONG", None),
        ('{"verdict": "yes"}', None),
        ("", None),
    ],
)
def test_a_judge_reply_gives_its_label_or_none(reply: str, label: str | None) -> None:
    assert judge_label(reply) == label
