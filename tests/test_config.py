from __future__ import annotations

from pathlib import Path

import pytest

from memvault.config import load_settings
from memvault.errors import ConfigError


def _config(vault: Path, text: str) -> None:
    (vault / ".memvault").mkdir(parents=True, exist_ok=True)
    (vault / ".memvault/config.toml").write_text(text)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("MEMVAULT_"):
            monkeypatch.delenv(key)


def test_defaults(tmp_path: Path) -> None:
    loaded = load_settings(tmp_path)
    assert loaded.settings.vault == tmp_path
    assert loaded.settings.timezone is None
    assert loaded.sources == {"vault": "flag --vault"}
    rows = {key: source for key, _, source in loaded.rows()}
    assert rows["owner_name"] == "default"
    assert rows["memory.default_importance"] == "default"


def test_precedence_flag_over_env_over_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _config(
        tmp_path,
        'timezone = "Asia/Tokyo"\nowner_name = "Ada"\n[memory]\ndefault_importance = 0.6\n',
    )
    monkeypatch.setenv("MEMVAULT_TIMEZONE", "Europe/Berlin")
    monkeypatch.setenv("MEMVAULT_MEMORY__DEFAULT_CATEGORY", "preference")
    loaded = load_settings(tmp_path, overrides={"owner_name": "Grace"})
    s = loaded.settings
    assert (s.timezone, s.owner_name) == ("Europe/Berlin", "Grace")
    assert (s.memory.default_importance, s.memory.default_category) == (0.6, "preference")
    assert loaded.sources["timezone"] == "env MEMVAULT_TIMEZONE"
    assert loaded.sources["owner_name"] == "flag --owner-name"
    assert loaded.sources["memory.default_importance"].startswith("config.toml")
    assert loaded.sources["memory.default_category"] == "env MEMVAULT_MEMORY__DEFAULT_CATEGORY"


def test_vault_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_VAULT", str(tmp_path))
    _config(tmp_path, 'owner_name = "From file"\n')
    loaded = load_settings()
    assert loaded.settings.vault == tmp_path
    assert loaded.settings.owner_name == "From file"


def test_default_vault_is_in_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_settings().settings.vault == tmp_path / "memvault"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("timezone = ", "not valid TOML"),
        ('colour = "blue"\n', "Invalid setting 'colour' from config.toml"),
        ('timezone = "Mars/Olympus"\n', "Unknown timezone 'Mars/Olympus'"),
        ("lock_timeout = -1\n", "Invalid setting 'lock_timeout'"),
        ('vault = "/elsewhere"\n', "cannot move the vault"),
        ("[memory]\ndefault_importance = 3\n", "memory.default_importance"),
    ],
)
def test_invalid_config_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    _config(tmp_path, text)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_settings(tmp_path)


def test_invalid_env_names_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_LOCK_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="env MEMVAULT_LOCK_TIMEOUT"):
        load_settings(tmp_path)
