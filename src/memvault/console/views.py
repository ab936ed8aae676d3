"""What the console's pages show, gathered from the daemon's services (no HTTP here).

Each function returns plain values a template renders; the pages module
decides who may see them. The doctor's checks take a while (disk, index,
model), so Today shows a report at most :data:`HEALTH_EVERY` seconds old.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from memvault.acting import sees
from memvault.gateway.daemon import Daemon
from memvault.gateway.doctor import Report
from memvault.gateway.events import Event
from memvault.gateway.routes.memory import run_search, visible
from memvault.index.filters import SearchFilters
from memvault.vault.summary import summarize
from memvault.vocabulary import CATEGORIES, KINDS

HEALTH_EVERY = 30.0
FEED_SHOWN = 20
RESULTS_SHOWN = 20
RECENT_SHOWN = 30
# A channel in one of these states is working, or was never meant to run.
_CHANNEL_FINE = ("running", "disabled", "starting", "connected")
_FEED_TEXT_CHARS = 160


@dataclass
class FeedItem:
    """One line of the live activity feed."""

    id: int
    type: str
    when: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        """What the page's script receives for a live line."""
        return {"id": self.id, "type": self.type, "when": self.when, "text": self.text}


@dataclass
class Today:
    """The Today page: health, counts, what waits, what is down, what just happened."""

    health: dict[str, Any] | None  # the doctor's summary; None: the scope does not reach it
    failing: list[dict[str, Any]]  # the checks that warn or fail
    counts: dict[str, int]
    approvals: int | None  # None: the scope does not reach them
    channels_down: list[dict[str, Any]]
    feed: list[FeedItem] = field(default_factory=list)
    last_event: int = 0


class Health:
    """The doctor's report, made again when older than ``every`` seconds."""

    def __init__(self, daemon: Daemon, every: float = HEALTH_EVERY) -> None:
        self.daemon = daemon
        self.every = every
        self._report: Report | None = None
        self._made = 0.0
        self._lock = threading.Lock()

    def report(self) -> Report:
        """A recent report."""
        with self._lock:
            if self._report is None or time.monotonic() - self._made > self.every:
                self._report = self.daemon.doctor()
                self._made = time.monotonic()
            return self._report


def today(daemon: Daemon, health: Health | None, *, approvals: bool) -> Today:
    """What Today shows; ``health`` and ``approvals`` only where the scope reaches them."""
    summary = summarize(daemon.runtime.vault, daemon.runtime.memories)
    counts = {
        "memories": summary.counts.get("memories", 0),
        "open tasks": summary.counts.get("tasks_open", 0),
        "contacts": summary.counts.get("contacts", 0),
        "notes": summary.notes,
    }
    shown: dict[str, Any] | None = None
    failing: list[dict[str, Any]] = []
    if health is not None:
        report = health.report().to_dict()
        shown = report["summary"]
        failing = [c for c in report["checks"] if c["status"] != "ok"]
    down = [
        {"channel": c["channel"], "state": c["state"], "error": c["error"]}
        for c in daemon.hub.status()
        if c["enabled"] and (c["error"] or c["state"] not in _CHANNEL_FINE)
    ]
    waiting = len(daemon.hub.approvals.pending()) if approvals else None
    events = daemon.bus.last(FEED_SHOWN)
    return Today(
        health=shown,
        failing=failing,
        counts=counts,
        approvals=waiting,
        channels_down=down,
        feed=[feed_item(e) for e in reversed(events)],
        last_event=daemon.bus.last_id,
    )


def feed_item(event: Event) -> FeedItem:
    """An event as one line of the feed."""
    payload = event.payload
    if payload.get("forgotten"):
        text = "(forgotten)"
    elif event.type == "memory_stored":
        text = f"Remembered ({payload.get('category')}): {payload.get('text', '')}"
    elif event.type == "memory_forgotten":
        text = f"Forgot {payload.get('id')}"
    elif event.type == "session_message":
        who = payload.get("sender") or payload.get("role") or "someone"
        text = f"{payload.get('channel') or 'session'} · {who}: {payload.get('text', '')}"
    elif event.type == "agent_run":
        text = f"Agent run {payload.get('status')}: {payload.get('summary') or ''}"
    elif event.type == "note_changed":
        text = f"Note {payload.get('change')}: {payload.get('path')}"
    elif event.type.startswith("approval_"):
        text = f"Approval {payload.get('status', 'requested')}: {payload.get('tool')}"
    elif event.type.startswith("job"):
        text = f"Job {payload.get('job') or payload.get('name') or ''} {payload.get('status', '')}"
    else:
        text = event.type.replace("_", " ")
    text = " ".join(str(text).split())
    if len(text) > _FEED_TEXT_CHARS:
        text = text[: _FEED_TEXT_CHARS - 1] + "…"
    when = event.observed_at.astimezone().strftime("%H:%M:%S")
    return FeedItem(event.id, event.type, when, text)


@dataclass(frozen=True)
class Filters:
    """The Memories page's search form, as given."""

    q: str = ""
    kind: str = "memory"
    category: str = ""
    tag: str = ""

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds searched (every kind for ``all``)."""
        return () if self.kind == "all" else (self.kind,)


KIND_CHOICES = ("memory", *[k for k in KINDS if k != "memory"], "all")
CATEGORY_CHOICES = tuple(CATEGORIES)


def search(daemon: Daemon, filters: Filters) -> tuple[list[dict[str, Any]], str | None]:
    """The hybrid search's hits for the form (what ``/v1/search`` answers) and its notice."""
    found = run_search(
        daemon,
        filters.q,
        RESULTS_SHOWN,
        SearchFilters(
            kinds=filters.kinds,
            category=filters.category or None,
            tags=(filters.tag,) if filters.tag else (),
        ),
        keyword=False,
        mmr=None,
        min_score=None,
    )
    return list(found["result"]), found["notice"]


def recent(daemon: Daemon, filters: Filters) -> list[dict[str, Any]]:
    """The newest memories under the form's category and tag (no words to search for)."""
    found = daemon.runtime.memories.list(category=filters.category or None, tag=filters.tag or None)
    shown = [m for m in found if sees(m.agent)][-RECENT_SHOWN:]
    return [m.to_dict() for m in reversed(shown)]


def memory(daemon: Daemon, memory_id: str) -> dict[str, Any]:
    """A memory's page: the memory, what changed it, who read it, its Obsidian link."""
    found = visible(daemon, memory_id)
    daemon.runtime.record_reads([found.id], "get")
    return {
        "memory": found.to_dict(),
        "history": [c.to_dict() for c in daemon.runtime.consolidation.history(found.id)],
        "reads": [r.to_dict() for r in daemon.runtime.reads.of(found.id, 20)],
        "obsidian": obsidian_link(daemon.runtime.vault.root.name, found.path),
    }


def obsidian_link(vault_name: str, path: str) -> str:
    """The ``obsidian://`` link opening ``path`` in the vault named ``vault_name``."""
    return f"obsidian://open?vault={quote(vault_name, safe='')}&file={quote(path, safe='')}"


def approvals(daemon: Daemon) -> list[dict[str, Any]]:
    """The tool calls waiting for the owner, oldest first."""
    out = []
    for waiting in daemon.hub.approvals.pending():
        request = waiting.request
        out.append(
            {
                "id": waiting.short_id,
                "hash": waiting.call_hash,
                "tool": request.tool,
                "tier": int(request.tier),
                "summary": request.summary,
                "arguments": request.arguments,
                "session": waiting.session,
                "channel": waiting.channel,
            }
        )
    return sorted(out, key=lambda a: a["id"])
