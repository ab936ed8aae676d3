"""Approving a waiting tool call from the console, in a real browser: the decision takes the
path the phone's buttons take (bound to the call's hash), and the waiting run gets it. The
open page follows calls asked and decided elsewhere (the phone, the timeout) without a
reload.

The daemon runs in this process (uvicorn in a thread, as ``memvault serve`` builds it, the
console included), so the test can put a call in the owner's hands as a channel's run
does: ``hub.approvals.ask`` in a thread of its own, waiting for the answer.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from console_support import Served, Watched, shoot, signed_in
from memvault.channels.approvals import APPROVE, Reply
from memvault.tools.policy import ONCE, Answer, ApprovalRequest, Tier
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import wait_for


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("approvals") / "vault"
    init_vault(Vault(root))
    live = Served(root)
    yield live
    live.stop()


class Asked:
    """A call waiting for the owner, asked in a thread as a channel's run asks."""

    def __init__(
        self, served: Served, tool: str, arguments: dict[str, Any], *, wait: bool = True
    ) -> None:
        self.answers: list[Answer] = []
        request = ApprovalRequest(tool, Tier.WRITE, "task_write", f"{arguments}", arguments)
        approvals = served.daemon.hub.approvals
        known = {w.short_id for w in approvals.pending()}

        def ask() -> None:
            answer = approvals.ask(request, session="telegram:42", channel="telegram", chat_id="42")
            self.answers.append(answer)

        threading.Thread(target=ask, daemon=True).start()
        if wait:
            self.waiting = wait_for(
                lambda: next((w for w in approvals.pending() if w.short_id not in known), None),
                f"the call of {tool} to wait for the owner",
            )

    def answer(self) -> Answer:
        return wait_for(lambda: self.answers, "the waiting run to get its answer")[0]


@pytest.fixture
def console(browser: Browser, served: Served) -> Iterator[Watched]:
    with signed_in(browser, served.url, served.token) as watched:
        yield watched


def test_approve_once_from_the_console_lets_the_waiting_run_go_on(
    console: Watched, served: Served
) -> None:
    asked = Asked(served, "task_delete", {"ref": "Renew the certificate"})
    page = console.page
    page.goto(f"{served.url}/approvals")
    row = page.locator(f'[data-approval="{asked.waiting.short_id}"]')
    expect(row).to_contain_text("task_delete")
    expect(row.locator("pre.arguments")).to_contain_text('"ref": "Renew the certificate"')
    expect(row).to_contain_text("telegram")
    # Since when: the time it was asked, and how long ago.
    since = row.locator(".since time")
    asked_at = asked.waiting.requested_at
    assert asked_at is not None
    expect(since).to_have_attribute("datetime", asked_at.isoformat(timespec="seconds"))
    expect(since).to_have_text(asked_at.isoformat()[:16].replace("T", " "))
    expect(row.locator(".since")).to_contain_text(re.compile(r"\((just now|\d+ min ago)\)"))
    shoot(page, "approvals")

    # A decision bound to another call's hash (a stale page) approves nothing.
    stale = console.context.request.post(
        f"{served.url}/approvals/{asked.waiting.short_id}",
        form={"csrf": console.csrf(), "decision": "approve", "hash": "0" * 12},
        headers={"Origin": served.url},
    )
    assert stale.ok and "nothing was approved" in stale.text()
    assert asked.answers == []

    row.get_by_role("button", name="Approve once").click()
    expect(page.get_by_role("status")).to_contain_text("Approved task_delete once.")
    assert asked.answer() == ONCE
    expect(page.locator(f'[data-approval="{asked.waiting.short_id}"]')).to_have_count(0)


def test_deny_from_the_console_and_a_decision_made_elsewhere_shows(
    console: Watched, served: Served
) -> None:
    denied = Asked(served, "task_delete", {"ref": "Old notes"})
    page = console.page
    page.goto(f"{served.url}/approvals")
    page.locator(f'[data-approval="{denied.waiting.short_id}"]').get_by_role(
        "button", name="Deny"
    ).click()
    expect(page.get_by_role("status")).to_contain_text("Denied task_delete")
    assert denied.answer() is False
    # The chat where it was asked is told (the outbox: no Telegram runs in this module).
    told = f"Denied in the console: task_delete ({denied.waiting.short_id})."
    outbox = served.daemon.hub.store.outbox(channel="telegram")
    assert [(q.chat_id, q.text) for q in outbox if q.text == told] == [("42", told)]

    # The open page follows what happens elsewhere, without a reload.
    expect(page.locator("#live-state")).to_have_text("live")
    page.evaluate("window.mvSameDocument = true")

    # A new call appears ...
    phoned = Asked(served, "task_complete", {"ref": "Water the plants"})
    row = page.locator(f'[data-approval="{phoned.waiting.short_id}"]')
    expect(row).to_be_visible()
    expect(row).to_contain_text("Water the plants")

    # ... and, answered on the phone, leaves the waiting calls for the decided ones.
    served.daemon.hub.approvals.resolve(
        Reply(APPROVE, phoned.waiting.short_id, ONCE, phoned.waiting.call_hash[:10]),
        by="telegram:42",
    )
    assert phoned.answer() == ONCE
    expect(row).to_have_count(0)
    expect(page.locator("#main")).to_contain_text("No tool call is waiting")
    decided = page.locator(f'[data-decided="{phoned.waiting.short_id}"]')
    expect(decided.locator(".by")).to_have_text("phone (telegram:42)")
    assert page.evaluate("window.mvSameDocument === true")  # the same page, not reloaded


@pytest.fixture
def hasty(tmp_path: Path) -> Iterator[Served]:
    """A daemon whose calls wait a moment for the owner, then are denied."""
    root = tmp_path / "vault"
    init_vault(Vault(root))
    live = Served(root, {"channels": {"approval_timeout": 0.3}})
    yield live
    live.stop()


def test_a_call_nobody_answers_times_out_and_shows_as_timed_out(
    browser: Browser, hasty: Served
) -> None:
    with signed_in(browser, hasty.url, hasty.token) as watched:
        page = watched.page
        page.goto(f"{hasty.url}/approvals")
        expect(page.locator("#live-state")).to_have_text("live")
        expect(page.locator("table.decided")).to_have_count(0)
        page.evaluate("window.mvSameDocument = true")
        asked = Asked(hasty, "task_delete", {"ref": "Nobody answers this"}, wait=False)
        assert asked.answer() is False
        row = page.locator("tr[data-decided]", has_text="Nobody answers this")
        expect(row.locator(".answer")).to_have_text("expired")
        expect(row.locator(".by")).to_have_text("nobody (timed out)")
        assert page.evaluate("window.mvSameDocument === true")
        shoot(page, "approvals-timed-out")
