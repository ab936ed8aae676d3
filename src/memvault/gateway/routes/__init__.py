"""The HTTP API's routes, one module per area."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from memvault.gateway.daemon import Daemon
from memvault.gateway.schemas import ErrorEnvelope


def daemon_of(request: Request) -> Daemon:
    """The daemon serving this request."""
    daemon: Daemon = request.app.state.daemon
    return daemon


DaemonDep = Annotated[Daemon, Depends(daemon_of)]


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error envelopes a route can answer with."""
    described = {
        400: "Invalid input (validation_failed, invalid_json, unsafe_path)",
        401: "Missing or wrong token (unauthorized)",
        403: "Refused (browser_origin_rejected, approval_required)",
        404: "Not found (not_found)",
        409: "Conflict (conflict, embedder_changed)",
        413: "Request body too large (payload_too_large)",
        503: "Temporarily unavailable (vault_unavailable, embedding_failed, unhealthy)",
    }
    return {
        status: {"model": ErrorEnvelope, "description": described[status]} for status in statuses
    }


# Every authenticated route can answer these.
COMMON_ERRORS = (400, 401, 403, 413, 503)
