"""From a Telegram message to the reply, through the whole channel path.

A vault of 10,000 items (``--quick``: 2,000) is built as in ``scale.py``; a
daemon (in process, its background work running: watcher, hub) polls the
tests' fake Bot API server with the real ``python-telegram-bot``, and the
agent talks through the real ``openai`` SDK to the tests' fake model server,
which answers at once. Timed from the moment the update is queued on the fake
server to the moment the fake server receives the ``sendMessage`` of the reply:

- a command answered without a model (``/tasks``);
- a plain question answered by the agent in one model call (the target:
  <= 300 ms);
- a question whose answer uses one ``remember`` call (two model calls).

    python bench/channels.py [--quick] [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import scale

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from llm_fakes import FakeOpenAI, llm_settings
from memvault.config import ChannelsSettings, Settings, TelegramSettings, ToolSettings
from memvault.gateway.daemon import Daemon
from memvault.runtime import Runtime
from telegram_fake import FakeTelegram

FULL = 10_000
QUICK = 2_000
OWNER = 4242
TARGET_MS = 300


def _timed(fake: FakeTelegram, text: str) -> float:
    before = len(fake.sent)
    started = time.perf_counter()
    fake.push_message(OWNER, text)
    fake.wait_sent(before + 1, timeout=60)
    return time.perf_counter() - started


def run(size: int, runs: int) -> dict[str, Any]:
    """Every figure for a vault of ``size`` items."""
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as model, FakeTelegram() as fake:
        built, _, counts = scale.build_vault(Path(tmp) / "vault", size)
        built.close()
        os.environ["TELEGRAM_BOT_TOKEN"] = fake.token
        settings = Settings(
            vault=Path(tmp) / "vault",
            timezone="Europe/Berlin",
            llm=llm_settings(model),
            tools=ToolSettings(mode="autonomous"),
            # The scripted model answers the agent only; consolidation keeps to its rule.
            memory={"consolidation": "rule"},  # type: ignore[arg-type]
            embedder={"provider": "none"},  # type: ignore[arg-type]
            channels=ChannelsSettings(
                telegram=TelegramSettings(
                    enabled=True,
                    owner=[str(OWNER)],
                    base_url=fake.base_url,
                    base_file_url=fake.base_file_url,
                    poll_timeout=10,
                )
            ),
        )
        runtime = Runtime.open(settings)
        daemon = Daemon(runtime, port=0)
        daemon.start()
        try:
            fake.wait_polling()
            command = [_timed(fake, "/tasks") for _ in range(runs)]
            plain = []
            for n in range(runs):
                model.reply(f"Harbour {n} is in the notes.")
                plain.append(_timed(fake, f"What do I know about harbour {n}?"))
            remembering = []
            for n in range(runs):
                model.reply("", tool_calls=[("remember", {"fact": f"Channel bench fact {n}"})])
                model.reply("Stored.")
                remembering.append(_timed(fake, f"Remember channel bench fact {n}"))
        finally:
            daemon.begin_shutdown()
            daemon.stop()
    return {
        "items": counts,
        "runs": runs,
        "command": scale.percentiles(command),
        "one_call_reply": scale.percentiles(plain),
        "remember_reply": scale.percentiles(remembering),
        "target_ms": TARGET_MS,
    }


def render(result: dict[str, Any]) -> str:
    """A Markdown report."""
    items = result["items"]

    def ms(key: str) -> str:
        return scale.shown(result[key])

    return "\n".join(
        [
            f"Vault: {items['notes']:,} notes and {items['memories']:,} memories; a daemon in "
            "process polls the tests' fake Bot API with python-telegram-bot, the agent uses "
            "the real `openai` SDK against a fake model that answers at once; timed from the "
            "update queued to the reply received by the fake server; "
            f"{result['runs']} runs each, p50 / p95.",
            "",
            "| message | p50 / p95 |",
            "|---|---|",
            f"| `/tasks`, answered without a model | {ms('command')} |",
            f"| a question, one model call (target <= {result['target_ms']} ms) | "
            f"{ms('one_call_reply')} |",
            f"| a question with one `remember` call (two model calls) | {ms('remember_reply')} |",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK:,} items instead of {FULL:,}")
    parser.add_argument("--size", type=int, help="items in the vault (overrides --quick)")
    parser.add_argument("--runs", type=int, help="messages of each kind (default 30, quick 15)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    size = args.size or (QUICK if args.quick else FULL)
    result = run(size, args.runs or (15 if args.quick else 30))
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
