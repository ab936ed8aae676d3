"""Note templates: the defaults memvault installs, and filling them in.

Templates use the placeholders of Obsidian's core Templates plugin:
``{{title}}``, ``{{date}}``, ``{{time}}`` and ``{{date:FORMAT}}`` with
moment.js tokens (``YYYY-MM-DD``, ``HH:mm``, ``dddd`` ...). A vault's own
``Templates/<kind>.md`` wins over the built-in default, so a person can
reshape new notes without touching code.
"""

from __future__ import annotations

import re
from datetime import datetime

from memvault.errors import NotFoundError
from memvault.vault.store import Vault

TEMPLATES_DIR = "Templates"

TASK = """---
status: todo
priority: medium
created: {{date}}
due:
completed:
project:
tags: []
---
# {{title}}

## Description

## Steps
- [ ]

## Notes

## Related
"""

CONTACT = """---
created: {{date}}
relationship:
email:
phone:
aliases: []
tags: [contact]
---
# {{title}}

## Notes

## Interactions
"""

PROJECT = """---
status: active
created: {{date}}
tags: [project]
---
# {{title}}

## Overview

## Goals

## Tasks

## Notes
"""

JOURNAL = """---
date: {{date}}
tags: [journal]
---
# {{date:dddd, D MMMM YYYY}}

## Actions Taken

## Commands Received

## Observations

## Decisions Made

## Follow-ups
"""

INSIGHT = """---
created: {{date}}
confidence: medium
sources: []
tags: [insight]
---
# {{title}}

## Insight

## Evidence

## Implications
"""

SKILL = """---
created: {{date}}
uses: 0
tags: [skill]
---
# {{title}}

## When to use

## Steps
1.

## Notes
"""

DEFAULTS: dict[str, str] = {
    "task": TASK,
    "contact": CONTACT,
    "project": PROJECT,
    "journal": JOURNAL,
    "insight": INSIGHT,
    "skill": SKILL,
}

_PLACEHOLDER = re.compile(r"\{\{\s*(title|date|time)(?::([^}]*))?\s*\}\}")
_MOMENT = re.compile(r"YYYY|YY|MMMM|MMM|MM|M|DDDD|DD|D|dddd|ddd|HH|H|hh|h|mm|ss|A|a|\[[^\]]*\]")


def format_moment(moment: datetime, pattern: str) -> str:
    """Format a datetime with a moment.js pattern, as Obsidian's templates do."""
    hour12 = moment.hour % 12 or 12
    tokens = {
        "YYYY": f"{moment.year:04d}",
        "YY": f"{moment.year % 100:02d}",
        "MMMM": moment.strftime("%B"),
        "MMM": moment.strftime("%b"),
        "MM": f"{moment.month:02d}",
        "M": str(moment.month),
        "DDDD": f"{moment.timetuple().tm_yday:03d}",
        "DD": f"{moment.day:02d}",
        "D": str(moment.day),
        "dddd": moment.strftime("%A"),
        "ddd": moment.strftime("%a"),
        "HH": f"{moment.hour:02d}",
        "H": str(moment.hour),
        "hh": f"{hour12:02d}",
        "h": str(hour12),
        "mm": f"{moment.minute:02d}",
        "ss": f"{moment.second:02d}",
        "A": "AM" if moment.hour < 12 else "PM",
        "a": "am" if moment.hour < 12 else "pm",
    }

    def token(m: re.Match[str]) -> str:
        text = m.group(0)
        return text[1:-1] if text.startswith("[") else tokens[text]

    return _MOMENT.sub(token, pattern)


def render(template: str, *, title: str, moment: datetime) -> str:
    """Fill the placeholders of ``template``."""

    def fill(m: re.Match[str]) -> str:
        name, pattern = m.group(1), m.group(2)
        if name == "title":
            return title
        if pattern:
            return format_moment(moment, pattern.strip())
        return format_moment(moment, "YYYY-MM-DD" if name == "date" else "HH:mm")

    return _PLACEHOLDER.sub(fill, template)


def load(vault: Vault, kind: str) -> str:
    """The template text for ``kind``: the vault's own copy, else the built-in default."""
    path = f"{TEMPLATES_DIR}/{kind}.md"
    try:
        return vault.read_text(path)
    except NotFoundError:
        if kind not in DEFAULTS:
            raise NotFoundError(f"No template named {kind!r}.") from None
        return DEFAULTS[kind]
