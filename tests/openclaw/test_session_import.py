"""OpenClaw's past conversations brought over: an OpenClaw state folder as OpenClaw keeps it
(the per-agent SQLite database, a long entry zstd-compressed, and an older install's JSONL
transcripts), imported through the real CLI into sessions and conversation memories, dated,
attributed, and once only."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import zstandard

from cli_support import EXIT_NOT_FOUND, fail, ok, ok_json, snapshot
from memvault.config import Settings
from memvault.runtime import Runtime
from memvault.vault.store import Vault

# The columns memvault reads, as OpenClaw's agent schema (23) declares them.
AGENT_SCHEMA = """
CREATE TABLE session_nodes (
  session_key TEXT NOT NULL PRIMARY KEY,
  current_session_id TEXT NOT NULL,
  entry_json TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  created_at INTEGER,
  label TEXT,
  display_name TEXT
);
CREATE TABLE transcript_events (
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event_json TEXT,
  created_at INTEGER NOT NULL,
  event_zstd BLOB,
  event_utf8_bytes INTEGER,
  navigation_json TEXT,
  PRIMARY KEY (session_id, seq)
);
"""
ADA = "555001"
LONG = "The itinerary, day by day: " + " ".join(
    f"day {n} we walk from village {n} to village {n + 1} along the coast." for n in range(1, 40)
)


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def message(entry_id: str, role: str, content: Any, at: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": None,
        "timestamp": f"{at}Z",
        "message": {"role": role, "content": content, "timestamp": ms(at)},
    }


def add_session(
    conn: sqlite3.Connection, key: str, session_id: str, entries: list[dict[str, Any]], **names: str
) -> None:
    conn.execute(
        "INSERT INTO session_nodes (session_key, current_session_id, entry_json, updated_at, "
        "created_at, display_name) VALUES (?, ?, '{}', 0, 0, ?)",
        (key, session_id, names.get("display", "")),
    )
    for seq, entry in enumerate(entries, start=1):
        raw = json.dumps(entry)
        at = ms(entry["timestamp"][:-1]) if "timestamp" in entry else 0
        if len(raw) > 1024:  # as OpenClaw stores a long entry: a zstd frame
            packed = zstandard.ZstdCompressor().compress(raw.encode())
            conn.execute(
                "INSERT INTO transcript_events (session_id, seq, event_json, created_at, "
                "event_zstd, event_utf8_bytes, navigation_json) VALUES (?, ?, NULL, ?, ?, ?, '{}')",
                (session_id, seq, at, packed, len(raw.encode())),
            )
        else:
            conn.execute(
                "INSERT INTO transcript_events (session_id, seq, event_json, created_at) "
                "VALUES (?, ?, ?, ?)",
                (session_id, seq, raw, at),
            )


@pytest.fixture
def openclaw_home(tmp_path: Path) -> Path:
    """~/.openclaw with its workspace, one agent's database and an older JSONL transcript."""
    home = tmp_path / ".openclaw"
    (home / "workspace").mkdir(parents=True)
    (home / "workspace/MEMORY.md").write_text("# Memory\n\n## Facts\n- The boat is Halcyon\n")
    agent = home / "agents/main"
    (agent / "agent").mkdir(parents=True)
    conn = sqlite3.connect(agent / "agent/openclaw-agent.sqlite")
    conn.executescript(AGENT_SCHEMA)
    add_session(
        conn,
        "agent:main:main",
        "s-main",
        [
            {"type": "session", "version": 4, "id": "s-main", "timestamp": "2026-03-02T09:00:00Z"},
            message("e1", "user", "Plan a hiking trip in Madeira for April", "2026-03-02T09:00:05"),
            message(
                "e2",
                "assistant",
                [{"type": "thinking", "thinking": "..."}, {"type": "text", "text": LONG}],
                "2026-03-02T09:00:30",
            ),
            message(
                "e3",
                "assistant",
                [{"type": "toolCall", "id": "t1", "name": "web_search", "arguments": {}}],
                "2026-03-02T09:00:31",
            ),
            {"type": "model_change", "id": "e4", "provider": "openai", "modelId": "x"},
        ],
    )
    add_session(
        conn,
        f"agent:main:telegram:direct:{ADA}",
        "s-ada",
        [
            message(
                "a1", "user", "Can you tell Sam the ferry leaves at 7:40?", "2026-03-05T18:10:00"
            ),
            message("a2", "assistant", "I will let Sam know.", "2026-03-05T18:10:20"),
        ],
        display="Ada",
    )
    conn.commit()
    conn.close()
    sessions = agent / "sessions"
    sessions.mkdir()
    (sessions / "sessions.json").write_text(
        json.dumps({"agent:main:old-chat": {"sessionId": "old-1", "updatedAt": 0}})
    )
    lines = [
        {"type": "session", "version": 3, "id": "old-1", "timestamp": "2025-12-01T20:00:00Z"},
        message(
            "o1", "user", "Remind me that the piano tuner comes in January", "2025-12-01T20:00:01"
        ),
        message("o2", "assistant", "Noted: piano tuner in January.", "2025-12-01T20:00:09"),
    ]
    (sessions / "old-1.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    return home


def conversation_memories(root: Path) -> list[dict[str, Any]]:
    return list(ok_json(root, "memories", "--category", "conversation"))


def test_past_conversations_become_sessions_and_memories_once(
    vault: Vault, openclaw_home: Path
) -> None:
    root = vault.root
    runtime = Runtime.open(Settings(vault=root, timezone="Europe/Berlin"))
    runtime.contacts.create("Ada Lovelace", identities={"telegram": ADA})
    runtime.close()
    before = snapshot(root)
    preview = ok_json(root, "import", "sessions", openclaw_home, "--dry-run")
    assert preview["items"] == {"sessions": 3, "conversation turns": 6}
    assert snapshot(root) == before, "a dry run writes nothing"

    report = ok_json(root, "import", "sessions", openclaw_home)
    assert (report["imported"], report["skipped"]) == (6, 0)
    assert report["problems"] == [
        f"{openclaw_home}/agents/main/sessions/old-1.jsonl line 4: not JSON, skipped."
    ]
    said = conversation_memories(root)

    def by_text(start: str) -> dict[str, Any]:
        return next(m for m in said if m["text"].split(": ", 1)[1].startswith(start))

    assert len(said) >= 6  # the long answer is kept whole, in consecutive parts
    # Dated when said, attributed: the owner's own session, Ada's chat, the old install's.
    plan = by_text("Plan a hiking trip in Madeira for April")
    assert plan["text"].startswith("the owner: ")
    assert datetime.fromisoformat(plan["created"]) == datetime(2026, 3, 2, 9, 0, 5, tzinfo=UTC)
    assert plan["source"] == "openclaw:agent:main:main" and plan["trust"] is None
    long_parts = [m for m in said if "village" in m["text"]]
    assert " ".join(m["text"].removeprefix("OpenClaw: ") for m in long_parts) == LONG
    ferry = by_text("Can you tell Sam the ferry leaves at 7:40")
    assert ferry["text"].startswith("Ada: ") and ferry["trust"] == "low"
    theirs = runtime_memory(root, ferry["id"])
    assert theirs.fields["share"] == "Contacts/Ada Lovelace"
    assert theirs.fields["contact"] == "Contacts/Ada Lovelace"
    assert by_text("Remind me that the piano tuner")["created"].startswith("2025-12-01")
    # Tool calls, thinking and model changes are not turns.
    assert not [m for m in said if "web_search" in m["text"] or m["text"][-3:] == "..."]
    # Sessions of their own, ended at their last message.
    runtime = Runtime.open(Settings(vault=root, timezone="Europe/Berlin"))
    sessions = runtime.sessions.list(channel="openclaw")
    runtime.close()
    imported = {s.key: s for s in sessions}
    assert set(imported) == {
        "openclaw:agent:main:main",
        f"openclaw:agent:main:telegram:direct:{ADA}",
        "openclaw:agent:main:old-chat",
    }
    assert all(not s.active for s in imported.values())
    assert imported["openclaw:agent:main:main"].message_count == 2
    # Found by search.
    hits = ok_json(root, "search", "ferry to Sam")
    assert ferry["id"] in [hit["id"] for hit in hits]

    # Again: nothing new; a message added since is the only one brought over.
    again = ok_json(root, "import", "sessions", openclaw_home)
    assert (again["imported"], again["skipped"]) == (0, 6)
    conn = sqlite3.connect(openclaw_home / "agents/main/agent/openclaw-agent.sqlite")
    conn.execute(
        "INSERT INTO transcript_events (session_id, seq, event_json, created_at) VALUES "
        "('s-ada', 3, ?, 0)",
        (json.dumps(message("a3", "user", "Thanks!", "2026-03-06T08:00:00")),),
    )
    conn.commit()
    conn.close()
    third = ok_json(root, "import", "sessions", openclaw_home)
    assert (third["imported"], third["skipped"]) == (1, 6)
    assert len(conversation_memories(root)) == len(said) + 1


def runtime_memory(root: Path, memory_id: str) -> Any:
    runtime = Runtime.open(Settings(vault=root, timezone="Europe/Berlin"))
    try:
        return runtime.memories.get(memory_id)
    finally:
        runtime.close()


def test_the_workspace_import_brings_the_conversations_too(
    vault: Vault, openclaw_home: Path
) -> None:
    report = ok_json(vault.root, "import", "openclaw", openclaw_home / "workspace")
    kinds = [part["kind"] for part in report["parts"]]
    assert kinds == ["memory-md", "sessions"]
    assert report["items"]["conversation turns"] == 6
    shown = ok(vault.root, "import", "openclaw", openclaw_home, "--dry-run").stdout
    assert "Would import nothing; would skip 7 already imported." in shown


def test_a_folder_without_openclaw_says_so(vault: Vault, tmp_path: Path) -> None:
    said = fail(vault.root, "import", "sessions", tmp_path, code=EXIT_NOT_FOUND)
    assert "holds no agents/ folder" in said


def test_a_damaged_compressed_entry_is_one_problem_and_the_rest_is_imported(
    vault: Vault, openclaw_home: Path
) -> None:
    conn = sqlite3.connect(openclaw_home / "agents/main/agent/openclaw-agent.sqlite")
    for seq, packed in (
        (3, b"\x28\xb5\x2f\xfd" + b"not a zstd frame"),  # zstd's magic number, then garbage
        (4, zstandard.ZstdCompressor().compress(b'{"type": "message"}' * 100)[:-8]),  # cut short
    ):
        conn.execute(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at, event_zstd, "
            "event_utf8_bytes, navigation_json) VALUES ('s-ada', ?, NULL, 0, ?, 1900, '{}')",
            (seq, packed),
        )
    conn.commit()
    conn.close()
    report = ok_json(vault.root, "import", "sessions", openclaw_home)
    assert report["imported"] == 6
    damaged = [p for p in report["problems"] if "could not be read" in p]
    assert [p.split(": could not")[0].rsplit(" ", 2)[1:] for p in damaged] == [
        ["entry", "3"],
        ["entry", "4"],
    ]
