"""``/v1/health`` and ``/v1/doctor``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from memvault import __version__
from memvault.gateway.errors import ApiError
from memvault.gateway.routes import COMMON_ERRORS, DaemonDep, errors
from memvault.gateway.schemas import Doctor, Envelope, Health
from memvault.vocabulary import counted

router = APIRouter(prefix="/v1", tags=["system"])


@router.get("/health", response_model=Envelope[Health])
async def health(daemon: DaemonDep) -> dict[str, Any]:
    """Whether the daemon answers; needs no token."""
    return {
        "ok": True,
        "result": {
            "status": "ok",
            "version": __version__,
            "uptime_seconds": round(daemon.uptime, 3),
            "role": daemon.role,
            "primary_url": daemon.primary_url,
        },
    }


@router.get("/doctor", response_model=Envelope[Doctor], responses=errors(*COMMON_ERRORS))
def doctor(daemon: DaemonDep) -> dict[str, Any]:
    """Every health check: vault, index, embedder, pending vectors, disk, token, server.

    Answers 503 ``unhealthy`` (with the checks in ``details``) when any check errors.
    """
    report = daemon.doctor()
    data = report.to_dict()
    if report.failed:
        failed = [c.name for c in report.checks if c.status == "error"]
        raise ApiError(
            503,
            "unhealthy",
            f"{counted(len(failed), 'check')} failed: {', '.join(failed)}.",
            retriable=True,
            failed_step=failed[0],
            details=data,
        )
    return {"ok": True, "result": data}
