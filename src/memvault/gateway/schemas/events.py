"""The event stream and telemetry."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from memvault.gateway.schemas.base import Body, Moment, Result


class EventOut(Result):
    id: int
    type: str
    source: str
    payload: dict[str, Any]
    observed_at: str


class Poll(Result):
    events: list[EventOut]
    next_cursor: int = Field(description="Pass as ?since= to get what follows.")
    gap: bool = Field(description="True when events after the cursor fell out of the buffer.")


class Sample(Body):
    id: str = Field(min_length=1, max_length=200, description="Unique id of the sample (UUID).")
    lat: float = Field(ge=-90, le=90)
    lon: float = Field(ge=-180, le=180)
    accuracy: float | None = Field(None, ge=0, le=1_000_000, description="Metres.")
    timestamp: Moment = Field(
        description="When it was taken: ISO 8601, or Unix time in seconds (or milliseconds)."
    )


class TelemetryBody(Body):
    samples: list[Sample] = Field(max_length=5000)


class TelemetryAnswer(BaseModel):
    """The answer the phone app expects (no envelope, as the earlier design has it)."""

    received: int = Field(description="New samples stored (repeats are not counted).")
    duplicates: int
    journaled: int = Field(description="Samples that earned a line in the journal.")
    nextMinIntervalSec: int  # noqa: N815 - the phone app's field name
