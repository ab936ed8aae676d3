"""Whole-note writes that cannot drop a hand edit (a sibling of issue 11, item 4).

An agent reads a note, edits it and writes it back; whatever the person
typed in between must not vanish. A read reports the note's hash; a write
that sends it back replaces the note only if it is unchanged, on HTTP (body
field or ``If-Match``), the ``vault_write`` tool and ``memvault note write
--expect``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx2 as httpx
import pytest

from cli_support import EXIT_CONFLICT, EXIT_INVALID, fail, ok_json, snapshot
from gateway_support import Live, failed, ok
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import WAIT

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound

NOTE = "Projects/Apollo.md"
HAND_LINE = "- typed by hand while the agent was thinking"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _type_by_hand(path: Path) -> None:
    with path.open("a", encoding="utf-8") as handle:  # an editor: no memvault lock
        handle.write(HAND_LINE + "\n")


def test_get_reports_the_hash_and_a_put_with_it_replaces_the_note(
    live: Live, api: httpx.Client
) -> None:
    ok(api.put(f"/v1/notes/{NOTE}", json={"content": "# Apollo\n\nStatus: planning\n"}))
    response = api.get(f"/v1/notes/{NOTE}")
    read = ok(response)
    assert read["hash"] == _sha(live.vault / NOTE)
    assert response.headers["ETag"] == f'"{read["hash"]}"'

    edited = read["content"].replace("planning", "flying")
    ok(api.put(f"/v1/notes/{NOTE}", json={"content": edited, "expected_hash": read["hash"]}))
    assert (live.vault / NOTE).read_text() == edited
    # The standard header works too, with or without the ETag's quotes.
    again = ok(api.get(f"/v1/notes/{NOTE}"))["hash"]
    ok(api.put(f"/v1/notes/{NOTE}", json={"content": "# Apollo\n"}, headers={"If-Match": again}))
    assert (live.vault / NOTE).read_text() == "# Apollo\n"


def test_a_line_typed_after_the_read_makes_the_put_a_conflict(
    live: Live, api: httpx.Client
) -> None:
    ok(api.put(f"/v1/notes/{NOTE}", json={"content": "# Apollo\n\nStatus: planning\n"}))
    read = ok(api.get(f"/v1/notes/{NOTE}"))
    _type_by_hand(live.vault / NOTE)
    before = snapshot(live.vault)

    edited = read["content"].replace("planning", "flying")
    for attempt in (
        api.put(f"/v1/notes/{NOTE}", json={"content": edited, "expected_hash": read["hash"]}),
        api.put(f"/v1/notes/{NOTE}", json={"content": edited}, headers={"If-Match": read["hash"]}),
    ):
        error = failed(attempt, 409, "conflict")
        assert error["message"].startswith(f"{NOTE} changed since it was read")
        assert error["details"]["current_hash"] == _sha(live.vault / NOTE)
    assert snapshot(live.vault) == before
    assert HAND_LINE in (live.vault / NOTE).read_text()

    # Read again, reapply: the hand-typed line stays and the edit lands.
    fresh = ok(api.get(f"/v1/notes/{NOTE}"))
    edited = fresh["content"].replace("planning", "flying")
    ok(api.put(f"/v1/notes/{NOTE}", json={"content": edited, "expected_hash": fresh["hash"]}))
    assert (live.vault / NOTE).read_text() == f"# Apollo\n\nStatus: flying\n{HAND_LINE}\n"


def test_a_deleted_note_or_a_bad_hash_writes_nothing(live: Live, api: httpx.Client) -> None:
    ok(api.put(f"/v1/notes/{NOTE}", json={"content": "# Apollo\n"}))
    read = ok(api.get(f"/v1/notes/{NOTE}"))
    (live.vault / NOTE).unlink()
    before = snapshot(live.vault)
    body = {"content": "# Apollo v2\n", "expected_hash": read["hash"]}
    error = failed(api.put(f"/v1/notes/{NOTE}", json=body), 409, "conflict")
    assert error["message"] == f"{NOTE} is gone since it was read; nothing was written."

    for bad in ({"expected_hash": "abc"}, {"expected_hash": read["hash"], "overwrite": False}):
        failed(api.put(f"/v1/notes/{NOTE}", json={"content": "x", **bad}), 400, "validation_failed")
    mismatch = api.put(
        f"/v1/notes/{NOTE}",
        json={"content": "x", "expected_hash": read["hash"]},
        headers={"If-Match": "0" * 64},
    )
    failed(mismatch, 400, "validation_failed")
    assert snapshot(live.vault) == before


def test_the_vault_tools_read_the_hash_and_refuse_a_stale_write(
    live: Live, api: httpx.Client
) -> None:
    approval = {"X-Memvault-Approval": live.daemon.approval_token}
    ok(api.put(f"/v1/notes/{NOTE}", json={"content": "# Apollo\n\nStatus: planning\n"}))
    tools = {t["name"]: t for t in ok(api.get("/v1/tools"))}
    schema = tools["vault_write"]["input_schema"]["properties"]["expected_hash"]
    assert "vault_read" in schema["description"]

    read = ok(api.post("/v1/tools/vault_read", json={"path": NOTE}))["result"]
    assert read["hash"] == _sha(live.vault / NOTE)
    _type_by_hand(live.vault / NOTE)
    before = snapshot(live.vault)
    stale = {"path": NOTE, "content": "# Apollo\n", "expected_hash": read["hash"]}
    error = failed(api.post("/v1/tools/vault_write", json=stale, headers=approval), 409, "conflict")
    assert "changed since it was read" in error["message"]
    assert snapshot(live.vault) == before

    fresh = ok(api.post("/v1/tools/vault_read", json={"path": NOTE}))["result"]
    current = {"path": NOTE, "content": fresh["content"] + "- and more\n", "hash": fresh["hash"]}
    ok(api.post("/v1/tools/vault_write", json=current, headers=approval))
    assert (live.vault / NOTE).read_text().endswith(f"{HAND_LINE}\n- and more\n")


def test_the_cli_reads_the_hash_and_writes_only_with_the_current_one(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    note = root / NOTE
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("# Apollo\n\nStatus: planning\n")

    read = ok_json(root, "note", "read", NOTE)
    assert read["hash"] == _sha(note)
    _type_by_hand(note)
    before = snapshot(root)
    message = fail(
        root,
        "note",
        "write",
        NOTE,
        "--expect",
        read["hash"],
        "-c",
        "# Apollo\n",
        code=EXIT_CONFLICT,
    )
    assert message.startswith(f"Error: {NOTE} changed since it was read")
    fail(root, "note", "write", NOTE, "--expect", "not-a-hash", "-c", "x", code=EXIT_INVALID)
    assert snapshot(root) == before

    fresh = ok_json(root, "note", "read", NOTE)
    edited = fresh["content"].replace("planning", "flying")
    written = ok_json(root, "note", "write", NOTE, "--expect", fresh["hash"], "-c", edited)
    assert written == {"path": NOTE, "written": True}
    assert note.read_text() == f"# Apollo\n\nStatus: flying\n{HAND_LINE}\n"
