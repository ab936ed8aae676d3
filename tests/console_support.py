"""The console's tests: a daemon in this process, a watched browser context, one-time
links, photographs."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import uvicorn
from playwright.sync_api import Browser, BrowserContext, Page

from memvault.config import load_settings
from memvault.console import console_front
from memvault.gateway.app import create_app
from memvault.gateway.daemon import Daemon
from memvault.gateway.server import DaemonServer, bind
from memvault.runtime import Runtime
from support import HashEmbedder
from waiting import WAIT, wait_for

DOCS = Path(__file__).resolve().parents[1] / "docs" / "console"
# The photographs go to docs/console/, which the README links, when asked for (`make
# screenshots`); otherwise to a temporary folder: a test run changes no file of the checkout.
SHOTS = (
    DOCS
    if os.environ.get("MEMVAULT_SCREENSHOTS")
    else Path(tempfile.gettempdir()) / "memvault-console-shots"
)
PNG = b"\x89PNG\r\n\x1a\n"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}
# Recorded in every document before its own scripts run (a CDP init script: the page's
# Content-Security-Policy does not apply to it).
WATCH_CSP = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.mvCspViolation(event.violatedDirective + " blocked " + event.blockedURI);
});
"""

# The elements wider than the window, named, for the message of a failed width check.
OVERFLOWING = """() => {
  const width = window.innerWidth;
  const wide = [];
  for (const element of document.querySelectorAll("body *")) {
    const box = element.getBoundingClientRect();
    if (box.right > width + 1 && box.width > 0) {
      wide.push(element.tagName.toLowerCase() + (element.id ? "#" + element.id : "")
        + (element.className && typeof element.className === "string"
           ? "." + element.className.trim().split(/\\s+/).join(".") : "")
        + " " + Math.round(box.right));
    }
  }
  return {scroll: document.documentElement.scrollWidth, inner: width, wide: wide.slice(0, 8)};
}"""


class Served:
    """The daemon with its console, served in this process on a free loopback port."""

    def __init__(self, root: Path, overrides: dict[str, Any] | None = None) -> None:
        settings = load_settings(root, overrides=overrides).settings
        runtime = Runtime.open(settings, embedder=HashEmbedder())
        sock = bind("127.0.0.1", 0)
        self.daemon = Daemon(runtime, host="127.0.0.1", port=sock.getsockname()[1])
        app = create_app(self.daemon, front=console_front(self.daemon))
        self.server = DaemonServer(uvicorn.Config(app, log_config=None, lifespan="on"), self.daemon)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self.thread.start()
        wait_for(lambda: self.server.announced.is_set() or not self.thread.is_alive(), "serve")
        assert self.thread.is_alive(), "the daemon did not start"
        self.url = f"http://127.0.0.1:{self.daemon.port}"
        self.token = self.daemon.token
        self.root = root

    def api(self, token: str | None = None) -> httpx.Client:
        """A client of the daemon's API with the owner's token (or ``token``)."""
        bearer = {"Authorization": f"Bearer {token or self.token}"}
        return httpx.Client(base_url=self.url, timeout=WAIT, headers=bearer)

    def stop(self) -> None:
        self.server.handle_exit(15, None)
        self.thread.join(WAIT)


def sign_in_link(url: str, token: str) -> dict[str, Any]:
    """A one-time link of the daemon at ``url``, asked for over the API with ``token``."""
    with httpx.Client(base_url=url, timeout=WAIT) as api:
        answer = api.post("/v1/console/links", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    link: dict[str, Any] = answer.json()["result"]
    return link


@dataclass
class Watched:
    """A signed-in browser context and its page, and what went wrong in them."""

    context: BrowserContext
    page: Page
    problems: list[str] = field(default_factory=list)

    def csrf(self) -> str:
        """The session's CSRF token, as the page holds it."""
        token = self.page.locator('meta[name="csrf-token"]').get_attribute("content")
        assert token
        return token

    def cookie(self) -> dict[str, Any]:
        """The console's session cookie."""
        (cookie,) = self.context.cookies()
        return dict(cookie)


def watch(browser: Browser, url: str) -> Watched:
    """A new context (desktop width) watched for CSP violations and script errors, its
    page opened at ``url`` (a sign-in link)."""
    context = browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    watched = Watched(context, context.new_page())
    context.expose_function("mvCspViolation", lambda text: watched.problems.append(text))
    context.add_init_script(WATCH_CSP)

    def heard(message: Any) -> None:
        if "Content Security Policy" in message.text or "Refused to" in message.text:
            watched.problems.append(message.text)

    watched.page.on("console", heard)
    watched.page.on("pageerror", lambda error: watched.problems.append(str(error)))
    watched.page.goto(url)
    return watched


@contextlib.contextmanager
def signed_in(browser: Browser, url: str, token: str | None = None) -> Iterator[Watched]:
    """A watched browser context signed in to the console, closed at the end of the block,
    which then fails on any CSP violation or script error it saw.

    With ``token``, ``url`` is the daemon's address and the one-time link is asked for over
    the API with that token; without one, ``url`` is the sign-in link itself (as ``memvault
    ui`` printed it).
    """
    link = sign_in_link(url, token)["url"] if token is not None else url
    watched = watch(browser, link)
    try:
        yield watched
    finally:
        watched.context.close()
    assert watched.problems == [], watched.problems


def shoot(page: Page, name: str) -> None:
    """The page at a phone's width and a desktop's, into :data:`SHOTS`."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for label, size in (("phone", PHONE), ("desktop", DESKTOP)):
        page.set_viewport_size(size)  # type: ignore[arg-type]
        assert page.screenshot(path=SHOTS / f"{name}-{label}.png").startswith(PNG)
    page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]


def fits(page: Page, where: str) -> None:
    """The page has no horizontal scroll at the window's width; else name what sticks out."""
    measured = page.evaluate(OVERFLOWING)
    assert measured["scroll"] <= measured["inner"] + 1, (where, measured)


def memory_id(open_api: Callable[[], httpx.Client], text: str) -> str:
    """The id of the memory whose text is ``text``, as the daemon's API lists it
    (``open_api``: a daemon's ``client`` or ``api``)."""
    with open_api() as api:
        listed = api.get("/v1/memories").json()["result"]
    return str(next(m["id"] for m in listed if m["text"] == text))
