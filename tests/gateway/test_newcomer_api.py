"""Issue 11 items 17 and 18 where a daemon serves the vault: one duplicate rule on every
surface (HTTP 409, the tools' ``conflict``), and ``--direct`` after the command name."""

from __future__ import annotations

from typing import Any

from cli_support import EXIT_CONFLICT, fail, ok_json
from gateway_support import Live, failed, ok
from memvault.runtime import Runtime
from memvault.tools import default_registry
from memvault.tools.policy import AllowAll, Policy
from memvault.tools.registry import ToolContext


def test_a_duplicate_task_is_409_with_the_sentence_the_cli_prints(live: Live) -> None:
    with live.client() as api:
        ok(api.post("/v1/tasks", json={"title": "Renew the TLS certificate"}))
        error = failed(
            api.post("/v1/tasks", json={"title": "renew the tls certificate"}), 409, "conflict"
        )
        assert error["message"] == (
            "A task named 'renew the tls certificate' already exists "
            "(Tasks/active/Renew the TLS certificate.md); change it with "
            "`memvault task update` or choose another title."
        )
        assert [t["title"] for t in ok(api.get("/v1/tasks"))] == ["Renew the TLS certificate"]
    cli = fail(
        live.vault, "--direct", "task", "add", "renew the tls certificate", code=EXIT_CONFLICT
    )
    assert cli == f"Error: {error['message']}"


def test_duplicates_are_conflicts_for_the_tools(runtime: Runtime) -> None:
    registry = default_registry()
    context = ToolContext(runtime=runtime, policy=Policy(approver=AllowAll(), mode="ask"))

    def call(tool: str, arguments: dict[str, Any]) -> Any:
        return registry.call(tool, arguments, context)

    assert call("task_create", {"title": "Water the plants"}).ok
    assert call("contact_create", {"name": "Ada Lovelace", "identities": {"telegram": "123456"}}).ok
    for name, arguments, words in (
        ("task_create", {"title": "Water the plants"}, "A task named 'Water the plants'"),
        ("contact_create", {"name": "Ada Lovelace"}, "A contact named 'Ada Lovelace'"),
        (
            "contact_create",
            {"name": "Charles", "identities": {"telegram": "123456"}},
            "telegram 123456 already belongs to Ada Lovelace",
        ),
    ):
        result = call(name, arguments)
        assert not result.ok and result.code == "conflict", result
        assert result.error is not None and words in result.error
    assert sorted(p.name for p in (runtime.vault.root / "Tasks/active").iterdir()) == [
        "Water the plants.md"
    ]
    assert sorted(p.name for p in (runtime.vault.root / "Contacts").iterdir()) == [
        "Ada Lovelace.md"
    ]


def stored_events(live: Live) -> list[str]:
    with live.client() as api:
        events = ok(api.get("/v1/poll"))["events"]
    return [e["payload"]["id"] for e in events if e["type"] == "memory_stored"]


def test_direct_after_the_command_name_bypasses_the_daemon(live: Live) -> None:
    through = ok_json(live.vault, "remember", "Stored by the daemon")
    assert stored_events(live) == [through["id"]]
    ok_json(live.vault, "remember", "Stored in this process", "--direct")
    assert stored_events(live) == [through["id"]], "--direct after the command used the daemon"
    assert ok_json(live.vault, "doctor")["checked_by"] == "daemon"
    assert ok_json(live.vault, "doctor", "--direct")["checked_by"] == "local"
    assert ok_json(live.vault, "--direct", "doctor")["checked_by"] == "local"
