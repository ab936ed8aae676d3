"""``memvault forget ID | --contact NAME | --about TEXT``: forgetting everywhere, with a
receipt (:mod:`memvault.privacy.forgetting`).

A memory is forgotten at once; a person or a topic is first shown (the memories, the
notes and the chats it would remove) and asked about: ``--yes`` skips the question,
``--dry-run`` only shows. With a daemon serving the vault everything goes through it
(``DELETE /v1/memories/{id}``, ``POST /v1/forget``); both ways print the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from memvault.cli.common import (
    DirectOption,
    JsonOption,
    VaultOption,
    emit_json,
    open_runtime,
    say,
    stdout,
    table,
    via_daemon,
)
from memvault.errors import EXIT_FAILED, InvalidInputError
from memvault.text import one_line
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.privacy.forgetting import Forgetter
    from memvault.privacy.receipts import Plan


def forget(
    ctx: typer.Context,
    memory_id: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="Memory id, e.g. m-3f9a1c2b.")
    ] = None,
    contact: Annotated[
        str | None,
        typer.Option(
            "--contact",
            metavar="NAME",
            help="Everything about a person: their note, chats, memories.",
        ),
    ] = None,
    about: Annotated[
        str | None,
        typer.Option("--about", metavar="TEXT", help="Everything a search finds about a topic."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before removing.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would be removed.")
    ] = False,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Forget a memory everywhere (its line, the index, insights, entity notes, MEMORY.md,
    the journal, chat copies) and print a receipt of each place."""
    chosen = [x for x in (memory_id, contact, about) if x is not None]
    if len(chosen) != 1:
        raise InvalidInputError("Name one thing to forget: an ID, --contact NAME or --about TEXT.")
    if memory_id is not None:
        if dry_run:
            raise InvalidInputError("--dry-run lists what --contact or --about would remove.")
        _forget_one(ctx, vault, memory_id, as_json=as_json)
        return
    if as_json and not (yes or dry_run):
        raise InvalidInputError("With --json, say --yes (remove) or --dry-run (only list).")
    body: dict[str, Any] = {"contact": contact} if contact is not None else {"about": about}
    plan = via_daemon(ctx, vault, "POST", "/v1/forget", body={**body, "dry_run": True})
    forgetter: Forgetter | None = None
    if plan is None:
        forgetter = open_runtime(ctx, vault).forgetter
        plan = _plan(forgetter, contact, about).to_dict()
    if dry_run:
        if as_json:
            emit_json(plan)
        else:
            print_plan(plan)
        return
    if not as_json:
        print_plan(plan)
    if not yes and not _confirmed():
        say("Nothing was forgotten (say --yes to skip the question).")
        raise typer.Exit(EXIT_FAILED)
    # Only what was shown: a memory stored since the plan was made is not forgotten unseen.
    ids = [m["id"] for m in plan["memories"]]
    receipt = None
    if forgetter is None:
        receipt = via_daemon(ctx, vault, "POST", "/v1/forget", body={**body, "memory_ids": ids})
    if receipt is None:
        forgetter = forgetter or open_runtime(ctx, vault).forgetter
        receipt = forgetter.apply(_plan(forgetter, contact, about), ids).to_dict()
    if as_json:
        emit_json({"plan": plan, "receipt": receipt})
    else:
        print_receipt(receipt)


def _plan(forgetter: Forgetter, contact: str | None, about: str | None) -> Plan:
    if contact is not None:
        return forgetter.plan_contact(contact)
    return forgetter.plan_about(about or "")


def _forget_one(ctx: typer.Context, vault: Any, memory_id: str, *, as_json: bool) -> None:
    from urllib.parse import quote

    answer = via_daemon(ctx, vault, "DELETE", f"/v1/memories/{quote(memory_id, safe='')}")
    if answer is None:
        receipt = open_runtime(ctx, vault).forgetter.forget(memory_id)
        (memory,) = receipt.forgotten
        answer = {**memory.to_dict(), "forgotten": True, "receipt": receipt.to_dict()}
    if as_json:
        emit_json(answer)
        return
    say(f"Forgot {answer['id']}: {one_line(answer['text'], 90)}")
    print_receipt(answer["receipt"], heading=False)


def _confirmed() -> bool:
    """The person's yes; no answer (stdin closed, Ctrl-D) is a no."""
    try:
        return bool(typer.confirm("Forget all of this?", default=False))
    except typer.Abort:
        return False


def print_plan(plan: dict[str, Any]) -> None:
    """What ``forget --contact`` or ``--about`` would remove, for people."""
    who = "the person" if plan["kind"] == "contact" else "the topic"
    say(f"Forgetting {who} {plan['subject']} would remove:")
    memories = plan["memories"]
    if memories:
        stdout.print(
            table(
                counted(len(memories), "memory"),
                ["ID", "Text", "File"],
                [[m["id"], one_line(m["text"], 80), m["path"]] for m in memories],
            )
        )
    else:
        say("- no memory")
    for path in plan["notes"]:
        say(f"- the note {path}")
    for channel, values in plan.get("identities", {}).items():
        say(f"- their identity on {channel}: {', '.join(values)}")
    if plan.get("chat_messages"):
        say(f"- {counted(plan['chat_messages'], 'chat message')} with them")
    say("and every copy of those in insights, entity notes, MEMORY.md and the journal.")


def print_receipt(receipt: dict[str, Any], *, heading: bool = True) -> None:
    """Where forgetting looked, what it did there, and what it left alone by design."""
    if heading:
        forgotten = receipt["forgotten"]
        say(f"Forgot {counted(len(forgotten), 'memory')}" + (":" if forgotten else "."))
        for memory in forgotten:
            say(f"- {memory['id']}: {one_line(memory['text'], 90)}")
    stdout.print(
        table(
            "Receipt",
            ["Place", "Done", "What"],
            [[p["place"], p["action"], p["detail"]] for p in receipt["places"]],
        )
    )
    say("Not touched by design:")
    for place in receipt["untouched"]:
        say(f"- {place['place']}: {place['detail']}")
    if receipt["still_found"]:
        say(
            "Still in notes of yours (your own text, not changed): "
            + ", ".join(receipt["still_found"])
        )
