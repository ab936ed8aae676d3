"""Importers for an OpenClaw workspace's hand-written Markdown.

An OpenClaw agent keeps its memory in plain files of its workspace
(``~/.openclaw/workspace``): ``MEMORY.md`` (curated facts under ``##``
headings), ``memory/YYYY-MM-DD.md`` (one log per day), and often ``TODO.md``
and ``LEARNINGS.md``. Each importer reads one kind and writes it the memvault
way: MEMORY.md bullets become memories (the heading gives the category),
a day's lines become that day's journal entries and one ended session, TODO
items become tasks (a done one is completed), learnings become memories of
category ``correction`` or ``pattern``.

The method: the files are parsed leniently into *entries* (a bullet with its
nested bullets, or a paragraph); a line that cannot be read is a problem
note, never a crash. Every entry has a hash of its kind and normalised text
(and its date, for a daily log), kept in the ``imports`` table of state.db
once the entry is written, so importing the same files again adds nothing.
A write the vault refuses is a problem note too, and the rest goes on.
Afterwards the keyword index is synced; embeddings are left to the daemon's
backfill (or ``memvault index``), so an import never loads a model.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memvault import sqlite as sql
from memvault.clock import Clock
from memvault.errors import (
    ConflictError,
    InvalidInputError,
    MemvaultError,
    NotFoundError,
    SecretRefusedError,
)
from memvault.locations import STATE_DB
from memvault.memory.sessions import MAX_TEXT as MAX_SAID
from memvault.memory.sessions import Sessions
from memvault.openclaw.transcripts import Peer, Said, Transcript, peer_of, state_folder, transcripts
from memvault.privacy.trust import as_kept
from memvault.vault.memories import normalize_text
from memvault.vault.paths import safe_filename
from memvault.vocabulary import CATEGORIES, counted

if TYPE_CHECKING:
    from memvault.runtime import Runtime

SOURCE = "openclaw"
JOURNAL_SECTION = "Imported from OpenClaw"
SESSION_PREFIX = "openclaw:import:"
KINDS = ("openclaw", "memory-md", "daily-logs", "todo", "learnings", "sessions")
WORKSPACE_FILES = ("MEMORY.md", "memory/", "TODO.md", "LEARNINGS.md")
EMBEDDINGS_NOTE = (
    "Keyword search sees the imported items now; their embeddings are filled by the "
    "daemon's backfill, or run `memvault index`."
)

# Told (files done, files in all) while daily logs are imported.
Progress = Callable[[int, int], None]

# Heading words (slugged, singular) -> memvault category, beyond the categories' own names.
_CATEGORY_ALIASES = {
    "people": "person",
    "contact": "person",
    "relationship": "person",
    "decisions-made": "decision",
    "lesson": "pattern",
    "lessons-learned": "pattern",
    "learning": "pattern",
    "known-issue": "issue",
    "problem": "issue",
    "background": "context",
    "about": "context",
    "like": "preference",
    "dislike": "preference",
}
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_BULLET = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,3}[.)])[ \t]+(.*)$")
_CHECKBOX = re.compile(r"^\[(.)\][ \t]+(.*)$")
_RULE = re.compile(r"^[ \t]*([-*_])[ \t]*(?:\1[ \t]*){2,}$")
_IMPORTANCE = re.compile(
    r"[ \t]*[\[(][ \t]*importance[ \t]*(?:::?|=)[ \t]*([0-9]*\.?[0-9]+)[ \t]*[\])]", re.I
)
_DAY_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[-_ .].*)?\.md$", re.I)
# "10:30 text", "**10:30** text", "[10:30] - text": a line's time of day.
_TIME = re.compile(
    r"^(?:\*\*|\[|\()?([01]?\d|2[0-3]):([0-5]\d)(?:\*\*|\]|\))?"
    r"(?:[ \t]*[-\u2013\u2014:|][ \t]*|[ \t]+)(.*)$"
)
_ROLE = re.compile(
    r"^(?:\*\*)?(assistant|agent|user|human|me)(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*(.+)$", re.I
)
_CORRECTION = re.compile(
    r"\b(?:don'?t|do not|never|instead|wrong|correction|corrected)\b|\bnot\b.+\bbut\b", re.I
)
_DONE_HEADINGS = frozenset({"done", "completed", "complete", "finished", "archive", "archived"})


@dataclass
class ImportReport:
    """What one import did (or, with ``dry_run``, would do).

    ``items`` counts what was written by target (``memories``, ``tasks``,
    ``journal entries``, ``sessions``); ``skipped`` counts entries already
    imported or already in the vault; ``problems`` are one sentence each.
    A workspace import holds one report per file kind in ``parts``.
    """

    kind: str
    path: str
    dry_run: bool = False
    imported: int = 0
    skipped: int = 0
    items: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    parts: list[ImportReport] = field(default_factory=list)
    secrets_removed: list[str] = field(default_factory=list)  # kinds, each once

    def add(self, target: str, number: int = 1) -> None:
        """Count ``number`` items written to ``target``."""
        self.items[target] = self.items.get(target, 0) + number

    def secrets(self, kinds: list[str]) -> None:
        """Note the kinds of secret replaced by a marker in what is imported."""
        self.secrets_removed.extend(k for k in kinds if k not in self.secrets_removed)

    def absorb(self, part: ImportReport) -> None:
        """Take a file kind's report into this workspace report."""
        self.parts.append(part)
        self.imported += part.imported
        self.skipped += part.skipped
        for target, number in part.items.items():
            self.add(target, number)
        self.problems.extend(part.problems)
        self.secrets(part.secrets_removed)

    def counts(self) -> dict[str, int]:
        """Counts as the summary names them (learnings apart from other memories)."""
        if self.parts:
            out: dict[str, int] = {}
            for part in self.parts:
                for name, number in part.counts().items():
                    out[name] = out.get(name, 0) + number
            return out
        if self.kind == "learnings":
            return {"learnings": self.items.get("memories", 0)}
        return dict(self.items)

    def summary(self) -> str:
        """One sentence: what was (or would be) imported and what was skipped."""
        counts = self.counts()
        nouns = (
            ("memories", "memory"),
            ("journal entries", "journal entry"),
            ("sessions", "session"),
            ("conversation turns", "conversation turn"),
            ("tasks", "task"),
            ("learnings", "learning"),
        )
        said = [counted(counts[name], noun) for name, noun in nouns if counts.get(name)]
        verb = "Would import" if self.dry_run else "Imported"
        head = f"{verb} {', '.join(said)}" if said else f"{verb} nothing"
        if self.skipped:
            head += (
                f"; {'would skip' if self.dry_run else 'skipped'} {self.skipped} already imported"
            )
        return head + "."

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "path": self.path,
            "dry_run": self.dry_run,
            "imported": self.imported,
            "skipped": self.skipped,
            "items": dict(self.items),
            "problems": list(self.problems),
            "summary": self.summary(),
        }
        if self.secrets_removed:  # kinds replaced by a marker in what was imported
            out["secrets_removed"] = list(self.secrets_removed)
        if self.kind == "openclaw":
            out["missing"] = list(self.missing)
            out["parts"] = [part.to_dict() for part in self.parts]
        return out


# -- parsing -------------------------------------------------------------------


@dataclass
class Entry:
    """A bullet (with its nested bullets as ``children``) or a paragraph of a file."""

    text: str
    line: int
    heading: str | None = None  # the nearest heading of level 2 or deeper
    section: str | None = None  # the nearest level-2 heading
    marker: str | None = None  # a checkbox's character: " ", "x", "/" ...
    children: list[str] = field(default_factory=list)
    bullet: bool = True

    def joined(self) -> str:
        """The entry as one sentence: nested bullets follow their parent after a colon."""
        children = [_CHECKBOX.sub(r"\2", c).strip() for c in self.children if c.strip()]
        if not children:
            return self.text
        return f"{self.text.rstrip(' :')}: {'; '.join(children)}"


@dataclass
class Parsed:
    """A file's entries and the lines that could not be read."""

    entries: list[Entry]
    problems: list[str]


def parse_markdown(text: str, name: str) -> Parsed:
    """Read hand-written Markdown into entries, leniently.

    Frontmatter, code blocks, HTML comments, rules and the ``#`` title are
    left out; a table is reported as a problem (its rows are not entries).
    """
    entries: list[Entry] = []
    problems: list[str] = []
    lines = text.splitlines()
    current: Entry | None = None  # the open bullet, which nested bullets join
    indent = 0
    paragraph: Entry | None = None
    section: str | None = None
    heading: str | None = None
    fence: str | None = None
    comment = False
    table_at: int | None = None
    start = 0
    if lines and lines[0].strip() == "---":
        closing = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), 0)
        start = closing + 1 if closing else 0

    def close_table(number: int) -> None:
        nonlocal table_at
        if table_at is not None:
            where = (
                f"line {table_at}" if number - 1 == table_at else f"lines {table_at}-{number - 1}"
            )
            problems.append(f"{name} {where}: a table is not imported; write its rows as bullets.")
            table_at = None

    for number, raw in enumerate(lines[start:], start=start + 1):
        line = raw.expandtabs(4).rstrip()
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        if stripped.startswith("|"):
            table_at = number if table_at is None else table_at
            current = paragraph = None
            continue
        close_table(number)
        if comment:
            comment = "-->" not in stripped
            continue
        if stripped.startswith(("```", "~~~")):
            fence, current, paragraph = stripped[:3], None, None
            continue
        if stripped.startswith("<!--"):
            comment = "-->" not in stripped
            continue
        if not stripped:
            paragraph = None
            continue
        if _RULE.match(line):
            current = paragraph = None
            continue
        found = _HEADING.match(stripped)
        if found and not line.startswith(" "):
            level, title = len(found.group(1)), found.group(2).strip()
            if level == 2:
                section = heading = title
            elif level > 2:
                heading = title
            current = paragraph = None
            continue
        bullet = _BULLET.match(line)
        if bullet:
            depth, content = len(bullet.group(1)), bullet.group(2).strip()
            paragraph = None
            if current is not None and depth > indent:
                current.children.append(content)
                continue
            checkbox = _CHECKBOX.match(content)
            marker = checkbox.group(1).lower() if checkbox else None
            body = checkbox.group(2).strip() if checkbox else content
            current = Entry(body, number, heading, section, marker)
            indent = depth
            entries.append(current)
            continue
        text = stripped.lstrip(">").strip() if stripped.startswith(">") else stripped
        if current is not None and line.startswith(" "):
            if current.children:  # a wrapped nested bullet
                current.children[-1] += " " + text
            else:
                current.text += " " + text
            continue
        current = None
        if paragraph is not None:
            paragraph.text += " " + text
            continue
        paragraph = Entry(text, number, heading, section, bullet=False)
        entries.append(paragraph)
    close_table(len(lines) + 1)
    kept = [e for e in entries if e.text.strip() or e.children]
    return Parsed(kept, problems)


def category_for(heading: str | None) -> str | None:
    """The memvault category a MEMORY.md heading names, or None if it names none."""
    if not heading:
        return None
    slug = slug_of(heading)
    for candidate in (slug, slug.removesuffix("s"), slug.removesuffix("es")):
        if candidate in CATEGORIES:
            return candidate
        if candidate in _CATEGORY_ALIASES:
            return _CATEGORY_ALIASES[candidate]
    titles = {title.casefold(): name for name, title in CATEGORIES.items()}
    return titles.get(heading.strip().casefold())


def slug_of(text: str) -> str:
    """``Things I Like!`` -> ``things-i-like``."""
    return re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-")


def is_correction(text: str) -> bool:
    """Whether a learning reads as a correction ("don't ...", "never ...", "not X but Y")."""
    return _CORRECTION.search(text.replace("\u2019", "'")) is not None


def item_hash(kind: str, text: str, day: date | None = None) -> str:
    """The identity of an imported item: its kind, normalised text and (daily logs) date."""
    key = f"{kind}\n{day.isoformat() if day else ''}\n{normalize_text(text)}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _importance(text: str) -> tuple[str, float | None]:
    """The text without an ``[importance: 0.9]`` marker, and the marker's value (clamped)."""
    found = _IMPORTANCE.search(text)
    if found is None:
        return text, None
    clean = " ".join((text[: found.start()] + " " + text[found.end() :]).split())
    return clean, min(1.0, max(0.0, float(found.group(1))))


# -- what was imported before --------------------------------------------------


class ImportLedger:
    """The ``imports`` table of state.db: which items were imported, by hash.

    A dry run only reads it (from a read-only connection when no write has
    opened state.db yet), so it creates and changes nothing.
    """

    def __init__(self, runtime: Runtime, *, dry_run: bool) -> None:
        self.runtime = runtime
        self.dry_run = dry_run
        self._known: dict[str, set[str]] = {}

    def known(self, kind: str, digest: str) -> bool:
        """Whether the item was imported before (or earlier in this run)."""
        if kind not in self._known:
            self._known[kind] = self._load(kind)
        return digest in self._known[kind]

    def record(self, kind: str, digest: str, target: str, source: str) -> None:
        """Note an item as imported (a dry run only remembers it for this run)."""
        self._known.setdefault(kind, self._load(kind)).add(digest)
        if self.dry_run:
            return
        with self.runtime.state.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO imports (kind, item_hash, target, source, imported_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (kind, digest, target, source, self.runtime.clock.now().isoformat()),
            )

    def _load(self, kind: str) -> set[str]:
        statement = "SELECT item_hash FROM imports WHERE kind = ?"
        if not self.dry_run or "state" in self.runtime.__dict__:
            return {str(r[0]) for r in self.runtime.state.query(statement, (kind,))}
        path = self.runtime.vault.state_dir / STATE_DB
        if not path.exists():
            return set()
        try:
            conn = sqlite3.connect(sql.read_only_uri(path), uri=True)
            try:
                return {str(r[0]) for r in conn.execute(statement, (kind,))}
            finally:
                conn.close()
        except sqlite3.Error:  # no imports table yet (an older schema): nothing imported
            return set()


# -- the importers -------------------------------------------------------------


class Importer:
    """Imports OpenClaw files into one vault; one instance per run."""

    def __init__(
        self, runtime: Runtime, *, dry_run: bool = False, progress: Progress | None = None
    ) -> None:
        self.runtime = runtime
        self.dry_run = dry_run
        self.progress = progress
        self.ledger = ImportLedger(runtime, dry_run=dry_run)
        self._memory_texts: set[str] | None = None  # a dry run's view of the vault's memories

    # Each kind: read, import, report. ``finish`` syncs the index once afterwards.

    def memory_md(self, path: Path) -> ImportReport:
        """``MEMORY.md``: bullets and paragraphs to memories, the heading as category."""
        report = ImportReport("memory-md", str(path), self.dry_run)
        parsed = self._read(_file(path, "memory-md", "MEMORY.md"), report)
        for entry in parsed:
            category = category_for(entry.heading) or category_for(entry.section)
            tags = []
            if category is None and entry.section:
                tags.append(slug_of(entry.section))
            self._memory(report, "memory-md", path, entry, category, tags)
        return report

    def learnings(self, path: Path) -> ImportReport:
        """``LEARNINGS.md``: each learning to a memory of category correction or pattern."""
        report = ImportReport("learnings", str(path), self.dry_run)
        parsed = self._read(_file(path, "learnings", "LEARNINGS.md"), report)
        for entry in parsed:
            named = category_for(entry.heading) or category_for(entry.section)
            if named not in ("correction", "pattern"):
                named = "correction" if is_correction(entry.joined()) else "pattern"
            self._memory(report, "learnings", path, entry, named, [])
        return report

    def todo(self, path: Path) -> ImportReport:
        """``TODO.md``: ``- [ ]`` and plain bullets to open tasks, ``- [x]`` to completed ones."""
        report = ImportReport("todo", str(path), self.dry_run)
        parsed = self._read(_file(path, "todo", "TODO.md"), report)
        for entry in parsed:
            where = f"{path.name} line {entry.line}"
            if not entry.bullet:
                report.problems.append(f"{where}: not a list item, so not a task.")
                continue
            status = _task_status(entry)
            self._task(report, path, entry, status)
        return report

    def daily_logs(self, path: Path) -> ImportReport:
        """``memory/YYYY-MM-DD.md``: each day's lines to its journal and one ended session."""
        report = ImportReport("daily-logs", str(path), self.dry_run)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() == ".md")
        elif path.exists():
            files = [path]
        else:
            raise NotFoundError(f"{path} does not exist.")
        for done, file in enumerate(files, start=1):
            self._day(report, file)
            if self.progress is not None:
                self.progress(done, len(files))
        return report

    def workspace(self, path: Path) -> ImportReport:
        """An OpenClaw workspace: whichever of its four kinds of file exist."""
        if not path.exists():
            raise NotFoundError(f"{path} does not exist.")
        if not path.is_dir():
            raise InvalidInputError(
                f"{path} is a file; `memvault import openclaw` takes a workspace folder "
                "(import a single file with memory-md, daily-logs, todo or learnings)."
            )
        if not holds_workspace(path) and holds_workspace(path / "workspace"):
            path = path / "workspace"  # ~/.openclaw given instead of its workspace
        if not holds_workspace(path) and state_folder(path) is None:
            raise NotFoundError(
                f"Nothing to import in {path}: it holds none of {', '.join(WORKSPACE_FILES)}."
            )
        report = ImportReport("openclaw", str(path), self.dry_run)
        memory = _first(path, "MEMORY.md", "memory.md")
        state = state_folder(path)
        steps: list[tuple[str, Path | None, Callable[[Path], ImportReport]]] = [
            ("MEMORY.md", memory, self.memory_md),
            ("memory/", path / "memory" if (path / "memory").is_dir() else None, self.daily_logs),
            ("TODO.md", _first(path, "TODO.md", "todo.md"), self.todo),
            ("LEARNINGS.md", _first(path, "LEARNINGS.md", "learnings.md"), self.learnings),
        ]
        if state is not None:  # the workspace's state folder, ~/.openclaw: its conversations
            steps.append(("agents/", state, self.conversations))
        for name, found, run in steps:
            if found is None:
                report.missing.append(name)
            else:
                report.absorb(run(found))
        return report

    def conversations(self, path: Path) -> ImportReport:
        """OpenClaw's past conversations (its state folder, ``~/.openclaw``): each session
        to a memvault session of its own and its turns to conversation memories, dated
        when they were said and attributed to whom they were with."""
        report = ImportReport("sessions", str(path), self.dry_run)
        folder = state_folder(path)
        if folder is None:
            raise NotFoundError(
                f"No OpenClaw conversations in {path}: it holds no agents/ folder "
                "(give the state folder, ~/.openclaw)."
            )
        for transcript in transcripts(folder):
            report.problems.extend(transcript.problems)
            self._conversation(report, transcript)
        return report

    def _conversation(self, report: ImportReport, transcript: Transcript) -> None:
        fresh = [
            said
            for said in transcript.messages
            if not self.ledger.known("sessions", _said_hash(transcript, said))
        ]
        report.skipped += len(transcript.messages) - len(fresh)
        if not fresh:
            return
        report.add("sessions")
        report.add("conversation turns", len(fresh))
        report.imported += len(fresh)
        if self.dry_run:
            return
        key = f"{SOURCE}:{transcript.key}"[:200]
        peer = peer_of(transcript.key)
        owner, audience = self._whom(peer)
        last = fresh[-1].when
        # Logged at their own times, the session ended at its last message (not now).
        sessions = Sessions(self.runtime.state, Clock(self.runtime.clock.tz, now=lambda: last))
        sessions.observe(self.runtime.capture)
        settings = self.runtime.settings
        writer = settings.owner_name if owner else (transcript.title or peer.chat_id)
        for said in fresh:
            where = f"{transcript.where} ({transcript.key}, {said.event_id})"
            try:
                sessions.log(
                    key,
                    said.text[:MAX_SAID],
                    role=said.role,
                    channel=SOURCE,
                    sender="OpenClaw" if said.role == "assistant" else writer,
                    sent_at=said.when,
                    metadata={
                        "owner": owner,
                        "audience": audience,
                        "openclaw": {"session": transcript.key, "entry": said.event_id},
                    },
                )
            except MemvaultError as exc:
                report.problems.append(f"{where}: {_reason(exc)}")
                continue
            self.ledger.record("sessions", _said_hash(transcript, said), f"session {key}", where)
        try:
            sessions.end(key)
        except MemvaultError as exc:
            report.problems.append(f"{transcript.where}: the session was not closed: {exc.message}")

    def _whom(self, peer: Peer) -> tuple[bool, str | None]:
        """Whether a conversation was the owner's, and its audience label otherwise."""
        if peer.channel is None:
            return True, None
        config = self.runtime.settings.channels.sections().get(peer.channel)
        owner = not peer.group and config is not None and peer.chat_id in config.owner
        audience = self.runtime.audiences.of_chat(
            peer.channel, peer.chat_id, peer.chat_id, owner=owner, group=peer.group
        )
        return owner, audience.label

    def finish(self, report: ImportReport) -> ImportReport:
        """Sync the keyword index after a real import (a failure is a problem, not an error)."""
        if self.dry_run or not report.imported:
            return report
        try:
            self.runtime.index.sync()
        except MemvaultError as exc:
            report.problems.append(
                f"The search index was not updated ({exc.message.rstrip('.')}); "
                "run `memvault index`."
            )
        return report

    # -- one item at a time ----------------------------------------------------

    def _read(self, path: Path, report: ImportReport) -> list[Entry]:
        text = _text(path, report)
        if text is None:
            return []
        # Secrets are kept out of every item made from the file ([privacy] secrets).
        try:
            text, kinds = self.runtime.secrets.screened(text)
        except SecretRefusedError as exc:
            named = ", ".join(exc.details.get("kinds", ()))
            report.problems.append(
                f"{path.name}: it holds a secret ({named}), so it was not imported."
            )
            return []
        report.secrets(kinds)
        parsed = parse_markdown(text, path.name)
        report.problems.extend(parsed.problems)
        return parsed.entries

    def _memory(
        self,
        report: ImportReport,
        kind: str,
        path: Path,
        entry: Entry,
        category: str | None,
        tags: list[str],
    ) -> None:
        where = f"{path.name} line {entry.line}"
        text, importance = _importance(entry.joined())
        digest = item_hash(kind, text)
        if self.ledger.known(kind, digest):
            report.skipped += 1
            return
        if self.dry_run:
            if self._memory_exists(text):
                report.skipped += 1
            else:
                report.imported += 1
                report.add("memories")
            self.ledger.record(kind, digest, "", where)
            return
        try:
            result = self.runtime.memories.remember(
                text, category=category, importance=importance, tags=tags, source=SOURCE
            )
        except MemvaultError as exc:
            report.problems.append(f"{where}: {_reason(exc)}")
            return
        if result.created:
            report.imported += 1
            report.add("memories")
        else:
            report.skipped += 1  # the vault already holds this memory
        self.ledger.record(kind, digest, f"memory {result.memory.id}", where)

    def _memory_exists(self, text: str) -> bool:
        if self._memory_texts is None:
            self._memory_texts = {normalize_text(m.text) for m in self.runtime.memories.all()}
        norm = normalize_text(text)
        seen = norm in self._memory_texts
        self._memory_texts.add(norm)
        return seen

    def _task(self, report: ImportReport, path: Path, entry: Entry, status: str) -> None:
        where = f"{path.name} line {entry.line}"
        title = " ".join(entry.text.split())
        closed = status in ("done", "cancelled")
        digest = item_hash("todo", f"{status if closed else 'open'}: {title}")
        opened = item_hash("todo", f"open: {title}")
        if not title or self.ledger.known("todo", digest):
            report.skipped += 1
            return
        steps = [_CHECKBOX.sub(r"\2", c).strip() for c in entry.children if c.strip()]
        if self.dry_run:
            if not closed and self._open_task(title):
                report.skipped += 1
            else:
                report.imported += 1
                report.add("tasks")
            self.ledger.record("todo", digest, "", where)
            return
        tasks = self.runtime.tasks
        try:
            if closed and self.ledger.known("todo", opened) and self._open_task(title):
                task = tasks.update(title, "status", status)  # imported open, done since
            else:
                created = tasks.create(title, status="todo" if closed else status, steps=steps)
                task = tasks.update(created.path, "status", status) if closed else created
        except ConflictError:
            report.skipped += 1  # an open task of that title is in the vault already
            self.ledger.record("todo", digest, "existing task", where)
            return
        except MemvaultError as exc:
            report.problems.append(f"{where}: {_reason(exc)}")
            return
        report.imported += 1
        report.add("tasks")
        self.ledger.record("todo", digest, f"task {task.path}", where)

    def _open_task(self, title: str) -> bool:
        try:
            name = safe_filename(title).casefold()
        except MemvaultError:
            return False
        return any(t.title.casefold() == name for t in self.runtime.tasks.list())

    def _day(self, report: ImportReport, file: Path) -> None:
        named = _DAY_NAME.match(file.name)
        day = _date(named.group(1)) if named else None
        if day is None:
            report.problems.append(
                f"memory/{file.name}: the file name does not start with a date (YYYY-MM-DD), "
                "so it was not imported."
            )
            return
        entries = self._read(file, report)
        tz = self.runtime.clock.tz
        moment = datetime.combine(day, time(0, 0), tzinfo=tz)
        timed = False
        messages: list[tuple[str, str, datetime]] = []
        for entry in entries:
            where = f"memory/{file.name} line {entry.line}"
            line = entry.joined()
            own, under = _TIME.match(line), _TIME.match(entry.heading or "")
            if under:  # "## 14:00 Standup": the lines under it happened from 14:00 on
                moment = max(moment, _at(day, under, tz))
            if own:
                moment = _at(day, own, tz)
            timed = timed or bool(own or under)  # later lines carry the last time seen
            text = own.group(3).strip() if own else line
            digest = item_hash("daily-logs", line, day)
            if not text or self.ledger.known("daily-logs", digest):
                report.skipped += 1
                continue
            role_line = _ROLE.match(text)
            role = "user"
            message = text
            if role_line:
                role = (
                    "assistant" if role_line.group(1).lower() in ("assistant", "agent") else "user"
                )
                message = role_line.group(2).strip()
            if not self.dry_run:
                try:
                    # The journal is in every agent's context, not as data: a line that
                    # reads as an instruction is held there (its words are in the session).
                    kept = as_kept(text, self.runtime.settings.privacy.trust)
                    written = self.runtime.journal.append(
                        JOURNAL_SECTION, kept, when=moment, timestamp=timed
                    )
                except MemvaultError as exc:
                    report.problems.append(f"{where}: {_reason(exc)}")
                    continue
                self.ledger.record("daily-logs", digest, f"journal {written.path}", where)
            else:
                self.ledger.record("daily-logs", digest, "", where)
            report.imported += 1
            report.add("journal entries")
            messages.append((message, role, moment))
        if messages:
            self._session(report, file, day, messages)

    def _session(
        self,
        report: ImportReport,
        file: Path,
        day: date,
        messages: list[tuple[str, str, datetime]],
    ) -> None:
        """One ended session for the day, its messages at their times."""
        report.add("sessions")
        if self.dry_run:
            return
        key = f"{SESSION_PREFIX}{day.isoformat()}"
        last = messages[-1][2]
        # Ended at the day's last line, not now, and noted only in that day's journal
        # (which the entries are already in): a clock that stops there, no journal.
        sessions = Sessions(self.runtime.state, Clock(self.runtime.clock.tz, now=lambda: last))
        try:
            for text, role, moment in messages:
                sessions.log(key, text, role=role, channel=SOURCE, sent_at=moment)
            firsts = " / ".join(text for text, _, _ in messages[:3])
            summary = f"Imported from OpenClaw memory/{file.name}: {firsts}"
            sessions.end(key, summary if len(summary) <= 300 else summary[:299] + "…")
        except MemvaultError as exc:
            report.problems.append(
                f"memory/{file.name}: the session was not logged: {_reason(exc)}"
            )


def _said_hash(transcript: Transcript, said: Said) -> str:
    """A message's ledger key: its agent, session and entry id."""
    return item_hash("sessions", f"{transcript.agent}\n{transcript.key}\n{said.event_id}")


# -- one function per kind -----------------------------------------------------


def import_memory_md(runtime: Runtime, path: Path, *, dry_run: bool = False) -> ImportReport:
    """Import an OpenClaw ``MEMORY.md`` as memories."""
    importer = Importer(runtime, dry_run=dry_run)
    return importer.finish(importer.memory_md(path))


def import_daily_logs(
    runtime: Runtime, path: Path, *, dry_run: bool = False, progress: Progress | None = None
) -> ImportReport:
    """Import OpenClaw daily logs (the ``memory/`` folder, or one day's file)."""
    importer = Importer(runtime, dry_run=dry_run, progress=progress)
    return importer.finish(importer.daily_logs(path))


def import_sessions(runtime: Runtime, path: Path, *, dry_run: bool = False) -> ImportReport:
    """Import OpenClaw's past conversations as sessions and conversation memories."""
    importer = Importer(runtime, dry_run=dry_run)
    return importer.finish(importer.conversations(path))


def import_todo(runtime: Runtime, path: Path, *, dry_run: bool = False) -> ImportReport:
    """Import a ``TODO.md`` as tasks (done ones completed)."""
    importer = Importer(runtime, dry_run=dry_run)
    return importer.finish(importer.todo(path))


def import_learnings(runtime: Runtime, path: Path, *, dry_run: bool = False) -> ImportReport:
    """Import a ``LEARNINGS.md`` as memories of category correction or pattern."""
    importer = Importer(runtime, dry_run=dry_run)
    return importer.finish(importer.learnings(path))


def import_workspace(
    runtime: Runtime, path: Path, *, dry_run: bool = False, progress: Progress | None = None
) -> ImportReport:
    """Import an OpenClaw workspace: MEMORY.md, memory/*.md, TODO.md and LEARNINGS.md."""
    importer = Importer(runtime, dry_run=dry_run, progress=progress)
    return importer.finish(importer.workspace(path))


def count_daily_logs(path: Path) -> int:
    """How many daily log files an import of ``path`` (a workspace or memory/) would read."""
    for folder in (path / "memory", path / "workspace" / "memory", path):
        if folder.is_dir():
            return sum(1 for p in folder.iterdir() if p.suffix.lower() == ".md")
    return 0


# -- helpers -------------------------------------------------------------------


def _file(path: Path, kind: str, usual: str) -> Path:
    """``path`` if it is a file; otherwise the one sentence that says what is expected."""
    if not path.exists():
        raise NotFoundError(f"{path} does not exist.")
    if path.is_dir():
        raise InvalidInputError(
            f"{path} is a folder; `memvault import {kind}` takes a file such as {usual} "
            "(import a whole workspace with `memvault import openclaw FOLDER`)."
        )
    return path


def _text(path: Path, report: ImportReport) -> str | None:
    """A file's text, or None with a problem noted (unreadable, not UTF-8)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        report.problems.append(f"{path.name}: cannot be read ({exc.strerror or exc}).")
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        report.problems.append(f"{path.name}: not UTF-8 text, so it was not imported.")
        return None


def _task_status(entry: Entry) -> str:
    if entry.marker is None:
        done = slug_of(entry.section or "").replace("-", " ") in _DONE_HEADINGS
        return "done" if done else "todo"
    return {"x": "done", "-": "cancelled", "~": "cancelled", "/": "in_progress"}.get(
        entry.marker, "todo"
    )


def _at(day: date, clock_time: re.Match[str], tz: tzinfo) -> datetime:
    """The moment a matched ``HH:MM`` names on ``day``."""
    return datetime.combine(
        day, time(int(clock_time.group(1)), int(clock_time.group(2))), tzinfo=tz
    )


def _date(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _reason(exc: MemvaultError) -> str:
    """The vault's refusal as the tail of a problem line."""
    return exc.message if exc.message.endswith((".", "?", "!")) else exc.message + "."


def _first(folder: Path, *names: str) -> Path | None:
    return next((folder / n for n in names if (folder / n).is_file()), None)


def holds_workspace(path: Path) -> bool:
    names = ("MEMORY.md", "memory.md", "TODO.md", "todo.md", "LEARNINGS.md", "learnings.md")
    return path.is_dir() and (
        any((path / n).is_file() for n in names) or (path / "memory").is_dir()
    )
