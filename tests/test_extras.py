"""A part the default install leaves out (an extra), asked for, is one sentence that names the
extra, never an ImportError; what does not need it goes on working.

The commands run in a child process where the SDKs cannot be imported, as in the default
install (tests/test_wheel.py runs the same in a new environment holding only the default
dependencies: there they are not installed at all).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import EXIT_CONFIG, clean_env
from memvault.errors import MissingExtraError
from memvault.extras import installed, require
from waiting import WAIT

WITHOUT_EXTRAS = (
    "import sys\n"
    "for name in ('openai', 'anthropic'):\n"
    "    sys.modules[name] = None  # as where memvault[llm] is not installed\n"
    "from memvault.cli.app import main\n"
    "sys.exit(main())\n"
)
ANTHROPIC = {
    "MEMVAULT_LLM__PROVIDER": "anthropic",
    "MEMVAULT_LLM__MODEL": "claude-sonnet-4-5",
    "ANTHROPIC_API_KEY": "not-a-key",
}
OPENAI = {"MEMVAULT_LLM__PROVIDER": "openai", "MEMVAULT_LLM__MODEL": "gpt-4o-mini"}


def memvault(
    vault: Path, *args: str, embedder: str = "none", **extra: str
) -> subprocess.CompletedProcess[str]:
    """``memvault ARGS`` in a child that cannot import the SDKs; never a traceback."""
    environ = dict(os.environ)
    for key, value in clean_env(vault, embedder, extra).items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS, *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=2 * WAIT,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("extras") / "vault"
    assert memvault(root, "init", str(root)).returncode == 0
    return root


def one_sentence_naming(stderr: str, extra: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert f"pip install 'memvault[{extra}]'" in lines[0]


@pytest.mark.parametrize(("env", "extra"), [(ANTHROPIC, "anthropic"), (OPENAI, "openai")])
def test_asking_a_model_whose_sdk_is_missing_names_the_extra(
    vault: Path, env: dict[str, str], extra: str
) -> None:
    done = memvault(vault, "ask", "where is the key", **env)
    assert done.returncode == EXIT_CONFIG
    one_sentence_naming(done.stderr, extra)
    assert f"llm.provider = '{extra}' needs the {extra} package" in done.stderr


def test_remember_still_stores_and_doctor_names_the_extra(vault: Path) -> None:
    done = memvault(vault, "remember", "The spare key is under the blue pot", **ANTHROPIC)
    assert done.returncode == 0, done.stderr
    assert "Remembered" in done.stdout
    one_sentence_naming(done.stderr, "anthropic")  # consolidated by rule meanwhile
    assert "blue pot" in "".join(p.read_text() for p in (vault / "Memory").glob("*.md"))
    doctor = memvault(vault, "doctor", "--json", **ANTHROPIC)
    assert "pip install 'memvault[anthropic]'" in doctor.stdout


def test_an_openai_embedder_whose_sdk_is_missing_names_the_extra(vault: Path) -> None:
    memvault(vault, "remember", "Ada's boat is called Halcyon")
    done = memvault(vault, "index", embedder="openai")
    assert done.returncode != 0
    assert "pip install 'memvault[openai]'" in done.stderr
    assert "embedder.provider = 'openai' needs the openai package" in done.stderr
    # Keyword search needs no embedder.
    found = memvault(vault, "search", "Halcyon", "--json")
    assert found.returncode == 0 and "Halcyon" in found.stdout


def test_require_names_the_extra_and_lets_other_failures_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(MissingExtraError, match=r"memvault\[nothing\]") as caught:
        require("memvault_no_such_module", extra="nothing", needed_for="a test")
    assert caught.value.details == {"extra": "nothing"}
    assert not installed("memvault_no_such_module") and installed("numpy")
    # A package that is there but whose own dependency is missing: not an extra's sentence.
    (tmp_path / "memvault_half_there.py").write_text("import memvault_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="memvault_no_such_dependency"):
        require("memvault_half_there", extra="nothing", needed_for="a test")
