"""Tools: the shell, the file bridge, and the registry's tiers."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
)

from memvault.config.base import Section


class ShellSettings(Section):
    """``[tools.shell]``: the ``run_shell_command`` tool (tier 3: approved every call)."""

    enabled: bool = Field(False, description="offer run_shell_command to agents")
    allowed_folders: list[Path] = Field(
        default_factory=list, description="folders commands may run in (none: the tool refuses)"
    )
    working_dir: Path | None = Field(
        None, description="default working folder; default the first allowed folder"
    )
    blocked_commands: list[str] = Field(
        default_factory=lambda: [
            "sudo",
            "su",
            "doas",
            "rm",
            "shred",
            "dd",
            "mkfs",
            "shutdown",
            "reboot",
            "curl",
            "wget",
            "ssh",
            "scp",
            "nc",
            "chmod",
            "chown",
        ],
        description="programs never run, wherever they appear in a pipeline or chain",
    )
    allowed_commands: list[str] = Field(
        default_factory=list, description="if not empty: the only programs that may run"
    )
    timeout_seconds: float = Field(
        30.0, gt=0, le=3600, description="the command and its children are killed after this"
    )
    max_output_bytes: int = Field(
        65_536, ge=256, le=10_000_000, description="stdout and stderr kept, each, at most"
    )
    save_output_by_default: bool = Field(
        False, description="save each command's output to the journal unless told otherwise"
    )


class FileBridgeSettings(Section):
    """``[tools.files]``: ``read_file_from_path`` / ``write_file_to_path`` (tier 2)."""

    enabled: bool = Field(False, description="offer the file bridge tools to agents")
    allowed_folders: list[Path] = Field(
        default_factory=list, description="folders outside the vault the tools may read and write"
    )
    max_bytes: int = Field(
        10_000_000, ge=1, le=1_000_000_000, description="largest file copied either way"
    )


class ToolSettings(Section):
    """How tool calls are approved."""

    mode: Literal["ask", "autonomous"] = Field(
        "ask", description="ask: tier-2 tools need approval once per category per session"
    )
    mcp_dangerous: bool = Field(
        False, description="serve tier-3 tools (deletions) over MCP; the client asks its user"
    )
    shell: ShellSettings = Field(default_factory=ShellSettings)
    files: FileBridgeSettings = Field(default_factory=FileBridgeSettings)
