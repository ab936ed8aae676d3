"""Importers for an OpenClaw workspace's hand-written Markdown.

An OpenClaw agent keeps its memory in plain files of its workspace
(``~/.openclaw/workspace``): ``MEMORY.md`` (curated facts under ``##``
headings), ``memory/YYYY-MM-DD.md`` (one log per day), and often ``TODO.md``
and ``LEARNINGS.md``. Each importer reads one kind and writes it the memvault
way: MEMORY.md bullets become memories (the heading gives the category),
a day's lines become that day's journal entries and one ended session, TODO
items become tasks (a done one is completed), learnings become memories of
category ``correction`` or ``pattern``; OpenClaw's past conversations (its state
folder) become sessions and conversation memories.

The method: the files are parsed leniently into *entries*
(:mod:`memvault.openclaw.entries`); a line that cannot be read is a problem note,
never a crash. Every entry has a hash of its kind and normalised text (and its date,
for a daily log), kept in the ``imports`` table of state.db once the entry is written
(:mod:`memvault.openclaw.ledger`), so importing the same files again adds nothing.
A write the vault refuses is a problem note too, and the rest goes on; the
:class:`ImportReport` (:mod:`memvault.openclaw.report`) says what was done.
Afterwards the keyword index is synced; embeddings are left to the daemon's
backfill (or ``memvault index``), so an import never loads a model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, time, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

from memvault.clock import Clock
from memvault.errors import (
    ConflictError,
    InvalidInputError,
    MemvaultError,
    NotFoundError,
    SecretRefusedError,
)
from memvault.memory.sessions import MAX_TEXT as MAX_SAID
from memvault.memory.sessions import Sessions
from memvault.openclaw.entries import (
    Entry,
    category_for,
    importance_marker,
    is_correction,
    parse_markdown,
    slug_of,
    task_status,
)
from memvault.openclaw.ledger import ImportLedger, item_hash
from memvault.openclaw.report import ImportReport
from memvault.openclaw.transcripts import Peer, Said, Transcript, peer_of, state_folder, transcripts
from memvault.privacy.trust import as_kept
from memvault.vault.memories import normalize_text
from memvault.vault.paths import safe_filename

if TYPE_CHECKING:
    from memvault.runtime import Runtime

# The names the CLI, the installer and the tests import from here.
__all__ = [
    "EMBEDDINGS_NOTE",
    "JOURNAL_SECTION",
    "WORKSPACE_FILES",
    "ImportReport",
    "Importer",
    "Progress",
    "count_daily_logs",
    "holds_workspace",
    "import_daily_logs",
    "import_learnings",
    "import_memory_md",
    "import_sessions",
    "import_todo",
    "import_workspace",
]

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

_DAY_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[-_ .].*)?\.md$", re.I)
# "10:30 text", "**10:30** text", "[10:30] - text": a line's time of day.
_TIME = re.compile(
    r"^(?:\*\*|\[|\()?([01]?\d|2[0-3]):([0-5]\d)(?:\*\*|\]|\))?"
    r"(?:[ \t]*[-\u2013\u2014:|][ \t]*|[ \t]+)(.*)$"
)
_ROLE = re.compile(
    r"^(?:\*\*)?(assistant|agent|user|human|me)(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*(.+)$", re.I
)


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
            status = task_status(entry)
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
        text, importance = importance_marker(entry.joined())
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
        steps = entry.nested()
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
