"""Choosing the storage backend."""

from __future__ import annotations

import pytest

from cli_support import invoke
from memvault.config import Settings
from memvault.errors import StorageError
from memvault.runtime import Runtime
from memvault.vault.store import Vault


def test_a_vault_set_to_postgres_is_refused_until_the_store_serves_it(
    vault: Vault,
) -> None:
    """Nothing reads or writes through PostgreSQL yet: the runtime says so rather than
    quietly keeping the index in SQLite."""
    settings = Settings(vault=vault.root, storage={"backend": "postgres"})
    with pytest.raises(StorageError, match='backend = "postgres" is not served'):
        Runtime.open(settings)
    result = invoke(vault.root, "search", "anything", env={"MEMVAULT_STORAGE__BACKEND": "postgres"})
    assert result.exit_code == 5
    assert 'backend = "postgres" is not served by this memvault yet' in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
