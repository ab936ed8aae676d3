"""A daemon whose model is still loading answers searches from keywords, and says so."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from cli_support import invoke, ok_json
from gateway_support import StartDaemon, ok
from memvault.config import Settings
from memvault.index.index import MODEL_LOADING
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from model_gate import GatedModel
from support import TZ, HashEmbedder, MovableClock
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound

DEAD_EMBEDDINGS = "http://127.0.0.1:9/v1"  # nothing listens on the discard port


@pytest.fixture
def embedded(tmp_path: Path) -> tuple[Path, str]:
    """A vault whose index holds vectors from the stand-in model, and a memory's id."""
    root = tmp_path / "vault"
    init_vault(Vault(root))
    clock = MovableClock(datetime(2026, 11, 22, 9, 0, tzinfo=TZ))
    runtime = Runtime.open(
        Settings(vault=root, timezone="Europe/Berlin"), clock=clock, embedder=HashEmbedder()
    )
    memory = runtime.memories.remember("The owner's boat is called Halcyon").memory
    runtime.memories.remember("The car is parked on level 3")
    runtime.index.sync()
    assert runtime.index.embed_pending() > 0
    runtime.close()
    return root, memory.id


@pytest.fixture
def gate(start_daemon: StartDaemon) -> Iterator[threading.Event]:
    """The model's gate; opened at the end, before the daemons stop, so none waits on it."""
    opened = threading.Event()
    yield opened
    opened.set()


def test_searches_answer_from_keywords_while_the_model_loads(
    start_daemon: StartDaemon, gate: threading.Event, embedded: tuple[Path, str]
) -> None:
    root, memory_id = embedded
    model = GatedModel(gate)
    live = start_daemon(root, embedder=model)
    with live.client() as api:
        hits = ok(api.get("/v1/search", params={"q": "Halcyon boat"}), notice=MODEL_LOADING)
        assert hits[0]["id"] == memory_id
        assert all(h["vector_score"] == 0 for h in hits)
        recalled = ok(api.get("/v1/memories/search", params={"q": "Halcyon"}), notice=MODEL_LOADING)
        assert [h["id"] for h in recalled] == [memory_id]
        ok(api.get("/v1/search", params={"q": "Halcyon", "keyword": True}))  # as asked: no notice

        context = ok(api.get("/v1/context", params={"query": "Halcyon"}), notice=MODEL_LOADING)
        assert context["notice"] == MODEL_LOADING and "Halcyon" in context["markdown"]
        ok(api.get("/v1/context"))  # nothing searched for: nothing to say

        call = ok(
            api.post("/v1/tools/memory_search", json={"query": "Halcyon"}), notice=MODEL_LOADING
        )
        found = call["result"]
        assert found["mode"] == "keyword" and found["notice"] == MODEL_LOADING
        assert found["results"][0]["id"] == memory_id
        for name, arguments in (
            ("vault_search", {"query": "Halcyon"}),
            ("recall", {"topic": "boat"}),
        ):
            data = ok(api.post(f"/v1/tools/{name}", json=arguments), notice=MODEL_LOADING)
            assert data["result"]["notice"] == MODEL_LOADING, name
        text = ok(
            api.post("/v1/tools/get_context", json={"query": "Halcyon"}), notice=MODEL_LOADING
        )
        assert text["result"].rstrip().endswith(f"_{MODEL_LOADING}_")
        ok(api.post("/v1/tools/vault_list", json={}))  # no search: no notice

        # The CLI in client mode says what the daemon said, on stderr.
        result = invoke(root, "search", "Halcyon", "--json")
        assert result.exit_code == 0 and result.stderr.strip() == MODEL_LOADING
        assert [h["id"] for h in ok_json(root, "recall", "Halcyon")] == [memory_id]
        assert not model.loaded, "a search waited for the model"

        gate.set()
        wait_for(lambda: model.loaded, "the model to finish loading")
        hits = ok(api.get("/v1/search", params={"q": "Halcyon boat"}))
        assert hits[0]["id"] == memory_id and hits[0]["vector_score"] > 0
        found = ok(api.post("/v1/tools/memory_search", json={"query": "Halcyon"}))["result"]
        assert "notice" not in found and "mode" not in found
        assert invoke(root, "search", "Halcyon").stderr == ""


def test_a_notice_reads_the_same_with_or_without_the_daemon(
    start_daemon: StartDaemon, embedded: tuple[Path, str]
) -> None:
    root, memory_id = embedded
    # The configured embedder is not the one that made the vectors: keywords only, explained.
    switched = {"base_url": DEAD_EMBEDDINGS, "max_retries": 0}
    env = {f"MEMVAULT_EMBEDDER__{key.upper()}": str(value) for key, value in switched.items()}
    here = invoke(root, "search", "Halcyon", "--json", embedder="openai", env=env)
    assert here.exit_code == 0 and "memvault index --reembed" in here.stderr

    start_daemon(root, settings={"embedder": {"provider": "openai", **switched}}, embedder=None)
    there = invoke(root, "search", "Halcyon", "--json", embedder="openai", env=env)

    assert there.exit_code == 0 and there.stderr == here.stderr
    assert [h["id"] for h in ok_json(root, "search", "Halcyon")] == [memory_id]


def test_the_spec_promises_a_notice_where_searches_answer(api: httpx.Client) -> None:
    spec = api.get("/openapi.json").json()

    def envelope(path: str, method: str) -> dict[str, Any]:
        answer = spec["paths"][path][method]["responses"]["200"]["content"]["application/json"]
        name = answer["schema"]["$ref"].rsplit("/", 1)[-1]
        return dict(spec["components"]["schemas"][name]["properties"])

    for path, method in (
        ("/v1/search", "get"),
        ("/v1/memories/search", "get"),
        ("/v1/context", "get"),
        ("/v1/tools/{name}", "post"),
    ):
        notice = envelope(path, method)["notice"]
        assert {"type": "null"} in notice["anyOf"] and notice["description"], path
    # Remembering searches nothing; its notice says a secret was kept out (privacy).
    assert "secret" in envelope("/v1/memories", "post")["notice"]["description"].lower()
