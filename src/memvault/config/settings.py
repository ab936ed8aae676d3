"""The whole settings model and its loading: file, environment, flags."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import (
    Field,
    ValidationError,
    field_validator,
)
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from memvault.clock import check_locale, load_timezone
from memvault.config.base import CONFIG_FILE, ENV_PREFIX
from memvault.config.channels import ChannelsSettings
from memvault.config.jobs import JobsSettings
from memvault.config.llm import AgentSettings, LLMSettings
from memvault.config.memory import (
    ContextSettings,
    EmbedderSettings,
    IndexSettings,
    MemorySettings,
    SearchSettings,
    StorageSettings,
)
from memvault.config.privacy import PrivacySettings
from memvault.config.server import (
    CliSettings,
    ConsoleSettings,
    ReplicaSettings,
    ServerSettings,
    TelemetrySettings,
)
from memvault.config.tools import ToolSettings
from memvault.errors import ConfigError, VaultError
from memvault.locations import DEFAULT_VAULT, choose_vault


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
