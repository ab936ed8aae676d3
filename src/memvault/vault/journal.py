"""The journal: one daily note per local day, ``Journal/YYYY-MM-DD.md``.

Entries are timestamped bullets under a section (Actions Taken, Commands
Received, Observations, Decisions Made, Follow-ups, or any other heading),
appended in the order they happen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from memvault.clock import Clock
from memvault.errors import InvalidInputError, NotFoundError
from memvault.vault import templates
from memvault.vault.markdown import append_to_section, headings, section_text
from memvault.vault.note import Note
from memvault.vault.store import Vault
from memvault.vocabulary import SECTIONS

JOURNAL_DIR = "Journal"
_SECTION_ALIASES = {
    "actions": "Actions Taken",
    "action": "Actions Taken",
    "actions taken": "Actions Taken",
    "commands": "Commands Received",
    "command": "Commands Received",
    "commands received": "Commands Received",
    "observations": "Observations",
    "observation": "Observations",
    "decisions": "Decisions Made",
    "decision": "Decisions Made",
    "decisions made": "Decisions Made",
    "follow-ups": "Follow-ups",
    "follow-up": "Follow-ups",
    "followups": "Follow-ups",
    "followup": "Follow-ups",
    "follow ups": "Follow-ups",
    "sessions": "Sessions",
    "session": "Sessions",
}
_DAY_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.md$")


def normalize_section(section: str) -> str:
    """The canonical section heading for a loose name ("decisions" -> "Decisions Made")."""
    name = " ".join(section.split()).strip("# ")
    if not name:
        raise InvalidInputError(f"Name a journal section, e.g. one of {', '.join(SECTIONS)}.")
    if len(name) > 80 or any(c in name for c in "#\n[]"):
        raise InvalidInputError(f"{section!r} cannot be a section heading.")
    return _SECTION_ALIASES.get(name.casefold(), name)


@dataclass(frozen=True)
class JournalEntry:
    """Where an entry was written."""

    path: str
    section: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"path": self.path, "section": self.section, "text": self.text}


class Journal:
    """Daily notes: create from the template, append entries, read them back."""

    def __init__(self, vault: Vault, clock: Clock) -> None:
        self.vault = vault
        self.clock = clock

    @staticmethod
    def path_for(day: date) -> str:
        """``Journal/YYYY-MM-DD.md``."""
        return f"{JOURNAL_DIR}/{day.isoformat()}.md"

    def ensure(self, day: date | None = None) -> str:
        """Create the day's note from the journal template if it does not exist yet."""
        moment = self.clock.now()
        if day is not None and day != moment.date():
            moment = datetime.combine(day, datetime.min.time(), tzinfo=self.clock.tz)
        path = self.path_for(moment.date())
        if not self.vault.is_file(path):
            text = templates.render(
                templates.load(self.vault, "journal"),
                title=moment.date().isoformat(),
                moment=moment,
            )
            self.vault.create_text(path, text)
        return path

    def append(
        self, section: str, entry: str, *, when: datetime | None = None, timestamp: bool = True
    ) -> JournalEntry:
        """Add an entry under ``section`` of the day's note (the section is created if missing).

        A multi-line entry becomes one bullet with indented continuation lines.
        """
        heading = normalize_section(section)
        lines = [line.rstrip() for line in entry.strip().splitlines()]
        if not lines or not lines[0].strip():
            raise InvalidInputError("The journal entry is empty.")
        moment = self.clock.localize(when) if when else self.clock.now()
        first = f"{moment.strftime('%H:%M')} {lines[0].strip()}" if timestamp else lines[0].strip()
        bullet = "\n".join(
            [f"- {first}", *(f"  {line}" if line.strip() else "" for line in lines[1:])]
        )
        path = self.ensure(moment.date())

        def add(text: str | None) -> str | None:
            assert text is not None
            note = Note.parse(text)
            note.body = append_to_section(note.body, heading, bullet)
            return note.render()

        self.vault.edit_text(path, add)
        return JournalEntry(path=path, section=heading, text=first)

    def read(self, day: date | None = None) -> str:
        """The day's note text; NotFoundError when nothing was written that day."""
        target = day or self.clock.today()
        try:
            return self.vault.read_text(self.path_for(target))
        except NotFoundError:
            raise NotFoundError(f"No journal entry for {target.isoformat()}.") from None

    def sections(self, day: date | None = None) -> dict[str, list[str]]:
        """Entries of a day by section heading (bullets only, continuation lines joined)."""
        body = Note.parse(self.read(day)).body
        out: dict[str, list[str]] = {}
        for heading in headings(body):
            if heading.level < 2:
                continue
            items: list[str] = []
            for line in (section_text(body, heading.text) or "").split("\n"):
                if re.match(r"^\s{0,1}[-*+]\s+", line):
                    items.append(
                        line.split(None, 1)[1].strip() if len(line.split(None, 1)) > 1 else ""
                    )
                elif line.startswith("  ") and items and line.strip():
                    items[-1] += "\n" + line.strip()
            out[heading.text] = [i for i in items if i]
        return out

    def days(self) -> list[date]:
        """Days that have a journal note, oldest first."""
        if not self.vault.resolve(JOURNAL_DIR).is_dir():
            return []
        found = []
        for entry in self.vault.list(JOURNAL_DIR, recursive=False):
            m = _DAY_FILE.match(entry.path.rsplit("/", 1)[-1])
            if m:
                try:
                    found.append(date.fromisoformat(m.group(1)))
                except ValueError:
                    continue
        return sorted(found)
