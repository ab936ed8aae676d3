"""The model's context window during a run: how big a request is, and what is dropped
when it nears the window.

Apart from the loop because it is arithmetic on messages, not the run's life: the
loop (:meth:`~memvault.agent.loop.Agent.run`) decides *when* to ask for memories with
:data:`DEFENSIVE_PROMPT` and when to call :func:`trim_to_window`; this module says how
much a request weighs and which turns go, never orphaning a tool result.
"""

from __future__ import annotations

import json

from memvault.index.chunking import CHARS_PER_TOKEN
from memvault.llm.base import ChatMessage

DEFENSIVE_PROMPT = (
    "[memvault] This conversation is close to the model's context limit; older turns "
    "will be dropped next. Before going on with the request, call `remember` for every "
    "durable fact, decision, preference or correction from this conversation that is not "
    "stored yet (one self-contained sentence each). Then continue."
)
TRIMMED_NOTE = (
    "[memvault] {count} earlier message(s) were dropped to stay within the context window; "
    "use recall or memory_search if you need them."
)


def _message_size(message: ChatMessage) -> int:
    size = len(message.content) + 16
    for call in message.tool_calls:
        size += len(call.name) + len(json.dumps(call.arguments)) + 16
    return size


def request_tokens(messages: list[ChatMessage], tool_chars: int) -> int:
    """Tokens of a request (its messages and ``tool_chars`` of tool specs), estimated as
    everywhere in memvault (4 characters each)."""
    return (sum(_message_size(m) for m in messages) + tool_chars) // CHARS_PER_TOKEN


def trim_to_window(
    messages: list[ChatMessage], tool_chars: int, target: int
) -> tuple[list[ChatMessage], int]:
    """Drop the oldest turns until the request fits ``target`` tokens.

    The system prompt and the latest user command stay; an assistant turn is
    dropped together with its tool results, so no result is orphaned.
    """
    system, rest = messages[0], messages[1:]
    command_at = max(
        (
            n
            for n, m in enumerate(rest)
            if m.role == "user" and not m.content.startswith("[memvault]")
        ),
        default=0,
    )
    blocks: list[list[ChatMessage]] = []
    for message in rest:
        if message.role == "tool" and blocks:
            blocks[-1].append(message)
        else:
            blocks.append([message])
    # Index of the block holding the latest user command.
    position = 0
    keep_block = 0
    for n, block in enumerate(blocks):
        if position <= command_at < position + len(block):
            keep_block = n
        position += len(block)
    dropped = 0
    removable = [n for n in range(len(blocks) - 1) if n != keep_block]
    alive = [True] * len(blocks)
    for n in removable:
        current = _flatten(blocks, alive)
        if request_tokens([system, *current], tool_chars) <= target:
            break
        alive[n] = False
        dropped += len(blocks[n])
    kept = _flatten(blocks, alive)
    if dropped:
        note = ChatMessage("user", TRIMMED_NOTE.format(count=dropped))
        first_user = next((n for n, m in enumerate(kept) if m.role == "user"), 0)
        kept.insert(first_user + 1, note)
    return [system, *kept], dropped


def _flatten(blocks: list[list[ChatMessage]], alive: list[bool]) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for block, keep in zip(blocks, alive, strict=True):
        if keep:
            out.extend(block)
    return out
