"""``[console] enabled = false``: ``memvault serve`` serves no console (no page, no static
file, no sign-in, no ``memvault ui`` link) while the API goes on working; switched back on,
the same daemon folder serves it again."""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx

from daemon_process import DaemonProcess
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import WAIT

PAGES = ("/", "/memories", "/static/console.js", "/static/htmx.min.js", "/signin?code=x")


def switched(root: Path, enabled: bool) -> None:
    """``[console] enabled`` in the vault's config file."""
    config = root / ".memvault/config.toml"
    kept = config.read_text(encoding="utf-8").split("\n[console]\n")[0]
    config.write_text(
        f"{kept}\n[console]\nenabled = {'true' if enabled else 'false'}\n", encoding="utf-8"
    )


def test_console_disabled_serves_no_page_while_the_api_works(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    switched(root, False)
    daemon = DaemonProcess(root)
    try:
        with daemon.client() as api:
            for path in PAGES:
                answer = api.get(path)
                assert answer.status_code == 404, path
                assert "<html" not in answer.text.lower(), path
            assert api.post("/v1/console/links").status_code == 404
            stored = api.post("/v1/memories", json={"text": "The console is switched off"})
            assert stored.status_code == 200, stored.text
            found = api.get("/v1/search", params={"q": "console switched off"})
            assert found.status_code == 200
            assert found.json()["result"][0]["snippet"] == "The console is switched off"
        with httpx.Client(base_url=daemon.url, timeout=WAIT) as stranger:
            for path in PAGES:  # without the token: the API's refusal, no page either
                answer = stranger.get(path)
                assert answer.status_code == 401, path
                assert "<html" not in answer.text.lower(), path
    finally:
        daemon.stop()

    # The same folder with the console on: the paths above are its pages again.
    switched(root, True)
    daemon = DaemonProcess(root)
    try:
        with httpx.Client(base_url=daemon.url, timeout=WAIT) as browser:
            script = browser.get("/static/console.js")
            assert script.status_code == 200 and "EventSource" in script.text
            page = browser.get("/")
            assert page.status_code == 401 and "memvault ui" in page.text
        with daemon.client() as api:
            assert api.post("/v1/console/links").status_code == 200
    finally:
        daemon.stop()
