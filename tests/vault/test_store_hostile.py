"""A hostile vault on real files: links into ``.memvault``, loops, pipes, notes used as folders.

Issue 11, items 3, 9 and 10: nothing under ``.memvault`` is reached through
any path or link; a named pipe, a socket or a device is never opened; every
OSError a user's path can cause is one sentence (a MemvaultError), never a
traceback. Operations that could hang run in a thread with a deadline, so a
regression fails instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memvault
from memvault.errors import (
    ConflictError,
    InvalidInputError,
    MemvaultError,
    NotFoundError,
    UnsafePathError,
    VaultError,
)
from memvault.gateway.doctor import diagnose
from memvault.runtime import Runtime
from memvault.vault.store import Vault
from waiting import WAIT

SECRET = "tok-3f9c1e-never-shown"
APPROVAL = "approve-7d2b-never-shown"

# Links a sync or a git pull could bring, each leading into .memvault one way or another.
LINKS = {
    "Secrets": ".memvault",
    "token.md": ".memvault/token",
    "approval.md": ".memvault/approval-token",
    "config.md": ".memvault/config.toml",
    "chain1.md": "chain2.md",
    "chain2.md": "Secrets/token",
    "loop": ".",
    "Locks": ".memvault/locks",
    "fresh.md": ".memvault/fresh.md",  # dangling: a write would create it
}
INTO_STATE = [
    "Secrets/token",
    "Secrets/approval-token",
    "Secrets/config.toml",
    "Secrets/index.db",
    "Secrets/new.md",
    "token.md",
    "approval.md",
    "config.md",
    "chain1.md",
    "chain2.md",
    "loop/Secrets/token",
    "loop/token.md",
    "loop/loop/config.md",
    "Absolute/token",
    "fresh.md",
    "Locks/x.md",
]


@pytest.fixture
def hostile(vault: Vault) -> Vault:
    """The initialised vault with tokens in .memvault and links into it."""
    (vault.state_dir / "token").write_text(SECRET)
    (vault.state_dir / "approval-token").write_text(APPROVAL)
    for name, target in LINKS.items():
        os.symlink(target, vault.root / name)
    os.symlink(vault.state_dir, vault.root / "Absolute")  # an absolute link
    return vault


def state_files(vault: Vault) -> dict[str, bytes]:
    """Every regular file under .memvault (lock files aside) and its bytes."""
    found: dict[str, bytes] = {}
    for path in sorted(vault.state_dir.rglob("*")):
        if path.is_dir() or path.suffix == ".lock":
            continue
        assert stat.S_ISREG(path.lstat().st_mode), path
        found[path.relative_to(vault.state_dir).as_posix()] = path.read_bytes()
    return found


def bounded(action: Callable[[], Any], pipes: list[Path]) -> Any:
    """Run ``action`` in a thread; fail (and free it) if it does not finish in time."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = action()
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(WAIT)
    if worker.is_alive():
        for pipe in pipes:  # a writer releases a reader blocked in open()
            fd = os.open(pipe, os.O_RDWR | os.O_NONBLOCK)
            os.close(fd)
        worker.join(WAIT)
        pytest.fail(f"{action} blocked on a named pipe")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def attempts(vault: Vault, path: str) -> Iterator[tuple[str, Callable[[], object]]]:
    """Every file operation on ``path``, by name."""
    yield "read", lambda: vault.read_bytes(path)
    yield "read_text", lambda: vault.read_text(path)
    yield "stat", lambda: vault.stat(path)
    yield "exists", lambda: vault.exists(path)
    yield "is_file", lambda: vault.is_file(path)
    yield "write", lambda: vault.write_text(path, "pwned\n")
    yield "create", lambda: vault.create_text(path, "pwned\n")
    yield "append", lambda: vault.append_text(path, "pwned")
    yield "delete", lambda: vault.delete(path)
    yield "move from", lambda: vault.move(path, "Moved.md")
    yield "move to", lambda: vault.move("Home.md", path, overwrite=True)
    yield "list", lambda: vault.list(path)
    yield "folders", lambda: vault.list_folders(path)


# -- item 3: nothing under .memvault through any path or link ---------------------------


@pytest.mark.parametrize("path", INTO_STATE)
def test_no_operation_reaches_memvault_through_a_link(hostile: Vault, path: str) -> None:
    before = state_files(hostile)
    home = (hostile.root / "Home.md").read_bytes()
    for name, attempt in attempts(hostile, path):
        with pytest.raises(UnsafePathError, match=r"\.memvault, memvault's own folder") as err:
            attempt()
        assert SECRET not in str(err.value) and APPROVAL not in str(err.value), name
    assert state_files(hostile) == before
    assert (hostile.root / "Home.md").read_bytes() == home
    assert not (hostile.root / "Moved.md").exists()
    assert all((hostile.root / name).is_symlink() for name in LINKS)


def test_listings_leave_out_links_into_memvault(hostile: Vault) -> None:
    listed = {entry.path for entry in hostile.list(notes_only=False)}
    assert listed.isdisjoint({*LINKS, "Absolute"})
    assert "Home.md" in listed and not any("token" in path for path in listed)
    folders = hostile.list_folders()
    assert "Projects" in folders and "loop" in folders  # the vault itself, seen again
    assert not {"Secrets", "Absolute", "Locks"} & set(folders)
    assert {e.path for e in hostile.list("loop", recursive=False)} >= {"loop/Home.md"}


def test_links_inside_the_vault_still_work(hostile: Vault) -> None:
    os.symlink("Home.md", hostile.root / "Start.md")
    assert hostile.read_text("Start.md") == hostile.read_text("loop/Home.md")
    hostile.write_text("Start.md", "# Home again\n")
    assert (hostile.root / "Start.md").is_symlink()  # written through, the link kept
    assert (hostile.root / "Home.md").read_text() == "# Home again\n"
    assert "Start.md" in {e.path for e in hostile.list()}


def test_a_link_to_another_hidden_folder_is_refused_too(vault: Vault) -> None:
    git = vault.root / ".git"
    git.mkdir()
    (git / "config").write_text("url = https://ada:ghp_secret@example.org/vault.git\n")
    os.symlink(".git/config", vault.root / "remote.md")
    os.symlink(".git", vault.root / "Git")
    for path in ("remote.md", "Git/config", "Git/HEAD.md"):
        with pytest.raises(UnsafePathError, match=re.escape("hidden name '.git'")):
            vault.read_bytes(path)
        with pytest.raises(UnsafePathError, match=re.escape("hidden name '.git'")):
            vault.write_text(path, "x\n")
    assert "remote.md" not in {e.path for e in vault.list(notes_only=False)}
    assert "ghp_secret" in (git / "config").read_text()


def test_a_rebuilt_index_holds_no_token_and_skips_pipes(runtime: Runtime) -> None:
    vault = runtime.vault
    (vault.state_dir / "token").write_text(SECRET)
    for name, target in LINKS.items():
        os.symlink(target, vault.root / name)
    os.mkfifo(vault.root / "x.md")
    os.mkfifo(vault.root / "Projects" / "pipe.md")
    (vault.root / "Projects" / "Apollo.md").write_text("# Apollo\nLaunch window in May.\n")
    pipes = [vault.root / "x.md", vault.root / "Projects" / "pipe.md"]

    report = bounded(runtime.index.rebuild, pipes)
    assert "Projects/Apollo.md" in report.added
    assert not {*LINKS, "x.md", "Projects/pipe.md"} & {*report.added, *report.skipped}
    paths = {str(r["path"]) for r in runtime.index.conn.execute("SELECT path FROM notes")}
    assert not {*LINKS, "x.md"} & paths
    assert runtime.searcher.search(SECRET, mode="keyword") == []
    assert runtime.searcher.search("launch window", mode="keyword")
    assert bounded(lambda: runtime.index.sync_paths([*LINKS, "x.md"]), pipes).touched == 0
    checks = bounded(lambda: diagnose(runtime), pipes).to_dict()["checks"]
    assert SECRET not in json.dumps(checks)
    assert all(stat.S_ISFIFO(p.lstat().st_mode) for p in pipes)


# -- item 9: pipes, sockets and devices are never opened ---------------------------------


def test_a_named_pipe_is_skipped_and_refused_never_opened(runtime: Runtime) -> None:
    vault = runtime.vault
    pipe = vault.root / "x.md"
    os.mkfifo(pipe)
    os.symlink("x.md", vault.root / "to-pipe.md")
    assert not {"x.md", "to-pipe.md"} & {e.path for e in vault.list(notes_only=False)}
    for path in ("x.md", "to-pipe.md", "x"):
        for name, attempt in [
            ("read", lambda path=path: runtime.notes.read(path)),
            ("append", lambda path=path: runtime.notes.append(path, "hello")),
            ("write", lambda path=path: runtime.notes.write(path, "hello")),
            ("delete", lambda path=path: runtime.notes.delete(path)),
            ("move", lambda path=path: runtime.notes.move(path, "Elsewhere.md")),
        ]:
            with pytest.raises(InvalidInputError, match="not a regular file but a named pipe"):
                bounded(attempt, [pipe])
            assert name
    with pytest.raises(InvalidInputError, match="not a regular file"):
        bounded(lambda: vault.read_bytes("x.md"), [pipe])
    with pytest.raises(InvalidInputError, match=re.escape("x.md is not a folder")):
        bounded(lambda: vault.list("x.md"), [pipe])
    assert stat.S_ISFIFO(pipe.lstat().st_mode)
    assert not (vault.root / "Elsewhere.md").exists()


def test_a_socket_and_a_device_are_skipped_and_refused(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = runtime.vault
    monkeypatch.chdir(vault.root)  # a socket path must be short
    server = socket.socket(socket.AF_UNIX)
    server.bind("sock.md")
    special = ["sock.md"]
    try:
        os.mknod(vault.root / "null.md", stat.S_IFCHR | 0o600, os.makedev(1, 3))
        special.append("null.md")
    except PermissionError:
        pass  # creating a device needs root; the socket still covers the class
    try:
        assert not set(special) & {e.path for e in vault.list(notes_only=False)}
        for path in special:
            for attempt in (
                lambda path=path: runtime.notes.read(path),
                lambda path=path: runtime.notes.append(path, "hello"),
                lambda path=path: vault.write_text(path, "hello\n"),
            ):
                with pytest.raises(InvalidInputError, match="is not a regular file"):
                    bounded(attempt, [])
    finally:
        server.close()


# -- item 10: every OSError a path can cause is one sentence ---------------------------------


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (not following links) and what it is."""
    return {
        p.relative_to(root).as_posix(): stat.filemode(p.lstat().st_mode)
        for p in root.rglob("*")
        if ".memvault" not in p.parts
    }


def test_a_symlink_loop_is_a_sentence(vault: Vault) -> None:
    os.symlink("b.md", vault.root / "a.md")
    os.symlink("a.md", vault.root / "b.md")
    os.symlink("Cycle", vault.root / "Cycle")
    before = tree(vault.root)
    for path in ("a.md", "b.md", "Cycle/x.md"):
        for name, attempt in attempts(vault, path):
            with pytest.raises(UnsafePathError, match="symlink loop"):
                attempt()
            assert name
    assert not {"a.md", "b.md", "Cycle"} & {e.path for e in vault.list(notes_only=False)}
    assert "Cycle" not in vault.list_folders()
    assert tree(vault.root) == before


def test_a_note_used_as_a_folder_is_a_sentence(runtime: Runtime) -> None:
    vault = runtime.vault
    before = tree(vault.root)
    home = "Home.md is a note, not a folder, so Home.md/x.md cannot be inside it"
    for attempt in (
        lambda: vault.write_text("Home.md/x.md", "x\n"),
        lambda: vault.write_text("Home.md/x.md", "x\n", overwrite=False),
        lambda: vault.create_text("Home.md/x.md", "x\n"),
        lambda: vault.append_text("Home.md/x.md", "x"),
        lambda: runtime.notes.write("Home.md/x", "x"),
        lambda: runtime.notes.append("Home.md/x.md", "x"),
        lambda: vault.move("MEMORY.md", "Home.md/x.md"),
    ):
        with pytest.raises(InvalidInputError, match=re.escape(home)):
            attempt()
    with pytest.raises(
        InvalidInputError, match=re.escape("Home.md is a note, not a folder, so Home.md/a")
    ):
        vault.write_text("Home.md/a/b/c.md", "x\n")
    with pytest.raises(NotFoundError, match=re.escape("No note at Home.md/x.md")):
        runtime.notes.read("Home.md/x.md")
    with pytest.raises(InvalidInputError, match=re.escape(home)):
        vault.read_bytes("Home.md/x.md")
    with pytest.raises(InvalidInputError, match=re.escape("Home.md is a note, not a folder")):
        vault.list("Home.md")
    with pytest.raises(InvalidInputError, match="Projects is a folder, not a note"):
        vault.write_text("Projects", "x\n")
    with pytest.raises(InvalidInputError, match="Projects is a folder, not a note"):
        vault.append_text("Projects", "x")
    assert tree(vault.root) == before


def test_an_existing_note_is_still_a_conflict(vault: Vault) -> None:
    with pytest.raises(ConflictError, match=re.escape("Home.md already exists")):
        vault.write_text("Home.md", "x\n", overwrite=False)
    assert vault.create_text("Home.md", "x\n") is False


def test_a_path_too_long_for_the_filesystem_is_a_sentence(vault: Vault) -> None:
    part = "\U0001d11e" * 63  # 252 bytes: a valid name, but 16 of them pass PATH_MAX
    path = "/".join([part] * 15 + [part[:60]]) + ".md"
    assert len(path) <= 1024 and len(os.fsencode(vault.root / path)) > 4096
    before = tree(vault.root)
    for attempt in (
        lambda: vault.write_text(path, "x\n"),
        lambda: vault.append_text(path, "x"),
        lambda: vault.read_bytes(path),
    ):
        with pytest.raises(UnsafePathError, match="too long for the vault's filesystem"):
            attempt()
    assert tree(vault.root) == before


_DENIED = """
import json, os, sys
from memvault.errors import MemvaultError
from memvault.vault.store import Vault
vault = Vault(__import__("pathlib").Path(sys.argv[1]))
results = {}
for name, attempt in [
    ("read", lambda: vault.read_bytes("Locked/secret.md")),
    ("list", lambda: vault.list("Locked")),
    ("write", lambda: vault.write_text("Sealed/new.md", "x\\n")),
    ("append", lambda: vault.append_text("Sealed/new.md", "x")),
    ("delete", lambda: vault.delete("Sealed/old.md")),
    ("move", lambda: vault.move("Sealed/old.md", "moved.md")),
]:
    try:
        attempt()
        results[name] = ["ok", ""]
    except MemvaultError as exc:
        results[name] = [type(exc).__name__, str(exc)]
    except BaseException as exc:
        results[name] = ["crash " + type(exc).__name__, str(exc)]
print(json.dumps(results))
"""


def test_permission_denied_is_a_vault_error() -> None:
    root = Path(tempfile.mkdtemp(prefix="mv-denied-"))  # not under pytest's private folder
    try:
        (root / "Locked").mkdir()
        (root / "Locked" / "secret.md").write_text("x\n")
        (root / "Sealed").mkdir()
        (root / "Sealed" / "old.md").write_text("x\n")
        os.chmod(root / "Locked", 0o000)
        os.chmod(root / "Sealed", 0o555)
        command = [sys.executable, "-c", _DENIED, str(root)]
        if os.geteuid() == 0:  # root ignores permission bits unless it gives up the power
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("running as root without setpriv: cannot be denied permission")
            command = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *command]
        src = str(Path(memvault.__file__).parents[1])  # the memvault this test imports
        env = {**os.environ, "PYTHONPATH": src}
        done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT, env=env)
        assert done.returncode == 0, done.stderr
        results = json.loads(done.stdout)
        for name, (kind, message) in results.items():
            assert kind == VaultError.__name__, (name, kind, message)
            assert message.startswith("Permission denied: memvault cannot"), message
            assert "Traceback" not in message and message.endswith("."), message
        assert sorted(p.name for p in (root / "Sealed").iterdir()) == ["old.md"]
    finally:
        os.chmod(root / "Locked", 0o755)
        os.chmod(root / "Sealed", 0o755)
        shutil.rmtree(root)


def test_every_refusal_is_one_sentence(hostile: Vault) -> None:
    os.symlink("b.md", hostile.root / "a.md")
    os.symlink("a.md", hostile.root / "b.md")
    os.mkfifo(hostile.root / "x.md")
    for path in [*INTO_STATE, "a.md", "Home.md/x.md", "x.md", "Projects"]:
        for name, attempt in attempts(hostile, path):
            try:
                bounded(attempt, [hostile.root / "x.md"])
            except MemvaultError as exc:
                message = exc.message
                assert message.endswith(".") and "\n" not in message, (path, name, message)
                assert "Errno" not in message, (path, name, message)


def test_the_watcher_drops_changes_seen_through_a_link_into_memvault(hostile: Vault) -> None:
    from watchfiles import Change

    from memvault.index.watch import VaultFilter

    accept = VaultFilter(hostile)
    root = hostile.root
    for path in ("Secrets/index.db-wal", "Absolute/token", "loop/Secrets/config.toml", "token.md"):
        assert not accept(Change.modified, str(root / path)), path
    for path in ("Home.md", "loop/Home.md", "Projects/New.md"):
        assert accept(Change.modified, str(root / path)), path
    assert not accept(Change.modified, str(root / ".memvault" / "index.db"))
