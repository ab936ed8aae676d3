"""Settings: one pydantic-settings model, from three places.

Precedence, highest first: command-line flags, environment variables
(``MEMVAULT_*``, nested with ``__`` as in ``MEMVAULT_SERVER__PORT``), the
vault's ``.memvault/config.toml``, then defaults. The vault itself is chosen
by flag or ``MEMVAULT_VAULT`` (default ``~/memvault``), since its config file
lives inside it. :func:`load_settings` also records where every effective
value came from, for ``memvault config show``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from memvault.clock import load_timezone
from memvault.errors import ConfigError, VaultError

ENV_PREFIX = "MEMVAULT_"
DEFAULT_VAULT = Path("~/memvault")
CONFIG_FILE = Path(".memvault") / "config.toml"


class Section(BaseModel):
    """Base for nested settings sections: unknown keys are mistakes, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


class MemorySettings(Section):
    """Defaults for remembered facts."""

    default_category: str = Field("fact", description="category of a memory stored without one")
    default_importance: float = Field(
        0.5, ge=0.0, le=1.0, description="importance of a memory stored without one"
    )


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
    owner_name: str = Field("the owner", description="how the agent refers to its owner")
    lock_timeout: float = Field(
        10.0, gt=0, description="seconds to wait for a note another process holds"
    )
    memory: MemorySettings = Field(default_factory=MemorySettings)

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str | None) -> str | None:
        if value:
            try:
                load_timezone(value)
            except ConfigError as exc:
                raise ValueError(exc.message) from None
        return value or None

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
        raise ConfigError(f"An MEMVAULT_* environment variable is invalid: {exc}.") from exc
    vault_path = (
        Path(flags.get("vault") or env.get("vault") or DEFAULT_VAULT).expanduser().absolute()
    )
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
        origin = sources.get(key, "default")
        reason = str(first["msg"]).removeprefix("Value error, ").rstrip(".")
        if first["type"] == "extra_forbidden":
            reason = "there is no such setting"
        raise ConfigError(f"Invalid setting {key!r} from {origin}: {reason}.") from exc
    return LoadedSettings(settings=settings, sources=sources, config_file=config_file)
