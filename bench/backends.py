"""Which storage the benchmarks' vaults use: SQLite files, or PostgreSQL + pgvector.

``with backend("postgres"):`` starts a real PostgreSQL (the one ``make install`` builds,
as the tests do) for the block; every vault a benchmark builds inside it then asks
:func:`storage` for its ``[storage]`` settings and gets a database of its own, copied
from one memvault has migrated. Outside such a block, :func:`storage` is SQLite.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg

from memvault.config import StorageSettings
from memvault.storage.postgres import PostgresStorage

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pg_server import TemporaryPostgres, server_bin

BACKENDS = ("sqlite", "postgres")
_TEMPLATE = "memvault_bench_template"
_server: TemporaryPostgres | None = None
_names = itertools.count(1)


def storage() -> StorageSettings:
    """``[storage]`` for the next vault: SQLite, or a fresh PostgreSQL database (its DSN in
    an environment variable of its own)."""
    if _server is None:
        return StorageSettings()
    name = f"bench_{next(_names)}"
    dsn = _server.create_database(name, template=_TEMPLATE)
    variable = f"MEMVAULT_BENCH_DSN_{name.upper()}"
    os.environ[variable] = dsn
    return StorageSettings(backend="postgres", dsn_env=variable)


def settle(settings: StorageSettings) -> None:
    """Bring a freshly built vault's index to the state a user searches: on PostgreSQL,
    ``VACUUM ANALYZE`` now, which the server's autovacuum does by itself within a
    minute of a bulk load (until then it competes with the searches for two cores and
    index-only scans read the table too: hybrid p95 at 10k 38.5 against 25.0 ms).
    SQLite has no such step."""
    if settings.backend != "postgres":
        return
    with psycopg.connect(os.environ[settings.dsn_env], autocommit=True) as conn:
        conn.execute(b"VACUUM ANALYZE")


def current() -> str:
    """The backend the vaults are built on now."""
    return "sqlite" if _server is None else "postgres"


@contextlib.contextmanager
def backend(name: str) -> Iterator[None]:
    """Build the block's vaults on ``name`` (a PostgreSQL server lives as long as it)."""
    global _server
    if name == "sqlite" or _server is not None:
        yield
        return
    bindir = server_bin()
    if bindir is None:
        raise SystemExit("PostgreSQL is not installed: run `make install` (it builds .venv/pg).")
    with TemporaryPostgres(bindir) as server:
        server.start()
        dsn = server.create_database(_TEMPLATE)
        os.environ["MEMVAULT_BENCH_TEMPLATE_DSN"] = dsn
        PostgresStorage.open(
            StorageSettings(backend="postgres", dsn_env="MEMVAULT_BENCH_TEMPLATE_DSN")
        ).close()
        _server = server
        try:
            yield
        finally:
            _server = None
