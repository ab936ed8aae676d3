"""The web console: what the agent remembers and does, in a browser, served by the daemon.

A layer above the gateway: it uses the daemon's services and the API's auth,
and the gateway knows it only as a :class:`~memvault.gateway.app.WebFront`
(``memvault serve`` hands it over). Pages: :mod:`memvault.console.pages`,
:mod:`memvault.console.jobs_page`, :mod:`memvault.console.sessions_page`,
:mod:`memvault.console.people_page`, :mod:`memvault.console.runs_page` and
:mod:`memvault.console.knowledge_page`;
signing in: :mod:`memvault.console.signin`; ``memvault ui``'s routes:
:mod:`memvault.console.api`.
"""

from __future__ import annotations

from memvault.console.api import console_router
from memvault.console.jobs_page import JobsPage
from memvault.console.knowledge_page import KnowledgePage
from memvault.console.memories_page import MemoriesPage
from memvault.console.pages import Console
from memvault.console.people_page import PeoplePage
from memvault.console.runs_page import RunsPage
from memvault.console.sessions_page import SessionsPage
from memvault.console.signin import SignIns
from memvault.gateway.app import WebFront
from memvault.gateway.daemon import Daemon


def console_front(daemon: Daemon) -> WebFront:
    """The console of ``daemon``, ready to be served beside its API."""
    settings = daemon.runtime.settings.console
    signins = SignIns(
        link_seconds=settings.link_minutes * 60, session_seconds=settings.session_hours * 3600
    )
    console = Console(daemon, signins)
    pages = console.app(
        [
            *MemoriesPage(console).routes(),
            *JobsPage(console).routes(),
            *SessionsPage(console).routes(),
            *RunsPage(console).routes(),
            *PeoplePage(console).routes(),
            *KnowledgePage(console).routes(),
        ]
    )
    return WebFront(router=console_router(signins), pages=pages)
