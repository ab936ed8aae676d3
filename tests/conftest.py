"""Shared fixtures: a fresh vault on disk and the services over it, at a fixed moment.

The local model's ONNX file goes to one temporary cache per test run
(``$MEMVAULT_MODEL_CACHE``, inherited by subprocesses), shared by xdist's workers: it
is exported once, by the first test that embeds with the local model (under the
model file's lock), and never touches the user's own cache.

Python may be told not to write bytecode caches (``PYTHONDONTWRITEBYTECODE``, set on
some machines): the suite writes them anyway, for itself and the processes it starts,
or every memvault CLI a test runs compiles the package again (half a second each).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from gateway_support import Live, StartDaemon, serve
from memvault.config import Settings, StorageSettings, load_settings
from memvault.index.local_model import ModelFile
from memvault.locations import MODEL_CACHE_ENV
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import TZ, HashEmbedder, MovableClock
from telegram_fake import FakeTelegram
from waiting import wait_for

pytest_plugins = ("pg_fixtures", "pytester")

# Bytecode caches for the test modules collected from here on and every process started.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def run_folder(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str) -> Path:
    """A folder of this run's, shared by its xdist workers (their temporary folders share
    a parent, the run's); without xdist, the session is the run."""
    if worker_id == "master":
        return tmp_path_factory.mktemp(name)
    folder = tmp_path_factory.getbasetemp().parent / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session", autouse=True)
def model_cache(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Path]:
    """The run's model cache, shared by every test, every xdist worker and every process
    they start."""
    cache = run_folder(tmp_path_factory, worker_id, "model-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MODEL_CACHE_ENV, str(cache))
        # Node's compiled code, for every OpenClaw the tests run: each test's OpenClaw has
        # a HOME and TMPDIR of its own, where its first start would compile it all again.
        patch.setenv("NODE_COMPILE_CACHE", str(run_folder(tmp_path_factory, worker_id, "node")))
        yield cache


@pytest.fixture(scope="session")
def prepared_model(model_cache: Path) -> ModelFile:
    """The local model's ONNX file in the session's cache, exported if no test did yet."""
    model_file = ModelFile(model_cache)
    model_file.prepare()
    return model_file


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


# -- PostgreSQL: one real server per session, a database per test ---------------------

BACKENDS = ("sqlite", "postgres")


# Seconds each module took in a recorded run (``MEMVAULT_RECORD_MODULE_SECONDS=1 make test``
# writes it anew); only the order of the run depends on it.
MODULE_SECONDS = Path(__file__).with_name("module_seconds.json")
_UNRECORDED_SLOW = 60.0  # a slow module the record does not know yet still goes early
_spent: dict[str, float] = {}


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules run first, each kept together: xdist's workers (``--dist
    loadscope``) start on the longest work and finish together, instead of one running the
    real OpenClaw for minutes while the others wait. The lengths are the recorded ones; a
    module the record does not know counts as long when it holds a ``slow`` test."""
    try:
        recorded: dict[str, float] = json.loads(MODULE_SECONDS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = {}
    slow = {_module(item.nodeid) for item in items if item.get_closest_marker("slow")}

    def length(item: pytest.Item) -> float:
        module = _module(item.nodeid)
        return recorded.get(module, _UNRECORDED_SLOW if module in slow else 0.0)

    items.sort(key=lambda item: -length(item))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each module's seconds (setup, call and teardown of its tests), for the record."""
    _spent[_module(report.nodeid)] = _spent.get(_module(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the record when asked (by the run that saw every module: xdist's controller)."""
    if not os.environ.get("MEMVAULT_RECORD_MODULE_SECONDS") or hasattr(
        session.config, "workerinput"
    ):
        return
    ordered = dict(sorted(((m, round(s, 1)) for m, s in _spent.items()), key=lambda kv: -kv[1]))
    MODULE_SECONDS.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``both_backends`` (or in a module that is: ``pytestmark =
    pytest.mark.both_backends``) that uses the ``backend`` fixture, through ``runtime``,
    ``start_daemon`` or ``storage_settings``, runs on SQLite and on PostgreSQL; one also
    marked ``sqlite_only`` (it is about SQLite's own files) on SQLite alone."""
    marked = metafunc.definition.get_closest_marker("both_backends") is not None
    excused = metafunc.definition.get_closest_marker("sqlite_only") is not None
    if marked and not excused and "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The storage backend a test runs on: SQLite unless marked ``both_backends``
    (``MEMVAULT_TEST_BACKEND=postgres`` runs every other test on PostgreSQL, but for one
    marked ``sqlite_only``: it is about SQLite's own files)."""
    if request.node.get_closest_marker("sqlite_only") is not None:
        return "sqlite"
    return str(getattr(request, "param", os.environ.get("MEMVAULT_TEST_BACKEND", "sqlite")))


@pytest.fixture
def storage_settings(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> StorageSettings:
    """``[storage]`` for the test's backend; with PostgreSQL, a fresh migrated database
    whose DSN is in ``$MEMVAULT_PG_DSN``."""
    if backend == "sqlite":
        return StorageSettings()
    monkeypatch.setenv("MEMVAULT_PG_DSN", request.getfixturevalue("migrated"))
    return StorageSettings(backend="postgres")


@pytest.fixture
def runtime(
    vault: Vault, clock: MovableClock, embedder: HashEmbedder, storage_settings: StorageSettings
) -> Iterator[Runtime]:
    """The services over a fresh vault; the index embeds with a deterministic stand-in model."""
    opened = Runtime.open(
        Settings(vault=vault.root, timezone="Europe/Berlin", storage=storage_settings),
        clock=clock,
        embedder=embedder,
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


@pytest.fixture
def tg(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTelegram]:
    """A fake Telegram Bot API on loopback; its token in $TELEGRAM_BOT_TOKEN."""
    with FakeTelegram() as fake:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", fake.token)
        yield fake


# A real daemon on a free loopback port, in this process: uvicorn in a thread.


@pytest.fixture
def start_daemon(
    tmp_path: Path, clock: MovableClock, storage_settings: StorageSettings
) -> Iterator[StartDaemon]:
    """Start daemons on a vault (initialised if new); all are stopped at the end."""
    started: list[Live] = []

    def start(
        vault: Path | None = None,
        *,
        settings: dict[str, Any] | None = None,
        embedder: Any = "hash",
        background: bool = True,
    ) -> Live:
        root = vault or tmp_path / "vault"
        if not root.exists():
            init_vault(Vault(root))
        overrides = {"timezone": "Europe/Berlin", **(settings or {})}
        if storage_settings.backend != "sqlite":
            overrides.setdefault("storage", storage_settings.model_dump())
        loaded = load_settings(root, overrides=overrides)
        runtime = Runtime.open(
            loaded.settings,
            clock=clock,
            embedder=HashEmbedder() if embedder == "hash" else embedder,
        )
        live = serve(runtime, background=background)
        started.append(live)
        return live

    yield start
    for live in started:
        if live.thread.is_alive():
            live.stop()


@pytest.fixture
def live(start_daemon: StartDaemon) -> Live:
    """A daemon on a fresh vault, its index followed by the watcher."""
    running = start_daemon()
    wait_for(running.daemon.watching.is_set, "the watcher to start")
    return running


@pytest.fixture
def api(live: Live) -> Iterator[httpx.Client]:
    with live.client() as client:
        yield client
