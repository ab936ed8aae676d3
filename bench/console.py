"""The console's pages: server time of each at 10,000 memories (DESIGN.md: p95 <= 50 ms).

A vault with ``--memories`` memories over three category files (sentences of
bench/scale.py's Zipf vocabulary, queried with its mid-frequency words), indexed
and embedded (a 384-d hashing embedder, so search is hybrid), served in process
by the daemon's own app with the console (no network: the figure is the
server's time, from the request entering the app to its last byte). The
browser signs in as ``memvault ui`` does; each page is then asked for
``--requests`` times, after one request that warms it (Today's first one runs
the doctor, whose report is then reused for 30 s). The search page is timed
as the whole page and as the htmx fragment a keystroke asks for. The "Why did it say
that" pages read ``AGENT_RUNS`` agent runs' records, each with a context built at
this size (its sections, the memories recalled with their scores) and two tool calls;
the session's transcript marks what each of its user turns recalled.

    python bench/console.py [--memories 10000] [--requests 100] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from scale import HashingEmbedder, _query, _sentence, latency, machine, machine_line
from starlette.testclient import TestClient

from memvault.clock import Clock
from memvault.config import Settings
from memvault.console import console_front
from memvault.gateway.app import create_app
from memvault.gateway.daemon import Daemon
from memvault.gateway.routes.memory import run_search
from memvault.index.filters import SearchFilters
from memvault.memory.runs import RunRecord, context_record, tool_call_record
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault

UTC = ZoneInfo("UTC")
FILES = {"Facts": "fact", "Preferences": "preference", "Decisions": "decision"}
QUERIES = [_query(random.Random(seed)) for seed in range(20)]
# The daemon believes it listens on port 80, so the test client's Host (127.0.0.1) is its own.
PORT = 80
RUNS, SESSIONS, TURNS = 30, 60, 200
# Agent runs recorded: one for each user turn of the long session, the rest elsewhere.
AGENT_RUNS = 500
# The Knowledge and People pages: this many people (Contacts/, each with facts and relations;
# every 100th memory links the first), and insight notes, each from a few memories.
PEOPLE, INSIGHTS = 100, 20


def seed(root: Path, count: int) -> None:
    """``count`` memories, spread over three category files, written as a person's would be."""
    rng = random.Random(11)
    init_vault(Vault(root))
    per_file = count // len(FILES)
    for n, (title, category) in enumerate(FILES.items()):
        lines = ["---", f"category: {category}", "tags: [memory]", "---", f"# {title}", ""]
        for i in range(per_file):
            link = " with [[Person 0]]" if i % 100 == 0 else ""
            lines.append(
                f"- {_sentence(rng, rng.randint(6, 20))}{link} #t{i % 13}"
                f" [importance:: 0.5] [created:: 2026-01-01 10:00:00] [source:: cli]"
                f" ^m-{n:02x}{i:06x}"
            )
        (root / f"Memory/{title}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "Contacts").mkdir(exist_ok=True)
    for n in range(PEOPLE):
        facts = [
            f"- [employer] Firm {n} [valid_from:: 2020-01-01] [valid_until:: 2024-01-01]",
            f"- [employer] Firm {n + 1} [valid_from:: 2024-01-01]",
            f"- [hobby] {_sentence(rng, 5)}",
        ]
        relations = [f"- friend_of [[Person {(n + 1) % PEOPLE}]]", f"- works_at [[Firm {n}]]"]
        (root / f"Contacts/Person {n}.md").write_text(
            f"---\ntype: person\n---\n# Person {n}\n\n## Observations\n"
            + "\n".join(facts)
            + "\n\n## Relations\n"
            + "\n".join(relations)
            + "\n",
            encoding="utf-8",
        )
    (root / "Insights").mkdir(exist_ok=True)
    for n in range(INSIGHTS):
        sources = ", ".join(f"m-00{i:06x}" for i in range(n * 3, n * 3 + 3))
        (root / f"Insights/Insight {n}.md").write_text(
            f"---\ntype: insight\nsources: [{sources}]\n---\n# Insight {n}\n\n"
            f"<!-- memvault:insight -->\n## Insight\n\n{_sentence(rng, 20)}\n"
            "<!-- /memvault:insight -->\n",
            encoding="utf-8",
        )


def _search_alone(daemon: Daemon, requests: int) -> dict[str, float]:
    """The hybrid search the search page runs, without the page: what the page adds."""
    filters = SearchFilters(kinds=("memory",))
    samples = []
    for n in range(requests):
        started = time.perf_counter()
        run_search(
            daemon, QUERIES[n % len(QUERIES)], 20, filters, keyword=False, mmr=None, min_score=None
        )
        samples.append(time.perf_counter() - started)
    return {"first_ms": 0.0, **latency(samples)}


def _activity(daemon: Daemon) -> tuple[int, int]:
    """What the Jobs and Sessions pages show: a run of living_summary over the vault (its
    MEMORY.md diff), ``RUNS`` more runs in the history, and ``SESSIONS`` conversations,
    the last of ``TURNS`` messages; the ids of the run and that session."""
    run_id = daemon.jobs.run_now("living_summary").id
    for _ in range(RUNS):
        daemon.jobs.run_now("reminders")
    sessions = daemon.runtime.sessions
    for n in range(SESSIONS):
        for turn in range(TURNS if n == SESSIONS - 1 else 4):
            role = "user" if turn % 2 == 0 else "assistant"
            session, _ = sessions.log(
                f"telegram:{n}", _sentence(random.Random(turn), 14), role=role
            )
    _agent_runs(daemon, session.id)
    return run_id, session.id


def _agent_runs(daemon: Daemon, session_id: int) -> None:
    """``AGENT_RUNS`` records of agent runs: a context built for one of the queries (at
    the vault's size), the memories it recalled, two tool calls with their results."""
    runtime = daemon.runtime
    built = [context_record(runtime.context.build_result(q, 2000)) for q in QUERIES[:10]]
    calls = [
        tool_call_record("recall", {"topic": q}, True, None, _sentence(random.Random(n), 300))
        for n, q in enumerate(QUERIES[:2])
    ]
    asked = [m for m in runtime.sessions.messages(session_id, limit=TURNS) if m.role == "user"]
    for n in range(AGENT_RUNS):
        turn = asked[n] if n < len(asked) else None
        context, recalled = built[n % len(built)]
        runtime.runs.record(
            RunRecord(
                started_at=runtime.clock.now(),
                surface="channel",
                command=turn.text if turn else QUERIES[n % len(QUERIES)],
                summary="An answer.",
                session_key=f"telegram:{SESSIONS - 1}" if turn else "api",
                session_id=session_id if turn else None,
                turn=turn.id if turn else None,
                channel="telegram" if turn else "api",
                model="bench-model",
                input_tokens=3000,
                output_tokens=120,
                iterations=3,
                context=context,
                recalled=recalled,
                tool_calls=calls,
            )
        )


def measure(memories: int, requests: int) -> dict[str, Any]:
    """Each page's timings at ``memories`` memories."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        seed(root, memories)
        runtime = Runtime.open(Settings(vault=root), clock=Clock(UTC), embedder=HashingEmbedder())
        runtime.index.sync()
        runtime.index.embed_pending(batch=512)
        daemon = Daemon(runtime, host="127.0.0.1", port=PORT, background=False)
        daemon.watching.set()  # as the serving daemon's watcher: searches sync nothing first
        app = create_app(daemon, front=console_front(daemon))
        pages: dict[str, Any] = {}
        with TestClient(app, base_url="http://127.0.0.1") as client:
            link = client.post(
                "/v1/console/links", headers={"Authorization": f"Bearer {daemon.token}"}
            ).json()["result"]
            signed = client.get(link["path"], follow_redirects=False)
            assert signed.status_code == 303, signed.text
            one = sorted(runtime.memories.all(), key=lambda m: m.id)[memories // 2].id
            run_id, session_id = _activity(daemon)
            plans: dict[str, tuple[list[str], dict[str, str]]] = {
                "today": (["/"], {}),
                "memories (newest)": (["/memories"], {}),
                "memories (search, page)": ([f"/memories?q={q}" for q in QUERIES], {}),
                "memories (search, as you type)": (
                    [f"/memories?q={q}" for q in QUERIES],
                    {"HX-Request": "true"},
                ),
                "memory": ([f"/memories/{one}"], {}),
                "approvals": (["/approvals"], {}),
                "jobs": (["/jobs"], {}),
                "a job run (MEMORY.md's diff)": ([f"/jobs/runs/{run_id}"], {}),
                "sessions": (["/sessions"], {}),
                f"a session ({TURNS} messages, each run's recalled memories marked)": (
                    [f"/sessions/{session_id}"],
                    {},
                ),
                f"runs (newest 50 of {AGENT_RUNS})": (["/runs"], {}),
                "runs of one channel": (["/runs?channel=telegram"], {}),
                "a run (context, recalled, tool calls)": (
                    [f"/runs/{n}" for n in range(1, 21)],
                    {},
                ),
                f"people (no channel, {PEOPLE} contacts)": (["/people"], {}),
                f"knowledge ({PEOPLE} entities, {INSIGHTS} insights)": (["/knowledge"], {}),
                "an entity (facts, relations, 100 mentions)": (
                    ["/knowledge/Contacts/Person 0.md"],
                    {},
                ),
            }
            for name, (paths, headers) in plans.items():
                first = time.perf_counter()
                answer = client.get(paths[0], headers=headers)
                cold = time.perf_counter() - first
                assert answer.status_code == 200, (name, answer.status_code, answer.text[:300])
                samples = []
                for n in range(requests):
                    started = time.perf_counter()
                    answer = client.get(paths[n % len(paths)], headers=headers)
                    samples.append(time.perf_counter() - started)
                    assert answer.status_code == 200
                pages[name] = {"first_ms": round(cold * 1000, 2), **latency(samples)}
            pages["the search alone (no page)"] = _search_alone(daemon, requests)
        daemon.stop()
    return {"memories": memories, "requests": requests, "pages": pages}


def run(memories: int = 10_000, requests: int = 100) -> dict[str, Any]:
    """The figures and the machine they ran on."""
    return {"machine": machine(), **measure(memories, requests)}


def render(result: dict[str, Any]) -> str:
    """A Markdown table of the figures."""
    lines = [
        f"Console pages at {result['memories']:,} memories, {result['requests']} requests each "
        "(server time, in process):",
        "",
        "| page | first | p50 | p95 | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, f in result["pages"].items():
        lines.append(
            f"| {name} | {f['first_ms']} ms | {f['p50_ms']} ms | {f['p95_ms']} ms "
            f"| {f['max_ms']} ms |"
        )
    lines += ["", machine_line(result["machine"])]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = run(args.memories, args.requests)
    print(json.dumps(result) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
