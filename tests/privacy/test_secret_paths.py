"""Every way text enters storage keeps secrets out: the CLI, the HTTP API, MCP, the agent's
tools, a channel's /remember and its captured messages, consolidation, imports.

Each test greps every file of the vault, its ``.memvault`` included (index.db, state.db and
their WAL files), for the secret itself, and finds the marker where the text was stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from channel_support import OWNER, delivered, telegram_config
from cli_support import EXIT_INVALID, fail, invoke, ok, ok_json, snapshot
from gateway_support import Live, StartDaemon, failed
from gateway_support import ok as answer
from llm_fakes import FakeOpenAI, llm_settings
from mcp import Client
from memvault.config import Settings
from memvault.runtime import Runtime
from memvault.tools import default_registry
from memvault.tools.policy import AllowAll, Policy
from memvault.tools.registry import ToolContext
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from telegram_fake import FakeTelegram
from waiting import wait_for

AWS = "AKIAIOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2bC4"
SLACK = "xoxb-2048-4096-" + "q7Rt9YwE3uI5oP1aS2dF4gH6"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
PASSWORD = "Blue-Fish-42"
VISA = "4539 1488 0343 6467"
FRIEND = 777


def holders(root: Path, *secrets: str) -> list[str]:
    """Every file under the vault (hidden ones, databases and WAL files too) that holds one
    of ``secrets``, as ``path: secret``."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found.extend(
                f"{path.relative_to(root)}: {s}" for s in secrets if s.encode("utf-8") in data
            )
    return found


def notice(*kinds: str) -> str:
    if len(kinds) == 1:
        return f"A secret was removed before storing: {kinds[0]}."
    return f"Secrets were removed before storing: {', '.join(kinds)}."


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    return root


# -- the CLI ---------------------------------------------------------------------------------


def test_the_cli_stores_the_marker_and_says_so_once(vault: Path) -> None:
    stored = ok(vault, "remember", f"The backup AWS key is {AWS}")
    assert stored.stderr.strip() == notice("AWS key")
    data = ok_json(vault, "remember", f"GitHub token for CI: {GITHUB}")
    assert data["secrets_removed"] == ["GitHub token"]
    assert data["text"] == "GitHub token for CI: [secret removed: GitHub token]"
    wrote = ok(
        vault, "note", "write", "Server.md", "--content", f"# Server\n\npassword={PASSWORD}\n"
    )
    assert wrote.stderr.strip() == notice("password")
    ok(vault, "note", "append", "Server.md", "--content", f"Card on file: {VISA}")
    plain = ok(vault, "remember", "The server is in the basement")
    assert plain.stderr == ""  # nothing removed, nothing said

    assert (
        "The backup AWS key is [secret removed: AWS key]"
        in (vault / "Memory" / "Facts.md").read_text()
    )
    assert (vault / "Server.md").read_text() == (
        "# Server\n\npassword=[secret removed: password]\n"
        "Card on file: [secret removed: card number]\n"
    )
    ok(vault, "index")  # the index, as a search would build it
    hits = ok_json(vault, "search", "secret removed", "--keyword")
    assert {hit["path"] for hit in hits} >= {"Memory/Facts.md", "Server.md"}
    assert holders(vault, AWS, GITHUB, PASSWORD, VISA, VISA.replace(" ", "")) == []


def test_tasks_contacts_and_projects_keep_secrets_out(vault: Path, clock: Any) -> None:
    ok(vault, "task", "add", f"Rotate the key {AWS}", "-d", f"The old one was {GITHUB}")
    ok(vault, "contact", "add", "Clare", "--notes", f"Her wifi: password={PASSWORD}")
    ok(vault, "project", "add", "Billing", "-d", f"Stripe live key {STRIPE}")
    task = next((vault / "Tasks" / "active").glob("*.md")).read_text()
    assert "[secret removed: AWS key]" in task and "[secret removed: GitHub token]" in task
    assert "[secret removed: password]" in (vault / "Contacts" / "Clare.md").read_text()
    assert "[secret removed: Stripe key]" in (vault / "Projects" / "Billing.md").read_text()
    # An update screens what it adds and keeps what the note held (here: nothing secret).
    ok(vault, "contact", "log", "Clare", f"Sent her the card {VISA}")
    assert "[secret removed: card number]" in (vault / "Contacts" / "Clare.md").read_text()
    # The task tool tells the caller, as every tool does.
    runtime = Runtime.open(Settings(vault=vault), clock=clock)
    try:
        context = ToolContext(runtime, Policy(approver=AllowAll()), surface="mcp")
        result = default_registry().call("task_create", {"title": f"Renew token {SLACK}"}, context)
        assert result.ok and result.data["notice"] == notice("Slack token")
    finally:
        runtime.close()
    assert holders(vault, AWS, GITHUB, PASSWORD, STRIPE, SLACK, VISA, VISA.replace(" ", "")) == []


def test_refuse_stores_nothing_and_says_why(vault: Path) -> None:
    refuse = {"MEMVAULT_PRIVACY__SECRETS": "refuse"}
    ok(vault, "remember", "A first memory", env=refuse)  # state.db and the index exist
    ok(vault, "note", "write", "Server.md", "--content", "# Server\n", env=refuse)
    before = snapshot(vault)
    error = fail(vault, "remember", f"key {AWS}", code=EXIT_INVALID, env=refuse)
    assert error == "Error: Nothing was stored: the text holds a secret (AWS key)."
    fail(vault, "note", "append", "Server.md", "--content", f"pw={PASSWORD}", code=2, env=refuse)
    fail(vault, "note", "write", "New.md", "--content", f"{STRIPE}", code=2, env=refuse)
    assert snapshot(vault) == before
    assert holders(vault, AWS, PASSWORD, STRIPE) == []


def test_keep_keeps_the_text_as_it_was(vault: Path) -> None:
    kept = ok(vault, "remember", f"key {AWS}", env={"MEMVAULT_PRIVACY__SECRETS": "keep"})
    assert kept.stderr == ""
    assert f"key {AWS}" in (vault / "Memory" / "Facts.md").read_text()


def test_a_rewritten_note_keeps_its_old_secrets_and_loses_new_ones(vault: Path) -> None:
    (vault / "Server.md").write_text(f"old key {AWS}\n")  # typed by hand: the owner's
    ok(vault, "note", "write", "Server.md", "--content", f"old key {AWS}\nnew {GITHUB}\n")
    assert (vault / "Server.md").read_text() == (
        f"old key {AWS}\nnew [secret removed: GitHub token]\n"
    )


def test_the_agents_tool_call_stores_the_marker(vault: Path) -> None:
    with FakeOpenAI() as model:
        model.reply("", tool_calls=[("remember", {"fact": f"The Slack bot token is {SLACK}"})])
        model.reply("Noted.")
        settings = llm_settings(model)
        env = {
            "MEMVAULT_LLM__PROVIDER": settings.provider,
            "MEMVAULT_LLM__MODEL": str(settings.model),
            "MEMVAULT_LLM__BASE_URL": str(settings.base_url),
            "MEMVAULT_LLM__API_KEY_ENV": "FAKE_LLM_API_KEY",
            "FAKE_LLM_API_KEY": "fake-key",
            "MEMVAULT_AGENT__SUMMARY": "extractive",
        }
        ok(vault, "ask", f"Keep my Stripe key {STRIPE} somewhere", "--yes", env=env)
        # The tool result the model reads says what was removed.
        tool = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
        result = json.loads(tool[0]["content"])
        assert result["secrets_removed"] == ["Slack token"]
        assert result["notice"] == notice("Slack token")
    assert (
        "The Slack bot token is [secret removed: Slack token]"
        in (vault / "Memory" / "Facts.md").read_text()
    )
    assert holders(vault, SLACK, STRIPE) == []


def test_imports_bring_in_the_marker(vault: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "openclaw"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(f"## Facts\n\n- The deploy key is {GITHUB}\n")
    (workspace / "memory" / "2026-11-20.md").write_text(f"- 09:00 user: wifi password={PASSWORD}\n")
    shown = ok(vault, "import", "openclaw", workspace)
    assert "Secrets were removed before storing: GitHub token, password." in shown.stdout
    assert (
        "The deploy key is [secret removed: GitHub token]"
        in (vault / "Memory" / "Facts.md").read_text()
    )
    assert "[secret removed: password]" in (vault / "Journal" / "2026-11-20.md").read_text()
    assert holders(vault, GITHUB, PASSWORD) == []
    # Refused: the file is named as a problem, and nothing of it is imported.
    (workspace / "LEARNINGS.md").write_text(f"- Never paste {STRIPE} into chat\n")
    report = ok_json(
        vault,
        "import",
        "learnings",
        workspace / "LEARNINGS.md",
        env={"MEMVAULT_PRIVACY__SECRETS": "refuse"},
    )
    assert report["problems"] == [
        "LEARNINGS.md: it holds a secret (Stripe key), so it was not imported."
    ]
    assert report["imported"] == 0 and holders(vault, STRIPE) == []


def test_consolidation_screens_the_text_a_model_merges(vault: Path, clock: Any) -> None:
    with FakeOpenAI() as model:
        settings = Settings(
            vault=vault,
            timezone="Europe/Berlin",
            llm=llm_settings(model),
            memory={"consolidation": "model"},
            embedder={"provider": "none"},
        )
        runtime = Runtime.open(settings, clock=clock)
        try:
            first = runtime.memories.remember("The staging database is db.internal").memory
            merged = f"The staging database is db.internal; its password={PASSWORD}"
            model.reply(
                json.dumps(
                    {
                        "action": "update",
                        "target": first.id,
                        "text": merged,
                        "reason": "same database",
                        "confidence": 0.95,
                    }
                )
            )
            done = runtime.consolidation.remember(f"staging db password={PASSWORD}")
            assert done.action == "update" and done.memory.id == first.id
            # The model got the new text with its secret already removed.
            assert PASSWORD not in json.dumps(model.requests)
            assert done.memory.text == (
                "The staging database is db.internal; its password=[secret removed: password]"
            )
            runtime.index.sync()
        finally:
            runtime.close()
    assert holders(vault, PASSWORD) == []


# -- the daemon: HTTP, MCP, a channel --------------------------------------------------------


def test_the_http_api_and_mcp_store_the_marker(live: Live) -> None:
    with live.client() as api:
        stored = answer(
            api.post("/v1/memories", json={"text": f"AWS key {AWS} for backups"}),
            notice=notice("AWS key"),
        )
        assert stored["secrets_removed"] == ["AWS key"]
        assert stored["text"] == "AWS key [secret removed: AWS key] for backups"
        plain = answer(api.post("/v1/memories", json={"text": "The boat is called Halcyon"}))
        assert "secrets_removed" not in plain
        note = f"# Server\n\npassword={PASSWORD}\n"
        answer(api.put("/v1/notes/Server.md", json={"content": note}), notice=notice("password"))
        answer(
            api.post("/v1/notes/Server.md", json={"content": f"token {GITHUB}\n"}),
            notice=notice("GitHub token"),
        )
        answer(
            api.post("/v1/sessions/api:1/messages", json={"text": f"my card is {VISA}"}),
            notice=notice("card number"),
        )
        approved = {"X-Memvault-Approval": live.daemon.approval_token}
        called = answer(
            api.post(
                "/v1/tools/vault_append",
                json={"path": "Log.md", "content": f"slack {SLACK}"},
                headers=approved,
            ),
            notice=notice("Slack token"),
        )
        assert called["result"]["secrets_removed"] == ["Slack token"]

    async def over_mcp() -> None:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {live.daemon.token}"})
        async with (
            http,
            Client(streamable_http_client(f"{live.url}/mcp", http_client=http)) as client,
        ):
            stored = await client.call_tool("remember", {"fact": f"Stripe key {STRIPE}"})
            assert not stored.is_error and stored.structured_content is not None
            assert stored.structured_content["notice"] == notice("Stripe key")

    anyio.run(over_mcp)
    live.daemon.runtime.index.sync()
    assert (live.vault / "Log.md").read_text() == "slack [secret removed: Slack token]\n"
    assert holders(live.vault, AWS, PASSWORD, GITHUB, VISA, SLACK, STRIPE) == []


def test_http_refuses_with_422_and_stores_nothing(start_daemon: StartDaemon) -> None:
    live = start_daemon(settings={"privacy": {"secrets": "refuse"}})
    with live.client() as api:
        error = failed(api.post("/v1/memories", json={"text": f"key {AWS}"}), 422, "secret_refused")
        assert error["message"] == "Nothing was stored: the text holds a secret (AWS key)."
        failed(api.put("/v1/notes/A.md", json={"content": f"{GITHUB}"}), 422, "secret_refused")
        failed(
            api.post("/v1/sessions/api:1/messages", json={"text": f"pw={PASSWORD}"}),
            422,
            "secret_refused",
        )
    assert not (live.vault / "A.md").exists()
    assert holders(live.vault, AWS, GITHUB, PASSWORD) == []


def channel_vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    (root / "Contacts" / "Ada Lovelace.md").write_text(
        f"---\ntelegram: '{FRIEND}'\n---\n# Ada Lovelace\n\nMet at the book club.\n"
    )
    return root


def test_a_channel_keeps_secrets_out_and_tells_the_owner_once(
    tmp_path: Path, start_daemon: StartDaemon, tg: FakeTelegram
) -> None:
    settings = {
        "channels": {"telegram": telegram_config(tg, policy="allowlist", allow=[str(FRIEND)])}
    }
    live = start_daemon(channel_vault(tmp_path), settings=settings)
    tg.push_message(OWNER, f"/remember My Stripe key is {STRIPE}")
    wait_for(lambda: delivered(tg, OWNER), "remember's answer")
    tg.push_message(OWNER, f"note to self: wifi password={PASSWORD}")
    tg.push_message(FRIEND, f"here is the deploy token {GITHUB}", first_name="Ada")
    replies = wait_for(lambda: len(delivered(tg, OWNER)) == 2 and delivered(tg, OWNER), "replies")
    assert replies[0].startswith("Remembered (fact, m-")
    assert replies[0].endswith(notice("Stripe key"))
    assert replies[1].endswith(notice("password"))
    wait_for(
        lambda: (
            [r["status"] for r in live.daemon.state.query("SELECT status FROM channel_inbox")]
            == ["done", "done", "done"]
        ),
        "every message handled",
    )
    assert delivered(tg, FRIEND) == []  # the friend is not told (no model answers here)
    runtime = live.daemon.runtime
    facts = (live.vault / "Memory" / "Facts.md").read_text()
    assert "My Stripe key is [secret removed: Stripe key]" in facts
    received = "\n".join(runtime.journal.sections()["Commands Received"])
    assert "wifi password=[secret removed: password]" in received
    assert "deploy token [secret removed: GitHub token]" in received
    contact = (live.vault / "Contacts" / "Ada Lovelace.md").read_text()
    assert "telegram: here is the deploy token [secret removed: GitHub token]" in contact
    runtime.index.sync()
    assert holders(live.vault, STRIPE, PASSWORD, GITHUB) == []


def test_a_refused_channel_message_is_not_kept_and_the_owner_hears_why(
    tmp_path: Path, start_daemon: StartDaemon, tg: FakeTelegram
) -> None:
    settings = {"channels": {"telegram": telegram_config(tg)}, "privacy": {"secrets": "refuse"}}
    live = start_daemon(channel_vault(tmp_path), settings=settings)
    tg.push_message(OWNER, f"/remember My Stripe key is {STRIPE}")
    reply = wait_for(lambda: delivered(tg, OWNER), "the owner's answer")
    assert reply == [
        "I did not keep that message: it holds a secret (Stripe key). Send it again without "
        "the secret."
    ]
    assert "Stripe" not in (live.vault / "Memory" / "Facts.md").read_text()
    session = live.daemon.sessions.get(f"telegram:{OWNER}")
    texts = [m.text for m in live.daemon.sessions.messages(session.id)]
    assert texts[0] == "[message not stored: it held a secret (Stripe key)]"
    assert holders(live.vault, STRIPE) == []


def test_a_file_copied_in_by_the_file_bridge_brings_no_secret(
    tmp_path: Path, start_daemon: StartDaemon
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "app.env").write_text(f"STRIPE_KEY={STRIPE}\nDEBUG=1\n")
    live = start_daemon(
        settings={"tools": {"files": {"enabled": True, "allowed_folders": [str(outside)]}}}
    )
    with live.client(**{"X-Memvault-Approval": live.daemon.approval_token}) as api:
        answer(
            api.post(
                "/v1/tools/read_file_from_path",
                json={"path": str(outside / "app.env"), "destination": "Attachments/app.env"},
            ),
            notice=notice("Stripe key"),
        )
    copied = (live.vault / "Attachments" / "app.env").read_text()
    assert copied == "STRIPE_KEY=[secret removed: Stripe key]\nDEBUG=1\n"
    assert holders(live.vault, STRIPE) == []


def test_the_cli_through_the_daemon_prints_the_daemons_notice(live: Live) -> None:
    result = invoke(live.vault, "remember", f"key {AWS}")
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == notice("AWS key")
    assert holders(live.vault, AWS) == []
