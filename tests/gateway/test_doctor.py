"""``doctor`` without a daemon: what it finds on a healthy, a damaged and a missing vault."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from cli_support import invoke
from memvault.config import Settings, StorageSettings
from memvault.gateway.doctor import diagnose
from memvault.index.local_model import ModelFile
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from pg_server import TemporaryPostgres
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


# -- PostgreSQL: pgvector present, its version, and an HNSW index that builds ----------

# An event trigger that kills the server process running CREATE INDEX with SIGSEGV, as a
# pgvector compiled for another processor kills it with SIGILL (COPY TO PROGRAM's shell
# is a child of the backend: $PPID).
CRASH_ON_CREATE_INDEX = (
    "CREATE FUNCTION crash_on_create_index() RETURNS event_trigger LANGUAGE plpgsql AS $$"
    " BEGIN COPY (SELECT 1) TO PROGRAM 'kill -SEGV $PPID'; END $$",
    "CREATE EVENT TRIGGER crash_on_create_index ON ddl_command_start"
    " WHEN TAG IN ('CREATE INDEX') EXECUTE FUNCTION crash_on_create_index()",
)


def postgres_runtime(root: Path, clock: MovableClock, dsn: str) -> Runtime:
    """A runtime on a fresh vault whose index and state live in the database ``dsn``."""
    init_vault(Vault(root))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMVAULT_PG_DSN", dsn)
        runtime = Runtime.open(
            Settings(vault=root, storage=StorageSettings(backend="postgres")),
            clock=clock,
            embedder=HashEmbedder(),
        )
        assert runtime.storage is not None  # connected while the variable is set
    return runtime


def test_postgres_storage_names_pgvector_and_builds_an_hnsw_index(
    tmp_path: Path, clock: MovableClock, migrated: str
) -> None:
    runtime = postgres_runtime(tmp_path / "vault", clock, migrated)
    try:
        found = checks(diagnose(runtime).to_dict())["storage"]
    finally:
        runtime.close()
    with psycopg.connect(migrated) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        pgvector = version.fetchone()[0]  # type: ignore[index]
        server = conn.execute("SHOW server_version").fetchone()[0].split()[0]  # type: ignore[index]
    port = conninfo_to_dict(migrated)["port"]
    assert found["status"] == "ok", found
    assert found["message"] == (
        f"PostgreSQL {server} at 127.0.0.1:{port} with pgvector {pgvector}: an HNSW index "
        "builds and answers."
    )
    assert found["details"]["pgvector"] == pgvector
    with psycopg.connect(migrated) as conn:  # the check left nothing behind
        assert conn.execute("SELECT to_regclass('memvault_vector_probe')").fetchone() == (None,)


def test_sqlite_storage_has_no_storage_check(runtime: Runtime) -> None:
    assert "storage" not in checks(diagnose(runtime).to_dict())


def test_a_pgvector_that_crashes_the_server_is_one_sentence(
    tmp_path: Path, clock: MovableClock, pg: TemporaryPostgres
) -> None:
    # A server of its own: the session's server must not see a crash it did not cause.
    with TemporaryPostgres(pg.bindir) as own:
        own.start()
        dsn = own.create_database("memories")
        runtime = postgres_runtime(tmp_path / "vault", clock, dsn)
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                for statement in CRASH_ON_CREATE_INDEX:
                    conn.execute(statement.encode())
            report = diagnose(runtime)
        finally:
            runtime.close()
        found = checks(report.to_dict())["storage"]
        assert report.failed and found["status"] == "error"
        assert found["message"] == (
            f"PostgreSQL at 127.0.0.1:{own.port} ended the server process building a "
            f"pgvector {own.vectors.pgvector} HNSW index; a pgvector compiled for another "  # type: ignore[union-attr]
            "processor does this (the server's log says 'terminated by signal 4: Illegal "
            "instruction'): rebuild pgvector on the server's machine (make OPTFLAGS=\"\") or "
            "install its distribution's package."
        )
        assert "terminated by signal 11: Segmentation fault" in own.crashes()[0]


def test_a_pgvector_without_hnsw_is_one_sentence(
    tmp_path: Path, clock: MovableClock, migrated: str
) -> None:
    runtime = postgres_runtime(tmp_path / "vault", clock, migrated)
    try:
        with psycopg.connect(migrated, autocommit=True) as conn:
            # What pgvector 0.4 would report (its catalogue row, as an upgrade leaves it).
            conn.execute("UPDATE pg_extension SET extversion = '0.4.4' WHERE extname = 'vector'")
        found = checks(diagnose(runtime).to_dict())["storage"]
    finally:
        runtime.close()
    name = conninfo_to_dict(migrated)["dbname"]
    assert found["status"] == "error"
    assert found["message"] == (
        f'pgvector 0.4.4 in database "{name}" at 127.0.0.1:{conninfo_to_dict(migrated)["port"]}'
        " has no HNSW index; memvault needs pgvector 0.5.0 or newer (ALTER EXTENSION vector "
        "UPDATE after upgrading it on the server)."
    )


def test_an_index_or_state_written_by_a_newer_memvault_is_named(
    tmp_path: Path, clock: MovableClock
) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    runtime = Runtime.open(Settings(vault=root), clock=clock, embedder=HashEmbedder())
    runtime.index.sync()
    assert runtime.state.check() is None  # state.db made
    runtime.close()
    for name in ("index.db", "state.db"):
        with sqlite3.connect(root / ".memvault" / name) as conn:
            conn.execute("PRAGMA user_version = 999")
        conn.close()
    report = json.loads(invoke(root, "doctor", "--json").stdout)
    found = checks(report)
    for name in ("index_healthy", "state_db"):
        assert found[name]["status"] == "error"
        assert "written by a newer memvault (schema 999)" in found[name]["message"]
    assert "memvault index --rebuild" in found["index_healthy"]["message"]
