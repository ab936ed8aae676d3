"""A gullible model for the fake LLM servers: it obeys every planted text it reads, unless
the text sits inside a ``<vault-data>`` block.

Give it the planted texts (as the request will show them) and the tool call each asks
for; queue it with ``fake.reply_with(model)``. For a request that holds tool results it
answers in words (the run ends); otherwise it reads the whole request (system prompt,
user turns, tool results), drops what is between ``<vault-data>`` and ``</vault-data>``,
and makes the tool call of every planted text still there. What it saw only as data is
listed in ``as_data``, what it obeyed in ``obeyed``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from agent.conftest import system_of, tool_results, user_texts
from memvault.llm.untrusted import DATA_TAG

Action = tuple[str, dict[str, Any]]
DATA_BLOCK = re.compile(rf"<{DATA_TAG}>.*?</{DATA_TAG}>", re.DOTALL)


def read(request: dict[str, Any]) -> str:
    """Everything a request gives the model to read (either API's shape)."""
    return "\n".join([system_of(request), *user_texts(request), *tool_results(request)])


def outside_data(text: str) -> str:
    """``text`` without its ``<vault-data>`` blocks."""
    return DATA_BLOCK.sub(" ", text)


class Gullible:
    """A model that does what any planted text outside the data blocks says."""

    def __init__(self, planted: Mapping[str, Action]) -> None:
        self.planted = dict(planted)
        self.obeyed: list[str] = []
        self.as_data: list[str] = []

    def __call__(self, request: dict[str, Any]) -> tuple[str, Sequence[tuple[str, Any]]]:
        if tool_results(request):
            return "Done as the notes said.", []
        text = read(request)
        outside = outside_data(text)
        inside = "\n".join(DATA_BLOCK.findall(text))
        calls: list[tuple[str, Any]] = []
        for probe, (tool, arguments) in self.planted.items():
            if probe in outside:
                self.obeyed.append(probe)
                calls.append((tool, arguments))
            elif probe in inside:
                self.as_data.append(probe)
        return "Nothing in your notes asks me to act.", calls
