"""``memvault serve`` as a real process, found through its ``daemon.json``: start, kill, stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from memvault.gateway.client import DaemonInfo, read_info
from memvault.locations import MODEL_CACHE_ENV


def daemon_env(**extra: str) -> dict[str, str]:
    """The caller's environment without MEMVAULT_* settings (the model cache kept), plus
    ``extra``; no embedding model loads unless ``extra`` says otherwise."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_") or k == MODEL_CACHE_ENV
    }
    env["MEMVAULT_EMBEDDER__PROVIDER"] = "none"
    return {**env, **extra}


class DaemonProcess:
    """``memvault --vault VAULT serve ARGS`` (on ``--port 0`` unless ARGS name a port),
    up once its daemon.json names its pid."""

    def __init__(
        self,
        vault: Path,
        *args: str,
        env: dict[str, str] | None = None,
        start_timeout: float = 60,
    ) -> None:
        self.vault = vault
        command = [sys.executable, "-m", "memvault", "--vault", str(vault), "serve", *args]
        if "--port" not in args:
            command += ["--port", "0"]
        self.process = subprocess.Popen(
            command,
            env=env or daemon_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + start_timeout
        while True:
            info = read_info(vault)
            if info is not None and info.pid == self.process.pid:
                break
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                _, err = self.process.communicate(timeout=10)
                pytest.fail(f"memvault serve did not start: {err[-2000:]}")
            time.sleep(0.02)
        self.info: DaemonInfo = info
        self.url = info.url
        self.token = (vault / ".memvault/token").read_text().strip()

    def client(self, timeout: float = 10) -> httpx.Client:
        """An HTTP client with the daemon's token."""
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=timeout
        )

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind runs."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        """Send ``sig`` and wait; the exit code and what the daemon wrote to stderr.

        A daemon still running after a minute is killed and the test fails.
        """
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            _, err = self.process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate(timeout=10)
            pytest.fail(f"the daemon did not exit after signal {sig}: {err[-2000:]}")
        return self.process.returncode, err
