"""What the hub shows: the channels' conversations and their health, read only.

Other threads ask the hub what a channel holds (:meth:`HubView.conversations`,
:meth:`HubView.messages`, :meth:`HubView.context`: from the platform where it can
tell, else from memvault's own log) and how each channel is (:meth:`HubView.status`
for ``memvault channels status`` and the HTTP API, :meth:`HubView.checks` for
doctor). None of it changes anything.

:class:`HubView` is mixed into the hub (:mod:`memvault.channels.hub`), which
provides what it reads: the adapters and their statuses, the store, the way to
an adapter and a chat. It stands apart from the hub's life and its outbox
because what is shown, and in which words, changes on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memvault.channels.access import Access
from memvault.channels.base import Adapter, AdapterStatus, NotSupportedError
from memvault.channels.hooks import session_key
from memvault.channels.store import ChannelStore
from memvault.config.channels import ChannelSettings, ChannelsSettings
from memvault.errors import MemvaultError
from memvault.runtime import Runtime


class HubView:
    """The hub's read-only answers, mixed into the hub, which provides what they read."""

    runtime: Runtime
    settings: ChannelsSettings
    store: ChannelStore
    access: Access
    adapters: dict[str, Adapter]
    statuses: dict[str, AdapterStatus]
    running_since: dict[str, datetime]
    # The outbox's ways to a channel's adapter and to a chat (memvault.channels.outbox).
    adapter: Callable[[str], Adapter]
    resolve_chat: Callable[[str, str], str]
    # Adapter work run from a thread outside the hub's loop (the hub's _run_once).
    _run_once: Callable[..., Any]

    if TYPE_CHECKING:  # the hub's property: read only, so not an annotation

        @property
        def running(self) -> bool: ...

    def conversations(self, channel: str, limit: int = 50) -> dict[str, Any]:
        """The channel's conversations: from the platform where it can list them, else
        from memvault's own log."""
        adapter = self.adapter(channel)
        try:
            items = self._run_once(adapter.conversations(limit), channel)
            source = "platform"
        except NotSupportedError:
            items = self.store.chats(channel, limit)
            source = "memvault"
        return {"adapter": channel, "conversations": items, "count": len(items), "source": source}

    def messages(self, channel: str, conversation: str | None, limit: int = 50) -> dict[str, Any]:
        """Recent messages of a channel (one conversation, or all), oldest first."""
        self.adapter(channel)
        chat = self.resolve_chat(channel, conversation) if conversation else None
        inbound = self.store.inbox(channel, chat_id=chat, limit=limit)
        outbound = [
            {
                "id": q.id,
                "direction": "outbound",
                "status": q.status,
                "received_at": q.created_at.isoformat(timespec="seconds"),
                "chat_id": q.chat_id,
                "sender_id": None,
                "sender_name": self.runtime.settings.agent.name,
                "text": q.text,
                "attachments": list(q.media),
            }
            for q in reversed(self.store.outbox(channel=channel, limit=limit))  # oldest first
            if chat is None or q.chat_id == chat
        ]
        merged = sorted([*inbound, *outbound], key=lambda m: str(m["received_at"]))[-limit:]
        return {
            "adapter": channel,
            "conversation": chat,
            "messages": merged,
            "message_count": len(merged),
        }

    def context(self, channel: str, conversation: str | None) -> dict[str, Any]:
        """What memvault knows of a conversation: the chat, the contact, the session."""
        adapter = self.adapter(channel)
        chat = self.resolve_chat(channel, conversation or "owner")
        try:
            platform: dict[str, Any] | None = self._run_once(adapter.context(chat), channel)
        except NotSupportedError:
            platform = None
        contact = self.runtime.contacts.find_by_identity(channel, chat)
        try:
            session: dict[str, Any] | None = self.runtime.sessions.get(
                session_key(channel, chat)
            ).to_dict()
        except MemvaultError:
            session = None
        recent = self.store.inbox(channel, chat_id=chat, limit=1)
        return {
            "adapter": channel,
            "conversation": chat,
            "conversation_name": (contact.name if contact else None)
            or (recent[-1]["sender_name"] if recent else None),
            "contact": contact.path if contact else None,
            "owner": chat in self.access.config(channel).owner,
            "session": session,
            "platform": platform,
            "timestamp": self.runtime.clock.now().isoformat(timespec="seconds"),
        }

    def status(self) -> list[dict[str, Any]]:
        """Every channel: enabled, state, uptime (since its adapter last started running in
        this hub), last error, last message, outbox, waiting senders."""
        out = []
        for name, config in self.settings.sections().items():
            status = self.statuses.get(name)
            last = self.store.last_received(name)
            since = self.running_since.get(name) if self.running else None
            uptime = (self.runtime.clock.now() - since).total_seconds() if since else None
            out.append(
                {
                    "channel": name,
                    "enabled": config.enabled,
                    "state": self._state(name),
                    "connected": since is not None,
                    "running_since": since.isoformat(timespec="seconds") if since else None,
                    "uptime_seconds": max(int(uptime), 0) if uptime is not None else None,
                    "error": status.error if status else None,
                    "identity": status.identity if status else None,
                    "receiving": self._receiving(name),
                    "restarts": status.restarts if status else 0,
                    "policy": config.policy,
                    "owner_set": bool(config.owner),
                    "respond": config.respond,
                    "last_received": last.isoformat(timespec="seconds") if last else None,
                    "outbox": self.store.counts(name),
                    "waiting_senders": len(self.access.waiting(name)),
                }
            )
        return out

    def _state(self, name: str) -> str:
        """A channel's state as people are shown it."""
        status = self.statuses.get(name)
        if status is None:
            return "disabled"
        if not self.running and status.state != "failed":
            return "not running (the daemon runs channels)"
        return status.state

    def checks(self) -> list[tuple[str, str, str]]:
        """``(name, ok | warning | error, sentence)`` per enabled channel, for doctor."""
        out: list[tuple[str, str, str]] = []
        for name, config in self.settings.sections().items():
            if config.enabled:
                out.append((f"channel_{name}", *self._verdict(name, config)))
        return out

    def _verdict(self, name: str, config: ChannelSettings) -> tuple[str, str]:
        """``(ok | warning | error, sentence)`` for one enabled channel."""
        status = self.statuses.get(name)
        state = status.state if status else None
        if status is not None and state == "failed":
            return "error", f"{name} stopped: {status.error}"
        if status is not None and state == "conflict":
            return "error", f"{name} receives nothing: {status.error}"
        if status is not None and state == "backoff":
            return "warning", f"{name} is restarting: {status.error}"
        if not config.owner:
            return "warning", (
                f"channels.{name}.owner is empty: nobody can approve senders or tool calls "
                "from a phone"
            )
        failed = self.store.counts(name).get("failed", 0)
        if failed:
            return "warning", (
                f"{failed} message(s) on {name} could not be sent; see `memvault channels outbox`"
            )
        if config.silence_hours:
            last = self.store.last_received(name)
            if last is None or self.runtime.clock.now() - last > timedelta(
                hours=config.silence_hours
            ):
                since = f"since {last.isoformat(timespec='minutes')}" if last else "yet"
                return "warning", (
                    f"{name} has received nothing {since} (more than {config.silence_hours:g} h)"
                )
        who = f" as {status.identity}" if status and status.identity else ""
        how = f", receiving by {way}" if (way := self._receiving(name)) else ""
        return "ok", f"{name} is {self._state(name)}{who}{how}"

    def _receiving(self, name: str) -> str | None:
        """How a running channel's messages arrive, when its adapter has more than one way."""
        adapter = self.adapters.get(name)
        return adapter.receiving() if adapter is not None and self.running else None
