"""The channels: what all share, and each platform's own settings."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    Field,
    field_validator,
)

from memvault.config.base import Section, subsections

ChannelPolicy = Literal["quiet", "pairing", "allowlist", "open"]


class ChannelSettings(Section):
    """What every channel shares: who the owner is and who else may talk."""

    enabled: bool = Field(False, description="start this channel with the daemon")
    owner: list[str] = Field(
        [], description="the owner's ids on this channel (Telegram: your numeric user id)"
    )
    policy: ChannelPolicy = Field(
        "quiet",
        description="anyone else: quiet (no answer; the owner is told once), pairing (a "
        "one-time code), allowlist (only `allow`), open (everyone)",
    )
    allow: list[str] = Field([], description="sender ids allowed besides the owner")
    respond: bool = Field(True, description="answer messages (with the agent when a model is set)")
    max_pending: int = Field(
        3, ge=1, le=50, description="strangers waiting for approval at most (pairing, quiet)"
    )
    silence_hours: float = Field(
        0.0, ge=0, description="doctor warns after this long without a message; 0 never warns"
    )
    share: list[str] = Field(
        [],
        description="what everyone but the owner on this channel also sees: items shared "
        "with these names (#share/NAME, [share:: NAME], share: [NAME])",
    )
    groups: dict[str, str] = Field(
        {},
        description="a group chat's audience name by its chat id (it sees what is shared "
        "with that name); an unnamed group is CHANNEL:CHAT_ID",
    )
    trusted: list[str] = Field(
        [],
        description="sender ids who see everything the owner sees (a partner); their "
        "private chats only, never a group",
    )
    capture: bool | None = Field(
        None, description="keep this channel's conversations as memories (default: [memory])"
    )
    capture_groups: bool | None = Field(
        None, description="its group chats too (default: [memory] capture_groups)"
    )

    @field_validator("owner", "allow", "trusted", mode="before")
    @classmethod
    def _ids_as_text(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [str(item).strip() for item in value]
        return value


class TelegramSettings(ChannelSettings):
    """Telegram through the Bot API (python-telegram-bot), by long polling."""

    token_env: str = Field(
        "TELEGRAM_BOT_TOKEN", description="environment variable holding the bot token"
    )
    base_url: str = Field(
        "https://api.telegram.org/bot", description="Bot API endpoint (a local Bot API server)"
    )
    base_file_url: str = Field(
        "https://api.telegram.org/file/bot", description="where the Bot API serves files"
    )
    poll_timeout: int = Field(30, ge=0, le=50, description="seconds one getUpdates call waits")
    max_message_length: int = Field(
        4096, ge=64, le=4096, description="longer replies are split into several messages"
    )


Security = Literal["tls", "starttls", "none"]


class EmailSettings(ChannelSettings):
    """Email: IMAP in (IDLE where offered, else polling), SMTP out; ``owner`` and
    ``allow`` are addresses."""

    address: str = Field("", description="the agent's address (From:); default: username")
    username: str = Field("", description="the IMAP / SMTP login")
    password_env: str = Field(
        "MEMVAULT_EMAIL_PASSWORD", description="environment variable holding the password"
    )
    imap_host: str = Field("", description="IMAP server")
    imap_port: int = Field(993, ge=1, le=65535, description="IMAP port (993 TLS, 143 STARTTLS)")
    imap_security: Security = Field("tls", description="tls | starttls | none (loopback only)")
    smtp_host: str = Field("", description="SMTP server (default: imap_host)")
    smtp_port: int = Field(465, ge=1, le=65535, description="SMTP port (465 TLS, 587 STARTTLS)")
    smtp_security: Security = Field("tls", description="tls | starttls | none (loopback only)")
    ca_file: str = Field("", description="a CA bundle to trust besides the system's (self-signed)")
    folders: list[str] = Field(["INBOX"], description="IMAP folders watched for new mail")
    idle: bool = Field(True, description="use IMAP IDLE where the server offers it")
    poll_seconds: float = Field(60.0, ge=1, le=3600, description="polling interval without IDLE")
    max_attachment_mb: float = Field(
        20.0, gt=0, le=200, description="larger attachments are not saved"
    )
    max_message_length: int = Field(
        100_000, ge=1000, le=1_000_000, description="longer replies are split"
    )

    @field_validator("owner", "allow")
    @classmethod
    def _addresses_in_lower_case(cls, value: list[str]) -> list[str]:
        # The adapter reports senders in lower case; Ada@Example.org is the same mailbox.
        return [address.lower() for address in value]


class SlackSettings(ChannelSettings):
    """Slack by Socket Mode (no public URL): DMs, and mentions in channels; ``owner``
    and ``allow`` are user ids (U...)."""

    bot_token_env: str = Field(
        "SLACK_BOT_TOKEN", description="environment variable holding the bot token (xoxb-)"
    )
    app_token_env: str = Field(
        "SLACK_APP_TOKEN", description="environment variable holding the app token (xapp-)"
    )
    base_url: str = Field("https://slack.com/api/", description="Web API endpoint")
    channels: list[str] = Field(
        [], description="channel ids where mentions are answered; empty: every channel"
    )
    max_message_length: int = Field(4000, ge=100, le=40_000, description="longer replies are split")


class DiscordSettings(ChannelSettings):
    """Discord: bot DMs, and mentions in allowed guilds / channels; ``owner`` and
    ``allow`` are user ids."""

    token_env: str = Field(
        "DISCORD_BOT_TOKEN", description="environment variable holding the bot token"
    )
    guilds: list[str] = Field([], description="guild ids where mentions are answered")
    channels: list[str] = Field(
        [], description="channel ids where mentions are answered; empty: any in `guilds`"
    )
    api_base: str = Field("https://discord.com/api/v10", description="REST API endpoint")
    max_message_length: int = Field(
        2000, ge=100, le=2000, description="longer replies are split (Discord's limit: 2,000)"
    )


class SignalSettings(ChannelSettings):
    """Signal through ``signal-cli daemon`` (JSON-RPC), which the owner runs; ``owner``
    and ``allow`` are phone numbers (+...) or UUIDs."""

    account: str = Field("", description="the bot's number, as signal-cli knows it (+...)")
    url: str = Field("http://127.0.0.1:8080", description="signal-cli daemon --http address")
    socket: str = Field(
        "", description="signal-cli daemon --socket path (used instead of url when set)"
    )
    max_message_length: int = Field(4000, ge=100, le=60_000, description="longer replies are split")


class LineSettings(ChannelSettings):
    """LINE through the Messaging API: a webhook the daemon serves, reply and push;
    ``owner`` and ``allow`` are user ids (U...)."""

    secret_env: str = Field(
        "LINE_CHANNEL_SECRET", description="environment variable holding the channel secret"
    )
    token_env: str = Field(
        "LINE_CHANNEL_ACCESS_TOKEN",
        description="environment variable holding the channel access token",
    )
    api_base: str = Field("https://api.line.me", description="Messaging API endpoint")
    data_api_base: str = Field(
        "https://api-data.line.me", description="where LINE serves message content"
    )
    max_message_length: int = Field(
        5000, ge=100, le=5000, description="longer replies are split (LINE's limit: 5,000)"
    )


class WhatsAppSettings(ChannelSettings):
    """WhatsApp through Meta's Business Cloud API: a webhook the daemon serves, the Graph
    API's messages endpoint out; ``owner`` and ``allow`` are WhatsApp ids (the phone
    number in international form, digits only: ``4915112345678``)."""

    token_env: str = Field(
        "WHATSAPP_ACCESS_TOKEN",
        description="environment variable holding the access token (a system user's)",
    )
    secret_env: str = Field(
        "WHATSAPP_APP_SECRET",
        description="environment variable holding the Meta app's secret (checks the "
        "webhook's X-Hub-Signature-256)",
    )
    verify_token_env: str = Field(
        "WHATSAPP_VERIFY_TOKEN",
        description="environment variable holding the verify token you typed into the "
        "app's webhook settings (answers Meta's subscription check)",
    )
    phone_number_id: str = Field(
        "", description="the business phone number's id (WhatsApp Manager, API Setup)"
    )
    api_base: str = Field("https://graph.facebook.com", description="Graph API endpoint")
    api_version: str = Field(
        "v23.0", pattern=r"^v\d+\.\d+$", description="Graph API version, e.g. v23.0"
    )
    template: str = Field(
        "",
        description="an approved message template sent instead of free text when the "
        "24-hour customer service window is closed; empty: such messages fail",
    )
    template_language: str = Field("en_US", description="the template's language code")
    template_text: bool = Field(
        False,
        description="the template has one body variable {{1}}: it carries the message's "
        "text (else the template is sent once per closed window, as a nudge)",
    )
    max_message_length: int = Field(
        4096, ge=100, le=4096, description="longer replies are split (WhatsApp's limit: 4,096)"
    )

    @field_validator("owner", "allow", "trusted")
    @classmethod
    def _wa_ids(cls, value: list[str]) -> list[str]:
        # WhatsApp reports senders as digits only; +49 151 1234567 is the same number.
        return [re.sub(r"[\s()+-]", "", item) for item in value]


class OpenClawListener(Section):
    """One conversation the OpenClaw bridge listens to."""

    channel: str = Field(description="an OpenClaw channel, e.g. telegram, discord, slack")
    target: str = Field(description="the conversation there, as `openclaw message` names it")


class OpenClawBridgeSettings(ChannelSettings):
    """Every platform OpenClaw is connected to: its running gateway's events (or its
    ``openclaw message`` CLI) in, ``openclaw message send`` out; ``owner`` and ``allow``
    are sender ids as OpenClaw reports them."""

    command: str = Field("", description="the openclaw command (default: the one on PATH)")
    listeners: list[OpenClawListener] = Field(
        [], description="conversations whose new messages memvault receives"
    )
    listen: Literal["auto", "gateway", "poll"] = Field(
        "auto",
        description="how new messages arrive: 'gateway' (the running OpenClaw gateway's "
        "event stream, about a second), 'poll' (`openclaw message read` every poll_seconds; "
        "Discord, Slack, Matrix, Teams, Mattermost only), 'auto' (the gateway while it "
        "answers, else polling)",
    )
    gateway_url: str = Field(
        "ws://127.0.0.1:18789",
        description="the OpenClaw gateway's WebSocket (its gateway.port on this host)",
    )
    gateway_token_env: str = Field(
        "OPENCLAW_GATEWAY_TOKEN",
        description="environment variable holding the gateway's token (gateway.auth.token); "
        "also given to the openclaw command",
    )
    gateway_retry_seconds: float = Field(
        30.0, ge=1, le=3600, description="while polling under 'auto': how often the gateway "
        "is tried again",
    )  # fmt: skip
    poll_seconds: float = Field(15.0, ge=1, le=3600, description="seconds between polls")
    max_age_minutes: float = Field(60.0, gt=0, description="older messages are stale and skipped")
    self_ids: list[str] = Field(
        [], description="the bot's own sender ids there (its messages are skipped)"
    )
    timeout: float = Field(60.0, gt=0, le=600, description="seconds one openclaw call may take")
    max_message_length: int = Field(
        4000, ge=100, le=100_000, description="longer replies are split"
    )


class ChannelsSettings(Section):
    """The messaging channels the owner reaches the agent on."""

    approval_timeout: float = Field(
        300.0, gt=0, le=86_400, description="seconds a tool call waits for the owner's reply"
    )
    attachments_folder: str = Field(
        "Attachments", description="vault folder where received photos and files are saved"
    )
    send_retries: int = Field(
        8, ge=0, le=100, description="retries of a reply that failed to send, with backoff"
    )
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    email: EmailSettings = Field(default_factory=EmailSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    discord: DiscordSettings = Field(default_factory=DiscordSettings)
    signal: SignalSettings = Field(default_factory=SignalSettings)
    line: LineSettings = Field(default_factory=LineSettings)
    whatsapp: WhatsAppSettings = Field(default_factory=WhatsAppSettings)
    openclaw: OpenClawBridgeSettings = Field(default_factory=OpenClawBridgeSettings)

    def sections(self) -> dict[str, ChannelSettings]:
        """Every channel's settings by name, enabled or not."""
        return subsections(self, ChannelSettings)
