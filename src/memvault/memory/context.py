"""The context builder: what an agent is told at the start of a run.

It fills a token budget in priority order:

0. how long the agent has known the owner: the first session's date and how
   many memories there are, or, in a new vault, that there are none yet;
1. core notes: the owner's profile, the current status, the latest known
   issues (mistakes earlier runs made), the open tasks (urgent and high ones
   in full, the rest counted with the nearest due dates), and the latest
   entries of today's journal, then the day's summary once the daily note job
   wrote one (the summary never pushes out the entries);
2. pinned memories: those tagged (or categorised) ``core`` or ``preference``;
3. what is relevant to the request: memories and notes from a hybrid search;
4. skills: the procedures in ``Skills/`` whose name or *when to use* match
   the request (a search within that folder), with their steps (shown
   there, not among what is relevant);
5. the most important memories (what was said in conversations left out: those
   turns come in through the search above), ranked by
   ``importance * (1 - recency_bias) + recency * recency_bias``;
6. the last session: the summary of the conversation that ended last, or,
   when it has none, its last three messages (as data: they may be anyone's);
7. recent activity: the latest entries of earlier journal days.

Tokens are estimated as four characters each (the same estimate everywhere
in memvault). Lines are never cut: an item that does not fit is left out,
and each section says how many were left out.

Fitting the sections to the budget lives in :mod:`memvault.memory.context_budget`,
ranking memories and judging hits in :mod:`memvault.memory.attention`; this module
gathers each section's lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from memvault.clock import Clock
from memvault.config import ContextSettings
from memvault.errors import NotFoundError, NotTextError
from memvault.index.filters import SearchFilters
from memvault.index.index import MemoryIndex
from memvault.index.search import Hit, Searcher
from memvault.llm.untrusted import wrap_material
from memvault.memory.attention import pinned_memories, rank_memories, worth_attention
from memvault.memory.context_budget import (
    MAX_BUDGET,
    MIN_BUDGET,
    ContextResult,
    Recalled,
    Section,
    checked_budget,
    fit_sections,
)
from memvault.memory.sessions import Message, Session
from memvault.text import check_text
from memvault.vault.journal import Journal
from memvault.vault.layout import CORE_NOTES
from memvault.vault.memories import LOW_TRUST, Memories, Memory
from memvault.vault.note import Note
from memvault.vault.notes import Notes
from memvault.vault.skills import SKILLS_DIR, Skill
from memvault.vault.tasks import Task, Tasks
from memvault.vocabulary import CONVERSATION, counted

# The names the rest of memvault imports from here (the budget's and ranking's among them).
__all__ = [
    "MAX_BUDGET",
    "MIN_BUDGET",
    "ContextBuilder",
    "ContextResult",
    "Recalled",
    "Section",
    "Underway",
    "checked_budget",
    "fit_sections",
    "pinned_memories",
    "rank_memories",
    "worth_attention",
]

_HEADING = re.compile(r"^#{1,6}\s")
# A template field nobody filled in, e.g. "- **Last command:**" or "- Email:".
_EMPTY_FIELD = re.compile(r"^\s*[-*+]\s*(\*\*[^*]+:?\*\*:?|[^:]+:)\s*$")
_MAX_RELEVANT = 10
_SEARCH_LIMIT = 200
_CORE_NOTES = frozenset({"User Profile.md", "Current Status.md"})
_LOW_TRUST_FIELD = re.compile(r"\[trust::\s*low\s*\]", re.IGNORECASE)
_JOURNAL_TAIL = 8
_LATEST_FIRST = 3  # today's entries that claim room before the day's summary
# A journal entry's time, as Journal.append writes it ("- 14:05 ...").
_ENTRY_TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d(?=\s)")
# The block the daily note job keeps at the top of a journal note (jobs/daily_note.py's
# markers, written out here: the memory layer does not import the jobs layer).
_DAY_SUMMARY = ("<!-- memvault:daily-summary -->", "<!-- /memvault:daily-summary -->")
_SUMMARY_CHARS = 400
_BLOCK_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)
_FULL_PRIORITIES = ("urgent", "high")
_NEAREST_DUE = 3
_LAST_MESSAGES = 3
_MESSAGES_READ = 20  # read back to find the last three said (tool results are not)
_MESSAGE_CHARS = 300
_KNOWN_ISSUES = 5
_RECENT_DAYS = 3
_MAX_SKILLS = 3
_SKILL_CHARS = 400


def _one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Underway:
    """The conversation a context is built for: its turns since ``since`` are in the
    model's messages already, so search does not show them again (the command just said
    would be the best match of itself)."""

    key: str
    since: datetime

    def holds(self, hit: Hit) -> bool:
        """Whether ``hit`` is a turn of this conversation, said since it began."""
        return (
            hit.category == CONVERSATION
            and hit.origin == self.key
            and hit.created is not None
            and hit.created >= self.since
        )


class ContextBuilder:
    """Builds an agent's memory context within a token budget."""

    def __init__(
        self,
        *,
        clock: Clock,
        notes: Notes,
        memories: Memories,
        tasks: Tasks,
        journal: Journal,
        index: MemoryIndex,
        searcher: Searcher,
        settings: ContextSettings | None = None,
        last_session: Callable[[], Session | None] | None = None,
        skills_folder: str = SKILLS_DIR,
        last_messages: Callable[[Session, int], list[Message]] | None = None,
        first_session: Callable[[], datetime | None] | None = None,
    ) -> None:
        self.clock = clock
        self.notes = notes
        self.memories = memories
        self.tasks = tasks
        self.journal = journal
        self.index = index
        self.searcher = searcher
        self.settings = settings or ContextSettings()
        self.last_session = last_session
        self.skills_folder = skills_folder.strip("/")
        self.last_messages = last_messages
        self.first_session = first_session

    def build(
        self,
        query: str | None = None,
        budget_tokens: int | None = None,
        *,
        underway: Underway | None = None,
    ) -> str:
        """Markdown for an agent's system prompt, at most ``budget_tokens`` (estimated)."""
        return self.build_result(query, budget_tokens, underway=underway).markdown

    def build_result(
        self,
        query: str | None = None,
        budget_tokens: int | None = None,
        *,
        wait_for_model: bool = True,
        underway: Underway | None = None,
    ) -> ContextResult:
        """The context and how each section fared.

        Without ``wait_for_model``, what is relevant to ``query`` is found by
        keywords while the embedding model loads, and the result says so. The turns of
        the conversation ``underway`` are not shown: the model has them already.
        """
        if query:
            check_text(query, "query")  # a channel's text may hold what no answer can carry
        budget = checked_budget(budget_tokens, self.settings)
        used: set[str] = set()
        # Read once: pinned and top memories both rank it. What was said in conversations
        # is found by the search below, never listed as a memory here.
        memories = self.memories.list()
        sections = [
            Section("Working together", self._acquaintance(memories)),
            Section("Owner", self._note_lines("User Profile.md")),
            Section("Current status", self._note_lines("Current Status.md")),
            Section("Known issues (do not repeat these)", self._known_issues()),
            Section("Open tasks", self._open_tasks()),
            self._journal_tail(),
        ]
        pinned = self._pinned(memories)
        used.update(m.id for m in pinned)
        sections.append(Section("Pinned memories", [self._memory_line(m) for m in pinned]))
        notice = None
        recalled: list[Recalled] = []
        if query and query.strip():
            relevant, notice = self._relevant(
                query.strip(), used, wait_for_model, underway, recalled
            )
            sections.append(Section(f"Relevant to: {_one_line(query)[:80]}", relevant))
            sections.append(Section("Skills", self._skills(query.strip(), wait_for_model)))
        top = self._top_memories(memories, used)
        sections.append(Section("Important memories", [self._memory_line(m) for m in top]))
        sections.append(Section("Last session", self._last_session()))
        sections.append(Section("Recent activity", self._recent_activity()))
        result = fit_sections(sections, budget)
        result.notice = notice
        result.recalled = recalled
        return result

    # -- sections ----------------------------------------------------------------

    def _note_lines(self, path: str) -> list[str]:
        """A core note's lines: its own title dropped, its headings demoted, blanks skipped."""
        try:
            view = self.notes.read(path)
        except (NotFoundError, NotTextError):  # a note that is not text tells nothing
            return []
        if view.text == CORE_NOTES.get(path):
            return []  # still the template memvault installed: nothing to tell
        lines: list[str] = []
        for line in Note.parse(view.text).body.split("\n"):
            line = line.rstrip()
            if not line.strip() or line.startswith("# ") or _EMPTY_FIELD.match(line):
                continue
            heading = _HEADING.match(line)
            lines.append(f"### {line[heading.end() :].strip()}" if heading else line)
        return lines if any(not line.startswith("### ") for line in lines) else []

    def _known_issues(self) -> list[str]:
        """The latest entries of Known Issues.md, newest first."""
        try:
            text = self.notes.read("Known Issues.md").text
        except (NotFoundError, NotTextError):
            return []
        entries = [
            line.rstrip()
            for line in Note.parse(text).body.split("\n")
            if line.lstrip().startswith(("- ", "* "))
        ]
        return list(reversed(entries[-_KNOWN_ISSUES:]))

    def _acquaintance(self, memories: list[Memory]) -> list[str]:
        """Since when the agent has known the owner (the first session's date) and how
        many memories it keeps; in a new vault, that it has none yet."""
        first = self.first_session() if self.first_session else None
        since = None
        if first is not None:
            day = self.clock.localize(first).date()
            since = f"first session on {day.isoformat()} ({_ago(day, self.clock.today())})"
        if not memories:
            if since is None:
                return ["- No memories yet: this may be the first session. Learn and remember."]
            return [f"- No memories yet; {since}."]
        if since is None:
            return []  # memories, but no session yet: the sections below say enough
        return [f"- Working with the owner since the {since}; {counted(len(memories), 'memory')}."]

    def _last_session(self) -> list[str]:
        """The session that ended last: its summary, or else its last three messages (as
        data: they may be a contact's words)."""
        session = self.last_session() if self.last_session else None
        if session is None or session.ended_at is None:
            return []
        ended = self.clock.localize(session.ended_at).strftime("%Y-%m-%d %H:%M")
        count = session.message_count
        line = f"- {session.key} ({session.channel}), {counted(count, 'message')}"
        line += f", ended {ended}"
        if session.summary:
            return [f"{line}: {_one_line(session.summary)}"]
        read = self.last_messages(session, _MESSAGES_READ) if self.last_messages else []
        said = [m for m in read if m.role in ("user", "assistant")][-_LAST_MESSAGES:]
        if not said:
            return [line]
        shown = [self._message_line(message) for message in said]
        return [f"{line}, not summarised; its last messages:", wrap_material("\n".join(shown))]

    def _message_line(self, message: Message) -> str:
        when = self.clock.localize(message.sent_at).strftime("%H:%M")
        who = message.sender or message.role
        text = _one_line(message.text)
        if len(text) > _MESSAGE_CHARS:
            text = text[: _MESSAGE_CHARS - 1].rstrip() + "…"
        return f"- {when} {who}: {text}"

    def _open_tasks(self) -> list[str]:
        """Urgent and high-priority open tasks in full; the rest as one line that counts
        them by priority and names those due soonest."""
        tasks = self.tasks.list()  # open ones, most urgent first
        lines = [_task_line(t) for t in tasks if t.priority in _FULL_PRIORITIES]
        rest = [t for t in tasks if t.priority not in _FULL_PRIORITIES]
        if rest:
            lines.append(_rest_line(rest, self.clock.today(), other=bool(lines)))
        return lines

    def _journal_tail(self) -> Section:
        """Today's latest entries in the order they happened, then the day's summary
        when the daily note job wrote one. Under a tight budget the latest entries keep
        their place: the three latest claim room first, then the summary, then the
        older entries, newest first."""
        today = self.clock.today()
        title = "Today's journal"
        try:
            text = self.journal.read(today)
            sections = self.journal.sections(today)
        except (NotFoundError, NotTextError):
            return Section(title, [])
        summary_headings, summary = _day_summary(text)
        entries: list[tuple[str, int, str]] = []
        for heading, items in sections.items():
            if heading in summary_headings:
                continue  # the job's digest, not an entry (its job runs carry times too)
            when = "00:00"  # an entry without a time goes with the one before it
            for item in items:
                timed = _ENTRY_TIME.match(item)
                if timed is not None:
                    when = timed.group(0)
                entries.append((when, len(entries), f"- {_one_line(item)} ({heading})"))
        entries.sort()
        lines = [line for _, _, line in entries[-_JOURNAL_TAIL:]]
        newest_first = list(reversed(range(len(lines))))
        if not summary:
            return Section(title, lines, rank=newest_first)
        latest, older = newest_first[:_LATEST_FIRST], newest_first[_LATEST_FIRST:]
        return Section(title, [*lines, summary], rank=[*latest, len(lines), *older])

    def _pinned(self, memories: list[Memory]) -> list[Memory]:
        return pinned_memories(memories, self.settings.pinned_tags)

    def _memory_line(self, memory: Memory) -> str:
        return f"- {_one_line(memory.text)} ({memory.category}, ^{memory.id})"

    def _relevant(
        self,
        query: str,
        used: set[str],
        wait_for_model: bool,
        underway: Underway | None = None,
        recalled: list[Recalled] | None = None,
    ) -> tuple[list[str], str | None]:
        """Search hits worth an agent's attention (close to the best, and a real match),
        and the search's notice; each hit given a line is added to ``recalled``."""
        # Room for hits already shown as pinned memories, within the searcher's limit.
        found = self.searcher.search(
            query,
            limit=min(_MAX_RELEVANT + len(used), _SEARCH_LIMIT),
            wait_for_model=wait_for_model,
        )
        notice = found.notice
        hits = [
            hit
            for hit in found
            if not self._is_skill(hit.path)  # they have their section
            and not (underway is not None and underway.holds(hit))
        ]
        lines = []
        for hit in worth_attention(hits):
            if hit.id is not None:
                if hit.id in used:
                    continue
                used.add(hit.id)
                doubted = self._low_trust(hit)
                if doubted is not None:
                    lines.append(_untrusted_line(doubted, hit.snippet))
                else:
                    lines.append(
                        f"- {_one_line(hit.snippet)} ({hit.category or 'memory'}, ^{hit.id})"
                    )
            elif hit.path not in _CORE_NOTES:
                link = hit.path.removesuffix(".md")
                heading = hit.heading.rsplit(" > ", 1)[-1]
                if heading and heading != hit.title:
                    link += f"#{heading}"
                body = _one_line(
                    " ".join(x for x in hit.snippet.split("\n") if not x.startswith("#"))
                )
                line = f"- [[{link}]]: {body[:200]}" if body else f"- [[{link}]]"
                if self._holds_low_trust(hit):  # a contact's words kept in their note
                    line = wrap_material(f"{line} (holds low-trust text from someone else)")
                lines.append(line)
            if recalled is not None and len(recalled) < len(lines):
                recalled.append(Recalled.of(hit))
            if len(lines) >= _MAX_RELEVANT:
                break
        return lines, notice

    def _low_trust(self, hit: Hit) -> Memory | None:
        """The memory a hit shows when it is marked low trust (the file as it reads now)."""
        try:
            memory = self.memories.read(hit.path).find(hit.id or "")
        except (NotFoundError, NotTextError):
            return None
        return memory if memory is not None and memory.trust == LOW_TRUST else None

    def _holds_low_trust(self, hit: Hit) -> bool:
        """Whether the lines of a note a hit shows hold ``[trust:: low]`` (what a contact
        asked to remember is kept in their note so), read from the note as it is now."""
        try:
            text = self.notes.read(hit.path).text
        except (NotFoundError, NotTextError):
            return False
        shown = text.split("\n")[max(hit.start_line - 1, 0) : hit.end_line]
        return any(_LOW_TRUST_FIELD.search(line) for line in shown)

    def _is_skill(self, path: str) -> bool:
        """Whether ``path`` is a skill note (shown in its own section)."""
        return path.startswith(f"{self.skills_folder}/")

    def _skills(self, query: str, wait_for_model: bool) -> list[str]:
        """The skills matching ``query`` best (as :meth:`_relevant` judges a hit), each
        with when to use it and its steps."""
        if not self.index.vault.resolve(self.skills_folder).is_dir():
            return []
        hits = self.searcher.search(
            query,
            limit=_MAX_RELEVANT,
            filters=SearchFilters(folder=self.skills_folder),
            wait_for_model=wait_for_model,
        )
        paths: list[str] = []
        for hit in worth_attention(hits):
            if hit.path not in paths:
                paths.append(hit.path)
        lines = []
        for path in paths[:_MAX_SKILLS]:
            try:
                skill = Skill.parse(self.notes.read(path).text, path)
            except (NotFoundError, NotTextError):  # gone since it was indexed
                continue
            line = f"- [[{path.removesuffix('.md')}|{skill.name}]]"
            if skill.when_to_use:
                line += f": {skill.when_to_use}"
            if skill.steps:
                line += " Steps: " + " ".join(f"{n}. {s}" for n, s in enumerate(skill.steps, 1))
            lines.append(line if len(line) <= _SKILL_CHARS else line[: _SKILL_CHARS - 1] + "…")
        return lines

    def _top_memories(self, memories: list[Memory], used: set[str]) -> list[Memory]:
        chosen = rank_memories(
            [m for m in memories if m.id not in used and m.trust != LOW_TRUST],
            now=self.clock.now(),
            recency_bias=self.settings.recency_bias,
        )
        used.update(m.id for m in chosen)
        return chosen

    def _recent_activity(self) -> list[str]:
        today = self.clock.today()
        days = [d for d in self.journal.days() if d < today and d >= today - timedelta(days=30)]
        lines: list[str] = []
        for day in reversed(days[-_RECENT_DAYS:]):
            try:
                sections = self.journal.sections(day)
            except (NotFoundError, NotTextError):
                continue
            for heading, items in sections.items():
                for item in items[-5:]:
                    lines.append(f"- {day.isoformat()} {_one_line(item)} ({heading})")
        return lines


def _ago(day: date, today: date) -> str:
    days = (today - day).days
    if days <= 0:
        return "today"
    return "yesterday" if days == 1 else f"{days} days ago"


def _task_line(task: Task) -> str:
    details = [task.priority]
    if task.status != "todo":
        details.append(task.status.replace("_", " "))
    if task.due:
        details.append(f"due {task.due.isoformat()}")
    if task.project:
        details.append(f"project {task.project}")
    return f"- {task.title} ({', '.join(details)})"


def _rest_line(tasks: list[Task], today: date, *, other: bool) -> str:
    """The open tasks not shown in full, in one line: how many of each priority, and
    the ones due soonest."""
    by_priority: dict[str, int] = {}
    for task in tasks:
        by_priority[task.priority] = by_priority.get(task.priority, 0) + 1
    kinds = ", ".join(f"{n} {priority}" for priority, n in by_priority.items())
    line = f"- {counted(len(tasks), 'other open task' if other else 'open task')} ({kinds})"
    dated = sorted((t for t in tasks if t.due), key=lambda t: t.due or today)
    if not dated:
        return f"{line}, none with a due date"
    nearest = [
        f"{t.title} ({'overdue since' if t.due < today else 'due'} {t.due.isoformat()})"
        for t in dated[:_NEAREST_DUE]
        if t.due is not None
    ]
    return f"{line}; due soonest: {'; '.join(nearest)}"


def _day_summary(text: str) -> tuple[frozenset[str], str | None]:
    """The headings inside the daily note job's block of a journal note, and its summary
    as one line (the model's sentences, or the count line); nothing when there is none."""
    start, end = _DAY_SUMMARY
    opened = text.find(start)
    closed = text.find(end, opened + len(start)) if opened >= 0 else -1
    if opened < 0 or closed < 0:
        return frozenset(), None
    block = text[opened + len(start) : closed]
    headings = frozenset(m.group(1).strip() for m in _BLOCK_HEADING.finditer(block))
    prose = [
        line.strip()
        for line in block.split("\n")
        if line.strip() and not line.lstrip().startswith(("#", "-", "*", "+", "<!--"))
    ]
    words = _one_line(" ".join(prose))
    if not words:
        return headings, None
    if len(words) > _SUMMARY_CHARS:
        words = words[: _SUMMARY_CHARS - 1].rstrip() + "…"
    return headings, f"- Summary of the day so far (daily note job): {words}"


def _untrusted_line(memory: Memory, snippet: str) -> str:
    """A low-trust memory as a model may see it: inside the data tags, with where it came
    from and why it is doubted, so nothing in it reads as an instruction."""
    where = memory.fields.get("trust_from") or memory.source or "someone other than the owner"
    why = memory.trust_reason or "reads as an instruction"
    return wrap_material(
        f"- {_one_line(snippet)} (from {where}; low trust: {why}; {memory.category}, ^{memory.id})"
    )
