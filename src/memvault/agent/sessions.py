"""Ending a session: its summary goes to the journal and to the next run's context.

A session ends explicitly (``/new`` in ``memvault chat``, ``POST
/v1/sessions/{key}/end``) or after it has been idle for
``agent.session_idle_minutes``. Its summary is written by the LLM when one
is configured (``agent.summary = auto | llm``), otherwise extracted from
the transcript without a model (key sentences, decisions, names).

The transcript goes to the model as data, never as instructions, and a
summary that reads as an instruction to the agent (a contact's words repeated,
:mod:`memvault.privacy.trust`) is kept as a line saying so: the next run's
context shows the last session's summary, and not as data.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from memvault.config import AgentSettings
from memvault.errors import MemvaultError, NotFoundError
from memvault.llm.base import ChatMessage, LLMNotConfiguredError, Provider
from memvault.llm.untrusted import UNTRUSTED, wrap_material
from memvault.memory.sessions import Message, Session, Sessions
from memvault.memory.summary import Turn, extractive_summary
from memvault.privacy.trust import as_kept

log = logging.getLogger(__name__)

SUMMARY_CHARS = 600
_TRANSCRIPT_CHARS = 24_000
_TRANSCRIPT_MESSAGES = 500
SUMMARY_PROMPT = """\
You write the memory of a conversation for an assistant that will not see it again. \
Summarise it in at most three sentences: what the owner wanted, what was done or \
decided, and what is still open. Name people, projects and dates. Plain text, no \
preamble, no Markdown."""

EndSession = Callable[[str, str | None], Session]


def transcript(messages: list[Message], limit: int = _TRANSCRIPT_CHARS) -> str:
    """The user and assistant turns as ``role: text`` lines, the latest ``limit`` characters."""
    lines = [f"{message.role}: {' '.join(message.text.split())}" for message in _said(messages)]
    text = "\n".join(lines)
    return text[-limit:]


def _said(messages: list[Message]) -> list[Message]:
    """What the owner and the agent said: no tool results, no bare tool-call notices."""
    return [
        message
        for message in messages
        if message.role in ("user", "assistant")
        and not (message.metadata and message.metadata.get("kind") == "tool_calls")
    ]


class SessionCloser:
    """Summarises and ends sessions."""

    def __init__(
        self,
        sessions: Sessions,
        settings: AgentSettings,
        provider: Provider | None = None,
        *,
        end: EndSession | None = None,
        trust: str = "mark",
    ) -> None:
        self.sessions = sessions
        self.settings = settings
        self.provider = provider
        self._end = end or sessions.end
        self.trust = trust  # [privacy] trust: "off" keeps a summary as it is

    def summarize(self, session: Session) -> tuple[str, str]:
        """``(summary, method)`` of a session's transcript; method is ``llm`` or ``extractive``."""
        messages = self.sessions.messages(session.id, limit=_TRANSCRIPT_MESSAGES)
        if self.settings.summary != "extractive":
            if self.provider is None:
                if self.settings.summary == "llm":
                    raise LLMNotConfiguredError(
                        "agent.summary is 'llm' but no language model is configured; "
                        "configure [llm] or set agent.summary to 'auto'."
                    )
            else:
                text = transcript(messages)
                if not text:
                    return "", "extractive"
                try:
                    completion = self.provider.complete(
                        [
                            ChatMessage("system", f"{SUMMARY_PROMPT}\n\n{UNTRUSTED}"),
                            ChatMessage("user", wrap_material(text)),
                        ],
                        max_tokens=300,
                    )
                    summary = " ".join(completion.text.split())
                    if summary:
                        return summary[:SUMMARY_CHARS], "llm"
                except MemvaultError as exc:
                    if self.settings.summary == "llm":
                        raise
                    log.warning(
                        "LLM summary failed; using the extractive one",
                        extra={"session": session.key, "error": exc.message},
                    )
        turns = [Turn(message.role, message.text) for message in _said(messages)]
        return extractive_summary(turns).text(SUMMARY_CHARS), "extractive"

    def end(self, key: str, summary: str | None = None) -> Session:
        """End the key's open session with ``summary`` (written here when not given)."""
        if summary is None or not summary.strip():
            session = self.sessions.get(key)
            if session.active:
                summary = as_kept(self.summarize(session)[0], self.trust) or None
        return self._end(key, summary)

    def end_idle(self) -> list[Session]:
        """End every session idle for longer than ``agent.session_idle_minutes``."""
        ended = []
        for session in self.sessions.idle(self._cutoff()):
            try:
                ended.append(self.end(session.key))
            except MemvaultError as exc:
                log.warning(
                    "could not end an idle session",
                    extra={"session": session.key, "error": exc.message},
                )
        return ended

    def end_if_idle(self, key: str) -> Session | None:
        """End the key's open session when it has been idle too long (before a new message)."""
        try:
            session = self.sessions.get(key)
        except NotFoundError:
            return None
        last = session.last_message_at or session.started_at
        if session.active and last < self._cutoff():
            return self.end(key)
        return None

    def _cutoff(self) -> datetime:
        """Sessions quiet since before this moment are idle."""
        return self.sessions.clock.now() - timedelta(minutes=self.settings.session_idle_minutes)
