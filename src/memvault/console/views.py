"""What the console's pages show, gathered from the daemon's services (no HTTP here).

Each function returns plain values a template renders; the pages module
decides who may see them. The doctor's checks take a while (disk, index,
model), so Today shows the doctor's last report and asks for a new one beside the
page when it is older than :data:`HEALTH_EVERY` seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from memvault.acting import confined_agent, sees
from memvault.console.stamped import Stamped
from memvault.errors import MemvaultError
from memvault.gateway.daemon import Daemon
from memvault.gateway.doctor import Report
from memvault.gateway.events import Event
from memvault.gateway.routes.memory import run_search, visible
from memvault.index.filters import SearchFilters, parse_day
from memvault.index.graph import block_links, resolve_links
from memvault.text import one_line
from memvault.vault.contacts import CONTACTS_DIR
from memvault.vault.entities import ENTITY_FOLDERS
from memvault.vault.markdown import extract_links
from memvault.vault.memories import LOW_TRUST, MEMORY_DIR, Memory, MemoryFile
from memvault.vault.notes import content_hash
from memvault.vault.store import decode_text
from memvault.vault.tasks import ACTIVE_DIR
from memvault.vocabulary import CATEGORIES, KINDS

_log = logging.getLogger(__name__)
HEALTH_EVERY = 30.0
FEED_SHOWN = 20
RESULTS_SHOWN = 20
RECENT_SHOWN = 30
# A channel in one of these states is working, or was never meant to run.
_CHANNEL_FINE = ("running", "disabled", "starting", "connected")
_FEED_TEXT_CHARS = 160
_ERROR_CHARS = 200
# A failing job's last failed run is looked for among its newest runs (as engine.failures).
FAILED_LOOKED_AT = 10


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
    failing_jobs: list[dict[str, Any]] = field(default_factory=list)
    feed: list[FeedItem] = field(default_factory=list)
    last_event: int = 0


class Health:
    """The doctor's report, made again when older than ``every`` seconds.

    Only the first visit waits for the doctor. A later visit that finds the report
    stale is shown it as it is while one thread makes the next (the index's check
    alone is about 100 ms at 10,000 memories), so no visit pays for the refresh.
    """

    def __init__(self, daemon: Daemon, every: float = HEALTH_EVERY) -> None:
        self.daemon = daemon
        self.every = every
        self._report: Report | None = None
        self._made = 0.0
        self._lock = threading.Lock()
        self._refreshing: threading.Thread | None = None

    def report(self) -> Report:
        """A recent report: the first one made now, later ones at most one refresh old."""
        with self._lock:
            report = self._report
            if report is None:
                report = self._report = self.daemon.doctor()
                self._made = time.monotonic()
            elif time.monotonic() - self._made > self.every and self._refreshing is None:
                self._refreshing = threading.Thread(
                    target=self._refresh, name="memvault-console-health", daemon=True
                )
                self._refreshing.start()
            return report

    def wait(self) -> None:
        """Return once no refresh is under way (what a test waits for)."""
        refreshing = self._refreshing
        if refreshing is not None:
            refreshing.join()

    def _refresh(self) -> None:
        try:
            report = self.daemon.doctor()
        except Exception:  # the kept report stays; the next stale visit asks again
            _log.exception("the doctor's report for the console failed")
            report = None
        with self._lock:
            if report is not None:
                self._report = report
                self._made = time.monotonic()
            self._refreshing = None


def today(daemon: Daemon, health: Health | None, *, approvals: bool) -> Today:
    """What Today shows; ``health`` and ``approvals`` only where the scope reaches them."""
    runtime = daemon.runtime
    # What ``memvault status`` counts (vault.summary.summarize), the memories kept while no
    # memory file changes: counting them read all 10,000 on every visit.
    entries = runtime.vault.list()
    per_folder = Counter(e.path.rsplit("/", 1)[0] if "/" in e.path else "" for e in entries)
    counts = {
        "memories": _COUNTED.get(runtime.vault, (MEMORY_DIR,), lambda: _memory_count(daemon)),
        "open tasks": per_folder[ACTIVE_DIR],
        "contacts": per_folder[CONTACTS_DIR],
        "notes": len(entries),
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
        failing_jobs=failing_jobs(daemon),
        feed=[feed_item(e) for e in reversed(events)],
        last_event=daemon.bus.last_id,
    )


_COUNTED: Stamped[int] = Stamped(keep=1)


def _memory_count(daemon: Daemon) -> int:
    """The memories in force, what was said in conversations left out (as ``summarize``)."""
    return sum(1 for m in daemon.runtime.memories.all(include_archived=False) if not m.said)


def failing_jobs(daemon: Daemon) -> list[dict[str, Any]]:
    """The jobs whose latest finished run failed: how many times in a row, and the last
    failed run (its id, when it ended, its error in one line), as the Jobs page counts them."""
    engine = daemon.jobs
    failing = []
    for name in sorted(engine.jobs):
        failures = engine.failures(name)
        if not failures:
            continue
        # The failed run is among the newest few (runs skipped or running since come first).
        last = next(
            (r for r in engine.history(name, FAILED_LOOKED_AT) if r.status == "failed"), None
        )
        if last is not None:
            failing.append(
                {
                    "job": name,
                    "failures": failures,
                    "run": last.id,
                    "when": last.finished or last.started,
                    "error": one_line(last.error or "no error was recorded", _ERROR_CHARS),
                }
            )
    return failing


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
    text = one_line(str(text), _FEED_TEXT_CHARS)
    when = event.observed_at.astimezone().strftime("%H:%M:%S")
    return FeedItem(event.id, event.type, when, text)


@dataclass(frozen=True)
class Filters:
    """The Memories page's search form, as given."""

    q: str = ""
    kind: str = "memory"
    category: str = ""
    tag: str = ""
    source: str = ""  # the way a memory came in: cli, api, mcp, a channel ...
    since: str = ""  # YYYY-MM-DD, created on or after
    until: str = ""  # YYYY-MM-DD, created before the day after
    trust: str = ""  # "low" (marked as instructions from someone else), "normal", or any

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds searched (every kind for ``all``)."""
        return () if self.kind == "all" else (self.kind,)

    @property
    def by_memory(self) -> bool:
        """Whether a filter only memories have (source, trust) narrows the search."""
        return bool(self.source or self.trust)

    def query(self) -> str:
        """The form as a query string (what the address bar shows for it)."""
        given = {k: v for k, v in asdict(self).items() if v and not (k == "kind" and v == "memory")}
        return urlencode(given)

    def admits(self, memory: Memory) -> bool:
        """Whether a memory passes the filters only memories have."""
        if self.source and (memory.source or "").casefold() != self.source.casefold():
            return False
        if self.trust == LOW_TRUST and memory.trust != LOW_TRUST:
            return False
        return not (self.trust == "normal" and memory.trust == LOW_TRUST)


KIND_CHOICES = ("memory", *[k for k in KINDS if k != "memory"], "all")
CATEGORY_CHOICES = tuple(CATEGORIES)
TRUST_CHOICES = (LOW_TRUST, "normal")


_SOURCES: Stamped[list[str]] = Stamped(keep=1)
_LISTED: Stamped[list[Memory]] = Stamped()


def sources(daemon: Daemon) -> list[str]:
    """The sources memories came from, for the form's choice (worked out again only when
    a memory file's size or times changed: reading 10,000 memories takes a while, and
    even checking every file's bytes costs more than the page's search)."""
    memories = daemon.runtime.memories

    def work_out() -> list[str]:
        files = memories.readable()
        every = {m.source for f in files for m in f.memories if m.source and not m.retired}
        return sorted(every, key=str.casefold)[:50]

    return _SOURCES.get(daemon.runtime.vault, (MEMORY_DIR,), work_out)


def _dates(daemon: Daemon, filters: Filters) -> tuple[datetime | None, datetime | None]:
    tz = daemon.runtime.clock.tz
    until = parse_day(filters.until or None, tz)
    # The page's "to" day is included: the search's bound is the start of the next day.
    return parse_day(filters.since or None, tz), until + timedelta(days=1) if until else None


def search(daemon: Daemon, filters: Filters) -> tuple[list[dict[str, Any]], str | None]:
    """The hybrid search's hits for the form (what ``/v1/search`` answers) and its notice;
    source and trust narrow it to the memories that pass them, and each memory hit gets
    its importance, a reason the ranking weighed."""
    since, until = _dates(daemon, filters)
    only = None
    if filters.by_memory:  # only then is every memory gone through
        only = frozenset(
            m.id
            for f in daemon.runtime.memories.readable()
            for m in f.memories
            if not m.retired and sees(m.agent) and filters.admits(m)
        )
    found = run_search(
        daemon,
        filters.q,
        RESULTS_SHOWN,
        SearchFilters(
            kinds=filters.kinds,
            category=filters.category or None,
            tags=(filters.tag,) if filters.tag else (),
            since=since,
            until=until,
            memory_ids=only,
        ),
        keyword=False,
        mmr=None,
        min_score=None,
    )
    hits = list(found["result"])
    files = _files_of(daemon, hits)
    for hit in hits:
        file = files.get(hit.get("path") or "")
        held = file.find(hit["id"]) if file is not None and hit.get("id") else None
        hit["importance"] = held.importance if held is not None else None
        hit["trust"] = held.trust if held is not None else None
        # ``source`` is the index's (memory or sessions); this is the way the memory came in.
        hit["came_from"] = held.source if held is not None else None
    return hits, found["notice"]


def _files_of(daemon: Daemon, hits: list[dict[str, Any]]) -> dict[str, MemoryFile]:
    """The memory files the memory hits are in, by path: only those are read (reading every
    memory file took longer than the search itself)."""
    memories = daemon.runtime.memories
    out: dict[str, MemoryFile] = {}
    for path in dict.fromkeys(h["path"] for h in hits if h.get("kind") == "memory"):
        try:
            out[path] = memories.read(path)
        except MemvaultError:  # gone or no longer text since the search: no extra reasons
            continue
    return out


def recent(daemon: Daemon, filters: Filters) -> list[dict[str, Any]]:
    """The newest memories under the form's filters (no words to search for): the newest
    first, from the listing of the category and tag (kept while no memory file changes),
    gone through from its end only until the page is full."""
    since, until = _dates(daemon, filters)
    memories = daemon.runtime.memories
    category, tag = filters.category or None, filters.tag or None
    found = _LISTED.get(
        daemon.runtime.vault,
        (MEMORY_DIR,),
        lambda: memories.list(category=category, tag=tag),
        (category, tag),
    )
    shown: list[dict[str, Any]] = []
    for m in reversed(found):
        if (
            sees(m.agent)
            and filters.admits(m)
            and (since is None or (m.created is not None and m.created >= since))
            and (until is None or (m.created is not None and m.created < until))
        ):
            shown.append(m.to_dict())
            if len(shown) == RECENT_SHOWN:
                break
    return shown


def memory(daemon: Daemon, memory_id: str) -> dict[str, Any]:
    """A memory's page: the memory, what changed it, who read it, its Obsidian link, and
    the hash of its note as read (an edit carries it back: see ``Consolidator.edit``)."""
    found = visible(daemon, memory_id)
    # The memory and the hash from one read of its file (the store's cached parse of
    # those very bytes): a file changed between two reads cannot pair them wrongly.
    parsed = daemon.runtime.memories.read(found.path)
    found = parsed.find(found.id) or found
    note = decode_text(parsed.data, found.path)
    daemon.runtime.record_reads([found.id], "get")
    return {
        "hash": content_hash(note),
        "memory": found.to_dict(),
        "history": [c.to_dict() for c in daemon.runtime.consolidation.history(found.id)],
        "reads": [r.to_dict() for r in daemon.runtime.reads.of(found.id, 20)],
        "obsidian": obsidian_link(daemon.runtime.vault.root.name, found.path),
        **memory_links(daemon, found),
    }


def memory_links(daemon: Daemon, found: Memory) -> dict[str, list[dict[str, Any]]]:
    """A memory's links: those in its text (``links``) and those into it from notes and
    other memories (``linked_from``: ``[[Memory/Facts#^id]]``), as the index knows them.

    Each goes to the page that shows it best: an entity's page or a memory's in the
    console, else the note in Obsidian (a note not written yet: Obsidian makes it).
    """
    daemon.fresh_index()
    index = daemon.runtime.index
    vault = daemon.runtime.vault.root.name
    written = [link for link in extract_links(found.text) if link.target]
    leads = resolve_links(index, found.path, {link.target for link in written}) if written else {}
    links = []
    for link in written:
        path = leads[link.target]
        block = link.subpath[1:] if link.is_block_ref and link.subpath else None
        links.append(
            {
                "text": link.alias or link.target,
                "path": path,
                "href": _page_of(vault, path, block)
                if path
                else obsidian_link(vault, link.target, "new"),
            }
        )
    linked_from = []
    for into in block_links(index, found.path, found.id):
        if into.memory is not None and not _may_see(daemon, into.memory):
            continue
        linked_from.append(
            {
                "text": into.text or f"{into.source}, line {into.line}",
                "memory": into.memory,
                "href": _page_of(vault, into.source, into.memory),
            }
        )
    return {"links": links, "linked_from": linked_from}


def _page_of(vault: str, path: str, block: str | None) -> str:
    """The console's page of a memory (a block of a memory file) or an entity, else the
    note's ``obsidian://`` link."""
    if block and path.startswith(f"{MEMORY_DIR}/"):
        return f"/memories/{quote(block, safe='')}"
    if path.split("/", 1)[0] in ENTITY_FOLDERS:
        return f"/knowledge/{quote(path, safe='/')}"
    return obsidian_link(vault, path)


def _may_see(daemon: Daemon, memory_id: str) -> bool:
    """Whether the console's principal may see the memory (every one, unless confined)."""
    if confined_agent() is None:
        return True
    try:
        visible(daemon, memory_id)
    except MemvaultError:
        return False
    return True


def obsidian_link(vault_name: str, path: str, action: str = "open") -> str:
    """The ``obsidian://`` link opening ``path`` in the vault named ``vault_name`` (with
    ``action`` "new": making the note)."""
    return f"obsidian://{action}?vault={quote(vault_name, safe='')}&file={quote(path, safe='')}"


def approvals(daemon: Daemon) -> list[dict[str, Any]]:
    """The tool calls waiting for the owner, oldest first: what would run, since when, and
    who asked (the session, its channel, whom the chat is with)."""
    now = daemon.runtime.clock.now()
    out = []
    for waiting in daemon.hub.approvals.pending():
        request = waiting.request
        asked = waiting.requested_at or now
        out.append(
            {
                "id": waiting.short_id,
                "hash": waiting.call_hash,
                "tool": request.tool,
                "tier": int(request.tier),
                "category": request.category,
                "summary": request.summary,
                "arguments": request.arguments,
                "session": waiting.session,
                "channel": waiting.channel,
                "requested_at": asked.isoformat(timespec="seconds"),
                "ago": ago(now - asked),
                "asker": asker(daemon, waiting.channel, waiting.session),
            }
        )
    return sorted(out, key=lambda a: (a["requested_at"], a["id"]))


def ago(elapsed: timedelta) -> str:
    """How long ago, as the owner says it: "just now", "4 min ago", "2 h 5 min ago"."""
    minutes = max(0, int(elapsed.total_seconds() // 60))
    if minutes == 0:
        return "just now"
    if minutes < 60:
        return f"{minutes} min ago"
    if minutes < 24 * 60:
        hours, rest = divmod(minutes, 60)
        return f"{hours} h {rest} min ago" if rest else f"{hours} h ago"
    days = minutes // (24 * 60)
    return f"{days} day{'s' if days > 1 else ''} ago"


def asker(daemon: Daemon, channel: str, session: str) -> dict[str, Any]:
    """Whom a channel session's chat is with: its contact's name, else the name the chat's
    last sender gave; and whether it is the owner's own chat. Empty for another session."""
    chat = session.removeprefix(f"{channel}:") if session.startswith(f"{channel}:") else ""
    if not chat:
        return {"name": None, "owner": False}
    hub = daemon.hub
    try:
        owner = chat in hub.access.config(channel).owner
    except MemvaultError:  # a channel no longer configured
        owner = False
    try:
        contact = daemon.runtime.contacts.find_by_identity(channel, chat)
    except MemvaultError:
        contact = None
    name = contact.name if contact is not None else None
    if name is None:
        known = hub.store.sender(channel, chat)
        name = known.name if known is not None else None
    if name is None:
        recent = hub.store.inbox(channel, chat_id=chat, limit=1)
        name = recent[-1]["sender_name"] if recent else None
    return {"name": name, "owner": owner}


HISTORY_SHOWN = 30


def approval_history(daemon: Daemon) -> list[dict[str, Any]]:
    """The calls answered or timed out, newest first: who decided, when, and how (in this
    console, or from the phone: the channel and the sender whose reply it was)."""
    out = []
    askers: dict[tuple[str, str], dict[str, Any]] = {}
    for row in daemon.hub.store.resolved_approvals(HISTORY_SHOWN):
        by = row["resolved_by"]
        how = "timed out" if by is None else "console" if by == "console" else "phone"
        where = (row["channel"], row["session"])
        if where not in askers:
            askers[where] = asker(daemon, *where)
        out.append({**row, "how": how, "by": by or "", "asker": askers[where]})
    return out
