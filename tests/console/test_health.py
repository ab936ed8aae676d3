"""Today's health report: only the first visit waits for the doctor; a stale report is
shown while the next one is made beside the page."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from memvault.config import load_settings
from memvault.console.views import Health
from memvault.gateway.daemon import Daemon
from memvault.gateway.doctor import Check, Report
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import HashEmbedder


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    runtime = Runtime.open(load_settings(root).settings, embedder=HashEmbedder())
    daemon = Daemon(runtime, host="127.0.0.1", port=0, background=False)
    yield daemon
    daemon.stop()


def _embedder_check(report: Report) -> Check:
    return next(c for c in report.checks if c.name == "embedder")


def test_a_stale_report_is_shown_while_the_next_is_made(daemon: Daemon) -> None:
    health = Health(daemon, every=0.0)
    try:
        first = health.report()
        assert _embedder_check(first).status == "ok"
        daemon.embedder_error = "the model file is gone"
        # Stale at once (every=0): this visit gets the kept report, a refresh starts.
        assert health.report() is first
        health.wait()
        fresh = health.report()
        assert fresh is not first
        check = _embedder_check(fresh)
        assert (check.status, check.message) == ("error", "the model file is gone")
    finally:
        health.wait()


def test_a_fresh_report_is_kept(daemon: Daemon) -> None:
    health = Health(daemon, every=3600.0)
    first = health.report()
    daemon.embedder_error = "the model file is gone"
    health.wait()
    assert health.report() is first
