"""``POST /api/telemetry``: location samples from the owner's phone."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from memvault.gateway.routes import COMMON_ERRORS, DaemonDep, errors
from memvault.gateway.schemas import TelemetryAnswer, TelemetryBody, moment
from memvault.gateway.telemetry import LocationSample

router = APIRouter(tags=["telemetry"])


@router.post("/api/telemetry", response_model=TelemetryAnswer, responses=errors(*COMMON_ERRORS))
def telemetry(body: TelemetryBody, daemon: DaemonDep) -> dict[str, Any]:
    """Store samples (each id once); the ones past the throttle go to the journal.

    Answers without an envelope, ``{received, nextMinIntervalSec, ...}``, as
    the phone app expects.
    """
    received = daemon.receive_locations(
        [LocationSample(s.id, s.lat, s.lon, s.accuracy, moment(s.timestamp)) for s in body.samples]
    )
    return {
        "received": received.received,
        "duplicates": received.duplicates,
        "journaled": received.journaled,
        "nextMinIntervalSec": daemon.runtime.settings.telemetry.next_interval_seconds,
    }
