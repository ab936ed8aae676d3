"""The PostgreSQL foundation against a real server: pool, migrations, pgvector, full-text
search, and the one sentence a user gets for each way a connection goes wrong."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector import Vector

from memvault.config import StorageSettings, load_settings
from memvault.errors import ConfigError, StorageError
from memvault.storage.postgres import (
    MIGRATIONS,
    Migration,
    PostgresStorage,
    Target,
    connect,
    migrate,
    schema_version,
)
from pg_server import TemporaryPostgres, free_port

SETTINGS = StorageSettings(backend="postgres", connect_timeout=5)


def env(dsn: str) -> dict[str, str]:
    return {"MEMVAULT_PG_DSN": dsn}


def port_of(dsn: str) -> str:
    return dsn.split(":")[-1].split("/")[0]


def history(dsn: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as conn:
        return [
            (int(v), str(n))
            for v, n in conn.execute("SELECT version, name FROM memvault_schema ORDER BY version")
        ]


def tables(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {str(r[0]) for r in rows}


# Test-only migrations: a real table, then one that slows down to make migrators overlap.
NEXT = len(MIGRATIONS) + 1
REAL = [
    (1, "pgvector"),
    (2, "index"),
    (3, "state"),
    (4, "events"),
    (5, "digests"),
    (6, "token agents"),
    (7, "memory reads"),
    (8, "exact words"),
    (9, "keyword postings"),
    (10, "agent runs"),
    (11, "words in every script"),
    (12, "stemming by language"),
    (13, "postings by chunk"),
]
NOTES = Migration(NEXT, "notes", "CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL)")
SLOW = Migration(
    NEXT + 1,
    "tags",
    "SELECT pg_sleep(0.4); CREATE TABLE tags (note integer REFERENCES notes, tag text NOT NULL)",
)
TEST_MIGRATIONS = (*MIGRATIONS, NOTES, SLOW)


@pytest.fixture
def storage(database: str) -> Iterator[PostgresStorage]:
    with PostgresStorage.open(
        SETTINGS.model_copy(update={"pool_size": 3}),
        environ=env(database),
        migrations=TEST_MIGRATIONS,
    ) as opened:
        yield opened


# The pool


def test_a_pooled_block_is_one_transaction(storage: PostgresStorage) -> None:
    with storage.connection() as conn:
        conn.execute("INSERT INTO notes (body) VALUES ('kept')")
    with pytest.raises(RuntimeError), storage.connection() as conn:
        conn.execute("INSERT INTO notes (body) VALUES ('rolled back')")
        raise RuntimeError("the block failed")
    with storage.connection() as conn:
        assert [r[0] for r in conn.execute("SELECT body FROM notes")] == ["kept"]


def test_the_pool_lends_separate_connections_up_to_its_size(storage: PostgresStorage) -> None:
    barrier = threading.Barrier(storage.pool_size)
    pids: list[int] = []

    def work() -> None:
        with storage.connection() as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None
            pids.append(int(row[0]))
            barrier.wait(10)  # every thread holds its connection at once

    threads = [threading.Thread(target=work) for _ in range(storage.pool_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert len(set(pids)) == storage.pool_size == 3


def test_the_pool_replaces_connections_the_server_ended(
    storage: PostgresStorage, pg: TemporaryPostgres, database: str
) -> None:
    with storage.connection() as conn:
        conn.execute("SELECT 1")
    with psycopg.connect(pg.dsn(), autocommit=True) as admin:
        ended = admin.execute(
            "WITH pooled AS MATERIALIZED (SELECT pid FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid())"
            " SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pooled",
            (database.rsplit("/", 1)[1],),
        ).fetchone()
    assert ended is not None and ended[0] >= 1
    with storage.connection() as conn:
        assert conn.execute("SELECT 41 + 1").fetchone() == (42,)


def test_pooled_connections_read_and_write_vectors(storage: PostgresStorage) -> None:
    with storage.connection() as conn:
        row = conn.execute("SELECT %s::vector", (np.array([1.5, 2.0, 3.0]),)).fetchone()
    assert row is not None
    assert isinstance(row[0], Vector)  # pgvector's adapter, not the text '[1.5,2,3]'
    assert row[0].to_numpy().tolist() == [1.5, 2.0, 3.0]


# Migrations


def test_a_fresh_database_is_migrated_to_the_latest_version(database: str) -> None:
    assert "memvault_schema" not in tables(database)
    with PostgresStorage.open(SETTINGS, environ=env(database)) as storage:
        assert storage.schema_version == len(MIGRATIONS) == 13
    assert history(database) == REAL
    with psycopg.connect(database) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pg_extension WHERE extname = 'vector'"
        ).fetchone() == (1,)


def test_migrating_again_applies_nothing(database: str) -> None:
    PostgresStorage.open(SETTINGS, environ=env(database), migrations=TEST_MIGRATIONS).close()
    with psycopg.connect(database) as conn:
        before = conn.execute("SELECT version, applied_at FROM memvault_schema").fetchall()
    with PostgresStorage.open(
        SETTINGS, environ=env(database), migrations=TEST_MIGRATIONS
    ) as storage:
        assert storage.schema_version == NEXT + 1
    with psycopg.connect(database) as conn:
        after = conn.execute("SELECT version, applied_at FROM memvault_schema").fetchall()
    assert after == before
    assert len(after) == NEXT + 1


def test_an_older_database_is_brought_up_to_date(database: str) -> None:
    PostgresStorage.open(SETTINGS, environ=env(database)).close()
    with PostgresStorage.open(
        SETTINGS, environ=env(database), migrations=TEST_MIGRATIONS
    ) as storage:
        assert storage.schema_version == NEXT + 1
    assert history(database) == [*REAL, (NEXT, "notes"), (NEXT + 1, "tags")]
    assert {"notes", "tags"} <= tables(database)


def test_two_daemons_starting_at_once_migrate_once(database: str) -> None:
    # Neither migration says IF NOT EXISTS: a second run of either would fail.
    starting = threading.Barrier(2)
    versions: list[int] = []
    failures: list[BaseException] = []

    def start() -> None:
        try:
            starting.wait(10)
            with PostgresStorage.open(
                SETTINGS, environ=env(database), migrations=TEST_MIGRATIONS
            ) as storage:
                versions.append(storage.schema_version)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert failures == []
    assert versions == [NEXT + 1, NEXT + 1]
    assert history(database) == [*REAL, (NEXT, "notes"), (NEXT + 1, "tags")]


def test_a_database_written_by_a_newer_memvault_is_refused(database: str) -> None:
    PostgresStorage.open(SETTINGS, environ=env(database), migrations=TEST_MIGRATIONS).close()
    with pytest.raises(StorageError) as caught:
        PostgresStorage.open(SETTINGS, environ=env(database))
    port = port_of(database)
    assert str(caught.value) == (
        f'Database "{database.rsplit("/", 1)[1]}" at 127.0.0.1:{port} was written by a newer '
        f"memvault (schema {NEXT + 1}, this one knows up to {NEXT - 1}); "
        "upgrade memvault to use it."
    )
    assert caught.value.exit_code == 5
    assert len(history(database)) == NEXT + 1


def test_a_failing_migration_leaves_the_version_before_it(database: str) -> None:
    broken = Migration(
        NEXT + 1, "broken", "CREATE TABLE half (id int); SELECT no_such_column FROM notes"
    )
    with pytest.raises(StorageError) as caught:
        PostgresStorage.open(
            SETTINGS, environ=env(database), migrations=(*MIGRATIONS, NOTES, broken)
        )
    assert str(caught.value).startswith(
        f'Migration {NEXT + 1} (broken) of database "test_'
    ) and str(caught.value).endswith('failed: column "no_such_column" does not exist.')
    assert history(database) == [*REAL, (NEXT, "notes")]
    assert "half" not in tables(database)  # the failed migration's first statement too


def test_migrations_must_be_numbered_without_gaps(database: str) -> None:
    target = Target.of(database, "MEMVAULT_PG_DSN")
    with connect(database, target) as conn, pytest.raises(ValueError, match="without gaps"):
        migrate(conn, target, (*MIGRATIONS, SLOW))
    with psycopg.connect(database) as conn:
        assert conn.execute("SELECT to_regclass('memvault_schema')").fetchone() == (None,)


def test_an_unused_database_is_at_version_zero(database: str) -> None:
    target = Target.of(database, "MEMVAULT_PG_DSN")
    with connect(database, target) as conn:
        assert schema_version(conn) == 0
        assert migrate(conn, target) == NEXT - 1
        assert schema_version(conn) == NEXT - 1


# pgvector and full-text search


def test_pgvector_answers_nearest_neighbours_from_an_hnsw_index(storage: PostgresStorage) -> None:
    points = {"east": [1, 0, 0], "north": [0, 1, 0], "up": [0, 0, 1], "north-east": [1, 1, 0]}
    with storage.connection() as conn:
        conn.execute("CREATE TABLE places (name text PRIMARY KEY, direction vector(3) NOT NULL)")
        conn.execute("CREATE INDEX places_hnsw ON places USING hnsw (direction vector_cosine_ops)")
        for name, vec in points.items():
            conn.execute("INSERT INTO places VALUES (%s, %s)", (name, np.array(vec, float)))
    query = np.array([0.9, 0.2, 0.0])
    nearest = (
        "SELECT name, direction <=> %s AS distance FROM places ORDER BY direction <=> %s LIMIT 3"
    )
    with storage.connection() as conn:
        conn.execute("SET LOCAL enable_seqscan = off")  # four rows: make the planner use it
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN {nearest}", (query, query)))
        rows = conn.execute(nearest, (query, query)).fetchall()
    assert "places_hnsw" in plan
    assert [name for name, _ in rows] == ["east", "north-east", "north"]
    assert rows[0][1] == pytest.approx(1 - 0.9 / np.linalg.norm(query), abs=1e-6)


def test_websearch_to_tsquery_matches_words_phrases_and_exclusions(
    storage: PostgresStorage,
) -> None:
    texts = [
        "Melanie painted a sunrise over the lake last summer",
        "Caroline went to the LGBTQ support group on Sunday",
        "The lake was frozen, so nobody painted that winter",
        "Melanie is running a charity race for mental health",
    ]
    with storage.connection() as conn:
        conn.execute(
            "CREATE TABLE turns (id serial PRIMARY KEY, text text NOT NULL,"
            " tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED)"
        )
        conn.execute("CREATE INDEX turns_tsv ON turns USING gin (tsv)")
        for text in texts:
            conn.execute("INSERT INTO turns (text) VALUES (%s)", (text,))

    def search(query: str) -> list[int]:
        with storage.connection() as conn:
            rows = conn.execute(
                "SELECT id FROM turns, websearch_to_tsquery('english', %s) q"
                " WHERE tsv @@ q ORDER BY ts_rank_cd(tsv, q) DESC, id",
                (query,),
            )
            return [int(r[0]) for r in rows]

    assert search("paintings of the lake") == [1, 3]  # stemmed: painted ~ paintings
    assert search('"painted a sunrise"') == [1]
    assert search("lake -frozen") == [1]
    assert search("melanie or caroline") == [1, 2, 4]
    assert search("races run") == [4]  # every word must match (AND)
    assert search("the of and") == []  # only stop words: matches nothing, no error


# One sentence for each way a connection goes wrong


def test_an_unset_variable_is_one_sentence() -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresStorage.open(SETTINGS, environ={})
    assert str(caught.value) == (
        "The environment variable MEMVAULT_PG_DSN is not set; set it to the PostgreSQL "
        "connection string (postgresql://user:password@host:5432/dbname) or set [storage] "
        'backend = "sqlite".'
    )
    named = StorageSettings(backend="postgres", dsn_env="TEAM_MEMORY_DB")
    with pytest.raises(ConfigError, match=r"^The environment variable TEAM_MEMORY_DB is not"):
        PostgresStorage.open(named, environ={"MEMVAULT_PG_DSN": "postgresql://x@y/z"})


def test_a_server_not_listening_is_one_sentence(pg: TemporaryPostgres) -> None:
    port = free_port()
    dsn = f"postgresql://memvault:{pg.password}@127.0.0.1:{port}/postgres"
    with pytest.raises(StorageError) as caught:
        PostgresStorage.open(SETTINGS, environ=env(dsn))
    assert str(caught.value) == (
        f"Cannot reach PostgreSQL at 127.0.0.1:{port} (connection refused); check that the "
        "server runs and that MEMVAULT_PG_DSN names its host and port."
    )
    assert caught.value.exit_code == 5


def test_a_wrong_password_is_one_sentence(pg: TemporaryPostgres) -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresStorage.open(SETTINGS, environ=env(pg.dsn(password="not-the-password")))
    assert str(caught.value) == (
        f'PostgreSQL at 127.0.0.1:{pg.port} refused the password of user "memvault"; check '
        "the user and password in MEMVAULT_PG_DSN."
    )
    assert "not-the-password" not in str(caught.value)


def test_a_missing_password_is_one_sentence(pg: TemporaryPostgres) -> None:
    dsn = f"postgresql://memvault@127.0.0.1:{pg.port}/postgres"
    with pytest.raises(ConfigError, match='refused the password of user "memvault"'):
        PostgresStorage.open(SETTINGS, environ={**env(dsn), "PGPASSFILE": "/nonexistent"})


def test_an_unknown_user_is_one_sentence(pg: TemporaryPostgres) -> None:
    dsn = f"postgresql://nobody_here:{pg.password}@127.0.0.1:{pg.port}/postgres"
    with pytest.raises(ConfigError) as caught:
        PostgresStorage.open(SETTINGS, environ=env(dsn))
    # scram-sha-256 does not tell an unknown user from a wrong password, by design.
    assert str(caught.value).startswith(
        f'PostgreSQL at 127.0.0.1:{pg.port} refused the password of user "nobody_here"'
    )


def test_a_user_the_server_turns_away_is_one_sentence(pg: TemporaryPostgres) -> None:
    hba = pg.root / "data" / "pg_hba.conf"
    rules = hba.read_text()
    hba.write_text("host all outsider 127.0.0.1/32 reject\n" + rules)
    try:
        with psycopg.connect(pg.dsn(), autocommit=True) as admin:
            admin.execute("SELECT pg_reload_conf()")
        dsn = f"postgresql://outsider:{pg.password}@127.0.0.1:{pg.port}/postgres"
        with pytest.raises(ConfigError) as caught:
            PostgresStorage.open(SETTINGS, environ=env(dsn))
    finally:
        hba.write_text(rules)
        with psycopg.connect(pg.dsn(), autocommit=True) as admin:
            admin.execute("SELECT pg_reload_conf()")
    assert str(caught.value) == (
        f'PostgreSQL at 127.0.0.1:{pg.port} does not let user "outsider" in from here; check '
        "the user in MEMVAULT_PG_DSN and the server's pg_hba.conf."
    )


def test_a_missing_database_is_one_sentence(pg: TemporaryPostgres) -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresStorage.open(SETTINGS, environ=env(pg.dsn("memories")))
    assert str(caught.value) == (
        f'PostgreSQL at 127.0.0.1:{pg.port} has no database "memories"; create it '
        "(createdb memories) or name another one in MEMVAULT_PG_DSN."
    )


def test_a_malformed_dsn_is_one_sentence() -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresStorage.open(SETTINGS, environ=env("host=localhost port"))
    assert str(caught.value) == (
        'MEMVAULT_PG_DSN is not a valid PostgreSQL connection string (missing "=" after '
        '"port" in connection info string); write it as '
        "postgresql://user:password@host:5432/dbname."
    )


def test_a_server_without_pgvector_is_one_sentence(pg: TemporaryPostgres) -> None:
    # A server of the same PostgreSQL whose install has no pgvector at all.
    with TemporaryPostgres(pg.bindir, without=("vector",)) as bare:
        bare.start(check=False)
        database = bare.create_database("memories")
        with pytest.raises(StorageError) as caught:
            PostgresStorage.open(SETTINGS, environ=env(database))
        assert str(caught.value) == (
            f'The PostgreSQL server of database "memories" at 127.0.0.1:{bare.port} has no'
            " pgvector; install it there (Debian: postgresql-NN-pgvector, or see "
            "github.com/pgvector/pgvector)."
        )
        assert history(database) == []


def test_a_user_who_may_not_create_pgvector_is_one_sentence(
    pg: TemporaryPostgres, database: str
) -> None:
    name = database.rsplit("/", 1)[1]
    with psycopg.connect(pg.dsn(), autocommit=True) as admin:
        admin.execute(b"CREATE ROLE agent LOGIN PASSWORD 'agent-pw'")
        admin.execute(f"ALTER DATABASE {name} OWNER TO agent".encode())
    as_agent = f"postgresql://agent:agent-pw@127.0.0.1:{pg.port}/{name}"
    try:
        with pytest.raises(StorageError) as caught:
            PostgresStorage.open(SETTINGS, environ=env(as_agent))
        assert str(caught.value) == (
            f'User "agent" may not create the pgvector extension in database "{name}" at '
            f"127.0.0.1:{pg.port}; have a superuser run CREATE EXTENSION vector there once."
        )
        # Once a superuser has, the same user migrates the rest itself.
        with psycopg.connect(database, autocommit=True) as admin:
            admin.execute("CREATE EXTENSION vector")
        with PostgresStorage.open(SETTINGS, environ=env(as_agent)) as storage:
            assert storage.schema_version == NEXT - 1
    finally:
        with psycopg.connect(pg.dsn(), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)".encode())
            admin.execute(b"DROP ROLE agent")


# Settings


def test_the_storage_section_is_read_from_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = tmp_path / "vault"
    (vault / ".memvault").mkdir(parents=True)
    (vault / ".memvault" / "config.toml").write_text(
        '[storage]\nbackend = "postgres"\ndsn_env = "TEAM_MEMORY_DB"\npool_size = 4\n'
    )
    storage = load_settings(vault).settings.storage
    assert (storage.backend, storage.dsn_env, storage.pool_size) == (
        "postgres",
        "TEAM_MEMORY_DB",
        4,
    )
    monkeypatch.setenv("MEMVAULT_STORAGE__BACKEND", "mysql")
    with pytest.raises(ConfigError, match="backend"):
        load_settings(vault)
