"""``memvault storage migrate`` and ``status`` against a real PostgreSQL.

A vault with notes, memories, a session, an API token, a job run and a channel
message moves to PostgreSQL and back; the counts, the token, the ids and the index
rows are checked on the other side, and every refusal writes nothing.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cli_support import EXIT_CONFIG, EXIT_CONFLICT, EXIT_INVALID, EXIT_VAULT, fail, invoke, ok
from gateway_support import StartDaemon
from memvault.backend_migration import copy_vectors, index_counts, migrate, state_counts
from memvault.channels.base import Inbound
from memvault.channels.store import ChannelStore
from memvault.config import Settings, StorageSettings
from memvault.gateway.tokens import Scope, TokenBook
from memvault.index.index import MemoryIndex
from memvault.memory.sessions import Sessions
from memvault.runtime import Runtime
from memvault.vault.store import Vault
from support import HashEmbedder, MovableClock

RARE = "quetzalcoatlus"


def _runtime(root: Path, clock: MovableClock, backend: str = "sqlite", **kw: Any) -> Runtime:
    settings = Settings(
        vault=root,
        timezone="Europe/Berlin",
        storage=StorageSettings(backend=backend),  # type: ignore[arg-type]
        embedder={"provider": "none"},  # type: ignore[arg-type]
    )
    return Runtime.open(settings, clock=clock, **kw)


@pytest.fixture
def filled(vault: Vault, clock: MovableClock) -> Iterator[dict[str, Any]]:
    """A SQLite vault with notes, memories, a session, a token, a job run, an inbox row."""
    (vault.root / "Insights").mkdir(exist_ok=True)
    (vault.root / "Insights" / "Pterosaurs.md").write_text(
        f"# Pterosaurs\n\nThe {RARE} was the largest flying animal.\n\n"
        "See [[Birds]] for the living relatives.\n",
        encoding="utf-8",
    )
    (vault.root / "Insights" / "Birds.md").write_text("# Birds\n\nDinosaurs that fly.\n")
    runtime = _runtime(vault.root, clock)
    runtime.memories.remember("Ada prefers tea over coffee", category="Preferences")
    runtime.memories.remember("The deploy key rotates every March", category="Facts")
    runtime.index.sync()
    sessions = Sessions(runtime.state, clock)
    for text in ("hello", "what is a pterosaur?", "thanks"):
        session, _ = sessions.log("chat:ada", text, channel="cli")
    _, secret = TokenBook(runtime.state).create("research-bot", [Scope.REMEMBER])
    with runtime.state.transaction() as conn:
        conn.execute(
            "INSERT INTO job_runs (job, started, finished, status, output, metadata) "
            "VALUES (?, ?, ?, 'ok', 'done', '{}')",
            ("daily_note", "2026-11-22T08:00:00+00:00", "2026-11-22T08:00:02+00:00"),
        )
    ChannelStore(runtime.state, clock).receive(
        Inbound(
            channel="telegram",
            message_id="m-1",
            chat_id="42",
            sender_id="42",
            sender_name="Ada",
            text="remember the milk",
            sent_at=datetime(2026, 11, 22, 9, 0, tzinfo=UTC),
        )
    )
    counts = state_counts(runtime.state)
    index = index_counts(runtime.index)
    runtime.close()
    yield {
        "root": vault.root,
        "secret": secret,
        "session": session.id,
        "counts": counts,
        "index": index,
    }


def _to_postgres(root: Path, dsn: str, *args: object) -> Any:
    return invoke(
        root, "storage", "migrate", "--to", "postgres", *args, env={"MEMVAULT_PG_DSN": dsn}
    )


def test_a_vault_moves_to_postgres_and_back(
    filled: dict[str, Any],
    migrated: str,
    clock: MovableClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = filled["root"]
    before = (root / ".memvault" / "state.db").read_bytes()
    result = _to_postgres(root, migrated)
    assert result.exit_code == 0, result.output
    assert '[storage] backend = "postgres"' in result.stdout
    assert "research-bot" not in result.stdout  # counts, not contents
    assert (root / ".memvault" / "state.db").read_bytes() == before, "the source is untouched"

    monkeypatch.setenv("MEMVAULT_PG_DSN", migrated)
    pg = _runtime(root, clock, "postgres")
    try:
        assert state_counts(pg.state) == filled["counts"]
        assert index_counts(pg.index) == filled["index"]
        assert all(filled["counts"][t] for t in ("sessions", "messages", "api_tokens"))
        assert filled["counts"]["job_runs"] == 1 and filled["counts"]["channel_inbox"] == 1
        # Keyword search on PostgreSQL waits for PgKeywords (not in main yet): the index
        # rows that search reads are asserted instead.
        paths = {r[0] for r in pg.index.conn.execute("SELECT path FROM notes")}
        assert "Insights/Pterosaurs.md" in paths
        hits = pg.index.conn.execute(
            "SELECT count(*) FROM chunks_fts WHERE text LIKE ?", (f"%{RARE}%",)
        ).fetchone()
        assert hits[0] == 1
        assert pg.index.conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 2
        # A token made on SQLite authenticates on PostgreSQL.
        principal = TokenBook(pg.state).authenticate(filled["secret"])
        assert principal is not None and principal.name == "research-bot"
        # The identity sequence moved past the copied ids.
        fresh, message = Sessions(pg.state, clock).log("chat:bob", "hi", channel="cli")
        assert fresh.id > filled["session"]
        assert message.id > filled["counts"]["messages"]
        on_postgres = state_counts(pg.state)
        sessions = [tuple(r) for r in pg.state.query("SELECT * FROM sessions ORDER BY id")]
    finally:
        pg.close()

    # Back to SQLite, into a copy of the vault without its SQLite files.
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("state.db*", "index.db*"))
    result = invoke(
        copy,
        "storage",
        "migrate",
        "--to",
        "sqlite",
        "--json",
        env={"MEMVAULT_PG_DSN": migrated, "MEMVAULT_STORAGE__BACKEND": "postgres"},
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] and data["target"]["backend"] == "sqlite"
    assert data["next"].startswith("To use it, set MEMVAULT_STORAGE__BACKEND=sqlite")
    back = _runtime(copy, clock)
    try:
        assert state_counts(back.state) == on_postgres
        assert index_counts(back.index) == filled["index"]
        assert [
            tuple(r) for r in back.state.query("SELECT * FROM sessions ORDER BY id")
        ] == sessions
        assert TokenBook(back.state).authenticate(filled["secret"]) is not None
    finally:
        back.close()


def test_refusals_say_one_sentence_and_write_nothing(
    filled: dict[str, Any], migrated: str, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = filled["root"]
    same = fail(root, "storage", "migrate", "--to", "sqlite", code=EXIT_INVALID)
    assert "already" in same
    wrong = fail(root, "storage", "migrate", "--to", "mysql", code=EXIT_INVALID)
    assert "postgres or sqlite" in wrong
    unset = fail(root, "storage", "migrate", "--to", "postgres", code=EXIT_CONFIG)
    assert "MEMVAULT_PG_DSN" in unset

    assert _to_postgres(root, migrated).exit_code == 0
    again = _to_postgres(root, migrated)
    assert again.exit_code == EXIT_CONFLICT
    assert again.stdout == ""
    assert "--replace" in again.stderr and "sessions" in again.stderr

    # The original vault's state.db holds rows: moving back into it needs --replace.
    back = {"MEMVAULT_PG_DSN": migrated, "MEMVAULT_STORAGE__BACKEND": "postgres"}
    refused = invoke(root, "storage", "migrate", "--to", "sqlite", env=back)
    assert refused.exit_code == EXIT_CONFLICT, refused.output
    assert "--replace" in refused.stderr
    ok(root, "storage", "migrate", "--to", "sqlite", "--replace", env=back)
    runtime = _runtime(root, clock)
    try:
        assert state_counts(runtime.state) == filled["counts"]
    finally:
        runtime.close()


def test_a_failure_in_the_state_copy_leaves_the_target_state_empty(
    filled: dict[str, Any], migrated: str, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = filled["root"]
    # SQLite keeps text in an INTEGER column; PostgreSQL's bigint refuses it mid-copy.
    conn = sqlite3.connect(root / ".memvault" / "state.db")
    conn.execute(
        "INSERT INTO reminders_sent (key, sent_at, run_id, status) VALUES ('r', 'now', 'x', 'ok')"
    )
    conn.commit()
    conn.close()
    message = fail(
        root,
        "storage",
        "migrate",
        "--to",
        "postgres",
        code=EXIT_VAULT,
        env={"MEMVAULT_PG_DSN": migrated},
    )
    assert "reminders_sent" in message and "nothing of the state" in message
    monkeypatch.setenv("MEMVAULT_PG_DSN", migrated)
    pg = _runtime(root, clock, "postgres")
    try:
        assert not any(state_counts(pg.state).values())
    finally:
        pg.close()


def test_a_running_daemon_is_refused(
    filled: dict[str, Any], migrated: str, start_daemon: StartDaemon
) -> None:
    start_daemon(filled["root"])
    message = fail(
        filled["root"],
        "storage",
        "migrate",
        "--to",
        "postgres",
        code=EXIT_CONFLICT,
        env={"MEMVAULT_PG_DSN": migrated},
    )
    assert "memvault serve --stop" in message


def test_status_names_the_backend_without_the_password(
    filled: dict[str, Any], migrated: str, clock: MovableClock
) -> None:
    root = filled["root"]
    here = ok(root, "storage", "status")
    assert "Backend: sqlite" in here.stdout and "state.db" in here.stdout
    assert _to_postgres(root, migrated).exit_code == 0
    there = invoke(
        root,
        "storage",
        "status",
        "--json",
        env={"MEMVAULT_PG_DSN": migrated, "MEMVAULT_STORAGE__BACKEND": "postgres"},
    )
    assert there.exit_code == 0, there.output
    password = migrated.split(":")[2].split("@")[0]
    assert password not in there.stdout
    data = json.loads(there.stdout)
    assert data["backend"] == "postgres"
    assert data["location"]["database"].startswith("postgresql://127.0.0.1:")
    assert data["schema"]["postgres"] >= 3
    assert data["counts"]["state"] == filled["counts"]
    assert data["counts"]["index"] == filled["index"]


def test_vectors_are_copied_by_hash_and_only_the_rest_embedded(
    filled: dict[str, Any], migrated: str, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("memvault.index.pg_vectors", reason="PgVectorStore is not in main yet")
    root = filled["root"]
    embedder = HashEmbedder()
    settings = Settings(vault=root, timezone="Europe/Berlin")
    source = Runtime.open(settings, clock=clock, embedder=embedder)
    source.index.embed_pending()
    (root / "Insights" / "New.md").write_text("# New\n\nWritten after the last embedding.\n")
    monkeypatch.setenv("MEMVAULT_PG_DSN", migrated)
    target = Runtime.open(
        settings.model_copy(update={"storage": StorageSettings(backend="postgres")}),
        clock=clock,
        embedder=embedder,
    )
    try:
        report = migrate(source, target)
        assert not report.differences
        assert report.embedded >= 1 and report.copied_vectors == filled["index"]["chunks"]
        ids = [int(r[0]) for r in target.index.conn.execute("SELECT id FROM chunks")]
        assert len(target.index.vectors.get(ids)) == len(ids)
    finally:
        source.close()
        target.close()


def test_vectors_follow_the_chunk_hash_between_two_indexes(
    filled: dict[str, Any], clock: MovableClock, tmp_path: Path
) -> None:
    """copy_vectors over two SQLite indexes (the PostgreSQL one waits for PgVectorStore):
    a chunk of the same text takes the source's vector; a new one is left to embed."""
    root = filled["root"]
    embedder = HashEmbedder()
    source = Runtime.open(
        Settings(vault=root, timezone="Europe/Berlin"), clock=clock, embedder=embedder
    )
    try:
        assert source.index.embed_pending() == filled["index"]["chunks"]
        (root / "Insights" / "New.md").write_text("# New\n\nWritten after the embedding.\n")
        target = MemoryIndex(
            source.vault, source.memories, embedder, clock, path=tmp_path / "other.db"
        )
        target.sync()
        calls = embedder.calls
        copied = copy_vectors(source.index, target, None)
        assert copied == filled["index"]["chunks"]
        assert embedder.calls == calls, "copying embeds nothing"
        assert target.built_with() == embedder.identity
        assert target.pending() == 1  # the new note's chunk
        pairs = [
            (int(t[0]), int(s[0]))
            for t in target.conn.execute("SELECT id, hash FROM chunks WHERE embedded = 1")
            for s in source.index.conn.execute("SELECT id FROM chunks WHERE hash = ?", (t[1],))
        ]
        theirs = source.index.vectors.get([s for _, s in pairs])
        ours = target.vectors.get([t for t, _ in pairs])
        assert all(np.allclose(ours[t], theirs[s]) for t, s in pairs)
        assert target.embed_pending() == 1

        other = MemoryIndex(
            source.vault,
            source.memories,
            HashEmbedder(model="hash-32", dim=32),
            clock,
            path=tmp_path / "third.db",
        )
        other.sync()
        assert copy_vectors(source.index, other, None) == 0, "another embedder's vectors stay"
        target.close()
        other.close()
    finally:
        source.close()


def test_replace_empties_a_postgres_target_first(
    filled: dict[str, Any], migrated: str, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("memvault.index.pg_vectors", reason="PgVectorStore is not in main yet")
    root = filled["root"]
    assert _to_postgres(root, migrated).exit_code == 0
    monkeypatch.setenv("MEMVAULT_PG_DSN", migrated)
    pg = _runtime(root, clock, "postgres")
    try:
        Sessions(pg.state, clock).log("chat:bob", "only on postgres", channel="cli")
    finally:
        pg.close()
    assert _to_postgres(root, migrated, "--replace").exit_code == 0
    pg = _runtime(root, clock, "postgres")
    try:
        assert state_counts(pg.state) == filled["counts"]
        assert index_counts(pg.index) == filled["index"]
    finally:
        pg.close()
