"""Asking the model to write part of a note, and deciding whether its answer may be used.

The material a job hands the model comes from the vault and from chats, so
it is data, not instructions: it goes inside ``<vault-data>`` tags and the
instructions say so. An answer is used only when it is whole and fits where
it goes; a cut-off (``stop_reason == "length"``), empty, oversized or
marker-holding answer, or a failed call, comes back as a :class:`Draft`
without text and with the reason, and the job keeps its extractive version.
"""

from __future__ import annotations

from dataclasses import dataclass

from memvault.errors import MemvaultError
from memvault.index.chunking import CHARS_PER_TOKEN
from memvault.jobs.budget import BudgetedModel
from memvault.jobs.marked_section import Markers
from memvault.llm.base import ChatMessage
from memvault.llm.untrusted import UNTRUSTED, unfence, wrap_material


@dataclass(frozen=True)
class Draft:
    """The model's text when it can be used, else None and why not."""

    text: str | None
    problem: str | None = None
    cut: bool = False  # the material was cut to fit the job's token budget


def draft(
    model: BudgetedModel,
    instructions: str,
    material: str,
    *,
    markers: Markers,
    max_tokens: int,
    max_bytes: int | None = None,
) -> Draft:
    """One model call writing a part of a note from ``material``; see the module docstring.

    Material too long for the job's token budget (with ``max_tokens`` left
    for the answer) is cut at a line, and the draft says so.
    """
    system = f"{instructions}\n\n{UNTRUSTED}"
    room = (model.tokens_left - max_tokens) * CHARS_PER_TOKEN - len(system) - 64
    cut = len(material) > room
    if cut:
        kept = material[: max(room, 0)].rsplit("\n", 1)[0]
        material = f"{kept}\n(the rest was left out to fit the job's token budget)"
    messages = [ChatMessage("system", system), ChatMessage("user", wrap_material(material))]
    try:
        completion = model.complete(messages, max_tokens=max_tokens)
    except MemvaultError as exc:  # unreachable, refused, over the job's budget
        return Draft(None, f"the model call failed: {exc.message}", cut)
    text = unfence(completion.text)
    if completion.stop_reason == "length":
        return Draft(None, "the model's answer was cut off at its token limit", cut)
    if not text:
        return Draft(None, "the model's answer was empty", cut)
    if markers.mentioned_in(text):
        return Draft(None, "the model's answer held memvault's section markers", cut)
    size = len(text.encode("utf-8"))
    if max_bytes is not None and size > max_bytes:
        problem = f"the model's answer ({size} bytes) was over the {max_bytes}-byte budget"
        return Draft(None, problem, cut)
    return Draft(text, None, cut)
