"""The owner's commands in a chat, answered from memory without a model.

``/remember``, ``/recall``, ``/tasks``, ``/status``, ``/new``, ``/pending``,
``/approve``, ``/block`` and ``/help`` (``/start`` too) are answered here, from
the vault and the channels' store, whether or not a model is configured. The
router (:mod:`memvault.channels.router`) decides that a message is the owner's
command and logs the answer; :class:`OwnerCommands` is mixed into it and holds
the commands, apart from the router's flow (access, capture, respond) because
each is a small feature of its own that the owner reads and extends.
"""

from __future__ import annotations

from collections.abc import Callable

from memvault.channels.access import Access, shown_code
from memvault.channels.base import Inbound
from memvault.channels.hooks import Hooks, session_key
from memvault.channels.store import ChannelStore, Sender
from memvault.errors import MemvaultError
from memvault.memory.outcomes import one_line
from memvault.memory.sessions import Session
from memvault.privacy.reads import reading
from memvault.runtime import Runtime

HELP = (
    "Commands: /remember TEXT, /recall TOPIC, /tasks, /status, /new (a fresh session), "
    "/pending (who wants to talk), /approve ID, /block ID, /help."
)
# Commands whose answer shows the owner's memory: everyone in a group would read it.
PRIVATE_COMMANDS = frozenset({"recall", "tasks", "status", "pending"})
IN_GROUP = "Ask me that in a private chat: everyone in this group would read the answer."


class OwnerCommands:
    """The owner's commands, mixed into the router, which provides what they use."""

    runtime: Runtime
    store: ChannelStore
    access: Access
    hooks: Hooks
    _end_session: Callable[[str], Session]
    # The owner's word on a sender, as the router carries it out (contact, held messages).
    approve_sender: Callable[..., Sender]
    block_sender: Callable[..., Sender]

    def answer_command(self, message: Inbound, text: str) -> str | None:
        """The answer to the owner's ``/command``; None when there is no such command and
        a model is there to answer the message instead."""
        name, arg = parse_command(text)
        handler = _COMMANDS.get(name)
        if handler is None:
            return None if self.hooks.responder is not None else f"Unknown command /{name}. {HELP}"
        try:
            with reading(surface="channel"):  # a /recall's reads are the channel's
                return handler(self, message, arg)
        except MemvaultError as exc:
            return exc.message

    def _remember(self, message: Inbound, arg: str) -> str:
        if not arg:
            return "Say what to remember: /remember I prefer short answers."
        result = self.runtime.consolidation.remember(arg, source=message.channel)
        memory = result.memory
        if result.action == "update":
            return f"Merged into {memory.id}: {memory.text}"
        if not result.created:
            return f"Already remembered as {memory.id}."
        if result.action == "supersede":
            return f"Remembered ({memory.category}, {memory.id}); it replaces {result.target}."
        return f"Remembered ({memory.category}, {memory.id})."

    def _recall(self, message: Inbound, arg: str) -> str:
        if not arg:
            return "Say what to recall: /recall the dentist."
        self.runtime.index.sync()
        results = self.runtime.searcher.search(arg, limit=5)
        if not results:
            return f"Nothing in memory about “{one_line(arg, 80)}”."
        lines = [f"What I have on “{one_line(arg, 80)}”:"]
        for hit in results:
            where = hit.path.removesuffix(".md")
            lines.append(f"- {one_line(hit.snippet, 220)} ({where})")
        return "\n".join(lines)

    def _tasks(self, message: Inbound, arg: str) -> str:
        tasks = self.runtime.tasks.list()
        if not tasks:
            return "No open tasks."
        lines = [f"{len(tasks)} open task(s):"]
        for task in tasks[:15]:
            due = f", due {task.due.isoformat()}" if task.due else ""
            lines.append(f"- {task.title} ({task.priority}{due})")
        if len(tasks) > 15:
            lines.append(f"… and {len(tasks) - 15} more.")
        return "\n".join(lines)

    def _status(self, message: Inbound, arg: str) -> str:
        memories = len(self.runtime.memories.list())  # what was said in chats not counted
        tasks = self.runtime.tasks.list()
        today = self.runtime.clock.now().date()
        due = sum(1 for t in tasks if t.due is not None and t.due <= today)
        waiting = len(self.access.waiting(message.channel))
        model = "a model answers" if self.hooks.responder else "no model: commands only"
        return (
            f"{memories} memories, {len(tasks)} open tasks ({due} due by today), "
            f"{waiting} sender(s) waiting for approval; {model}."
        )

    def _new(self, message: Inbound, arg: str) -> str:
        key = session_key(message.channel, message.chat_id)
        try:
            session = self._end_session(key)
        except MemvaultError:
            return "Started a new session."
        summary = f" Summary: {session.summary}" if session.summary else ""
        return f"Started a new session; the last one is in today's journal.{summary}"

    def _pending(self, message: Inbound, arg: str) -> str:
        waiting = self.store.senders(channel=message.channel, status="pending")
        if not waiting:
            return "Nobody is waiting."
        lines = ["Waiting for your approval:"]
        for sender in waiting[:20]:
            code = f", code {shown_code(sender.code)}" if sender.code else ""
            lines.append(f"- {sender.label}{code}: /approve {sender.sender_id}")
        return "\n".join(lines)

    def _approve(self, message: Inbound, arg: str) -> str:
        if not arg:
            return "Name who to approve: /approve ID (or their pairing code)."
        sender = self.approve_sender(message.channel, arg, by=_by(message))
        return f"Approved {sender.label}; they can talk with me now."

    def _block(self, message: Inbound, arg: str) -> str:
        if not arg:
            return "Name who to block: /block ID."
        sender = self.block_sender(message.channel, arg, by=_by(message))
        return f"Blocked {sender.label}; I will not answer them."

    def _help(self, message: Inbound, arg: str) -> str:
        return HELP


_COMMANDS: dict[str, Callable[[OwnerCommands, Inbound, str], str]] = {
    "remember": OwnerCommands._remember,
    "recall": OwnerCommands._recall,
    "tasks": OwnerCommands._tasks,
    "status": OwnerCommands._status,
    "new": OwnerCommands._new,
    "pending": OwnerCommands._pending,
    "approve": OwnerCommands._approve,
    "block": OwnerCommands._block,
    "help": OwnerCommands._help,
    "start": OwnerCommands._help,
}


def parse_command(text: str) -> tuple[str, str]:
    """``("remember", "TEXT")`` of ``/remember@memvault_bot TEXT``."""
    head, _, rest = text.strip().partition(" ")
    return head[1:].split("@", 1)[0].lower(), rest.strip()


def is_command(text: str, name: str) -> bool:
    """Whether ``text`` is the command ``/name``."""
    return text.startswith("/") and parse_command(text)[0] == name


def _by(message: Inbound) -> str:
    """Who decided, as the store records it: the owner's chat identity."""
    return f"{message.channel}:{message.sender_id}"
