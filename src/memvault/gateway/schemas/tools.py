"""The tool registry's listing and a tool call's answer."""

from __future__ import annotations

from typing import Any

from memvault.gateway.schemas.base import Result


class ToolInfo(Result):
    name: str
    title: str
    description: str
    tier: int
    category: str
    input_schema: dict[str, Any]
    annotations: dict[str, bool]


class ToolCall(Result):
    tool: str
    result: Any
