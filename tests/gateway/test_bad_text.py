"""Text no file or index can hold: refused at the edge, and contained when already in a vault.

Issue 11 item 2: one ``"project": "a\\ud800b"`` used to write a task note, answer
500 and then break every index run, search, task list and context of the vault.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest

from cli_support import EXIT_INVALID, invoke, ok, ok_json, snapshot
from gateway_support import Live, StartDaemon, failed
from gateway_support import ok as answer
from memvault.errors import InvalidInputError, UnsafePathError
from memvault.runtime import Runtime
from memvault.tools import ToolContext, default_registry
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import WAIT

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound

JSON = {"Content-Type": "application/json"}
REGISTRY = default_registry()

# Every route that takes a body or a parameter, with a value JSON (or a URL) can carry
# but no file can keep; raw bytes, because a client library would refuse to send them.
REFUSED = [
    ("POST", "/v1/tasks", b'{"title": "Plan", "project": "a\\ud800b"}', "project"),
    ("POST", "/v1/tasks", b'{"title": "Plan", "steps": ["ok", "\\udc80"]}', "steps"),
    ("POST", "/v1/memories", b'{"text": "a\\ud800b"}', "text"),
    ("POST", "/v1/memories", b'{"text": "nul \\u0000 inside"}', "text"),
    ("POST", "/v1/memories", b'{"text": "ok", "tags": ["\\u001b[31m"]}', "tags"),
    ("POST", "/v1/memories", b'{"text": "ok", "\\ud800": 1}', "A field name"),
    ("PUT", "/v1/notes/Plan.md", b'{"content": "# Plan\\n\\ud83d"}', "content"),
    ("POST", "/v1/notes/Plan.md", b'{"content": "more \\udfff"}', "content"),
    ("PATCH", "/v1/tasks/Seed", b'{"note": "\\ud800"}', "note"),
    ("POST", "/v1/tools/remember", b'{"text": "a\\ud800b"}', "text"),
    ("POST", "/v1/tools/task_create", b'{"title": "T", "project": "\\ud800"}', "project"),
    ("POST", "/v1/sessions/telegram:1/messages", b'{"text": "hi \\ud800"}', "text"),
    ("POST", "/v1/sessions/telegram:1/messages", b'{"text": "hi", "metadata": {"k": "\\ud800"}}',
     "metadata"),
    ("POST", "/v1/sessions/telegram:1/end", b'{"summary": "\\ud800"}', "summary"),
    ("POST", "/v1/agent/run", b'{"command": "\\ud800"}', "command"),
    ("POST", "/api/telemetry",
     b'{"samples": [{"id": "\\ud800", "lat": 1, "lon": 2, "timestamp": 1}]}', "samples"),
    ("POST", "/v1/memories", b'["\\ud800"]', "The request body"),
    ("GET", "/v1/search?q=a%00b", None, "q"),
    ("GET", "/v1/tasks?project=a%01b", None, "project"),
    ("GET", "/v1/context?query=%1b", None, "query"),
    ("GET", "/v1/memories/m-%00", None, "memory_id"),
    ("DELETE", "/v1/notes/a%00.md", None, "path"),
]  # fmt: skip


def test_bad_text_is_refused_with_400_and_nothing_is_written(live: Live, api: httpx.Client) -> None:
    answer(api.post("/v1/tasks", json={"title": "Seed"}))
    before = snapshot(live.vault)
    for method, url, body, field in REFUSED:
        response = api.request(method, url, content=body, headers=JSON if body else None)
        error = failed(response, 400, "validation_failed")
        assert error["message"].startswith(
            f"{field} contains a character that is not valid text ("
        ), (
            url,
            error,
        )
    assert snapshot(live.vault) == before
    assert [t["title"] for t in answer(api.get("/v1/tasks"))] == ["Seed"]
    assert answer(api.get("/v1/sessions")) == []


def test_what_the_message_names(live: Live, api: httpx.Client) -> None:
    body = b'{"title": "Plan", "project": "a\\ud800b"}'
    error = failed(api.post("/v1/tasks", content=body, headers=JSON), 400, "validation_failed")
    assert error["message"] == (
        "project contains a character that is not valid text (a lone surrogate U+D800)."
    )
    body = b'{"text": "bell \\u0007"}'
    error = failed(api.post("/v1/memories", content=body, headers=JSON), 400, "validation_failed")
    assert error["message"] == (
        "text contains a character that is not valid text (the control character U+0007)."
    )
    # Tabs and line breaks are text; so is every character UTF-8 can encode.
    fine = answer(api.post("/v1/memories", json={"text": "Tab\there, ümlaut and 🚀 emoji"}))
    assert fine["text"] == "Tab here, ümlaut and 🚀 emoji"
    # Bytes that are not UTF-8 never become text: the body is not JSON.
    raw = b'{"text": "caf\xe9"}'
    failed(api.post("/v1/memories", content=raw, headers=JSON), 400, "invalid_json")


def test_tool_calls_refuse_bad_text_on_every_surface(runtime: Runtime) -> None:
    """The registry checks the arguments itself, so MCP and the agent loop get it too."""
    before = snapshot(runtime.vault.root)
    context = ToolContext(runtime=runtime, surface="mcp")
    result = REGISTRY.call("remember", {"text": "a\ud800b"}, context)
    assert not result.ok and result.code == "validation_failed"
    assert (
        result.error
        == "text contains a character that is not valid text (a lone surrogate U+D800)."
    )
    result = REGISTRY.call("task_create", {"title": "x", "tags": ["\x00"]}, context)
    assert not result.ok and result.error is not None and result.error.startswith("tags contains")
    assert snapshot(runtime.vault.root) == before


def test_the_services_refuse_it_too(runtime: Runtime) -> None:
    """The last guard, for callers that bypass the edges (the agent loop, a future channel)."""
    before = snapshot(runtime.vault.root)
    with pytest.raises(InvalidInputError, match=r"^project contains a character"):
        runtime.tasks.create("Plan", project="a\ud800b")
    with pytest.raises(InvalidInputError, match=r"^text contains a character"):
        runtime.memories.remember("a\ud800b")
    with pytest.raises(InvalidInputError, match=r"^tags contains a character"):
        runtime.memories.remember("fine", tags=["\x01"])
    with pytest.raises(UnsafePathError, match="lone surrogate"):
        runtime.notes.read("a\ud800.md")
    with pytest.raises(InvalidInputError, match=r"^query contains a character"):
        runtime.context.build_result("boat \ud800")
    assert snapshot(runtime.vault.root) == before


# -- a vault that already holds bad files ---------------------------------------------------


def seed_bad_files(root: Path) -> list[str]:
    """A vault with good notes and, next to them, every kind of bad file; the bad paths."""
    init_vault(Vault(root))
    assert ok(root, "--direct", "remember", "The boat is called Halcyon", "-c", "fact")
    assert ok(root, "--direct", "remember", "Prefers tea over coffee", "-c", "preference")
    assert ok(root, "--direct", "task", "add", "Renew the certificate", "--priority", "high")
    assert ok(root, "--direct", "contact", "add", "Ada Lovelace", "--id", "telegram=42")

    def put(relpath: str, data: bytes) -> None:
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_bytes(data)

    facts = (root / "Memory/Facts.md").read_bytes()
    put("Memory/Facts.md", facts + b"- A bad \xff line about the harbour ^m-deadbeef\n")
    put("Notes/Latin-1.md", b"# Latin-1\n\nCaf\xe9 au lait by the harbour\n")
    put("Notes/CESU.md", b"# CESU\n\nA surrogate \xed\xa0\x80 written as bytes, harbour\n")
    put("Notes/Binary.md", os.urandom(4096) + b"\x00harbour")
    put("Notes/Zeros.md", b"harbour" + b"\x00" * 4096)
    put("Notes/Huge.md", b"harbour " * (17 * 1024 * 1024 // 8))
    put(
        "Tasks/active/Bad project.md",
        b'---\nstatus: todo\npriority: high\nproject: "[[a\\uD800b]]"\n---\n# Bad project\n',
    )
    put("Contacts/Bad bytes.md", b"---\nname: Bad \xff\nidentifiers:\n  telegram: '7'\n---\n")
    put("Contacts/Escaped.md", b'---\nname: "\\uDFFF"\naliases: ["\\uD800"]\n---\n# Escaped\n')
    put("Journal/2026-11-22.md", b"# 2026-11-22\n\n## Actions Taken\n\n- 10:00 - bad \xff\n")
    put("Current Status.md", b"# Current Status\n\n\xff\xfe\n")
    put("Notes/Good.md", b"# Good\n\nThe harbour master is called Jon.\n")
    # A name that is not UTF-8 (a Latin-1 file system, an old archive): left out unseen.
    put(os.fsdecode(b"Notes/Caf\xe9 harbour.md"), b"# Cafe\n\nharbour\n")
    return [
        "Contacts/Bad bytes.md",
        "Current Status.md",
        "Journal/2026-11-22.md",
        "Memory/Facts.md",
        "Notes/Binary.md",
        "Notes/CESU.md",
        "Notes/Huge.md",
        "Notes/Latin-1.md",
        "Notes/Zeros.md",
    ]


def test_a_vault_with_bad_files_keeps_working_through_the_daemon(
    tmp_path: Path, start_daemon: StartDaemon
) -> None:
    root = tmp_path / "vault"
    bad = seed_bad_files(root)
    running = start_daemon(root, background=False)
    with running.client() as api:
        titles = {t["title"] for t in answer(api.get("/v1/tasks"))}
        assert titles == {"Bad project", "Renew the certificate"}
        assert {m["text"] for m in answer(api.get("/v1/memories"))} == {"Prefers tea over coffee"}
        hits = answer(api.get("/v1/search", params={"q": "harbour master", "keyword": "true"}))
        assert [h["path"] for h in hits][:1] == ["Notes/Good.md"]
        assert not set(bad) & {h["path"] for h in hits}
        context = answer(api.get("/v1/context", params={"query": "harbour"}))
        assert "Renew the certificate" in context["markdown"]
        assert "Prefers tea over coffee" in context["markdown"]
        doctor = answer(api.get("/v1/doctor"))
        checks = {c["name"]: c for c in doctor["checks"]}
        assert checks["unreadable_notes"]["status"] == "warning"
        assert sorted(checks["unreadable_notes"]["details"]["files"]) == bad
        assert "9 files named .md cannot be read as notes" in checks["unreadable_notes"]["message"]
        # Writing still works, and a task read back from a bad note says what is wrong.
        answer(api.post("/v1/tasks", json={"title": "Fix the CESU note"}))
        answer(
            api.post(
                "/v1/memories", json={"text": "Jon is the harbour master", "category": "person"}
            )
        )
        # The bad file itself is not added to: said in one sentence, nothing written.
        before = (root / "Memory/Facts.md").read_bytes()
        error = failed(api.post("/v1/memories", json={"text": "Jon"}), 400, "validation_failed")
        assert error["message"] == "Memory/Facts.md is not UTF-8 text and cannot be read as a note."
        assert (root / "Memory/Facts.md").read_bytes() == before
        approved = {"X-Memvault-Approval": running.daemon.approval_token}
        created = api.post(
            "/v1/tools/contact_create", json={"name": "Grace Hopper"}, headers=approved
        )
        assert answer(created)["result"]["name"] == "Grace Hopper"
        failed(api.get("/v1/notes/Notes/Latin-1.md"), 400, "validation_failed")
        latin = (root / "Notes/Latin-1.md").read_bytes()
        appended = api.post("/v1/notes/Notes/Latin-1.md", json={"content": "more"})
        assert "is not UTF-8 text" in failed(appended, 400, "validation_failed")["message"]
        assert (root / "Notes/Latin-1.md").read_bytes() == latin
        listed = {n["path"] for n in answer(api.get("/v1/notes", params={"folder": "Notes"}))}
        assert "Notes/Good.md" in listed and not any("Caf" in p for p in listed)


def test_a_vault_with_bad_files_keeps_working_on_the_command_line(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    bad = seed_bad_files(root)
    built = ok_json(root, "--direct", "index", "--rebuild", "--no-embed")
    assert sorted(built["sync"]["skipped"]) == bad
    assert "skipped 9 unreadable" in ok(root, "--direct", "index", "--rebuild").stdout
    hits = ok_json(root, "--direct", "search", "harbour master", "--keyword")
    assert hits[0]["path"] == "Notes/Good.md"
    tasks = ok_json(root, "--direct", "task", "list")
    assert {t["title"] for t in tasks} == {"Bad project", "Renew the certificate"}
    assert [c["name"] for c in ok_json(root, "--direct", "contact", "list")] == [
        "Ada Lovelace",
        "Escaped",
    ]
    assert len(ok_json(root, "--direct", "memories")) == 1
    assert "Renew the certificate" in ok(root, "--direct", "context", "-q", "boat").stdout
    assert ok_json(root, "--direct", "status")["counts"]["memories"] == 1
    listed = {n["path"] for n in ok_json(root, "--direct", "note", "list")}
    assert "Notes/Latin-1.md" in listed and not any("Caf" in p for p in listed)
    doctor = invoke(root, "--direct", "doctor", "--json")
    assert doctor.exit_code == 0, doctor.output
    assert "unreadable_notes" in doctor.stdout


# -- the command line ------------------------------------------------------------------------


def test_a_terminal_byte_that_is_not_utf8_is_refused_by_the_cli(tmp_path: Path) -> None:
    """A real process, bytes in argv: Python hands them over as lone surrogates."""
    root = tmp_path / "vault"
    init_vault(Vault(root))
    before = snapshot(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env |= {"MEMVAULT_EMBEDDER__PROVIDER": "none", "MEMVAULT_CLI__AUTOSTART": "false"}
    env["LC_ALL"] = "C.UTF-8"
    for args, name, byte in (
        ([b"remember", b"caf\xe9"], "The argument TEXT", "E9"),
        ([b"task", b"add", b"Plan", b"--project", b"a\xffb"], "The option --project", "FF"),
        ([b"note", b"append", b"Plan\xc3.md", b"--content", b"x"], "The argument PATH", "C3"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "memvault", b"--vault", os.fsencode(root), *args],
            env=env,
            capture_output=True,
            timeout=WAIT,
        )
        assert done.returncode == EXIT_INVALID, done.stderr
        assert done.stdout == b""
        lines = done.stderr.decode().strip().splitlines()
        assert lines == [
            f"Error: {name} contains a character that is not valid text "
            f"(the byte 0x{byte}, which is not UTF-8)."
        ], lines
    assert snapshot(root) == before


def test_text_on_stdin_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    before = snapshot(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env |= {"MEMVAULT_EMBEDDER__PROVIDER": "none", "MEMVAULT_CLI__AUTOSTART": "false"}
    for locale in ("C.UTF-8", "C"):
        done = subprocess.run(
            [sys.executable, "-m", "memvault", "--vault", str(root), "note", "write", "x.md"],
            env={**env, "LC_ALL": locale},
            input=b"# x\n\ncaf\xe9\n",
            capture_output=True,
            timeout=WAIT,
        )
        assert done.returncode == EXIT_INVALID, done.stderr
        assert done.stderr.decode().startswith("Error: The text on stdin "), done.stderr
    assert snapshot(root) == before
