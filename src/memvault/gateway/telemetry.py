"""Location samples from the owner's phone, kept as a diary in the journal.

Samples arrive in batches (``POST /api/telemetry``), possibly more than
once: each is stored once by its id. Not every sample is worth a line: one
is written to the day's journal only after the owner moved far enough
(200 m) or enough time passed (30 minutes) since the last line, as
``HH:MM - lat, lon (accuracy Xm)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from memvault.clock import Clock
from memvault.config import TelemetrySettings
from memvault.memory.state import StateStore
from memvault.vault.journal import Journal

EARTH_RADIUS_M = 6_371_008.8
_QUERY_CHUNK = 500


@dataclass(frozen=True)
class LocationSample:
    """One position fix."""

    id: str
    lat: float
    lon: float
    accuracy: float | None
    observed_at: datetime


@dataclass(frozen=True)
class Received:
    """What became of a batch."""

    received: int
    duplicates: int
    journaled: int


def distance_m(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in metres (haversine)."""
    phi1, phi2 = math.radians(lat1), math.radians(lat2)
    dphi = phi2 - phi1
    dlambda = math.radians(lon2 - lon1)
    a = math.sin(dphi / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(dlambda / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(min(1.0, math.sqrt(a)))


def diary_line(sample: LocationSample, when: datetime) -> str:
    """``HH:MM - lat, lon (accuracy Xm)`` in the owner's time."""
    line = f"{when:%H:%M} - {sample.lat:.5f}, {sample.lon:.5f}"
    if sample.accuracy is not None:
        line += f" (accuracy {sample.accuracy:.0f}m)"
    return line


class LocationDiary:
    """Stores samples (deduplicated by id) and writes the ones that matter to the journal."""

    def __init__(
        self, state: StateStore, journal: Journal, clock: Clock, settings: TelemetrySettings
    ) -> None:
        self.state = state
        self.journal = journal
        self.clock = clock
        self.settings = settings

    def receive(self, samples: Sequence[LocationSample]) -> Received:
        """Store the new samples of a batch and journal those past the throttle."""
        unique: dict[str, LocationSample] = {}
        for sample in samples:
            unique.setdefault(sample.id, sample)
        interval = timedelta(minutes=self.settings.min_interval_minutes)
        with self.state.transaction() as conn:
            known: set[str] = set()
            ids = list(unique)
            for start in range(0, len(ids), _QUERY_CHUNK):
                chunk = ids[start : start + _QUERY_CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT id FROM location_samples WHERE id IN ({marks})", chunk
                ).fetchall()
                known.update(str(row[0]) for row in rows)
            fresh = sorted(
                (s for s in unique.values() if s.id not in known), key=lambda s: s.observed_at
            )
            row = conn.execute(
                "SELECT lat, lon, observed_at FROM location_samples WHERE journaled = 1 "
                "ORDER BY observed_at DESC LIMIT 1"
            ).fetchone()
            last = (float(row[0]), float(row[1]), datetime.fromisoformat(row[2])) if row else None
            now = self.clock.now().isoformat()
            journaled = 0
            for sample in fresh:
                moment = self.clock.localize(sample.observed_at)
                worth = (
                    last is None
                    or distance_m(last[0], last[1], sample.lat, sample.lon)
                    >= self.settings.min_distance_m
                    or moment - last[2] >= interval
                )
                conn.execute(
                    "INSERT INTO location_samples (id, lat, lon, accuracy, observed_at, "
                    "received_at, journaled) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        sample.id,
                        sample.lat,
                        sample.lon,
                        sample.accuracy,
                        moment.isoformat(),
                        now,
                        int(worth),
                    ),
                )
                if worth:
                    # Inside the transaction: a failed journal write stores nothing, so a
                    # retry of the batch is not mistaken for a repeat.
                    self.journal.append(
                        self.settings.journal_section,
                        diary_line(sample, moment),
                        when=moment,
                        timestamp=False,
                    )
                    journaled += 1
                    last = (sample.lat, sample.lon, moment)
        return Received(
            received=len(fresh), duplicates=len(samples) - len(fresh), journaled=journaled
        )
