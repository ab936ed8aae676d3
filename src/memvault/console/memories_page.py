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
the memory's history. A memory that cannot be changed (forgotten or edited
meanwhile, its note no longer text) does not stop the others: every other one is
changed, then a report says in one sentence each which were not, and why. All
need the write scope, the session's CSRF token and the console's origin; a
read-only console shows none of it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from memvault.console import views
from memvault.console.pages import Console, PageRefusedError, Visit
from memvault.errors import MemvaultError, NotFoundError
from memvault.gateway.daemon import Daemon
from memvault.gateway.routes.memory import visible
from memvault.gateway.tokens import Scope as TokenScope
from memvault.vault.markdown import normalize_tag

log = logging.getLogger(__name__)

# At most this many memories in one bulk change (a page shows twenty or thirty).
BULK_MOST = 100
_BACK_KEYS = ("q", "kind", "category", "tag", "source", "since", "until", "trust")
_ACTIONS = ("forget", "category", "tag")


def edit(daemon: Daemon, memory_id: str, text: str, expected_hash: str) -> str:
    """The owner's new text for a memory, if its note is as the page read it."""
    found = visible(daemon, memory_id)
    return daemon.runtime.consolidation.edit(found.id, text, expected_hash=expected_hash).id


@dataclass
class Outcome:
    """What a bulk change did: the sentence for the memories changed, and one sentence for
    each chosen memory it could not change (forgotten or edited meanwhile, say)."""

    said: str
    done: int
    not_done: list[str] = field(default_factory=list)


_VERBS = {"forget": "forgotten", "category": "moved", "tag": "tagged"}


def chosen(daemon: Daemon, ids: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The memories chosen, as the confirmation lists them (each one the caller may see),
    and a sentence for each that is gone already."""
    listed: list[dict[str, Any]] = []
    gone: list[str] = []
    for memory_id in ids:
        try:
            listed.append(visible(daemon, memory_id).to_dict())
        except MemvaultError as exc:
            gone.append(_not_done(memory_id, "forget", exc))
    return listed, gone


def apply(daemon: Daemon, action: str, ids: list[str], value: str) -> Outcome:
    """Forget, move or tag each chosen memory; one that fails (forgotten or edited
    meanwhile) is left and said, and the others are still done."""
    consolidation = daemon.runtime.consolidation
    # What is wrong for every memory is refused before the first change.
    if action == "category":
        value = daemon.runtime.memories.check_category(value)
    elif action == "tag":
        value = normalize_tag(value)
    done = 0
    not_done: list[str] = []
    for memory_id in ids:
        try:
            memory = visible(daemon, memory_id)
            if action == "forget":
                daemon.runtime.forgetter.forget(memory.id)
            elif action == "category":
                consolidation.recategorize(memory.id, value)
            else:
                consolidation.tag(memory.id, [value])
        except MemvaultError as exc:
            log.info(
                "a memory of a bulk change was not changed",
                extra={"action": action, "memory_id": memory_id, "code": exc.code},
            )
            not_done.append(_not_done(memory_id, action, exc))
            continue
        done += 1
    if not done:
        said = f"No memory was {_VERBS[action]}."
    elif action == "forget":
        said = f"Forgotten everywhere: {_count(done)}."
    elif action == "category":
        said = f"Moved {_count(done)} to {value}."
    else:
        said = f"Tagged {_count(done)} #{value}."
    return Outcome(said, done, not_done)


def _not_done(memory_id: str, action: str, exc: MemvaultError) -> str:
    """One sentence: which memory was not changed, and why."""
    if isinstance(exc, NotFoundError):
        why = "it is no longer in the vault (forgotten, or its line changed, meanwhile)"
    else:
        why = exc.message.rstrip(".")
    return f"{memory_id} was not {_VERBS[action]}: {why}."


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
                listed, gone = await console.run(visit, chosen, self.daemon, ids)
                if not listed:
                    raise PageRefusedError(404, " ".join(gone))
                return console.render(
                    "bulk_forget.html", visit, page="memories", chosen=listed, gone=gone, back=back
                )
            outcome = await console.run(visit, apply, self.daemon, action, ids, value)
        except PageRefusedError as refusal:
            return console.refused(refusal, visit)
        log.info(
            "memories changed from the console",
            extra={"action": action, "count": outcome.done, "not_done": len(outcome.not_done)},
        )
        where = f"{back}&" if back else ""
        if outcome.not_done:
            # A sentence for each memory left: the report itself, not squeezed into the address.
            return console.render(
                "bulk_done.html",
                visit,
                200 if outcome.done else 409,
                page="memories",
                outcome=outcome,
                back=back,
            )
        said = quote(outcome.said, safe="")
        return RedirectResponse(f"/memories?{where}said={said}", status_code=303)
