"""The tools a narrowed audience's agent gets: recall within their view, and remember
in their own place.

A contact or a group never gets the owner's tools (no vault reads, no task,
no shell, no channel, nothing of tier 2 or 3): their agent is offered only
these two, built for one conversation around its
:class:`~memvault.privacy.views.AudienceView`, so what they can reach is decided
here and not by the model. Both are tier 1: remembering writes only to their
own note, which the owner need not approve.
"""

from __future__ import annotations

from typing import Any

from memvault.privacy.views import AudienceView
from memvault.tools.memory_tools import Recall, Remember
from memvault.tools.policy import READ, Tier
from memvault.tools.registry import Annotations, Tool, ToolContext, ToolRegistry


def audience_registry(view: AudienceView, *, by: str, channel: str | None) -> ToolRegistry:
    """The tools of one narrowed conversation: ``recall`` and ``remember``."""
    who = view.audience.display

    def recall(ctx: ToolContext, args: Recall) -> dict[str, Any]:
        ctx.fresh_index()
        found = view.search(args.topic, args.limit, wait_for_model=ctx.wait_for_model)
        data = {
            "topic": args.topic,
            "found": [
                {
                    "id": item.hit.id,
                    "path": item.hit.path,
                    "text": item.memory.text if item.memory else item.hit.snippet,
                    "score": round(item.hit.score, 3),
                }
                for item in found
                if args.min_score is None or item.hit.score >= args.min_score
            ],
        }
        if not data["found"]:
            data["note"] = f"Nothing shared with {who} is about this."
        return data

    def remember(ctx: ToolContext, args: Remember) -> dict[str, Any]:
        path = view.remember(args.fact, by=by, channel=channel)
        return {"stored": True, "path": path, "note": f"Kept in {who}'s own note."}

    registry = ToolRegistry()
    registry.register(
        Tool(
            name="recall",
            title="Recall",
            description=(
                f"Search what the owner shared with {who} (memories and notes). "
                "Nothing else is reachable in this conversation."
            ),
            input_model=Recall,
            handler=recall,
            tier=Tier.READ,
            category=READ,
            searches=True,
        )
    )
    registry.register(
        Tool(
            name="remember",
            title="Remember",
            description=(
                f"Keep something {who} asked you to remember, in their own note "
                "(not in the owner's memory)."
            ),
            input_model=Remember,
            handler=remember,
            tier=Tier.READ,
            category=READ,
            annotations=Annotations(),
            summarize=lambda a: f"remember for {who}: {a.fact[:60]}",
        )
    )
    return registry
