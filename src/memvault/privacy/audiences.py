"""Audiences: who a conversation is with, and the part of the memory they may see.

Every conversation has an audience: the owner; one contact; a group. The
owner sees everything. Anyone else works with a narrowed *view*, decided
here and never by the model:

- what is shared with them: a memory with ``[share:: Contacts/Ada Lovelace]``
  or a tag ``#share/family``; a note whose frontmatter ``share:`` list or
  tags name them; with a contact's name, note path or alias, a group's name,
  a name the owner gave them (``[privacy.contacts."Ada Lovelace"] share``),
  a name their channel shares with everyone (``channels.NAME.share``), or
  ``everyone``;
- the contact's own note (a group has none);
- the conversation itself (the session's earlier turns).

A contact the owner trusts with everything (``[privacy.contacts."Sam"]
trusted = true``, or their id in ``channels.NAME.trusted``) gets the owner's
view in a private chat; in a group, the group's view always holds, since
everyone in it reads the answer.

Names are compared loosely: ``Contacts/Ada Lovelace``, ``[[Ada Lovelace]]``,
``ada-lovelace`` and ``#share/Ada_Lovelace`` are one name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from memvault.config import ContactPrivacy, Settings
from memvault.errors import InvalidInputError, MemvaultError, NotFoundError
from memvault.vault.contacts import Contact, Contacts
from memvault.vault.markdown import note_tags
from memvault.vault.memories import Memory
from memvault.vault.note import Note

OWNER_KIND: Final = "owner"
CONTACT_KIND: Final = "contact"
GROUP_KIND: Final = "group"
EVERYONE = "everyone"
SHARE_FIELD = "share"  # a memory's inline field and a note's frontmatter key
SHARE_TAG = "share/"  # a tag shares with the name after it: #share/family
_SEPARATORS = re.compile(r"[,;]")
_SPACES = re.compile(r"[\s_]+")


def share_key(value: str) -> str:
    """The form a share name is compared in: ``[[Contacts/Ada Lovelace|Ada]]``,
    ``#share/ada_lovelace`` and ``Ada Lovelace.md`` meet as ``ada-lovelace``
    (a path keeps its folder: ``contacts/ada-lovelace``)."""
    text = value.strip().strip("[]").split("|", 1)[0].split("#^", 1)[0].strip()
    text = text.lstrip("#").removesuffix(".md")
    if text.casefold().startswith(SHARE_TAG):
        text = text[len(SHARE_TAG) :]
    return _SPACES.sub("-", text.strip().casefold()).strip("-/")


def _names(value: Any) -> list[str]:
    """The share names a frontmatter value or field holds (a list, or text with commas)."""
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else _SEPARATORS.split(str(value))
    return [key for item in items if (key := share_key(str(item)))]


def _tag_shares(tags: Iterable[str]) -> set[str]:
    return {share_key(tag) for tag in tags if tag.lstrip("#").casefold().startswith(SHARE_TAG)} - {
        ""
    }


def memory_shares(memory: Memory) -> set[str]:
    """The names a memory is shared with (its ``share`` field and ``#share/...`` tags)."""
    return set(_names(memory.fields.get(SHARE_FIELD))) | _tag_shares(memory.tags)


def note_shares(note: Note) -> set[str]:
    """The names a note is shared with (frontmatter ``share:`` and ``#share/...`` tags)."""
    return set(_names(note.frontmatter.get(SHARE_FIELD))) | _tag_shares(
        note_tags(note.frontmatter, note.body)
    )


@dataclass(frozen=True)
class Audience:
    """Who a conversation is with, and the names of what they may see."""

    kind: Literal["owner", "contact", "group"]
    name: str = ""  # the contact's note path without .md, or the group's name
    display: str = ""  # how the agent calls them
    shares: frozenset[str] = field(default_factory=frozenset)
    trusted: bool = False  # a contact trusted with the owner's view
    contact_path: str | None = None  # the contact's own note

    @property
    def narrowed(self) -> bool:
        """Whether this audience sees only what is shared with it (not the owner's view)."""
        return self.kind != OWNER_KIND and not self.trusted

    @property
    def label(self) -> str | None:
        """``contact:PATH`` or ``group:NAME``; None for the owner (and anyone trusted)."""
        if not self.narrowed:
            return None
        return f"{self.kind}:{self.name}"

    def sees_memory(self, memory: Memory) -> bool:
        """Whether this audience may see ``memory``."""
        if not self.narrowed:
            return True
        return not memory.retired and bool(memory_shares(memory) & self.shares)

    def sees_note(self, path: str, note: Note) -> bool:
        """Whether this audience may see the note at ``path``."""
        if not self.narrowed:
            return True
        return path == self.contact_path or bool(note_shares(note) & self.shares)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "kind": self.kind,
            "name": self.name,
            "display": self.display,
            "label": self.label,
            "narrowed": self.narrowed,
            "trusted": self.trusted,
            "contact": self.contact_path,
            "shares": sorted(self.shares),
        }


OWNER = Audience(OWNER_KIND, display="the owner")


class Audiences:
    """Finds the audience of a conversation, from the settings and the contact notes."""

    def __init__(self, settings: Settings, contacts: Contacts) -> None:
        self.settings = settings
        self.contacts = contacts

    def of_chat(
        self,
        channel: str,
        chat_id: str,
        sender_id: str,
        *,
        owner: bool,
        group: bool,
        sender_name: str = "",
    ) -> Audience:
        """The audience of a message: the owner in their private chat; a group whenever
        others read the chat; otherwise the contact who wrote."""
        config = self.settings.channels.sections().get(channel)
        channel_shares = {share_key(s) for s in config.share} if config else set()
        if group:
            name = (config.groups.get(chat_id) if config else None) or f"{channel}:{chat_id}"
            shares = {share_key(name), EVERYONE, *channel_shares} - {""}
            return Audience(
                GROUP_KIND, name=name, display=f"the group {name}", shares=frozenset(shares)
            )
        if owner:
            return OWNER
        contact = self._contact_by_identity(channel, sender_id)
        trusted_id = bool(config and sender_id in config.trusted)
        if contact is None:
            name = f"{channel}:{sender_id}"
            shares = {share_key(name), EVERYONE, *channel_shares} - {""}
            return Audience(
                CONTACT_KIND,
                name=name,
                display=sender_name or name,
                shares=frozenset(shares),
                trusted=trusted_id,
            )
        audience = self.of_contact(contact, extra=channel_shares)
        return replace(audience, trusted=True) if trusted_id else audience

    def of_contact(self, contact: Contact, *, extra: Iterable[str] = ()) -> Audience:
        """A contact's audience: what is shared with their name, path or aliases, and with
        the names ``[privacy.contacts]`` gives them."""
        stem = contact.path.removesuffix(".md")
        names = {share_key(stem), share_key(contact.name), *map(share_key, contact.aliases)}
        configured = self._configured(names)
        shares = {
            *names,
            *(share_key(s) for s in (configured.share if configured else ())),
            *extra,
            EVERYONE,
        } - {""}
        return Audience(
            CONTACT_KIND,
            name=stem,
            display=contact.name,
            shares=frozenset(shares),
            trusted=bool(configured and configured.trusted),
            contact_path=contact.path,
        )

    def named(self, ref: str) -> Audience:
        """The audience ``ref`` names: ``owner``, ``group:NAME``, or a contact (name, alias,
        note path, ``channel:id``) — for ``memvault context --as``."""
        clean = ref.strip()
        if not clean:
            raise InvalidInputError("Name the audience: owner, group:NAME or a contact.")
        if clean.casefold() == OWNER_KIND:
            return OWNER
        kind, sep, rest = clean.partition(":")
        if sep and kind.strip().casefold() == GROUP_KIND and rest.strip():
            channel, colon, chat_id = rest.strip().partition(":")
            if colon and channel in self.settings.channels.sections():
                return self.of_chat(channel, chat_id, "", owner=False, group=True)
            name = rest.strip()
            return Audience(
                GROUP_KIND,
                name=name,
                display=f"the group {name}",
                shares=frozenset({share_key(name), EVERYONE} - {""}),
            )
        try:
            contact = self.contacts.get(clean)
        except NotFoundError:
            raise NotFoundError(
                f"No contact is called {clean!r}; name one from `memvault contacts`, "
                "or say owner or group:NAME."
            ) from None
        return self.of_contact(contact)

    def settings_of(self, name: str) -> ContactPrivacy | None:
        """The ``[privacy.contacts]`` entry of the contact ``name`` names (a note path, name
        or alias), if any."""
        names = {share_key(name), share_key(name.rsplit("/", 1)[-1])}
        try:
            contact = self.contacts.get(name)
        except MemvaultError:  # no such note (a stranger's ``channel:id``): names only
            contact = None
        if contact is not None:
            names |= {share_key(contact.name), *map(share_key, contact.aliases)}
        return self._configured(names - {""})

    def _contact_by_identity(self, channel: str, sender_id: str) -> Contact | None:
        try:
            return self.contacts.find_by_identity(channel, sender_id)
        except MemvaultError:  # a channel no contact note can name: no contact
            return None

    def _configured(self, names: set[str]) -> ContactPrivacy | None:
        """The ``[privacy.contacts]`` entry naming a contact known by ``names``, if any."""
        for key, value in self.settings.privacy.contacts.items():
            if share_key(key) in names:
                return value
        return None
