"""Slack's message text, both ways: what a person wrote, read as they see it
(:func:`plain_text`), and the agent's Markdown written as Slack's mrkdwn
(:func:`to_mrkdwn`). Nothing here talks to Slack: :mod:`memvault.channels.slack` does.
"""

from __future__ import annotations

import re

from memvault.channels.format import StarMarkup

_SPECIAL = re.compile(r"<([^<>\n]*)>")


def plain_text(text: str, bot_user: str | None = None) -> str:
    """Slack's message text as a person reads it: mentions as ``@name``, channels as
    ``#name``, links as ``label (url)``; mentions of the bot itself removed."""

    def readable(match: re.Match[str]) -> str:
        target, _, label = match[1].partition("|")
        if bot_user and target == f"@{bot_user}":
            return ""
        if target[:1] in ("@", "#"):
            return target[0] + (label or target[1:])
        if target.startswith("!"):
            return label or "@" + target[1:].split("^", 1)[0]
        address = target.removeprefix("mailto:")
        return address if not label or label == address else f"{label} ({address})"

    shown = _SPECIAL.sub(readable, text)
    shown = shown.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"[ \t]{2,}", " ", shown).strip()


def to_mrkdwn(markdown: str) -> str:
    """``markdown`` as Slack's mrkdwn: ``*bold*``, ``_italic_``, ``~strike~``, code,
    ``<url|label>`` links, ``>`` quotes, bullet lines; the rest of the text escaped."""
    return _Mrkdwn().render(markdown)


def escape(text: str) -> str:
    """Text as Slack shows it literally: ``&``, ``<`` and ``>`` escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class _Mrkdwn(StarMarkup):
    """Slack's mrkdwn, on the chat layout :class:`Renderer` shares."""

    indent = "    "
    link_schemes = ("http:", "https:", "mailto:")

    def text(self, text: str) -> str:
        return escape(text)

    def code(self, content: str) -> str:
        return f"`{escape(content)}`" if content else ""

    def code_block(self, content: str, language: str) -> str:
        return "```\n" + escape(content) + "\n```"

    def link(self, href: str, label: str) -> str:
        if not href.lower().startswith(self.link_schemes):
            return f"{label} ({escape(href)})" if label else escape(href)
        url = escape(href).replace("|", "%7C")
        return f"<{url}|{label}>" if label and label != escape(href) else f"<{url}>"
