"""What every settings section is, and where the settings come from."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
)

from memvault.locations import CONFIG_FILE as CONFIG_NAME
from memvault.locations import STATE_DIR

ENV_PREFIX = "MEMVAULT_"
CONFIG_FILE = Path(STATE_DIR) / CONFIG_NAME


class Section(BaseModel):
    """Base for nested settings sections: unknown keys are mistakes, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


SectionT = TypeVar("SectionT", bound=Section)


def subsections(section: Section, kind: type[SectionT]) -> dict[str, SectionT]:
    """The sub-sections of ``section`` that are of ``kind``, by their names."""
    found = {name: getattr(section, name) for name in type(section).model_fields}
    return {name: value for name, value in found.items() if isinstance(value, kind)}
