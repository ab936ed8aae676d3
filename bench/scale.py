"""Index and search at scale on synthetic vaults (seeded, reproducible).

For each size N, a vault gets N/2 notes (Markdown files with headings, tags
and links) and N/2 memories (half from 20-turn conversations, half single
facts). Reported: ingest rate, embedding rate, no-op re-sync time, search
latency (p50 / p95; hybrid, keyword-only, filtered) and in-process
``remember`` latency.

The index machinery is measured with a 384-dimension hashing embedder (the
size of MiniLM's vectors), so a 100k-chunk run takes minutes, not an hour.
The local model's own costs are measured separately, for each runtime (ONNX
Runtime, the default, and torch through sentence-transformers), each in a
fresh interpreter so the figures do not mix: what it needs installed, load
time, resident memory after the load and after embedding, query embedding
latency and chunk embedding throughput, from which the time to index a
10 MB vault is estimated.

    python bench/scale.py [--sizes 1000 10000 100000] [--queries 200] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import backends
import numpy as np
import numpy.typing as npt

from memvault.clock import Clock
from memvault.config import Settings
from memvault.index.embedders import BaseEmbedder
from memvault.index.filters import SearchFilters
from memvault.runtime import Runtime
from memvault.storage.pg_schema import TS_CONFIG
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault

UTC = ZoneInfo("UTC")
# Real words first (the most frequent ranks), then pseudo-words: a 20,000-word vocabulary
# drawn with Zipf frequencies, as natural text is. Queries use mid-frequency words.
_REAL_WORDS = (
    "apollo rocket launch budget invoice garden tomato recipe rye flour oven sourdough meeting "
    "client contract deadline travel berlin tokyo lisbon train ticket hotel passport doctor "
    "dentist appointment insurance tax refund spreadsheet report slides keynote python rust "
    "database index backup server deploy staging kubernetes alert pager incident postmortem "
    "birthday gift anniversary dinner restaurant wine coffee tea oolong running marathon knee "
    "physio yoga guitar piano lesson school teacher homework football match tickets concert "
    "album podcast book novel chapter library loan mortgage bank transfer pension savings"
).split()
_SYLLABLES = "ka lo mi ne ru sa ti vo ze pa be do fi gu ha ji ke lu ma no pi qu ra se to".split()


def _vocabulary(size: int = 20_000, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    words = list(dict.fromkeys(_REAL_WORDS))
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


WORDS = _vocabulary()
_CUMULATIVE = list(itertools.accumulate(1.0 / (rank + 1) ** 1.07 for rank in range(len(WORDS))))
# Query words: ranks 30-3000, skipping the most common (a query's own function words).
_QUERY_WORDS = WORDS[30:3000]
_QUERY_CUMULATIVE = list(
    itertools.accumulate(1.0 / (rank + 31) ** 1.07 for rank in range(len(_QUERY_WORDS)))
)


def _words(rng: random.Random, n: int) -> list[str]:
    return rng.choices(WORDS, cum_weights=_CUMULATIVE, k=n)


def _query(rng: random.Random) -> str:
    return " ".join(rng.choices(_QUERY_WORDS, cum_weights=_QUERY_CUMULATIVE, k=rng.randint(2, 5)))


class HashingEmbedder(BaseEmbedder):
    """384-d random projection of hashed words: MiniLM's vector size at a fraction of its cost."""

    provider = "bench"
    model = "hashing-384"

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim

    def dimension(self) -> int:
        return self.dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                seed = int.from_bytes(digest, "little")
                out[row, seed % self.dim] += 1.0
                out[row, (seed >> 20) % self.dim] -= 0.5
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        return out


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(_words(rng, n)).capitalize() + "."


def build_vault(root: Path, size: int, seed: int = 7) -> tuple[Runtime, float, dict[str, int]]:
    """A vault with size/2 notes and size/2 memories; returns the runtime and ingest seconds."""
    rng = random.Random(seed)
    init_vault(Vault(root))
    notes = size // 2
    folders = ["Projects", "Notes", "Notes/Archive", "Contacts", "Journal"]
    for n in range(notes):
        folder = folders[n % len(folders)]
        name = f"{folder}/Note {n:06d}.md"
        tags = ", ".join(rng.sample(_REAL_WORDS, 2))
        links = " ".join(f"[[Note {rng.randrange(notes):06d}]]" for _ in range(2))
        body = [
            f"---\ntags: [{tags}]\ncreated: 2026-0{1 + n % 9}-1{n % 10}\n---",
            f"# Note {n:06d}",
            "",
        ]
        for _ in range(rng.randint(1, 3)):
            body += [f"## {_sentence(rng, 2)[:-1]}", _sentence(rng, rng.randint(15, 60)), ""]
        body.append(f"See {links}.")
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(body) + "\n")
    clock = Clock(UTC)
    settings = Settings(vault=root, storage=backends.storage())
    runtime = Runtime.open(settings, clock=clock, embedder=HashingEmbedder())
    runtime.index.sync()  # index the notes first (timed separately below)
    started = time.perf_counter()
    items = []
    start = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
    memories = size - notes
    for m in range(memories):
        conversation = m // 20
        conversational = conversation % 2 == 0
        items.append(
            (
                _sentence(rng, rng.randint(6, 20)),
                rng.choice(["fact", "preference", "context", "decision", "person"]),
                round(rng.random(), 2),
                (),
                f"chat:{conversation}" if conversational else "cli",
                start + timedelta(minutes=m),
            )
        )
    for batch in range(0, len(items), 5000):
        runtime.memories.remember_many(items[batch : batch + 5000])
    memory_seconds = time.perf_counter() - started
    return runtime, memory_seconds, {"notes": notes, "memories": memories}


def keyword_matches(runtime: Runtime, text: str) -> int:
    """How many chunks hold any word of ``text`` (what keyword search ranks)."""
    if runtime.index.dialect == "sqlite":
        statement = "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?"
        words = " OR ".join(f'"{w}"' for w in text.split())
    else:
        statement = (
            "SELECT count(*) FROM chunks_fts, websearch_to_tsquery(?::regconfig, ?) q"
            " WHERE own @@ q OR ctx @@ q"
        )
        words = " or ".join(text.split())
    params = (words,) if runtime.index.dialect == "sqlite" else (TS_CONFIG, words)
    return int(runtime.index.conn.execute(statement, params).fetchone()[0])


def shown(figures: dict[str, Any]) -> str:
    """``p50 / p95 ms`` of a :func:`percentiles` result, for a report's table."""
    return f"{figures['p50_ms']} / {figures['p95_ms']} ms"


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50 / p95 in milliseconds."""
    ordered = sorted(samples)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2), "p95_ms": round(p95 * 1000, 2)}


def latency(samples: list[float]) -> dict[str, float]:
    """p50 / p95 / max in milliseconds."""
    return {**percentiles(samples), "max_ms": round(max(samples) * 1000, 2)}


def measure(size: int, queries: int) -> dict[str, Any]:
    """Every figure for one vault size."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        started = time.perf_counter()
        # Notes: written to disk, then one full sync (timed).
        runtime, memory_seconds, counts = build_vault(root, size)
        settings = runtime.settings
        runtime.close()
        runtime = Runtime.open(settings, clock=Clock(UTC), embedder=HashingEmbedder())
        sync_started = time.perf_counter()
        report = runtime.index.rebuild()  # the whole vault, into an empty index
        sync_seconds = time.perf_counter() - sync_started
        embed_started = time.perf_counter()
        embedded = runtime.index.embed_pending(batch=512)
        embed_seconds = time.perf_counter() - embed_started
        status = runtime.index.status()
        noop = []
        for _ in range(3):
            t = time.perf_counter()
            again = runtime.index.sync()
            noop.append(time.perf_counter() - t)
            assert again.touched == 0
        rng = random.Random(11)
        texts = [_query(rng) for _ in range(queries)]
        matches = [keyword_matches(runtime, text) for text in texts]
        backends.settle(settings.storage)
        runtime.index.vectors.warm()
        runtime.searcher.search(texts[0])  # warm caches
        timings: dict[str, list[float]] = {"hybrid": [], "keyword": [], "memories_only": []}
        for text in texts:
            for name, kwargs in (
                ("hybrid", {}),
                ("keyword", {"mode": "keyword"}),
                ("memories_only", {"filters": SearchFilters(kinds=("memory",))}),
            ):
                t = time.perf_counter()
                runtime.searcher.search(text, limit=10, **kwargs)  # type: ignore[arg-type]
                timings[name].append(time.perf_counter() - t)
        # A note edited (appended to, as in an editor) and synced before each search: the
        # index's caches that an edit makes stale are read again here.
        edited = sorted((root / "Notes").glob("*.md"))[:5]
        after_edit = []
        for n, text in enumerate(texts[:50]):
            with edited[n % len(edited)].open("a", encoding="utf-8") as note:
                note.write(f"\nA line added later about {_query(rng)}.\n")
            runtime.index.sync()
            t = time.perf_counter()
            runtime.searcher.search(text, limit=10)
            after_edit.append(time.perf_counter() - t)
        remember = []
        for n in range(50):
            t = time.perf_counter()
            runtime.memories.remember(f"Benchmark fact number {n} about {_query(rng)}")
            remember.append(time.perf_counter() - t)
        runtime.close()
        return {
            "size": size,
            **counts,
            "chunks": status.chunks,
            "build_seconds": round(time.perf_counter() - started, 1),
            "ingest_notes_per_s": round(len(report.added) / sync_seconds, 1),
            "ingest_memories_per_s": round(counts["memories"] / memory_seconds, 1),
            "embed_chunks_per_s": round(embedded / embed_seconds, 1) if embed_seconds else None,
            "noop_resync_s": round(statistics.median(noop), 3),
            "median_keyword_matches": int(statistics.median(matches)),
            "search": {name: percentiles(samples) for name, samples in timings.items()},
            "search_after_edit": percentiles(after_edit),
            "remember": percentiles(remember),
        }


MODEL_RUNTIMES = ("onnx", "torch")
# What each runtime needs installed besides numpy (which memvault needs anyway).
RUNTIME_PACKAGES = {
    "onnx": ("onnxruntime", "tokenizers"),
    "torch": (
        "torch",
        "transformers",
        "sentence_transformers",
        "tokenizers",
        "huggingface_hub",
        "safetensors",
        "scipy",
        "sklearn",
    ),
}


def _tree_mb(path: Path) -> float:
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    return round(total / 1_000_000, 1)


def _package_mb(names: Sequence[str]) -> float:
    """Installed size of these top-level packages (their site-packages folders)."""
    import importlib.util

    total = 0.0
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            total += _tree_mb(Path(next(iter(spec.submodule_search_locations))))
    return round(total, 1)


def _memory_mb() -> dict[str, float]:
    """This process's resident memory now (VmRSS) and at its peak (VmHWM), in MB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = round(int(value.split()[0]) / 1024, 1)
    return {"rss_mb": fields["VmRSS"], "peak_mb": fields["VmHWM"]}


def model_probe(runtime: str, sample: int) -> dict[str, Any]:
    """One runtime's figures, in this interpreter (run it fresh: ``--model-probe``)."""
    started = time.perf_counter()  # imports included, as a CLI or daemon start pays them
    from memvault.index.embedders import LocalEmbedder

    embedder = LocalEmbedder(runtime="torch" if runtime == "torch" else "onnx")
    embedder.embed(["load"])
    load = time.perf_counter() - started
    loaded = _memory_mb()
    rng = random.Random(5)
    query_times = []
    for _ in range(50):
        text = " ".join(rng.sample(_REAL_WORDS, 4))
        t = time.perf_counter()
        embedder.embed([text])
        query_times.append(time.perf_counter() - t)
    chunks = [" ".join(rng.choices(_REAL_WORDS, k=rng.randint(60, 120))) for _ in range(sample)]
    t = time.perf_counter()
    embedder.embed(chunks)
    per_second = sample / (time.perf_counter() - t)
    return {
        "load_s": round(load, 2),
        "rss_loaded_mb": loaded["rss_mb"],
        "rss_embedded_mb": _memory_mb()["rss_mb"],
        "peak_mb": _memory_mb()["peak_mb"],
        "query_embedding": percentiles(query_times),
        "chunk_embeddings_per_s": round(per_second, 1),
    }


def model_costs(sample: int = 1000) -> dict[str, Any]:
    """The local model under each runtime, each measured in a fresh interpreter."""
    from memvault.index.local_model import ModelFile, weights_dir

    model_file = ModelFile()
    model_file.prepare()  # as `make install` does: no load below includes the export
    model_mb = {
        "onnx": round(model_file.status().size_bytes / 1_000_000, 1),
        "torch": _tree_mb(weights_dir()),
    }
    runtimes: dict[str, Any] = {}
    for runtime in MODEL_RUNTIMES:
        command = [sys.executable, __file__, "--model-probe", runtime, "--sample", str(sample)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        figures = json.loads(done.stdout.splitlines()[-1])
        figures["packages_mb"] = _package_mb(RUNTIME_PACKAGES[runtime])
        figures["model_mb"] = model_mb[runtime]
        runtimes[runtime] = figures
    # A 10 MB vault at ~1,600 characters a chunk is about 6,500 chunks.
    chunks_10mb = 10 * 1024 * 1024 / 1600
    default = runtimes["onnx"]["chunk_embeddings_per_s"]
    return {
        "runtimes": runtimes,
        "estimated_10mb_vault_embedding_s": round(chunks_10mb / default, 1),
    }


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    import os
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) // 1024 // 1024} GiB"
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "python": platform.python_version(),
    }


def machine_line(m: dict[str, Any]) -> str:
    """The machine a report was measured on, as one sentence."""
    return f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory']}, Python {m['python']}."


def render(result: dict[str, Any]) -> str:
    """A Markdown report."""
    lines = [
        "| vault | chunks | notes/s | memories/s | embed chunks/s | no-op re-sync"
        " | query matches | hybrid p50/p95 | keyword p50/p95 | memories p50/p95"
        " | hybrid after a note edit p50/p95 | remember p50/p95 |",
        "|---" * 12 + "|",
    ]
    if not result["sizes"]:  # --model-only
        lines = []
    for row in result["sizes"]:
        s = row["search"]
        cells = [
            f"{row['size']:,} ({row['notes']:,} notes + {row['memories']:,} memories)",
            f"{row['chunks']:,}",
            f"{row['ingest_notes_per_s']:,}",
            f"{row['ingest_memories_per_s']:,}",
            f"{row['embed_chunks_per_s']:,}",
            f"{row['noop_resync_s']:.3f} s",
            f"{row['median_keyword_matches']:,}",
            *(
                f"{s[k]['p50_ms']} / {s[k]['p95_ms']} ms"
                for k in ("hybrid", "keyword", "memories_only")
            ),
            shown(row["search_after_edit"]) if "search_after_edit" in row else "-",
            f"{row['remember']['p50_ms']} / {row['remember']['p95_ms']} ms",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    largest = max(result["sizes"], key=lambda row: row["size"], default=None)
    if largest is not None and largest["size"] >= 100_000:
        p95 = largest["search"]["hybrid"]["p95_ms"]
        lines += [
            "",
            f"Search target (DESIGN): hybrid p95 <= 50 ms at 100k chunks in process; here "
            f"{p95} ms: {'**met**' if p95 <= 50 else '**not met**'}.",
        ]
    model = result.get("model")
    if model:
        lines += [
            "",
            "Local model (all-MiniLM-L6-v2), each runtime in a fresh process:",
            "",
            "| runtime | installed: packages + model | load (imports included) "
            "| RSS loaded | RSS after 1,000 chunks (peak) | chunks/s | query p50/p95 |",
            "|---" * 7 + "|",
        ]
        for name, row in model["runtimes"].items():
            label = "onnx (default)" if name == "onnx" else name
            cells = [
                label,
                f"{row['packages_mb']:,.0f} + {row['model_mb']:,.0f} MB",
                f"{row['load_s']} s",
                f"{row['rss_loaded_mb']:,.0f} MB",
                f"{row['rss_embedded_mb']:,.0f} MB ({row['peak_mb']:,.0f} MB)",
                f"{row['chunk_embeddings_per_s']}",
                _ms_pair(row["query_embedding"]),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [
            "",
            "Packages: onnx = onnxruntime + tokenizers; torch = torch, transformers, "
            "sentence-transformers and their own dependencies (tokenizers, huggingface_hub, "
            "safetensors, scipy, scikit-learn). Model: the exported ONNX file, or the "
            "package's safetensors weights. A 10 MB vault (~6,500 chunks) embeds in "
            f"~{model['estimated_10mb_vault_embedding_s']} s with the default runtime.",
        ]
    lines += ["", machine_line(result["machine"])]
    return "\n".join(lines)


def _ms_pair(figures: dict[str, float]) -> str:
    return f"{figures['p50_ms']} / {figures['p95_ms']} ms"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 10000, 100000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-model", action="store_true", help="skip the local model figures")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--model-only", action="store_true", help="only the local model figures")
    parser.add_argument("--model-probe", choices=MODEL_RUNTIMES, help=argparse.SUPPRESS)
    parser.add_argument("--sample", type=int, default=1000, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.model_probe:  # the child model_costs() starts for each runtime
        print(json.dumps(model_probe(args.model_probe, args.sample)))
        return 0
    if args.model_only:
        args.sizes = []
    result: dict[str, Any] = {"machine": machine(), "sizes": []}
    for size in args.sizes:
        if not args.json:
            print(f"building a {size:,}-item vault...", file=sys.stderr)
        result["sizes"].append(measure(size, args.queries))
    if not args.no_model:
        result["model"] = model_costs()
    print(json.dumps(result) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
