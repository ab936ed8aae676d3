"""Forgetting what the running daemon stored (issue 11, item 1), on every surface.

The daemon is a real process on the wall clock, so a memory's moment has
microseconds that its line does not keep; HTTP, the CLI in client mode and
the ``forget`` tool must all find and remove the line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_support import ok_json
from daemon_process import DaemonProcess
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import WAIT

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    running = DaemonProcess(root)
    yield running
    running.stop()


def _events(daemon: DaemonProcess, kind: str) -> list[dict[str, Any]]:
    with daemon.client() as api:
        found = api.get("/v1/poll").json()["result"]["events"]
    return [e["payload"] for e in found if e["type"] == kind]


def test_what_the_daemon_stored_is_forgotten_over_http_cli_and_tool(
    daemon: DaemonProcess,
) -> None:
    approval = (daemon.vault / ".memvault/approval-token").read_text().strip()
    facts = daemon.vault / "Memory/Facts.md"
    with daemon.client() as api:
        for surface in ("http", "cli", "tool"):
            for n in range(3):  # stored back to back, then each forgotten at once
                response = api.post(
                    "/v1/memories", json={"text": f"Forget me through {surface}, number {n}"}
                )
                assert response.status_code == 200, response.text
                stored = response.json()["result"]
                assert api.get(f"/v1/memories/{stored['id']}").json()["result"] == {
                    k: v for k, v in stored.items() if k not in ("created_new", "consolidation")
                }
                if surface == "http":
                    response = api.delete(f"/v1/memories/{stored['id']}")
                    assert response.status_code == 200, response.text
                elif surface == "cli":
                    assert ok_json(daemon.vault, "forget", stored["id"])["forgotten"] is True
                else:
                    response = api.post(
                        "/v1/tools/forget",
                        json={"id": stored["id"]},
                        headers={"X-Memvault-Approval": approval},
                    )
                    assert response.status_code == 200, response.text
                assert f"^{stored['id']}" not in facts.read_text()
                assert api.get(f"/v1/memories/{stored['id']}").status_code == 404
        assert api.get("/v1/memories").json()["result"] == []
    forgotten = _events(daemon, "memory_forgotten")
    assert len(forgotten) == 9, "the CLI went through the daemon too"
