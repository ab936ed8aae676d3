"""The HTTP API's routes, one module per area."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Path, Request

from memvault.gateway.daemon import Daemon
from memvault.gateway.errors import ApiError
from memvault.gateway.middleware import SIGNED_PATHS
from memvault.gateway.schemas import ErrorEnvelope
from memvault.text import check_fields, check_text, check_values

if TYPE_CHECKING:
    from memvault.channels.base import Adapter


def daemon_of(request: Request) -> Daemon:
    """The daemon serving this request."""
    daemon: Daemon = request.app.state.daemon
    return daemon


DaemonDep = Annotated[Daemon, Depends(daemon_of)]


def running_adapter(daemon: Daemon, channel: str, title: str) -> Adapter:
    """The channel's running adapter, for a platform's webhook; when there is none, 503
    ``channel_unavailable`` saying why, so the platform delivers the webhook again."""
    adapter = daemon.hub.adapters.get(channel)
    if adapter is None:
        status = daemon.hub.statuses.get(channel)
        reason = (
            status.error
            if status is not None and status.error
            else f"set channels.{channel}.enabled = true and restart the daemon"
        )
        raise ApiError(
            503,
            "channel_unavailable",
            f"The {title} channel is not running: {reason.rstrip('.')}.",
            retriable=True,
        )
    return adapter


# The largest id a row can have (SQLite's INTEGER, PostgreSQL's bigint): a larger number in
# a path or a query is refused in one sentence, never passed on to overflow in the driver.
MAX_ROW_ID = 2**63 - 1


def row_id(description: str) -> Any:
    """The path parameter of a row's id, 1 to :data:`MAX_ROW_ID`:
    ``Annotated[int, row_id("The run's id.")]``."""
    return Path(ge=1, le=MAX_ROW_ID, description=description)


async def plain_text(request: Request) -> None:
    """Refuse text memvault cannot keep (:mod:`memvault.text`) before any route runs:
    in the path, the query and a JSON body, naming the field (400 validation_failed)."""
    for name, value in request.path_params.items():
        if isinstance(value, str):
            check_text(value, name)
    for name, value in request.query_params.multi_items():
        check_text(name, "A parameter name")
        check_text(value, name)
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    if request.url.path in SIGNED_PATHS:
        return  # a platform's words are kept, not refused: the hub scrubs what it stores
    body = await request.body()
    # JSON carries a surrogate or a control character only as a \u escape.
    if b"\\u" not in body:
        return
    try:
        data = json.loads(body)
    except ValueError:
        return  # not JSON: the route answers invalid_json itself
    if isinstance(data, dict):
        check_fields(data)
    else:
        check_values(data, "The request body")


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error envelopes a route can answer with."""
    described = {
        400: "Invalid input (validation_failed, invalid_json, unsafe_path)",
        401: "Missing or wrong token (unauthorized)",
        403: "Refused (browser_origin_rejected, insufficient_scope, approval_required)",
        404: "Not found (not_found)",
        409: "Conflict (conflict, embedder_changed)",
        413: "Request body too large (payload_too_large)",
        422: "Nothing stored: the text holds a secret and [privacy] secrets is refuse "
        "(secret_refused)",
        503: "Temporarily unavailable (vault_unavailable, embedding_failed, unhealthy)",
    }
    return {
        status: {"model": ErrorEnvelope, "description": described[status]} for status in statuses
    }


# Every authenticated route can answer these.
COMMON_ERRORS = (400, 401, 403, 413, 503)
