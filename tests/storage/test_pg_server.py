"""The tests' own PostgreSQL: built for any x86-64 processor, checked before use, and a
crash in the middle of a session is one failure, not the rest of the session."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from pg_server import (
    DISPATCHED,
    BrokenServerError,
    TemporaryPostgres,
    beyond_baseline,
    server_bin,
)

# The crash a pgvector built for another processor causes (SIGILL in CREATE INDEX ...
# USING hnsw), planted as SIGSEGV: an event trigger kills the server process that runs
# CREATE INDEX (COPY TO PROGRAM's shell is its child: $PPID).
CRASH_ON_CREATE_INDEX = (
    "CREATE FUNCTION crash_on_create_index() RETURNS event_trigger LANGUAGE plpgsql AS $$"
    " BEGIN COPY (SELECT 1) TO PROGRAM 'kill -SEGV $PPID'; END $$",
    "CREATE EVENT TRIGGER crash_on_create_index ON ddl_command_start"
    " WHEN TAG IN ('CREATE INDEX') EXECUTE FUNCTION crash_on_create_index()",
)


def pg_config(bindir: Path, what: str) -> Path:
    out = subprocess.run([bindir / "pg_config", what], check=True, capture_output=True)
    return Path(out.stdout.decode().strip())


def test_the_test_server_needs_only_x86_64_v2(pg: TemporaryPostgres) -> None:
    """Outside the functions picked at run time after asking the CPU, neither the server
    nor any library it loads (pgvector above all) needs AVX, AVX2, AVX-512 or BMI."""
    libraries = sorted(pg_config(pg.bindir, "--pkglibdir").glob("*.so"))
    vector = pg_config(pg.bindir, "--pkglibdir") / "vector.so"
    assert vector in libraries
    unguarded = {}
    for binary in [pg.bindir / "postgres", *libraries]:
        for function, used in beyond_baseline(binary).items():
            if not DISPATCHED.search(function):
                unguarded[f"{binary.name}:{function}"] = sorted(used)
    assert unguarded == {}, f"needs more than x86-64-v2 without asking the CPU: {unguarded}"
    # pgvector's own dispatch is there (its FMA, F16C and AVX-512 variants), and only it.
    assert beyond_baseline(vector), "the check must see pgvector's dispatched variants"


def test_the_check_sees_what_a_native_build_uses(tmp_path: Path) -> None:
    """The instruction check can fail: a loop built for AVX2 is caught, the same loop
    built for the baseline is not."""
    source = tmp_path / "cosine.c"
    source.write_text(
        textwrap.dedent(
            """\
            float dot(const float *a, const float *b, int n) {
                float sum = 0;
                for (int i = 0; i < n; i++) sum += a[i] * b[i];
                return sum;
            }
            """
        )
    )
    gcc = shutil.which("gcc")
    assert gcc, "make install needs gcc (it builds pgvector)"
    native, baseline = tmp_path / "native.o", tmp_path / "baseline.o"
    flags = ["-O3", "-ffast-math", "-c", str(source), "-o"]
    subprocess.run([gcc, "-mavx2", "-mfma", *flags, native], check=True)
    subprocess.run([gcc, "-march=x86-64-v2", *flags, baseline], check=True)
    assert "dot" in beyond_baseline(native)
    assert any(m.startswith("vfmadd") for m in beyond_baseline(native)["dot"])
    assert beyond_baseline(baseline) == {}


class CrashingPostgres(TemporaryPostgres):
    """A server whose every CREATE INDEX kills the server process running it."""

    setup_sql = CRASH_ON_CREATE_INDEX


def test_a_server_that_dies_building_an_hnsw_index_is_one_sentence() -> None:
    bindir = server_bin()
    assert bindir is not None
    with CrashingPostgres(bindir) as server, pytest.raises(BrokenServerError) as caught:
        server.start()
    message = str(caught.value)
    assert message.startswith("The test PostgreSQL (")
    assert "cannot build a pgvector HNSW index: its server log says 'server process (PID " in (
        message
    )
    assert "was terminated by signal 11: Segmentation fault, running CREATE INDEX ON " in message
    assert message.endswith(
        "a pgvector compiled for another processor does this (run `make install` to build "
        "it on this machine)."
    )
    assert "\n" not in message


# -- a whole session, as pytest runs it --------------------------------------------------

CRASHING_CONFTEST = """
from pg_server import TemporaryPostgres

TemporaryPostgres.setup_sql = {statements!r}
"""


def run_session(pytester: pytest.Pytester, *options: str, **modules: str) -> pytest.RunResult:
    """``modules`` as a pytest session of their own, with the PostgreSQL fixtures (in one
    process unless ``options`` ask for xdist's workers)."""
    tests = str(Path(__file__).parents[1])
    pytester.makepyfile(**{name: textwrap.dedent(text) for name, text in modules.items()})
    pytester.syspathinsert(tests)
    with pytest.MonkeyPatch.context() as env:
        # Under CI (CI or BUILD_NUMBER set) pytest prints each summary line whole, so a
        # sentence would appear twice; the session prints as on a terminal either way.
        env.delenv("CI", raising=False)
        env.delenv("BUILD_NUMBER", raising=False)
        return pytester.runpytest_subprocess(
            "-p", "pg_fixtures", "-p", "no:cacheprovider", "-o", f"pythonpath={tests}",
            *(options or ("-p", "no:xdist")),
        )  # fmt: skip


USES_A_DATABASE = """
    import psycopg

    def test_uses_a_database(database):
        with psycopg.connect(database) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    """


def test_a_broken_server_ends_the_session_once_with_one_sentence(
    pytester: pytest.Pytester,
) -> None:
    result = run_session(
        pytester,
        conftest=CRASHING_CONFTEST.format(statements=CRASH_ON_CREATE_INDEX),
        test_one=USES_A_DATABASE,
        test_two=USES_A_DATABASE.replace("test_uses", "test_also_uses"),
    )
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert result.parseoutcomes() == {"errors": 1}, output  # one test, then the session stops
    assert output.count("cannot build a pgvector HNSW index: its server log says") == 1, output
    assert "terminated by signal 11: Segmentation fault" in output
    assert "Interrupted: the test PostgreSQL is broken (the error above says how)" in output
    assert "not yet accepting connections" not in output and "Lost the connection" not in output


def test_a_broken_server_stops_xdist_workers_cleanly(pytester: pytest.Pytester) -> None:
    result = run_session(
        pytester,
        "-n",
        "2",
        conftest=CRASHING_CONFTEST.format(statements=CRASH_ON_CREATE_INDEX),
        **{f"test_{n}": USES_A_DATABASE.replace("test_uses", f"test_{n}_uses") for n in "abcd"},
    )
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert "INTERNALERROR" not in output
    # One error per worker at most (each has its own server), never a test passed on it.
    assert result.parseoutcomes().get("errors") in (1, 2) and " passed" not in output, output
    assert "Interrupted: the test PostgreSQL is broken (the error above says how)" in output


def test_a_backend_killed_mid_session_is_one_failure_and_the_next_module_has_a_server(
    pytester: pytest.Pytester,
) -> None:
    result = run_session(
        pytester,
        test_a_crash="""
            import os
            import signal
            import time

            import psycopg

            def test_kills_its_server_process(pg, database):
                with psycopg.connect(database, autocommit=True) as conn:
                    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
                    os.kill(pid, signal.SIGSEGV)
                # The postmaster logs the crash once it has reaped the process.
                while "terminated by signal 11" not in pg.log():
                    time.sleep(0.05)
            """,
        test_b_after=USES_A_DATABASE,
    )
    outcomes = result.parseoutcomes()
    output = result.stdout.str()
    assert outcomes.get("passed") == 2 and outcomes.get("errors") == 1, output
    assert "ERROR at teardown of test_kills_its_server_process" in output
    assert output.count("A PostgreSQL server process died during") == 1, output
    assert "died during test_a_crash.py::test_kills_its_server_process: the server log says " in (
        output
    )
    assert "was terminated by signal 11: Segmentation fault" in output
    assert "test_b_after.py::test_uses_a_database PASSED" in output or (
        "test_b_after.py ." in output
    )
