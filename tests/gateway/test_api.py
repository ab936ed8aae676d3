"""The daemon's /v1 routes on a live server: success and error paths, token and Origin rules."""

from __future__ import annotations

import os
import stat

import httpx2 as httpx
import pytest

from cli_support import snapshot
from gateway_support import Live, failed, ok
from support import HIT_KEYS
from waiting import WAIT

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound


# -- security ------------------------------------------------------------------------------


def test_token_file_is_created_owner_only(live: Live) -> None:
    token = live.vault / ".memvault" / "token"
    assert token.read_text().strip() == live.daemon.token and len(live.daemon.token) >= 40
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    approval = live.vault / ".memvault" / "approval-token"
    assert stat.S_IMODE(approval.stat().st_mode) == 0o600
    assert approval.read_text().strip() != live.daemon.token


def test_health_needs_no_token_and_everything_else_does(live: Live) -> None:
    with live.client(token=None) as anonymous:
        health = ok(anonymous.get("/v1/health"))
        assert health["status"] == "ok" and health["version"] and health["uptime_seconds"] >= 0
        for method, path in (
            ("GET", "/v1/doctor"),
            ("GET", "/v1/memories/search?q=x"),
            ("POST", "/v1/memories"),
            ("GET", "/v1/poll"),
            ("GET", "/openapi.json"),
            ("POST", "/mcp"),
            ("GET", "/v1/nowhere"),
        ):
            response = anonymous.request(method, path)
            error = failed(response, 401, "unauthorized")
            assert "Authorization: Bearer" in error["message"]
            assert response.headers["www-authenticate"].startswith("Bearer")
    with live.client(token="not-the-token") as wrong:
        failed(wrong.get("/v1/poll"), 401, "unauthorized")
    with live.client(token=None, Authorization=f"Basic {live.daemon.token}") as basic:
        failed(basic.get("/v1/poll"), 401, "unauthorized")


def test_writes_with_an_origin_header_are_refused(live: Live, api: httpx.Client) -> None:
    before = snapshot(live.vault)
    for method, path in (
        ("POST", "/v1/memories"),
        ("PUT", "/v1/notes/Home.md"),
        ("DELETE", "/v1/memories/m-00000000"),
        ("POST", "/api/telemetry"),
    ):
        response = api.request(
            method, path, json={"text": "x"}, headers={"Origin": "http://example.com"}
        )
        failed(response, 403, "browser_origin_rejected")
    assert snapshot(live.vault) == before
    # Reads with an Origin, and writes with an empty one, are allowed.
    ok(api.get("/v1/health", headers={"Origin": "http://example.com"}))
    ok(api.post("/v1/memories", json={"text": "An empty origin is fine"}, headers={"Origin": ""}))


def test_oversized_bodies_are_refused(start_daemon) -> None:  # type: ignore[no-untyped-def]
    live = start_daemon(settings={"server": {"max_body_mb": 0.01}})
    limit = int(0.01 * 1024 * 1024)
    with live.client() as api:
        before = snapshot(live.vault)
        big = {"text": "x" * (limit + 10)}
        error = failed(api.post("/v1/memories", json=big), 413, "payload_too_large")
        assert error["details"] == {"limit_bytes": limit}

        def chunks():  # type: ignore[no-untyped-def]
            # Streamed without a Content-Length: the limit holds while the body is read.
            yield b'{"text": "'
            for _ in range(20):
                yield b"y" * 1000
            yield b'"}'

        streamed = api.post(
            "/v1/memories", content=chunks(), headers={"Content-Type": "application/json"}
        )
        failed(streamed, 413, "payload_too_large")
        assert snapshot(live.vault) == before
        ok(api.post("/v1/memories", json={"text": "A small memory still fits"}))


def test_framework_errors_use_the_envelope(api: httpx.Client) -> None:
    failed(api.get("/v1/nowhere"), 404, "not_found")
    failed(api.get("/nowhere/at/all"), 404, "not_found")
    error = failed(api.put("/v1/health"), 405, "method_not_allowed")
    assert error["retriable"] is False
    bad = api.post(
        "/v1/memories", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    failed(bad, 400, "invalid_json")
    error = failed(api.post("/v1/memories", json={"txt": "typo"}), 400, "validation_failed")
    assert {p["field"] for p in error["details"]} == {"text", "txt"}
    assert "text" in error["message"]
    error = failed(api.get("/v1/poll?since=-1"), 400, "validation_failed")
    assert error["details"][0]["field"] == "since"


def test_openapi_spec_is_served_and_complete(api: httpx.Client) -> None:
    spec = api.get("/openapi.json").json()
    assert spec["info"]["title"] == "memvault"
    paths = spec["paths"]
    for path, method in (
        ("/v1/health", "get"),
        ("/v1/doctor", "get"),
        ("/v1/memories", "post"),
        ("/v1/memories/search", "get"),
        ("/v1/memories/{memory_id}", "delete"),
        ("/v1/search", "get"),
        ("/v1/context", "get"),
        ("/v1/notes/{path}", "put"),
        ("/v1/tasks/{ref}", "patch"),
        ("/v1/tools/{name}", "post"),
        ("/v1/sessions/{key}/messages", "post"),
        ("/v1/poll", "get"),
        ("/v1/events", "get"),
        ("/api/telemetry", "post"),
    ):
        assert method in paths[path], (path, method)
    remember = paths["/v1/memories"]["post"]["responses"]
    assert {"200", "400", "401", "413"} <= set(remember)
    assert "/mcp" not in paths
    # No interactive docs: nothing served to a browser.
    assert api.get("/docs").status_code == 404


# -- memories, search, context -------------------------------------------------------------


def test_remember_get_search_forget(live: Live, api: httpx.Client) -> None:
    stored = ok(
        api.post(
            "/v1/memories",
            json={
                "text": "The owner's boat is called Halcyon",
                "category": "fact",
                "importance": 0.8,
                "tags": ["boat"],
                "source": "telegram:42",
            },
        )
    )
    assert stored["created_new"] is True and stored["path"] == "Memory/Facts.md"
    assert stored["tags"] == ["boat"] and stored["source"] == "telegram:42"
    line = f"^{stored['id']}"
    assert line in (live.vault / "Memory/Facts.md").read_text()

    again = ok(api.post("/v1/memories", json={"text": "The owner's boat is called Halcyon"}))
    assert again["created_new"] is False and again["id"] == stored["id"]

    got = ok(api.get(f"/v1/memories/{stored['id']}"))
    assert got == {k: v for k, v in stored.items() if k not in ("created_new", "consolidation")}
    assert stored["consolidation"]["action"] == "add"
    assert again["consolidation"]["action"] == "noop"

    hits = ok(api.get("/v1/memories/search", params={"q": "what is the boat called"}))
    assert hits[0]["id"] == stored["id"] and set(hits[0]) == HIT_KEYS
    everything = ok(api.get("/v1/search", params={"q": "Halcyon", "kind": "memory", "limit": 3}))
    assert [h["id"] for h in everything] == [stored["id"]]
    listed = ok(api.get("/v1/memories", params={"category": "fact"}))
    assert [m["id"] for m in listed] == [stored["id"]]
    # Nothing relevant is an empty answer; min_score 0 still lists the closest match.
    unrelated = {"q": "pizza toppings with olives, not the boat", "kind": "memory"}
    assert ok(api.get("/v1/search", params=unrelated)) == []
    closest = ok(api.get("/v1/search", params={**unrelated, "min_score": 0}))
    assert [h["id"] for h in closest] == [stored["id"]] and closest[0]["score"] < 0.3

    forgotten = ok(api.delete(f"/v1/memories/{stored['id']}"))
    assert forgotten["forgotten"] is True and forgotten["id"] == stored["id"]
    assert line not in (live.vault / "Memory/Facts.md").read_text()
    failed(api.get(f"/v1/memories/{stored['id']}"), 404, "not_found")
    failed(api.delete(f"/v1/memories/{stored['id']}"), 404, "not_found")
    assert ok(api.get("/v1/memories/search", params={"q": "Halcyon"})) == []


def test_memory_errors_change_nothing(live: Live, api: httpx.Client) -> None:
    before = snapshot(live.vault)
    error = failed(
        api.post("/v1/memories", json={"text": "x", "category": "gossip"}), 400, "validation_failed"
    )
    assert "gossip" in error["message"]
    failed(api.post("/v1/memories", json={"text": "x", "importance": 2}), 400, "validation_failed")
    failed(api.post("/v1/memories", json={"text": ""}), 400, "validation_failed")
    failed(api.get("/v1/memories/search", params={"q": ""}), 400, "validation_failed")
    failed(api.get("/v1/search", params={"q": "x", "kind": "planet"}), 400, "validation_failed")
    failed(api.get("/v1/search", params={"q": "x", "since": "soon"}), 400, "validation_failed")
    failed(api.get("/v1/search", params={"q": "x", "min_score": -1}), 400, "validation_failed")
    failed(api.get("/v1/context", params={"budget": 10}), 400, "validation_failed")
    assert snapshot(live.vault) == before


def test_search_filters_and_context(api: httpx.Client) -> None:
    ok(api.post("/v1/memories", json={"text": "Prefers tea over coffee", "category": "preference"}))
    ok(api.put("/v1/notes/Projects/Tea.md", json={"content": "# Tea\n\nA note about tea.\n"}))
    projects = ok(api.get("/v1/search", params={"q": "tea", "kind": "project"}))
    assert projects[0]["path"] == "Projects/Tea.md"
    assert {h["kind"] for h in projects} == {"project"}
    memories = ok(api.get("/v1/search", params={"q": "tea", "category": "preference"}))
    assert [h["kind"] for h in memories] == ["memory"]
    keyword = ok(api.get("/v1/search", params={"q": "tea", "keyword": True, "folder": "Projects"}))
    assert [h["path"] for h in keyword] == ["Projects/Tea.md"]

    context = ok(api.get("/v1/context", params={"query": "what to drink", "budget": 400}))
    assert "Prefers tea over coffee" in context["markdown"]
    assert context["budget_tokens"] == 400 and context["tokens"] <= 400
    assert {s["title"] for s in context["sections"]} >= {"Pinned memories"}


# -- notes and tasks -----------------------------------------------------------------------


def test_notes_read_write_append_list_delete(live: Live, api: httpx.Client) -> None:
    written = ok(api.put("/v1/notes/Projects/Apollo", json={"content": "# Apollo\n\nGo.\n"}))
    assert written == {"path": "Projects/Apollo.md"}
    ok(api.post("/v1/notes/Projects/Apollo.md", json={"content": "- launched"}))
    note = ok(api.get("/v1/notes/Projects/Apollo.md"))
    assert note["title"] == "Apollo" and note["content"].endswith("- launched\n")
    listed = ok(api.get("/v1/notes", params={"folder": "Projects"}))
    assert [e["path"] for e in listed] == ["Projects/Apollo.md"]

    error = failed(
        api.put("/v1/notes/Projects/Apollo.md", json={"content": "x", "overwrite": False}),
        409,
        "conflict",
    )
    assert "Apollo" in error["message"]
    failed(api.put("/v1/notes/../escape.md", json={"content": "x"}), 404, "not_found")
    failed(api.put("/v1/notes/%2E%2E/escape.md", json={"content": "x"}), 400, "unsafe_path")
    assert not (live.vault.parent / "escape.md").exists()
    failed(api.put("/v1/notes/Empty.md", json={"content": "  "}), 400, "validation_failed")
    failed(api.get("/v1/notes/Projects/Nothing.md"), 404, "not_found")

    ok(api.delete("/v1/notes/Projects/Apollo.md"))
    assert not (live.vault / "Projects/Apollo.md").exists()
    failed(api.delete("/v1/notes/Projects/Apollo.md"), 404, "not_found")


def test_tasks_create_update_complete_list(live: Live, api: httpx.Client) -> None:
    task = ok(
        api.post(
            "/v1/tasks",
            json={"title": "Renew the TLS certificate", "priority": "high", "steps": ["certbot"]},
        )
    )
    assert (
        task["path"] == "Tasks/active/Renew the TLS certificate.md" and task["priority"] == "high"
    )
    updated = ok(
        api.patch(
            "/v1/tasks/renew the tls",
            json={"priority": "urgent", "due": "2026-12-01", "note": "asked ops", "tags": ["ops"]},
        )
    )
    assert updated["priority"] == "urgent" and updated["due"] == "2026-12-01"
    assert updated["tags"] == ["ops"] and "asked ops" in updated["notes"]
    listed = ok(api.get("/v1/tasks"))
    assert [t["title"] for t in listed] == ["Renew the TLS certificate"]
    done = ok(api.post("/v1/tasks/Renew the TLS certificate/complete"))
    assert done["status"] == "done" and done["path"].startswith("Tasks/completed/")
    assert ok(api.get("/v1/tasks")) == []
    assert len(ok(api.get("/v1/tasks", params={"include_closed": True}))) == 1
    reopened = ok(api.patch("/v1/tasks/Renew the TLS certificate", json={"status": "todo"}))
    assert reopened["path"].startswith("Tasks/active/")

    before = snapshot(live.vault)
    failed(api.post("/v1/tasks", json={"title": "x", "priority": "asap"}), 400, "validation_failed")
    failed(api.patch("/v1/tasks/Renew", json={}), 400, "validation_failed")
    failed(api.patch("/v1/tasks/Renew", json={"status": "sleeping"}), 400, "validation_failed")
    failed(api.patch("/v1/tasks/No such task", json={"priority": "low"}), 404, "not_found")
    failed(api.post("/v1/tasks/No such task/complete"), 404, "not_found")
    assert snapshot(live.vault) == before


# -- tools ---------------------------------------------------------------------------------


def test_tools_listing_and_tier_policy(live: Live, api: httpx.Client) -> None:
    tools = {t["name"]: t for t in ok(api.get("/v1/tools"))}
    assert len(tools) == 35
    assert tools["vault_delete"]["tier"] == 3 and tools["vault_write"]["tier"] == 2
    assert tools["memory_search"]["annotations"]["read_only"] is True
    assert "query" in tools["memory_search"]["input_schema"]["properties"]

    found = ok(api.post("/v1/tools/vault_list", json={"folder": "Templates"}))
    assert found["tool"] == "vault_list"

    before = snapshot(live.vault)
    error = failed(
        api.post("/v1/tools/vault_write", json={"path": "Notes/x.md", "content": "hi"}),
        403,
        "approval_required",
    )
    assert "X-Memvault-Approval" in error["message"]
    failed(
        api.post(
            "/v1/tools/vault_delete",
            json={"path": "Home.md"},
            headers={"X-Memvault-Approval": "guess"},
        ),
        403,
        "approval_required",
    )
    assert snapshot(live.vault) == before

    approval = {"X-Memvault-Approval": live.daemon.approval_token}
    ok(
        api.post(
            "/v1/tools/vault_write", json={"path": "Notes/x.md", "content": "hi"}, headers=approval
        )
    )
    assert (live.vault / "Notes/x.md").read_text() == "hi\n"
    ok(api.post("/v1/tools/vault_delete", json={"path": "Notes/x.md"}, headers=approval))
    assert not (live.vault / "Notes/x.md").exists()

    error = failed(api.post("/v1/tools/vault_serch", json={}), 404, "not_found")
    assert "vault_search" in error["message"]
    error = failed(api.post("/v1/tools/vault_search", json={"limit": 3}), 400, "validation_failed")
    assert "'query' is required" in error["message"]
    failed(api.post("/v1/tools/vault_read", json={"path": "Nope.md"}), 404, "not_found")


def test_autonomous_mode_runs_tier_two_but_not_tier_three(start_daemon) -> None:  # type: ignore[no-untyped-def]
    live = start_daemon(settings={"tools": {"mode": "autonomous"}})
    with live.client() as api:
        ok(api.post("/v1/tools/vault_write", json={"path": "Notes/y.md", "content": "yes"}))
        assert (live.vault / "Notes/y.md").exists()
        failed(
            api.post("/v1/tools/vault_delete", json={"path": "Notes/y.md"}),
            403,
            "approval_required",
        )
        assert (live.vault / "Notes/y.md").exists()


# -- sessions ------------------------------------------------------------------------------


def test_sessions_log_list_get_end(live: Live, api: httpx.Client) -> None:
    first = ok(
        api.post(
            "/v1/sessions/telegram:42/messages",
            json={"text": "Hi, remind me to call Ada", "sender": "Alex"},
        )
    )
    assert first["session"]["key"] == "telegram:42" and first["session"]["channel"] == "telegram"
    assert first["message"]["direction"] == "inbound" and first["message"]["role"] == "user"
    reply = ok(
        api.post(
            "/v1/sessions/telegram:42/messages",
            json={"text": "Will do.", "role": "assistant", "metadata": {"model": "x"}},
        )
    )
    assert reply["session"]["id"] == first["session"]["id"]
    assert reply["message"]["direction"] == "outbound" and reply["session"]["message_count"] == 2
    ok(api.post("/v1/sessions/cli/messages", json={"text": "local note", "channel": "terminal"}))

    listed = ok(api.get("/v1/sessions"))
    assert {s["key"] for s in listed} == {"telegram:42", "cli"}
    detail = ok(api.get("/v1/sessions/telegram:42"))
    assert [m["text"] for m in detail["messages"]] == ["Hi, remind me to call Ada", "Will do."]
    assert detail["messages"][1]["metadata"] == {"model": "x"}
    assert [
        m["text"] for m in ok(api.get("/v1/sessions/telegram:42", params={"limit": 1}))["messages"]
    ] == ["Will do."]

    ended = ok(api.post("/v1/sessions/telegram:42/end", json={"summary": "Asked for a reminder."}))
    assert ended["active"] is False and ended["summary"] == "Asked for a reminder."
    journal = (live.vault / "Journal/2026-11-22.md").read_text()
    assert "Session telegram:42 (telegram): 2 messages since" in journal
    assert [s["key"] for s in ok(api.get("/v1/sessions", params={"active": True}))] == ["cli"]
    failed(api.post("/v1/sessions/telegram:42/end"), 404, "not_found")

    # A new message after the end opens a new session under the same key.
    again = ok(api.post("/v1/sessions/telegram:42/messages", json={"text": "Back again"}))
    assert again["session"]["id"] != first["session"]["id"]
    assert again["session"]["message_count"] == 1

    failed(api.get("/v1/sessions/nobody"), 404, "not_found")
    failed(
        api.post("/v1/sessions/x/messages", json={"text": "hi", "role": "robot"}),
        400,
        "validation_failed",
    )
    failed(
        api.post("/v1/sessions/x/messages", json={"text": "hi", "channel": "Bad Channel!"}),
        400,
        "validation_failed",
    )
    failed(api.post("/v1/sessions/x/messages", json={"text": ""}), 400, "validation_failed")


# -- doctor --------------------------------------------------------------------------------


def test_doctor_reports_checks_and_503_on_error(live: Live, api: httpx.Client) -> None:
    report = ok(api.get("/v1/doctor"))
    names = {c["name"]: c for c in report["checks"]}
    assert set(names) == {
        "vault_writable",
        "index_healthy",
        "index_current",
        "unreadable_notes",
        "embedder",
        "pending_embeddings",
        "disk_space",
        "state_private",
        "token_file",
        "server_bind",
        "state_db",
        "llm",
        "jobs",
    }
    assert names["embedder"]["details"]["provider"] == "test"
    assert names["llm"]["status"] == "warning"  # no model configured: normal, but said
    assert "[llm]" in names["llm"]["message"]
    assert report["summary"]["errors"] == 0
    assert report["summary"]["total"] == len(report["checks"])

    os.chmod(live.daemon.token_path, 0o644)
    error = failed(api.get("/v1/doctor"), 503, "unhealthy")
    assert error["failed_step"] == "token_file" and error["retriable"] is True
    checks = {c["name"]: c for c in error["details"]["checks"]}
    assert checks["token_file"]["status"] == "error"
    assert "chmod 600" in checks["token_file"]["message"]


def test_a_token_left_readable_by_others_is_made_owner_only_at_start(  # type: ignore[no-untyped-def]
    start_daemon, tmp_path
) -> None:
    first = start_daemon(tmp_path / "v")
    token = first.daemon.token_path
    first.stop()
    os.chmod(token, 0o644)  # behind a private folder, loosened by hand
    start_daemon(tmp_path / "v")
    assert stat.S_IMODE(token.stat().st_mode) == 0o600


def test_a_tool_error_answers_with_its_own_status_not_500(api: httpx.Client) -> None:
    # Found by the OpenAPI fuzzer: a channel tool on a vault with no channel enabled.
    response = api.post("/v1/tools/list_channel_conversations", json={})
    error = failed(response, 400, "adapter_not_found")
    assert "channels.telegram.enabled" in error["message"]
