"""What a newcomer met (issue 11: items 12, 13, 16, 17, 18); real processes for the CLI.

A folder that is not a vault is refused and left as it was; a read-only vault
answers reads and refuses writes with exit 5 (run as a user the permission
bits bind, also under root); the demo runs twice; a duplicate is a conflict;
``--direct`` after the command, the exit codes in the docs, the model-load
notice, plurals, and a quiet Ctrl-C in ``watch``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_support import (
    EXIT_CONFLICT,
    EXIT_VAULT,
    clean_env,
    fail,
    ok,
    ok_json,
    snapshot,
)
from memvault.config import Settings
from memvault.errors import EXIT_CODES, MemvaultError, VaultError
from memvault.index.local_model import ModelFile
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from memvault.vocabulary import counted
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(5 * WAIT)  # a hang guard: the demo runs twice, each bounded

REPO = Path(__file__).resolve().parents[2]
MEMVAULT = [sys.executable, "-m", "memvault"]
NOT_A_VAULT = "is not a memvault vault; run `memvault init"


def _env(embedder: str = "none", **extra: str) -> dict[str, str]:
    """This process's environment with a clean MEMVAULT_* set (see cli_support.clean_env)."""
    env = dict(os.environ)
    for key, value in clean_env(None, embedder, extra).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run(
    vault: Path, *args: str, embedder: str = "none", timeout: float = WAIT, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``memvault --vault VAULT ARGS`` as its own process."""
    return subprocess.run(
        [*MEMVAULT, "--vault", str(vault), *args],
        env=_env(embedder, **extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` (hidden ones, folders and derived files too), with its bytes."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes().hex() if p.is_file() else "/")
        for p in sorted(root.rglob("*"))
    }


def one_sentence(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: ") and lines[0].endswith("."), lines
    assert "Internal error" not in stderr and "Traceback" not in stderr
    return lines[0]


# -- 12: a folder that is not a vault ------------------------------------------------------


@pytest.fixture
def downloads(tmp_path: Path) -> Path:
    """A folder someone keeps other things in."""
    folder = tmp_path / "Downloads"
    (folder / "photos").mkdir(parents=True)
    (folder / "notes.md").write_text("# My own notes\n", encoding="utf-8")
    (folder / "photos/cat.jpg").write_bytes(b"\xff\xd8\xff")
    return folder


def test_a_folder_that_is_not_a_vault_is_refused_and_left_untouched(downloads: Path) -> None:
    before = tree(downloads)
    ran = run(downloads, "remember", "x")
    assert ran.returncode == EXIT_VAULT, ran.stderr
    assert NOT_A_VAULT in one_sentence(ran.stderr)
    assert ran.stdout == ""
    assert tree(downloads) == before  # no .memvault, no Memory/


@pytest.mark.parametrize(
    "args",
    [
        ("memories",),
        ("get", "m-00000000"),
        ("forget", "m-00000000"),
        ("search", "x", "--keyword"),
        ("recall", "x"),
        ("context",),
        ("index",),
        ("status",),
        ("task", "add", "Buy milk"),
        ("contact", "list"),
        ("note", "write", "a.md", "--content", "hello"),
        ("journal", "add", "hello"),
        ("tools", "call", "vault_list"),
        ("watch",),
        ("serve", "--port", "0"),
        ("mcp",),
    ],
)
def test_every_entry_point_refuses_a_folder_that_is_not_a_vault(
    downloads: Path, args: tuple[str, ...]
) -> None:
    before = tree(downloads)
    assert NOT_A_VAULT in fail(downloads, *args, code=EXIT_VAULT)
    assert tree(downloads) == before


def test_autostart_starts_no_daemon_in_a_folder_that_is_not_a_vault(downloads: Path) -> None:
    before = tree(downloads)
    message = fail(
        downloads, "search", "x", code=EXIT_VAULT, embedder="local",
        env={"MEMVAULT_CLI__AUTOSTART": "true"},
    )  # fmt: skip
    assert NOT_A_VAULT in message
    assert tree(downloads) == before  # no daemon.lock, no daemon.log


def test_doctor_reports_a_folder_that_is_not_a_vault_without_making_it_one(
    downloads: Path,
) -> None:
    before = tree(downloads)
    report = run(downloads, "doctor", "--json")
    assert report.returncode == 1
    assert NOT_A_VAULT in report.stdout
    assert tree(downloads) == before


def test_the_library_refuses_too_unless_asked_to_create(downloads: Path) -> None:
    before = tree(downloads)
    with pytest.raises(VaultError, match="is not a memvault vault"):
        Runtime.open(Settings(vault=downloads))
    assert tree(downloads) == before
    runtime = Runtime.open(Settings(vault=downloads), create=True)
    try:
        assert runtime.memories.remember("made on purpose").created
    finally:
        runtime.close()
    assert (downloads / "notes.md").read_text(encoding="utf-8") == "# My own notes\n"
    assert (downloads / ".memvault/config.toml").is_file()


def test_init_makes_a_folder_a_vault_and_vaults_of_older_versions_keep_working(
    downloads: Path, tmp_path: Path
) -> None:
    ok(downloads, "init")
    ok(downloads, "remember", "Kept in my downloads")
    # An older memvault made no config.toml outside init: an index is enough to be a vault.
    older = tmp_path / "older"
    shutil.copytree(downloads, older)
    for name in ("config.toml", ".gitignore"):
        (older / ".memvault" / name).unlink()
    assert (older / ".memvault/index.db").is_file()
    assert ok_json(older, "memories")[0]["text"] == "Kept in my downloads"
    ok(older, "remember", "Still works")


# -- 13: a read-only vault -----------------------------------------------------------------


def _restricted() -> list[str] | None:
    """A command prefix under which permission bits bind, or None where none can be had.

    Root ignores permission bits: there setpriv drops the capabilities that let it
    (DAC override and read-search, owner override), so root meets the bits like anyone.
    """
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner"]
    probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"memvault-probe-{os.getpid()}"
    probe.mkdir(mode=0o555)
    attempt = f"""
try:
    open({str(probe / "x")!r}, "w")
except PermissionError:
    print("denied")
"""
    try:
        tried = subprocess.run(
            [*prefix, sys.executable, "-c", attempt], capture_output=True, text=True, timeout=WAIT
        )
    finally:
        probe.rmdir()
    return prefix if tried.returncode == 0 and tried.stdout == "denied\n" else None


@pytest.fixture(scope="module")
def restricted() -> list[str]:
    prefix = _restricted()
    if prefix is None:
        pytest.skip("running as root without setpriv: permission bits cannot be made to bind")
    return prefix


@pytest.fixture
def read_only_vault(tmp_path: Path) -> Iterator[Path]:
    """A vault with a memory, a task, an index and a state database, then chmod -R a-w."""
    root = tmp_path / "vault"
    ok(None, "init", root)
    ok(root, "remember", "The harbour fee is paid in March", "--category", "fact")
    ok(root, "task", "add", "Water the plants")
    ok(root, "index")
    runtime = Runtime.open(Settings(vault=root))
    runtime.state.set_meta("made", "by the test")
    runtime.close()
    subprocess.run(["chmod", "-R", "a-w", str(root)], check=True)
    yield root
    subprocess.run(["chmod", "-R", "u+w", str(root)], check=True)


def run_restricted(prefix: list[str], vault: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, *MEMVAULT, "--vault", str(vault), *args],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=WAIT,
    )


def test_a_read_only_vault_answers_reads_and_refuses_writes_in_one_sentence(
    read_only_vault: Path, restricted: list[str]
) -> None:
    before = tree(read_only_vault)
    for args in (
        ("remember", "x"),
        ("task", "add", "Another"),
        ("journal", "add", "hello"),
        ("index",),
    ):
        ran = run_restricted(restricted, read_only_vault, *args)
        assert ran.returncode == EXIT_VAULT, (args, ran.stderr)
        assert "read-only" in one_sentence(ran.stderr) or "Permission denied" in ran.stderr
    notice = "cannot be updated (the vault is read-only for this user); searching a copy"
    for args, expected in (
        (("search", "harbour fee"), "harbour fee"),
        (("recall", "harbour"), "harbour fee"),
        (("context", "--query", "harbour"), "harbour fee"),
        (("memories",), "harbour fee"),
        (("task", "list"), "Water the plants"),
        (("note", "read", "Home.md"), "# Home"),
        (("note", "list"), "Home.md"),
        (("status",), "Memories"),
    ):
        ran = run_restricted(restricted, read_only_vault, *args)
        assert ran.returncode == 0, (args, ran.stderr)
        assert expected in ran.stdout, args
        assert "Error" not in ran.stderr and "Internal error" not in ran.stderr, args
        if args[0] in ("search", "recall", "context"):
            assert ran.stderr.count(notice) == 1, ran.stderr  # one line says so
    doctor = run_restricted(restricted, read_only_vault, "doctor")
    assert doctor.returncode == 1 and "Internal error" not in doctor.stderr
    assert "Cannot write in" in doctor.stdout
    assert tree(read_only_vault) == before  # not a byte written, not a lock file made


def test_a_read_only_vault_without_its_index_is_still_searched(
    tmp_path: Path, restricted: list[str]
) -> None:
    root = tmp_path / "vault"
    ok(None, "init", root)
    (root / "Ideas.md").write_text("# Ideas\nA lighthouse on the jetty.\n", encoding="utf-8")
    (root / ".memvault/index.db").unlink()  # deleted, as the README allows: it is derived
    subprocess.run(["chmod", "-R", "a-w", str(root)], check=True)
    try:
        ran = run_restricted(restricted, root, "search", "lighthouse", "--json")
        assert ran.returncode == 0, ran.stderr
        assert "Ideas.md" in ran.stdout
        assert not (root / ".memvault/index.db").exists()
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(root)], check=True)


# -- 16: the demo runs twice ---------------------------------------------------------------


def test_the_demo_can_be_run_again_on_its_vault(tmp_path: Path) -> None:
    vault = tmp_path / "demo-vault"
    memvault = Path(sys.executable).parent / "memvault"
    env = _env(DEMO_NO_SERVE="1", MEMVAULT=str(memvault))
    outputs = []
    for _ in range(2):
        ran = subprocess.run(
            ["bash", str(REPO / "scripts/demo.sh"), str(vault)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=2 * WAIT,  # a dozen commands
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "Error" not in ran.stdout + ran.stderr
        outputs.append(ran.stdout)
    assert [p.name for p in (vault / "Tasks/active").iterdir()] == ["Renew the TLS certificate.md"]
    assert [p.name for p in (vault / "Contacts").iterdir()] == ["Ada Lovelace.md"]
    assert "1 task\n" in outputs[1] and "3 memories\n" in outputs[1]
    assert len(outputs[1].splitlines()) == len(outputs[0].splitlines())  # the same shape


# -- 17: one rule for duplicates -----------------------------------------------------------


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    return root


def test_a_duplicate_is_a_conflict_that_says_what_exists(vault_dir: Path) -> None:
    ok(vault_dir, "task", "add", "Renew the TLS certificate")
    ok(vault_dir, "contact", "add", "Ada Lovelace", "--id", "telegram=123456")
    ok(vault_dir, "project", "add", "Apollo")
    ok(vault_dir, "note", "write", "Ideas.md", "--content", "first")
    before = snapshot(vault_dir)
    for args, words in (
        (
            ("task", "add", "renew the TLS certificate"),
            "A task named 'renew the TLS certificate' already exists "
            "(Tasks/active/Renew the TLS certificate.md); change it with `memvault task update`",
        ),
        (
            ("contact", "add", "Ada Lovelace"),
            "A contact named 'Ada Lovelace' already exists (Contacts/Ada Lovelace.md)",
        ),
        (
            ("contact", "add", "Charles", "--id", "telegram=123456"),
            "telegram 123456 already belongs to Ada Lovelace (Contacts/Ada Lovelace.md)",
        ),
        (("project", "add", "apollo"), "A project named 'apollo' already exists"),
        (("note", "write", "Ideas.md", "--content", "x", "--no-overwrite"), "already exists"),
    ):
        assert words in fail(vault_dir, *args, code=EXIT_CONFLICT), args
    ok(vault_dir, "task", "add", "Water the plants")
    message = fail(
        vault_dir, "task", "update", "Water the plants", "title", "Renew the TLS certificate",
        code=EXIT_CONFLICT,
    )  # fmt: skip
    assert "A task named 'Renew the TLS certificate' already exists" in message
    after = snapshot(vault_dir)
    assert {k: v for k, v in after.items() if "Water the plants" not in k} == before


# -- 18: --direct anywhere, exit codes, the model-load notice, plurals, watch --------------


def test_direct_and_no_autostart_work_after_the_command_name(vault_dir: Path) -> None:
    ran = run(vault_dir, "remember", "Placed after the command", "--direct")
    assert ran.returncode == 0 and ran.stdout.startswith("Remembered "), ran.stderr
    for args in (
        ("memories", "--direct"),
        ("search", "placed", "--direct", "--no-autostart"),
        ("recall", "placed", "--no-autostart", "--direct"),
        ("context", "--direct", "--no-autostart"),
        ("doctor", "--direct"),
        ("tools", "call", "vault_list", "--direct", "--no-autostart"),
    ):
        ok(vault_dir, *args)
    assert "No memory" in fail(vault_dir, "get", "m-00000000", "--direct", code=3)
    assert "No memory" in fail(vault_dir, "forget", "m-00000000", "--direct", code=3)


def test_every_exit_code_is_documented_in_one_table() -> None:
    # The table moved from README.md to the documentation's page (issue 34).
    page = (REPO / "docs/exit-codes.md").read_text(encoding="utf-8")
    section = page.split("# Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+?) \|$", section, flags=re.MULTILINE)
    documented = {int(code) for code, _ in rows}
    assert documented == set(EXIT_CODES), "docs/exit-codes.md's table and errors.EXIT_CODES"
    # Every error class's code is in the table (classes of every layer, imported here).
    import memvault.cli.app
    import memvault.gateway.autostart
    import memvault.gateway.client
    import memvault.index.index
    import memvault.llm.base

    pending: list[type[MemvaultError]] = [MemvaultError]
    while pending:
        cls = pending.pop()
        if isinstance(cls.exit_code, int):  # RemoteError's follows the HTTP status (below)
            assert cls.exit_code in documented, cls
        pending.extend(cls.__subclasses__())
    assert set(memvault.gateway.client.RemoteError._EXIT_CODES.values()) <= documented
    # And every literal exit status the CLI raises.
    for source in (REPO / "src/memvault/cli").glob("*.py"):
        for code in re.findall(r"typer\.Exit\((\d+)", source.read_text(encoding="utf-8")):
            assert int(code) in documented, (source.name, code)


def test_index_says_the_model_is_loading(vault_dir: Path, prepared_model: ModelFile) -> None:
    ok(vault_dir, "remember", "The lighthouse keeper waves at nine")
    ran = run(vault_dir, "index", embedder="local")
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.startswith("Loading the embedding model (all-MiniLM-L6-v2) ...\n")
    assert "Embedded " in ran.stdout


def test_counts_agree_with_their_nouns(vault_dir: Path) -> None:
    assert [counted(n, "memory") for n in (0, 1, 2)] == ["0 memories", "1 memory", "2 memories"]
    assert counted(1, "day") == "1 day" and counted(3, "day") == "3 days"
    ok(vault_dir, "remember", "The only boat is called Halcyon")
    assert "1 memory\n" in ok(vault_dir, "memories").stdout
    assert "1 result for 'Halcyon'" in ok(vault_dir, "search", "Halcyon").stdout
    ok(vault_dir, "task", "add", "Sail")
    assert "1 task\n" in ok(vault_dir, "task", "list").stdout
    ok(vault_dir, "project", "add", "Voyage")
    assert ok(vault_dir, "project", "link", "Voyage", "Sail").stdout == "Voyage now lists 1 task.\n"
    assert "1 note\n" in ok(vault_dir, "note", "list", "Projects").stdout
    indexed = ok(vault_dir, "index").stdout
    assert re.match(r"Indexed \d+ notes", indexed) and " 1 notes" not in indexed


def test_ctrl_c_stops_watch_quietly(vault_dir: Path) -> None:
    ok(vault_dir, "index")  # the watcher's first sync then finds nothing to report
    # SIGINT's default handling, as from a terminal, whatever the worker left (see
    # test_cli_agent.AS_FROM_A_TERMINAL).
    reset = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT]); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    watcher = subprocess.Popen(
        [sys.executable, "-c", reset, *MEMVAULT, "--vault", str(vault_dir), "watch"],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().startswith("Watching ")
        # Past the first sync, into the library's watch loop: its inotify watch is open.
        wait_for(lambda: _watching(watcher.pid), "the watch loop to start")
        watcher.send_signal(signal.SIGINT)
        out, err = watcher.communicate(timeout=WAIT)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.communicate(timeout=WAIT)
    assert watcher.returncode == 0, err
    assert out == "Stopped watching.\n"
    assert err == ""  # no "KeyboardInterrupt caught, stopping watch"


def _watching(pid: int) -> bool:
    """Whether process ``pid`` has an inotify instance open (True where /proc cannot tell)."""
    descriptors = Path(f"/proc/{pid}/fd")
    if not descriptors.exists():
        return True
    for descriptor in descriptors.iterdir():
        try:
            if os.readlink(descriptor) == "anon_inode:inotify":
                return True
        except OSError:  # closed meanwhile
            continue
    return False
