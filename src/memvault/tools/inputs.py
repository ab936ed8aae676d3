"""What tool inputs share: lenient names, clear schemas.

Models guess parameter names (``folder``, ``directory``, ``dir``); every
input accepts the spellings the earlier designs used and the ones models
tend to reach for, while the schema advertises one canonical name.
Unknown extra keys are ignored rather than failing a call.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field


class ToolInput(BaseModel):
    """Base of every tool input."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, str_strip_whitespace=True)


def names(*choices: str) -> AliasChoices:
    """Accepted spellings of a parameter; the first is the one the schema shows."""
    return AliasChoices(*choices)


NOTE_PATH = names("path", "file", "filename", "note", "note_path")
FOLDER = names("folder", "directory", "dir", "path")
LIMIT = names("limit", "maxResults", "max_results", "k", "top_k", "count")
CONTENT = names("content", "text", "body", "markdown")


def path_field(
    description: str = "Vault-relative path of a note, e.g. 'Projects/Apollo.md' (.md optional).",
) -> Any:
    """A required note path with the usual aliases."""
    return Field(description=description, validation_alias=NOTE_PATH, min_length=1)


def min_score_field() -> Any:
    """An optional relevance floor (the vault's ``search.min_score`` when left out)."""
    return Field(
        None,
        ge=0,
        le=5,
        description=(
            "Leave out results scoring below this; default: the vault's relevance floor "
            "(0.3). Scores run from 0 (unrelated) to about 1.3 (holds every word) and more "
            "for a phrase as typed; 0 lists the closest matches even when nothing is relevant."
        ),
        validation_alias=names("min_score", "minScore"),
    )


def limit_field(default: int, maximum: int = 50) -> Any:
    """An optional result limit with the usual aliases."""
    return Field(
        default,
        ge=1,
        le=maximum,
        description=f"Maximum number of results (default {default}, at most {maximum}).",
        validation_alias=LIMIT,
    )
