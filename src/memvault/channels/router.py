"""The router: what happens to every message a channel delivers.

1. **Access** (:mod:`memvault.channels.access`): the owner is let in;
   anyone else meets the channel's policy. A stranger's message is kept
   (``held``) but not captured or answered; a blocked sender's is ``ignored``.
2. **Contact**: the sender is matched to a contact note by their channel id
   (``telegram: "123"`` in its frontmatter); the first message of each
   session is logged on the contact.
3. **Capture**: the message goes to the session ``<channel>:<chat_id>`` in
   state.db and to the journal's Commands Received (attachments are saved
   under ``channels.attachments_folder`` and linked); ``inbound_message``
   is published.
4. **Respond**: the owner's commands (``/remember``, ``/recall``, ``/tasks``,
   ``/status``, ``/new``, ``/pending``, ``/approve``, ``/block``, ``/help``)
   are answered from memory without a model; anything else goes to the
   responder (the agent, wired by the daemon) when ``respond`` is on and a
   model is configured. The reply is queued in the outbox in the same
   transaction that marks the message answered.

The router never talks to a platform itself except through the adapter's
``typing`` and ``download``; sending is the hub's outbox. The owner's commands
themselves live in :mod:`memvault.channels.owner_commands`, and what the daemon
wires in (:class:`Hooks`, :class:`Turn`) in :mod:`memvault.channels.hooks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mimetypes
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from memvault.channels.access import (
    BLOCKED,
    OWNER,
    REFUSED,
    STRANGER,
    Access,
    Verdict,
    shown_code,
)
from memvault.channels.approvals import Approvals, parse_reply
from memvault.channels.base import Adapter, Attachment, Inbound
from memvault.channels.format import split_text
from memvault.channels.hooks import Hooks, Queue, Turn, session_key
from memvault.channels.owner_commands import (
    HELP,
    IN_GROUP,
    PRIVATE_COMMANDS,
    OwnerCommands,
    is_command,
    parse_command,
)
from memvault.channels.store import (
    INBOX_CAPTURED,
    INBOX_DONE,
    INBOX_HELD,
    INBOX_IGNORED,
    ChannelStore,
    Sender,
)
from memvault.errors import ConflictError, MemvaultError, SecretRefusedError
from memvault.memory.outcomes import one_line
from memvault.privacy.audiences import Audience
from memvault.privacy.secrets import joined, notice_for
from memvault.privacy.trust import as_kept
from memvault.runtime import Runtime
from memvault.tools.policy import Policy

# The names the daemon, the hub and the tests import from here.
__all__ = ["HELP", "NO_MODEL", "Hooks", "Router", "Turn", "is_group", "session_key"]

log = logging.getLogger(__name__)

COMMANDS_SECTION = "Commands Received"
CONTACT_CHARS = 2000
TYPING_EVERY = 4.0
# Agent runs get threads of their own: runs waiting for an approval never starve the
# threads that store messages and take the owner's answer.
AGENT_THREADS = 4
NO_MODEL = (
    "No language model is configured, so I answer commands only; your message is in "
    "today's journal. " + HELP
)
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class Router(OwnerCommands):
    """Routes inbound messages: access, contact, capture, respond."""

    def __init__(
        self,
        runtime: Runtime,
        store: ChannelStore,
        access: Access,
        approvals: Approvals,
        hooks: Hooks,
        *,
        queue: Queue,
        policy_for: Callable[[str, Inbound], Policy],
    ) -> None:
        self.runtime = runtime
        self.store = store
        self.access = access
        self.approvals = approvals
        self.hooks = hooks
        self._queue = queue
        self._policy_for = policy_for
        self._runs = ThreadPoolExecutor(AGENT_THREADS, thread_name_prefix="memvault-channel-run")
        # The daemon's hooks announce what they log; without a daemon, the sessions' own.
        self.log_message = hooks.log_message or runtime.sessions.log
        self._end_session = hooks.end_session or runtime.sessions.end

    # -- the flow ----------------------------------------------------------------------

    def control_reply(self, message: Inbound) -> bool:
        """Whether the message is the owner answering an approval (handled at once, not
        queued behind the run that waits for it)."""
        if message.forwarded or not self.access.is_owner(message.channel, message.sender_id):
            return False
        return parse_reply(message.text, message.action) is not None

    async def answer_control(self, inbox_id: int, message: Inbound, adapter: Adapter) -> None:
        """Resolve an approval from the owner's reply, and tell them the outcome."""
        reply = parse_reply(message.text, message.action)
        assert reply is not None
        outcome = await asyncio.to_thread(
            self.approvals.resolve, reply, by=f"{message.channel}:{message.sender_id}"
        )
        if message.action_id:
            await adapter.answer_action(message.action_id, outcome)
        await asyncio.to_thread(
            self._queue,
            message.channel,
            message.chat_id,
            [outcome],
            kind="approval",
            inbox_id=inbox_id,
            done=inbox_id,
        )

    async def handle(self, inbox_id: int, status: str, message: Inbound, adapter: Adapter) -> None:
        """Take one stored message through access, capture and response."""
        verdict = await asyncio.to_thread(self.access.judge, message)
        if verdict.kind in (BLOCKED, REFUSED):
            note = "blocked sender" if verdict.kind == BLOCKED else "not on the allow list"
            await asyncio.to_thread(self.store.mark, inbox_id, INBOX_IGNORED, note)
            return
        if verdict.kind == STRANGER:
            await asyncio.to_thread(self._stranger, inbox_id, message, verdict)
            return
        owner = verdict.kind == OWNER
        if message.action and not message.text.startswith("/"):
            # A button that is not an approval (an old keyboard): acknowledged, not answered.
            await adapter.answer_action(message.action_id or "", None)
            await asyncio.to_thread(self.store.mark, inbox_id, INBOX_DONE, "button")
            return
        if status != INBOX_CAPTURED:
            message = await self._save_attachments(message, adapter)
            await asyncio.to_thread(self._capture, inbox_id, message, owner)
        if message.secret_refused:  # only a line saying so was kept: nothing to answer
            answer = _refused(message.secrets_removed) if owner else None
        else:
            answer = await self._respond(message, owner, adapter)
            if owner and message.secrets_removed:  # the owner is told once, in the reply
                answer = joined(answer, notice_for(message.secrets_removed))
        if answer:
            parts = self.split(adapter, answer)
            await asyncio.to_thread(
                self._queue,
                message.channel,
                message.chat_id,
                parts,
                kind="reply",
                reply_to=message.platform_message_id,
                inbox_id=inbox_id,
                done=inbox_id,
            )
        else:
            await asyncio.to_thread(self.store.mark, inbox_id, INBOX_DONE)

    @staticmethod
    def split(adapter: Adapter, text: str) -> list[str]:
        """A reply cut to the channel's length limit."""
        return split_text(text, adapter.max_message_length) or [text]

    def screened(self, message: Inbound) -> Inbound:
        """The message with its secrets kept out (``[privacy] secrets``), before it is
        stored anywhere: the inbox, the session, the journal, the contact note, the agent's
        turn. Replaced by markers; or, when the owner refuses secrets, the whole text by a
        line saying so (the owner is told in the reply)."""
        if not message.text:
            return message
        try:
            text, kinds = self.runtime.secrets.screened(message.text)
        except SecretRefusedError as exc:
            kinds = list(exc.details.get("kinds", ()))
            withheld = f"[message not stored: it held a secret ({', '.join(kinds)})]"
            return replace(
                message, text=withheld, secrets_removed=tuple(kinds), secret_refused=True
            )
        if not kinds:
            return message
        return replace(message, text=text, secrets_removed=tuple(kinds))

    # -- strangers ---------------------------------------------------------------------

    def _stranger(self, inbox_id: int, message: Inbound, verdict: Verdict) -> None:
        sender = verdict.sender
        assert sender is not None
        # Held last, once the code and the notice are queued: a message redone after a crash
        # finds the code still valid and the owner told, so nothing is sent twice.
        try:
            self._hold(message, sender)
        finally:
            self.store.mark(inbox_id, INBOX_HELD, "waiting for the owner")

    def _hold(self, message: Inbound, sender: Sender) -> None:
        config = self.access.config(message.channel)
        code = self.access.pairing_code(sender) if config.policy == "pairing" else None
        if code is not None:
            agent = self.runtime.settings.agent.name
            owner = self.runtime.settings.owner_name
            self._queue(
                message.channel,
                message.chat_id,
                [
                    f"Hello! I am {agent}, the assistant of {owner}. To talk with me, "
                    f"ask {owner} to approve the code {shown_code(code)} "
                    "(valid for one hour)."
                ],
                kind="pairing",
            )
        if not self.access.claim_announcement(sender):
            return
        who = sender.label
        if code is not None:
            ask = (
                f"Their code is {shown_code(code)}. "
                f"Reply /approve {code} or /block {sender.sender_id}."
            )
        else:
            ask = f"Reply /approve {sender.sender_id} or /block {sender.sender_id}."
        text = (
            f"{who} wants to talk on {message.channel}: "
            f"“{one_line(message.text or '[no text]', 200)}”. {ask} "
            f"(Or `memvault channels approve {message.channel} {sender.sender_id}`.)"
        )
        for owner_chat in config.owner:
            self._queue(message.channel, owner_chat, [text], kind="notice")
        self.hooks.publish(
            "channel_status",
            {
                "channel": message.channel,
                "event": "sender_waiting",
                "sender_id": sender.sender_id,
                "name": sender.name,
            },
            f"channel:{message.channel}",
        )

    # -- capture -----------------------------------------------------------------------

    async def _save_attachments(self, message: Inbound, adapter: Adapter) -> Inbound:
        if not message.attachments:
            return message
        saved = []
        for number, attachment in enumerate(message.attachments, start=1):
            try:
                data = await adapter.download(attachment)
                path = await asyncio.to_thread(
                    self._store_attachment, message, attachment, data, number
                )
                saved.append(replace(attachment, path=path))
            except MemvaultError as exc:
                log.warning(
                    "could not save an attachment",
                    extra={"channel": message.channel, "error": exc.message},
                )
                saved.append(attachment)
        return replace(message, attachments=tuple(saved))

    def _store_attachment(
        self, message: Inbound, attachment: Attachment, data: bytes, number: int
    ) -> str:
        folder = self.runtime.settings.channels.attachments_folder.strip("/") or "Attachments"
        day = message.sent_at.astimezone(self.runtime.clock.tz).date().isoformat()
        name = attachment.name or ""
        if not name:
            extension = mimetypes.guess_extension(attachment.mime or "") or ".bin"
            name = f"{attachment.kind}{extension}"
        name = _SAFE_NAME.sub("-", name).strip("-.") or "file"
        stem = _SAFE_NAME.sub("-", message.message_id).strip("-.") or "message"
        base = f"{folder}/{message.channel}/{day}/{stem}-{number}-{name}"
        candidate = base
        for attempt in range(2, 100):
            try:
                return self.runtime.vault.create_bytes(candidate, data)
            except ConflictError:
                stem, dot, extension = base.rpartition(".")
                candidate = f"{stem}-{attempt}.{extension}" if dot else f"{base}-{attempt}"
        raise ConflictError(f"Could not find a free name for {base}.")

    def _capture(self, inbox_id: int, message: Inbound, owner: bool) -> None:
        key = session_key(message.channel, message.chat_id)
        if self.hooks.end_if_idle is not None:
            try:
                self.hooks.end_if_idle(key)
            except MemvaultError as exc:
                log.warning("could not end the idle session", extra={"error": exc.message})
        text = message.text.strip() or _attachment_words(message) or "[empty message]"
        session, _ = self.log_message(
            key,
            text,
            role="user",
            channel=message.channel,
            sender=message.sender_name or message.sender_id,
            sent_at=message.sent_at,
            metadata={
                "inbox_id": inbox_id,
                "sender_id": message.sender_id,
                "attachments": [a.path for a in message.attachments if a.path],
                "forwarded": message.forwarded or None,
                # Whose words these are, for the turn kept as a memory (privacy/capture.py).
                "owner": owner and not message.forwarded,
                "audience": self._audience(message, owner).label,
            },
        )
        text = self._as_kept(message, text)
        line = (
            f"{message.channel} {message.sender_name or message.sender_id}: {one_line(text, 300)}"
        )
        links = " ".join(f"![[{a.path}]]" for a in message.attachments if a.path)
        try:
            self.runtime.journal.append(COMMANDS_SECTION, f"{line} {links}".strip())
        except MemvaultError as exc:
            log.warning("could not journal a message", extra={"error": exc.message})
        if session.message_count == 1:
            self._log_on_contact(message, text)
        self.store.mark(inbox_id, INBOX_CAPTURED)
        self.hooks.publish(
            "inbound_message",
            {
                "channel": message.channel,
                "chat_id": message.chat_id,
                "sender_id": message.sender_id,
                "sender_name": message.sender_name,
                "text": text,
                "session": key,
                "attachments": [a.path for a in message.attachments if a.path],
                "inbox_id": inbox_id,
            },
            f"channel:{message.channel}",
        )

    def _as_kept(self, message: Inbound, text: str) -> str:
        """What the journal and the contact note keep of a message: its words, unless
        someone other than the owner wrote them (or the owner forwarded them) and they read
        as an instruction to the agent (:mod:`memvault.privacy.trust`); then a line saying
        so. The journal is in every agent's context, and not as data."""
        if self.access.is_owner(message.channel, message.sender_id) and not message.forwarded:
            return text
        return as_kept(text, self.runtime.settings.privacy.trust)

    def _log_on_contact(self, message: Inbound, text: str) -> None:
        try:
            contact = self.runtime.contacts.find_by_identity(message.channel, message.sender_id)
            if contact is not None:
                self.runtime.contacts.log(
                    contact.path, f"{message.channel}: {one_line(text, 160)}", when=message.sent_at
                )
        except MemvaultError as exc:
            log.warning("could not log on the contact", extra={"error": exc.message})

    def contact_note(self, message: Inbound) -> str:
        """The sender's contact note, for the agent's context ("" when there is none)."""
        try:
            contact = self.runtime.contacts.find_by_identity(message.channel, message.sender_id)
            if contact is None:
                return ""
            return self.runtime.vault.read_text(contact.path)[:CONTACT_CHARS]
        except MemvaultError:
            return ""

    def welcome(self, channel: str, sender_id: str) -> None:
        """A sender the owner approved becomes a contact (unless one has their id)."""
        sender = self.store.sender(channel, sender_id)
        contacts = self.runtime.contacts
        try:
            if contacts.find_by_identity(channel, sender_id) is not None:
                return
            name = (sender.name if sender and sender.name else "") or f"{channel} {sender_id}"
            try:
                contacts.create(
                    name,
                    identities={channel: sender_id},
                    notes=f"Met on {channel}; approved by the owner.",
                )
            except ConflictError:
                contacts.create(
                    f"{name} ({channel} {sender_id})",
                    identities={channel: sender_id},
                    notes=f"Met on {channel}; approved by the owner.",
                )
        except MemvaultError as exc:
            log.warning("could not create the contact", extra={"error": exc.message})

    # -- respond -----------------------------------------------------------------------

    async def _respond(self, message: Inbound, owner: bool, adapter: Adapter) -> str | None:
        text = message.text.strip()
        key = session_key(message.channel, message.chat_id)
        group = is_group(message)
        if owner and text.startswith("/") and not message.forwarded:
            if group and parse_command(text)[0] in PRIVATE_COMMANDS:
                return IN_GROUP
            answer = await asyncio.to_thread(self.answer_command, message, text)
            if answer is not None:
                if not is_command(text, "new"):  # its answer must not open the next session
                    await asyncio.to_thread(self._log_reply, key, message, answer)
                return answer
        if not self.access.config(message.channel).respond:
            return None
        if self.hooks.responder is None:
            if owner:
                await asyncio.to_thread(self._log_reply, key, message, NO_MODEL)
                return NO_MODEL
            return None
        audience = await asyncio.to_thread(self._audience, message, owner)
        turn = Turn(
            message=message,
            session=key,
            owner=owner,
            # In a group everyone reads the answer: nobody's contact note goes in.
            contact="" if group else await asyncio.to_thread(self.contact_note, message),
            policy=self._policy_for(key, message),
            text=_with_attachments(message),
            audience=audience,
        )
        typing = asyncio.create_task(_keep_typing(adapter, message.chat_id))
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._runs, self.hooks.responder, turn)
        except MemvaultError as exc:
            log.warning("the agent could not answer", extra={"error": exc.message})
            return f"Sorry, I could not answer: {exc.message}" if owner else None
        finally:
            typing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await typing

    def _audience(self, message: Inbound, owner: bool) -> Audience:
        """Whom the conversation is with: the owner, the contact who wrote, or a group."""
        return self.runtime.audiences.of_chat(
            message.channel,
            message.chat_id,
            message.sender_id,
            owner=owner,
            group=is_group(message),
            sender_name=message.sender_name,
        )

    def close(self) -> None:
        """Stop taking agent runs (runs under way finish on their own threads)."""
        self._runs.shutdown(wait=False, cancel_futures=True)

    def _log_reply(self, key: str, message: Inbound, text: str) -> None:
        owner = self.access.is_owner(message.channel, message.sender_id)
        audience = self._audience(message, owner).label
        self.log_message(
            key, text, role="assistant", channel=message.channel, metadata={"audience": audience}
        )

    def approve_sender(self, channel: str, ref: str, *, by: str) -> Sender:
        """Let a sender in: they become a contact, and what they wrote while they waited
        is captured (in the session and the journal, not answered)."""
        sender = self.access.approve(channel, ref, by=by)
        self.welcome(channel, sender.sender_id)
        for inbox_id, message in self.store.held(channel, sender.sender_id):
            try:
                self._capture(inbox_id, message, owner=False)
                self.store.mark(inbox_id, INBOX_DONE, "held until the owner approved")
            except MemvaultError as exc:
                log.warning("could not capture a held message", extra={"error": exc.message})
        self._announce_decision(channel, sender.sender_id, "approved")
        return sender

    def block_sender(self, channel: str, ref: str, *, by: str) -> Sender:
        """Shut a sender out for good (also someone who has not written yet, by id)."""
        sender = self.access.block(channel, ref, by=by)
        self._announce_decision(channel, sender.sender_id, "blocked")
        return sender

    def _announce_decision(self, channel: str, sender_id: str, decision: str) -> None:
        self.hooks.publish(
            "channel_status",
            {"channel": channel, "event": f"sender_{decision}", "sender_id": sender_id},
            f"channel:{channel}",
        )


def _refused(kinds: tuple[str, ...]) -> str:
    """The owner's answer when a message was not kept because it held a secret."""
    return (
        f"I did not keep that message: it holds a secret ({', '.join(kinds)}). Send it "
        "again without the secret."
    )


def is_group(message: Inbound) -> bool:
    """Whether others read the chat (a group, a room, a channel), not only the sender."""
    return message.chat_type != "private"


def _attachment_words(message: Inbound) -> str:
    return " ".join(f"[{a.kind}{': ' + a.name if a.name else ''}]" for a in message.attachments)


def _with_attachments(message: Inbound) -> str:
    text = message.text.strip()
    saved = [a.path for a in message.attachments if a.path]
    if saved:
        text += "\n\n(Attached, saved in the vault: " + ", ".join(saved) + ")"
    return text.strip() or _attachment_words(message) or "[empty message]"


async def _keep_typing(adapter: Adapter, chat_id: str) -> None:
    while True:
        await adapter.typing(chat_id)
        await asyncio.sleep(TYPING_EVERY)
