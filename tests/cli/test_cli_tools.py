from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import EXIT_INVALID, EXIT_NOT_FOUND, fail, invoke, ok, ok_json, snapshot
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    return root


def test_list_shows_every_tool_with_its_tier(vault: Path) -> None:
    tools = ok_json(vault, "tools", "list")
    assert len(tools) == 35
    by_name = {t["name"]: t for t in tools}
    assert by_name["vault_read"]["tier"] == 1 and by_name["vault_read"]["read_only"]
    assert by_name["remember"]["tier"] == 2 and by_name["remember"]["category"] == "file_writes"
    assert by_name["vault_delete"]["tier"] == 3 and by_name["vault_delete"]["destructive"]
    assert "tier 3 every time" in ok(vault, "tools", "list").stdout


@pytest.mark.parametrize(("fmt", "name_of"), [
    ("anthropic", lambda t: t["name"]),
    ("openai", lambda t: t["function"]["name"]),
    ("mcp", lambda t: t["name"]),
])  # fmt: skip
def test_export_formats(vault: Path, fmt: str, name_of: object) -> None:
    exported = json.loads(ok(vault, "tools", "export", "--format", fmt).stdout)
    assert len(exported) == 35
    assert "memory_search" in [name_of(t) for t in exported]  # type: ignore[operator]
    readers = json.loads(ok(vault, "tools", "export", "--format", fmt, "--max-tier", "1").stdout)
    assert len(readers) == 18


def test_export_unknown_format(vault: Path) -> None:
    assert "Unknown format" in fail(
        vault, "tools", "export", "--format", "gemini", code=EXIT_INVALID
    )


def test_call_reads_freely_and_writes_with_approval(vault: Path) -> None:
    listed = ok_json(vault, "tools", "call", "vault_list", "--args", '{"directory": "Tasks"}')
    assert listed["ok"] and listed["result"]["folders"] == ["active", "completed"]
    refused = invoke(vault, "tools", "call", "remember", "--args", '{"fact": "x"}')
    assert refused.exit_code == 8
    assert "did not approve" in refused.stderr and "--yes" in refused.stderr
    stored = ok_json(vault, "tools", "call", "remember", "--args", '{"fact": "Likes rye"}', "--yes")
    assert stored["result"]["stored"] is True
    assert "Likes rye" in (vault / "Memory/Facts.md").read_text()


def test_call_mistakes(vault: Path) -> None:
    before = snapshot(vault)
    assert "not valid JSON" in fail(
        vault, "tools", "call", "vault_read", "--args", "{path:", code=EXIT_INVALID
    )
    assert "no tool named" in fail(vault, "tools", "call", "vault_rade", code=EXIT_NOT_FOUND)
    bad = invoke(vault, "tools", "call", "vault_read", "--args", '{"path": "../x"}')
    assert bad.exit_code == EXIT_INVALID and "not allowed" in bad.stderr
    result = invoke(vault, "tools", "call", "vault_read", "--args", "{}", "--json")
    assert result.exit_code == EXIT_INVALID
    assert json.loads(result.stdout)["error"]["code"] == "validation_failed"
    assert snapshot(vault) == before


def test_search_tools_say_when_nothing_is_relevant(vault: Path) -> None:
    ok(vault, "remember", "Garage door code is XK-4471")
    found = ok_json(vault, "tools", "call", "memory_search", "--args", '{"query": "XK-4471"}')[
        "result"
    ]
    assert [r["snippet"] for r in found["results"]] == ["Garage door code is XK-4471"]
    assert "note" not in found
    for tool, args in [
        ("memory_search", '{"query": "favourite pizza topping"}'),
        ("vault_search", '{"query": "favourite pizza topping"}'),
        ("recall", '{"topic": "favourite pizza topping"}'),
    ]:
        nothing = ok_json(vault, "tools", "call", tool, "--args", args)["result"]
        assert not (nothing.get("results") or nothing.get("memories")), tool
        assert nothing["note"].startswith("Nothing relevant"), tool
