"""PostgreSQL for the tests: one real server per session (per xdist worker), a database
per test; a plugin (``pytest_plugins`` in ``conftest.py``, ``-p pg_fixtures`` elsewhere).

A server that cannot build a pgvector HNSW index fails the first test that asks for it
with one sentence (:class:`~pg_server.BrokenServerError`) and stops the session there,
instead of dozens of cascading errors. A
server process that dies during a test (SIGILL, SIGSEGV ...) fails that test at its
teardown with the postmaster's own log line, and the next test waits until the server
has recovered, so one crash is one failure.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from memvault.config import StorageSettings
from pg_server import BrokenServerError, TemporaryPostgres, server_bin

_names = itertools.count(1)
# The session's server once started (read by the crash check after each test).
_running: list[TemporaryPostgres] = []


@pytest.fixture(scope="session")
def pg(request: pytest.FixtureRequest) -> Iterator[TemporaryPostgres]:
    """The session's PostgreSQL server on a free loopback port, deleted at the end."""
    bindir = server_bin()
    if bindir is None:
        reason = "no PostgreSQL server: run `make install` (it builds one into .venv/pg)"
        if os.environ.get("CI"):  # CI installs it (make install): its absence is a failure
            pytest.fail(reason)
        pytest.skip(reason)
    server = TemporaryPostgres(bindir)
    broken: str | None = None
    try:
        server.start()
    except BrokenServerError as error:
        server.stop()
        broken = str(error)
    if broken is not None:
        # The first test that asked fails with the sentence; the session (every xdist
        # worker too) stops after it, as --maxfail would.
        request.session.shouldstop = "the test PostgreSQL is broken (the error above says how)"
        pytest.fail(broken, pytrace=False)
    _running.append(server)
    try:
        yield server
    finally:
        _running.remove(server)
        server.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """After each test: a server process that died meanwhile fails the test with the
    postmaster's line, once the server accepts connections again."""
    report: pytest.TestReport = yield
    if call.when != "teardown" or not _running:
        return report
    server = _running[0]
    crashes = server.crashes()
    if crashes:
        server.recover()
        report.outcome = "failed"
        report.longrepr = (
            f"A PostgreSQL server process died during {item.nodeid}: the server log says "
            f"'{crashes[0]}' (the server has recovered for the next tests)."
        )
    return report


@pytest.fixture
def database(pg: TemporaryPostgres) -> Iterator[str]:
    """The DSN of a new, empty database of its own (dropped after the test)."""
    name = f"test_{next(_names)}"
    yield pg.create_database(name)
    pg.drop_database(name)


@pytest.fixture(scope="session")
def migrated_template(pg: TemporaryPostgres) -> str:
    """A database memvault has migrated, copied for each test that needs one (fast)."""
    from memvault.storage.postgres import PostgresStorage

    dsn = pg.create_database("memvault_template")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMVAULT_TEMPLATE_DSN", dsn)
        PostgresStorage.open(
            StorageSettings(backend="postgres", dsn_env="MEMVAULT_TEMPLATE_DSN")
        ).close()
    return "memvault_template"


@pytest.fixture
def migrated(pg: TemporaryPostgres, migrated_template: str) -> Iterator[str]:
    """The DSN of a new database with memvault's schema in place (dropped after the
    test: a session makes hundreds, 8 MB each)."""
    name = f"test_{next(_names)}"
    yield pg.create_database(name, template=migrated_template)
    pg.drop_database(name)
