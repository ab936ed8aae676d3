"""``[llm.jobs]`` and ``[llm.replies]``: what each purpose inherits from ``[llm]``, and
one provider per distinct model (real providers against a fake server on loopback)."""

from __future__ import annotations

import pytest

from llm_fakes import FakeOpenAI, llm_settings
from memvault.config import LLMSettings
from memvault.llm.base import ChatMessage, LLMError
from memvault.llm.factory import Models, describe, settings_for


def test_unset_fields_fall_back_to_the_default() -> None:
    base = LLMSettings(
        provider="openai",
        model="gpt-4o",
        api_key_env="WORK_KEY",
        timeout=30,
        jobs={"model": "llama3.2", "base_url": "http://localhost:11434/v1", "timeout": 300},
    )
    jobs = settings_for(base, "jobs")
    assert (jobs.provider, jobs.model, jobs.base_url) == (
        "openai",
        "llama3.2",
        "http://localhost:11434/v1",
    )
    assert jobs.timeout == 300 and jobs.api_key_env == "WORK_KEY"
    assert settings_for(base, "replies") is base  # nothing of its own: the default itself
    assert settings_for(base, "default") is base


def test_another_provider_keeps_none_of_the_defaults_service() -> None:
    base = LLMSettings(
        provider="openai",
        model="gpt-4o",
        base_url="https://openrouter.ai/api/v1",
        api_key_env="ROUTER_KEY",
        max_tokens=1000,
        replies={"provider": "anthropic", "model": "claude-haiku-4-5"},
    )
    replies = settings_for(base, "replies")
    assert (replies.provider, replies.model) == ("anthropic", "claude-haiku-4-5")
    assert replies.base_url is None, "OpenRouter's address is not Anthropic's"
    assert replies.api_key_env is None, "nor is its key"
    assert describe(base, "replies")["api_key_env"] == "ANTHROPIC_API_KEY"
    assert replies.max_tokens == 1000  # not about the service: inherited


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        (
            {"provider": "openai", "model": "m", "jobs": {"provider": "anthropic"}},
            "llm.jobs.provider is 'anthropic', not [llm]'s 'openai', so llm.jobs.model must "
            "name its model",
        ),
        (
            {"replies": {"model": "llama3.2"}},
            "[llm.replies] sets model but no provider, and [llm] has none; set "
            "llm.replies.provider",
        ),
    ],
)
def test_a_purpose_that_cannot_work_is_refused(given: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match="validation error") as caught:
        LLMSettings(**given)  # type: ignore[arg-type]
    assert problem in str(caught.value)


def test_a_purpose_may_have_a_model_when_the_default_has_none() -> None:
    base = LLMSettings(jobs={"provider": "openai", "model": "llama3.2", "base_url": "http://x/v1"})
    assert settings_for(base, "jobs").model == "llama3.2"
    models = Models(base)
    assert models.provider("default") is None and models.provider("replies") is None
    assert models.problem("default") is not None
    jobs = models.provider("jobs")
    assert jobs is not None and jobs.model == "llama3.2"


def test_purposes_on_one_model_share_one_provider_and_its_health() -> None:
    with FakeOpenAI() as fake:
        same = Models(llm_settings(fake, max_retries=0))
        default = same.provider("default")
        assert default is same.provider("jobs") is same.provider("replies")

        split = Models(llm_settings(fake, max_retries=0, jobs={"model": "small"}))
        jobs, replies = split.provider("jobs"), split.provider("replies")
        assert jobs is not None and replies is not None and jobs is not replies
        fake.reply("ok")
        fake.fail(500)
        assert jobs.complete([ChatMessage("user", "hi")]).text == "ok"
        with pytest.raises(LLMError, match="500"):
            replies.complete([ChatMessage("user", "hi")])
        assert [r["model"] for r in fake.requests] == ["small", "fake-model"]
        healths = split.healths()
        assert healths["jobs"].failures == 0 and healths["replies"].failures == 1
        assert healths["default"] is healths["replies"]
