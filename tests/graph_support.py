"""A small knowledge graph in Markdown, as a person would keep it in Obsidian: four
entity notes with facts (one changed, so the old one is closed) and relations (one
ended, one to someone without a note yet)."""

from __future__ import annotations

from pathlib import Path

MELANIE = """---
type: person
aliases: [Mel]
tags: [entity, family]
---
# Melanie

Met at the pottery class.

## Observations
- [favourite player] Ronaldo [valid_from:: 2025-01-02] [valid_until:: 2026-03-01]
- [favourite player] Messi [valid_from:: 2026-03-01] [source:: [[Memory/Facts]]]
- [hobby] paints landscapes #art

## Relations
- friend_of [[Caroline]]
- works_at [[Acme]] [valid_from:: 2024-05-01] [valid_until:: 2026-10-01]
- mentor_of [[Dan]]
"""
CAROLINE = "---\ntype: person\n---\n# Caroline\n\n## Relations\n- sister_of [[Anna]]\n"
ANNA = "---\ntype: person\n---\n# Anna\n"
ACME = "---\ntype: organisation\n---\n# Acme\n"

NOTES = {
    "Contacts/Melanie.md": MELANIE,
    "Contacts/Caroline.md": CAROLINE,
    "Entities/Anna.md": ANNA,
    "Entities/Acme.md": ACME,
}
# A memory that links Melanie: the graph shows it as "mentions".
KILN = "Mel bought a kiln with [[Melanie|her]] savings"


def write_people(root: Path) -> None:
    """Write the entity notes into the vault at ``root``."""
    for relpath, text in NOTES.items():
        target = root / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
