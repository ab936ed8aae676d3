"""Builds the provider the settings ask for, and describes it without secrets.

The SDKs are imported only here, when a provider is built: commands that
never talk to a model do not pay for loading them.
"""

from __future__ import annotations

import os
from typing import Any

from memvault.config import LLMSettings
from memvault.llm.base import LLMNotConfiguredError, Provider
from memvault.locations import CONFIG_FILE, STATE_DIR

DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

CONFIG_HINT = (
    f"Configure one in <vault>/{STATE_DIR}/{CONFIG_FILE} under [llm], e.g. "
    'provider = "openai", model = "gpt-4o-mini", api_key_env = "OPENAI_API_KEY" '
    '(or provider = "anthropic", model = "claude-sonnet-4-5"; for Ollama add '
    'base_url = "http://localhost:11434/v1"), or set MEMVAULT_LLM__PROVIDER and '
    "MEMVAULT_LLM__MODEL."
)


def make_provider(settings: LLMSettings) -> Provider:
    """The provider for ``settings``.

    Raises :class:`LLMNotConfiguredError` (saying what to configure) when no
    model is configured or its API key is missing.
    """
    if settings.provider == "none":
        raise LLMNotConfiguredError("No language model is configured.", hint=CONFIG_HINT)
    if not settings.model:
        raise LLMNotConfiguredError(
            f"llm.provider is {settings.provider!r} but llm.model is not set.", hint=CONFIG_HINT
        )
    if settings.provider == "anthropic":
        from memvault.llm.anthropic_provider import AnthropicProvider

        return AnthropicProvider(settings)
    from memvault.llm.openai_provider import OpenAIProvider

    return OpenAIProvider(settings)


def optional_provider(settings: LLMSettings) -> Provider | None:
    """The provider for ``settings``, or None when no model is configured (a normal state)."""
    try:
        return make_provider(settings)
    except LLMNotConfiguredError:
        return None


def describe(settings: LLMSettings) -> dict[str, Any]:
    """The configured model for ``doctor`` and ``config show``; never the key itself."""
    key_env = settings.api_key_env or DEFAULT_KEY_ENV.get(settings.provider)
    return {
        "provider": settings.provider,
        "model": settings.model,
        "base_url": settings.base_url,
        "api_key_env": key_env,
        "api_key_set": bool(key_env and os.environ.get(key_env)),
    }
