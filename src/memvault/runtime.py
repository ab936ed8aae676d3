"""The composition root: builds memvault's object graph from the settings.

Every entry point (CLI, daemon, MCP server, tests) opens a :class:`Runtime`
instead of wiring services by hand, so there is one place that decides
which parts a vault gets.
"""

from __future__ import annotations

from dataclasses import dataclass

from memvault.clock import Clock, load_timezone
from memvault.config import Settings
from memvault.vault.contacts import Contacts
from memvault.vault.journal import Journal
from memvault.vault.memories import Memories
from memvault.vault.notes import Notes
from memvault.vault.projects import Projects
from memvault.vault.store import Vault
from memvault.vault.tasks import Tasks


@dataclass
class Runtime:
    """The services of one vault."""

    settings: Settings
    clock: Clock
    vault: Vault
    notes: Notes
    memories: Memories
    tasks: Tasks
    contacts: Contacts
    projects: Projects
    journal: Journal

    @classmethod
    def open(cls, settings: Settings, *, clock: Clock | None = None) -> Runtime:
        """Wire the services for ``settings.vault`` (the folder must exist for most uses)."""
        clock = clock or Clock(load_timezone(settings.timezone))
        vault = Vault(settings.vault, lock_timeout=settings.lock_timeout)
        tasks = Tasks(vault, clock)
        return cls(
            settings=settings,
            clock=clock,
            vault=vault,
            notes=Notes(vault),
            memories=Memories(
                vault,
                clock,
                default_category=settings.memory.default_category,
                default_importance=settings.memory.default_importance,
            ),
            tasks=tasks,
            contacts=Contacts(vault, clock),
            projects=Projects(vault, clock, tasks),
            journal=Journal(vault, clock),
        )
