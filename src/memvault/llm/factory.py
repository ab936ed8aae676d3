"""Builds the provider the settings ask for, and describes it without secrets.

The SDKs are imported only here, when a provider is built: commands that
never talk to a model do not pay for loading them.

A model serves one of three purposes: ``default`` (the owner's own runs:
``ask``, ``chat``, ``POST /v1/agent/run``, summaries, consolidation),
``jobs`` (every scheduled job that asks a model) and ``replies`` (the agent
answering channel messages). ``[llm.jobs]`` and ``[llm.replies]`` name only
what differs from ``[llm]``; :func:`settings_for` fills in the rest, and
:class:`Models` builds one provider per distinct configuration, so purposes
that share a model share its health record too.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from memvault.config import LLMSettings
from memvault.errors import MemvaultError
from memvault.extras import require
from memvault.llm.base import Health, LLMNotConfiguredError, Provider
from memvault.locations import CONFIG_FILE, STATE_DIR

Purpose = Literal["default", "jobs", "replies"]
PURPOSES: tuple[Purpose, ...] = ("default", "jobs", "replies")
# What belongs to one service: a purpose that names another provider does not inherit them.
_SERVICE_FIELDS = ("model", "base_url", "api_key_env")

DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

CONFIG_HINT = (
    f"Configure one in <vault>/{STATE_DIR}/{CONFIG_FILE} under [llm], e.g. "
    'provider = "openai", model = "gpt-4o-mini", api_key_env = "OPENAI_API_KEY" '
    '(or provider = "anthropic", model = "claude-sonnet-4-5"; for Ollama add '
    'base_url = "http://localhost:11434/v1"), or set MEMVAULT_LLM__PROVIDER and '
    "MEMVAULT_LLM__MODEL."
)


def make_provider(settings: LLMSettings, purpose: Purpose = "default") -> Provider:
    """The provider serving ``purpose`` under ``settings`` (see :func:`settings_for`).

    Raises :class:`LLMNotConfiguredError` (saying what to configure) when no
    model is configured or its API key is missing.
    """
    settings = settings_for(settings, purpose)
    if settings.provider == "none":
        raise LLMNotConfiguredError("No language model is configured.", hint=CONFIG_HINT)
    if not settings.model:
        raise LLMNotConfiguredError(
            f"llm.provider is {settings.provider!r} but llm.model is not set.", hint=CONFIG_HINT
        )
    # The SDKs are extras (memvault.extras): a missing one is a sentence naming it.
    require(settings.provider, extra=settings.provider, needed_for=_needs(settings, purpose))
    if settings.provider == "anthropic":
        from memvault.llm.anthropic_provider import AnthropicProvider

        return AnthropicProvider(settings)
    from memvault.llm.openai_provider import OpenAIProvider

    return OpenAIProvider(settings)


def _needs(settings: LLMSettings, purpose: Purpose) -> str:
    section = "llm" if purpose == "default" else f"llm.{purpose}"
    return f"{section}.provider = {settings.provider!r}"


def optional_provider(settings: LLMSettings, purpose: Purpose = "default") -> Provider | None:
    """The provider serving ``purpose``, or None when it has no model (a normal state)."""
    try:
        return make_provider(settings, purpose)
    except LLMNotConfiguredError:
        return None


def settings_for(settings: LLMSettings, purpose: Purpose) -> LLMSettings:
    """The settings of the model serving ``purpose``: its own section over ``[llm]``.

    Every field ``[llm.jobs]`` / ``[llm.replies]`` leaves unset is ``[llm]``'s,
    except that a section naming another provider keeps none of ``[llm]``'s
    model, base_url and api_key_env (they belong to the other service).
    """
    if purpose == "default":
        return settings
    own = getattr(settings, purpose).model_dump(exclude_none=True)
    if not own:
        return settings
    base = settings.model_dump(exclude={"jobs", "replies"})
    if own.get("provider", settings.provider) != settings.provider:
        for name in _SERVICE_FIELDS:
            base.pop(name)
    return LLMSettings(**{**base, **own})


def _connection(settings: LLMSettings) -> tuple[Any, ...]:
    """What makes two purposes' models one and the same provider."""
    return tuple(sorted(settings.model_dump(exclude={"jobs", "replies"}).items()))


class Models:
    """The provider of each purpose, built once; None (and the reason) where none is set.

    Purposes whose settings are the same get the same provider object.
    """

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self._providers: dict[Purpose, Provider | None] = {}
        self._problems: dict[Purpose, MemvaultError] = {}
        built: dict[tuple[Any, ...], Provider | MemvaultError] = {}
        for purpose in PURPOSES:
            chosen = settings_for(settings, purpose)
            key = _connection(chosen)
            if key not in built:
                try:
                    built[key] = make_provider(chosen)
                except MemvaultError as exc:  # no model is a normal state
                    built[key] = exc
            made = built[key]
            if isinstance(made, MemvaultError):
                self._providers[purpose] = None
                self._problems[purpose] = made
            else:
                self._providers[purpose] = made

    def provider(self, purpose: Purpose) -> Provider | None:
        """The provider serving ``purpose``, or None when it has no model."""
        return self._providers[purpose]

    def problem(self, purpose: Purpose) -> MemvaultError | None:
        """Why ``purpose`` has no model (None when it has one)."""
        return self._problems.get(purpose)

    def healths(self) -> dict[Purpose, Health]:
        """Each purpose's provider health, for ``doctor``."""
        return {
            purpose: provider.health
            for purpose, provider in self._providers.items()
            if provider is not None
        }


def describe(settings: LLMSettings, purpose: Purpose = "default") -> dict[str, Any]:
    """The model serving ``purpose``, for ``doctor`` and ``config show``; never the key itself."""
    chosen = settings_for(settings, purpose)
    key_env = chosen.api_key_env or DEFAULT_KEY_ENV.get(chosen.provider)
    return {
        "provider": chosen.provider,
        "model": chosen.model,
        "base_url": chosen.base_url,
        "api_key_env": key_env,
        "api_key_set": bool(key_env and os.environ.get(key_env)),
    }
