"""``/v1/channels/whatsapp/webhook``: where Meta delivers what people send the number.

Meta sends no bearer token. ``GET`` is its subscription check: it names the
verify token typed into the app's webhook settings, and the answer is the
challenge it sent, as plain text, only when that token is this channel's.
``POST`` bodies are signed with the app secret (``X-Hub-Signature-256``), and
the WhatsApp adapter checks that signature before anything is stored (the
middleware lets this path through without the token:
:data:`memvault.gateway.middleware.SIGNED_PATHS` and ``VERIFIED_PATHS``). The
answer is 200 only once every message is stored; anything else (the channel not
running, storing too slow) answers 503, so Meta delivers the webhook again, and
the hub's inbox keeps a message delivered twice once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import PlainTextResponse

from memvault.gateway.daemon import Daemon
from memvault.gateway.routes import DaemonDep, running_adapter

if TYPE_CHECKING:
    from memvault.channels.whatsapp import WhatsAppAdapter

router = APIRouter(prefix="/v1/channels/whatsapp", tags=["channels"])

Signature = Annotated[
    str | None,
    Header(alias="X-Hub-Signature-256", description="Meta's signature of the body."),
]
Mode = Annotated[str | None, Query(alias="hub.mode")]
VerifyToken = Annotated[str | None, Query(alias="hub.verify_token")]
Challenge = Annotated[str | None, Query(alias="hub.challenge")]


def _adapter(daemon: Daemon) -> WhatsAppAdapter:
    """The running channel's adapter, or 503 saying why there is none."""
    adapter = running_adapter(daemon, "whatsapp", "WhatsApp")
    from memvault.channels.whatsapp import WhatsAppAdapter  # loaded: the hub made the adapter

    assert isinstance(adapter, WhatsAppAdapter)
    return adapter


# Neither is in the OpenAPI spec: Meta calls them, not the API's clients.
@router.get("/webhook", include_in_schema=False)
async def verify(
    daemon: DaemonDep,
    mode: Mode = None,
    verify_token: VerifyToken = None,
    challenge: Challenge = None,
) -> PlainTextResponse:
    """Meta's subscription check: the challenge, when the verify token is ours."""
    answer = _adapter(daemon).verify_subscription(mode, verify_token, challenge)
    return PlainTextResponse(answer)


@router.post("/webhook", include_in_schema=False)
async def webhook(
    request: Request, daemon: DaemonDep, signature: Signature = None
) -> dict[str, Any]:
    """Store the messages of one WhatsApp webhook; 200 once they are stored."""
    received = await _adapter(daemon).receive_webhook(await request.body(), signature)
    return {"ok": True, "result": {"received": received}}
