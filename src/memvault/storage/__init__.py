"""Storage: where the index and the operational state live.

The vault (Markdown files) stays the source of truth whatever the backend; the
index and the state are derived from it or kept beside it. Two backends sit behind
one seam: SQLite (embedded, the default: files in the vault's ``.memvault`` folder)
and PostgreSQL with pgvector (``[storage] backend = "postgres"``), which several
daemons on several machines can share.

So far this package holds the PostgreSQL foundation (:mod:`memvault.storage.postgres`):
the connection from a DSN in the environment, the pool, the versioned migrations and
the errors a user can meet on the way.
"""
