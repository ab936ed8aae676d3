"""What an agent run did to tasks, made durable after it ends.

A run changes tasks in two ways (see :mod:`memvault.agent.loop`):

- **its tool calls**: ``task_complete`` and ``task_update`` with a status
  change the task note when they run; afterwards each such change is said
  in today's journal under *Actions Taken*, so the day's record names every
  task the run closed, blocked or reopened;
- **its final answer**: when the answer states plainly that an open task is
  done or blocked, the task is updated as a tool call would have done it.

Reading the answer is deliberately narrow, since a wrong update is worse
than none. A sentence counts only when

1. it names exactly one open task, by its exact title (the note's name,
   ``[[Title]]`` or in quotes; case and spacing aside), a longer title
   that contains a shorter one winning over it;
2. the title and the status are tied by an explicit phrase: ``TITLE is
   done / completed / finished / blocked``, ``completed TITLE``, ``marked
   TITLE as done``, ``TITLE: done``, ``✅ TITLE``;
3. nothing in it hedges: no question, negation, condition or future
   (``not``, ``isn't``, ``yet``, ``if``, ``once``, ``will`` ...).

A task whose sentences disagree, one the run's tools already changed, or
one already in the stated status is left alone. The caller decides whose
answer may be read at all: the loop reads only runs for the owner, never a
conversation with a contact or a group (their words are untrusted and must
not change the owner's tasks).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memvault.errors import MemvaultError
from memvault.memory.outcomes import ACTIONS_SECTION, one_line
from memvault.vault.collection import stem
from memvault.vault.journal import Journal
from memvault.vault.tasks import ACTIVE_DIR, Task, Tasks, normalize_status

log = logging.getLogger(__name__)

STATUS_TOOLS = frozenset({"task_complete", "task_update"})
ANSWER = "answer"  # TaskChange.source of a change read from the final answer
_SENTENCE_CHARS = 160
# Words that make a sentence a question, a wish, a plan or a denial, not a report.
_HEDGES = re.compile(
    r"\?|n't\b|\b(?:not|no|never|yet|still|almost|nearly|partly|partially|unless|"
    r"if|once|when|whether|should|will|would|could|might|must|need|needs|going to|"
    r"unblocked|reopen(?:ed)?|remaining|pending|failed|unable|cannot|tried|attempted)\b",
    re.IGNORECASE,
)
_DONE = r"(?:done|complete|completed|finished)"
_BLOCKED = r"blocked"
_IS = r"(?:\s+task)?\s+(?:is|was|has\s+been|'s)\s+(?:now\s+|all\s+|fully\s+|also\s+)?"
_ARROW = r"\s*(?::|->|-)\s*"
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_QUOTE = "[\"'*_`]"
# Typographic quotes and dashes read as their plain forms, so one set of patterns serves.
_PLAIN = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2192": "->",
    }
)


@dataclass(frozen=True)
class TaskChange:
    """One task a run changed: its title, the status it got, and how (a tool's name, or
    ``answer``: read from the final answer, then ``sentence`` is the words that said so)."""

    title: str
    status: str
    source: str
    sentence: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "title": self.title,
            "status": self.status,
            "source": self.source,
            "sentence": self.sentence,
        }


def change_from_call(name: str, arguments: Mapping[str, Any], data: Any) -> list[TaskChange]:
    """The status change a successful task tool call made (none for other calls)."""
    if name not in STATUS_TOOLS or not isinstance(data, Mapping):
        return []
    if name == "task_update" and arguments.get("status") is None:
        return []  # a field or a note: the status stayed
    title, status = data.get("title"), data.get("status")
    if not isinstance(title, str) or not isinstance(status, str):
        return []
    return [TaskChange(title, status, name)]


@dataclass(frozen=True)
class _Claim:
    task: Task
    status: str
    sentence: str


def claims_in_answer(answer: str, open_tasks: Sequence[Task]) -> list[_Claim]:
    """The open tasks ``answer`` says, plainly and unambiguously, are done or blocked."""
    if not answer.strip() or not open_tasks:
        return []
    patterns = [(task, _name_pattern(task)) for task in open_tasks]
    answer = answer.translate(_PLAIN)
    found: dict[str, list[_Claim]] = {}
    for sentence in _SENTENCES.split(answer):
        sentence = sentence.strip()
        if not sentence or _HEDGES.search(sentence):
            continue
        named = _named_tasks(sentence, patterns)
        if len(named) != 1:
            continue  # none, or several: which one a status belongs to is a guess
        task, name = named[0]
        status = _stated_status(sentence, name)
        if status is not None:
            found.setdefault(task.path, []).append(_Claim(task, status, sentence))
    claims = []
    for said in found.values():
        if len({claim.status for claim in said}) == 1:  # sentences that disagree: neither
            claims.append(said[0])
    return claims


def _name_pattern(task: Task) -> str:
    """A task's names (title, file name) as a regex: whole words, spacing loose, in
    ``[[...]]``, in quotes or emphasis, or bare; a one-word name only linked or quoted
    ("the email is done" is not about a task called Email)."""
    names = sorted({task.title, stem(task.path)}, key=len, reverse=True)
    words = [name.split() for name in names if name.strip()]
    every = "|".join(r"\s+".join(re.escape(w) for w in name) for name in words)
    linked = rf"\[\[(?:{every})(?:\|[^\]]*)?\]\]"
    quoted = rf"{_QUOTE}+(?:{every}){_QUOTE}+"
    forms = [linked, quoted]
    several = "|".join(r"\s+".join(re.escape(w) for w in name) for name in words if len(name) > 1)
    if several:
        forms.append(rf"{_QUOTE}*(?<![\w\[])(?:{several})(?![\w]){_QUOTE}*")
    return "(?:" + "|".join(forms) + ")"


def _named_tasks(sentence: str, patterns: Iterable[tuple[Task, str]]) -> list[tuple[Task, str]]:
    """The tasks named in ``sentence``; a name found only inside a longer one is not."""
    spans: list[tuple[int, int, Task, str]] = []
    for task, pattern in patterns:
        for match in re.finditer(pattern, sentence, re.IGNORECASE):
            spans.append((match.start(), match.end(), task, pattern))
    named: dict[str, tuple[Task, str]] = {}
    for start, end, task, pattern in spans:
        inside = any(
            other is not task and s <= start and end <= e and (e - s) > (end - start)
            for s, e, other, _ in spans
        )
        if not inside:
            named[task.path] = (task, pattern)
    return list(named.values())


def _stated_status(sentence: str, name: str) -> str | None:
    """``done`` or ``blocked`` when ``sentence`` ties it to the task ``name`` explicitly."""
    for status, word in (("done", _DONE), ("blocked", _BLOCKED)):
        phrases = [
            rf"{name}{_IS}{word}\b",
            rf"{name}{_ARROW}{word}\b",
            rf"\bmarked\s+(?:the\s+task\s+)?{name}\s+(?:as\s+)?{word}\b",
        ]
        if status == "done":  # "completed TITLE", "✅ TITLE" say nothing of blocking
            phrases += [
                rf"\b(?:completed|finished|closed|done\s+with)\s+(?:the\s+task\s+)?{name}",
                rf"✅\s*{name}",
                rf"{name}\s*✅",
            ]
        if any(re.search(phrase, sentence, re.IGNORECASE) for phrase in phrases):
            return status
    return None


class TaskOutcomes:
    """Applies what a run's answer says about tasks, and journals every task it changed."""

    def __init__(self, tasks: Tasks, journal: Journal) -> None:
        self.tasks = tasks
        self.journal = journal

    def record(
        self,
        from_tools: Sequence[TaskChange],
        *,
        answer: str = "",
        keep: Callable[[str], str] = lambda text: text,
    ) -> list[TaskChange]:
        """Every task change of a run, journaled: the tool calls' (already made) and those
        read from ``answer`` (made here). Pass ``answer`` only for a finished run whose
        answer may change the owner's tasks. ``keep`` is applied to any text of the answer
        before it is stored (trust and secrets)."""
        changes = _last_per_task(from_tools)
        touched = {change.title.casefold() for change in changes}
        if answer.strip():
            for claim in self._claims(answer):
                if claim.task.title.casefold() in touched:
                    continue  # a tool already changed it in this run: that is what happened
                change = self._apply(claim, keep)
                if change is not None:
                    changes.append(change)
        for change in changes:
            self._journal(change)
        return changes

    def _claims(self, answer: str) -> list[_Claim]:
        if not re.search(rf"{_DONE}|{_BLOCKED}|✅", answer, re.IGNORECASE):
            return []  # the common case: no status word, no task listing
        open_tasks = self._open_tasks_named_in(answer)
        return [
            claim
            for claim in claims_in_answer(answer, open_tasks)
            if claim.task.status != claim.status
        ]

    def _open_tasks_named_in(self, answer: str) -> list[Task]:
        """The open tasks whose title occurs in ``answer`` at all: found by file name, so
        only those notes are read (listing every task reads them all)."""
        flat = " ".join(answer.translate(_PLAIN).casefold().split())
        named = []
        for path in self.tasks.notes.paths([ACTIVE_DIR]):
            if " ".join(stem(path).casefold().split()) not in flat:
                continue
            try:
                task = self.tasks.get(path)
            except MemvaultError:  # gone or unreadable since it was listed
                continue
            if task.is_open:
                named.append(task)
        return named

    def _apply(self, claim: _Claim, keep: Callable[[str], str]) -> TaskChange | None:
        said = keep(one_line(claim.sentence, _SENTENCE_CHARS))
        try:
            updated = self.tasks.change(
                claim.task.path,
                {},
                note=f"Marked {claim.status} after an agent run, whose answer said: {said}",
                status=normalize_status(claim.status),
            )
        except MemvaultError as exc:
            log.warning(
                "could not update a task the run's answer named",
                extra={"task": claim.task.title, "error": exc.message},
            )
            return None
        return TaskChange(updated.title, updated.status, ANSWER, said)

    def _journal(self, change: TaskChange) -> None:
        how = (
            f'from the answer: "{change.sentence}"'
            if change.source == ANSWER
            else f"by {change.source}"
        )
        entry = f"task [[{change.title}]] -> {change.status} ({how})"
        try:
            self.journal.append(ACTIONS_SECTION, entry)
        except MemvaultError as exc:
            log.warning("could not journal a task change", extra={"error": exc.message})


def _last_per_task(changes: Sequence[TaskChange]) -> list[TaskChange]:
    """A task changed twice in a run is journaled once, with its final status."""
    last: dict[str, TaskChange] = {}
    for change in changes:
        last.pop(change.title.casefold(), None)
        last[change.title.casefold()] = change
    return list(last.values())
