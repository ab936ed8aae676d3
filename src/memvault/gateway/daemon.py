"""The daemon's state: one vault's services, the event bus, sessions, and background work.

:class:`Daemon` is what ``memvault serve`` runs. It owns the vault's
:class:`~memvault.runtime.Runtime`, the operational database, the event bus
and the tokens, turns what happens (a memory stored, a note edited in
Obsidian, a message logged, embeddings filled) into events, and runs the
background threads: the vault watcher, the embedding backfill, and the
model warm-up. The HTTP app (:mod:`memvault.gateway.app`) is a thin layer
over it.

With ``[storage] backend = "postgres"`` its events also fan out to the other
daemons on the database, and theirs come in (:mod:`memvault.storage.notify`).
A replica (``replica=True``, :mod:`memvault.gateway.replica`) runs none of the
background work that writes: no watcher, backfill, jobs, channels or session
sweeps, and never syncs the index from its own folder; it only warms the model
for searches and relays events.
"""

from __future__ import annotations

import hashlib
import logging
import socket
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memvault.agent.loop import Agent, RunResult, StepSink
from memvault.agent.sessions import SessionCloser
from memvault.channels.hub import Hub
from memvault.channels.owner import owner_channel, tell_owner
from memvault.channels.router import Hooks, Turn
from memvault.channels.tools import full_registry
from memvault.errors import MemvaultError
from memvault.gateway.access import ToolScopes
from memvault.gateway.client import DaemonLock
from memvault.gateway.doctor import DaemonFacts, Report, diagnose
from memvault.gateway.events import Event, EventBus, IdStore
from memvault.gateway.replica import primary_url
from memvault.gateway.security import check_bind, ensure_secret
from memvault.gateway.telemetry import LocationDiary, LocationSample, Received
from memvault.gateway.tokens import TokenBook
from memvault.index.backfill import Backfill
from memvault.index.index import SyncReport
from memvault.index.watch import follow
from memvault.jobs import SkipRun
from memvault.jobs.catalog import make_engine
from memvault.llm.base import LLMNotConfiguredError, Provider, TextSink
from memvault.llm.factory import Models
from memvault.locations import APPROVAL_FILE, TOKEN_FILE, tighten
from memvault.mcp.server import MemvaultMCP
from memvault.memory.sessions import Message, Session
from memvault.privacy.receipts import Place, Receipt
from memvault.runtime import Runtime
from memvault.tools import ToolRegistry
from memvault.tools.policy import AllowAll, DenyAll, Policy
from memvault.vault.memories import Memory
from memvault.vault.store import Change
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.storage.notify import EventFanOut

log = logging.getLogger(__name__)

_EVENT_IDS_KEY = "events.reserved_through"
TASKS_PREFIX = "Tasks/"
# Progress events at most this often (seconds), so a big index does not flood the bus.
_PROGRESS_EVERY = 1.0
_MANY_CHANGES = 200


class Daemon:
    """Everything one ``memvault serve`` process keeps for one vault."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        host: str | None = None,
        port: int | None = None,
        registry: ToolRegistry | None = None,
        background: bool = True,
        replica: bool = False,
    ) -> None:
        settings = runtime.settings
        # A replica without PostgreSQL or a primary stops here, before anything starts.
        self.primary_url = primary_url(settings) if replica else None
        check_bind(host or settings.server.host, allow_remote=settings.server.allow_remote)
        # First: a second daemon for the vault stops here, before it touches anything.
        self.lock = DaemonLock.claim(runtime.vault.root)
        self.runtime = runtime
        self.host = host or settings.server.host
        self.port = settings.server.port if port is None else port
        self.background = background
        state_dir = runtime.vault.state_dir
        self.state = runtime.state
        ids_key = _event_ids_key(runtime, replica)
        self.bus = EventBus(
            settings.server.event_buffer,
            IdStore(
                lambda: self.state.get_meta(ids_key),
                lambda value: self.state.set_meta(ids_key, value),
            ),
        )
        self.fanout: EventFanOut | None = (
            self._fan_out() if settings.storage.backend == "postgres" else None
        )
        self.sessions = runtime.sessions
        self.diary = LocationDiary(self.state, runtime.journal, runtime.clock, settings.telemetry)
        # The channel and job tools use this daemon's hub and job engine (made below).
        self.registry = registry or full_registry(
            lambda _runtime: self.hub, lambda _runtime: self.jobs
        )
        self.token_path = state_dir / TOKEN_FILE
        self.approval_path = state_dir / APPROVAL_FILE
        self.token = self._secret(self.token_path)
        self.approval_token = self._secret(self.approval_path)
        self.tokens = TokenBook(self.state)  # the named tokens, besides the owner's
        self.mcp = MemvaultMCP(runtime, self.registry, background=False, gate=ToolScopes())
        # A model per purpose ([llm], [llm.jobs], [llm.replies]); none is a normal state.
        self.models = Models(settings.llm)
        self.provider: Provider | None = self.models.provider("default")
        self.llm_problem: MemvaultError | None = self.models.problem("default")
        self.reply_provider: Provider | None = self.models.provider("replies")
        self.closer = SessionCloser(
            self.sessions, settings.agent, self.provider, end=self._end_announced
        )
        self._agent: Agent | None = None
        self._reply_agent: Agent | None = None
        self.hub = Hub(
            runtime,
            Hooks(
                publish=self._publish,
                log_message=self.log_message,
                end_session=self.end_session,
                end_if_idle=self.closer.end_if_idle,
                responder=self._respond if self.reply_provider is not None else None,
            ),
        )
        self.jobs = make_engine(
            runtime,
            provider=self.models.provider("jobs"),
            notify=self._tell_owner,
            publish=lambda kind, payload: self.bus.publish(kind, payload, source="jobs"),
        )
        self.started_at = time.monotonic()
        self.watching = threading.Event()
        self.stopping = threading.Event()
        self.embedder_error: str | None = None
        self._backfill: Backfill | None = None
        self._threads: list[threading.Thread] = []
        self._last_progress = 0.0
        runtime.vault.observe(self._vault_changed)
        runtime.memories.observe(self._memory_changed)
        runtime.forgetter.observe(self._forgotten)

    @property
    def role(self) -> str:
        """``primary`` (owns and writes the vault) or ``replica``."""
        return "replica" if self.primary_url is not None else "primary"

    @staticmethod
    def _secret(path: Any) -> str:
        value = ensure_secret(path)
        if tighten(path):
            log.warning("token file was readable by others; now owner-only", extra={"path": path})
        return value

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the background work: watcher, backfill, model warm-up."""
        if not self.background:
            return
        if self.fanout is not None:
            self.fanout.start()
        if self.primary_url is not None:  # a replica: the primary does the rest
            if self.runtime.embedder.enabled:
                self._spawn("memvault-warmup", self._warm_up)
            return
        self.hub.start()
        self._spawn("memvault-watch", self._watch)
        self._spawn("memvault-sessions", self._sweep_sessions)
        self._spawn("memvault-jobs", self._run_jobs)
        if self.runtime.embedder.enabled:
            self._spawn("memvault-warmup", self._warm_up)
            self._backfill = Backfill(self.runtime.index, on_progress=self._embedded)
            self._backfill.start()

    def begin_shutdown(self) -> None:
        """Stop accepting long-lived work: event streams end, background loops wind down."""
        if not self.stopping.is_set():
            log.info("shutting down")
        self.stopping.set()
        self.bus.close()

    def stop(self) -> None:
        """Stop the background threads (waiting ``server.shutdown_grace_seconds`` in all:
        the model loading, a batch of embeddings), close the databases, withdraw
        ``daemon.json`` and release the vault (after requests drained)."""
        self.begin_shutdown()
        grace = self.runtime.settings.server.shutdown_grace_seconds
        deadline = time.monotonic() + grace
        if self._backfill is not None:
            self._backfill.stop(timeout=grace)
        self.hub.stop(timeout=max(deadline - time.monotonic(), 0.0))
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        if self.fanout is not None:
            self.fanout.stop(timeout=max(deadline - time.monotonic(), 0.1))
        self.jobs.wait(max(deadline - time.monotonic(), 0.0))
        try:
            self.runtime.close()
        finally:
            self.lock.release()

    def _spawn(self, name: str, target: Any) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _watch(self) -> None:
        try:
            self.runtime.vault.finish_carries()  # before the sync, which then sees their lines
            report = self.runtime.index.sync(progress=self._indexing)
            self._external(report)
            follow(
                self.runtime.index,
                stop=self.stopping,
                ready=self.watching,
                on_batch=self._external,
            )
        except Exception:
            log.exception("the vault watcher stopped; edits made outside memvault go unseen")
        finally:
            self.watching.clear()

    def _warm_up(self) -> None:
        try:
            self.runtime.embedder.warm()
            self.embedder_error = None
            log.info("embedding model ready", extra={"model": self.runtime.embedder.identity})
        except MemvaultError as exc:
            self.embedder_error = exc.message
            log.warning("embedding model unavailable", extra={"error": exc.message})

    def fresh_index(self) -> None:
        """Sync the index before a search, unless the watcher already keeps it current (or
        this is a replica: the primary keeps the shared index, and the replica's folder is
        not the vault)."""
        if self.primary_url is None and not self.watching.is_set():
            self.runtime.index.sync()

    @property
    def uptime(self) -> float:
        """Seconds since the daemon started."""
        return time.monotonic() - self.started_at

    # -- events ------------------------------------------------------------------------

    def _fan_out(self) -> EventFanOut:
        """The link to the other daemons on the PostgreSQL database (imported only then:
        psycopg is an optional dependency)."""
        from memvault.storage.notify import EventFanOut, RemoteEvent
        from memvault.storage.postgres import Target, dsn_from_environment

        storage = self.runtime.settings.storage
        dsn = dsn_from_environment(storage)

        def deliver(event: RemoteEvent) -> None:
            self.bus.publish(
                event.type,
                event.payload,
                source=event.source,
                origin=event.origin,
                observed_at=event.observed_at,
            )

        fanout = EventFanOut(
            dsn,
            Target.of(dsn, storage.dsn_env),
            deliver,
            connect_timeout=storage.connect_timeout,
        )

        def send(event: Event) -> None:
            if event.origin is None:  # this daemon's own; a relayed one is not sent back
                fanout.send(event.type, event.source, event.payload, event.observed_at)

        self.bus.observe(send)
        return fanout

    def _vault_changed(self, change: Change) -> None:
        self._announce_change(change.path, change.kind, change.new_path, origin="memvault")

    def _announce_change(self, path: str, kind: str, new_path: str | None, origin: str) -> None:
        payload = {"path": path, "change": kind, "new_path": new_path, "origin": origin}
        self.bus.publish("note_changed", payload, source="vault")
        if path.startswith(TASKS_PREFIX) or (new_path or "").startswith(TASKS_PREFIX):
            self.bus.publish("task_changed", payload, source="vault")

    def _external(self, report: SyncReport) -> None:
        """Changes the watcher found (made in Obsidian, git, an editor)."""
        if report.touched > _MANY_CHANGES:
            # A first index or a git checkout: one summary rather than a flood.
            counts = {k: len(v) for k, v in report.to_dict().items() if isinstance(v, list)}
            self.bus.publish("vault_synced", {**counts, "origin": "external"}, source="vault")
            return
        for path in report.added:
            self._announce_change(path, "added", None, origin="external")
        for path in report.changed:
            self._announce_change(path, "changed", None, origin="external")
        for path in report.deleted:
            self._announce_change(path, "deleted", None, origin="external")
        for old, new in report.moved:
            self._announce_change(old, "moved", new, origin="external")

    def _forgotten(self, receipt: Receipt) -> None:
        """What was forgotten leaves the event buffer too (``/v1/poll``, ``/v1/events``);
        the ``memory_forgotten`` events stay, so clients learn what to drop."""
        emptied = self.bus.scrub(receipt.holds, spare=("memory_forgotten",))
        detail = (
            f"{counted(emptied, 'recent event')}: payload emptied"
            if emptied
            else "no recent event held it"
        )
        action = "redacted" if emptied else "checked"
        receipt.places.append(Place("event stream (in memory)", action, detail, emptied))

    def _memory_changed(self, event: str, memory: Memory) -> None:
        if event == "stored":
            payload: dict[str, Any] = {
                "id": memory.id,
                "text": memory.text,
                "category": memory.category,
                "importance": memory.importance,
                "tags": list(memory.tags),
                "source": memory.source,
                "path": memory.path,
            }
            self.bus.publish("memory_stored", payload, source="memory")
        else:
            self.bus.publish(
                "memory_forgotten", {"id": memory.id, "path": memory.path}, source="memory"
            )

    def _indexing(self, done: int, total: int, stage: str) -> None:
        self._progress(stage, done, total)

    def _embedded(self, done: int, pending: int) -> None:
        self._progress("embedding", done, pending, remaining=max(pending - done, 0))

    def _progress(self, stage: str, done: int, total: int, **extra: Any) -> None:
        now = time.monotonic()
        finished = done >= total or extra.get("remaining") == 0
        if not finished and now - self._last_progress < _PROGRESS_EVERY:
            return
        self._last_progress = now
        self.bus.publish(
            "index_progress",
            {"stage": stage, "done": done, "total": total, **extra},
            source="index",
        )

    # -- sessions and telemetry --------------------------------------------------------

    def log_message(self, key: str, text: str, **fields: Any) -> tuple[Session, Message]:
        """Log a message to a session and announce it."""
        session, message = self.sessions.log(key, text, **fields)
        self.bus.publish(
            "session_message",
            {"key": session.key, "session_id": session.id, **message.to_dict()},
            source=f"session:{message.channel}",
        )
        return session, message

    def end_session(self, key: str, summary: str | None = None) -> Session:
        """Close a session (summarised when no summary is given) and announce it."""
        return self.closer.end(key, summary)

    def _end_announced(self, key: str, summary: str | None) -> Session:
        session = self.sessions.end(key, summary)
        self.bus.publish("session_ended", session.to_dict(), source=f"session:{session.channel}")
        return session

    def _sweep_sessions(self) -> None:
        """End sessions that have gone quiet, with their summaries."""
        every = min(60.0, self.runtime.settings.agent.session_idle_minutes * 30)
        while not self.stopping.wait(every):
            try:
                self.closer.end_idle()
            except Exception:
                log.exception("ending idle sessions failed")

    def _run_jobs(self) -> None:
        """Mark runs a crash interrupted as failed, then run due jobs every tick."""
        try:
            self.jobs.recover()
        except Exception:
            log.exception("recovering interrupted job runs failed")
        every = self.runtime.settings.jobs.tick_seconds
        while not self.stopping.wait(every):
            try:
                if self.jobs.tick():
                    self.jobs.prune()
            except Exception:
                log.exception("running due jobs failed")

    def _tell_owner(self, text: str, channel: str | None) -> dict[str, Any]:
        """A job's message to the owner, over this daemon's hub; a skipped run if no channel
        can reach them."""
        if owner_channel(self.hub, channel) is None:
            raise SkipRun(
                "No enabled channel has an owner id to write to; set channels.NAME.owner "
                "(for example channels.telegram.owner) in .memvault/config.toml."
            )
        return tell_owner(self.hub, text, channel)

    # -- the agent ---------------------------------------------------------------------

    def agent(self) -> Agent:
        """The agent of API runs, on the [llm] model (one per daemon; approvals are decided
        per request)."""
        if self.provider is None:
            raise self.llm_problem or LLMNotConfiguredError("No language model is configured.")
        if self._agent is None:
            self._agent = self._new_agent(self.provider)
        return self._agent

    def reply_agent(self) -> Agent:
        """The agent answering channel messages, on the [llm.replies] model (the API runs'
        agent when both are one model)."""
        provider = self.reply_provider
        if provider is None:
            problem = self.models.problem("replies")
            raise problem or LLMNotConfiguredError("No language model answers channel messages.")
        if provider is self.provider:
            return self.agent()
        if self._reply_agent is None:
            self._reply_agent = self._new_agent(provider)
        return self._reply_agent

    def _new_agent(self, provider: Provider) -> Agent:
        return Agent(
            self.runtime,
            provider,
            registry=self.registry,
            approver=DenyAll(),
            log_message=self.log_message,
            closer=self.closer,
        )

    def run_agent(
        self,
        command: str,
        *,
        session: str,
        channel: str | None = None,
        sender: str | None = None,
        approved: bool = False,
        on_text: TextSink | None = None,
        on_step: StepSink | None = None,
        cancel: threading.Event | None = None,
    ) -> RunResult:
        """Run the agent for an API caller; tier 2 and 3 calls need ``approved``
        (the owner's approval token) or, for tier 2, autonomous mode."""
        agent = self.agent()
        agent.index_followed = self.watching.is_set()
        policy = Policy(
            approver=AllowAll() if approved else DenyAll(),
            mode=self.runtime.settings.tools.mode,
        )
        result = agent.run(
            command,
            session=session,
            channel=channel,
            sender=sender,
            on_text=on_text,
            on_step=on_step,
            cancel=cancel,
            policy=policy,
        )
        self._announce_run(result)
        return result

    def _announce_run(self, result: RunResult) -> None:
        self.bus.publish(
            "agent_run",
            {
                "session": result.session,
                "status": result.status,
                "summary": result.summary,
                "iterations": result.iterations,
                "tool_calls": len(result.tool_calls),
            },
            source="agent",
        )

    def _respond(self, turn: Turn) -> str:
        """The hub's responder: the agent answers a channel message in its session."""
        agent = self.reply_agent()
        agent.index_followed = self.watching.is_set()
        message = turn.message
        result = agent.run(
            turn.text,
            session=turn.session,
            channel=message.channel,
            sender=message.sender_name or message.sender_id,
            policy=turn.policy,
            recorded=True,
            sender_note=turn.contact,
            audience=turn.audience,
        )
        self._announce_run(result)
        if result.silent:
            return ""  # a protocol token only (NO_REPLY): the message gets no answer
        if result.ok:
            return result.answer or "(The agent finished without an answer.)"
        return f"I could not finish that ({result.status}): {result.summary}"

    def _publish(self, kind: str, payload: dict[str, Any], source: str) -> None:
        self.bus.publish(kind, payload, source=source)

    def receive_locations(self, samples: list[LocationSample]) -> Received:
        """Store location samples (journaling the ones that matter) and announce them."""
        received = self.diary.receive(samples)
        if received.received:
            self.bus.publish(
                "location_received",
                {
                    "received": received.received,
                    "duplicates": received.duplicates,
                    "journaled": received.journaled,
                },
                source="telemetry",
            )
        return received

    # -- health ------------------------------------------------------------------------

    def doctor(self) -> Report:
        """Every check, the daemon's own included."""
        backfill_error = self._backfill.last_error if self._backfill else None
        facts = DaemonFacts(
            host=self.host,
            port=self.port,
            watching=self.watching.is_set(),
            backfill_error=backfill_error,
            embedder_error=self.embedder_error,
            state=self.state,
            token_path=self.token_path,
            llm_health=self.provider.health if self.provider is not None else None,
            llm_healths={str(purpose): h for purpose, h in self.models.healths().items()},
            channel_checks=self.hub.checks(),
        )
        return diagnose(self.runtime, facts)

    def now(self) -> datetime:
        """The owner's current time."""
        return self.runtime.clock.now()


def _event_ids_key(runtime: Runtime, replica: bool) -> str:
    """Where the bus keeps its reserved ids in the state database. The primary keeps the
    key it always had; each replica has its own (by machine and folder), since with
    PostgreSQL the state, and so the key, is shared, and each daemon's ids must only grow
    for its own clients."""
    if not replica:
        return _EVENT_IDS_KEY
    where = f"{socket.gethostname()}:{runtime.vault.root}".encode()
    return f"{_EVENT_IDS_KEY}.replica.{hashlib.sha256(where).hexdigest()[:12]}"
