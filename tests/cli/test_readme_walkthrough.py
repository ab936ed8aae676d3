"""A newcomer following the README (issue 11, "What a newcomer met", second pass).

Each test is a rough edge met on the way, run as its own ``memvault`` process:
a setting that is wrong says where it was set, and a name that fits several
tasks tells them apart.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import EXIT_CONFIG, EXIT_INVALID, clean_env
from waiting import WAIT

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound

MEMVAULT = [sys.executable, "-m", "memvault"]


def run(vault: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """``memvault --vault VAULT ARGS`` as its own process, with a clean MEMVAULT_* set."""
    env = dict(os.environ)
    for key, value in clean_env(None, "none", extra).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run(
        [*MEMVAULT, "--vault", str(vault), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )


def one_sentence(ran: subprocess.CompletedProcess[str], code: int) -> str:
    """The run failed with ``code`` and said so in one sentence, nothing on stdout."""
    assert ran.returncode == code, ran.stderr
    assert ran.stdout == ""
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith("Error: ") and lines[0].endswith("."), lines
    return lines[0]


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A vault made the README's way, with ``memvault init``."""
    root = tmp_path / "memvault"
    ran = run(root, "init", str(root))
    assert ran.returncode == 0, ran.stderr
    return root


def test_a_wrong_setting_across_a_section_names_the_file_that_set_it(vault: Path) -> None:
    config = vault / ".memvault/config.toml"
    config.write_text("[search]\ncosine_floor = 0.9\n", encoding="utf-8")
    said = one_sentence(run(vault, "status"), EXIT_CONFIG)
    assert "cosine_clear must be above search.cosine_floor" in said
    assert f"from config.toml ({config})" in said and "from default" not in said

    config.write_text("[serch]\nmin_score = 0.1\n", encoding="utf-8")  # a mistyped section
    said = one_sentence(run(vault, "status"), EXIT_CONFIG)
    assert (
        said
        == f"Error: Invalid setting 'serch' from config.toml ({config}): there is no such setting."
    )


def test_a_list_setting_in_the_environment_that_is_not_json_is_named(vault: Path) -> None:
    ran = run(vault, "status", MEMVAULT_CONTEXT__PINNED_TAGS="core")
    said = one_sentence(ran, EXIT_CONFIG)
    assert said.startswith("Error: MEMVAULT_CONTEXT__PINNED_TAGS is not a valid setting")
    assert "EnvSettingsSource" not in said and "JSON" in said
    # Written as JSON, the same setting is taken.
    shown = run(vault, "config", "show", MEMVAULT_CONTEXT__PINNED_TAGS='["core"]')
    assert shown.returncode == 0, shown.stderr


def test_a_name_that_fits_a_recurring_task_tells_the_two_apart_by_path(vault: Path) -> None:
    title = "Renew the TLS certificate"
    for args in (("task", "add", title), ("task", "done", title), ("task", "add", title)):
        assert run(vault, *args).returncode == 0  # a completed task may recur
    said = one_sentence(
        run(vault, "task", "update", "Renew the TLS", "priority", "high"), EXIT_INVALID
    )
    assert f"Tasks/active/{title}.md" in said and f"Tasks/completed/{title}.md" in said
    # The full title picks the open one, as the README's `task done` does.
    updated = run(vault, "task", "update", title, "priority", "high")
    assert updated.returncode == 0, updated.stderr
    assert f"Tasks/active/{title}.md" in updated.stdout
