"""The Channels and people page: each channel's state, error and last message; the senders
waiting to be let in (approve, block); the outbox (retry a failed message); the contacts,
the channels they are known on, and their recent conversation (the last messages of the
session each of their chats logs to, ``telegram:<chat>``, linked to its transcript).

The state is the hub's own report (what ``memvault channels status`` and ``GET
/v1/channels`` show). Approve, block and retry take the path ``memvault channels
approve`` / ``block`` / ``outbox retry`` and the API's routes take
(:mod:`memvault.channels.owner`), so a decision is recorded alike wherever it is
made (``decided_by`` says ``console``). They change who may talk to the agent, so
they are the owner's (the admin scope); any scope may look, and only the owner's
console is shown the pairing codes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from memvault.channels import owner
from memvault.channels.access import shown_code
from memvault.channels.hooks import session_key
from memvault.console.pages import Console, PageRefusedError, Visit
from memvault.console.stamped import Stamped
from memvault.errors import MemvaultError
from memvault.gateway.daemon import Daemon
from memvault.gateway.tokens import Scope as TokenScope
from memvault.vault.contacts import CONTACTS_DIR, Contact

OUTBOX_SHOWN = 30
# A contact's recent conversation: the last messages of each of their chats' sessions.
CONVERSATION_SHOWN = 3
_MAX_REF = 200
BY = "console"


def overview(daemon: Daemon, *, codes: bool) -> dict[str, Any]:
    """Channels, waiting senders, the outbox's unsent messages and the contacts."""
    hub = daemon.hub
    channels = hub.status()
    for channel in channels:
        channel["last_message"] = _last_message(daemon, channel["channel"])
    waiting = []
    for sender in owner.pending(hub):
        shown = sender.to_dict()
        shown["code"] = shown_code(sender.code) if codes and sender.code else None
        waiting.append(shown)
    unsent = [
        row.to_dict()
        for status in ("failed", "pending")
        for row in owner.outbox(hub, status, OUTBOX_SHOWN)
    ]
    return {
        "channels": channels,
        "waiting": waiting,
        "outbox": unsent,
        "contacts": [
            {**c.to_dict(), "conversations": conversations(daemon, c)} for c in contacts(daemon)
        ],
    }


# The contacts as last read, kept while no note of theirs changes.
_CONTACTS: Stamped[list[Contact]] = Stamped(keep=1)


def contacts(daemon: Daemon) -> list[Contact]:
    """Every contact, by name (read again only when a contact's note changed)."""
    book = daemon.runtime.contacts
    return _CONTACTS.get(daemon.runtime.vault, (CONTACTS_DIR,), book.list)


def conversations(daemon: Daemon, contact: Contact) -> list[dict[str, Any]]:
    """The sessions of the contact's chats (each chat's open one, else its latest: the key
    ``telegram:<chat>`` a channel logs to), the most recently active first, each with its
    last :data:`CONVERSATION_SHOWN` messages."""
    sessions = daemon.sessions
    found = []
    for channel, ids in sorted(contact.identities.items()):
        for chat in ids.split(", "):  # a contact's several ids on one channel, as read
            try:
                session = sessions.get(session_key(channel, chat))
            except MemvaultError:  # no conversation yet (or an id no key can hold)
                continue
            messages = sessions.messages(session.id, limit=CONVERSATION_SHOWN)
            found.append((session, [m.to_dict() for m in messages]))
    found.sort(key=lambda pair: pair[0].last_message_at or pair[0].started_at, reverse=True)
    return [{"session": session.to_dict(), "messages": said} for session, said in found]


def _last_message(daemon: Daemon, channel: str) -> dict[str, Any] | None:
    """The newest message a running channel received or sent; None for a channel off."""
    try:
        found = daemon.hub.messages(channel, None, 1)["messages"]
    except MemvaultError:  # not enabled: no adapter to ask
        return None
    return dict(found[-1]) if found else None


class PeoplePage:
    """The Channels and people page's routes, on a console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.daemon = console.daemon

    def routes(self) -> list[BaseRoute]:
        """``/people``, a sender's approve and block, an outbox message's retry."""
        return [
            Route("/people", self.people_page),
            Route("/people/{channel}/{action:str}", self.decide, methods=["POST"]),
            Route("/outbox/{outbox_id:int}/retry", self.retry, methods=["POST"]),
        ]

    async def people_page(self, request: Request) -> Response:
        """Channels, who waits, the outbox, the contacts."""
        console = self.console
        try:
            visit = console.visit(request)
            data = await console.run(visit, lambda: overview(self.daemon, codes=visit.is_admin))
        except PageRefusedError as refusal:
            return console.refused(refusal)
        said = request.query_params.get("said", "")[:300]
        return console.render("people.html", visit, page="people", said=said, **data)

    async def decide(self, request: Request) -> Response:
        """Approve or block a sender, as ``memvault channels approve`` / ``block`` do."""
        console = self.console
        visit: Visit | None = None
        try:
            visit = console.visit(request)
            console.needs(visit, TokenScope.ADMIN)
            fields = await console.changing(request, visit)
            action = request.path_params["action"]
            channel = request.path_params["channel"][:_MAX_REF]
            sender = fields.get("sender", "").strip()[:_MAX_REF]
            if action not in ("approve", "block") or not sender:
                raise PageRefusedError(400, "Choose approve or block on the sender's own row.")
            console.plain(sender, "sender")
            console.plain(channel, "channel")
            decide = owner.approve if action == "approve" else owner.block
            decided = await console.run(
                visit, lambda: decide(self.daemon.hub, channel, sender, by=BY)
            )
        except PageRefusedError as refusal:
            return console.refused(refusal, visit)
        done = "Approved" if action == "approve" else "Blocked"
        said = f"{done} {decided.label} on {decided.channel}."
        return RedirectResponse(f"/people?said={quote(said, safe='')}", status_code=303)

    async def retry(self, request: Request) -> Response:
        """Queue a failed outbox message again, as ``memvault channels outbox`` retry does."""
        console = self.console
        visit: Visit | None = None
        outbox_id = request.path_params["outbox_id"]
        try:
            visit = console.visit(request)
            console.needs(visit, TokenScope.ADMIN)
            await console.changing(request, visit)
            await console.run(visit, owner.retry, self.daemon.hub, outbox_id)
        except PageRefusedError as refusal:
            return console.refused(refusal, visit)
        said = f"Outbox message {outbox_id} is queued again."
        return RedirectResponse(f"/people?said={quote(said, safe='')}", status_code=303)
