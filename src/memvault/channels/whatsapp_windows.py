"""WhatsApp's 24-hour customer service window, and what doctor says of it.

Meta lets free text reach a person only within 24 hours of their last message. The
adapter (:mod:`memvault.channels.whatsapp`) notes when each chat last wrote and keeps it
in the hub's state (``state.db``'s meta table, :data:`WINDOWS_META`), so that doctor, in
another process, can say for which chats the window is closed and whether the configured
template stands in (:func:`window_verdict`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from memvault.config import WhatsAppSettings

log = logging.getLogger("memvault.channels.whatsapp")

# Meta: free-form messages "within 24 hours of the customer's last message"; a margin kept
# for a message on its way while the window closes.
WINDOW = 24 * 3600.0
WINDOW_MARGIN = 120.0
WINDOWS_KEY = "windows"
# Where the hub keeps this adapter's windows in state.db's meta table (its
# ``channels.whatsapp`` state, name ``windows``): doctor reads it there.
WINDOWS_META = f"channels.whatsapp.{WINDOWS_KEY}"


def load_windows(saved: str | None) -> dict[str, float]:
    """The saved windows (chat -> when it last wrote, epoch seconds; 0: Meta said closed)."""
    try:
        data = json.loads(saved) if saved else {}
    except ValueError:
        log.warning("whatsapp windows unreadable; starting without them")
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(chat): float(moment)
        for chat, moment in sorted(data.items(), key=lambda item: item[1])
        if isinstance(moment, int | float)
    }


def window_verdict(
    settings: WhatsAppSettings, saved: str | None, now: float
) -> tuple[str, str, dict[str, Any]]:
    """``(ok | warning, sentence, details)``: for which chats the 24-hour window is
    closed (the owner's too when they never wrote), and whether a template stands in."""
    windows = load_windows(saved)
    chats = {*windows, *settings.owner}
    closed = sorted(chat for chat in chats if not is_open(windows.get(chat), now))
    opened = sorted(chats - set(closed))
    template = settings.template.strip()
    details: dict[str, Any] = {
        "open": opened,
        "closed": closed,
        "template": template or None,
        "template_language": settings.template_language if template else None,
    }
    if not closed:
        return "ok", f"WhatsApp's 24-hour window is open for {_counted(opened)}.", details
    named = _listed([chat if chat in windows else f"{chat} (no message yet)" for chat in closed])
    if template:
        return (
            "ok",
            f"WhatsApp's 24-hour customer service window is closed for {named}: messages "
            f"there go out as the template {template!r} ({settings.template_language}).",
            details,
        )
    return (
        "warning",
        f"WhatsApp's 24-hour customer service window is closed for {named} and "
        "channels.whatsapp.template is not set: messages to them fail until they write "
        "again; set an approved template.",
        details,
    )


def is_open(last: float | None, now: float) -> bool | None:
    if last is None:
        return None
    return now - last < WINDOW - WINDOW_MARGIN


def _counted(chats: list[str]) -> str:
    return "1 chat" if len(chats) == 1 else f"{len(chats)} chats"


def _listed(chats: list[str], shown: int = 5) -> str:
    if len(chats) <= shown:
        return ", ".join(chats)
    return f"{', '.join(chats[:shown])} and {len(chats) - shown} more"
