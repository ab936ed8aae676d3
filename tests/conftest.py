"""Shared fixtures: a fresh vault on disk and the services over it, at a fixed moment."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest

from memvault.config import Settings
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import TZ, HashEmbedder, MovableClock


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock(datetime(2026, 11, 22, 9, 30, tzinfo=TZ))


@pytest.fixture
def vault_path(tmp_path: Path) -> Path:
    return tmp_path / "vault"


@pytest.fixture
def vault(vault_path: Path) -> Vault:
    store = Vault(vault_path)
    init_vault(store)
    return store


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def runtime(vault: Vault, clock: MovableClock, embedder: HashEmbedder) -> Iterator[Runtime]:
    """The services over a fresh vault; the index embeds with a deterministic stand-in model."""
    opened = Runtime.open(
        Settings(vault=vault.root, timezone="Europe/Berlin"), clock=clock, embedder=embedder
    )
    yield opened
    opened.close()


@pytest.fixture
def write(vault: Vault) -> Callable[[str, str], Path]:
    """Write a file into the vault directly, as a person editing in Obsidian would."""

    def _write(relpath: str, text: str) -> Path:
        target = vault.root / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))
        return target

    return _write
