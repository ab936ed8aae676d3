"""``memvault embedder status`` and ``memvault embedder prepare``."""

from __future__ import annotations

from pathlib import Path

from cli_support import ok, ok_json
from memvault.index.local_model import ModelFile
from memvault.locations import MODEL_CACHE_ENV


def test_status_of_a_cache_without_the_file_names_the_command(tmp_path: Path) -> None:
    env = {MODEL_CACHE_ENV: str(tmp_path / "cache")}
    facts = ok_json(None, "embedder", "status", "--json", embedder="local", env=env)
    assert facts["runtime"] == "onnx" and facts["ready"] is False and facts["size_bytes"] == 0
    assert facts["path"].startswith(str(tmp_path / "cache"))
    text = ok(None, "embedder", "status", embedder="local", env=env).stdout
    assert "not prepared yet; run `memvault embedder prepare`" in text


def test_prepare_when_the_file_is_there_only_checks_it(prepared_model: ModelFile) -> None:
    env = {MODEL_CACHE_ENV: str(prepared_model.cache)}
    done = ok_json(None, "embedder", "prepare", "--json", env=env)
    assert done["exported"] is False and done["path"] == str(prepared_model.path)
    assert done["size_bytes"] == prepared_model.path.stat().st_size
    assert "Already prepared" in ok(None, "embedder", "prepare", env=env).stdout
    assert ok_json(None, "embedder", "status", "--json", env=env)["ready"] is True
