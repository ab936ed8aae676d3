"""Skills: how-to notes in ``Skills/``, one procedure each, written by a person or a job.

A skill note reads the same in Obsidian and to an agent::

    ---
    name: Plan a trip
    tags: [skill, auto-discovered]
    created: 2026-11-23
    source_sessions: [12, 15]
    ---
    # Plan a trip

    ## When to use
    The owner asks to plan a journey.

    ## Steps
    1. Look up what is known about the destination.
    2. ...

``name`` falls back to the first ``# `` heading, then to the file name; the
steps are the items of the *Steps* section (numbered or bulleted).
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass
from datetime import date

from memvault.errors import InvalidInputError, MemvaultError, NotFoundError
from memvault.vault.markdown import frontmatter_tags, section_text, title_of
from memvault.vault.note import Note
from memvault.vault.store import Vault

SKILLS_DIR = "Skills"
AUTO_TAG = "auto-discovered"
AUTO_TAGS = ("skill", AUTO_TAG)  # what a job's skill is tagged: the template's tag, and how
WHEN = "When to use"
STEPS = "Steps"
_ITEM = re.compile(r"^\s{0,3}(?:\d+[.)]|[-*+])\s+(.*)$")


@dataclass(frozen=True)
class Skill:
    """One procedure: its name, when it applies and its steps in order."""

    name: str
    when_to_use: str
    steps: tuple[str, ...]
    tags: tuple[str, ...] = ()
    created: date | None = None
    source_sessions: tuple[int, ...] = ()
    path: str | None = None  # where it is kept, once it is

    def render(self) -> str:
        """The note's text."""
        frontmatter: dict[str, object] = {"name": self.name, "tags": list(self.tags)}
        if self.created is not None:
            frontmatter["created"] = self.created.isoformat()
        if self.source_sessions:
            frontmatter["source_sessions"] = list(self.source_sessions)
        steps = "\n".join(f"{n}. {step}" for n, step in enumerate(self.steps, 1))
        body = f"# {self.name}\n\n## {WHEN}\n{self.when_to_use}\n\n## {STEPS}\n{steps}\n"
        return Note(frontmatter, body).render()

    @classmethod
    def parse(cls, text: str, path: str) -> Skill:
        """The skill a note at ``path`` describes; a note a person wrote in another shape
        still gives its name (and whatever sections it has)."""
        note = Note.parse(text)
        body = note.body
        stem = path.rsplit("/", 1)[-1].removesuffix(".md")
        named = note.get("name")
        name = named.strip() if isinstance(named, str) and named.strip() else title_of(body, stem)
        when = " ".join((section_text(body, WHEN) or "").split())
        steps = []
        for line in (section_text(body, STEPS) or "").split("\n"):
            item = _ITEM.match(line)
            if item and item.group(1).strip():
                steps.append(item.group(1).strip())
        return cls(
            name=name,
            when_to_use=when,
            steps=tuple(steps),
            tags=tuple(frontmatter_tags(note.frontmatter)),
            path=path,
        )


def read_skills(vault: Vault, folder: str = SKILLS_DIR) -> list[Skill]:
    """Every skill note under ``folder`` (none when there is no such folder)."""
    try:
        entries = vault.list(folder)
    except (NotFoundError, InvalidInputError):  # no such folder, or a note of that name
        return []
    skills: builtins.list[Skill] = []
    for entry in entries:
        try:
            skills.append(Skill.parse(vault.read_text(entry.path), entry.path))
        except MemvaultError:  # not text, or gone meanwhile: it names no skill
            continue
    return skills
