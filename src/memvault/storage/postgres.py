"""PostgreSQL with pgvector: the connection, the pool and the schema's migrations.

The connection string (DSN) is never written in the config file: ``[storage] dsn_env``
names the environment variable that holds it (``MEMVAULT_PG_DSN`` by default), so a
password stays out of the vault. :meth:`PostgresStorage.open` connects once on its own
to check the server and migrate the schema, then opens a pool of connections whose
vector columns take numpy arrays and read as pgvector's ``Vector`` (its adapter).

Migrations are versioned: the ``memvault_schema`` table holds one row per migration
applied. Each runs in its own transaction, and the whole run holds an advisory lock,
so two daemons starting at once against one database migrate it once: the second waits,
then finds nothing left to do. A database migrated by a newer memvault is refused
rather than written with an older idea of its schema.

What can go wrong on the way (the variable unset, the server unreachable, a wrong
password, pgvector not installed, a newer schema) is one sentence that says what to
do: a :class:`~memvault.errors.ConfigError` when the setting is wrong, a
:class:`~memvault.errors.StorageError` when the server is.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from memvault.config import StorageSettings
from memvault.errors import ConfigError, MemvaultError, StorageError
from memvault.storage.dialect import PgConnection
from memvault.storage.pg_schema import (
    BY_CHUNK_SQL,
    DIGESTS_SQL,
    EVENTS_SQL,
    EXACT_SQL,
    INDEX_SCHEMA,
    INDEX_SQL,
    POSTINGS_SQL,
    READS_SQL,
    RUNS_SQL,
    SCRIPTS_SQL,
    STATE_SCHEMA,
    STATE_SQL,
    STEMMING_SQL,
    TOKEN_AGENTS_SQL,
)

log = logging.getLogger(__name__)

Connection = psycopg.Connection[Any]

SCHEMA_TABLE = "memvault_schema"
# pg_advisory_lock's key for migrations: "memvault" in ASCII, as one bigint.
MIGRATION_LOCK = int.from_bytes(b"memvault", "big")
# The planner's cost of a random page read on the index's connection (an SSD's, or pages
# in memory: see PostgresStorage.index_connection).
INDEX_RANDOM_PAGE_COST = 1.1
# How long a starting daemon waits for another one's migrations before it gives up.
MIGRATION_WAIT_SECONDS = 60


@dataclass(frozen=True)
class Migration:
    """One step of the schema: SQL run in one transaction (several statements may be
    separated by ``;``; none may take parameters)."""

    version: int
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "pgvector", "CREATE EXTENSION IF NOT EXISTS vector"),
    Migration(2, "index", INDEX_SQL),
    Migration(3, "state", STATE_SQL),
    Migration(4, "events", EVENTS_SQL),
    Migration(5, "digests", DIGESTS_SQL),
    Migration(6, "token agents", TOKEN_AGENTS_SQL),
    Migration(7, "memory reads", READS_SQL),
    Migration(8, "exact words", EXACT_SQL),
    Migration(9, "keyword postings", POSTINGS_SQL),
    Migration(10, "agent runs", RUNS_SQL),
    Migration(11, "words in every script", SCRIPTS_SQL),
    Migration(12, "stemming by language", STEMMING_SQL),
    Migration(13, "postings by chunk", BY_CHUNK_SQL),
)


@dataclass(frozen=True)
class Target:
    """Where a DSN points, for messages (never its password)."""

    host: str
    port: str
    dbname: str
    user: str
    env_name: str

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def of(cls, dsn: str, env_name: str, environ: Mapping[str, str] | None = None) -> Target:
        """The parts of ``dsn`` that name the server, filled in as libpq does (``PG*``)."""
        environ = os.environ if environ is None else environ
        try:
            parts = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise _invalid_dsn(env_name, exc) from None

        def part(key: str, env: str, default: str) -> str:
            value = parts.get(key) or environ.get(env) or default
            return str(value).split(",")[0]

        user = part("user", "PGUSER", getpass.getuser())
        return cls(
            host=part("host", "PGHOST", "localhost"),
            port=part("port", "PGPORT", "5432"),
            dbname=part("dbname", "PGDATABASE", user),
            user=user,
            env_name=env_name,
        )


def dsn_from_environment(
    settings: StorageSettings, environ: Mapping[str, str] | None = None
) -> str:
    """The PostgreSQL connection string in the variable ``settings.dsn_env`` names."""
    environ = os.environ if environ is None else environ
    dsn = environ.get(settings.dsn_env, "").strip()
    if not dsn:
        raise ConfigError(
            f"The environment variable {settings.dsn_env} is not set; set it to the PostgreSQL "
            "connection string (postgresql://user:password@host:5432/dbname) or set [storage] "
            'backend = "sqlite".'
        )
    return dsn


def connect(dsn: str, target: Target, *, timeout: float = 10.0) -> Connection:
    """One connection to ``dsn`` (autocommit), or the sentence that says why not."""
    try:
        return psycopg.connect(
            dsn,
            autocommit=True,
            connect_timeout=_libpq_timeout(timeout),
            application_name="memvault",
        )
    except psycopg.ProgrammingError as exc:  # the DSN's syntax, an unknown keyword
        raise _invalid_dsn(target.env_name, exc) from None
    except psycopg.OperationalError as exc:
        raise connection_error(exc, target) from None


def _invalid_dsn(env_name: str, exc: psycopg.ProgrammingError) -> ConfigError:
    """The sentence for a connection string libpq cannot read."""
    reason = str(exc).strip().rstrip(".")
    return ConfigError(
        f"{env_name} is not a valid PostgreSQL connection string ({reason}); "
        "write it as postgresql://user:password@host:5432/dbname."
    )


def connection_error(exc: psycopg.OperationalError, target: Target) -> MemvaultError:
    """The sentence for a connection PostgreSQL refused or never answered."""
    text = str(exc)
    where = f"PostgreSQL at {target}"
    if "password authentication failed" in text or "no password supplied" in text:
        return ConfigError(
            f'{where} refused the password of user "{target.user}"; check the user and '
            f"password in {target.env_name}."
        )
    if re.search(r'database ".*" does not exist', text):
        return ConfigError(
            f'{where} has no database "{target.dbname}"; create it (createdb '
            f"{target.dbname}) or name another one in {target.env_name}."
        )
    if re.search(r'role ".*" does not exist|authentication failed|pg_hba\.conf', text):
        return ConfigError(
            f'{where} does not let user "{target.user}" in from here; check the user in '
            f"{target.env_name} and the server's pg_hba.conf."
        )
    return StorageError(
        f"Cannot reach {where} ({_reason(text)}); check that the server runs and that "
        f"{target.env_name} names its host and port."
    )


def _reason(text: str) -> str:
    """libpq's own reason, from its first line: "Connection refused", "timeout expired"."""
    first = text.strip().splitlines()[0] if text.strip() else "no answer"
    reason = first.rsplit("failed: ", 1)[-1].strip().rstrip(".")
    if reason[1:2].isupper():  # a word in capitals ("FATAL: ..."), not a sentence's start
        return reason
    return reason[:1].lower() + reason[1:]


def _libpq_timeout(seconds: float) -> int:
    # libpq takes whole seconds and treats anything below 2 as 2.
    return max(2, math.ceil(seconds))


def schema_version(conn: Connection) -> int:
    """The latest migration applied to the database (0 for a database memvault never used)."""
    row = conn.execute(
        "SELECT coalesce(max(version), 0) FROM memvault_schema"
        if _has_schema_table(conn)
        else "SELECT 0"
    ).fetchone()
    return int(row[0]) if row else 0


def _has_schema_table(conn: Connection) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (SCHEMA_TABLE,)).fetchone()
    return bool(row and row[0])


def migrate(conn: Connection, target: Target, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Apply every migration above the database's version, each in a transaction, under
    an advisory lock; returns the version the database is at.

    ``conn`` must be in autocommit mode (as :func:`connect` opens it).
    """
    latest = _check_sequence(migrations)
    try:
        conn.execute(f"SET lock_timeout = '{MIGRATION_WAIT_SECONDS}s'")
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    except pg_errors.LockNotAvailable:
        raise StorageError(
            f'Another memvault has been migrating database "{target.dbname}" at {target} '
            f"for over {MIGRATION_WAIT_SECONDS} s; start this one again when it is done."
        ) from None
    try:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} ("
            " version integer PRIMARY KEY,"
            " name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        current = schema_version(conn)
        if current > latest:
            raise StorageError(
                f'Database "{target.dbname}" at {target} was written by a newer memvault '
                f"(schema {current}, this one knows up to {latest}); upgrade memvault to "
                "use it."
            )
        for migration in sorted(migrations, key=lambda m: m.version):
            if migration.version <= current:
                continue
            _apply(conn, migration, target)
            log.info(
                "migrated the PostgreSQL schema",
                extra={"version": migration.version, "migration": migration.name},
            )
            current = migration.version
        return current
    finally:
        if not conn.closed:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
            conn.execute("RESET lock_timeout")


def _check_sequence(migrations: Sequence[Migration]) -> int:
    versions = sorted(m.version for m in migrations)
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migrations must be numbered 1, 2, 3 ... without gaps: {versions}")
    return len(versions)


def _apply(conn: Connection, migration: Migration, target: Target) -> None:
    try:
        with conn.transaction():
            conn.execute(migration.sql.encode())  # bytes: no parameters, several statements
            conn.execute(
                f"INSERT INTO {SCHEMA_TABLE} (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
    except psycopg.Error as exc:
        raise _migration_error(exc, migration, target) from None


def _migration_error(exc: psycopg.Error, migration: Migration, target: Target) -> MemvaultError:
    message = exc.diag.message_primary or str(exc).strip()
    where = f'database "{target.dbname}" at {target}'
    if 'extension "vector"' in message:
        if isinstance(exc, pg_errors.InsufficientPrivilege):
            return StorageError(
                f'User "{target.user}" may not create the pgvector extension in {where}; '
                "have a superuser run CREATE EXTENSION vector there once."
            )
        return StorageError(
            f"The PostgreSQL server of {where} has no pgvector; install it there (Debian: "
            "postgresql-NN-pgvector, or see github.com/pgvector/pgvector)."
        )
    if isinstance(exc, psycopg.OperationalError) and _connection_lost(exc):
        return StorageError(f"Lost the connection to PostgreSQL at {target} while migrating.")
    return StorageError(
        f"Migration {migration.version} ({migration.name}) of {where} failed: "
        f"{message.rstrip('.')}."
    )


def _connection_lost(exc: psycopg.Error) -> bool:
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in {"57P01", "57P02", "57P03"}


def _search_path(schema: str) -> str:
    """libpq ``options`` that put a connection's unqualified names in ``schema``."""
    return f"-c search_path={schema},public"


def _configure(conn: Connection) -> None:
    # Every pooled connection takes numpy arrays for vector columns (pgvector's adapter).
    register_vector(conn)
    conn.commit()


class PostgresStorage:
    """A PostgreSQL database memvault has checked and migrated, and a pool over it.

    ``with storage.connection() as conn`` lends a connection: what it runs is one
    transaction, committed when the block ends and rolled back if it raises.
    """

    def __init__(
        self,
        pool: ConnectionPool[Connection],
        target: Target,
        version: int,
        dsn: str = "",
        connect_timeout: float = 10.0,
    ) -> None:
        self._pool = pool
        self.target = target
        self.schema_version = version
        self._dsn = dsn
        self._connect_timeout = connect_timeout

    @classmethod
    def open(
        cls,
        settings: StorageSettings,
        *,
        environ: Mapping[str, str] | None = None,
        migrations: Sequence[Migration] = MIGRATIONS,
    ) -> PostgresStorage:
        """Connect to the database the environment names, migrate it, open the pool."""
        dsn = dsn_from_environment(settings, environ)
        target = Target.of(dsn, settings.dsn_env, environ)
        with connect(dsn, target, timeout=settings.connect_timeout) as conn:
            try:
                version = migrate(conn, target, migrations)
                _require_pgvector(conn, target)
            except psycopg.OperationalError as exc:
                if _connection_lost(exc):
                    raise StorageError(f"Lost the connection to PostgreSQL at {target}.") from None
                raise
        pool: ConnectionPool[Connection] = ConnectionPool(
            dsn,
            min_size=1,
            max_size=settings.pool_size,
            kwargs={
                "connect_timeout": _libpq_timeout(settings.connect_timeout),
                "application_name": "memvault",
                "options": _search_path(STATE_SCHEMA),
            },
            configure=_configure,
            check=ConnectionPool.check_connection,
            timeout=settings.connect_timeout,
            name="memvault",
            open=False,
        )
        try:
            pool.open(wait=True, timeout=settings.connect_timeout)
        except PoolTimeout:
            pool.close()
            raise StorageError(
                f"PostgreSQL at {target} accepted memvault once, then no pooled connection "
                f"within {settings.connect_timeout:g} s; check the server's max_connections."
            ) from None
        return cls(pool, target, version, dsn, settings.connect_timeout)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection]:
        """A pooled connection; its work is committed at the end of the block (rolled back
        on an exception)."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout:
            raise StorageError(
                f"No PostgreSQL connection came free within {self._pool.timeout:g} s "
                f"(pool of {self._pool.max_size}); raise [storage] pool_size or look for "
                "long transactions."
            ) from None
        except psycopg.OperationalError as exc:
            if _connection_lost(exc):
                raise StorageError(
                    f"Lost the connection to PostgreSQL at {self.target} ({_reason(str(exc))})."
                ) from None
            raise

    def index_connection(self) -> PgConnection:
        """A connection of its own for the index (autocommit; its transactions are explicit,
        as the index's SQLite connection's are), its ``search_path`` on the index's schema."""
        raw = connect(self._dsn, self.target, timeout=self._connect_timeout)
        try:
            raw.execute(f"SET search_path = {INDEX_SCHEMA}, public")
            # A search looks up a few hundred chunks by id and joins their notes: with the
            # default cost of a random read (4, a spinning disk's) the planner hashes whole
            # tables instead, 5x slower at 10k chunks; the index's pages are in memory.
            raw.execute(f"SET random_page_cost = {INDEX_RANDOM_PAGE_COST}")
            register_vector(raw)
        except psycopg.OperationalError as exc:
            raw.close()
            raise connection_error(exc, self.target) from None
        return PgConnection(raw)

    def check_vectors(self) -> VectorSupport:
        """Build and ask an HNSW index on a temporary table (see :func:`check_vectors`),
        on a connection of its own, so a backend that dies takes no pooled one along."""
        with connect(self._dsn, self.target, timeout=self._connect_timeout) as conn:
            return check_vectors(conn, self.target)

    def describe(self) -> str:
        """Where the data lives, for status lines (never the password)."""
        return f"postgresql://{self.target}/{self.target.dbname}"

    @property
    def pool_size(self) -> int:
        """The most connections the pool holds open."""
        return self._pool.max_size

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()

    def __enter__(self) -> PostgresStorage:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _require_pgvector(conn: Connection, target: Target) -> None:
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    if row is None:
        raise StorageError(
            f'Database "{target.dbname}" at {target} has no pgvector extension (was it '
            "dropped?); have a superuser run CREATE EXTENSION vector there."
        )


# pgvector's HNSW index, which memvault's vectors use, arrived in pgvector 0.5.0.
HNSW_SINCE = (0, 5, 0)
# A small HNSW index on a temporary table, as memvault's index builds and asks one; the
# transaction is rolled back, so nothing is left behind.
_VECTOR_PROBE = (
    "SET LOCAL statement_timeout = '30s'",
    "CREATE TEMP TABLE memvault_vector_probe (v vector(3)) ON COMMIT DROP",
    "INSERT INTO memvault_vector_probe"
    " SELECT ARRAY[i, i % 7, 1]::real[]::vector FROM generate_series(1, 64) AS i",
    "CREATE INDEX ON memvault_vector_probe USING hnsw (v vector_cosine_ops)",
    "SET LOCAL enable_seqscan = off",
    "SELECT count(*) FROM (SELECT v FROM memvault_vector_probe"
    " ORDER BY v <=> '[1,0,0]' LIMIT 5) AS nearest",
)


@dataclass(frozen=True)
class VectorSupport:
    """What :func:`check_vectors` found: the server's and pgvector's versions."""

    server: str
    pgvector: str


def check_vectors(conn: Connection, target: Target) -> VectorSupport:
    """The versions, once pgvector built an HNSW index and answered from it; otherwise a
    :class:`~memvault.errors.StorageError` that says what is wrong.

    A pgvector compiled for another processor (``-march=native`` on its builder) kills
    the server process that builds the index (``SIGILL``): the connection drops, and
    the sentence says so, since the server's log is out of a client's reach.
    """
    row = conn.execute(
        "SELECT split_part(current_setting('server_version'), ' ', 1),"
        " (SELECT extversion FROM pg_extension WHERE extname = 'vector')"
    ).fetchone()
    server, version = (str(row[0]), row[1]) if row else ("", None)
    where = f'database "{target.dbname}" at {target}'
    if version is None:
        raise StorageError(
            f'Database "{target.dbname}" at {target} has no pgvector extension; have a '
            "superuser run CREATE EXTENSION vector there."
        )
    if _version_tuple(version) < HNSW_SINCE:
        raise StorageError(
            f"pgvector {version} in {where} has no HNSW index; memvault needs pgvector 0.5.0 "
            "or newer (ALTER EXTENSION vector UPDATE after upgrading it on the server)."
        )
    try:
        with conn.transaction(force_rollback=True):
            for statement in _VECTOR_PROBE:
                conn.execute(statement.encode())
    except psycopg.Error as exc:
        if isinstance(exc, psycopg.OperationalError) and (_connection_lost(exc) or conn.closed):
            raise StorageError(
                f"PostgreSQL at {target} ended the server process building a pgvector "
                f"{version} HNSW index; a pgvector compiled for another processor does this "
                "(the server's log says 'terminated by signal 4: Illegal instruction'): "
                'rebuild pgvector on the server\'s machine (make OPTFLAGS="") or install its '
                "distribution's package."
            ) from None
        message = (exc.diag.message_primary or str(exc)).strip().rstrip(".")
        raise StorageError(
            f"pgvector {version} in {where} could not build an HNSW index: {message}."
        ) from None
    return VectorSupport(server=server, pgvector=version)


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])
