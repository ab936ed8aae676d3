"""The PostgreSQL index's schema in a test database, and connections on it as the index
opens them (``search_path`` on ``memvault_index``, pgvector's adapter)."""

from __future__ import annotations

import psycopg
from pgvector.psycopg import register_vector

from memvault.config import StorageSettings
from memvault.storage.dialect import PgConnection
from memvault.storage.pg_schema import INDEX_SCHEMA
from memvault.storage.postgres import MIGRATIONS, PostgresStorage
from waiting import WAIT


def migrate_index(dsn: str) -> str:
    """Migrate the database ``dsn`` names as memvault does on start; returns ``dsn``."""
    settings = StorageSettings(backend="postgres", connect_timeout=WAIT)
    PostgresStorage.open(settings, environ={"MEMVAULT_PG_DSN": dsn}, migrations=MIGRATIONS).close()
    return dsn


def index_connection(dsn: str) -> PgConnection:
    """A connection on the index's schema, as the index opens it."""
    raw = psycopg.connect(dsn, autocommit=True)
    raw.execute(f"SET search_path = {INDEX_SCHEMA}, public")
    register_vector(raw)
    return PgConnection(raw)
