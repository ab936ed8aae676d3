"""``memvault privacy scan``: secrets already in the vault are listed (never shown), replaced
by markers only when the owner says so, and put back by ``memvault privacy undo`` unless a
file was edited since."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import EXIT_CONFLICT, fail, invoke, ok, ok_json, snapshot
from gateway_support import StartDaemon
from memvault.clock import Clock
from memvault.privacy.scanning import redact_found, scan_vault
from memvault.vault.layout import init_vault
from memvault.vault.memories import Memories
from memvault.vault.store import Vault
from waiting import wait_for

AWS = "AKIAIOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2bC4"
PASSWORD = "Blue-Fish-42"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"

SERVER = f"# Server\n\nThe backup key is {AWS}.\nRouter password: {PASSWORD}\n"
FACT = f"- The CI token is {GITHUB} [importance:: 0.5] ^m-0000c1c1\n"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A vault with secrets typed by hand: a note and a memory."""
    root = tmp_path / "vault"
    init_vault(Vault(root))
    (root / "Server.md").write_text(SERVER)
    with (root / "Memory" / "Facts.md").open("a") as facts:
        facts.write(FACT)
    (root / "Plain.md").write_text("# Plain\n\nNothing to hide; see [[Server]] on 2026-11-22.\n")
    return root


def test_scan_lists_where_and_what_never_the_secret(vault: Path) -> None:
    before = snapshot(vault)
    found = ok_json(vault, "privacy", "scan")["found"]
    facts_line = (vault / "Memory" / "Facts.md").read_text().splitlines().index(FACT.strip()) + 1
    assert found == [
        {
            "path": "Memory/Facts.md",
            "line": facts_line,
            "kind": "GitHub token",
            "preview": "ghp_… (40 characters)",
            "memory": "m-0000c1c1",
        },
        {
            "path": "Server.md",
            "line": 3,
            "kind": "AWS key",
            "preview": "AKIA… (20 characters)",
            "memory": None,
        },
        {
            "path": "Server.md",
            "line": 4,
            "kind": "password",
            "preview": "… (12 characters)",
            "memory": None,
        },
    ]
    shown = ok(vault, "privacy", "scan")
    assert "3 secrets in 2 files" in shown.stdout
    assert "privacy scan --redact" in shown.stdout
    for secret in (AWS, GITHUB, PASSWORD):
        assert secret not in shown.stdout + shown.stderr
    assert snapshot(vault) == before  # a scan changes nothing


def test_redact_asks_first_then_replaces_and_undo_puts_it_back(vault: Path) -> None:
    ok(vault, "index")
    before = snapshot(vault)
    declined = invoke(vault, "privacy", "scan", "--redact", stdin="n\n")
    assert declined.exit_code == 1
    assert "Replace 3 secrets in 2 files by markers" in declined.stderr
    assert snapshot(vault) == before

    done = ok(vault, "privacy", "scan", "--redact", stdin="y\n")
    assert "Replaced 3 secrets in 2 files; `memvault privacy undo 1` puts them back." in done.stdout
    assert (vault / "Server.md").read_text() == (
        "# Server\n\nThe backup key is [secret removed: AWS key].\n"
        "Router password: [secret removed: password]\n"
    )
    assert (
        "The CI token is [secret removed: GitHub token]"
        in (vault / "Memory" / "Facts.md").read_text()
    )
    assert ok_json(vault, "privacy", "scan")["found"] == []
    # The index followed: the key is no longer found, the marker is.
    assert ok_json(vault, "search", AWS, "--keyword") == []
    history = ok_json(vault, "jobs", "history")
    assert history[0]["job"] == "privacy_redact" and history[0]["status"] == "ok"

    undone = ok(vault, "privacy", "undo")
    assert undone.stdout.strip() == "Redaction 1 undone: restored Memory/Facts.md, Server.md."
    assert (vault / "Server.md").read_text() == SERVER
    assert FACT in (vault / "Memory" / "Facts.md").read_text()
    error = fail(vault, "privacy", "undo", code=EXIT_CONFLICT)
    assert error == "Error: Every redaction was undone already; there is nothing to undo."


def test_undo_is_refused_after_a_hand_edit(vault: Path) -> None:
    ok(vault, "privacy", "scan", "--redact", "--yes")
    edited = (vault / "Server.md").read_text() + "Rotated on Monday.\n"
    (vault / "Server.md").write_text(edited)
    error = fail(vault, "privacy", "undo", "1", code=EXIT_CONFLICT)
    assert "Server.md was edited after run 1" in error
    assert (vault / "Server.md").read_text() == edited  # the edit is kept
    assert "[secret removed: GitHub token]" in (vault / "Memory" / "Facts.md").read_text()


def test_undo_names_a_run_that_is_no_redaction(vault: Path) -> None:
    ok(vault, "jobs", "run", "daily_note")
    error = fail(vault, "privacy", "undo", "1", code=2)
    assert error == (
        "Error: Run 1 is a run of daily_note, not a redaction; `memvault jobs undo 1` undoes it."
    )


def test_only_what_was_listed_is_replaced(vault: Path, clock: Clock) -> None:
    store = Vault(vault)
    memories = Memories(store, clock)
    listed = [f for f in scan_vault(store, memories) if f.path == "Server.md"]
    # A secret typed after the scan is not the owner's answer to it: it stays.
    (vault / "Server.md").write_text(SERVER + f"Stripe: {STRIPE}\n")
    kept: list[str] = []
    changed = redact_found(store, listed, kept.append)
    assert changed == [("Server.md", 2)] and kept == ["Server.md"]
    text = (vault / "Server.md").read_text()
    assert AWS not in text and PASSWORD not in text and STRIPE in text
    # One edited away since is left to the edit: nothing to do, nothing kept for undo.
    assert redact_found(store, listed, kept.append) == [] and kept == ["Server.md"]


def test_scan_and_redact_while_a_daemon_serves_the_vault(
    vault: Path, start_daemon: StartDaemon
) -> None:
    live = start_daemon(vault)
    wait_for(live.daemon.watching.is_set, "the watcher")

    def hits(query: str) -> list[object]:
        with live.client() as api:
            response = api.get("/v1/search", params={"q": query, "keyword": True})
            assert response.status_code == 200, response.text
            return list(response.json()["result"])

    wait_for(lambda: hits(AWS), "the daemon to index the note")
    found = ok_json(vault, "privacy", "scan")["found"]
    assert len(found) == 3
    report = json.loads(ok(vault, "privacy", "scan", "--redact", "--yes", "--json").stdout)
    assert report["run_id"] == 1 and {r["path"] for r in report["redacted"]} == {
        "Server.md",
        "Memory/Facts.md",
    }
    wait_for(lambda: not hits(AWS), "the key to leave the daemon's index")
    ok(vault, "privacy", "undo", "1")
    assert (vault / "Server.md").read_text() == SERVER
