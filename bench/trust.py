"""How well :func:`memvault.privacy.trust.judge` tells an instruction to the agent from
ordinary text, and what it costs.

- *Caught*: the red-team set (tests/privacy/redteam/redteam.jsonl, several languages and
  encodings): the share flagged, and the share flagged for the expected reason.
- *Flagged by mistake*: real chat, every dialog turn of the LoCoMo development split
  (shared/data/locomo, "<speaker>: <text>"); real notes, every paragraph of the
  third-party Obsidian vault in tests/fixtures/public_vault; and the hand-written ordinary
  messages of tests/privacy/ordinary.txt (near misses in nine languages).
- *Cost*: p50 / p95 / max of one judgement over the LoCoMo turns (in process).

    python bench/trust.py [--locomo PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from memvault.privacy.trust import judge

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared/data/locomo/locomo_dev.json"
REDTEAM = ROOT / "tests/privacy/redteam/redteam.jsonl"
ORDINARY = ROOT / "tests/privacy/ordinary.txt"
PUBLIC_VAULT = ROOT / "tests/fixtures/public_vault"


def locomo_turns(path: Path) -> list[str]:
    """Every dialog turn of a LoCoMo file as "<speaker>: <text>"."""
    turns: list[str] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                turns.extend(f"{t['speaker']}: {t['text']}" for t in session)
    return turns


def vault_paragraphs(root: Path) -> list[str]:
    """Every paragraph of every Markdown note under ``root``."""
    out: list[str] = []
    for note in sorted(root.rglob("*.md")):
        text = note.read_text(encoding="utf-8")
        out.extend(p.strip() for p in text.split("\n\n") if p.strip())
    return out


def ordinary_lines(path: Path) -> list[str]:
    """The hand-written ordinary messages (comment lines left out)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def flagged(texts: list[str]) -> list[tuple[str, str]]:
    """The texts judged instructions, with the reason."""
    out = []
    for text in texts:
        verdict = judge(text)
        if verdict.instruction:
            out.append((text, verdict.reason))
    return out


def run(locomo: Path = LOCOMO) -> dict[str, Any]:
    """The red team caught, ordinary text flagged by mistake per corpus, and the cost."""
    entries = [json.loads(line) for line in REDTEAM.read_text(encoding="utf-8").splitlines()]
    verdicts = [judge(e["text"]) for e in entries]
    caught = sum(v.instruction for v in verdicts)
    as_expected = sum(e["reason"] in v.codes for e, v in zip(entries, verdicts, strict=True))
    report: dict[str, Any] = {
        "redteam": {"texts": len(entries), "caught": caught, "expected_reason": as_expected},
        "ordinary": {},
    }
    corpora = {
        "public_vault paragraphs": vault_paragraphs(PUBLIC_VAULT),
        "ordinary.txt messages": ordinary_lines(ORDINARY),
    }
    if locomo.exists():
        corpora["LoCoMo dev turns"] = locomo_turns(locomo)
    for name, texts in corpora.items():
        wrong = flagged(texts)
        report["ordinary"][name] = {
            "texts": len(texts),
            "flagged": len(wrong),
            "rate": round(len(wrong) / len(texts), 4) if texts else 0.0,
            "examples": [f"{reason} | {text[:120]}" for text, reason in wrong[:10]],
        }
    timed = corpora.get("LoCoMo dev turns") or corpora["ordinary.txt messages"]
    samples = []
    for text in timed:
        start = time.perf_counter()
        judge(text)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    report["judge_ms"] = {
        "p50": round(statistics.median(samples), 3),
        "p95": round(samples[int(0.95 * (len(samples) - 1))], 3),
        "max": round(samples[-1], 3),
    }
    return report


def render(report: dict[str, Any]) -> str:
    """The report as a Markdown table (and the mistakes, if any, listed under it)."""
    red = report["redteam"]
    rows = [
        "| texts | judged instructions | share |",
        "|---|---:|---:|",
        f"| red team (should all be) | {red['caught']}/{red['texts']} "
        f"({red['expected_reason']} for the expected reason) | "
        f"{100 * red['caught'] / max(red['texts'], 1):.1f}% |",
    ]
    examples: list[str] = []
    for name, figures in report["ordinary"].items():
        rows.append(
            f"| {name} (should be none) | {figures['flagged']}/{figures['texts']} | "
            f"{100 * figures['rate']:.2f}% |"
        )
        examples.extend(f"- {name}: {e}" for e in figures["examples"])
    ms = report["judge_ms"]
    rows.append("")
    rows.append(f"One judgement: p50 {ms['p50']} ms, p95 {ms['p95']} ms, max {ms['max']} ms.")
    return "\n".join(rows + examples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args.locomo)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(render(report))


if __name__ == "__main__":
    main()
