"""The operational database: ``<vault>/.memvault/state.db``.

Unlike the index (derived from the vault, rebuildable at any time), this
database holds what exists nowhere else: sessions and their messages, the
event id counter, location samples, the channels' inbox, outbox, senders
and approvals, what the importers brought in, the jobs' runs, when a search
last returned each memory, which reminders were sent, what consolidation
changed in memories or left for review, the named API tokens, who read
each memory, and what each agent run was given. It is SQLite in WAL mode,
shared by the daemon's threads through one connection guarded by a lock;
every write is a transaction.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from memvault import sqlite as sql
from memvault.errors import VaultError
from memvault.locations import STATE_DB, private_file, private_state_dir

_MIGRATIONS: dict[int, str] = {
    1: sql.META_TABLE
    + """;
    CREATE TABLE sessions (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        channel TEXT NOT NULL,
        started_at TEXT NOT NULL,
        last_message_at TEXT,
        ended_at TEXT,
        message_count INTEGER NOT NULL DEFAULT 0,
        summary TEXT
    );
    CREATE INDEX sessions_key ON sessions (key, id);
    CREATE UNIQUE INDEX sessions_open ON sessions (key) WHERE ended_at IS NULL;
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        channel TEXT NOT NULL,
        direction TEXT NOT NULL,
        role TEXT NOT NULL,
        sender TEXT,
        text TEXT NOT NULL,
        sent_at TEXT NOT NULL,
        metadata TEXT
    );
    CREATE INDEX messages_session ON messages (session_id, id);
    CREATE TABLE location_samples (
        id TEXT PRIMARY KEY,
        lat REAL NOT NULL,
        lon REAL NOT NULL,
        accuracy REAL,
        observed_at TEXT NOT NULL,
        received_at TEXT NOT NULL,
        journaled INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX location_samples_journaled ON location_samples (journaled, observed_at)
    """,
    # Channels: what arrived (stored before the platform is told), what goes out (retried
    # until sent), who may talk, and the owner's approvals of tool calls from a chat.
    2: """
    CREATE TABLE channel_inbox (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        message_id TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        sender_id TEXT NOT NULL,
        received_at TEXT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'new',
        note TEXT,
        handled_at TEXT,
        UNIQUE (channel, message_id)
    );
    CREATE INDEX channel_inbox_status ON channel_inbox (status, id);
    CREATE INDEX channel_inbox_chat ON channel_inbox (channel, chat_id, id);
    CREATE TABLE channel_outbox (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        text TEXT NOT NULL,
        reply_to TEXT,
        media TEXT,
        buttons TEXT,
        inbox_id INTEGER,
        part INTEGER NOT NULL DEFAULT 1,
        parts INTEGER NOT NULL DEFAULT 1,
        status TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TEXT NOT NULL,
        last_error TEXT,
        created_at TEXT NOT NULL,
        sent_at TEXT,
        platform_ids TEXT
    );
    CREATE INDEX channel_outbox_status ON channel_outbox (status, id);
    CREATE INDEX channel_outbox_inbox ON channel_outbox (inbox_id);
    CREATE TABLE channel_senders (
        channel TEXT NOT NULL,
        sender_id TEXT NOT NULL,
        chat_id TEXT,
        name TEXT,
        username TEXT,
        status TEXT NOT NULL,
        code TEXT,
        code_expires_at TEXT,
        first_seen TEXT NOT NULL,
        last_seen TEXT NOT NULL,
        messages INTEGER NOT NULL DEFAULT 0,
        owner_told INTEGER NOT NULL DEFAULT 0,
        decided_at TEXT,
        decided_by TEXT,
        PRIMARY KEY (channel, sender_id)
    );
    CREATE TABLE channel_approvals (
        id INTEGER PRIMARY KEY,
        short_id TEXT NOT NULL,
        session TEXT NOT NULL,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        tier INTEGER NOT NULL,
        category TEXT NOT NULL,
        summary TEXT NOT NULL,
        call_hash TEXT NOT NULL,
        status TEXT NOT NULL,
        scope TEXT,
        requested_at TEXT NOT NULL,
        resolved_at TEXT,
        resolved_by TEXT
    );
    CREATE UNIQUE INDEX channel_approvals_pending ON channel_approvals (short_id)
        WHERE status = 'pending'
    """,
    # Importers (openclaw/importers.py): what was imported, by a hash of its content, so
    # importing the same files again adds nothing.
    3: """
    CREATE TABLE imports (
        kind TEXT NOT NULL,
        item_hash TEXT NOT NULL,
        target TEXT NOT NULL,
        source TEXT NOT NULL,
        imported_at TEXT NOT NULL,
        PRIMARY KEY (kind, item_hash)
    )
    """,
    # Jobs (jobs/engine.py): one row a run; the partial unique index lets one process at a
    # time hold a job's ``running`` row, so a job never runs twice at once.
    4: """
    CREATE TABLE job_runs (
        id INTEGER PRIMARY KEY,
        job TEXT NOT NULL,
        started TEXT NOT NULL,
        finished TEXT,
        status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'skipped')),
        output TEXT NOT NULL DEFAULT '',
        error TEXT,
        metadata TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX job_runs_job ON job_runs (job, id);
    CREATE UNIQUE INDEX job_runs_running ON job_runs (job) WHERE status = 'running'
    """,
    # Recalls (memory/recalls.py): when a search last returned each memory, so the
    # archival job leaves alone what is still being recalled. Reminders (jobs/reminders.py):
    # each one sent, by what it was for and its date, so it is sent once.
    5: """
    CREATE TABLE memory_recalls (
        memory_id TEXT PRIMARY KEY,
        last_recalled TEXT NOT NULL,
        times INTEGER NOT NULL DEFAULT 1
    );
    CREATE TABLE reminders_sent (
        key TEXT PRIMARY KEY,
        sent_at TEXT NOT NULL,
        run_id INTEGER,
        status TEXT NOT NULL
    )
    """,
    # Consolidation on write (memory/consolidation.py): every change it made to a memory,
    # and the decisions it was not sure enough of, kept for the owner to apply or dismiss.
    6: """
    CREATE TABLE memory_changes (
        id INTEGER PRIMARY KEY,
        memory_id TEXT NOT NULL,
        action TEXT NOT NULL,
        old_text TEXT,
        new_text TEXT,
        related_id TEXT,
        reason TEXT NOT NULL DEFAULT '',
        decided_by TEXT NOT NULL,
        at TEXT NOT NULL
    );
    CREATE INDEX memory_changes_memory ON memory_changes (memory_id, id);
    CREATE INDEX memory_changes_related ON memory_changes (related_id, id);
    CREATE TABLE memory_reviews (
        id INTEGER PRIMARY KEY,
        memory_id TEXT NOT NULL,
        text TEXT NOT NULL,
        action TEXT,
        target TEXT,
        merged_text TEXT,
        reason TEXT NOT NULL DEFAULT '',
        confidence REAL,
        problem TEXT,
        candidates TEXT NOT NULL DEFAULT '[]',
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'applied', 'dismissed')),
        created_at TEXT NOT NULL,
        resolved_at TEXT
    );
    CREATE INDEX memory_reviews_status ON memory_reviews (status, id)
    """,
    # Named API tokens (gateway/tokens.py): only a SHA-256 of each secret is kept; a name
    # is unique among the tokens not revoked. The agent a named token acts for is recorded
    # on the sessions it opens.
    7: """
    CREATE TABLE api_tokens (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        scopes TEXT NOT NULL,
        secret_sha256 TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        last_used_at TEXT,
        revoked_at TEXT
    );
    CREATE UNIQUE INDEX api_tokens_live ON api_tokens (name COLLATE NOCASE)
        WHERE revoked_at IS NULL;
    ALTER TABLE sessions ADD COLUMN agent TEXT
    """,
    # A named token bound to an agent sees only that agent's memories and sessions.
    8: """
    ALTER TABLE api_tokens ADD COLUMN agent TEXT
    """,
    # Reads (privacy/reads.py): who read each memory, when and how; bounded by
    # [privacy] reads_keep_days and reads_per_memory, pruned as it is written.
    9: """
    CREATE TABLE memory_reads (
        id INTEGER PRIMARY KEY,
        memory_id TEXT NOT NULL,
        at TEXT NOT NULL,
        path TEXT NOT NULL,
        surface TEXT NOT NULL,
        agent TEXT,
        observer INTEGER NOT NULL DEFAULT 0,
        audience TEXT
    );
    CREATE INDEX memory_reads_memory ON memory_reads (memory_id, id);
    CREATE INDEX memory_reads_at ON memory_reads (at)
    """,
    # Agent runs (memory/runs.py): what each run was given (its context section by
    # section, the memories recalled with their scores, its tool calls), keyed by the
    # session and the turn that asked; bounded by [agent] runs_keep_days.
    10: """
    CREATE TABLE agent_runs (
        id INTEGER PRIMARY KEY,
        session_id INTEGER,
        turn INTEGER,
        session_key TEXT,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        surface TEXT NOT NULL,
        channel TEXT,
        sender TEXT,
        agent TEXT,
        audience TEXT,
        command TEXT NOT NULL,
        status TEXT NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        model TEXT,
        input_tokens INTEGER,
        output_tokens INTEGER,
        iterations INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        context TEXT NOT NULL DEFAULT '{}',
        recalled TEXT NOT NULL DEFAULT '[]',
        marks TEXT NOT NULL DEFAULT '{}',
        tool_calls TEXT NOT NULL DEFAULT '[]'
    );
    CREATE INDEX agent_runs_session ON agent_runs (session_id, turn);
    CREATE INDEX agent_runs_channel ON agent_runs (channel, id);
    CREATE INDEX agent_runs_started ON agent_runs (started_at)
    """,
}
SCHEMA_VERSION = max(_MIGRATIONS)


class StateStore(Protocol):
    """What the state's users need of it: SQLite's ``state.db`` (:class:`StateDB`) or
    PostgreSQL's state schema (:class:`memvault.storage.pg_state.PgStateDB`)."""

    @property
    def path(self) -> Any: ...

    def transaction(self) -> contextlib.AbstractContextManager[Any]: ...

    def query(self, statement: str, params: tuple[Any, ...] = ()) -> list[Any]: ...

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def check(self) -> str | None: ...

    def close(self) -> None: ...


class StateDB:
    """One connection to ``state.db``, safe to share between threads."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / STATE_DB
        self._lock = threading.RLock()
        if self.path.exists() and not sql.can_write(self.path):
            self._open_read_only()  # a read-only vault: reads answer, a write says why it failed
            return
        try:
            private_state_dir(state_dir)
            private_file(self.path)  # conversation logs: the owner's only, -wal and -shm too
            self._conn = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=10.0
            )
        except (OSError, sqlite3.Error) as exc:
            raise VaultError(f"Cannot open {self.path}: {exc}.") from exc
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        try:
            sql.migrate(
                self._conn,
                _MIGRATIONS,
                newer=f"{self.path} was written by a newer memvault (schema {{version}}); "
                "upgrade memvault to use this vault.",
            )
        except BaseException:
            self._conn.close()
            raise

    def _open_read_only(self) -> None:
        try:
            self._conn = sqlite3.connect(
                sql.read_only_uri(self.path),
                uri=True,
                check_same_thread=False,
                isolation_level=None,
            )
            version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.Error as exc:
            raise VaultError(f"Cannot read {self.path}: {exc}.") from exc
        if version != SCHEMA_VERSION:
            self._conn.close()
            raise VaultError(
                f"{self.path} needs an upgrade to schema {SCHEMA_VERSION}, and the vault is "
                "read-only; make it writable and run memvault once."
            )
        self._conn.row_factory = sqlite3.Row

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """The connection inside ``BEGIN IMMEDIATE ... COMMIT`` (rolled back on error)."""
        with self._lock, sql.transaction(self._conn) as conn:
            yield conn

    def query(self, statement: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Rows of a read-only statement."""
        with self._lock:
            return self._conn.execute(statement, params).fetchall()

    def get_meta(self, key: str) -> str | None:
        """A value of the ``meta`` table."""
        with self._lock:
            return sql.get_meta(self._conn, key)

    def set_meta(self, key: str, value: str) -> None:
        """Store a value in the ``meta`` table."""
        with self.transaction() as conn:
            sql.set_meta(conn, key, value)

    def check(self) -> str | None:
        """None when SQLite finds the database sound, else what it found."""
        with self._lock:
            return sql.quick_check(self._conn)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()
