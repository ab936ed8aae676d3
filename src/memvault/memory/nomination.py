"""What consolidation nominates for a new memory: the conservative rule, or the model's
answer checked before anything is applied (steps 2 and 3 of
:mod:`memvault.memory.consolidation`).

Apart from consolidation because a nomination only *names* an action: it reads the
candidates and the model's answer and writes nothing; :class:`~memvault.memory.
consolidation.Consolidator` applies it, holds it for review, or falls back to the rule.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from memvault.config import MemorySettings
from memvault.errors import InvalidInputError, MemvaultError
from memvault.llm.base import ChatMessage, Provider
from memvault.llm.untrusted import UNTRUSTED, unfence, wrap_material
from memvault.memory.near_identical import NEAR_IDENTICAL, jaccard, tokens
from memvault.vault.memories import Memories, Memory, normalize_text

# The consolidation's logger: its decisions are logged under one name wherever made.
log = logging.getLogger("memvault.memory.consolidation")

ACTIONS = ("add", "update", "supersede", "noop")
ANSWER_TOKENS = 400
_CHARS_PER_TOKEN = 4

INSTRUCTIONS = """\
You keep the owner's memory tidy. A new memory is about to be stored; the \
existing memories nearest to it are listed with their ids. Choose one action:
- add: it is new information (choose this when unsure);
- update: it adds detail to one existing memory about the same thing and both \
fit in one sentence: give that memory's id as target and the merged sentence as text;
- supersede: it corrects or replaces one existing memory (a fact or preference \
that changed): give the old memory's id as target;
- noop: one existing memory already says the same: give its id as target.
Answer with one JSON object and nothing else: {"action": "add" | "update" | \
"supersede" | "noop", "target": an id from the list or null, "text": the merged \
sentence for update or null, "reason": one short sentence, "confidence": 0 to 1}."""


@dataclass(frozen=True)
class Decision:
    """What should happen to a new memory, and why."""

    action: str
    target: str | None = None
    text: str | None = None  # the merged text of an update
    reason: str = ""
    confidence: float | None = None
    by: str = "rule"  # rule, model or owner


@dataclass(frozen=True)
class Held:
    """A model answer that may not be applied: what it nominated (if anything) and why not."""

    problem: str
    decision: Decision | None = None


ADD_BY_RULE = Decision("add", reason="nothing close enough is remembered")


def rule_decision(new: Memory, candidates: Sequence[Memory]) -> Decision:
    """The conservative rule: near-identical text is a no-op, anything else is added."""
    norm, words = normalize_text(new.text), tokens(new.text)
    for candidate in candidates:
        if normalize_text(candidate.text) == norm:
            return Decision("noop", candidate.id, reason="the same text is already remembered")
        overlap = jaccard(words, tokens(candidate.text))
        if overlap >= NEAR_IDENTICAL and candidate.category == new.category:
            return Decision(
                "noop", candidate.id, reason=f"nearly the same words ({overlap:.2f} overlap)"
            )
    return ADD_BY_RULE


def ask_model(
    provider: Provider,
    new: Memory,
    candidates: list[Memory],
    settings: MemorySettings,
    memories: Memories,
) -> Decision | Held | None:
    """The model's nomination for ``new`` among ``candidates`` (best first), a :class:`Held`
    answer, or None when it could not answer. One call within
    ``settings.consolidation_max_tokens``: the least relevant candidates are left out
    until the prompt fits."""
    system = f"{INSTRUCTIONS}\n\n{UNTRUSTED}"
    room = (settings.consolidation_max_tokens - ANSWER_TOKENS) * _CHARS_PER_TOKEN
    shown = list(candidates)
    while True:
        material = _material(new, shown)
        if len(system) + len(material) <= room or not shown:
            break
        shown.pop()  # the least relevant candidate goes first
    if not shown or len(system) + len(material) > room:
        log.info("consolidation prompt over its token budget; the rule decides")
        return None
    messages = [ChatMessage("system", system), ChatMessage("user", wrap_material(material))]
    try:
        completion = provider.complete(messages, max_tokens=ANSWER_TOKENS)
    except MemvaultError as exc:
        log.warning("consolidation model failed; the rule decides: %s", exc.message)
        return None
    if completion.stop_reason == "length":
        return Held("the model's answer was cut off at its token limit")
    return check_answer(completion.text, new, [m.id for m in shown], settings, memories)


def check_answer(
    answer: str, new: Memory, ids: list[str], settings: MemorySettings, memories: Memories
) -> Decision | Held:
    """The model's answer as a decision that may be applied, or why it may not: it must
    name one of ``ids``, an update's text must be a valid memory (``memories`` checks it),
    and it must be at least ``settings.consolidation_min_confidence`` sure."""
    text = unfence(answer)
    if not text:
        return Held("the model's answer was empty")
    try:
        parsed = json.loads(text[text.find("{") : text.rfind("}") + 1] or text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return Held("the model's answer was not a JSON object")
    action = str(parsed.get("action", "")).strip().lower()
    target = parsed.get("target")
    target = str(target).strip().lstrip("^") if target not in (None, "", "null") else None
    merged = parsed.get("text")
    merged = " ".join(str(merged).split()) if isinstance(merged, str) else None
    reason = " ".join(str(parsed.get("reason") or "").split())[:300]
    try:
        confidence = float(parsed.get("confidence"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        confidence = None
    if action not in ACTIONS:
        return Held(f"the model answered an unknown action {action[:40]!r}")
    if action == "add":  # what happens anyway: no need to be sure of it
        return Decision("add", None, None, reason, confidence, by="model")
    decision = Decision(action, target, merged or None, reason, confidence, by="model")
    if target not in ids:
        named = f"named {target[:40]!r}" if target else "named no memory"
        nominated = Decision(action, None, merged or None, reason, confidence, by="model")
        return Held(f"the model {named}, which was not among the candidates", nominated)
    if action == "update":
        if not merged:
            return Held("the model's update had no merged text", decision)
        try:
            memories.prepare(merged, new.category)
        except InvalidInputError as exc:
            return Held(f"the model's merged text is not a memory: {exc.message}", decision)
    if confidence is None or not 0.0 <= confidence <= 1.0:
        return Held("the model gave no confidence between 0 and 1", decision)
    if confidence < settings.consolidation_min_confidence:
        limit = settings.consolidation_min_confidence
        return Held(f"the model was not sure enough ({confidence:.2f} < {limit:.2f})", decision)
    return decision


def _material(new: Memory, candidates: Sequence[Memory]) -> str:
    lines = ["Existing memories:"]
    for memory in candidates:
        lines.append(f"- id {memory.id} ({memory.category}): {memory.text}")
    lines += ["", f"New memory ({new.category}): {new.text}"]
    return "\n".join(lines)
