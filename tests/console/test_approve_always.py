"""Approve always from the console, end to end: the owner writes to the agent on Telegram (the
fake Bot API), the model (a fake OpenAI server) wants a tier-2 tool, the console's "Approve
always" lets it run (and the owner's chat is told at once), and the session's next call of
that category runs without asking; the resolved history says who decided, when and how
(console or phone).

"Always" is the phone's own Always: the same :class:`~memvault.channels.approvals.Reply`,
through the same ``resolve``, into the session's :class:`~memvault.tools.policy.Policy`
(a category granted until the session ends; tier 3 keeps asking for each call).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from channel_support import APPROVAL_TIMEOUT, OWNER, delivered, telegram_config
from console_support import Served, Watched, shoot, signed_in
from llm_fakes import FakeOpenAI, llm_settings
from memvault.channels.approvals import Waiting
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from telegram_fake import FakeTelegram
from waiting import wait_for


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, tg: FakeTelegram, llm: FakeOpenAI
) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("always") / "vault"
    init_vault(Vault(root))
    live = Served(
        root,
        {
            "channels": {"approval_timeout": APPROVAL_TIMEOUT, "telegram": telegram_config(tg)},
            "llm": llm_settings(llm),
            # The scripted replies are the agent's: consolidation on write must not take one.
            "memory": {"consolidation": "rule"},
        },
    )
    yield live
    live.stop()


@pytest.fixture
def console(browser: Browser, served: Served) -> Iterator[Watched]:
    with signed_in(browser, served.url, served.daemon.token) as watched:
        yield watched


def wants(llm: FakeOpenAI, tool: str, arguments: dict[str, Any]) -> None:
    """The model's next run calls ``tool``, then answers with what it got back."""
    llm.reply("", tool_calls=[(tool, arguments)])
    llm.reply_with(lambda request: ("done: " + request["messages"][-1]["content"][:60], []))


def asked(served: Served, tool: str) -> Waiting:
    """The call of ``tool`` now waiting for the owner."""
    approvals = served.daemon.hub.approvals
    return wait_for(
        lambda: next((w for w in approvals.pending() if w.request.tool == tool), None),
        f"the call of {tool} to wait for the owner",
    )


def answers(tg: FakeTelegram) -> list[str]:
    return [t for t in delivered(tg, OWNER) if t.startswith("done: ")]


def test_approve_always_lets_the_next_call_of_the_category_run_and_history_shows_who(
    console: Watched, served: Served, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    memories = served.daemon.runtime.memories
    wants(llm, "remember", {"fact": "The window cleaner comes every second Monday"})
    tg.push_message(OWNER, "remember when the window cleaner comes", first_name="Grace")
    first = asked(served, "remember")
    page = console.page
    page.goto(f"{served.url}/approvals")
    row = page.locator(f'[data-approval="{first.short_id}"]')
    expect(row).to_contain_text("window cleaner")
    expect(row.locator(".asker")).to_have_text("Grace (owner)")  # who asked, by name
    always = row.get_by_role("button", name="Approve always for file writes")
    expect(always).to_be_visible()
    shoot(page, "approvals-always")
    always.click()
    expect(page.get_by_role("status")).to_have_text(
        "Approved remember; file writes is approved for the rest of this session."
    )
    wait_for(lambda: len(answers(tg)) == 1, "the first run to finish")
    # The phone learns of the console's decision in the chat where it was asked.
    told = f"Approved in the console: remember ({first.short_id})."
    wait_for(lambda: told in delivered(tg, OWNER), "the owner's chat to be told")

    # The same session's next file write runs at once: nobody is asked.
    wants(llm, "remember", {"fact": "The window cleaner is paid in cash"})
    tg.push_message(OWNER, "and that he is paid in cash")
    wait_for(lambda: len(answers(tg)) == 2, "the second run to finish")
    assert {m.text for m in memories.list()} == {
        "The window cleaner comes every second Monday",
        "The window cleaner is paid in cash",
    }
    assert len([s for s in tg.sent if "Approval needed" in str(s["text"])]) == 1

    # Tier 3 still asks for every call, offers no "always", and is answered on the phone.
    cash = next(m for m in memories.list() if "cash" in m.text)
    wants(llm, "forget", {"id": cash.id})
    tg.push_message(OWNER, "forget the cash part")
    deletion = asked(served, "forget")
    page.goto(f"{served.url}/approvals")
    waiting = page.locator(f'[data-approval="{deletion.short_id}"]')
    expect(waiting).to_contain_text("forget memory")
    expect(waiting.get_by_role("button", name="Approve always", exact=False)).to_have_count(0)
    tg.push_message(OWNER, f"/deny {deletion.short_id}")
    wait_for(lambda: len(answers(tg)) == 3, "the third run to end")
    assert memories.get(cash.id).text == cash.text

    page.goto(f"{served.url}/approvals")
    expect(page.locator(f'[data-approval="{deletion.short_id}"]')).to_have_count(0)
    by_console = page.locator(f'[data-decided="{first.short_id}"]')
    expect(by_console).to_contain_text("remember")
    expect(by_console).to_contain_text("approved always")
    expect(by_console.locator(".by")).to_have_text("console")
    by_phone = page.locator(f'[data-decided="{deletion.short_id}"]')
    expect(by_phone).to_contain_text("denied")
    expect(by_phone.locator(".by")).to_have_text(f"phone (telegram:{OWNER})")
    # A decision made on the phone gets its reply there, and nothing told besides.
    about = [t for t in delivered(tg, OWNER) if f"({deletion.short_id})." in t]
    assert about == [f"Denied forget ({deletion.short_id})."]
    expect(page.locator("table.decided tbody tr").first).to_have_attribute(
        "data-decided", deletion.short_id
    )  # newest first
    shoot(page, "approvals-history")


def test_always_is_bound_to_the_call_and_tier_3_stays_once(
    console: Watched, served: Served, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    memories = served.daemon.runtime.memories
    kept = memories.remember("The spare fuse is in the blue box").memory
    done = len(answers(tg))
    wants(llm, "forget", {"id": kept.id})
    tg.push_message(OWNER, "forget the fuse")
    call = asked(served, "forget")
    request = console.context.request
    stale = request.post(
        f"{served.url}/approvals/{call.short_id}",
        form={"csrf": console.csrf(), "decision": "always", "hash": "0" * 12},
        headers={"Origin": served.url},
    )
    assert stale.ok and "nothing was approved" in stale.text()
    assert served.daemon.hub.approvals.pending()  # still waiting
    # A forged "always" for a tier-3 call (no button offers it) approves this call alone.
    forced = request.post(
        f"{served.url}/approvals/{call.short_id}",
        form={"csrf": console.csrf(), "decision": "always", "hash": call.call_hash},
        headers={"Origin": served.url},
    )
    assert "Approved forget once: tier-3 tools ask for every call." in forced.text()
    wait_for(lambda: len(answers(tg)) == done + 1, "the run to finish")
    assert all(m.id != kept.id for m in memories.list())

    again = memories.remember("The other spare fuse is in the drawer").memory
    wants(llm, "forget", {"id": again.id})
    tg.push_message(OWNER, "forget the other fuse too")
    second = asked(served, "forget")  # asked again: tier 3 was never granted for good
    tg.push_message(OWNER, f"/deny {second.short_id}")
    wait_for(lambda: len(answers(tg)) == done + 2, "the run to end")
    assert memories.get(again.id).text == again.text
