"""What the agent loop costs on top of the model.

A vault of 10,000 items (5,000 notes, 5,000 memories; ``--quick``: 2,000) is
built as in ``scale.py``; the agent talks through the real ``openai`` SDK
to the fake model server of the tests on loopback, which answers at once.
Reported (medians and p95 of every run):

- the bare model call (SDK + loopback HTTP to an instant model): the floor;
- a run answered in one model call, and a run with one ``remember`` tool call
  (two model calls): everything memvault does around the model (context
  building, prompt assembly, session logging, the journal, Current Status);
- the size of what the model is sent: system prompt and tool schemas, in
  estimated tokens.

    python bench/agent.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import scale

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from llm_fakes import FakeOpenAI, llm_settings
from memvault.agent.loop import Agent
from memvault.index.chunking import estimate_tokens
from memvault.llm.base import ChatMessage
from memvault.llm.factory import make_provider
from memvault.tools.policy import AllowAll

FULL = 10_000
QUICK = 2_000


def run(size: int, runs: int) -> dict[str, Any]:
    """Every figure for a vault of ``size`` items."""
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as fake:
        runtime, _, counts = scale.build_vault(Path(tmp) / "vault", size)
        provider = make_provider(llm_settings(fake))
        agent = Agent(runtime, provider, approver=AllowAll())
        bare: list[float] = []
        for _ in range(runs):
            fake.reply("ok")
            started = time.perf_counter()
            provider.complete([ChatMessage("user", "ping")])
            bare.append(time.perf_counter() - started)
        plain: list[float] = []
        for n in range(runs):
            fake.reply("The answer, from memory.")
            started = time.perf_counter()
            agent.run(f"What do I know about harbour {n}?", session="bench")
            plain.append(time.perf_counter() - started)
        remembering: list[float] = []
        for n in range(runs):
            fake.reply("", tool_calls=[("remember", {"fact": f"Bench fact number {n}"})])
            fake.reply("Stored.")
            started = time.perf_counter()
            agent.run(f"Remember bench fact {n}", session="bench")
            remembering.append(time.perf_counter() - started)
        request = fake.requests[-1]
        system = next(m["content"] for m in request["messages"] if m["role"] == "system")
        runtime.close()
    return {
        "items": counts,
        "runs": runs,
        "bare_model_call": scale.percentiles(bare),
        "one_call_run": scale.percentiles(plain),
        "remember_run": scale.percentiles(remembering),
        "system_prompt_tokens": estimate_tokens(system),
        "tool_schema_tokens": estimate_tokens(json.dumps(request["tools"])),
        "tools": len(request["tools"]),
    }


def render(result: dict[str, Any]) -> str:
    """A Markdown report."""
    items = result["items"]

    def ms(key: str) -> str:
        return scale.shown(result[key])

    return "\n".join(
        [
            f"Vault: {items['notes']:,} notes and {items['memories']:,} memories (hashing "
            "embedder); the real `openai` SDK against the tests' fake model server, which "
            f"answers at once; {result['runs']} runs each, p50 / p95.",
            "",
            "| what | p50 / p95 |",
            "|---|---|",
            f"| bare model call (SDK + loopback, the floor) | {ms('bare_model_call')} |",
            f"| run answered in one model call | {ms('one_call_run')} |",
            f"| run with one `remember` call (two model calls) | {ms('remember_run')} |",
            "",
            f"Sent to the model: a system prompt of about {result['system_prompt_tokens']:,} "
            f"tokens (memory context included) and {result['tools']} tool schemas of about "
            f"{result['tool_schema_tokens']:,} tokens.",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK:,} items instead of {FULL:,}")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    result = run(QUICK if args.quick else FULL, 20 if args.quick else 50)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
