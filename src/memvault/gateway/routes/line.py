"""``POST /v1/channels/line/webhook``: where LINE delivers what people send the bot.

LINE sends no bearer token: it signs the body with the channel secret
(``X-Line-Signature``), and the LINE adapter checks that signature before
anything is stored (the middleware lets this one path through without the
token; :data:`memvault.gateway.middleware.SIGNED_PATHS`). The answer is 200
only once every message is stored; anything else (the channel not running,
storing too slow) answers 503, so LINE delivers the webhook again, and the
hub's inbox keeps a message delivered twice once.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Request

from memvault.gateway.routes import DaemonDep, running_adapter

router = APIRouter(prefix="/v1/channels/line", tags=["channels"])

Signature = Annotated[
    str | None, Header(alias="X-Line-Signature", description="LINE's signature of the body.")
]


# Not in the OpenAPI spec: LINE calls it, not the API's clients.
@router.post("/webhook", include_in_schema=False)
async def webhook(
    request: Request, daemon: DaemonDep, signature: Signature = None
) -> dict[str, Any]:
    """Store the messages of one LINE webhook; 200 once they are stored."""
    adapter = running_adapter(daemon, "line", "LINE")
    from memvault.channels.line import LineAdapter  # loaded already: the hub made the adapter

    assert isinstance(adapter, LineAdapter)
    received = await adapter.receive_webhook(await request.body(), signature)
    return {"ok": True, "result": {"received": received}}
