"""POST /api/telemetry: location samples deduplicated by id, a journal line per 200 m or 30 min."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import httpx2 as httpx
import pytest

from cli_support import snapshot
from gateway_support import Live, failed, ok
from memvault.gateway.telemetry import distance_m
from support import TZ
from waiting import WAIT

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound

START = datetime(2026, 11, 22, 8, 0, tzinfo=TZ)
# Berlin, Alexanderplatz; 0.001 degrees of latitude is about 111 m.
LAT, LON = 52.52190, 13.41320


def sample(n: str, minutes: float, dlat: float = 0.0, accuracy: float = 12.4) -> dict[str, Any]:
    return {
        "id": n,
        "lat": round(LAT + dlat, 6),
        "lon": LON,
        "accuracy": accuracy,
        "timestamp": (START + timedelta(minutes=minutes)).isoformat(),
    }


def send(api: httpx.Client, *samples: dict[str, Any]) -> dict[str, Any]:
    response = api.post("/api/telemetry", json={"samples": list(samples)})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"received", "duplicates", "journaled", "nextMinIntervalSec"}
    return dict(body)


def diary(live: Live) -> list[str]:
    text = (live.vault / "Journal/2026-11-22.md").read_text()
    section = text.split("## Locations", 1)[1] if "## Locations" in text else ""
    return re.findall(r"^- (.+)$", section, flags=re.M)


def test_distance_is_haversine() -> None:
    assert distance_m(LAT, LON, LAT, LON) == 0
    assert 110 < distance_m(LAT, LON, LAT + 0.001, LON) < 112
    # Berlin to Paris is about 878 km.
    assert 870_000 < distance_m(52.5200, 13.4050, 48.8566, 2.3522) < 885_000


def test_first_sample_is_journaled_in_the_diary_format(live: Live, api: httpx.Client) -> None:
    answer = send(api, sample("a", 0))
    assert answer == {"received": 1, "duplicates": 0, "journaled": 1, "nextMinIntervalSec": 60}
    assert diary(live) == ["08:00 - 52.52190, 13.41320 (accuracy 12m)"]


def test_throttle_200_metres_or_30_minutes(live: Live, api: httpx.Client) -> None:
    answer = send(
        api,
        sample("s1", 0),
        sample("s2", 5, dlat=0.0010),  # 111 m, 5 min: skipped
        sample("s3", 10, dlat=0.0025),  # 278 m from s1: journaled
        sample("s4", 20, dlat=0.0026),  # 11 m, 10 min: skipped
        sample("s5", 41, dlat=0.0026),  # 31 min after s3: journaled
        sample("s6", 42, dlat=0.0027),  # skipped
    )
    assert answer["received"] == 6 and answer["journaled"] == 3
    assert [line[:5] for line in diary(live)] == ["08:00", "08:10", "08:41"]


def test_samples_are_deduplicated_by_id(live: Live, api: httpx.Client) -> None:
    send(api, sample("x1", 0), sample("x2", 45, dlat=0.01))
    again = send(api, sample("x1", 0), sample("x2", 45, dlat=0.01), sample("x2", 45, dlat=0.01))
    assert again["received"] == 0 and again["duplicates"] == 3 and again["journaled"] == 0
    assert len(diary(live)) == 2
    # Out of order batches are sorted by time; the throttle sees them in order.
    late = send(api, sample("x4", 100, dlat=0.02), sample("x3", 60, dlat=0.0101))
    assert late["received"] == 2
    assert [line[:5] for line in diary(live)] == ["08:00", "08:45", "09:40"]


def test_accuracy_is_optional_and_epoch_timestamps_work(live: Live, api: httpx.Client) -> None:
    body = sample("e1", 0)
    del body["accuracy"]
    body["timestamp"] = int(START.timestamp())
    send(api, body)
    assert diary(live) == ["08:00 - 52.52190, 13.41320"]


def test_telemetry_announces_an_event(live: Live, api: httpx.Client) -> None:
    send(api, sample("ev", 0))
    events = ok(api.get("/v1/poll"))["events"]
    received = [e for e in events if e["type"] == "location_received"]
    assert received[0]["payload"] == {"received": 1, "duplicates": 0, "journaled": 1}


def test_bad_samples_are_refused_whole(live: Live, api: httpx.Client) -> None:
    before = snapshot(live.vault)
    for samples in (
        [sample("b1", 0) | {"lat": 91}],
        [sample("b2", 0) | {"lon": -181}],
        [sample("b3", 0) | {"accuracy": -1}],
        [sample("b4", 0) | {"timestamp": "yesterday-ish"}],
        [sample("", 0)],
        [sample("b5", 0), {"id": "b6"}],
    ):
        response = api.post("/api/telemetry", json={"samples": samples})
        failed(response, 400, "validation_failed")
    failed(api.post("/api/telemetry", json={}), 400, "validation_failed")
    failed(api.post("/api/telemetry", json={"samples": "many"}), 400, "validation_failed")
    assert snapshot(live.vault) == before
    # Nothing of a refused batch was stored: the same ids are new afterwards.
    assert send(api, sample("b5", 0))["received"] == 1


def test_telemetry_needs_the_token(live: Live) -> None:
    with live.client(token=None) as anonymous:
        failed(
            anonymous.post("/api/telemetry", json={"samples": [sample("t", 0)]}),
            401,
            "unauthorized",
        )
