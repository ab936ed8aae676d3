"""The vault's layout and ``memvault init``.

Initialising creates only what is missing: folders, the hub and core notes,
templates, and memvault's own state folder. An existing file is never
opened for writing, so running ``init`` twice, or on a vault someone has
kept in Obsidian for years, leaves every existing byte where it was.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from memvault.errors import VaultError
from memvault.locations import PRIVATE_FILE, STATE_DIR, private_state_dir
from memvault.vault import templates
from memvault.vault.memories import MEMORY_DIR, category_note
from memvault.vault.store import Vault
from memvault.vocabulary import CATEGORIES, CONVERSATION

FOLDERS = (
    MEMORY_DIR,
    "Tasks/active",
    "Tasks/completed",
    "Contacts",
    "Projects",
    "Insights",
    "Skills",
    "Decisions",
    "Journal",
    templates.TEMPLATES_DIR,
)

_MEMORY_LINKS = " · ".join(
    f"[[{MEMORY_DIR}/{title}|{title}]]" for key, title in CATEGORIES.items() if key != CONVERSATION
)

HOME = f"""---
tags: [home]
---
# Home

This vault is the long-term memory of an AI agent, kept by memvault. It is
plain Markdown: read it, edit it, link it. memvault picks up your edits and
never overwrites them silently.

## The essentials
- [[User Profile]]: who the agent works for and how they like things done
- [[Current Status]]: what the agent did last and what it is working on
- [[MEMORY]]: the living summary of what matters most
- [[Known Issues]]: mistakes not to repeat, and how they were solved

## Memory
Atomic memories, one bullet each, by category: {_MEMORY_LINKS}

## Tasks
One note per task: open ones in `Tasks/active/`, closed ones in
`Tasks/completed/`. New tasks start from [[Templates/task|the task template]].

## Projects
One note per project in `Projects/`, listing its tasks. See
[[Templates/project|the project template]].

## Contacts
People the agent knows, with how to reach them, in `Contacts/`. See
[[Templates/contact|the contact template]].

## Journal
A note per day in `Journal/`: actions taken, commands received,
observations, decisions and follow-ups. See [[Templates/journal|the journal template]].

## Insights
Patterns distilled from many memories, in `Insights/`. See
[[Templates/insight|the insight template]].

## Skills
Reusable procedures the agent has learned, in `Skills/`. See
[[Templates/skill|the skill template]].

## Decisions
- [[Decision Log]]: what was decided, when and why
"""

MEMORY = """---
tags: [memory]
---
# MEMORY

The living summary of what matters most. memvault regenerates it from the
vault on a schedule; until then, it is yours to fill. Back to [[Home]].

## Who I work for

## Current focus

## Key facts

## Preferences
"""

USER_PROFILE = """---
name:
timezone:
tags: [profile]
---
# User Profile

## About

## Preferences

## Communication
"""

CURRENT_STATUS = """# Current Status

- **Last active:** never
- **Last command:**
- **Last outcome:**
"""

KNOWN_ISSUES = """# Known Issues

Problems the agent ran into and how they were resolved, so later runs avoid them.

"""

DECISION_LOG = """# Decision Log

What was decided, when and why; newest last.

"""

CONFIG_TOML = """# memvault settings for this vault.
# Environment variables (MEMVAULT_<NAME>) and command-line flags override these.
# `memvault config show` prints the effective values and where each came from.

# The owner's timezone (IANA name); journal days and timestamps use it.
# timezone = "Europe/Berlin"

# How the agent refers to its owner.
# owner_name = "Alex"
"""

STATE_GITIGNORE = """# memvault's derived and secret state: rebuildable or private.
*
!.gitignore
!config.toml
"""

CORE_NOTES: dict[str, str] = {
    "Home.md": HOME,
    "MEMORY.md": MEMORY,
    "User Profile.md": USER_PROFILE,
    "Current Status.md": CURRENT_STATUS,
    "Known Issues.md": KNOWN_ISSUES,
    "Decisions/Decision Log.md": DECISION_LOG,
}


@dataclass
class InitReport:
    """What ``init`` created and what it found already there."""

    root: str
    created: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {"root": self.root, "created": list(self.created), "kept": list(self.kept)}


def init_vault(vault: Vault) -> InitReport:
    """Create the layout inside ``vault.root``, keeping everything that exists."""
    root = vault.root
    if root.exists() and not root.is_dir():
        raise VaultError(f"{root} is a file, not a folder; choose another vault path.")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise VaultError(f"Cannot create the vault folder {root}: {exc.strerror}.") from exc
    report = InitReport(root=str(root))
    for folder in FOLDERS:
        target = vault.resolve(folder)
        if target.is_dir():
            report.kept.append(folder + "/")
        else:
            target.mkdir(parents=True, exist_ok=True)
            report.created.append(folder + "/")
    state = private_state_dir(vault.state_dir)  # the owner's alone: tokens, logs, index
    for name, text in ((".gitignore", STATE_GITIGNORE), ("config.toml", CONFIG_TOML)):
        try:
            descriptor = os.open(state / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(text)
            report.created.append(f"{STATE_DIR}/{name}")
        except FileExistsError:
            report.kept.append(f"{STATE_DIR}/{name}")
    files = dict(CORE_NOTES)
    for category in (c for c in CATEGORIES if c != CONVERSATION):  # a folder, made as needed
        files[f"{MEMORY_DIR}/{CATEGORIES[category]}.md"] = category_note(category)
    for kind, text in templates.DEFAULTS.items():
        files[f"{templates.TEMPLATES_DIR}/{kind}.md"] = text
    for path, text in files.items():
        (report.created if vault.create_text(path, text) else report.kept).append(path)
    return report
