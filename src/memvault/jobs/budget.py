"""A hard budget on a job's model use: calls and tokens per run.

A job never holds the provider itself; it gets a :class:`BudgetedModel`
that refuses the call past the budget (:class:`BudgetExceededError`) and
asks for no longer an answer than the tokens left allow. What a run used
goes into its record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memvault.errors import MemvaultError
from memvault.llm.base import ChatMessage, Completion, Provider, Usage

# An answer shorter than this is not worth asking for.
_MIN_ANSWER_TOKENS = 16


class BudgetExceededError(MemvaultError):
    """A job reached its model budget for this run."""

    code = "budget_exceeded"
    exit_code = 1


@dataclass
class BudgetedModel:
    """The provider as one run of a job may use it."""

    provider: Provider
    job: str
    max_calls: int
    max_tokens: int
    calls: int = 0
    used: Usage = field(default_factory=Usage)
    # Each call's prompt and answer, in order: the run's record of what the model was given.
    exchanges: list[tuple[list[ChatMessage], Completion]] = field(default_factory=list)

    @property
    def tokens_left(self) -> int:
        """Tokens (prompt and answer) this run may still use."""
        return max(0, self.max_tokens - self.used.input_tokens - self.used.output_tokens)

    def complete(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Completion:
        """One completion within the budget; BudgetExceededError before a call it cannot afford.

        The prompt's size is estimated (4 characters a token) so the answer
        asked for fits what is left; the provider's reported usage is what
        is counted.
        """
        if self.calls >= self.max_calls:
            raise BudgetExceededError(
                f"The {self.job} job reached its budget of {self.max_calls} model call(s) "
                "for this run; raise max_model_calls in its [jobs] section to allow more."
            )
        prompt = sum(len(m.content) for m in messages) // 4 + 1
        answer = min(max_tokens, self.tokens_left - prompt)
        if answer < _MIN_ANSWER_TOKENS:
            raise BudgetExceededError(
                f"The {self.job} job's prompt (about {prompt} tokens) does not fit its budget "
                f"of {self.max_tokens} tokens for this run; raise max_model_tokens in its "
                "[jobs] section."
            )
        self.calls += 1
        completion = self.provider.complete(messages, max_tokens=answer)
        self.used = self.used + completion.usage
        self.exchanges.append((list(messages), completion))
        return completion

    def report(self) -> dict[str, int]:
        """What this run used, for its record."""
        return {
            "model_calls": self.calls,
            "input_tokens": self.used.input_tokens,
            "output_tokens": self.used.output_tokens,
        }
