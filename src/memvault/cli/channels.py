"""``memvault channels list | status | send | pending | approve | block | outbox``.

The daemon runs the channels (``memvault serve``): ``status`` and ``send``
go through it when one serves the vault, since it knows how each adapter is
doing; without one, ``send`` delivers from this process. Deciding on
senders and looking at the outbox work on state.db directly, which the
daemon reads for every message, so a decision takes effect at once either
way.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memvault.cli.common import (
    DirectOption,
    JsonOption,
    VaultOption,
    daemon_client,
    emit_json,
    group,
    open_runtime,
    say,
    stdout,
    table,
    via_daemon,
)
from memvault.text import one_line
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from datetime import datetime

    from memvault.channels.hub import Hub
    from memvault.channels.store import Queued, Sender

app = group("Messaging channels (Telegram): who may talk to the agent, sending, the outbox.")

# Each command says itself what went wrong; the hub's log lines are for the daemon's log,
# not one more line on the terminal.
logging.getLogger("memvault.channels").addHandler(logging.NullHandler())

Channel = Annotated[str, typer.Argument(metavar="CHANNEL", help="The channel, e.g. telegram.")]
OUTBOX_HELP = "Only these messages: pending, failed, sent or all."


def _hub(ctx: typer.Context, vault: Path | None, *, adapters: bool = False) -> Hub:
    """A hub on this process's runtime; without ``adapters`` it talks to no platform."""
    from memvault.channels.hub import Hub

    runtime = open_runtime(ctx, vault)
    return Hub(runtime) if adapters else Hub(runtime, adapters={})


def _through_daemon(
    ctx: typer.Context, vault: Path | None, method: str, path: str, **request: Any
) -> Any:
    """The daemon's answer (None: no daemon); its errors exit as the same error here does."""
    import memvault.channels.hub  # noqa: F401 - makes the channels' error classes known

    return via_daemon(ctx, vault, method, path, **request)


@app.command("list")
def list_channels(
    ctx: typer.Context, vault: VaultOption = None, as_json: JsonOption = False
) -> None:
    """List the channels as config.toml sets them up (no daemon needed)."""
    runtime = open_runtime(ctx, vault)
    rows: list[dict[str, Any]] = []
    for name, config in runtime.settings.channels.sections().items():
        rows.append(
            {
                "channel": name,
                "enabled": config.enabled,
                "policy": config.policy,
                "owner_set": bool(config.owner),
                "allowed": len(config.allow),
                "respond": config.respond,
            }
        )
    if as_json:
        emit_json(rows)
        return
    stdout.print(
        table(
            counted(len(rows), "channel"),
            ["Channel", "Enabled", "Policy", "Owner set", "Allowed", "Answers"],
            [
                [
                    r["channel"],
                    _yes(r["enabled"]),
                    r["policy"],
                    _yes(r["owner_set"]),
                    r["allowed"],
                    _yes(r["respond"]),
                ]
                for r in rows
            ],
        )
    )
    if not any(r["enabled"] for r in rows):
        say("No channel is enabled; set channels.telegram.enabled = true in .memvault/config.toml.")


def _yes(value: bool) -> str:
    return "yes" if value else "no"


@app.command("status")
def status(
    ctx: typer.Context,
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show how each channel is doing (live, when a daemon runs)."""
    live = _through_daemon(ctx, vault, "GET", "/v1/channels")
    items: list[dict[str, Any]] = (
        live if live is not None else _hub(ctx, vault, adapters=True).status()
    )
    if as_json:
        emit_json(items)
        return
    rows = [
        [
            item["channel"],
            _yes(item["enabled"]),
            item["state"],
            item["identity"] or "",
            item["policy"],
            _yes(item["owner_set"]),
            (item["last_received"] or "")[:16].replace("T", " "),
            ", ".join(f"{k} {v}" for k, v in sorted(item["outbox"].items())),
            item["waiting_senders"],
        ]
        for item in items
    ]
    stdout.print(
        table(
            None,
            ["Channel", "Enabled", "State", "Bot", "Policy", "Owner set", "Last message",
             "Outbox", "Waiting"],
            rows,
        )
    )  # fmt: skip
    for item in items:
        if item["error"]:
            say(f"{item['channel']}: {item['error']}")
        if item.get("receiving"):
            say(f"{item['channel']} receives by {item['receiving']}")
    if live is None:
        say("No daemon serves this vault: the daemon runs the channels (`memvault serve`).")


@app.command("send")
def send(
    ctx: typer.Context,
    channel: Channel,
    to: Annotated[
        str,
        typer.Argument(
            metavar="TO", help="owner, a chat id, or the name of a contact with an id there."
        ),
    ],
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The message (Markdown).")],
    direct: DirectOption = False,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send a message (to the owner, or someone the owner approved)."""
    body = {
        "adapter": channel,
        "action": "send_message",
        "payload": {"conversation_hint": to, "text": text},
    }
    result = _through_daemon(ctx, vault, "POST", "/v1/send", body=body)
    if result is None:
        hub = _hub(ctx, vault, adapters=True)
        result = hub.send(hub.channel_named(channel), to, text)
    if result["status"] == "failed":
        from memvault.channels.base import MessageRejectedError

        first = result["outbox_ids"][0]
        raise MessageRejectedError(
            str(result["error"]),
            hint=f"It is in the outbox; `memvault channels outbox --retry {first}` sends it again.",
        )
    if as_json:
        emit_json(result)
        return
    where = f"{to} on {result['adapter']} (chat {result['chat_id']})"
    parts = f" in {result['parts']} parts" if result["parts"] > 1 else ""
    if result["status"] == "sent":
        say(f"Sent to {where}{parts}.")
    elif result["status"] == "suppressed":
        say(f"Nothing sent to {where}: the text was only a protocol token (such as HEARTBEAT_OK).")
    else:
        reason = f": {result['error']}" if result["error"] else ""
        say(f"Queued for {where}{parts}{reason}; it is sent once {result['adapter']} answers.")


def _sender_rows(senders: list[Sender]) -> list[list[Any]]:
    from memvault.channels.access import shown_code

    return [
        [
            s.channel,
            s.sender_id,
            s.name or "",
            f"@{s.username}" if s.username else "",
            shown_code(s.code) if s.code else "",
            s.messages,
            _minute(s.last_seen),
        ]
        for s in senders
    ]


@app.command("pending")
def pending(
    ctx: typer.Context,
    channel: Annotated[
        str | None, typer.Argument(metavar="[CHANNEL]", help="Only this channel.")
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the senders waiting for your approval (and their codes)."""
    from memvault.channels import owner

    waiting = owner.pending(_hub(ctx, vault), channel)
    if as_json:
        emit_json([s.to_dict() for s in waiting])
        return
    if not waiting:
        say("Nobody is waiting for approval.")
        return
    stdout.print(
        table(
            counted(len(waiting), "sender") + " waiting",
            ["Channel", "Id", "Name", "Username", "Code", "Messages", "Last seen"],
            _sender_rows(waiting),
        )
    )
    say("Let one in with `memvault channels approve CHANNEL ID_OR_CODE`, or `block CHANNEL ID`.")


@app.command("approve")
def approve(
    ctx: typer.Context,
    channel: Channel,
    sender: Annotated[
        str,
        typer.Argument(metavar="ID_OR_CODE", help="Their id, or the pairing code they got."),
    ],
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Let a sender talk to the agent; they become a contact."""
    from memvault.channels import owner

    hub = _hub(ctx, vault)
    approved = owner.approve(hub, channel, sender, by="cli")
    if as_json:
        emit_json(approved.to_dict())
        return
    contact = hub.runtime.contacts.find_by_identity(approved.channel, approved.sender_id)
    noted = f" Their contact note is {contact.path}." if contact is not None else ""
    say(f"Approved {approved.label} on {approved.channel}; they can talk with the agent.{noted}")


@app.command("block")
def block(
    ctx: typer.Context,
    channel: Channel,
    sender: Annotated[str, typer.Argument(metavar="ID", help="Their id (or pairing code).")],
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """Block a sender for good: no answer, and nothing is sent to them."""
    from memvault.channels import owner

    blocked = owner.block(_hub(ctx, vault), channel, sender, by="cli")
    if as_json:
        emit_json(blocked.to_dict())
        return
    say(f"Blocked {blocked.label} on {blocked.channel}; the agent will not answer them.")


def _outbox_rows(rows: list[Queued]) -> list[list[Any]]:
    return [
        [
            row.id,
            row.channel,
            row.chat_id,
            row.kind,
            row.status,
            row.attempts,
            row.last_error or "",
            one_line(row.text, 50),
            _minute(row.created_at),
        ]
        for row in rows
    ]


def _minute(moment: datetime) -> str:
    return moment.isoformat(timespec="minutes")[:16].replace("T", " ")


@app.command("outbox")
def outbox(
    ctx: typer.Context,
    status_: Annotated[str, typer.Option("--status", "-s", help=OUTBOX_HELP)] = "all",
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many.")] = 50,
    retry: Annotated[
        int | None,
        typer.Option("--retry", metavar="ID", help="Queue this failed message again."),
    ] = None,
    vault: VaultOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the outbox, newest first (--retry ID: send one again)."""
    from memvault.channels import owner

    hub = _hub(ctx, vault, adapters=retry is not None)
    if retry is not None:
        again = owner.retry(hub, retry)
        served = daemon_client(ctx, vault) is not None
        if not served:  # no daemon to send it: this process does, now
            again = hub.deliver_here([again.id])[0]
        if as_json:
            emit_json(again.to_dict())
            return
        where = f"message {again.id} to {again.channel} chat {again.chat_id}"
        if again.status == "sent":
            say(f"Sent {where}.")
        elif served:
            say(f"Queued {where} again; the daemon sends it in a moment.")
        else:
            say(f"Queued {where} again; it is not sent yet: {again.last_error}")
        return
    rows = owner.outbox(hub, status_, limit)
    if as_json:
        emit_json([row.to_dict() for row in rows])
        return
    if not rows:
        say("The outbox is empty." if status_ == "all" else f"No {status_} messages.")
        return
    stdout.print(
        table(
            counted(len(rows), "message"),
            ["Id", "Channel", "Chat", "Kind", "Status", "Attempts", "Last error", "Text",
             "Created"],
            _outbox_rows(rows),
        )
    )  # fmt: skip
    if any(row.status == "failed" for row in rows):
        say("Send a failed message again with `memvault channels outbox --retry ID`.")
