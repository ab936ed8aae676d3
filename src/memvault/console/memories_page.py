"""The Memories page's changes: a memory's text edited, and memories chosen in the results
forgotten, moved to another category or tagged, together.

An edit carries the hash of the memory's note as the page read it and goes
through :meth:`~memvault.memory.consolidation.Consolidator.edit`, which writes
only if the note still holds exactly that: when the file was changed since (in
Obsidian, say) nothing is written and the page shows the memory as the file
has it now beside the person's own text, which stays in the form (with the new
hash: saving again is a decision made with both in view).

The bulk changes take the services the single ones take: forgetting through
the forgetter (every place, with its receipt; asked to confirm first, the list
shown), moving and tagging through the consolidator, which logs each change in
the memory's history. All need the write scope, the session's CSRF token and
the console's origin; a read-only console shows none of it.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from memvault.console import views
from memvault.console.pages import Console, PageRefusedError, Visit
from memvault.gateway.daemon import Daemon
from memvault.gateway.routes.memory import visible
from memvault.gateway.tokens import Scope as TokenScope

log = logging.getLogger(__name__)

# At most this many memories in one bulk change (a page shows twenty or thirty).
BULK_MOST = 100
_BACK_KEYS = ("q", "kind", "category", "tag", "source", "since", "until", "trust")
_ACTIONS = ("forget", "category", "tag")


def edit(daemon: Daemon, memory_id: str, text: str, expected_hash: str) -> str:
    """The owner's new text for a memory, if its note is as the page read it."""
    found = visible(daemon, memory_id)
    return daemon.runtime.consolidation.edit(found.id, text, expected_hash=expected_hash).id


def chosen(daemon: Daemon, ids: list[str]) -> list[dict[str, Any]]:
    """The memories chosen, as the confirmation lists them (each one the caller may see)."""
    return [visible(daemon, memory_id).to_dict() for memory_id in ids]


def apply(daemon: Daemon, action: str, ids: list[str], value: str) -> str:
    """Forget, move or tag each chosen memory; the sentence the page shows."""
    memories = [visible(daemon, memory_id) for memory_id in ids]  # all checked before any change
    consolidation = daemon.runtime.consolidation
    if action == "forget":
        for memory in memories:
            daemon.runtime.forgetter.forget(memory.id)
        return f"Forgotten everywhere: {_count(len(memories))}."
    if action == "category":
        category = daemon.runtime.memories.check_category(value)
        for memory in memories:
            consolidation.recategorize(memory.id, category)
        return f"Moved {_count(len(memories))} to {category}."
    for memory in memories:
        consolidation.tag(memory.id, [value])
    return f"Tagged {_count(len(memories))} #{value}."


def _count(n: int) -> str:
    return "1 memory" if n == 1 else f"{n} memories"


def back_to(raw: str) -> str:
    """The search the change was made from (only the form's own fields kept)."""
    given = parse_qs(raw[:2000])
    kept = {k: v[0][:500] for k, v in given.items() if k in _BACK_KEYS and v}
    return urlencode(kept)


class MemoriesPage:
    """The Memories page's changes, on a console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.daemon = console.daemon

    def routes(self) -> list[BaseRoute]:
        """A memory's edit, and the bulk change of the chosen results."""
        return [
            Route("/memories/{memory_id}/edit", self.edit, methods=["POST"]),
            Route("/memories/bulk", self.bulk, methods=["POST"]),
        ]

    async def edit(self, request: Request) -> Response:
        """Save a memory's new text; a note changed since the page was read is shown, both
        versions, nothing written."""
        console = self.console
        memory_id = request.path_params["memory_id"]
        visit: Visit | None = None
        try:
            visit = console.visit(request)
            console.needs(visit, TokenScope.WRITE)
            fields = await console.changing(request, visit)
            text = fields.get("text", "")
            console.plain(text, "text")
            expected = fields.get("hash", "")
            if not expected:
                raise PageRefusedError(400, "This form has no note hash; reload the page.")
            try:
                await console.run(visit, edit, self.daemon, memory_id, text, expected)
            except PageRefusedError as refused:
                if refused.status != 409:
                    raise
                return await self._both(visit, memory_id, text, refused.message)
        except PageRefusedError as refusal:
            return console.refused(refusal, visit)
        log.info("memory edited from the console", extra={"memory_id": memory_id})
        return RedirectResponse(f"/memories/{quote(memory_id, safe='')}", status_code=303)

    async def _both(self, visit: Visit, memory_id: str, draft: str, message: str) -> Response:
        """The memory as the file has it now, and the person's text kept in the form."""
        console = self.console
        try:
            shown = await console.run(visit, views.memory, self.daemon, memory_id)
        except PageRefusedError as gone:
            said = f"{gone.message} Your text was not saved; here it is: {draft}"
            raise PageRefusedError(gone.status, said) from gone
        return console.render(
            "memory.html",
            visit,
            409,
            page="memories",
            conflict=message,
            draft=draft,
            **shown,
        )

    async def bulk(self, request: Request) -> Response:
        """Forget (after a confirmation), move or tag the memories chosen in the results."""
        console = self.console
        visit: Visit | None = None
        try:
            visit = console.visit(request)
            console.needs(visit, TokenScope.WRITE)
            fields = await console.changing(request, visit)
            # Several ``id`` fields: the body again, every value kept (Starlette keeps it).
            body = parse_qs((await request.body()).decode("utf-8", "replace"))
            ids = list(dict.fromkeys(i.strip() for i in body.get("id", []) if i.strip()))
            action = fields.get("action", "")
            back = back_to(fields.get("back", ""))
            if action not in _ACTIONS:
                raise PageRefusedError(400, "Choose forget, move or tag for the chosen memories.")
            if not ids:
                raise PageRefusedError(400, "Choose at least one memory in the results first.")
            if len(ids) > BULK_MOST:
                raise PageRefusedError(400, f"Choose at most {BULK_MOST} memories at a time.")
            for memory_id in ids:
                console.plain(memory_id, "id")
            value = ""
            if action == "category":
                value = fields.get("category", "").strip()[:40]
            elif action == "tag":
                value = fields.get("tag", "").strip().lstrip("#")[:80]
                console.plain(value, "tag")
                if not value or any(c.isspace() for c in value):
                    raise PageRefusedError(400, "Give one tag (no spaces) to add.")
            if action == "forget" and fields.get("confirmed") != "yes":
                listed = await console.run(visit, chosen, self.daemon, ids)
                return console.render(
                    "bulk_forget.html", visit, page="memories", chosen=listed, back=back
                )
            said = await console.run(visit, apply, self.daemon, action, ids, value)
        except PageRefusedError as refusal:
            return console.refused(refusal, visit)
        log.info("memories changed from the console", extra={"action": action, "count": len(ids)})
        where = f"{back}&" if back else ""
        return RedirectResponse(f"/memories?{where}said={quote(said, safe='')}", status_code=303)
