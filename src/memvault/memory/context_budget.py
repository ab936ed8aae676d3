"""A context's token budget: the sections a context is made of, how they are fitted to the
budget, and the result that says what was left out.

Apart from the builder (:mod:`memvault.memory.context`) because fitting knows nothing of
where the lines come from: any list of :class:`Section` fills a budget the same way, as
the audience views (:mod:`memvault.privacy.views`) do with their own sections. Lines are
never cut: a line that does not fit is left out, and the closing line names how many.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from memvault.config import ContextSettings
from memvault.errors import InvalidInputError
from memvault.index.chunking import CHARS_PER_TOKEN, estimate_tokens
from memvault.index.search import Hit

_TAIL_CHARS = 120  # kept back for the closing "left out" line
# The token budgets a context can be built for (the HTTP API and the tools check the same).
MIN_BUDGET = 50
MAX_BUDGET = 200_000


@dataclass
class Section:
    """A titled list of lines, some of which may not fit.

    ``rank`` is the order in which the lines claim room (indices into ``items``),
    when it is not their order: those shown still read in the order of ``items``.
    """

    title: str
    items: list[str]
    shown: list[str] = field(default_factory=list)
    left_out: int = 0
    rank: list[int] | None = None


@dataclass(frozen=True)
class Recalled:
    """A memory (``id``) or note a context's search found and showed, with its scores
    (what the console's "Why did it say that" page shows of a run)."""

    id: str | None
    path: str
    score: float
    vector_score: float
    text_score: float

    @classmethod
    def of(cls, hit: Hit) -> Recalled:
        """What a search hit shown in a context recalled."""
        return cls(hit.id, hit.path, hit.score, hit.vector_score, hit.text_score)


@dataclass
class ContextResult:
    """The built context and how the budget was spent."""

    markdown: str
    budget_tokens: int
    sections: list[Section]
    # Why what is relevant was found by keywords only (the model still loading), if so.
    notice: str | None = None
    # The search hits the section of what is relevant holds, in its order, with scores.
    recalled: list[Recalled] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """Estimated size of the Markdown."""
        return estimate_tokens(self.markdown)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "markdown": self.markdown,
            "tokens": self.tokens,
            "budget_tokens": self.budget_tokens,
            "sections": [
                {"title": s.title, "shown": len(s.shown), "left_out": s.left_out}
                for s in self.sections
            ],
            "notice": self.notice,
        }

    def text(self, empty: str = "(The vault holds no context yet.)") -> str:
        """The Markdown for a model (``empty`` when there is none), the notice as a last line."""
        text = self.markdown or empty
        return f"{text.rstrip()}\n\n_{self.notice}_\n" if self.notice else text


def checked_budget(budget_tokens: int | None, settings: ContextSettings) -> int:
    """The token budget a context is built for (the settings' when None), checked."""
    budget = settings.budget_tokens if budget_tokens is None else budget_tokens
    if not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise InvalidInputError(
            f"The context budget must be between {MIN_BUDGET} and {MAX_BUDGET} tokens, "
            f"not {budget}."
        )
    return budget


def fit_sections(sections: Iterable[Section], budget: int) -> ContextResult:
    """Fill sections in order; a section stops at the first line that does not fit
    (taking its lines in the order of its ``rank``, when it has one).

    Room for one closing line is kept back, so whatever was left out can
    always be named.
    """
    limit = budget * CHARS_PER_TOKEN - _TAIL_CHARS
    out: list[str] = []
    size = 0
    ordered = list(sections)
    for section in ordered:
        if not section.items:
            continue
        heading = f"## {section.title}"
        gap = 1 if out else 0  # the blank line before a heading
        order = section.rank if section.rank is not None else range(len(section.items))
        if size + gap + len(heading) + 1 + len(section.items[order[0]]) + 1 > limit:
            section.left_out = len(section.items)
            continue
        if out:
            out.append("")
        out.append(heading)
        size += gap + len(heading) + 1
        chosen: set[int] = set()
        for n, index in enumerate(order):
            item = section.items[index]
            if size + len(item) + 1 > limit:
                section.left_out = len(section.items) - n
                break
            chosen.add(index)
            size += len(item) + 1
        section.shown = [item for i, item in enumerate(section.items) if i in chosen]
        out.extend(section.shown)
    dropped = [s for s in ordered if s.left_out]
    if dropped:
        out.extend(["", _left_out_line(dropped, _TAIL_CHARS - 2)])
    markdown = "\n".join(out) + ("\n" if out else "")
    return ContextResult(markdown=markdown, budget_tokens=budget, sections=ordered)


def _left_out_line(sections: list[Section], room: int) -> str:
    """ "_Left out for the token budget: Owner (3), ..._" shortened to fit ``room``."""
    parts = [f"{s.title} ({s.left_out})" for s in sections]
    for keep in range(len(parts), 0, -1):
        rest = len(parts) - keep
        text = ", ".join(parts[:keep]) + (f" and {rest} more sections" if rest else "")
        line = f"_Left out for the token budget: {text}._"
        if len(line) <= room:
            return line
    return f"_Left out for the token budget: {sum(s.left_out for s in sections)} items._"[:room]
