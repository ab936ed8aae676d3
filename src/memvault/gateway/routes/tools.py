"""The tool registry over HTTP: ``GET /v1/tools``, ``POST /v1/tools/{name}``.

Calls go through the same tier policy as every other surface. Tier 1 runs;
tier 2 needs ``tools.mode = "autonomous"`` or the owner's approval token in
``X-Memvault-Approval``; tier 3 always needs the approval token. A named
token lists and calls only the tools its scope covers
(:func:`memvault.gateway.access.tool_scope`): 403 ``insufficient_scope``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Path, Request

from memvault.gateway.access import UNKNOWN_CALLER, insufficient, principal_of, tool_scope
from memvault.gateway.errors import ApiError
from memvault.gateway.routes import COMMON_ERRORS, DaemonDep, errors
from memvault.gateway.schemas import Envelope, NoticedEnvelope, ToolCall, ToolInfo
from memvault.gateway.security import matches
from memvault.gateway.tokens import Principal
from memvault.tools.policy import AllowAll, DenyAll, Policy
from memvault.tools.registry import ToolContext

router = APIRouter(prefix="/v1", tags=["tools"])

# A failed call's code -> HTTP status.
_STATUS = {
    "validation_failed": 400,
    "unsafe_path": 400,
    "not_approved": 403,
    "tool_disabled": 403,
    "not_found": 404,
    "conflict": 409,
    "embedder_changed": 409,
    "vault_unavailable": 503,
    "embedding_failed": 503,
}


def _caller(request: Request) -> Principal:
    principal = principal_of(request)
    if principal is None:  # the middleware always says; closed if it ever did not
        raise ApiError(401, "unauthorized", UNKNOWN_CALLER)
    return principal


@router.get("/tools", response_model=Envelope[list[ToolInfo]], responses=errors(*COMMON_ERRORS))
def list_tools(daemon: DaemonDep, request: Request) -> dict[str, Any]:
    """Every tool the vault offers (that the token's scope lets it call): name, description,
    tier, input schema and annotations."""
    caller = _caller(request)
    return {
        "ok": True,
        "result": [
            {
                "name": tool.name,
                "title": tool.title,
                "description": tool.description,
                "tier": int(tool.tier),
                "category": tool.category,
                "input_schema": tool.input_schema(),
                "annotations": {
                    "read_only": tool.annotations.read_only,
                    "destructive": tool.annotations.destructive,
                    "idempotent": tool.annotations.idempotent,
                    "open_world": tool.annotations.open_world,
                },
            }
            for tool in daemon.registry.offered(daemon.runtime.settings)
            if caller.allows(tool_scope(tool))
        ],
    }


@router.post(
    "/tools/{name}",
    response_model=NoticedEnvelope[ToolCall],
    responses=errors(*COMMON_ERRORS, 404, 409),
)
def call_tool(
    daemon: DaemonDep,
    request: Request,
    name: Annotated[str, Path(min_length=1, max_length=100, description="The tool's name.")],
    arguments: Annotated[
        dict[str, Any] | None, Body(description="The tool's arguments (its input schema).")
    ] = None,
    approval: Annotated[
        str | None,
        Header(
            alias="X-Memvault-Approval",
            description="The owner's approval token (<vault>/.memvault/approval-token).",
        ),
    ] = None,
    session: Annotated[
        str | None,
        Header(alias="X-Memvault-Session", max_length=200, description="Who is calling."),
    ] = None,
) -> dict[str, Any]:
    """Run one tool through the tier policy.

    Searches do not wait for an embedding model still loading: they answer
    from keywords, with a notice (in the tool's result, and here).
    """
    if name in daemon.registry.names():
        refused = insufficient(_caller(request), tool_scope(daemon.registry.get(name)))
        if refused is not None:
            raise refused
    approved = matches(approval, daemon.approval_token)
    policy = Policy(
        approver=AllowAll() if approved else DenyAll(), mode=daemon.runtime.settings.tools.mode
    )
    context = ToolContext(
        runtime=daemon.runtime,
        policy=policy,
        surface="http",
        session=session,
        index_followed=daemon.watching.is_set(),
        wait_for_model=False,
    )
    result = daemon.registry.call(name, arguments or {}, context)
    if result.ok:
        return {
            "ok": True,
            "result": {"tool": name, "result": result.data},
            "notice": result.notice,
        }
    code = result.code or "error"
    if code == "not_approved":
        raise ApiError(
            403,
            "approval_required",
            f"{result.error} Send the owner's approval token as X-Memvault-Approval.",
        )
    status = _STATUS.get(code) or result.status or 500
    raise ApiError(status, code, result.error or f"{name} failed.")
