"""``memvault contact add | log | show | list``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from memvault.cli.common import (
    JsonOption,
    TagsOption,
    VaultOption,
    answer,
    group,
    listing,
    open_runtime,
    say,
    split_tags,
)
from memvault.cli.typed_notes import show_command
from memvault.errors import InvalidInputError
from memvault.vocabulary import KNOWN_CHANNELS

if TYPE_CHECKING:
    from memvault.vault.contacts import Contact

app = group("Contacts: people the agent knows, one note each in Contacts/.")

CONTACT = typer.Argument(
    metavar="CONTACT", help="Name, alias, file name, or CHANNEL:ID such as telegram:123456."
)
ContactRef = Annotated[str, CONTACT]


def _identities(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values or []:
        channel, sep, ident = value.partition("=")
        if not sep:
            channel, sep, ident = value.partition(":")
        if not sep or not channel.strip() or not ident.strip():
            raise InvalidInputError(f"--id takes CHANNEL=ID, e.g. telegram=123456 (got {value!r}).")
        out[channel.strip().lower()] = ident.strip()
    return out


@app.command("add")
def add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The person's name; also the note's file name.")],
    relationship: Annotated[
        str | None, typer.Option("--relationship", "-r", help="friend, colleague, client ...")
    ] = None,
    email: Annotated[str | None, typer.Option("--email", help="Email address.")] = None,
    phone: Annotated[str | None, typer.Option("--phone", help="Phone number.")] = None,
    notes: Annotated[str, typer.Option("--notes", help="Context about this person.")] = "",
    aliases: Annotated[
        list[str] | None, typer.Option("--alias", help="Another name; repeatable.")
    ] = None,
    ids: Annotated[
        list[str] | None,
        typer.Option(
            "--id", help=f"CHANNEL=ID identity ({', '.join(KNOWN_CHANNELS[:5])} ...); repeatable."
        ),
    ] = None,
    tags: TagsOption = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a contact."""
    contact = open_runtime(ctx, vault).contacts.create(
        name,
        relationship=relationship,
        email=email,
        phone=phone,
        notes=notes,
        aliases=aliases or [],
        identities=_identities(ids),
        tags=split_tags(tags),
    )
    answer(as_json, contact, f"Created contact {contact.path}")


@app.command("log")
def log(
    ctx: typer.Context,
    contact: ContactRef,
    text: Annotated[str, typer.Argument(help="What happened, e.g. 'Called about the offer'.")],
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a dated interaction to a contact."""
    updated = open_runtime(ctx, vault).contacts.log(contact, text)
    answer(as_json, updated, f"Logged on {updated.path}: {updated.interactions[-1]}")


@show_command(app, CONTACT, "Show one contact.", service=lambda runtime: runtime.contacts)
def _print_contact(found: Contact) -> None:
    say(found.name + (f"  ({found.relationship})" if found.relationship else ""))
    for label, value in (("Email", found.email), ("Phone", found.phone)):
        if value:
            say(f"{label}: {value}")
    for channel, ident in found.identities.items():
        say(f"{channel}: {ident}")
    if found.aliases:
        say("Also known as: " + ", ".join(found.aliases))
    if found.notes:
        say("")
        say(found.notes)
    if found.interactions:
        say("\nInteractions:")
        for item in found.interactions:
            say(f"  - {item}")
    say(f"\n{found.path}")


@app.command("list")
def list_contacts(
    ctx: typer.Context, vault: VaultOption = None, as_json: JsonOption = False
) -> None:
    """List contacts by name."""
    found = open_runtime(ctx, vault).contacts.list()
    listing(
        as_json,
        found,
        noun="contact",
        empty="No contacts yet. Add one with `memvault contact add NAME`.",
        columns=["Name", "Relationship", "Email", "Channels"],
        row=lambda c: [
            c.name,
            c.relationship or "",
            c.email or "",
            ", ".join(f"{k}:{v}" for k, v in c.identities.items()),
        ],
    )
