"""``memvault serve`` as a real process, found through its ``daemon.json``: start, kill, stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import httpx2 as httpx
import pytest

from memvault.gateway.client import DaemonInfo, read_info
from memvault.locations import MODEL_CACHE_ENV
from waiting import WAIT, wait_for


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
        start_timeout: float = WAIT,
        python: str = sys.executable,
    ) -> None:
        self.vault = vault
        command = [python, "-m", "memvault", "--vault", str(vault), "serve", *args]
        if "--port" not in args:
            command += ["--port", "0"]
        self.process = subprocess.Popen(
            command,
            env=env or daemon_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

        def announced() -> DaemonInfo | None:
            info = read_info(vault)
            if info is not None and info.pid == self.process.pid:
                return info
            if self.process.poll() is not None:
                self._failed_start("it ended")
            return None

        try:
            info = wait_for(announced, "memvault serve to announce itself", start_timeout)
        except AssertionError as exc:
            self._failed_start(str(exc))
        self.info: DaemonInfo = info
        self.url = info.url
        self.token = (vault / ".memvault/token").read_text().strip()

    def _failed_start(self, why: str) -> NoReturn:
        self.process.kill()
        _, err = self.process.communicate(timeout=WAIT)
        pytest.fail(f"memvault serve did not start ({why}): {err[-2000:]}")

    def client(self, timeout: float = WAIT) -> httpx.Client:
        """An HTTP client with the daemon's token."""
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=timeout
        )

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind runs."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=WAIT)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        """Send ``sig`` and wait; the exit code and what the daemon wrote to stderr.

        A daemon still running after ``WAIT`` seconds is killed and the test fails.
        """
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            _, err = self.process.communicate(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate(timeout=WAIT)
            pytest.fail(f"the daemon did not exit after signal {sig}: {err[-2000:]}")
        return self.process.returncode, err
