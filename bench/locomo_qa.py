"""End-to-end answer accuracy on LoCoMo: memvault retrieves, a model answers, a model judges.

Each conversation is ingested as in locomo.py (one memory per turn, its own
store). For every question of categories 1-4 the model answers under three
conditions: ``memvault`` (the top k turns of memvault's search as context),
``full_context`` (the whole conversation, cut from the start to fit
``--max-context-tokens`` at 4 characters a token) and ``no_memory`` (the
question alone). An LLM judge labels each answer CORRECT or WRONG against the
gold answer, generous on paraphrase and date formats: the J metric of the mem0
paper (Chhikara et al., 2025). A judge reply that is neither counts as WRONG
and as a judge failure.

The retrieval part is always reported: the share of questions whose evidence
turns are all (any) among what was handed to the model. Without a model only
that part runs.

The model is any OpenAI-compatible server (vLLM, Ollama, llama.cpp, OpenAI),
through memvault's own provider, named by the environment:

    MEMVAULT_QA_BASE_URL   e.g. http://localhost:8000/v1 (unset: OpenAI itself)
    MEMVAULT_QA_MODEL      the answering model (unset: retrieval only)
    MEMVAULT_QA_API_KEY    the key, if the server needs one
    MEMVAULT_QA_JUDGE_MODEL  the judge (default: MEMVAULT_QA_MODEL)

    python bench/locomo_qa.py [FILE ...] [--conversations K] [--limit N] [--k 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from locomo import DEFAULT_FILE, ingest, load, questions_of, turns_of

from memvault.config import LLMSettings
from memvault.index.embedders import LocalEmbedder
from memvault.llm.base import ChatMessage, LLMError, LLMNotConfiguredError, Provider
from memvault.llm.factory import make_provider

CONDITIONS = ("memvault", "full_context", "no_memory")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
CHARS_PER_TOKEN = 4
KEY_ENV = "MEMVAULT_QA_API_KEY"
NO_MODEL = (
    "QA skipped: no model configured; set MEMVAULT_QA_MODEL (with MEMVAULT_QA_BASE_URL for a "
    "local server such as vLLM, Ollama or llama.cpp, and MEMVAULT_QA_API_KEY if it needs a key) "
    "to score answers."
)

ANSWER_PROMPT = """\
You answer questions about a long conversation between {speakers}, using memories \
taken from it. Each memory starts with the date of the conversation session it comes from.

- Answer from the memories. If they contradict each other, trust the most recent one.
- When a memory speaks of a relative time ("last year", "two months ago"), work out \
the actual date from the memory's date.
- Answer in a short phrase of a few words, with no explanation. Write dates as the \
memories write them.

Memories:
{memories}

Question: {question}
Answer:"""

JUDGE_PROMPT = """\
Label an answer to a question as CORRECT or WRONG. You are given a question (asked by \
one person about a conversation they had), a gold (ground truth) answer and a generated answer.

The gold answer is usually a short phrase naming the topic, e.g.
Question: Do you remember what I got the last time I went to Hawaii?
Gold answer: A shell necklace
The generated answer may be much longer: be generous. As long as it refers to the same \
thing as the gold answer, it is CORRECT.

For questions about time, the gold answer is a date, month or year. The generated answer \
may be longer, use another format ("May 7th" against "7 May") or a relative reference: as \
long as it means the same date or period as the gold answer, it is CORRECT.

Question: {question}
Gold answer: {gold}
Generated answer: {answer}

Reply with one JSON object and nothing else: {{"label": "CORRECT"}} or {{"label": "WRONG"}}."""


@dataclass
class Usage:
    """Model calls and tokens of one condition, answering and judging."""

    answer_calls: int = 0
    answer_input_tokens: int = 0
    answer_output_tokens: int = 0
    judge_calls: int = 0
    judge_input_tokens: int = 0
    judge_output_tokens: int = 0
    judge_failures: int = 0
    empty_answers: int = 0
    truncated_answers: int = 0


@dataclass
class Models:
    """The answering model and its judge, with what each condition spent on them."""

    answerer: Provider
    judge: Provider
    answer_tokens: int
    judge_tokens: int
    usage: dict[str, Usage] = field(default_factory=lambda: {c: Usage() for c in CONDITIONS})
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, condition: str, prompt: str) -> str:
        """The model's short answer to ``prompt`` (its thinking, if any, removed)."""
        done = self.answerer.complete([ChatMessage("user", prompt)], max_tokens=self.answer_tokens)
        text = _without_thinking(done.text)
        with self._lock:
            usage = self.usage[condition]
            usage.answer_calls += 1
            usage.answer_input_tokens += done.usage.input_tokens
            usage.answer_output_tokens += done.usage.output_tokens
            usage.truncated_answers += done.stop_reason == "length"
            usage.empty_answers += not text
        return text

    def correct(self, condition: str, question: str, gold: str, answer: str) -> bool:
        """The judge's verdict; an empty answer is WRONG without asking."""
        if not answer:
            return False
        prompt = JUDGE_PROMPT.format(question=question, gold=gold, answer=answer)
        done = self.judge.complete([ChatMessage("user", prompt)], max_tokens=self.judge_tokens)
        label = judge_label(done.text)
        with self._lock:
            usage = self.usage[condition]
            usage.judge_calls += 1
            usage.judge_input_tokens += done.usage.input_tokens
            usage.judge_output_tokens += done.usage.output_tokens
            usage.judge_failures += label is None
        return label == "CORRECT"


def judge_label(text: str) -> str | None:
    """CORRECT or WRONG from a judge's reply: its JSON ``label``, else the one word it says."""
    text = _without_thinking(text)
    for match in re.finditer(r"\{[^{}]*\}", text):
        try:
            parsed = json.loads(match.group())
        except ValueError:
            continue
        label = str(parsed.get("label", "")).strip().upper() if isinstance(parsed, dict) else ""
        if label in ("CORRECT", "WRONG"):
            return label
    words = set(re.findall(r"\b(CORRECT|WRONG)\b", text.upper()))
    return words.pop() if len(words) == 1 else None


def _without_thinking(text: str) -> str:
    """A reasoning model's answer without its ``<think>`` block."""
    return re.sub(r"<think>.*?(</think>|$)", "", text, flags=re.DOTALL).strip()


def models_from_env(answer_tokens: int, judge_tokens: int) -> Models | None:
    """The models MEMVAULT_QA_* name, or None when no model is named."""
    model = os.environ.get("MEMVAULT_QA_MODEL", "").strip()
    if not model:
        return None
    judge_model = os.environ.get("MEMVAULT_QA_JUDGE_MODEL", "").strip() or model
    base_url = os.environ.get("MEMVAULT_QA_BASE_URL", "").strip() or None

    def provider(name: str) -> Provider:
        settings = LLMSettings(
            provider="openai",
            model=name,
            base_url=base_url,
            api_key_env=KEY_ENV,
            temperature=0.0,
        )
        return make_provider(settings)

    answerer = provider(model)
    judge = answerer if judge_model == model else provider(judge_model)
    return Models(answerer, judge, answer_tokens, judge_tokens)


def memory_line(turn: dict[str, Any]) -> str:
    """A turn as the model sees it: its session's date, then the turn."""
    return f"[{turn['created']:%d %B %Y}] {turn['text']}"


def full_context(turns: list[dict[str, Any]], max_tokens: int) -> list[dict[str, Any]]:
    """The last turns of the conversation whose lines fit ``max_tokens``, in order."""
    budget = max_tokens * CHARS_PER_TOKEN
    kept: list[dict[str, Any]] = []
    for turn in reversed(turns):
        budget -= len(memory_line(turn)) + 1
        if budget < 0:
            break
        kept.append(turn)
    return kept[::-1]


@dataclass
class Row:
    """One question: its evidence, what each condition was handed, and the verdicts."""

    conversation: str
    category: int
    question: str
    gold: str
    evidence: list[str]
    handed: dict[str, list[str]]  # condition -> dia_ids given to the model
    answers: dict[str, str] = field(default_factory=dict)
    correct: dict[str, bool] = field(default_factory=dict)

    def recall(self, condition: str) -> tuple[bool, bool]:
        """(all evidence handed, some evidence handed) for ``condition``."""
        handed = set(self.handed.get(condition, ()))
        found = [dia in handed for dia in self.evidence]
        return all(found), any(found)


def run(
    files: Sequence[Path],
    models: Models | None,
    *,
    conversations: int | None = None,
    limit: int | None = None,
    k: int = 10,
    max_context_tokens: int = 100_000,
    workers: int = 1,
    progress_every: int = 10,
) -> dict[str, Any]:
    """Every selected question through retrieval and, with ``models``, the three conditions."""
    started = time.perf_counter()
    samples = load(files)[:conversations]
    selected = [questions_of(sample)[:limit] for sample in samples]
    total = sum(len(questions) for questions in selected)
    embedder = LocalEmbedder()
    rows: list[Row] = []
    timings: dict[str, float] = defaultdict(float)
    for sample, questions in zip(samples, selected, strict=True):
        turns = turns_of(sample)
        by_id = {turn["id"]: turn for turn in turns}
        whole = full_context(turns, max_context_tokens)
        with tempfile.TemporaryDirectory() as tmp:
            conversation = ingest(Path(tmp), sample, turns, embedder, timings)
            try:
                search_started = time.perf_counter()
                todo = [
                    Row(
                        str(sample.get("sample_id", "?")),
                        q["category"],
                        q["question"],
                        str(q["answer"]),
                        list(q["evidence"]),
                        {
                            "memvault": [d for d in conversation.search(q["question"], k) if d],
                            "full_context": [turn["id"] for turn in whole],
                            "no_memory": [],
                        },
                    )
                    for q in questions
                ]
                timings["search"] += time.perf_counter() - search_started
            finally:
                conversation.close()
        if models is not None:
            speakers = " and ".join(
                sample["conversation"].get(key, "?") for key in ("speaker_a", "speaker_b")
            )
            answer_started = time.perf_counter()
            pool = ThreadPoolExecutor(max_workers=workers)
            try:
                for row in pool.map(partial(_ask, models, by_id=by_id, speakers=speakers), todo):
                    rows.append(row)
                    _progress(rows, total, progress_every)
            finally:
                pool.shutdown(cancel_futures=True)  # a refusing server stops the run at once
            timings["model"] += time.perf_counter() - answer_started
        else:
            for row in todo:
                rows.append(row)
                _progress(rows, total, progress_every)
    return _report(rows, models, k, max_context_tokens, files, timings, started)


def _ask(models: Models, row: Row, *, by_id: dict[str, dict[str, Any]], speakers: str) -> Row:
    """``row`` answered and judged under every condition."""
    for condition in CONDITIONS:
        lines = [memory_line(by_id[dia]) for dia in dict.fromkeys(row.handed[condition])]
        prompt = ANSWER_PROMPT.format(
            speakers=speakers,
            memories="\n".join(lines) or "(none)",
            question=row.question,
        )
        row.answers[condition] = models.answer(condition, prompt)
        row.correct[condition] = models.correct(
            condition, row.question, row.gold, row.answers[condition]
        )
    return row


def _progress(rows: list[Row], total: int, every: int) -> None:
    if every <= 0 or (len(rows) % every and len(rows) != total):
        return
    line = f"  {len(rows)}/{total} questions"
    if rows[-1].correct:
        line += ", J so far: " + ", ".join(
            f"{c} {sum(r.correct[c] for r in rows) / len(rows):.3f}" for c in CONDITIONS
        )
    print(line, file=sys.stderr, flush=True)


def _scores(rows: list[Row], with_qa: bool) -> dict[str, Any]:
    n = len(rows)
    out: dict[str, Any] = {"questions": n}
    for condition in ("memvault", "full_context"):
        recalls = [row.recall(condition) for row in rows]
        out[f"{condition}_evidence_all"] = sum(a for a, _ in recalls) / max(n, 1)
        out[f"{condition}_evidence_any"] = sum(s for _, s in recalls) / max(n, 1)
    if with_qa:
        out["J"] = {c: sum(row.correct[c] for row in rows) / max(n, 1) for c in CONDITIONS}
    return out


def _report(
    rows: list[Row],
    models: Models | None,
    k: int,
    max_context_tokens: int,
    files: Sequence[Path],
    timings: dict[str, float],
    started: float,
) -> dict[str, Any]:
    groups: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        groups[row.category].append(row)
    with_qa = models is not None
    return {
        "k": k,
        "max_context_tokens": max_context_tokens,
        "conversations": len({row.conversation for row in rows}),
        "model": models.answerer.model if models else None,
        "judge_model": models.judge.model if models else None,
        "skipped": None if with_qa else NO_MODEL,
        "overall": _scores(rows, with_qa),
        "by_category": {str(c): _scores(group, with_qa) for c, group in sorted(groups.items())},
        "usage": {c: vars(u) for c, u in models.usage.items()} if models else None,
        "answers": [
            {
                "conversation": row.conversation,
                "category": row.category,
                "question": row.question,
                "gold": row.gold,
                "evidence": row.evidence,
                "retrieved": row.handed["memvault"],
                "answers": row.answers,
                "correct": row.correct,
            }
            for row in rows
        ],
        "seconds": {
            **{key: round(value, 2) for key, value in timings.items()},
            "total": round(time.perf_counter() - started, 2),
        },
        "files": [str(file) for file in files],
    }


def render(result: dict[str, Any]) -> str:
    """Markdown: J per condition and the retrieval part, per category and overall; then usage."""
    with_qa = result["skipped"] is None
    k = result["k"]
    columns = ["category", "questions"]
    if with_qa:
        columns += [f"J {c}" for c in CONDITIONS]
    columns += [
        f"memvault evidence all@{k}",
        f"memvault evidence any@{k}",
        "full context evidence all",
    ]
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    named = [(f"{c} {CATEGORIES.get(int(c), '?')}", s) for c, s in result["by_category"].items()]
    for name, scores in [*named, ("overall", result["overall"])]:
        cells = [name, str(scores["questions"])]
        if with_qa:
            cells += [f"{scores['J'][c]:.3f}" for c in CONDITIONS]
        cells += [
            f"{scores['memvault_evidence_all']:.3f}",
            f"{scores['memvault_evidence_any']:.3f}",
            f"{scores['full_context_evidence_all']:.3f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if not with_qa:
        lines.append(result["skipped"])
    else:
        lines.append(f"Model {result['model']}, judge {result['judge_model']}.")
        lines.append("")
        lines.append(
            "| condition | answer calls | answer tokens in | answer tokens out | judge calls "
            "| judge tokens in | judge tokens out | judge failures | empty answers |"
        )
        lines.append("|---" * 9 + "|")
        for condition, usage in result["usage"].items():
            cells = [
                condition,
                *(
                    str(usage[key])
                    for key in (
                        "answer_calls",
                        "answer_input_tokens",
                        "answer_output_tokens",
                        "judge_calls",
                        "judge_input_tokens",
                        "judge_output_tokens",
                        "judge_failures",
                        "empty_answers",
                    )
                ),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        f"{result['conversations']} conversations, {result['overall']['questions']} questions, "
        f"k = {k}, full context cut to {result['max_context_tokens']} tokens; "
        f"seconds: {result['seconds']}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="LoCoMo-format JSON files")
    parser.add_argument("--conversations", type=int, help="only the first K conversations")
    parser.add_argument("--limit", type=int, help="only the first N questions per conversation")
    parser.add_argument("--k", type=int, default=10, help="memories retrieved per question")
    parser.add_argument("--max-context-tokens", type=int, default=100_000)
    parser.add_argument("--answer-tokens", type=int, default=256, help="longest answer")
    parser.add_argument("--judge-tokens", type=int, default=256, help="longest judge reply")
    parser.add_argument("--workers", type=int, default=4, help="questions asked at once")
    parser.add_argument("--progress", type=int, default=10, help="a stderr line every N")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    files = args.files or [DEFAULT_FILE]
    for file in files:
        if not file.is_file():
            parser.error(f"{file} does not exist (the LoCoMo data file; pass its path)")
    try:
        models = models_from_env(args.answer_tokens, args.judge_tokens)
        result = run(
            files,
            models,
            conversations=args.conversations,
            limit=args.limit,
            k=args.k,
            max_context_tokens=args.max_context_tokens,
            workers=max(args.workers, 1),
            progress_every=args.progress,
        )
    except (LLMError, LLMNotConfiguredError) as error:
        where = os.environ.get("MEMVAULT_QA_BASE_URL") or "OpenAI"
        print(f"locomo_qa: the model server ({where}) did not answer: {error}", file=sys.stderr)
        return 1
    except json.JSONDecodeError as error:
        print(f"locomo_qa: a data file is not JSON ({error})", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result))
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
