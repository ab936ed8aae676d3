"""Which adapter each enabled channel's settings make, with its secrets and its state.

The hub (:mod:`memvault.channels.hub`) runs the adapters; this module builds them: it
reads each channel's secrets from the environment variables its settings name (never
from the vault: :func:`read_token`), hands the adapter a :class:`StateCursor` on
``state.db``'s meta table for what it keeps across restarts, and imports a platform's
module only when that channel is enabled, so its library loads only then.
"""

from __future__ import annotations

import os

from memvault.channels.base import Adapter
from memvault.config import (
    ChannelSettings,
    DiscordSettings,
    EmailSettings,
    LineSettings,
    OpenClawBridgeSettings,
    SignalSettings,
    SlackSettings,
    TelegramSettings,
    WhatsAppSettings,
)
from memvault.errors import ConfigError
from memvault.runtime import Runtime


class StateCursor:
    """An adapter's position (Telegram's update offset) and other named values it keeps
    across restarts (:class:`AdapterState`), in state.db's meta table."""

    def __init__(self, runtime: Runtime, key: str) -> None:
        self._state = runtime.state
        self._key = key

    def load(self) -> int | None:
        value = self._state.get_meta(self._key)
        return int(value) if value else None

    def save(self, offset: int) -> None:
        self._state.set_meta(self._key, str(offset))

    def get(self, name: str) -> str | None:
        return self._state.get_meta(f"{self._key}.{name}")

    def put(self, name: str, value: str) -> None:
        self._state.set_meta(f"{self._key}.{name}", value)


def read_token(channel: str, token_env: str) -> str:
    """A channel's secret from the environment variable its settings name; ConfigError
    when it is not set (the secret is never stored in the vault)."""
    token = os.environ.get(token_env, "").strip()
    if not token:
        raise ConfigError(
            f"channels.{channel} is enabled but ${token_env} is not set; export the "
            "token there (memvault never stores it)."
        )
    return token


def _telegram(runtime: Runtime, settings: ChannelSettings) -> Adapter:
    assert isinstance(settings, TelegramSettings)
    token = read_token("telegram", settings.token_env)
    from memvault.channels.telegram import TelegramAdapter

    return TelegramAdapter(settings, token, cursor=StateCursor(runtime, "channels.telegram.offset"))


def _email(runtime: Runtime, settings: ChannelSettings) -> Adapter:
    assert isinstance(settings, EmailSettings)
    password = read_token("email", settings.password_env)
    from memvault.channels.email import EmailAdapter

    return EmailAdapter(settings, password, state=StateCursor(runtime, "channels.email"))


def _slack(runtime: Runtime, settings: ChannelSettings) -> Adapter:
    assert isinstance(settings, SlackSettings)
    bot_token = read_token("slack", settings.bot_token_env)
    app_token = read_token("slack", settings.app_token_env)
    from memvault.channels.slack import SlackAdapter

    return SlackAdapter(
        settings, bot_token, app_token, state=StateCursor(runtime, "channels.slack")
    )


def _discord(runtime: Runtime, settings: ChannelSettings) -> Adapter:
    assert isinstance(settings, DiscordSettings)
    token = read_token("discord", settings.token_env)
    from memvault.channels.discord import DiscordAdapter

    return DiscordAdapter(settings, token, state=StateCursor(runtime, "channels.discord"))


def _signal(runtime: Runtime, settings: ChannelSettings) -> Adapter:
    assert isinstance(settings, SignalSettings)
    from memvault.channels.signal import SignalAdapter

    return SignalAdapter(settings, state=StateCursor(runtime, "channels.signal"))


def _line(runtime: Runtime, settings: ChannelSettings) -> Adapter:
    assert isinstance(settings, LineSettings)
    secret = read_token("line", settings.secret_env)
    token = read_token("line", settings.token_env)
    from memvault.channels.line import LineAdapter

    return LineAdapter(settings, secret, token, state=StateCursor(runtime, "channels.line"))


def _whatsapp(runtime: Runtime, settings: ChannelSettings) -> Adapter:
    assert isinstance(settings, WhatsAppSettings)
    token = read_token("whatsapp", settings.token_env)
    secret = read_token("whatsapp", settings.secret_env)
    verify_token = read_token("whatsapp", settings.verify_token_env)
    from memvault.channels.whatsapp import WhatsAppAdapter

    return WhatsAppAdapter(
        settings,
        token,
        secret,
        verify_token,
        state=StateCursor(runtime, "channels.whatsapp"),
        clock=runtime.clock,
    )


def _openclaw(runtime: Runtime, settings: ChannelSettings) -> Adapter:
    assert isinstance(settings, OpenClawBridgeSettings)
    from memvault.channels.openclaw_bridge import OpenClawBridge

    return OpenClawBridge(settings, state=StateCursor(runtime, "channels.openclaw"))


FACTORIES = {
    "telegram": _telegram,
    "email": _email,
    "slack": _slack,
    "discord": _discord,
    "signal": _signal,
    "line": _line,
    "whatsapp": _whatsapp,
    "openclaw": _openclaw,
}
