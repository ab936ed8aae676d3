"""memvault's tools: one registry served over MCP, HTTP, the agent loop and exports."""

from __future__ import annotations

from memvault.tools import (
    file_bridge,
    graph_tools,
    memory_tools,
    shell_tools,
    task_tools,
    vault_tools,
)
from memvault.tools.registry import Tool, ToolContext, ToolRegistry, ToolResult


def default_registry() -> ToolRegistry:
    """Every built-in tool: vault, tasks, contacts, journal, memory, the knowledge graph;
    the shell and the file bridge, which a vault offers only when its settings turn them on."""
    return ToolRegistry(
        [
            *vault_tools.TOOLS,
            *task_tools.TOOLS,
            *memory_tools.TOOLS,
            *graph_tools.TOOLS,
            *shell_tools.TOOLS,
            *file_bridge.TOOLS,
        ]
    )


__all__ = ["Tool", "ToolContext", "ToolRegistry", "ToolResult", "default_registry"]
