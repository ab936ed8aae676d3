"""Settings: one pydantic-settings model, from three places.

Precedence, highest first: command-line flags, environment variables
(``MEMVAULT_*``, nested with ``__`` as in ``MEMVAULT_SERVER__PORT``), the
vault's ``.memvault/config.toml``, then defaults. The vault itself is chosen
by flag or ``MEMVAULT_VAULT`` (default ``~/memvault``), since its config file
lives inside it. :func:`load_settings` also records where every effective
value came from, for ``memvault config show``.

One module a group of sections (memory, privacy, tools, llm, server, channels, jobs); ``base``
holds what every section is, ``settings`` the whole model and its loading. Every name is
importable from here.
"""

from memvault.config.base import CONFIG_FILE, ENV_PREFIX, Section, SectionT, subsections
from memvault.config.channels import (
    ChannelPolicy,
    ChannelSettings,
    ChannelsSettings,
    DiscordSettings,
    EmailSettings,
    LineSettings,
    OpenClawBridgeSettings,
    OpenClawListener,
    Security,
    SignalSettings,
    SlackSettings,
    TelegramSettings,
    WhatsAppSettings,
)
from memvault.config.jobs import (
    ArchivalJob,
    DailyNoteJob,
    DistillJob,
    HeartbeatJob,
    JobSettings,
    JobsSettings,
    KnowledgeGraphJob,
    LivingSummaryJob,
    ModelBudget,
    RemindersJob,
    SkillDiscoveryJob,
)
from memvault.config.llm import AgentSettings, LLMPurposeSettings, LLMSettings
from memvault.config.memory import (
    ContextSettings,
    EmbedderSettings,
    IndexSettings,
    MemorySettings,
    SearchSettings,
    StorageSettings,
)
from memvault.config.privacy import ContactPrivacy, PrivacySettings
from memvault.config.server import (
    CliSettings,
    ConsoleSettings,
    ReplicaSettings,
    ServerSettings,
    TelemetrySettings,
)
from memvault.config.settings import LoadedSettings, Settings, load_settings
from memvault.config.tools import FileBridgeSettings, ShellSettings, ToolSettings

__all__ = [
    "CONFIG_FILE",
    "ENV_PREFIX",
    "AgentSettings",
    "ArchivalJob",
    "ChannelPolicy",
    "ChannelSettings",
    "ChannelsSettings",
    "CliSettings",
    "ConsoleSettings",
    "ContactPrivacy",
    "ContextSettings",
    "DailyNoteJob",
    "DiscordSettings",
    "DistillJob",
    "EmailSettings",
    "EmbedderSettings",
    "FileBridgeSettings",
    "HeartbeatJob",
    "IndexSettings",
    "JobSettings",
    "JobsSettings",
    "KnowledgeGraphJob",
    "LLMPurposeSettings",
    "LLMSettings",
    "LineSettings",
    "LivingSummaryJob",
    "LoadedSettings",
    "MemorySettings",
    "ModelBudget",
    "OpenClawBridgeSettings",
    "OpenClawListener",
    "PrivacySettings",
    "RemindersJob",
    "ReplicaSettings",
    "SearchSettings",
    "Section",
    "SectionT",
    "Security",
    "ServerSettings",
    "Settings",
    "ShellSettings",
    "SignalSettings",
    "SkillDiscoveryJob",
    "SlackSettings",
    "StorageSettings",
    "TelegramSettings",
    "TelemetrySettings",
    "ToolSettings",
    "WhatsAppSettings",
    "load_settings",
    "subsections",
]
