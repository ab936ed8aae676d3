"""``memvault runs list | show`` (the agent runs record) and ``memvault memory edit``: on
the files in this process, and through a daemon (``/v1/runs``, ``PATCH /v1/memories/{id}``)
with the same answers and the same mistakes."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest

from cli_support import EXIT_CONFLICT, EXIT_NOT_FOUND, fail, invoke, ok, ok_json
from gateway_support import StartDaemon
from memvault.config import load_settings
from memvault.memory.runs import RunRecord
from memvault.runtime import Runtime
from memvault.vault.store import Vault
from support import HashEmbedder
from waiting import WAIT

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound

TEA = "I prefer green tea in the morning, never coffee"


def _record_runs(root: Path) -> tuple[int, int]:
    """Two runs as the agent keeps them: an older one from the CLI with its context, a
    recalled memory and a tool call; a newer one from Telegram that failed."""
    runtime = Runtime.open(load_settings(root).settings, embedder=HashEmbedder())
    try:
        now = runtime.clock.now()
        asked = runtime.runs.record(
            RunRecord(
                started_at=now - timedelta(minutes=5),
                surface="cli",
                command="Tea or coffee in the morning?",
                summary="Green tea, never coffee.",
                model="fake-model",
                input_tokens=640,
                output_tokens=19,
                iterations=2,
                context={
                    "budget_tokens": 2000,
                    "tokens": 310,
                    "notice": None,
                    "sections": [
                        {
                            "title": "Relevant to: Tea or coffee in the morning?",
                            "shown": [f"- {TEA}"],
                            "left_out": ["- The kettle is descaled monthly"],
                            "left_out_count": 1,
                        }
                    ],
                },
                recalled=[
                    {
                        "id": "m-0000beef",
                        "path": "Memory/Preferences.md",
                        "score": 0.8125,
                        "vector_score": 0.5,
                        "text_score": 0.9,
                        "line": f"- {TEA}",
                        "shown": True,
                    }
                ],
                tool_calls=[
                    {
                        "name": "recall",
                        "arguments": '{"topic": "tea"}',
                        "ok": True,
                        "code": None,
                        "result": "1 memory",
                    }
                ],
            )
        )
        failed = runtime.runs.record(
            RunRecord(
                started_at=now,
                surface="channel",
                channel="telegram",
                sender="Ada",
                command="And in the evening?",
                status="failed",
                error="The model did not answer.",
            )
        )
    finally:
        runtime.close()
    assert asked is not None and failed is not None
    return asked, failed


def test_runs_list_and_show_what_a_run_was_given(vault: Vault) -> None:
    asked, failed = _record_runs(vault.root)
    listed = ok_json(vault.root, "runs", "list")
    assert [r["id"] for r in listed] == [failed, asked]
    assert "context" not in listed[0]
    assert [r["id"] for r in ok_json(vault.root, "runs", "list", "--channel", "telegram")] == [
        failed
    ]
    assert [r["id"] for r in ok_json(vault.root, "runs", "list", "-n", "1")] == [failed]

    table = ok(vault.root, "runs", "list").stdout
    assert "2 agent runs" in table
    assert "channel · telegram · Ada" in table and "The model did not answer." in table

    shown = ok(vault.root, "runs", "show", str(asked)).stdout.splitlines()
    assert shown[0].startswith(f"Run {asked}: done, ") and shown[0].endswith("from cli.")
    assert "Model: fake-model (640 in, 19 out; 2 steps)" in shown
    assert "Context: 310 of 2000 tokens." in shown
    assert "## Relevant to: Tea or coffee in the morning?" in shown
    assert f"  - {TEA}" in shown
    assert "  (left out for the budget: 1 line)" in shown
    assert "  - - The kettle is descaled monthly" in shown
    assert any("m-0000beef" in line and "0.812" in line for line in shown)
    assert "Tool call recall: ok" in shown
    detail = ok_json(vault.root, "runs", "show", str(asked))
    assert detail["recalled"][0]["score"] == 0.8125
    assert detail["tool_calls"][0]["name"] == "recall"

    missing = fail(vault.root, "runs", "show", "999", code=EXIT_NOT_FOUND)
    assert missing == "Error: There is no agent run 999 (or it is older than kept)."


def test_memory_edit_changes_the_text_and_refuses_over_a_note_changed_since(
    vault: Vault,
) -> None:
    stored = ok_json(vault.root, "remember", "The boat is moored at pier 6")
    edited = ok_json(vault.root, "memory", "edit", stored["id"], "--text", "At pier 7 now")
    assert (edited["id"], edited["text"]) == (stored["id"], "At pier 7 now")
    said = ok(vault.root, "memory", "edit", stored["id"], "--text", "At pier 8 now").stdout
    assert said == f"Edited {stored['id']} in {stored['path']}: At pier 8 now\n"

    read = ok_json(vault.root, "note", "read", stored["path"])["hash"]
    note = vault.root / stored["path"]
    obsidian = note.read_text(encoding="utf-8").replace("pier 8", "pier 9")
    note.write_text(obsidian, encoding="utf-8")  # edited in Obsidian meanwhile
    refused = fail(
        vault.root,
        "memory",
        "edit",
        stored["id"],
        "--text",
        "At pier 10",
        "--expect",
        read,
        code=EXIT_CONFLICT,
    )
    assert refused == f"Error: {stored['path']} changed since it was read; nothing was written."
    assert note.read_text(encoding="utf-8") == obsidian
    current = ok_json(vault.root, "note", "read", stored["path"])["hash"]
    ok(vault.root, "memory", "edit", stored["id"], "--text", "At pier 10", "--expect", current)
    assert ok_json(vault.root, "get", stored["id"])["text"] == "At pier 10"
    history = ok_json(vault.root, "memory", "history", stored["id"])
    assert [c["action"] for c in history] == ["update", "update", "update"]
    fail(vault.root, "memory", "edit", "m-00000000", "--text", "x", code=EXIT_NOT_FOUND)


def test_through_a_daemon_the_answers_and_mistakes_are_the_same(
    vault: Vault, start_daemon: StartDaemon, caplog: pytest.LogCaptureFixture
) -> None:
    root = vault.root
    asked, _ = _record_runs(root)
    stored = ok_json(root, "remember", "The gate code is 4711")
    start_daemon(root)
    caplog.set_level(logging.INFO, logger="memvault.gateway.access")
    for args in (
        ("runs", "list"),
        ("runs", "list", "--json"),
        ("runs", "list", "--channel", "telegram", "--json"),
        ("runs", "show", str(asked)),
        ("runs", "show", str(asked), "--json"),
        ("runs", "show", "999"),
        ("memory", "edit", "m-00000000", "--text", "x"),
        ("memory", "edit", stored["id"], "--text", "y", "--expect", "0" * 64),
    ):
        direct = invoke(root, "--direct", *args)
        served = invoke(root, *args)
        assert (served.exit_code, served.stdout, served.stderr) == (
            direct.exit_code,
            direct.stdout,
            direct.stderr,
        ), args
    edited = ok_json(root, "memory", "edit", stored["id"], "--text", "The gate code is 1147")
    assert edited["text"] == "The gate code is 1147"
    asked_paths = [
        (vars(r)["method"], vars(r)["path"]) for r in caplog.records if "path" in vars(r)
    ]
    assert ("GET", "/v1/runs") in asked_paths
    assert ("GET", f"/v1/runs/{asked}") in asked_paths
    assert ("PATCH", f"/v1/memories/{stored['id']}") in asked_paths
