from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from anthropic.types import ToolParam
from openai.types.chat import ChatCompletionFunctionToolParam
from pydantic import TypeAdapter

from cli_support import snapshot
from gateway_support import Live, ok
from memvault.runtime import Runtime
from memvault.tools import ToolContext, default_registry
from memvault.tools.export import anthropic_tool, export, mcp_tool, openai_tool
from memvault.tools.policy import (
    AllowAll,
    ApprovalRequest,
    DenyAll,
    Policy,
    TerminalApprover,
    Tier,
)
from support import RecordingApprover, schema_problems

REGISTRY = default_registry()
EXPECTED_TOOLS = {
    "vault_read", "vault_write", "vault_append", "vault_search", "vault_list", "vault_delete",
    "vault_move", "task_create", "task_update", "task_complete", "task_list", "contact_create",
    "contact_update", "journal_append", "remember", "recall", "forget", "memory_search",
    "memory_get", "get_context", "related_notes", "backlinks", "get_knowledge_graph",
    "entity_facts", "run_shell_command", "read_file_from_path", "write_file_to_path",
}  # fmt: skip


CountingApprover = RecordingApprover


def _ctx(runtime: Runtime, approver: Any = None, mode: str = "ask") -> ToolContext:
    return ToolContext(runtime=runtime, policy=Policy(approver=approver or AllowAll(), mode=mode))


def test_every_tool_is_registered_once_with_a_tier() -> None:
    assert set(REGISTRY.names()) == EXPECTED_TOOLS
    tiers = {t.name: int(t.tier) for t in REGISTRY}
    assert {n for n, t in tiers.items() if t == 3} == {
        "vault_delete",
        "forget",
        "run_shell_command",
    }
    assert {n for n, t in tiers.items() if t == 1} == {
        "vault_read", "vault_search", "vault_list", "task_list", "recall", "memory_search",
        "memory_get", "get_context", "related_notes", "backlinks", "get_knowledge_graph",
        "entity_facts",
    }  # fmt: skip
    for tool in REGISTRY:
        assert tool.annotations.read_only == (tool.tier == Tier.READ)
        assert len(tool.description) > 40, tool.name


@pytest.mark.parametrize("tool", list(REGISTRY), ids=lambda t: t.name)
def test_exports_are_valid_json_schema_and_sdk_shapes(tool: Any) -> None:
    schema = tool.input_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object" and "$defs" not in json.dumps(schema)
    TypeAdapter(ToolParam).validate_python(anthropic_tool(tool))
    TypeAdapter(ChatCompletionFunctionToolParam).validate_python(openai_tool(tool))
    assert anthropic_tool(tool)["input_schema"] == schema
    assert openai_tool(tool)["function"]["parameters"] == schema
    entry = mcp_tool(tool)
    assert entry["inputSchema"] == schema
    assert entry["annotations"]["readOnlyHint"] == tool.annotations.read_only
    assert entry["annotations"]["destructiveHint"] == tool.annotations.destructive


def exported_schemas(fmt: str) -> dict[str, dict[str, Any]]:
    """Each tool's input schema as the export in ``fmt`` gives it to a model or client."""
    if fmt == "openai":
        return {e["function"]["name"]: e["function"]["parameters"] for e in export(REGISTRY, fmt)}
    key = {"anthropic": "input_schema", "mcp": "inputSchema"}[fmt]
    return {e["name"]: e[key] for e in export(REGISTRY, fmt)}


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "mcp"])
def test_every_exported_schema_declares_what_it_requires(fmt: str) -> None:
    """Every tool in every format: valid JSON Schema, each required name a declared
    property, each property typed and described (a property named ``title`` included)."""
    schemas = exported_schemas(fmt)
    assert set(schemas) == EXPECTED_TOOLS
    for name, schema in schemas.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema_problems(schema) == [], f"{fmt} {name}"
    for name in ("task_create", "task_update", "task_complete"):
        title = schemas[name]["properties"]["title"]
        assert "title" in schemas[name]["required"] and title["type"] == "string", name
        assert title["description"], name


def test_schema_problems_are_found() -> None:
    """The check above can fail: what the old cleaner made of a property named title."""
    broken = {
        "type": "object",
        "properties": {"due": {"type": "string"}, "tags": {"description": "Tags."}},
        "required": ["title"],
    }
    assert schema_problems(broken) == [
        "the input requires 'title', which it does not declare",
        "due has no description",
        "tags has no type",
    ]


def test_schemas_accept_what_they_advertise() -> None:
    example = {"query": "tea", "maxResults": 3, "minScore": 0.1}
    jsonschema.validate(example, REGISTRY.get("memory_search").input_schema())
    jsonschema.validate(
        {"path": "Memory/Facts.md", "from": 2, "lines": 5},
        REGISTRY.get("memory_get").input_schema(),
    )
    assert set(REGISTRY.get("memory_get").input_schema()["properties"]) == {"path", "from", "lines"}
    names = REGISTRY.names()
    assert [e["name"] for e in export(REGISTRY, "anthropic")] == names
    assert [e["function"]["name"] for e in export(REGISTRY, "openai")] == names
    assert [e["name"] for e in export(REGISTRY, "mcp")] == names


def test_models_guessed_names_are_accepted(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    write("Projects/Apollo.md", "# Apollo\n\nMoon landing plans.\n")
    ctx = _ctx(runtime)
    for arguments in ({"folder": "Projects"}, {"directory": "Projects"}, {"dir": "Projects"}):
        result = REGISTRY.call("vault_list", arguments, ctx)
        assert result.ok and [n["path"] for n in result.data["notes"]] == ["Projects/Apollo.md"]
    assert (
        REGISTRY.call("vault_read", {"file": "Projects/Apollo"}, ctx)
        .data["content"]
        .startswith("# Apollo")
    )
    assert REGISTRY.call("remember", {"text": "Likes tea", "category": "preference"}, ctx).ok
    assert REGISTRY.call("remember", {"fact": "Likes tea"}, ctx).data["stored"] is False
    hits = REGISTRY.call(
        "vault_search", {"query": "moon landing", "directory": "Projects", "max_results": 3}, ctx
    )
    assert hits.ok and hits.data["results"][0]["path"] == "Projects/Apollo.md"
    created = REGISTRY.call("task_create", {"title": "Launch", "details": "Count down"}, ctx)
    assert created.data["description"] == "Count down"
    # Both earlier designs' task_update spellings work.
    assert (
        REGISTRY.call(
            "task_update", {"filename": "Launch.md", "field": "priority", "value": "high"}, ctx
        ).data["priority"]
        == "high"
    )
    assert (
        REGISTRY.call(
            "task_update", {"title": "Launch", "status": "done", "notes": "went well"}, ctx
        ).data["status"]
        == "done"
    )


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("vault_read", {}, "'path' is required"),
        ("vault_write", {"path": "a.md"}, "'content' is required"),
        ("vault_search", {"query": "x", "limit": "many"}, "'limit'"),
        ("vault_search", {"query": "x", "limit": 500}, "'limit'"),
        ("remember", {"fact": "x", "importance": 7}, "'importance'"),
        ("remember", {"fact": "x", "category": "gossip"}, "Unknown memory category"),
        ("vault_write", {"path": "../outside.md", "content": "x"}, "'..' is not allowed"),
        ("vault_write", {"path": "/etc/passwd", "content": "x"}, "absolute"),
        ("vault_append", {"path": ".memvault/token", "content": "x"}, "hidden"),
        ("task_update", {"title": "nothing"}, "give a status"),
        ("task_update", {"title": "x", "field": "due"}, "'value' is required"),
        ("memory_get", {"path": "Home.md", "from": 0}, "'from'"),
        ("no_such_tool", {}, "no tool named"),
        ("vault_serch", {}, "Did you mean vault_search"),
    ],
)
def test_bad_input_is_a_clear_error_and_changes_nothing(
    runtime: Runtime, name: str, arguments: dict[str, Any], message: str
) -> None:
    before = snapshot(runtime.vault.root)
    result = REGISTRY.call(name, arguments, _ctx(runtime))
    assert not result.ok and message in (result.error or ""), result.error
    assert result.text().startswith("Error: ")
    assert snapshot(runtime.vault.root) == before


def test_arguments_that_are_not_an_object(runtime: Runtime) -> None:
    result = REGISTRY.call("vault_read", ["Home.md"], _ctx(runtime))  # type: ignore[arg-type]
    assert not result.ok and "JSON object" in (result.error or "")


def test_not_found_tells_the_model_what_to_try(runtime: Runtime) -> None:
    result = REGISTRY.call("vault_read", {"path": "Nowhere.md"}, _ctx(runtime))
    assert not result.ok and result.code == "not_found"
    assert "vault_list" in (result.error or "") and "vault_search" in (result.error or "")
    missing_task = REGISTRY.call("task_complete", {"title": "ghost"}, _ctx(runtime))
    assert "task_list" in (missing_task.error or "")


def test_tier_two_asks_once_per_category_per_session(runtime: Runtime) -> None:
    approver = CountingApprover()
    ctx = _ctx(runtime, approver)
    assert REGISTRY.call("remember", {"fact": "one"}, ctx).ok
    assert REGISTRY.call("vault_write", {"path": "Note.md", "content": "x"}, ctx).ok
    assert REGISTRY.call("task_create", {"title": "T"}, ctx).ok
    assert [r.category for r in approver.asked] == ["file_writes"]
    assert approver.asked[0].summary == "remember 'one'"
    # A new session asks again.
    fresh = _ctx(runtime, approver)
    assert REGISTRY.call("remember", {"fact": "two"}, fresh).ok
    assert len(approver.asked) == 2


def test_tier_one_never_asks(runtime: Runtime) -> None:
    approver = CountingApprover(answer=False)
    ctx = _ctx(runtime, approver)
    assert REGISTRY.call("task_list", {}, ctx).ok
    assert REGISTRY.call("memory_search", {"query": "x"}, ctx).ok
    assert approver.asked == []


def test_tier_three_asks_every_time_even_when_autonomous(runtime: Runtime) -> None:
    runtime.notes.write("a.md", "a")
    runtime.notes.write("b.md", "b")
    approver = CountingApprover()
    ctx = _ctx(runtime, approver, mode="autonomous")
    assert REGISTRY.call("remember", {"fact": "x"}, ctx).ok  # tier 2: no question
    assert REGISTRY.call("vault_delete", {"path": "a.md"}, ctx).ok
    assert REGISTRY.call("vault_delete", {"path": "b.md"}, ctx).ok
    assert [r.tool for r in approver.asked] == ["vault_delete", "vault_delete"]


def test_denial_is_a_tool_error_and_nothing_happens(runtime: Runtime) -> None:
    memory = runtime.memories.remember("keep me").memory
    before = snapshot(runtime.vault.root)
    ctx = _ctx(runtime, DenyAll())
    for name, arguments in (
        ("remember", {"fact": "x"}),
        ("vault_write", {"path": "x.md", "content": "x"}),
        ("forget", {"id": memory.id}),
    ):
        result = REGISTRY.call(name, arguments, ctx)
        assert not result.ok and result.code == "not_approved"
        assert "did not approve" in (result.error or "")
    assert snapshot(runtime.vault.root) == before
    # A refused category is asked again next time (nothing was granted).
    approver = CountingApprover(answer=False)
    ctx = _ctx(runtime, approver)
    REGISTRY.call("remember", {"fact": "x"}, ctx)
    REGISTRY.call("remember", {"fact": "y"}, ctx)
    assert len(approver.asked) == 2


def test_terminal_approver_reads_the_answer() -> None:
    request = ApprovalRequest("vault_write", Tier.WRITE, "file_writes", "write a.md", {})
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return "y"

    assert TerminalApprover(ask=ask, interactive=lambda: True).approve(request)
    assert asked == [
        "Allow vault_write: write a.md? (approves file writes for this session) [y/N] "
    ]
    assert not TerminalApprover(ask=lambda p: "no", interactive=lambda: True).approve(request)
    assert not TerminalApprover(ask=ask, interactive=lambda: False).approve(request)


def test_memory_search_and_get_have_openclaw_shapes(runtime: Runtime) -> None:
    runtime.memories.remember("The boiler is serviced every October", category="fact")
    ctx = _ctx(runtime)
    found = REGISTRY.call("memory_search", {"query": "boiler service", "maxResults": 3}, ctx).data
    assert set(found) == {"results", "backend", "provider"}
    first = found["results"][0]
    assert {"path", "startLine", "endLine", "score", "snippet", "source", "citation"} <= set(first)
    assert (
        first["source"] == "memory" and first["snippet"] == "The boiler is serviced every October"
    )
    by_path = REGISTRY.call(
        "memory_get", {"path": first["path"], "from": first["startLine"], "lines": 1}, ctx
    ).data
    assert (
        by_path["text"]
        == (runtime.vault.root / first["path"]).read_text().splitlines()[first["startLine"] - 1]
    )
    by_id = REGISTRY.call("memory_get", {"path": first["id"]}, ctx).data
    assert by_id["text"] == "The boiler is serviced every October"
    past = REGISTRY.call("memory_get", {"path": first["path"], "from": 999}, ctx)
    assert not past.ok and "past its end" in (past.error or "")
    assert (
        REGISTRY.call("memory_search", {"query": "boiler", "minScore": 5}, ctx).data["results"]
        == []
    )


def test_get_context_recall_forget_and_graph(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    ctx = _ctx(runtime)
    memory = REGISTRY.call("remember", {"fact": "Allergic to walnuts", "tags": ["core"]}, ctx).data
    context = REGISTRY.call("get_context", {"query": "dinner plans"}, ctx).data
    assert "## Pinned memories" in context and "walnuts" in context
    recalled = REGISTRY.call("recall", {"query": "allergies walnuts"}, ctx).data["memories"]
    assert recalled[0]["id"] == memory["id"]
    assert REGISTRY.call("forget", {"memory_id": memory["id"]}, ctx).data["forgotten"]
    write("A.md", "[[B]]\n")
    write("B.md", "# B\n")
    runtime.index.sync()
    assert (
        REGISTRY.call("backlinks", {"note": "B.md"}, ctx).data["backlinks"][0]["source"] == "A.md"
    )
    assert "A.md" in [
        r["path"] for r in REGISTRY.call("related_notes", {"path": "B"}, ctx).data["related"]
    ]


def test_remember_takes_the_earlier_designs_categories_as_memvaults_own(
    runtime: Runtime,
) -> None:
    category = REGISTRY.get("remember").input_schema()["properties"]["category"]
    assert category["type"] == "string" and {"contact", "general"} <= set(category["enum"])
    assert "conversation" not in category["enum"]  # memvault captures those itself
    assert "'contact' is person, 'general' is fact" in category["description"]
    ctx = _ctx(runtime)
    coach = REGISTRY.call("remember", {"fact": "Ana coaches sailing", "category": "contact"}, ctx)
    assert coach.ok and (coach.data["category"], coach.data["path"]) == (
        "person",
        "Memory/People.md",
    )
    plain = REGISTRY.call(
        "remember", {"fact": "The mooring is at pier 4", "category": "General"}, ctx
    )
    assert plain.ok and plain.data["category"] == "fact", plain.error
    recalled = REGISTRY.call("recall", {"topic": "sailing coach", "category": "contact"}, ctx)
    assert [m["id"] for m in recalled.data["memories"]] == [coach.data["id"]]
    wrong = REGISTRY.call("remember", {"fact": "x y z", "category": "gossip"}, ctx)
    assert not wrong.ok and "use one of preference" in (wrong.error or "")


def test_the_http_api_takes_the_earlier_designs_categories_too(live: Live) -> None:
    with live.client() as api:
        stored = ok(
            api.post("/v1/memories", json={"text": "Ana coaches sailing", "category": "contact"})
        )
        assert stored["category"] == "person"
        general = ok(
            api.post("/v1/memories", json={"text": "Pier 4 is ours", "category": "general"})
        )
        assert general["category"] == "fact"
        people = ok(api.get("/v1/memories", params={"category": "contact"}))
        assert [m["text"] for m in people] == ["Ana coaches sailing"]
