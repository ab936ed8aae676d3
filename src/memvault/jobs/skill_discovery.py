"""The skill_discovery job: procedures the agent repeated successfully become skill notes.

It reads the agent's runs of the last ``window_days`` from the session log
(a run is a request, the tool calls the agent made for it, their results and
its answer, as :mod:`memvault.agent.loop` logs them) and, for the model, the
journal of those days.

- With a model: one call is given that material (as untrusted data, see
  :mod:`memvault.jobs.model_draft`) and the names of the skills that exist,
  and answers a JSON array of ``{name, when_to_use, steps, tags, sessions}``.
  The answer is parsed strictly: an entry with a missing or malformed field
  is dropped; an answer that is cut off, empty or not a JSON array writes
  nothing, and the run's output says why.
- Without one, a rule: the same ordered list of at least two tool calls,
  made in runs that all succeeded (every tool call worked and the agent
  answered) in at least ``min_repeats`` different sessions, is a skill named
  after its tools; its steps are the tools with the argument names used in
  at least half of the calls, and it is for requests like the ones seen.

A skill is written as ``<folder>/<Name>.md`` (see :mod:`memvault.vault.skills`)
tagged ``skill`` and ``auto-discovered``, unless a skill of the same name (letters and
digits compared, case aside) or of nearly the same words (name and when to
use) exists: an existing skill, a person's above all, is never overwritten
or written twice.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memvault.config import SkillDiscoveryJob
from memvault.errors import MemvaultError, UnsafePathError
from memvault.index.query import STOPWORDS
from memvault.jobs.budget import BudgetedModel
from memvault.jobs.engine import JobContext
from memvault.jobs.marked_section import Markers
from memvault.jobs.model_draft import draft
from memvault.memory.outcomes import one_line
from memvault.memory.sessions import Sessions
from memvault.vault.markdown import normalize_tag
from memvault.vault.paths import safe_filename
from memvault.vault.skills import AUTO_TAGS, Skill, read_skills
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.runtime import Runtime

DESCRIPTION = "Turns procedures the agent repeated successfully into Skills/ notes."

# Skill notes hold no marked section; any memvault marker in an answer is refused all the same.
MARKERS = Markers("skill-discovery")
SIMILAR = 0.6  # share of words in common (name and when to use) that makes two skills one
MAX_SESSIONS = 500
MAX_MESSAGES = 400
MAX_NAME = 80
MAX_WHEN = 600
MAX_STEPS = 20
MAX_STEP = 300
MAX_EXAMPLES = 3
INSTRUCTIONS = (
    "You find the procedures an AI agent carries out for its owner again and again. The "
    "material lists the agent's recent sessions (each request, the tools it called with "
    "their arguments, whether they worked, and whether it answered), the owner's journal of "
    "those days, and the skills that exist already. Find procedures the agent carried out "
    "successfully in at least {min_repeats} different sessions and that are worth reusing; "
    "leave out the skills that exist already. Answer with a JSON array only, no prose: one "
    'object per procedure with the keys "name" (a short title, at most 60 characters), '
    '"when_to_use" (one or two sentences), "steps" (an array of short steps in order), '
    '"tags" (an array of short lowercase tags) and "sessions" (the numbers of the sessions '
    "it was carried out in). Answer [] when there is none."
)
_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*+])\s+")
_WORD = re.compile(r"[^\W_]+")


@dataclass
class AgentRun:
    """One request in a session, the tool calls the agent made for it, and how it ended."""

    session_id: int
    session_key: str
    request: str
    started: datetime
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    failed_calls: int = 0
    answered: bool = False

    @property
    def succeeded(self) -> bool:
        """Every tool call worked and the agent answered."""
        return self.answered and not self.failed_calls

    @property
    def tools(self) -> tuple[str, ...]:
        """The tools called, in order."""
        return tuple(name for name, _ in self.calls)


def run(ctx: JobContext) -> str | None:
    """Write the skills found in the last days' sessions; see the module docstring."""
    services = ctx.services
    settings: SkillDiscoveryJob = ctx.settings or SkillDiscoveryJob()
    since = services.clock.now() - timedelta(days=settings.window_days)
    runs = agent_runs(services.sessions, since)
    existing = read_skills(services.vault, settings.folder)
    window = f"the last {counted(settings.window_days, 'day')}"
    if ctx.model is not None:
        if not runs:
            return f"No skills written: no agent runs in {window}."
        material = _material(services, runs, existing, since)
        proposals, problem = ask_model(ctx.model, material, settings.min_repeats, runs)
        if problem is not None:
            return f"No skills written: {problem}."
        how = "by the model"
    else:
        proposals = repeated_sequences(runs, settings.min_repeats)
        how = f"by the rule: the same tools in {settings.min_repeats}+ sessions"
    today = services.clock.today()
    written: list[str] = []
    skipped: list[str] = []
    for proposal in proposals:
        skill = Skill(
            proposal.name,
            proposal.when_to_use,
            proposal.steps,
            proposal.tags,
            created=today,
            source_sessions=proposal.source_sessions,
        )
        twin = duplicate_of(skill, existing)
        if twin is not None:
            skipped.append(f"{skill.name} (like {twin})")
            continue
        path = _write(ctx, settings.folder, skill)
        if path is None:
            skipped.append(f"{skill.name} (a note of that name exists)")
            continue
        written.append(path)
        existing.append(Skill(skill.name, skill.when_to_use, skill.steps, path=path))
    if written:
        services.index.sync_paths(written)  # the context offers them at once
    for line in skipped:
        ctx.record(f"Skipped {line}.")
    found = f"{counted(len(runs), 'agent run')} in {window}"
    if not written:
        kept = f"; {len(skipped)} already known" if skipped else ""
        return f"No new skills ({how}; {found}{kept})."
    names = ", ".join(p.rsplit("/", 1)[-1].removesuffix(".md") for p in written)
    kept = f"; {len(skipped)} already known" if skipped else ""
    return f"Wrote {counted(len(written), 'skill')} ({how}; {found}{kept}): {names}."


def _write(ctx: JobContext, folder: str, skill: Skill) -> str | None:
    """Create the skill's note; None when a file is already there (it is left as it is)."""
    vault = ctx.services.vault
    path = f"{folder.strip('/')}/{safe_filename(skill.name, max_chars=MAX_NAME)}.md"
    if vault.exists(path):
        return None
    clean = ctx.will_change(path)
    if not vault.create_text(clean, skill.render()):
        # Someone created it this instant: it is theirs, and undo must not remove it.
        if ctx.changes is not None:
            ctx.changes.forget(clean)
        return None
    return clean


# -- reading the sessions -------------------------------------------------------------


def agent_runs(sessions: Sessions, since: datetime) -> list[AgentRun]:
    """The agent's runs in sessions active since ``since``, oldest first.

    A run starts at a user message; assistant messages carrying ``tool_calls``
    metadata add calls, a tool message with ``ok: false`` marks a failed call,
    and an assistant message without calls is the answer.
    """
    runs: list[AgentRun] = []
    for session in reversed(sessions.list(since=since, limit=MAX_SESSIONS)):
        current: AgentRun | None = None
        for message in sessions.messages(session.id, limit=MAX_MESSAGES):
            meta = message.metadata or {}
            if message.role == "user":
                current = AgentRun(session.id, session.key, message.text, message.sent_at)
                runs.append(current)
            elif current is None:
                continue
            elif message.role == "assistant" and meta.get("tool_calls"):
                for call in meta["tool_calls"]:
                    if isinstance(call, dict) and isinstance(call.get("name"), str):
                        arguments = call.get("arguments")
                        current.calls.append(
                            (call["name"], arguments if isinstance(arguments, dict) else {})
                        )
            elif message.role == "assistant":
                current.answered = True
            elif message.role == "tool" and meta.get("ok") is False:
                current.failed_calls += 1
    return [r for r in runs if r.started >= since]


# -- without a model: the repeated-sequence rule ---------------------------------------


def repeated_sequences(runs: list[AgentRun], min_repeats: int) -> list[Skill]:
    """A skill for each ordered list of two or more tool calls that succeeded in at
    least ``min_repeats`` sessions; the most widely used first."""
    groups: dict[tuple[str, ...], list[AgentRun]] = {}
    for agent_run in runs:
        if agent_run.succeeded and len(agent_run.calls) >= 2:
            groups.setdefault(agent_run.tools, []).append(agent_run)
    skills = []
    for tools, members in groups.items():
        sessions = sorted({r.session_id for r in members})
        if len(sessions) < min_repeats:
            continue
        steps = tuple(_step(n, tool, members) for n, tool in enumerate(tools))
        examples = list(dict.fromkeys(one_line(r.request, 100) for r in reversed(members)))
        quoted = ", ".join(f'"{e}"' for e in examples[:MAX_EXAMPLES])
        when = f"Requests like {quoted} (done this way in {counted(len(sessions), 'session')})."
        skills.append(
            Skill(
                _name_of(tools),
                when,
                steps,
                AUTO_TAGS,
                source_sessions=tuple(sessions),
            )
        )
    skills.sort(key=lambda s: (-len(s.source_sessions), s.name))
    return skills


def _name_of(tools: tuple[str, ...]) -> str:
    """``("search_memory", "create_task")`` -> "Search memory, then create task"."""
    name = ", then ".join(tool.replace("_", " ").strip() for tool in tools)
    return name[:1].upper() + name[1:]


def _step(position: int, tool: str, members: list[AgentRun]) -> str:
    """The tool at ``position`` with the argument names at least half its calls gave."""
    seen: Counter[str] = Counter()
    for member in members:
        seen.update(member.calls[position][1].keys())
    typical = [key for key, count in seen.items() if count * 2 >= len(members)]
    return f"Call `{tool}` with {', '.join(typical)}" if typical else f"Call `{tool}`"


# -- with a model -----------------------------------------------------------------------


def _material(
    services: Runtime, runs: list[AgentRun], existing: list[Skill], since: datetime
) -> str:
    """What the model reads: existing skills, the runs (newest first), the journal."""
    parts = ["Skills that exist already:"]
    parts += [f"- {s.name}" for s in existing] or ["- (none)"]
    parts.append("")
    parts.append("Agent runs, newest first:")
    for agent_run in reversed(runs):
        stamp = agent_run.started.strftime("%Y-%m-%d %H:%M")
        parts.append(f"Session {agent_run.session_id} ({agent_run.session_key}), {stamp}:")
        parts.append(f"  request: {one_line(agent_run.request, 300)}")
        for name, arguments in agent_run.calls:
            shown = one_line(json.dumps(arguments, ensure_ascii=False), 150)
            parts.append(f"  tool: {name} {shown}")
        outcome = "succeeded" if agent_run.succeeded else "did not succeed"
        failed = f", {counted(agent_run.failed_calls, 'tool call')} failed"
        parts.append(f"  outcome: {outcome}{failed if agent_run.failed_calls else ''}")
    journal = services.journal
    days = [d for d in journal.days() if d >= since.date()]
    if days:
        parts += ["", "Journal:"]
    for day in reversed(days):
        try:
            sections = journal.sections(day)
        except MemvaultError:
            continue
        for heading, items in sections.items():
            parts += [f"- {day} ({heading}) {one_line(item, 300)}" for item in items]
    return "\n".join(parts)


def ask_model(
    model: BudgetedModel, material: str, min_repeats: int, runs: list[AgentRun]
) -> tuple[list[Skill], str | None]:
    """The skills the model proposes, or none and why its answer cannot be used."""
    answer = draft(
        model,
        INSTRUCTIONS.format(min_repeats=min_repeats),
        material,
        markers=MARKERS,
        max_tokens=max(256, min(2000, model.tokens_left // 3)),
    )
    if answer.text is None:
        return [], answer.problem
    return parse_skills(answer.text, {r.session_id for r in runs})


def parse_skills(text: str, sessions: set[int]) -> tuple[list[Skill], str | None]:
    """The well-formed entries of the model's JSON array; a text that is not one is a problem.

    ``sessions`` are the session numbers the model was shown; others it names are dropped.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return [], "the model's answer was not JSON"
    if not isinstance(data, list):
        return [], "the model's answer was not a JSON array"
    skills = [skill for entry in data if (skill := _entry(entry, sessions)) is not None]
    dropped = len(data) - len(skills)
    if dropped and not skills:
        return [], f"all {counted(dropped, 'entry')} of the model's answer were malformed"
    return skills, None


def _entry(entry: Any, sessions: set[int]) -> Skill | None:
    """One proposed skill, or None when a field is missing or malformed."""
    if not isinstance(entry, dict):
        return None
    name, when, steps = entry.get("name"), entry.get("when_to_use"), entry.get("steps")
    if not isinstance(name, str) or not isinstance(when, str) or not isinstance(steps, list):
        return None
    name, when = one_line(name, 10_000), one_line(when, 10_000)
    if not name or len(name) > MAX_NAME or not when or len(when) > MAX_WHEN:
        return None
    try:
        safe_filename(name, max_chars=MAX_NAME)
    except UnsafePathError:
        return None
    if not 1 <= len(steps) <= MAX_STEPS or not all(isinstance(s, str) for s in steps):
        return None
    clean_steps = tuple(_NUMBERED.sub("", one_line(s, 10_000)) for s in steps)
    if not all(clean_steps) or any(len(s) > MAX_STEP for s in clean_steps):
        return None
    tags = list(AUTO_TAGS)
    raw_tags = entry.get("tags", [])
    for tag in raw_tags if isinstance(raw_tags, list) else []:
        try:
            clean = normalize_tag(tag) if isinstance(tag, str) else None
        except MemvaultError:
            continue
        if clean and clean.casefold() not in {t.casefold() for t in tags}:
            tags.append(clean)
    raw_sessions = entry.get("sessions", [])
    named = raw_sessions if isinstance(raw_sessions, list) else []
    source = tuple(sorted({s for s in named if isinstance(s, int) and s in sessions}))
    return Skill(name, when, clean_steps, tuple(tags), source_sessions=source)


# -- deduplication ------------------------------------------------------------------------


def normal_name(name: str) -> str:
    """A name's letters and digits, lowercase, single-spaced: what makes two names one."""
    return " ".join(_WORD.findall(name.casefold()))


def _words(skill: Skill) -> set[str]:
    """The words of name and when to use, plurals folded ("fridays" is "friday")."""
    text = f"{skill.name} {skill.when_to_use}".casefold()
    words = (w for w in _WORD.findall(text) if w not in STOPWORDS and len(w) > 1)
    return {w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words}


def duplicate_of(skill: Skill, existing: list[Skill]) -> str | None:
    """The name of an existing skill ``skill`` repeats: the same name, or mostly the same
    words in name and when to use (``SIMILAR`` of them, Jaccard); None if it is new."""
    name = normal_name(skill.name)
    words = _words(skill)
    for other in existing:
        if normal_name(other.name) == name:
            return other.name
        theirs = _words(other)
        if words and theirs and len(words & theirs) / len(words | theirs) >= SIMILAR:
            return other.name
    return None
