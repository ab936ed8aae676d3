"""Input no parser or database can take answers one sentence, never a 500: integers beyond
a database id in the path or the query, and JSON bodies nested deeper than the daemon
reads, on every route that parses a body (LINE's signed webhook, the API, MCP)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx2 as httpx
import pytest

from gateway_support import Live, StartDaemon, failed, ok
from line_fake import FAKE_SECRET, FAKE_TOKEN, WEBHOOK_PATH, FakeLine, user_id
from memvault.gateway.middleware import MAX_JSON_DEPTH
from waiting import WAIT, wait_for

OWNER = user_id(1)
TOO_BIG = [str(2**63), "99999999999999999999999", "9" * 5000]


def nested(depth: int, inner: str = "1") -> bytes:
    """A JSON array nested ``depth`` levels deep around ``inner``."""
    return ("[" * depth + inner + "]" * depth).encode()


def deep_object(depth: int, **fields: str) -> bytes:
    """A JSON object whose ``deep`` field nests ``depth`` levels below it (a ``\\u`` escape
    in a field makes the daemon read the body for text it cannot keep, too)."""
    head = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in fields.items())
    return b"{" + head.encode() + b', "deep": ' + nested(depth - 1) + b"}"


@pytest.fixture
def served(start_daemon: StartDaemon) -> Live:
    return start_daemon(background=False)


def integer_path_operations(live: Live) -> list[tuple[str, str]]:
    """(method, template) of every operation with an integer in its path."""
    with live.client() as api:
        spec = api.get("/openapi.json").json()
    found = []
    for template, entries in spec["paths"].items():
        for method, operation in entries.items():
            kinds = [
                p["schema"].get("type")
                for p in operation.get("parameters", [])
                if p["in"] == "path"
            ]
            if "integer" in kinds:
                found.append((method.upper(), template))
    return found


def test_no_integer_in_a_path_is_a_server_error(served: Live) -> None:
    operations = integer_path_operations(served)
    assert ("GET", "/v1/jobs/runs/{run_id}") in operations
    assert ("POST", "/v1/jobs/runs/{run_id}/undo") in operations
    with served.client() as api:
        for method, template in operations:
            for value in [*TOO_BIG, "0", "-5"]:
                path = re.sub(r"\{\w+\}", value, template)
                error = failed(api.request(method, path), 400, "validation_failed")
                assert re.fullmatch(r"\w+ must be (at most|at least) \d+\.", error["message"]) or (
                    error["message"].endswith(" is too large a number.")
                ), error
        # The largest id a row can have is a plain miss.
        failed(api.get(f"/v1/jobs/runs/{2**63 - 1}"), 404, "not_found")
        failed(api.post(f"/v1/jobs/runs/{2**63 - 1}/undo"), 404, "not_found")


def test_event_cursors_beyond_any_id_are_one_sentence(served: Live) -> None:
    with served.client() as api:
        for value in TOO_BIG:
            failed(api.get("/v1/poll", params={"since": value}), 400, "validation_failed")
            failed(api.get("/v1/events", params={"since": value}), 400, "validation_failed")
        ok(api.get("/v1/poll", params={"since": 2**63 - 1}))


@pytest.fixture
def line(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLine]:
    with FakeLine() as fake:
        fake.add_user(OWNER, "Ada")
        monkeypatch.setenv("LINE_CHANNEL_SECRET", FAKE_SECRET)
        monkeypatch.setenv("LINE_CHANNEL_ACCESS_TOKEN", FAKE_TOKEN)
        yield fake


def test_a_signed_line_webhook_nested_too_deep_is_refused_and_nothing_stored(
    start_daemon: StartDaemon, line: FakeLine
) -> None:
    section = {
        "enabled": True,
        "owner": [OWNER],
        "api_base": line.api_base,
        "data_api_base": line.data_api_base,
    }
    live = start_daemon(settings={"channels": {"line": section}})
    status = live.daemon.hub.statuses["line"]
    wait_for(lambda: status.state == "running", "the LINE channel running")
    event = line.text_event(OWNER, "Kept despite the deep one")
    deep = json.dumps({"destination": "x", "events": [event]}).encode()
    deep = deep[:-1] + b', "extra": ' + nested(5000) + b"}"
    error = failed(line.post(live.url + WEBHOOK_PATH, body=deep), 400, "invalid_json")
    assert f"deeper than {MAX_JSON_DEPTH} levels" in error["message"]
    rows = live.daemon.state.query("SELECT id FROM channel_inbox WHERE channel = 'line'")
    assert rows == []
    # The daemon goes on: LINE's ordinary webhook is taken.
    assert line.post(live.url + WEBHOOK_PATH, event).status_code == 200
    rows = live.daemon.state.query("SELECT id FROM channel_inbox WHERE channel = 'line'")
    assert len(rows) == 1


def test_a_body_nested_too_deep_is_invalid_json_on_every_route(served: Live) -> None:
    deep = deep_object(5000, text="caf\\u00e9 deep")
    with served.client() as api:
        for method, path in [
            ("POST", "/v1/memories"),
            ("POST", "/v1/sessions/deep/messages"),
            ("POST", "/v1/jobs/daily_note/run"),  # a route that takes no body reads it too
            ("POST", "/v1/tools/memory_search"),
            ("PUT", "/v1/notes/Deep.md"),
            ("POST", "/mcp"),
        ]:
            answer = api.request(
                method,
                path,
                content=deep,
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
            )
            error = failed(answer, 400, "invalid_json")
            assert error["message"] == (
                f"The request body nests deeper than {MAX_JSON_DEPTH} levels."
            ), (method, path)
        assert ok(api.get("/v1/memories")) == []
        assert ok(api.get("/v1/sessions")) == []
        assert not (served.vault / "Deep.md").exists()
        assert ok(api.get("/v1/jobs/runs")) == []


def test_the_depth_bound_counts_structure_not_text(served: Live) -> None:
    with served.client() as api:
        # As deep as allowed: taken (the body is the first level, metadata the second).
        metadata = json.loads(nested(MAX_JSON_DEPTH - 2))
        logged = ok(
            api.post("/v1/sessions/deep/messages", json={"text": "hi", "metadata": {"m": metadata}})
        )
        assert logged["message"]["metadata"] == {"m": metadata}
        # Brackets inside strings (escaped quotes too) are text, not nesting.
        text = 'Brackets "\\" [ {' + "[" * 500 + "{" * 500
        stored = ok(api.post("/v1/memories", json={"text": text}))
        assert stored["text"] == text
        # One level more is refused.
        body = json.dumps({"text": "hi", "metadata": {"m": [metadata]}})
        failed(
            api.post(
                "/v1/sessions/deep/messages",
                content=body,
                headers={"Content-Type": "application/json"},
            ),
            400,
            "invalid_json",
        )


def test_a_deep_body_sent_in_pieces_is_refused_too(served: Live) -> None:
    def pieces() -> Iterator[bytes]:
        body = deep_object(5000, text="in pieces")
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    with httpx.Client(base_url=served.url, timeout=WAIT) as api:
        answer = api.post(
            "/v1/memories",
            content=pieces(),
            headers={
                "Authorization": f"Bearer {served.daemon.token}",
                "Content-Type": "application/json",
            },
        )
    error = failed(answer, 400, "invalid_json")
    assert f"deeper than {MAX_JSON_DEPTH} levels" in error["message"]
