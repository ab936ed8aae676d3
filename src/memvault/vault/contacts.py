"""Contacts: one note per person in ``Contacts/``.

Frontmatter carries how to reach someone, including their identity on each
channel (``telegram: "123456"``), so a message arriving from a chat can be
matched to the person who sent it. The body keeps free notes and a dated
log of interactions.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from memvault.clock import Clock
from memvault.errors import ConflictError, InvalidInputError, NotFoundError, NotTextError
from memvault.text import TextScreen
from memvault.vault.collection import Collection, stem
from memvault.vault.markdown import (
    aliases,
    append_to_section,
    normalize_tag,
    replace_section,
    section_text,
)
from memvault.vault.note import Note
from memvault.vault.store import Vault
from memvault.vocabulary import KNOWN_CHANNELS

CONTACTS_DIR = "Contacts"
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_PHONE = re.compile(r"^\+?[0-9 ()./-]{3,32}$")
_INTERACTION = re.compile(r"^\s*[-*+]\s+(.*)$")


@dataclass
class Contact:
    """A person as read from their note."""

    path: str
    name: str
    relationship: str | None
    email: str | None
    phone: str | None
    aliases: list[str]
    tags: list[str]
    identities: dict[str, str]
    notes: str
    interactions: list[str] = field(default_factory=list)
    created: date | None = None
    follow_up: date | None = None  # frontmatter ``follow_up``: when to get back in touch

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": self.path,
            "name": self.name,
            "relationship": self.relationship,
            "email": self.email,
            "phone": self.phone,
            "aliases": list(self.aliases),
            "tags": list(self.tags),
            "identities": dict(self.identities),
            "notes": self.notes,
            "interactions": list(self.interactions),
            "created": self.created.isoformat() if self.created else None,
            "follow_up": self.follow_up.isoformat() if self.follow_up else None,
        }


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return str(value).strip()


def _date(value: Any) -> date | None:
    """A frontmatter date: YAML's own, or text starting YYYY-MM-DD (a hand edit)."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None
    return None


def _identity_values(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    return [str(value).strip()] if str(value).strip() else []


def contact_from_note(path: str, note: Note) -> Contact:
    """Read a contact from its note."""
    identities: dict[str, str] = {}
    for key in KNOWN_CHANNELS:
        values = _identity_values(note.get(key))
        if values:
            identities[key] = ", ".join(values)
    interactions = []
    for line in (section_text(note.body, "Interactions") or "").split("\n"):
        m = _INTERACTION.match(line)
        if m and m.group(1).strip():
            interactions.append(m.group(1).strip())
    created = note.get("created")
    tags = note.get("tags") or []
    return Contact(
        path=path,
        name=stem(path),
        relationship=_text(note.get("relationship")),
        email=_text(note.get("email")),
        phone=_text(note.get("phone")),
        aliases=aliases(note.frontmatter),
        tags=[
            str(t).lstrip("#") for t in (tags if isinstance(tags, list) else str(tags).split(","))
        ],
        identities=identities,
        notes=section_text(note.body, "Notes") or "",
        interactions=interactions,
        created=created if isinstance(created, date) else None,
        follow_up=_date(note.get("follow_up")),
    )


def check_channel(channel: str) -> str:
    """A channel name usable as a frontmatter key ("telegram", "whatsapp" ...)."""
    key = channel.strip().lower()
    if key not in KNOWN_CHANNELS:
        raise InvalidInputError(
            f"Unknown channel {channel!r}; use one of {', '.join(KNOWN_CHANNELS)}."
        )
    return key


def _identity_taken(channel: str, value: str, owner: Contact) -> ConflictError:
    """One person per identity: a second contact with it is a conflict."""
    return ConflictError(
        f"{channel} {value} already belongs to {owner.name} ({owner.path}); "
        f"use that contact, or give this one another {channel} id."
    )


class Contacts:
    """Create, log, find and list contact notes."""

    def __init__(self, vault: Vault, clock: Clock, *, screen: TextScreen | None = None) -> None:
        self.vault = vault
        self.clock = clock
        self.notes = Collection(vault, (CONTACTS_DIR,), "contact", by_alias=True, screen=screen)
        # path -> ((mtime_ns, size, ctime_ns), the frontmatter): a message from a channel
        # looks its sender up without parsing every contact again.
        self._frontmatter: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def create(
        self,
        name: str,
        *,
        relationship: str | None = None,
        email: str | None = None,
        phone: str | None = None,
        notes: str = "",
        aliases: Iterable[str] = (),
        identities: Mapping[str, str] | None = None,
        tags: Iterable[str] = (),
    ) -> Contact:
        """Create a contact note; a contact with the same name is a conflict."""
        name = " ".join(name.split())
        if not name:
            raise InvalidInputError("A contact needs a name.")
        identities = dict(identities or {})
        if "email" in identities:  # the email channel's identity is the contact's address
            email = email or identities.pop("email")
            identities.pop("email", None)
        if email and not _EMAIL.match(email.strip()):
            raise InvalidInputError(f"{email!r} is not an email address.")
        if phone and not _PHONE.match(phone.strip()):
            raise InvalidInputError(f"{phone!r} is not a phone number.")
        checked = {check_channel(k): str(v).strip() for k, v in (identities or {}).items()}
        for channel, value in checked.items():
            if not value:
                raise InvalidInputError(f"The {channel} identity is empty.")
            owner = self.find_by_identity(channel, value)
            if owner is not None:
                raise _identity_taken(channel, value, owner)
        now = self.clock.now()
        path, note = self.notes.start(name, now, advice="add to it with `memvault contact log`")
        note.set("created", now.date())
        note.set("relationship", relationship.strip() if relationship else None)
        note.set("email", email.strip() if email else None)
        note.set("phone", phone.strip() if phone else None)
        note.set("aliases", [" ".join(a.split()) for a in aliases if a.strip()])
        tag_values = [normalize_tag(t) for t in tags]
        if tag_values:
            existing_tags = [str(t) for t in note.get("tags") or []]
            note.set("tags", [*existing_tags, *(t for t in tag_values if t not in existing_tags)])
        for channel, value in checked.items():
            note.set(channel, value)
        body = note.body
        if notes.strip():
            body = replace_section(body, "Notes", notes.strip())
        body = append_to_section(
            body, "Interactions", f"- {now.date().isoformat()}: Contact created"
        )
        note.body = body
        self.notes.create(path, note)
        return contact_from_note(path, note)

    def get(self, ref: str) -> Contact:
        """The contact ``ref`` names: name, alias, file name, path, or ``channel:id``."""
        channel, sep, value = ref.partition(":")
        if sep and channel.strip().lower() in (*KNOWN_CHANNELS, "email") and value.strip():
            found = self.find_by_identity(channel, value)
            if found is not None:
                return found
        path = self.notes.find(ref)
        return contact_from_note(path, self.notes.load(path))

    def find_by_identity(self, channel: str, value: str) -> Contact | None:
        """The contact whose ``channel`` identity is ``value`` (e.g. telegram, "123456")."""
        key = "email" if channel.strip().lower() == "email" else check_channel(channel)
        wanted = str(value).strip().casefold()
        for path, frontmatter in self._frontmatters():
            values = frontmatter.get(key)
            if wanted in (v.casefold() for v in _identity_values(values) if v):
                try:
                    return contact_from_note(path, self.notes.load(path))
                except (NotFoundError, NotTextError):
                    continue
        return None

    def _frontmatters(self) -> list[tuple[str, dict[str, Any]]]:
        """Every contact's frontmatter; a note is parsed again only when its file changed."""
        if not self.vault.resolve(CONTACTS_DIR).is_dir():
            return []
        entries = self.vault.list(CONTACTS_DIR, recursive=False)
        out = []
        with self._lock:
            seen = set()
            for entry in entries:
                seen.add(entry.path)
                stamp = (entry.mtime_ns, entry.size, entry.ctime_ns)
                cached = self._frontmatter.get(entry.path)
                if cached is None or cached[0] != stamp:
                    try:
                        frontmatter = dict(self.notes.load(entry.path).frontmatter)
                    except (NotFoundError, NotTextError):
                        continue
                    cached = (stamp, frontmatter)
                    self._frontmatter[entry.path] = cached
                out.append((entry.path, cached[1]))
            for gone in set(self._frontmatter) - seen:
                del self._frontmatter[gone]
        return out

    def list(self) -> list[Contact]:
        """Every contact, by name."""
        contacts = [contact_from_note(p, note) for p, note in self.notes.each()]
        return sorted(contacts, key=lambda c: c.name.casefold())

    def log(self, ref: str, interaction: str, *, when: datetime | None = None) -> Contact:
        """Add a dated line to the contact's Interactions section."""
        text = " ".join(interaction.split())
        if not text:
            raise InvalidInputError("The interaction text is empty.")
        path = self.get(ref).path
        day = (self.clock.localize(when) if when else self.clock.now()).date().isoformat()

        def add(note: Note) -> None:
            note.body = append_to_section(note.body, "Interactions", f"- {day}: {text}")

        note = self.notes.update(path, add)
        return contact_from_note(path, note)

    def set_identity(self, ref: str, channel: str, value: str) -> Contact:
        """Record (or with an empty value, remove) the contact's identity on a channel."""
        key = check_channel(channel)
        path = self.get(ref).path
        clean = str(value).strip()
        if clean:
            owner = self.find_by_identity(key, clean)
            if owner is not None and owner.path != path:
                raise _identity_taken(key, clean, owner)

        def apply(note: Note) -> None:
            if clean:
                note.set(key, clean)
            else:
                note.delete(key)

        return contact_from_note(path, self.notes.update(path, apply))
