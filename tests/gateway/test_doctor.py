"""``doctor`` without a daemon: what it finds on a healthy, a damaged and a missing vault."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import invoke
from memvault.config import Settings
from memvault.gateway.doctor import diagnose
from memvault.index.local_model import ModelFile
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import HashEmbedder, MovableClock


def checks(report: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {c["name"]: c for c in report["checks"]}


def test_healthy_vault(runtime: Runtime) -> None:
    runtime.memories.remember("Doctor visits are on Tuesdays")
    report = diagnose(runtime).to_dict()
    found = checks(report)
    assert report["summary"]["errors"] == 0 and not diagnose(runtime).failed
    assert found["index_healthy"]["status"] == "ok"
    assert found["pending_embeddings"]["details"]["pending"] >= 1
    assert "memvault index" in found["pending_embeddings"]["message"]
    assert found["embedder"]["details"]["provider"] == "test"
    assert "local_model" not in found, "only the bundled model has an ONNX file to check"


def test_a_damaged_index_is_an_error_with_the_fix(tmp_path: Path, clock: MovableClock) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    runtime = Runtime.open(Settings(vault=root), clock=clock, embedder=HashEmbedder())
    runtime.index.sync()
    runtime.close()
    index = root / ".memvault/index.db"
    data = bytearray(index.read_bytes())
    data[4096 : 4096 * 3] = b"\xff" * (4096 * 2)  # scribble over pages 2 and 3
    index.write_bytes(bytes(data))
    damaged = Runtime.open(Settings(vault=root), clock=clock, embedder=HashEmbedder())
    try:
        report = diagnose(damaged)
        found = checks(report.to_dict())
        assert report.failed and found["index_healthy"]["status"] == "error"
        assert "memvault index --rebuild" in found["index_healthy"]["message"]
    finally:
        damaged.close()


def test_missing_vault_through_the_cli(tmp_path: Path) -> None:
    result = invoke(tmp_path / "nowhere", "doctor", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    found = checks(report)
    assert report["checked_by"] == "local" and found["vault_writable"]["status"] == "error"
    assert "does not exist" in found["vault_writable"]["message"]
    assert "index_healthy" not in found, "nothing else is checked on a missing vault"
    text = invoke(tmp_path / "nowhere", "doctor")
    assert text.exit_code == 1 and "Checked locally (no daemon)" in text.stdout


def local_model_check(root: Path, clock: MovableClock, **embedder: object) -> dict:  # type: ignore[type-arg]
    """The ``local_model`` verdict on a fresh vault whose embedder is the bundled model."""
    init_vault(Vault(root))
    runtime = Runtime.open(Settings(vault=root, embedder=embedder), clock=clock)
    try:
        return checks(diagnose(runtime).to_dict())["local_model"]
    finally:
        runtime.close()


def test_the_local_model_without_its_onnx_file_is_a_warning_naming_the_fix(
    tmp_path: Path, clock: MovableClock
) -> None:
    cache = tmp_path / "model-cache"
    found = local_model_check(tmp_path / "vault", clock, model_cache=cache)
    assert found["status"] == "warning"
    assert "memvault embedder prepare" in found["message"]
    assert found["details"]["runtime"] == "onnx" and found["details"]["ready"] is False
    assert not cache.exists(), "the doctor reports; it does not export"


def test_the_local_model_with_its_onnx_file_is_ready(
    tmp_path: Path, clock: MovableClock, prepared_model: ModelFile
) -> None:
    found = local_model_check(tmp_path / "vault", clock, model_cache=prepared_model.cache)
    assert found["status"] == "ok" and "ONNX Runtime" in found["message"]
    assert found["details"]["path"] == str(prepared_model.path)
    on_torch = local_model_check(tmp_path / "other", clock, runtime="torch")
    assert on_torch["status"] == "ok" and on_torch["details"] == {"runtime": "torch"}
