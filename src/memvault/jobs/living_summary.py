"""The living_summary job: memvault's part of ``MEMORY.md``, regenerated from the vault.

The part is a block between memvault's markers (see
:mod:`memvault.jobs.marked_section`) in sections a person can read: key
memories (pinned ones, then the rest ranked by importance and recency as
the context builder ranks them), insights (each note in ``Insights/``, its
title and first line), open tasks (soonest due first, then by priority)
and the last days' journal summaries (the daily_note job's section, or a
day's first entries). Everything outside the block is the owner's and is
kept byte for byte. The first run puts the block where ``memvault init``'s
empty placeholder headings are, if they are still there untouched, else at
the end.

The block never exceeds ``max_bytes``: each section lists its items best
first and, while the block is too big, the largest section gives up its
lowest-ranked item, saying how many it left out. OpenClaw users saw a
MEMORY.md grow until it froze the gateway; this one cannot.

With a model, one call rewrites the extractive sections; an answer that is
cut off, empty, over the budget or holds a marker never goes in: the
extractive version does, and the run's output says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING

from memvault.errors import ConflictError, MemvaultError, NotFoundError
from memvault.jobs import daily_note
from memvault.jobs.engine import JobContext
from memvault.jobs.marked_section import Markers, item_line
from memvault.jobs.model_draft import draft
from memvault.memory.attention import pinned_memories, rank_memories
from memvault.vault.layout import MEMORY
from memvault.vault.memories import LOW_TRUST
from memvault.vault.note import Note
from memvault.vault.paths import normalize_relpath
from memvault.vocabulary import PRIORITIES, counted

if TYPE_CHECKING:
    from memvault.config import LivingSummaryJob
    from memvault.runtime import Runtime

DESCRIPTION = (
    "Regenerates memvault's part of MEMORY.md: key memories, insights, open tasks, recent days."
)

MARKERS = Markers("living-summary")
HEADER = (
    "_memvault's living_summary job rewrites the part between these markers from the "
    "vault; write your own notes outside them._"
)
INSIGHTS_DIR = "Insights"
MAX_ITEM_CHARS = 300
INSTRUCTIONS = (
    "You maintain the part of the owner's MEMORY.md note that summarises their memory "
    "vault. Rewrite the material into these Markdown sections, in this order, each "
    "under its '## ' heading: Key memories, Insights, Open tasks, Recent days (leave "
    "out a section with nothing in it). Keep every fact you keep exact, keep [[links]] "
    "as they are, merge repeats, prefer what matters most, and write short bullets a "
    "person can scan. At most {limit} bytes. Answer with the sections only: no preamble, "
    "no title, no HTML comments."
)
# The template's empty headings (`memvault init`) give way to the block on its first run.
PLACEHOLDER = MEMORY[MEMORY.index("## Who I work for") :]
_PRIORITY_RANK = {p: i for i, p in enumerate(reversed(PRIORITIES))}


@dataclass
class Section:
    """A titled list of lines, best first, of which the first ``shown`` fit the budget."""

    title: str
    noun: str  # what an item is, for the run's output
    items: list[str]
    shown: int = 0
    shown_bytes: int = 0  # what the shown items take, newlines included
    _sizes: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._sizes = [len(item.encode("utf-8")) + 1 for item in self.items]
        self.shown = len(self.items)
        self.shown_bytes = sum(self._sizes)

    def drop_last(self) -> None:
        """Show one item fewer (the lowest-ranked one shown)."""
        self.shown -= 1
        self.shown_bytes -= self._sizes[self.shown]

    def _more(self) -> str:
        left = len(self.items) - self.shown
        return f"- ({left} more not shown)" if left else ""

    def render(self) -> str:
        """The section's Markdown; what was left out is counted."""
        lines = [f"## {self.title}", *self.items[: self.shown]]
        return "\n".join([*lines, self._more()] if self._more() else lines)

    def size(self) -> int:
        """``len(self.render().encode())``, without rendering."""
        more = self._more()
        return (
            len(self.title.encode("utf-8")) + 3 + self.shown_bytes + (len(more) + 1 if more else 0)
        )


def run(ctx: JobContext) -> str | None:
    """Regenerate memvault's block of the living summary note."""
    services = ctx.services
    settings: LivingSummaryJob | None = ctx.settings
    path = normalize_relpath(settings.path if settings else "MEMORY.md")
    max_bytes = settings.max_bytes if settings else 12_000
    sections = gather(services, settings)
    extractive = fit(sections, max_bytes)
    left_out = sum(len(s.items) - s.shown for s in sections)
    body, how = extractive, "extractive"
    use_model = settings is None or settings.use_model
    if ctx.model is not None and use_model and any(s.items for s in sections):
        room = max_bytes - len(MARKERS.block(HEADER).encode("utf-8")) - 2
        answer = draft(
            ctx.model,
            INSTRUCTIONS.format(limit=room),
            extractive.removeprefix(HEADER).strip(),
            markers=MARKERS,
            # An answer as long as the block may be; half the budget at least for the material.
            max_tokens=max(256, min(room // 3, ctx.model.tokens_left // 2)),
            max_bytes=room,
        )
        if answer.text is not None:
            body, how = f"{HEADER}\n\n{answer.text}", "by the model"
        else:
            how = f"extractive: {answer.problem}"
        if answer.cut:
            how += "; the material was cut to fit the token budget"
    ctx.will_change(path)

    def put(text: str | None) -> str:
        current = MEMORY if text is None else text
        return MARKERS.put(current, body, path, replacing=PLACEHOLDER)

    services.vault.edit_text(path, put, must_exist=False)
    counts = ", ".join(counted(len(s.items), s.noun) for s in sections if s.items)
    size = len(MARKERS.block(body).encode("utf-8"))
    trimmed = f"; {left_out} item(s) left out to fit" if left_out else ""
    return (
        f"Regenerated {path} ({how}): {counts or 'nothing to summarise yet'}; "
        f"{size} of {max_bytes} bytes{trimmed}."
    )


def gather(services: Runtime, settings: LivingSummaryJob | None) -> list[Section]:
    """The extractive sections, each item list best first."""
    top = settings.top_memories if settings else 25
    days = settings.daily_notes if settings else 7
    return [
        Section("Key memories", "memory", _memories(services, top)),
        Section("Insights", "insight", _insights(services)),
        Section("Open tasks", "open task", _open_tasks(services)),
        Section("Recent days", "day", _recent_days(services, days)),
    ]


def fit(sections: list[Section], max_bytes: int) -> str:
    """The block's body within ``max_bytes`` (markers included): while it is too big,
    the section taking the most room gives up its lowest-ranked item."""
    present = [s for s in sections if s.items]
    if not present:
        return f"{HEADER}\n\nThe vault holds nothing to summarise yet."
    fixed = len(MARKERS.block(HEADER).encode("utf-8"))

    def size() -> int:
        return fixed + sum(s.size() + 2 for s in present)

    while size() > max_bytes:
        trimmable = [s for s in present if s.shown > 0]
        if not trimmable:
            break
        max(trimmable, key=lambda s: s.shown_bytes).drop_last()
    return "\n\n".join([HEADER, *(s.render() for s in present)])


def _memories(services: Runtime, limit: int) -> list[str]:
    # Archived ones are left out, and low-trust ones: MEMORY.md is read as core context.
    memories = [m for m in services.memories.list() if m.trust != LOW_TRUST]
    context = services.settings.context
    pinned = pinned_memories(memories, context.pinned_tags)
    seen = {m.id for m in pinned}
    ranked = rank_memories(
        [m for m in memories if m.id not in seen],
        now=services.clock.now(),
        recency_bias=context.recency_bias,
    )
    lines = [f"- {item_line(m.text, MAX_ITEM_CHARS)} ({m.category}, pinned)" for m in pinned]
    lines += [f"- {item_line(m.text, MAX_ITEM_CHARS)} ({m.category})" for m in ranked]
    return lines[:limit]


def _insights(services: Runtime) -> list[str]:
    """Each insight note's title and first line, the most recently changed first."""
    try:
        entries = services.vault.list(INSIGHTS_DIR)
    except NotFoundError:
        return []
    lines = []
    for entry in sorted(entries, key=lambda e: -e.mtime_ns):
        try:
            body = Note.parse(services.vault.read_text(entry.path)).body
        except MemvaultError:  # not text, or gone meanwhile: it tells nothing
            continue
        first = next(
            (
                line.strip()
                for line in body.split("\n")
                if line.strip() and not line.lstrip().startswith("#")
            ),
            "",
        )
        title = entry.path.rsplit("/", 1)[-1].removesuffix(".md")
        link = f"[[{title}]]"
        lines.append(
            f"- {link}: {item_line(first.lstrip('-*+ '), MAX_ITEM_CHARS)}" if first else f"- {link}"
        )
    return lines


def _open_tasks(services: Runtime) -> list[str]:
    """Open tasks, soonest due first (overdue ones first of all), then by priority."""
    today = services.clock.today()
    tasks = sorted(
        services.tasks.list(),
        key=lambda t: (
            t.due is None,
            t.due or date.max,
            _PRIORITY_RANK.get(t.priority, len(PRIORITIES)),
            t.title.casefold(),
        ),
    )
    lines = []
    for task in tasks:
        details = [task.priority]
        if task.status != "todo":
            details.append(task.status.replace("_", " "))
        if task.due:
            details.append(("overdue since " if task.due < today else "due ") + str(task.due))
        lines.append(f"- [[{task.title}]] ({', '.join(details)})")
    return lines


def _recent_days(services: Runtime, count: int) -> list[str]:
    """The last ``count`` journal days, newest first: their summary, else first entries."""
    if count <= 0:
        return []
    today = services.clock.today()
    lines = []
    for day in reversed([d for d in services.journal.days() if d <= today][-count:]):
        text = _day_summary(services, day)
        if text:
            lines.append(
                f"- [[{services.journal.path_for(day).removesuffix('.md')}|{day}]]: {text}"
            )
    return lines


def _day_summary(services: Runtime, day: date) -> str:
    path = services.journal.path_for(day)
    try:
        note = services.vault.read_text(path)
    except MemvaultError:
        return ""
    try:
        inner = daily_note.MARKERS.inner(note, path)
    except ConflictError:
        inner = None
    if inner:
        paragraphs = [p.strip() for p in inner.split("\n\n") if p.strip()]
        prose = [p for p in paragraphs if not p.startswith("#")]
        if prose:
            return item_line(prose[0], MAX_ITEM_CHARS)
    try:
        sections = services.journal.sections(day)
    except MemvaultError:
        return ""
    entries = [e for heading, items in sections.items() if heading != "Summary" for e in items]
    return item_line("; ".join(entries[:3]), MAX_ITEM_CHARS) if entries else ""
