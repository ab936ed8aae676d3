"""``PATCH /v1/memories/{id}``: the owner's change to a memory over the API, the service the
console's edit and bulk actions use. A new text needs the hash of the memory's note as read
(``GET /v1/notes/{path}``): a note changed since is a 409 and nothing is written."""

from __future__ import annotations

from gateway_support import StartDaemon, failed, ok
from memvault.gateway.tokens import Scope


def test_edit_move_and_tag_a_memory_with_the_notes_hash(start_daemon: StartDaemon) -> None:
    live = start_daemon()
    with live.client() as api:
        memory = ok(api.post("/v1/memories", json={"text": "The gate code is 4711"}))
        note = ok(api.get(f"/v1/notes/{memory['path']}"))
        changed = ok(
            api.patch(
                f"/v1/memories/{memory['id']}",
                json={
                    "text": "The gate code is 1147",
                    "expected_hash": note["hash"],
                    "category": "context",
                    "add_tags": ["#home"],
                },
            )
        )
        assert (changed["id"], changed["text"], changed["category"], changed["tags"]) == (
            memory["id"],
            "The gate code is 1147",
            "context",
            ["home"],
        )
        history = ok(api.get(f"/v1/memories/{memory['id']}/history"))
        assert [(c["action"], c["decided_by"]) for c in history] == [
            ("update", "owner"),
            ("recategorize", "owner"),
            ("tag", "owner"),
        ]


def test_an_edit_over_a_note_changed_since_is_refused_and_nothing_changes(
    start_daemon: StartDaemon,
) -> None:
    live = start_daemon()
    with live.client() as api:
        memory = ok(api.post("/v1/memories", json={"text": "The boat is moored at pier 6"}))
        read = ok(api.get(f"/v1/notes/{memory['path']}"))["hash"]
        note = live.vault / memory["path"]
        obsidian = note.read_text(encoding="utf-8").replace("pier 6", "pier 9")
        note.write_text(obsidian, encoding="utf-8")  # edited in Obsidian meanwhile
        refused = failed(
            api.patch(
                f"/v1/memories/{memory['id']}",
                json={"text": "The boat is moored at pier 7", "expected_hash": read},
            ),
            409,
            "conflict",
        )
        assert "nothing was written" in refused["message"]
        assert note.read_text(encoding="utf-8") == obsidian
        # Without a hash, or with a bad part, nothing is written either: one sentence.
        unhashed = failed(
            api.patch(f"/v1/memories/{memory['id']}", json={"text": "pier 7"}),
            400,
            "validation_failed",
        )
        assert "expected_hash" in unhashed["message"]
        current = ok(api.get(f"/v1/notes/{memory['path']}"))["hash"]
        bad = failed(
            api.patch(
                f"/v1/memories/{memory['id']}",
                json={"text": "pier 7", "expected_hash": current, "category": "nope"},
            ),
            400,
            "validation_failed",
        )
        assert "Unknown memory category" in bad["message"]
        assert note.read_text(encoding="utf-8") == obsidian
        assert failed(
            api.patch("/v1/memories/m-00000000", json={"add_tags": ["x"]}), 404, "not_found"
        )
        empty = failed(api.patch(f"/v1/memories/{memory['id']}", json={}), 400, "validation_failed")
        assert empty["message"].startswith("Name a change")
    _, secret = live.daemon.tokens.create("viewer", [Scope.READ])
    with live.client(secret) as viewer:
        read_only = viewer.patch(f"/v1/memories/{memory['id']}", json={"add_tags": ["x"]})
        assert read_only.status_code == 403
    assert note.read_text(encoding="utf-8") == obsidian
