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

from memvault.gateway.client import read_info
from memvault.locations import MODEL_CACHE_ENV


def daemon_env() -> dict[str, str]:
    """The caller's environment without MEMVAULT_* settings; no embedding model loads."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_") or k == MODEL_CACHE_ENV
    }
    env["MEMVAULT_EMBEDDER__PROVIDER"] = "none"
    return env


class DaemonProcess:
    """``memvault --vault VAULT serve --port 0``, up once its daemon.json names its pid."""

    def __init__(self, vault: Path, *, start_timeout: float = 60) -> None:
        self.vault = vault
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memvault", "--vault", str(vault), "serve", "--port", "0"],
            env=daemon_env(),
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
            time.sleep(0.05)
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

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.process.communicate(timeout=60)
        return self.process.returncode
