"""Choosing the storage backend: the CLI on a vault set to PostgreSQL."""

from __future__ import annotations

from cli_support import invoke
from memvault.vault.store import Vault

POSTGRES = {"MEMVAULT_STORAGE__BACKEND": "postgres"}


def test_a_vault_set_to_postgres_without_a_dsn_is_one_sentence(vault: Vault) -> None:
    result = invoke(vault.root, "search", "anything", env={**POSTGRES, "MEMVAULT_PG_DSN": None})
    assert result.exit_code == 6
    assert "The environment variable MEMVAULT_PG_DSN is not set" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_a_vault_set_to_postgres_keeps_its_index_and_state_there(
    vault: Vault, migrated: str
) -> None:
    env = {**POSTGRES, "MEMVAULT_PG_DSN": migrated}
    (vault.root / "Projects").mkdir(exist_ok=True)
    (vault.root / "Projects" / "Quokka.md").write_text("# Quokka\n\nThe zyxomatic plan.\n")
    assert invoke(vault.root, "index", env=env).exit_code == 0
    found = invoke(vault.root, "search", "zyxomatic", "--json", env=env)
    assert found.exit_code == 0, found.stderr
    assert "Projects/Quokka.md" in found.stdout
    assert not (vault.root / ".memvault" / "index.db").exists()
    assert not (vault.root / ".memvault" / "state.db").exists()
