"""Health and doctor: whether the daemon and the vault are well."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from memvault.gateway.schemas.base import Result


class Health(Result):
    status: Literal["ok"] = "ok"
    version: str
    uptime_seconds: float
    role: Literal["primary", "replica"] = Field(
        "primary",
        description="primary: owns and writes the vault; replica: answers "
        "searches from PostgreSQL and forwards the rest to primary_url",
    )
    primary_url: str | None = Field(None, description="where a replica forwards to")


class Check(Result):
    name: str
    status: Literal["ok", "warning", "error"]
    message: str
    details: Any = None


class CheckSummary(Result):
    total: int
    passed: int
    warnings: int
    errors: int


class Doctor(Result):
    version: str
    checks: list[Check]
    summary: CheckSummary
    timestamp: datetime
