"""The registry in the tool formats of Anthropic, OpenAI and MCP."""

from __future__ import annotations

from typing import Any

from memvault.errors import InvalidInputError
from memvault.tools.registry import Tool, ToolRegistry
from memvault.vocabulary import TOOL_FORMATS as FORMATS


def anthropic_tool(tool: Tool) -> dict[str, Any]:
    """Anthropic Messages API ``tools`` entry."""
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema()}


def openai_tool(tool: Tool) -> dict[str, Any]:
    """OpenAI Chat Completions ``tools`` entry (a function)."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema(),
        },
    }


def mcp_annotations(tool: Tool) -> dict[str, Any]:
    """MCP tool annotations."""
    return {
        "title": tool.title,
        "readOnlyHint": tool.annotations.read_only,
        "destructiveHint": tool.annotations.destructive,
        "idempotentHint": tool.annotations.idempotent,
        "openWorldHint": tool.annotations.open_world,
    }


def mcp_tool(tool: Tool) -> dict[str, Any]:
    """MCP ``tools/list`` entry."""
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema(),
        "annotations": mcp_annotations(tool),
    }


def export(registry: ToolRegistry, fmt: str) -> list[dict[str, Any]]:
    """Every tool of ``registry`` in format ``fmt``."""
    convert = {"anthropic": anthropic_tool, "openai": openai_tool, "mcp": mcp_tool}.get(fmt)
    if convert is None:
        raise InvalidInputError(f"Unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    return [convert(tool) for tool in registry]
