"""The daemon: its address, replicas, the CLI's autostart, telemetry, the console."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import (
    Field,
    field_validator,
)

from memvault.config.base import Section


class ServerSettings(Section):
    """The daemon (``memvault serve``): where it listens and what it accepts."""

    host: str = Field("127.0.0.1", description="address to bind; anything but loopback needs care")
    allow_remote: bool = Field(
        False,
        description="let host be an address other machines reach (0.0.0.0, a LAN address); "
        "put TLS in front and give each agent a named token",
    )
    port: int = Field(8765, ge=1, le=65535, description="TCP port of the HTTP API")
    max_body_mb: float = Field(6.0, gt=0, le=100, description="largest request body accepted")
    sse_heartbeat_seconds: float = Field(
        15.0, gt=0, le=3600, description="idle time before an event stream gets a heartbeat"
    )
    event_buffer: int = Field(1000, ge=10, le=100_000, description="events kept for replay")
    log_format: Literal["json", "text"] = Field("json", description="daemon log lines")
    shutdown_grace_seconds: float = Field(
        10.0, gt=0, le=600, description="time in-flight requests get to finish on shutdown"
    )


class ReplicaSettings(Section):
    """``memvault serve --replica``: a daemon that answers searches from the shared
    PostgreSQL database and forwards everything else to the primary."""

    primary_url: str | None = Field(
        None,
        description="the primary daemon's base URL (http://host:8765, or https:// behind a "
        "TLS proxy) that writes and vault reads are forwarded to",
    )
    connect_timeout: float = Field(
        5.0, gt=0, le=120, description="seconds to wait for the primary to accept a connection"
    )
    timeout: float = Field(
        300.0,
        gt=0,
        le=3600,
        description="seconds a forwarded request may wait for the primary's next bytes "
        "(an agent run may take long)",
    )

    @field_validator("primary_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        return value


class CliSettings(Section):
    """The ``memvault`` command line."""

    autostart: bool = Field(
        True,
        description="search, recall and context start a daemon in the background when none "
        "serves the vault, so the local model loads once instead of in every command",
    )


class TelemetrySettings(Section):
    """Location samples (``POST /api/telemetry``) written to the journal."""

    min_distance_m: float = Field(200.0, ge=0, description="movement that earns a journal line")
    min_interval_minutes: float = Field(
        30.0, gt=0, description="time that earns a journal line without movement"
    )
    next_interval_seconds: int = Field(
        60, ge=1, le=86_400, description="how often the phone is asked to send samples"
    )
    journal_section: str = Field("Locations", description="journal section of location lines")


class ConsoleSettings(Section):
    """The web console the daemon serves at ``/`` (``memvault ui`` opens it)."""

    enabled: bool = Field(True, description="serve the console at / beside the API")
    link_minutes: float = Field(
        5.0, gt=0, le=60, description="how long a `memvault ui` link may be used (once)"
    )
    session_hours: float = Field(
        12.0, gt=0, le=24 * 30, description="how long a console sign-in lasts"
    )
