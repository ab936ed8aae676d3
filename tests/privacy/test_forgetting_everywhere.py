"""Forgetting reaches everywhere (issue 29, item 4): a distinctive fact is planted through a
real channel, every job that copies memories runs on it (with a fake model that repeats
it in its own words), and after ``forget`` no search, recall, context, graph query, tool,
file of the vault or database row holds it; the receipt names each place."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlite_vec

from channel_support import OWNER, delivered, telegram_config
from job_support import run_job
from llm_fakes import FakeOpenAI
from memvault.channels.hub import Hub
from memvault.config import Settings, StorageSettings
from memvault.errors import NotFoundError
from memvault.index import db as index_db
from memvault.index.graph import entity_path, knowledge_graph
from memvault.index.search import SearchResults
from memvault.runtime import Runtime
from memvault.tools import default_registry
from memvault.tools.policy import AllowAll, Policy
from memvault.tools.registry import ToolContext
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import TZ, HashEmbedder, MovableClock
from telegram_fake import FakeTelegram
from waiting import wait_for

pytestmark = pytest.mark.both_backends

WORD = "zorblax"  # made up: nothing else in the vault, the databases or the model's words
FACT = "The zorblax key hides under the blue flowerpot by the garden door"
NEIGHBOURS = [
    "The spare house key hides under the blue flowerpot by the garden shed",
    "The bike lock key hides under the blue flowerpot by the garden gate",
]
OTHER = "The owner drinks green tea every morning"
ADA = 777


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=TZ)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def planted(
    tmp_path: Path,
    tg: FakeTelegram,
    clock: MovableClock,
    storage_settings: StorageSettings,
) -> Iterator[Runtime]:
    """A vault whose owner told the fact on Telegram, and a contact (Ada) who repeated it."""
    root = tmp_path / "vault"
    init_vault(Vault(root))
    settings = Settings(
        vault=root,
        timezone="Europe/Berlin",
        storage=storage_settings,
        channels={"telegram": telegram_config(tg, allow=[str(ADA)], respond=True)},
    )
    runtime = Runtime.open(settings, clock=clock, embedder=HashEmbedder())
    runtime.contacts.create("Ada Lovelace", identities={"telegram": str(ADA)})
    clock.set(at("2026-11-20T10:00"))
    for text in NEIGHBOURS:
        runtime.memories.remember(text, "fact")
    runtime.memories.remember(OTHER, "preference")
    hub = Hub(runtime)
    hub.start()
    try:
        tg.push_message(OWNER, f"/remember {FACT}")
        wait_for(lambda: delivered(tg, OWNER), "the owner's /remember to be answered")
        tg.push_message(ADA, f"Did you know? {FACT}.", sender_id=ADA, first_name="Ada")
        wait_for(
            lambda: (
                runtime.state.query("SELECT count(*) FROM messages WHERE role = 'user'")[0][0] == 2
            ),
            "Ada's message to be captured",
        )
    finally:
        hub.stop()
    runtime.sessions.end(f"telegram:{OWNER}", summary=f"The owner said where the {WORD} key is.")
    yield runtime
    runtime.close()


def fact_id(runtime: Runtime) -> str:
    (memory,) = [
        m
        for m in runtime.memories.all()
        if WORD in m.text.casefold() and m.category != "conversation"  # not the turns saying it
    ]
    return memory.id


def run_every_job(runtime: Runtime, clock: MovableClock, fake: FakeOpenAI, memory_id: str) -> None:
    """Distill, the knowledge graph, the day's note and MEMORY.md, each with the model
    repeating the fact in its own words."""
    graph = {
        "entities": [{"name": "Zorblax key", "type": "thing"}],
        "facts": [
            {
                "entity": "Zorblax key",
                "category": "hiding place",
                "text": "under the blue flowerpot",
                "memory": memory_id,
            }
        ],
        "relations": [
            {
                "source": "Zorblax key",
                "type": "hidden_near",
                "target": "Garden door",
                "memory": memory_id,
            }
        ],
    }
    clock.set(at("2026-11-20T21:00"))
    fake.reply(f"The owner told where the {WORD.title()} key is. Ada repeated it. Tea as ever.")
    run_job(runtime, clock, "daily_note", fake=fake)
    clock.set(at("2026-11-22T09:00"))
    fake.reply(
        f"# {WORD.title()} and the other keys\n\nThree keys, the {WORD} one too, hide there."
    )
    run_job(runtime, clock, "distill", fake=fake)
    fake.reply_with(lambda request: json.dumps(graph))
    run_job(runtime, clock, "knowledge_graph", fake=fake)
    fake.reply(
        "## Key memories\n"
        f"- The {WORD} key is under the blue flowerpot.\n- Green tea every morning.\n\n"
        f"## Insights\n- [[{WORD.title()} and the other keys]]: three keys in one place."
    )
    run_job(runtime, clock, "living_summary", fake=fake)


def files_holding(root: Path, word: str) -> list[str]:
    """Every file of the vault (outside .memvault and .git) whose name or bytes hold it."""
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] in (".memvault", ".git") or not path.is_file():
            continue
        if word in str(relative).casefold() or word.encode() in path.read_bytes().lower():
            found.append(str(relative))
    return found


def sqlite_rows_holding(path: Path, word: str) -> list[str]:
    """``table: row`` for every row of every table (shadow tables too) holding ``word``."""
    conn = index_db.sqlite3.connect(str(path))  # the driver that loads sqlite-vec
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        found = []
        for name in names:
            for row in conn.execute(f'SELECT * FROM "{name}"'):
                flat = " ".join(
                    v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in row
                )
                if word in flat.casefold():
                    found.append(f"{name}: {flat[:120]}")
        return found
    finally:
        conn.close()


def pg_rows_holding(dsn: str, word: str) -> list[str]:
    found = []
    with psycopg.connect(dsn) as conn:
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema IN ('memvault_state', 'memvault_index', 'public') "
            "AND table_type = 'BASE TABLE'"
        ).fetchall()
        for schema, name in tables:
            for row in conn.execute(f'SELECT * FROM "{schema}"."{name}"'):
                flat = " ".join(str(v) for v in row)
                if word in flat.casefold():
                    found.append(f"{schema}.{name}: {flat[:120]}")
    return found


def rows_holding(runtime: Runtime, word: str) -> list[str]:
    if runtime.storage is None:
        state = runtime.vault.state_dir
        return sqlite_rows_holding(state / "state.db", word) + sqlite_rows_holding(
            state / "index.db", word
        )
    import os

    return pg_rows_holding(os.environ["MEMVAULT_PG_DSN"], word)


def tool(runtime: Runtime, name: str, **arguments: Any) -> str:
    registry = default_registry()
    context = ToolContext(runtime=runtime, policy=Policy(approver=AllowAll()), surface="cli")
    result = registry.call(name, arguments, context)
    assert result.ok, result.error
    data = result.data
    if isinstance(data, dict):  # the question is said back: what was found is the answer
        data = {k: v for k, v in data.items() if k not in ("topic", "query")}
    return json.dumps(data, ensure_ascii=False).casefold()


def texts(results: SearchResults) -> str:
    return " ".join(f"{h.path} {h.snippet} {h.title}" for h in results).casefold()


def test_a_fact_forgotten_leaves_no_copy_anywhere(
    planted: Runtime, clock: MovableClock, fake: FakeOpenAI, backend: str
) -> None:
    runtime = planted
    memory_id = fact_id(runtime)
    run_every_job(runtime, clock, fake, memory_id)
    runtime.index.sync()

    # The fact reached every place the issue names.
    root = runtime.vault.root
    reached = files_holding(root, WORD)
    for place in (
        "Memory/Facts.md",
        "MEMORY.md",
        "Journal/2026-11-20.md",
        "Contacts/Ada Lovelace.md",
        "Insights/Zorblax and the other keys.md",
        "Entities/Zorblax key.md",
    ):
        assert place in reached, reached
    assert [p for p in reached if p.startswith("Memory/Conversations/")], reached  # said
    journal = (root / "Journal/2026-11-20.md").read_text("utf-8")
    assert "Commands Received" in journal and "memvault:daily-summary" in journal
    assert entity_path(runtime.index, "Zorblax key") == "Entities/Zorblax key.md"
    assert WORD in texts(runtime.searcher.search(WORD, min_score=0))
    assert rows_holding(runtime, WORD)

    receipt = runtime.forgetter.forget(memory_id)

    # No search, recall, context, graph query or tool finds it.
    assert WORD not in texts(runtime.searcher.search(WORD, min_score=0))
    assert WORD not in texts(runtime.searcher.search("key under the blue flowerpot", limit=50))
    built = runtime.context.build(f"where is the {WORD} key", 20_000)
    shown = [line for line in built.splitlines() if not line.startswith("## Relevant to:")]
    assert WORD not in "\n".join(shown).casefold()  # the question is shown back, nothing else
    assert WORD not in json.dumps(knowledge_graph(runtime.index).to_dict()).casefold()
    with pytest.raises(NotFoundError):
        entity_path(runtime.index, "Zorblax key")
    for name, arguments in (
        ("recall", {"topic": WORD, "min_score": 0}),
        ("memory_search", {"query": f"{WORD} key", "minScore": 0}),
        ("vault_search", {"query": WORD, "min_score": 0}),
        ("get_context", {"query": "the key under the blue flowerpot"}),
        ("vault_read", {"path": "MEMORY.md"}),
        ("vault_read", {"path": "Journal/2026-11-20.md"}),
        ("vault_read", {"path": "Contacts/Ada Lovelace.md"}),
        ("get_knowledge_graph", {}),
        ("entity_facts", {"entity": "Ada Lovelace"}),
    ):
        assert WORD not in tool(runtime, name, **arguments), name
    with pytest.raises(NotFoundError):
        runtime.memories.get(memory_id)

    # No file of the vault, no row of a database.
    assert files_holding(root, WORD) == []

    # What was not the fact's stays: its neighbours, the tea, Ada, the day's other lines.
    left = {m.text for m in runtime.memories.all() if m.category != "conversation"}
    assert left == {*NEIGHBOURS, OTHER}
    said = [m.text for m in runtime.memories.list(category="conversation")]
    assert not [t for t in said if WORD in t.casefold()]  # the turns that said it are gone
    assert runtime.contacts.get("Ada Lovelace").identities == {"telegram": str(ADA)}
    assert "Tea as ever." in (root / "Journal/2026-11-20.md").read_text("utf-8")

    # The receipt lists each place, and what it left alone by design.
    places = {p.place: p.action for p in receipt.places}
    assert places["Memory/Facts.md"] == "removed"
    assert places["Insights/Zorblax and the other keys.md"] == "dropped"
    assert places["Entities/Zorblax key.md"] == "dropped"
    assert places["MEMORY.md"] == "removed"
    assert places["Journal/2026-11-20.md"] == "removed"
    assert places["Contacts/Ada Lovelace.md"] == "removed"
    where = "state.db" if backend == "sqlite" else "the state database"
    assert places[f"{where}: messages"] == "removed"
    assert places[f"{where}: job runs"] == "redacted"
    index_place = "index.db" if backend == "sqlite" else "the index database"
    assert places[index_place] == "verified" and places["graph"] == "verified"
    untouched = {p.place: p.detail for p in receipt.untouched}
    assert "git history" in untouched
    undo = untouched[".memvault/jobs/runs (the undo store)"]
    assert "still holds it" in undo  # the distill run kept Facts.md as it was before it
    assert receipt.still_found == []
    # The neighbours wait for the distill job again.
    assert all("distilled" not in m.fields for m in runtime.memories.all())

    # No row of a database (read once the runtime has let go of its files).
    runtime.close()
    left_rows = rows_holding(runtime, WORD)
    assert left_rows == [], "\n".join(left_rows)
