"""``doctor``: is this vault (and its daemon) healthy, and what to do when not.

Each check answers ok, warning or error with one sentence; the daemon
answers HTTP 503 when any check errors. Without a daemon the CLI runs the
vault checks locally.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memvault import __version__
from memvault.channels.adapters import read_token
from memvault.errors import ConfigError, MemvaultError
from memvault.gateway.security import is_loopback, loose_permissions
from memvault.index.embedders import LocalEmbedder, english_only
from memvault.index.local_model import E5_SMALL, PREPARE_COMMAND
from memvault.llm.base import Health
from memvault.locations import is_vault, loose_modes
from memvault.memory.state import StateStore
from memvault.runtime import Runtime
from memvault.vault.carry import CARRY_DIR, pending
from memvault.vocabulary import counted

LOW_DISK_ERROR = 200 * 1024 * 1024
LOW_DISK_WARNING = 1024 * 1024 * 1024


@dataclass(frozen=True)
class Check:
    """One verdict."""

    name: str
    status: str  # ok | warning | error
    message: str
    details: Any = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "details": self.details,
        }


@dataclass
class DaemonFacts:
    """What only a running daemon knows about itself."""

    host: str
    port: int
    watching: bool
    backfill_error: str | None
    embedder_error: str | None
    state: StateStore
    token_path: Path
    llm_health: Health | None = None
    # Each purpose's model health (default, jobs, replies), when they are not all one model.
    llm_healths: dict[str, Health] = field(default_factory=dict)
    # (name, status, sentence) of every enabled channel, from the hub.
    channel_checks: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class Report:
    """Every check, and the counts."""

    checks: list[Check] = field(default_factory=list)
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def failed(self) -> bool:
        """Whether any check errored."""
        return any(c.status == "error" for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the shape of ``GET /v1/doctor``)."""
        return {
            "version": __version__,
            "checks": [c.to_dict() for c in self.checks],
            "summary": {
                "total": len(self.checks),
                "passed": sum(c.status == "ok" for c in self.checks),
                "warnings": sum(c.status == "warning" for c in self.checks),
                "errors": sum(c.status == "error" for c in self.checks),
            },
            "timestamp": self.timestamp.isoformat(timespec="seconds").replace("+00:00", "Z"),
        }


def _vault_writable(runtime: Runtime) -> Check:
    root = runtime.vault.root
    if not root.is_dir():
        return Check("vault_writable", "error", f"The vault {root} does not exist.")
    if not is_vault(root):  # checked, never created here
        return Check(
            "vault_writable",
            "error",
            f"{root} is not a memvault vault; run `memvault init {root}` to make it one.",
        )
    try:
        runtime.vault.state_dir.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=runtime.vault.state_dir, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check(
            "vault_writable", "error", f"Cannot write in {root}: {exc.strerror}.", str(root)
        )
    return Check("vault_writable", "ok", f"The vault {root} is writable.", str(root))


def _index_healthy(runtime: Runtime) -> Check:
    try:
        problem = runtime.index.check()
        status = runtime.index.status()
    except MemvaultError as exc:
        return Check("index_healthy", "error", exc.message)
    except Exception as exc:  # a damaged database raises sqlite errors
        return Check(
            "index_healthy",
            "error",
            f"The index cannot be read ({exc}); rebuild it with `memvault index --rebuild`.",
        )
    if problem:
        return Check(
            "index_healthy",
            "error",
            f"The index is damaged ({problem}); rebuild it with `memvault index --rebuild`.",
        )
    return Check(
        "index_healthy",
        "ok",
        f"The index holds {counted(status.notes, 'note')} in {counted(status.chunks, 'chunk')}.",
        {"notes": status.notes, "chunks": status.chunks, "memories": status.memories},
    )


def _index_current(runtime: Runtime, daemon: DaemonFacts | None) -> Check:
    if daemon is not None and daemon.watching:
        return Check("index_current", "ok", "The watcher keeps the index current.")
    try:
        report = runtime.index.sync()
    except MemvaultError as exc:
        return Check("index_current", "error", exc.message)
    if report.touched:
        return Check(
            "index_current",
            "warning" if daemon is not None else "ok",
            f"{report.touched} changed notes were indexed just now"
            + ("; the vault watcher is not running." if daemon is not None else "."),
        )
    return Check("index_current", "ok", "The index matches the vault.")


def _unreadable(runtime: Runtime) -> Check:
    """Files named .md the index leaves out (not text, binary, too large): each breaks
    only itself, but the person should know."""
    left_out = dict(sorted(runtime.index.unreadable.items()))
    if not left_out:
        return Check("unreadable_notes", "ok", "Every note can be read.")
    count = len(left_out)
    shown = "; ".join(f"{path} ({why})" for path, why in list(left_out.items())[:3])
    more = f"; and {count - 3} more" if count > 3 else ""
    files = counted(count, "file")
    return Check(
        "unreadable_notes",
        "warning",
        f"{files} named .md cannot be read as notes and {'is' if count == 1 else 'are'} "
        f"left out of the index and the listings: {shown}{more}.",
        {"files": left_out},
    )


def _kept(runtime: Runtime) -> Check | None:
    """Old texts of replaced notes a crash left under ``.memvault/carry`` (none: no check)."""
    folder = runtime.vault.state_dir / CARRY_DIR
    kept = pending(folder)
    if not kept:
        return None
    count = len(kept)
    return Check(
        "kept_old_notes",
        "warning",
        f"{counted(count, 'replaced note')} left old text in {folder} after memvault stopped "
        "mid-edit; the daemon's start or the note's next edit carries over the lines typed "
        "into it, and text whose note is gone stays there for you to read.",
        {"kept": [str(each.path) for each in kept]},
    )


def _embedder(runtime: Runtime, daemon: DaemonFacts | None) -> Check:
    embedder = runtime.embedder
    details = {"provider": embedder.provider, "model": embedder.model, "loaded": embedder.loaded}
    if not embedder.enabled:
        return Check(
            "embedder", "warning", "No embedder is configured: search uses keywords only.", details
        )
    if daemon is not None and daemon.embedder_error:
        return Check("embedder", "error", daemon.embedder_error, details)
    mismatch = runtime.index.mismatch()
    if mismatch:
        return Check("embedder", "warning", mismatch, details)
    if embedder.loaded:
        return Check("embedder", "ok", f"{embedder.identity} is loaded.", details)
    if daemon is not None:
        return Check("embedder", "warning", f"{embedder.identity} is still loading.", details)
    return Check("embedder", "ok", f"{embedder.identity} loads on first use.", details)


def _local_model(runtime: Runtime) -> Check | None:
    """How the bundled model runs, and whether its ONNX file is ready (None for other embedders)."""
    try:
        embedder = runtime.embedder
    except MemvaultError:
        return None  # the embedder check reports it
    if not isinstance(embedder, LocalEmbedder):
        return None
    if embedder.runtime == "torch":
        return Check(
            "local_model",
            "ok",
            f"{embedder.model} runs on torch (embedder.runtime = 'torch').",
            {"runtime": "torch"},
        )
    state = embedder.model_file().status()
    details = {"runtime": "onnx", **state.to_dict()}
    if state.ready:
        return Check(
            "local_model",
            "ok",
            f"{embedder.model} runs on ONNX Runtime from {state.path}.",
            details,
        )
    return Check(
        "local_model",
        "warning",
        f"The ONNX file of {embedder.model} is not prepared: the first embedding exports it "
        f"(a few seconds); run `{PREPARE_COMMAND}` to do it now.",
        details,
    )


def _language_fit(runtime: Runtime) -> Check | None:
    """Whether the embedder reads the writing most notes are in (script counts over a
    sample of chunks); None when the embedder's languages are not known."""
    from memvault.index import language_fit

    embedder = runtime.embedder
    reads = english_only(embedder)
    if reads is None:
        return None
    with runtime.index.lock:
        texts = language_fit.sample(runtime.index.conn)
    found = language_fit.mix(texts)
    details = {"model": embedder.identity, "sampled": found.sampled, "writings": found.counts}
    problem = language_fit.verdict(found, reads)
    if problem is None:
        return Check("language_fit", "ok", f"{embedder.model} suits the notes' writing.", details)
    return Check(
        "language_fit",
        "warning",
        f"{problem[0].upper()}{problem[1:]}; {embedder.model} reads English only: set "
        f'[embedder] model = "{E5_SMALL.name}" ({E5_SMALL.install}), or provider = '
        '"openai" with a multilingual model (Ollama\'s bge-m3), then run '
        "`memvault index --reembed`.",
        details,
    )


def _pending(runtime: Runtime, daemon: DaemonFacts | None) -> Check:
    if not runtime.embedder.enabled:
        return Check("pending_embeddings", "ok", "No embeddings are kept.", {"pending": 0})
    pending = runtime.index.pending()
    details = {"pending": pending}
    if not pending:
        return Check("pending_embeddings", "ok", "Every chunk has its vector.", details)
    if daemon is not None and daemon.backfill_error:
        return Check(
            "pending_embeddings",
            "warning",
            f"{counted(pending, 'chunk')} without a vector; filling them failed: "
            f"{daemon.backfill_error}",
            details,
        )
    filler = "the daemon is filling them" if daemon else "run `memvault index` to fill them"
    return Check(
        "pending_embeddings",
        "ok",
        f"{counted(pending, 'chunk')} without a vector; {filler}.",
        details,
    )


def _disk(runtime: Runtime) -> Check:
    try:
        usage = shutil.disk_usage(runtime.vault.root)
    except OSError as exc:
        return Check("disk_space", "error", f"Cannot read the free disk space: {exc.strerror}.")
    free_mb = usage.free // (1024 * 1024)
    details = {"free_mb": free_mb}
    if usage.free < LOW_DISK_ERROR:
        return Check(
            "disk_space", "error", f"Only {free_mb} MB are free: writes may fail.", details
        )
    if usage.free < LOW_DISK_WARNING:
        return Check("disk_space", "warning", f"Only {free_mb} MB are free.", details)
    return Check("disk_space", "ok", f"{free_mb} MB free.", details)


def _private(state: Path) -> Check | None:
    """``.memvault`` (tokens, index, conversation logs) is its owner's alone."""
    if not state.is_dir():
        return None
    loose = loose_modes(state)
    if not loose:
        return Check("state_private", "ok", f"{state} is readable by its owner only.")
    listed = ", ".join(
        f"{path.relative_to(state.parent)} ({mode:o})" for path, mode in loose[:5]
    ) + (f" and {len(loose) - 5} more" if len(loose) > 5 else "")
    # A private folder keeps loose files out of reach; a loose folder does not.
    status = "error" if loose[0][0] == state else "warning"
    return Check(
        "state_private",
        status,
        f"Other users may read {listed}; run `chmod -R go-rwx {state}`.",
        {"loose": [{"path": str(path), "mode": f"{mode:o}"} for path, mode in loose]},
    )


def _token(path: Path) -> Check:
    if not path.exists():
        return Check("token_file", "error", f"The token file {path} is missing.")
    mode = loose_permissions(path)
    if mode is not None:
        return Check(
            "token_file",
            "error",
            f"{path} is readable by others (mode {mode:o}); run `chmod 600 {path}`.",
        )
    return Check("token_file", "ok", "The token file is readable by its owner only.", str(path))


def _server(daemon: DaemonFacts) -> Check:
    where = f"{daemon.host}:{daemon.port}"
    if not is_loopback(daemon.host):
        return Check(
            "server_bind",
            "warning",
            f"Listening on {where}, reachable from other machines; only the token protects it.",
            where,
        )
    return Check("server_bind", "ok", f"Listening on {where} (this machine only).", where)


def _state(state: StateStore) -> Check:
    try:
        problem = state.check()
    except Exception as exc:
        problem = str(exc)
    if problem:
        return Check("state_db", "error", f"{state.path} is damaged: {problem}.")
    return Check("state_db", "ok", "The sessions and events database is sound.", str(state.path))


def _llm(runtime: Runtime, daemon: DaemonFacts | None) -> Check:
    """Which model serves what ([llm], [llm.jobs], [llm.replies]), and whether each answers."""
    from memvault.extras import installed, missing_sentence
    from memvault.llm.factory import PURPOSES, describe

    llm = runtime.settings.llm
    facts = describe(llm)
    served: dict[str, dict[str, Any]] = {p: describe(llm, p) for p in PURPOSES}
    healths: dict[str, Health] = dict(daemon.llm_healths) if daemon is not None else {}
    if daemon is not None and daemon.llm_health is not None:
        healths.setdefault("default", daemon.llm_health)
    for purpose, record in healths.items():
        served[purpose] = {**served[purpose], **record.to_dict()}
    details = {**served["default"], "purposes": served}
    with_model = [p for p in PURPOSES if _has_model(served[p])]
    if not with_model:
        return Check(
            "llm",
            "warning",
            "No language model is configured: memory, search and channels work; "
            "`memvault ask`, `chat` and LLM summaries need [llm] provider and model.",
            details,
        )
    for purpose in with_model:
        shown = served[purpose]
        if not installed(shown["provider"]):  # an extra the default install leaves out
            needs = f"llm.provider = {shown['provider']!r} ({purpose})"
            sentence = missing_sentence(shown["provider"], shown["provider"], needs)
            return Check("llm", "error", sentence, details)
        if shown.get("api_key_env") and not shown.get("api_key_set") and not shown.get("base_url"):
            return Check(
                "llm",
                "error",
                f"{_model_label(shown)} ({purpose}) needs an API key in ${shown['api_key_env']}.",
                details,
            )
        health = healths.get(purpose)
        if health is not None and not health.healthy:
            return Check(
                "llm",
                "error",
                f"{_model_label(shown)} ({purpose}) failed {health.failures} calls in a row; "
                f"last: {health.last_error}",
                details,
            )
    message = "Language model: " + _who_serves_what(served) + "."
    if not _has_model(facts):
        message += " `memvault ask` and `chat` need [llm] provider and model."
    return Check("llm", "ok", message, details)


def _has_model(facts: dict[str, Any]) -> bool:
    return facts["provider"] != "none" and bool(facts.get("model"))


def _model_label(facts: dict[str, Any]) -> str:
    if not _has_model(facts):
        return "none"
    where = f" at {facts['base_url']}" if facts.get("base_url") else ""
    return f"{facts['provider']} {facts['model']}{where}"


def _who_serves_what(served: dict[str, dict[str, Any]]) -> str:
    """``openai big for default and replies; openai small at URL for jobs``."""
    by_model: dict[str, list[str]] = {}
    for purpose, facts in served.items():
        by_model.setdefault(_model_label(facts), []).append(purpose)
    if len(by_model) == 1:
        return f"{next(iter(by_model))} (default, jobs and replies)"
    parts = []
    for label, purposes in by_model.items():
        names = " and ".join(purposes) if len(purposes) < 3 else ", ".join(purposes)
        parts.append(f"{label} for {names}")
    return "; ".join(parts)


def _jobs(runtime: Runtime) -> Check:
    """Jobs whose latest runs failed (they back off, the others go on), and jobs that are
    on but need a model none is configured for."""
    from memvault.jobs.catalog import make_engine

    engine = make_engine(runtime)
    jobs = engine.overview()
    failing = [j for j in jobs if j["failures_in_a_row"]]
    if failing:
        parts = [
            f"{j['name']} failed {j['failures_in_a_row']} time(s) in a row "
            f"(last: {j['last_run']['error']}; next try {(j['next_run'] or 'when on')[:16]})"
            for j in failing
        ]
        status = "error" if any(j["failures_in_a_row"] >= 3 for j in failing) else "warning"
        return Check("jobs", status, "; ".join(parts) + ".", failing)
    on = [j["name"] for j in jobs if j["enabled"]]
    from memvault.llm.factory import settings_for

    if settings_for(runtime.settings.llm, "jobs").provider == "none" and "heartbeat" in on:
        return Check(
            "jobs",
            "warning",
            "The heartbeat job is on but no language model is configured for jobs, so every "
            "run is skipped; set [llm] (or [llm.jobs]) provider and model.",
            on,
        )
    shown = ", ".join(on) if on else "none"
    return Check("jobs", "ok", f"Jobs on: {shown}; none failing.", on)


def _storage(runtime: Runtime) -> Check | None:
    """On PostgreSQL: the server reached, pgvector there, and an HNSW index that builds
    (a pgvector compiled for another processor crashes exactly there)."""
    storage = runtime.storage
    if storage is None:
        return None  # SQLite: the index checks cover it
    found = storage.check_vectors()
    details = {
        "database": storage.describe(),
        "server": found.server,
        "pgvector": found.pgvector,
    }
    return Check(
        "storage",
        "ok",
        f"PostgreSQL {found.server} at {storage.target} with pgvector {found.pgvector}: an "
        "HNSW index builds and answers.",
        details,
    )


def _whatsapp_window(runtime: Runtime) -> Check | None:
    """With WhatsApp on: the chats whose 24-hour window is closed (free text cannot reach
    them), and whether a template stands in."""
    settings = runtime.settings.channels.whatsapp
    if not settings.enabled:
        return None
    from memvault.channels.whatsapp_windows import WINDOWS_META, window_verdict

    saved = runtime.state.get_meta(WINDOWS_META)
    status, message, details = window_verdict(settings, saved, runtime.clock.now().timestamp())
    return Check("whatsapp_window", status, message, details)


def diagnose(runtime: Runtime, daemon: DaemonFacts | None = None) -> Report:
    """Run every check that applies (the daemon's own only inside the daemon)."""
    report = Report()
    vault = _vault_writable(runtime)
    report.checks.append(vault)
    steps: list[tuple[str, Callable[[], Check | None]]] = [
        ("storage", lambda: _storage(runtime)),
    ]
    if vault.status != "error":
        steps += [
            ("index_healthy", lambda: _index_healthy(runtime)),
            ("index_current", lambda: _index_current(runtime, daemon)),
            ("unreadable_notes", lambda: _unreadable(runtime)),
            ("kept_old_notes", lambda: _kept(runtime)),
            ("embedder", lambda: _embedder(runtime, daemon)),
            ("pending_embeddings", lambda: _pending(runtime, daemon)),
            ("state_db", lambda: _state(daemon.state if daemon else runtime.state)),
            ("jobs", lambda: _jobs(runtime)),
        ]
    steps.append(("local_model", lambda: _local_model(runtime)))
    if vault.status != "error":
        steps.append(("language_fit", lambda: _language_fit(runtime)))
    steps.append(("disk_space", lambda: _disk(runtime)))
    steps.append(("state_private", lambda: _private(runtime.vault.state_dir)))
    steps.append(("llm", lambda: _llm(runtime, daemon)))
    steps.append(("whatsapp_window", lambda: _whatsapp_window(runtime)))
    if daemon is not None:
        steps += [
            ("token_file", lambda: _token(daemon.token_path)),
            ("server_bind", lambda: _server(daemon)),
        ]
    for name, step in steps:
        try:
            check = step()
        except MemvaultError as exc:
            check = Check(name, "error", exc.message)
        except Exception as exc:  # a damaged database, a broken model: the report goes on
            check = Check(name, "error", f"The check failed: {type(exc).__name__}: {exc}.")
        if check is not None:  # None: the check does not apply here
            report.checks.append(check)
    if daemon is not None:
        report.checks.extend(Check(*item) for item in daemon.channel_checks)
    else:
        report.checks.extend(_channels_offline(runtime))
    return report


def _channels_offline(runtime: Runtime) -> list[Check]:
    """Enabled channels when no daemon runs them: is the token there, and who runs them."""
    checks = []
    for name, config in runtime.settings.channels.sections().items():
        if not config.enabled:
            continue
        token_env = getattr(config, "token_env", None)
        try:
            if token_env:
                read_token(name, token_env)
        except ConfigError as exc:
            checks.append(Check(f"channel_{name}", "error", exc.message))
        else:
            checks.append(
                Check(
                    f"channel_{name}",
                    "warning",
                    f"{name} is enabled; it runs inside `memvault serve`, which is not running.",
                )
            )
    return checks
