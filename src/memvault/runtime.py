"""The composition root: builds memvault's object graph from the settings.

Every entry point (CLI, daemon, MCP server, tests) opens a :class:`Runtime`
instead of wiring services by hand, so there is one place that decides
which parts a vault gets. Heavy parts (the index database, the embedding
model) are created on first use.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterable
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING

from memvault.clock import Clock, load_timezone
from memvault.config import Settings
from memvault.errors import MemvaultError, MissingExtraError
from memvault.index.embedders import Embedder, make_embedder
from memvault.index.index import MemoryIndex
from memvault.index.search import Searcher, SearchResults
from memvault.llm.base import Provider
from memvault.locations import STATE_DB, private_state_dir
from memvault.memory.consolidation import Consolidator
from memvault.memory.context import ContextBuilder, ContextResult, checked_budget
from memvault.memory.conversations import Conversations
from memvault.memory.outcomes import Outcomes
from memvault.memory.recalls import RecallLog
from memvault.memory.revisions import RevisionLog
from memvault.memory.runs import RunRecords
from memvault.memory.sessions import Session, Sessions
from memvault.memory.state import StateDB, StateStore
from memvault.privacy.reads import ReadLog, RecordedContext, current_way
from memvault.privacy.secrets import SecretScreen
from memvault.privacy.trust import TrustScreen
from memvault.text import check_text
from memvault.vault.contacts import Contacts
from memvault.vault.entities import Entities
from memvault.vault.journal import Journal
from memvault.vault.layout import init_vault
from memvault.vault.memories import Memories
from memvault.vault.notes import Notes
from memvault.vault.projects import Projects
from memvault.vault.store import Change, Vault
from memvault.vault.tasks import Tasks

if TYPE_CHECKING:
    from memvault.privacy.audiences import Audience, Audiences
    from memvault.privacy.capture import Capture
    from memvault.privacy.forgetting import Forgetter
    from memvault.privacy.views import AudienceView
    from memvault.storage.postgres import PostgresStorage

log = logging.getLogger(__name__)


class Runtime:
    """The services of one vault."""

    def __init__(
        self, settings: Settings, clock: Clock, *, embedder: Embedder | None = None
    ) -> None:
        self.settings = settings
        self.clock = clock
        if clock.locale is None:
            clock.locale = settings.locale  # the owner's language for dates (memvault.dates)
        self.vault = Vault(settings.vault, lock_timeout=settings.lock_timeout)
        # Secrets are kept out of what is stored ([privacy] secrets): notes, memories and
        # sessions get the screen; it is the memories' first, so no later screen sees one.
        self.secrets = SecretScreen(settings.privacy.secrets)
        self.notes = Notes(self.vault, screen=self.secrets)
        self.memories = Memories(
            self.vault,
            clock,
            default_category=settings.memory.default_category,
            default_importance=settings.memory.default_importance,
        )
        self.memories.screen(self.secrets.for_memory)
        # Text from anyone but the owner that reads as an order to the agent: [trust:: low].
        self.memories.screen(TrustScreen(settings.privacy.trust))
        self.tasks = Tasks(self.vault, clock, screen=self.secrets)
        self.contacts = Contacts(self.vault, clock, screen=self.secrets)
        self.projects = Projects(self.vault, clock, self.tasks, screen=self.secrets)
        self.journal = Journal(self.vault, clock)
        self.entities = Entities(self.vault)
        self._embedder = embedder
        self._index_enabled = True
        self.vault.observe(self._keep_index_current)

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        clock: Clock | None = None,
        embedder: Embedder | None = None,
        create: bool = False,
    ) -> Runtime:
        """Wire the services for the vault ``settings.vault``.

        The folder must be a vault (``memvault init`` made it): any other folder
        is refused with a VaultError, so nothing is written where no vault was
        meant to be. ``create`` makes the vault's layout first, as ``init`` does.
        """
        runtime = cls(settings, clock or Clock(load_timezone(settings.timezone)), embedder=embedder)
        if create:
            init_vault(runtime.vault)
        runtime.vault.require()
        # .memvault holds tokens, the index and conversation logs: an older vault's is
        # tightened to 0700 here (a read-only one stays readable; doctor reports it).
        with contextlib.suppress(OSError):
            private_state_dir(runtime.vault.state_dir)
        return runtime

    def _keep_index_current(self, change: Change) -> None:
        if self._index_enabled and self.vault.exists_on_disk():
            self.index.on_change(change)

    @cached_property
    def embedder(self) -> Embedder:
        """The configured embedder (the model itself loads on first use)."""
        return self._embedder or make_embedder(self.settings.embedder)

    @cached_property
    def storage(self) -> PostgresStorage | None:
        """The PostgreSQL database (``[storage] backend = "postgres"``), connected and
        migrated on first use; None with SQLite (files in ``.memvault``)."""
        if self.settings.storage.backend != "postgres":
            return None
        from memvault.storage.postgres import PostgresStorage

        return PostgresStorage.open(self.settings.storage)

    @cached_property
    def index(self) -> MemoryIndex:
        """The vault's search index (``.memvault/index.db``, or PostgreSQL's)."""
        return MemoryIndex(
            self.vault,
            self.memories,
            self.embedder,
            self.clock,
            settings=self.settings.index,
            search=self.settings.search,
            storage=self.storage,
        )

    @cached_property
    def searcher(self) -> Searcher:
        """Hybrid search over the index; the memories each search returns are recorded."""
        searcher = Searcher(self.index)
        searcher.observe(self._record_recalls)
        searcher.observe(self._record_reads)
        return searcher

    @cached_property
    def recalls(self) -> RecallLog:
        """When a search last returned each memory (the archival job reads it)."""
        return RecallLog(self.state)

    def _record_recalls(self, results: SearchResults) -> None:
        ids = [hit.id for hit in results if hit.id]
        if not ids:
            return
        try:
            self.recalls.record(ids, self.clock.now())
        except (MemvaultError, sqlite3.Error):  # a read-only vault: the search still answers
            log.debug("recall not recorded", exc_info=True)

    @cached_property
    def reads(self) -> ReadLog:
        """Who read each memory, when and how (``[privacy] reads_keep_days``)."""
        privacy = self.settings.privacy
        return ReadLog(
            self.state,
            self.clock.now,
            keep_days=privacy.reads_keep_days,
            per_memory=privacy.reads_per_memory,
        )

    def _record_reads(self, results: SearchResults) -> None:
        ids = [hit.id for hit in results if hit.id]
        way = current_way()
        if way.collect is not None:  # a context build: written once, when it is done
            way.collect.extend(ids)
            return
        self.record_reads(ids)

    @cached_property
    def runs(self) -> RunRecords:
        """What each agent run was given (``[agent] runs_keep_days``; the console shows it)."""
        return RunRecords(
            self.state,
            self.clock.now,
            keep_days=self.settings.agent.runs_keep_days,
            screen=self.secrets,
        )

    def record_reads(self, memory_ids: Iterable[str], path: str | None = None) -> None:
        """Record a read of each memory (``path``: search, context, tool or get; else the
        way the current request reads)."""
        ids = list(memory_ids)
        if not ids or self.settings.privacy.reads_keep_days <= 0:
            return
        try:
            self.reads.record(ids, path)
        except (MemvaultError, sqlite3.Error):  # a read-only vault: the read still answers
            log.debug("read not recorded", exc_info=True)

    @cached_property
    def forgetter(self) -> Forgetter:
        """Forgets memories, people and topics in every place that holds a copy."""
        from memvault.privacy.forgetting import Forgetter

        return Forgetter(
            vault=self.vault,
            memories=self.memories,
            contacts=self.contacts,
            entities=self.entities,
            journal=self.journal,
            settings=self.settings,
            index=lambda: self.index,
            state=lambda: self.state,
            searcher=lambda: self.searcher,
        )

    @cached_property
    def context(self) -> ContextBuilder:
        """Builds the Markdown an agent gets at the start of a run (each build's reads
        are recorded)."""
        return RecordedContext(
            record=self.record_reads,
            clock=self.clock,
            notes=self.notes,
            memories=self.memories,
            tasks=self.tasks,
            journal=self.journal,
            index=self.index,
            searcher=self.searcher,
            settings=self.settings.context,
            last_session=self._last_session,
            skills_folder=self.settings.jobs.skill_discovery.folder,
            last_messages=lambda session, count: self.sessions.messages(session.id, limit=count),
            first_session=self._first_session,
        )

    @cached_property
    def audiences(self) -> Audiences:
        """Who a conversation is with (the owner, a contact, a group)."""
        from memvault.privacy.audiences import Audiences

        return Audiences(self.settings, self.contacts)

    def audience_view(self, audience: Audience) -> AudienceView:
        """What a narrowed audience may see: its context, search and own note."""
        from memvault.privacy.views import AudienceView

        return AudienceView(
            audience,
            memories=self.memories,
            notes=self.notes,
            searcher=self.searcher,
            clock=self.clock,
            record=self.record_reads,
        )

    def build_context(
        self,
        query: str | None = None,
        budget_tokens: int | None = None,
        *,
        audience: str | None = None,
        wait_for_model: bool = True,
    ) -> ContextResult:
        """The context an agent gets, for the owner or as ``audience`` (``owner``,
        ``group:NAME`` or a contact) would get it (``memvault context --as``)."""
        chosen = self.audiences.named(audience) if audience else None
        if chosen is None or not chosen.narrowed:
            return self.context.build_result(query, budget_tokens, wait_for_model=wait_for_model)
        if query:
            check_text(query, "query")
        budget = checked_budget(budget_tokens, self.settings.context)
        view = self.audience_view(chosen)
        return view.context(query, budget, wait_for_model=wait_for_model)

    def _last_session(self) -> Session | None:
        """The latest ended session; None before any session (without creating state.db)."""
        fresh = self.storage is None and not (self.vault.state_dir / STATE_DB).exists()
        if "state" not in self.__dict__ and fresh:
            return None
        return self.sessions.last_ended()

    def _first_session(self) -> datetime | None:
        """When the first session began; None before any (without creating state.db)."""
        fresh = self.storage is None and not (self.vault.state_dir / STATE_DB).exists()
        if "state" not in self.__dict__ and fresh:
            return None
        rows = self.state.query("SELECT min(started_at) AS first FROM sessions")
        first = rows[0]["first"] if rows else None
        return datetime.fromisoformat(str(first)) if first else None

    @cached_property
    def state(self) -> StateStore:
        """The operational database (``.memvault/state.db``, or PostgreSQL's): sessions,
        messages, meta."""
        if self.storage is not None:
            from memvault.storage.pg_state import PgStateDB

            return PgStateDB(self.storage)
        return StateDB(self.vault.state_dir)

    @cached_property
    def sessions(self) -> Sessions:
        """Every conversation the agent takes part in; each turn is kept as a memory when
        the settings say so (:mod:`memvault.privacy.capture`)."""
        sessions = Sessions(self.state, self.clock, self.journal, screen=self.secrets)
        sessions.observe(self.capture)
        return sessions

    @cached_property
    def capture(self) -> Capture:
        """Keeps each turn of a conversation as a memory ([memory] capture)."""
        from memvault.privacy.capture import Capture

        return Capture(self.settings, self.audiences, Conversations(self.memories))

    @cached_property
    def consolidation(self) -> Consolidator:
        """Stores single memories (tools, CLI, HTTP, channels) with consolidation on write."""
        return Consolidator(
            self.memories,
            lambda: self.index,
            lambda: self.revisions,
            self.journal,
            self.clock,
            self.settings.memory,
            lambda: self._consolidation_provider,
        )

    @cached_property
    def revisions(self) -> RevisionLog:
        """What consolidation changed in memories, and the decisions left for review."""
        return RevisionLog(self.state)

    @cached_property
    def _consolidation_provider(self) -> Provider | None:
        """The model consolidation asks (short timeout, no retries), or None; made once."""
        from memvault.llm.factory import optional_provider

        llm = self.settings.llm
        quick = llm.model_copy(
            update={
                "timeout": min(llm.timeout, self.settings.memory.consolidation_timeout),
                "max_retries": 0,
            }
        )
        try:
            return optional_provider(quick)
        except MissingExtraError as exc:  # remember still stores (by rule); doctor says why
            log.warning("Memories are consolidated by rule: %s", exc.message)
            return None

    @cached_property
    def outcomes(self) -> Outcomes:
        """Writes what an agent run did to the journal, Current Status and Known Issues."""
        return Outcomes(self.vault, self.journal, self.clock, screen=self.secrets)

    def close(self) -> None:
        """Release the databases."""
        if "index" in self.__dict__:
            self.index.close()
        if "state" in self.__dict__:
            self.state.close()
        if self.__dict__.get("storage") is not None:
            self.__dict__["storage"].close()
