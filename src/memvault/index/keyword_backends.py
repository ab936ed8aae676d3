"""Which keyword index a connection gets: FTS5 on SQLite, ``tsvector`` BM25 on PostgreSQL."""

from __future__ import annotations

from memvault.index.db import Connection
from memvault.index.keywords import Fts5Keywords, Keywords


def keywords_for(conn: Connection, dialect: str = "sqlite") -> Keywords:
    """The keyword index on ``conn``: FTS5 (``sqlite``) or PostgreSQL (``postgres``)."""
    if dialect == "postgres":
        from memvault.index.pg_keywords import PgKeywords  # psycopg only when asked for

        return PgKeywords(conn)
    return Fts5Keywords(conn)
