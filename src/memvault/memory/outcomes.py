"""What an agent run leaves behind in the vault.

After every run (see :mod:`memvault.agent.loop`):

- today's journal gets a line under *Actions Taken*: the status, the
  command, a one-line summary and the number of model calls;
- ``Current Status.md`` says what the agent did last, how it went and when;
- a failed run adds a line to ``Known Issues.md``, which the context builder
  shows to the next run so the same mistake is not made twice.

Each write is one atomic edit of one note; the fields of Current Status are
replaced in place, so anything else a person wrote there stays.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from memvault.clock import Clock
from memvault.text import TextScreen
from memvault.vault.journal import Journal
from memvault.vault.layout import CURRENT_STATUS, KNOWN_ISSUES
from memvault.vault.store import Vault
from memvault.vocabulary import counted

STATUS_NOTE = "Current Status.md"
ISSUES_NOTE = "Known Issues.md"
ACTIONS_SECTION = "Actions Taken"
_SUMMARY_CHARS = 200
_COMMAND_CHARS = 120
_FIELD = re.compile(r"^- \*\*(?P<name>[^*]+):\*\*")


@dataclass(frozen=True)
class RunOutcome:
    """How one run went, in the words the vault keeps."""

    command: str
    status: str  # done | failed | cancelled
    summary: str
    iterations: int
    session: str | None = None
    finished_at: datetime | None = None


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, shortened at a word boundary to ``limit`` characters."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1].rsplit(" ", 1)[0] or flat[: limit - 1]
    return cut.rstrip(" ,;:.") + "…"


class Outcomes:
    """Writes a run's outcome to the journal, Current Status and Known Issues."""

    def __init__(
        self, vault: Vault, journal: Journal, clock: Clock, *, screen: TextScreen | None = None
    ) -> None:
        self.vault = vault
        self.journal = journal
        self.clock = clock
        # The owner's command and the run's summary are stored: secrets stay out of them.
        self.screen = screen

    def record(self, outcome: RunOutcome) -> None:
        """Persist ``outcome``: journal line, status note, and a known issue on failure."""
        when = outcome.finished_at or self.clock.now()
        said, summed = outcome.command, outcome.summary
        if self.screen is not None:  # what was already said is redacted, never refused
            said, summed = self.screen(said, refuse=False), self.screen(summed, refuse=False)
        command = one_line(said, _COMMAND_CHARS)
        summary = one_line(summed, _SUMMARY_CHARS) if summed.strip() else ""
        calls = counted(outcome.iterations, "iteration")
        entry = f'{outcome.status}: "{command}"'
        if summary:
            entry += f" - {summary}"
        self.journal.append(ACTIONS_SECTION, f"{entry} ({calls})", when=when)
        self._status(outcome, command, summary, when)
        if outcome.status == "failed":
            stamp = self.clock.localize(when).strftime("%Y-%m-%d %H:%M")
            reason = summary or "no reason given"
            line = f'- {stamp} "{command}" failed after {calls}: {reason}'
            self.vault.edit_text(
                ISSUES_NOTE, lambda text: _append_line(text, line), must_exist=False
            )

    def _status(self, outcome: RunOutcome, command: str, summary: str, when: datetime) -> None:
        stamp = self.clock.localize(when).strftime("%Y-%m-%d %H:%M")
        result = outcome.status + (f" - {summary}" if summary else "")
        fields = {
            "Last active": stamp,
            "Last command": f'"{command}"',
            "Last outcome": result,
        }
        if outcome.session:
            fields["Session"] = outcome.session
        self.vault.edit_text(
            STATUS_NOTE, lambda text: _set_fields(text or CURRENT_STATUS, fields), must_exist=False
        )


def _set_fields(text: str, fields: dict[str, str]) -> str:
    """Replace the ``- **Name:** value`` lines of ``fields``; add the missing ones after them."""
    lines = text.split("\n")
    pending = dict(fields)
    last_field = -1
    for n, line in enumerate(lines):
        match = _FIELD.match(line)
        if match is None:
            continue
        last_field = n
        name = match.group("name").strip()
        if name in pending:
            lines[n] = f"- **{name}:** {pending.pop(name)}"
    if pending:
        if last_field < 0:
            title = next((n for n, line in enumerate(lines) if line.startswith("# ")), None)
            last_field = title + 1 if title is not None else -1
            if title is not None:
                lines.insert(last_field, "")
        added = [f"- **{name}:** {value}" for name, value in pending.items()]
        lines[last_field + 1 : last_field + 1] = added
    return "\n".join(lines)


def _append_line(text: str | None, line: str) -> str:
    base = (text if text is not None else KNOWN_ISSUES).rstrip("\n")
    last = base.rsplit("\n", 1)[-1]
    gap = "\n" if last.strip() and not last.lstrip().startswith("- ") else ""
    return f"{base}\n{gap}{line}\n"
