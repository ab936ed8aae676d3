"""The console's pages in detail, in a real browser against a real daemon: Today's cards
(the jobs failing, the channels down, the doctor's failing checks, the vault's counts), a
memory's links (to the notes its text names, from the notes and memories naming it), and a
contact's recent conversation on the People page.

The daemon runs in this process (uvicorn in a thread, as ``memvault serve`` builds it, the
console included), with a Telegram channel enabled whose token is not set, so it is down,
and a job that fails, added to the daemon's own job engine as a job of the config would be.
Everything the pages show is written before the first page is opened: the doctor's report
is made at the first visit, and Today's counts hold whatever the order of the tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from console_support import PHONE, Served, Watched, shoot, signed_in
from memvault.index.graph import block_links
from memvault.jobs import Job, JobContext, Schedule
from memvault.vault.layout import init_vault
from memvault.vault.memories import Memory
from memvault.vault.store import Vault
from waiting import wait_for

BOB_CHAT = "4242"
# The job fails with an error of two lines; Today shows it on one.
BACKUP_ERROR = "the backup disk is not mounted\nlooked at /mnt/backup"
NEVER = Schedule(cron="0 0 1 1 *")  # the scheduler leaves it alone: the test runs it
CONTACTS = {
    "Caroline": "---\ntype: person\nrelationship: climbing partner\n---\n# Caroline\n",
    "Bob Stone": f"---\ntelegram: {BOB_CHAT}\n---\n# Bob Stone\n",
    "Dana": "---\ntelegram: 777\n---\n# Dana\n",  # a channel id, and never talked
}
BOB_SAID = [
    ("user", "Bob", "Are we still on for Saturday?"),
    ("assistant", None, "Yes, ten o'clock at the boulder hall."),
    ("user", "Bob", "Can you bring the spare rope?"),
    ("assistant", None, "I will put it on your list."),
    ("user", "Bob", "Thanks, see you there"),
]


@dataclass
class Vaulted:
    """The served daemon and what the module wrote through it."""

    served: Served
    climbing: Memory  # its text links to Caroline, a place, and a note not written yet
    birthday: Memory  # links to ``climbing``
    rope: Memory  # no link either way
    bob_session: int


def _fails(context: JobContext) -> str:
    raise OSError(BACKUP_ERROR)


def _works(context: JobContext) -> str:
    return "done"


@pytest.fixture(scope="module")
def vaulted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vaulted]:
    root = tmp_path_factory.mktemp("pages-detail") / "vault"
    init_vault(Vault(root))
    (root / "Contacts").mkdir(exist_ok=True)
    for name, note in CONTACTS.items():
        (root / "Contacts" / f"{name}.md").write_text(note, encoding="utf-8")
    (root / "Places").mkdir()
    (root / "Places/Boulder Hall.md").write_text("# Boulder Hall\n", encoding="utf-8")
    telegram_down = {"enabled": True, "owner": ["1"], "token_env": "MEMVAULT_TEST_NO_TOKEN"}
    served = Served(root, overrides={"channels": {"telegram": telegram_down}})
    runtime = served.daemon.runtime
    runtime.tasks.create("Renew the climbing gym membership")

    climbing = runtime.memories.remember(
        "Climbs with [[Caroline]] on Saturdays at [[Boulder Hall|the boulder hall]];"
        " the plan is in [[Route plans]]",
        category="fact",
    ).memory
    block = f"[[{climbing.path.removesuffix('.md')}#^{climbing.id}]]"
    birthday = runtime.memories.remember(
        f"Caroline's birthday is in May, a climbing trip then (see {block})", category="fact"
    ).memory
    rope = runtime.memories.remember(
        "The spare rope is in the hall cupboard", category="fact"
    ).memory
    (root / "Journal").mkdir(exist_ok=True)
    (root / "Journal/Saturday plans.md").write_text(
        f"# Saturday plans\n\nAsk about the rope: {block}\n", encoding="utf-8"
    )
    index = runtime.index
    index.sync()
    wait_for(
        lambda: len(block_links(index, climbing.path, climbing.id)) == 2,
        "the index to know both links into the memory",
    )

    for role, sender, text in BOB_SAID:
        session, _ = runtime.sessions.log(
            f"telegram:{BOB_CHAT}", text, role=role, sender=sender, channel="telegram"
        )

    jobs = served.daemon.jobs
    jobs.add(Job("backup", NEVER, _fails, description="copies the vault to the backup disk"))
    jobs.add(Job("tidy", NEVER, _works))
    jobs.run_now("backup")
    jobs.run_now("backup")
    jobs.run_now("tidy")
    yield Vaulted(served, climbing, birthday, rope, session.id)
    served.stop()


def in_view(page: Page, part: Locator) -> None:
    """``part`` at the top of a phone's screen, so ``shoot`` has it in both pictures (at a
    desktop's width the page is shorter: the same scroll shows it, or the page's end)."""
    page.set_viewport_size(PHONE)  # type: ignore[arg-type]
    part.evaluate("element => element.scrollIntoView({block: 'start'})")


@pytest.fixture
def console(browser: Browser, vaulted: Vaulted) -> Iterator[Watched]:
    with signed_in(browser, vaulted.served.url, vaulted.served.token) as watched:
        yield watched


def test_today_shows_failing_jobs_channels_down_failing_checks_and_counts(
    console: Watched, vaulted: Vaulted
) -> None:
    page = console.page  # signing in opens Today
    served = vaulted.served
    expect(page.get_by_role("heading", name="Today")).to_be_visible()

    failing = page.locator("#failing-jobs")
    backup = failing.locator('[data-job="backup"]')
    expect(backup).to_contain_text("failed 2 times in a row")
    expect(backup.locator(".error")).to_have_text(" ".join(BACKUP_ERROR.split()))
    expect(failing.locator('[data-job="tidy"]')).to_have_count(0)  # its last run went well
    last = served.daemon.jobs.history("backup", 1)[0]
    backup.get_by_role("link", name=f"run #{last.id}").click()
    expect(page).to_have_url(f"{served.url}/jobs/runs/{last.id}")
    expect(page.locator("body")).to_contain_text("failed")
    page.go_back()
    page.locator("#failing-jobs").get_by_role("link", name="All jobs").click()
    expect(page.locator('[data-job="backup"]')).to_contain_text("failed 2 times in a row")
    page.go_back()

    down = page.locator("#channels li")
    expect(down).to_have_count(1)
    expect(down).to_contain_text("telegram: failed")
    expect(down).to_contain_text("$MEMVAULT_TEST_NO_TOKEN is not set")

    checks = page.locator("#health .checks li")
    expect(checks.filter(has_text="channel_telegram")).to_have_class("error")
    expect(checks.filter(has_text="llm")).to_have_class("warning")
    expect(checks.filter(has_text="vault_writable")).to_have_count(0)  # passing: not listed

    notes = served.daemon.runtime.vault.list()
    expect(page.locator('[data-count="memories"]')).to_have_text("3")
    expect(page.locator('[data-count="open tasks"]')).to_have_text("1")
    expect(page.locator('[data-count="contacts"]')).to_have_text(str(len(CONTACTS)))
    expect(page.locator('[data-count="notes"]')).to_have_text(str(len(notes)))
    assert len(notes) > len(CONTACTS) + 2  # the template's notes, the journal, the places
    expect(page.locator("#waiting .big")).to_have_text("0")
    shoot(page, "today-failing")


def test_a_memorys_page_shows_its_links_and_what_links_to_it(
    console: Watched, vaulted: Vaulted
) -> None:
    served, climbing = vaulted.served, vaulted.climbing
    vault = quote(served.root.name, safe="")
    page = console.page
    page.goto(f"{served.url}/memories/{climbing.id}")
    links = page.locator("#links-to li")
    expect(links).to_have_count(3)
    caroline = links.get_by_role("link", name="Caroline")
    expect(caroline).to_have_attribute("href", "/knowledge/Contacts/Caroline.md")
    hall = links.get_by_role("link", name="the boulder hall")
    expect(hall).to_have_attribute(
        "href", f"obsidian://open?vault={vault}&file=Places%2FBoulder%20Hall.md"
    )
    expect(links.nth(1)).to_contain_text("in Obsidian")
    plans = links.get_by_role("link", name="Route plans")
    expect(plans).to_have_attribute("href", f"obsidian://new?vault={vault}&file=Route%20plans")
    expect(links.nth(2)).to_contain_text("no note yet")

    linked_from = page.locator("#linked-from li")
    expect(linked_from).to_have_count(2)
    expect(linked_from.nth(0)).to_contain_text("Journal/Saturday plans.md, line 3")
    expect(linked_from.nth(0).get_by_role("link")).to_have_attribute(
        "href", f"obsidian://open?vault={vault}&file=Journal%2FSaturday%20plans.md"
    )
    in_view(page, page.get_by_role("heading", name="Links", exact=True))
    shoot(page, "memory-links")

    # Each link leads to the console's page where it has one: the other memory, the entity.
    linked_from.get_by_role("link", name="Caroline's birthday is in May").click()
    expect(page).to_have_url(f"{served.url}/memories/{vaulted.birthday.id}")
    expect(page.locator("#links-to").get_by_role("link")).to_have_attribute(
        "href", f"/memories/{climbing.id}"
    )
    page.go_back()
    page.locator("#links-to").get_by_role("link", name="Caroline").click()
    expect(page.get_by_role("heading", name="Caroline", exact=True)).to_be_visible()


def test_a_memory_without_links_says_so(console: Watched, vaulted: Vaulted) -> None:
    page = console.page
    page.goto(f"{vaulted.served.url}/memories/{vaulted.rope.id}")
    expect(page.locator(".links")).to_contain_text("Its text links to no note.")
    expect(page.locator(".links")).to_contain_text("No note links to it.")


def test_people_shows_a_contacts_recent_conversation(console: Watched, vaulted: Vaulted) -> None:
    served = vaulted.served
    page = console.page
    page.goto(f"{served.url}/people")
    talk = page.locator(f'[data-conversation="telegram:{BOB_CHAT}"]')
    expect(talk).to_have_count(1)
    expect(talk).to_contain_text(f"{len(BOB_SAID)} messages")
    said = talk.locator("ol.said li")
    expect(said).to_have_count(3)  # the last three, oldest first
    for shown, (_, sender, text) in zip(said.all(), BOB_SAID[-3:], strict=True):
        expect(shown).to_contain_text(text)
        expect(shown).to_contain_text(sender or "assistant")
    expect(talk).not_to_contain_text(BOB_SAID[1][2])
    # Dana has a channel id but no conversation; Caroline no channel: neither shows one.
    expect(page.locator("tr.conversation")).to_have_count(1)
    in_view(page, page.get_by_role("heading", name="Contacts"))
    shoot(page, "people-conversation")

    talk.get_by_role("link", name=f"telegram:{BOB_CHAT}").click()
    expect(page).to_have_url(f"{served.url}/sessions/{vaulted.bob_session}")
    expect(page.get_by_role("heading", name=f"telegram:{BOB_CHAT}")).to_be_visible()
    expect(page.locator(".turn")).to_have_count(len(BOB_SAID))
