"""The console in a real browser (Debian's chromium) against a real ``memvault serve``.

One daemon serves the whole module; each test signs a fresh browser context in
(the tests hold in any order). Every page a test opens is watched for
Content-Security-Policy violations and script errors, and the test fails on
any. The pages are photographed at a phone's and a desktop's width into
``docs/console/``, which the README links (``make screenshots``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import tomli_w
from playwright.sync_api import Browser, expect

from channel_support import telegram_config
from cli_support import EXIT_VAULT, invoke
from console_support import PHONE, PNG, SHOTS, Watched, memory_id, shoot, signed_in
from console_support import sign_in_link as link_of
from daemon_process import DaemonProcess, daemon_env
from graph_support import KILN, write_people
from memvault.jobs.distill import MARKERS
from memvault.memory.state import StateDB
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for

TEA = "I prefer green tea in the morning, never coffee"
KEY = "The spare key is under the blue flowerpot by the door"
# Strangers who write to the agent's Telegram bot (the fake), each waiting to be let in.
BOB, EVE, MALLORY = 555, 556, 557
MEMORIES = [
    (TEA, "preference", ["drinks"]),
    ("We chose PostgreSQL for the shared memory of the research agents", "decision", ["infra"]),
    ("Ada's birthday is on the tenth of December", "fact", ["family"]),
    ("The quarterly report is due on the first Friday of the month", "fact", ["work"]),
]


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeTelegram]:
    """The fake Bot API the module's daemon's Telegram channel polls."""
    with FakeTelegram() as fake:
        yield fake


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, telegram: FakeTelegram
) -> Iterator[DaemonProcess]:
    """One daemon for the module, with a few memories, a Telegram channel (the fake) and the
    entity notes of graph_support."""
    root = tmp_path_factory.mktemp("console") / "vault"
    init_vault(Vault(root))
    write_people(root)
    config = root / ".memvault/config.toml"
    channels = {"channels": {"telegram": telegram_config(telegram, policy="pairing")}}
    config.write_text(config.read_text(encoding="utf-8") + "\n" + tomli_w.dumps(channels))
    process = DaemonProcess(root, env=daemon_env(TELEGRAM_BOT_TOKEN=telegram.token))
    try:
        with process.client() as api:
            assert api.post("/v1/memories", json={"text": KILN}).status_code == 200
            for text, category, tags in MEMORIES:
                stored = api.post(
                    "/v1/memories", json={"text": text, "category": category, "tags": tags}
                )
                assert stored.status_code == 200, stored.text
        yield process
    finally:
        process.stop()


def sign_in_link(daemon: DaemonProcess, token: str | None = None) -> dict[str, Any]:
    """A one-time link, asked for with the owner's token (or ``token``)."""
    return link_of(daemon.url, token or daemon.token)


@pytest.fixture
def console(browser: Browser, daemon: DaemonProcess) -> Iterator[Watched]:
    """The owner's console, signed in on Today; no CSP violation or script error allowed."""
    with signed_in(browser, daemon.url, daemon.token) as watched:
        yield watched


def test_the_cli_link_signs_in_once_and_no_token_reaches_the_page(
    browser: Browser, daemon: DaemonProcess
) -> None:
    printed = invoke(daemon.vault, "ui", "--no-open", "--json")
    assert printed.exit_code == 0, printed.output
    link = json.loads(printed.output)
    assert link["scope"] == "admin" and link["url"].startswith(daemon.url + "/signin?code=")
    with signed_in(browser, link["url"]) as watched:
        page = watched.page
        expect(page.get_by_role("heading", name="Today")).to_be_visible()
        assert page.url == daemon.url + "/"  # the code left the address bar
        (cookie,) = watched.context.cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert daemon.token not in page.content()

        reused = page.goto(link["url"])
        assert reused is not None and reused.status == 403
        expect(page.get_by_role("alert")).to_contain_text("wrong, expired or already used")
        wrong = page.goto(daemon.url + "/signin?code=" + link["url"].rsplit("=", 1)[1][:-2] + "xx")
        assert wrong is not None and wrong.status == 403
        expect(page.get_by_role("alert")).to_contain_text("run `memvault ui` for a new one")


def test_without_the_cookie_no_page_gives_data(console: Watched, daemon: DaemonProcess) -> None:
    tea = memory_id(daemon.client, TEA)
    pages = (
        *("/", "/memories", "/memories?q=green+tea", f"/memories/{tea}", "/feed", "/approvals"),
        *("/jobs", "/jobs/runs/1", "/sessions", "/sessions/1", "/people"),
        *("/knowledge", "/knowledge/Contacts/Melanie.md"),
    )
    with httpx.Client(base_url=daemon.url, timeout=WAIT) as stranger:
        for path in pages:
            answer = stranger.get(path)
            assert answer.status_code == 401, path
            assert "green tea" not in answer.text and "not signed in" in answer.text
            assert "Melanie" not in answer.text and "Ronaldo" not in answer.text
            assert answer.headers["content-security-policy"].startswith("default-src 'self'")
        for change in ("/people/telegram/approve", "/outbox/1/retry"):
            refused = stranger.post(change, data={"sender": str(BOB)})
            assert refused.status_code == 401, change
        stranger.cookies.set(console.cookie()["name"], "x")
        forged = stranger.get("/memories?q=green+tea")
        assert forged.status_code == 401 and "green tea" not in forged.text
    with daemon.client() as api:  # the API's token does not open a page either
        assert api.get("/memories?q=green+tea").status_code == 401

    # Signed in, a change still needs the session's CSRF token and the console's origin.
    cookie = {console.cookie()["name"]: console.cookie()["value"]}
    forget = f"/memories/{tea}/forget"
    with httpx.Client(base_url=daemon.url, timeout=WAIT, cookies=cookie) as signed:
        assert signed.get("/memories?q=green+tea").status_code == 200
        no_csrf = signed.post(forget, headers={"Origin": daemon.url}, data={})
        assert no_csrf.status_code == 403 and "stale" in no_csrf.text
        elsewhere = signed.post(
            forget, headers={"Origin": "http://evil.example"}, data={"csrf": console.csrf()}
        )
        assert elsewhere.status_code == 403 and "did not come from" in elsewhere.text
    with daemon.client() as api:
        assert api.get(f"/v1/memories/{tea}").status_code == 200  # nothing was forgotten


def test_today_shows_the_vault_and_new_activity_without_a_reload(
    console: Watched, daemon: DaemonProcess
) -> None:
    page = console.page
    expect(page.locator('[data-count="memories"]')).not_to_have_text("0")
    expect(page.locator("#health")).to_contain_text("ok")
    expect(page.locator("#waiting")).to_contain_text("waiting for approval")
    expect(page.locator("#live-state")).to_have_text("live")
    page.evaluate("window.mvSameDocument = true")
    memories = page.locator('[data-count="memories"]')
    before = int(memories.inner_text())
    with daemon.client() as api:
        stored = api.post("/v1/memories", json={"text": "The plumber comes on Thursday at nine"})
        assert stored.status_code == 200
    expect(page.locator("#feed li").first).to_contain_text("plumber comes on Thursday")
    # The cards follow the events too: well before the minute's poll would fetch them.
    expect(memories).to_have_text(str(before + 1), timeout=30_000)
    assert page.evaluate("window.mvSameDocument === true")  # the same page, not reloaded
    shoot(page, "today")

    # Dark when the system is: the same page, the system's setting changed.
    background = "getComputedStyle(document.body).backgroundColor"
    light = page.evaluate(background)
    page.emulate_media(color_scheme="dark")
    assert page.evaluate(background) != light
    page.set_viewport_size(PHONE)  # type: ignore[arg-type]
    assert page.screenshot(path=SHOTS / "today-dark-phone.png").startswith(PNG)


def test_search_as_you_type_finds_a_memory_with_its_reasons(console: Watched) -> None:
    page = console.page
    page.get_by_role("link", name="Memories").click()
    expect(page.get_by_role("heading", name="Memories")).to_be_visible()
    page.evaluate("window.mvSameDocument = true")
    page.locator("#q").press_sequentially("birthday of Ada", delay=40)
    hit = page.locator(".hit", has_text="birthday is on the tenth")
    expect(hit).to_be_visible()
    expect(hit.locator(".why")).to_contain_text("keywords")
    expect(hit.locator(".meta")).to_contain_text("fact")
    assert page.evaluate("window.mvSameDocument === true")  # answered in place
    assert "q=birthday" in page.url  # and the address says what was searched
    assert page.evaluate("window.localStorage.length") == 0  # no page snapshot is kept

    page.get_by_label("Category").select_option("decision")
    page.locator("#q").fill("shared memory")
    expect(page.locator(".hit", has_text="PostgreSQL")).to_be_visible()
    expect(page.locator(".hit", has_text="birthday")).to_have_count(0)
    shoot(page, "memories")


def test_forget_from_the_page_and_search_no_longer_finds_it(
    console: Watched, daemon: DaemonProcess
) -> None:
    with daemon.client() as api:
        assert api.post("/v1/memories", json={"text": KEY, "tags": ["home"]}).status_code == 200
    key = memory_id(daemon.client, KEY)
    page = console.page
    page.goto(f"{daemon.url}/memories?q=spare+key+flowerpot")
    page.locator(".hit a.title", has_text="spare key").click()
    expect(page.locator("h1.text")).to_have_text(KEY)
    opener = page.get_by_role("link", name="Open in Obsidian").get_attribute("href")
    assert opener == "obsidian://open?vault=vault&file=Memory%2FFacts.md"
    shoot(page, "memory")

    page.get_by_role("link", name="Forget…").click()
    expect(page.get_by_role("heading", name="Forget this memory?")).to_be_visible()
    page.locator("#confirm-forget").click()
    expect(page.get_by_role("status")).to_contain_text(f"Forgotten everywhere: {key}")
    page.locator("#q").fill("spare key flowerpot")
    expect(page.locator("#results")).to_contain_text("Nothing found")
    with daemon.client() as api:
        assert api.get(f"/v1/memories/{key}").status_code == 404
        found = api.get("/v1/search", params={"q": "spare key flowerpot"}).json()["result"]
        assert all(hit["id"] != key for hit in found)


def test_approvals_page_lists_what_waits(console: Watched, daemon: DaemonProcess) -> None:
    page = console.page
    page.get_by_role("link", name="Approvals").click()
    expect(page.get_by_role("heading", name="Approvals")).to_be_visible()
    expect(page.locator("#main")).to_contain_text("No tool call is waiting")


def ran(daemon: DaemonProcess, job: str) -> int:
    """A run of ``job`` started over the API, once it has ended; its id."""
    with daemon.client() as api:
        started = api.post(f"/v1/jobs/{job}/run")
        assert started.status_code == 202, started.text
        run_id = int(started.json()["result"]["run_id"])
        wait_for(
            lambda: api.get(f"/v1/jobs/runs/{run_id}").json()["result"]["status"] != "running",
            f"run {run_id} of {job} to end",
        )
    return run_id


def test_run_a_job_from_the_page_see_what_it_changed_and_undo_it(
    console: Watched, daemon: DaemonProcess
) -> None:
    with daemon.client() as api:
        stored = api.post("/v1/memories", json={"text": "The boiler was serviced in October"})
        assert stored.status_code == 200
    summary = daemon.vault / "MEMORY.md"
    before = summary.read_bytes()
    page = console.page
    page.get_by_role("link", name="Jobs").click()
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    job = page.locator('[data-job="living_summary"]')
    expect(job).to_contain_text("30 3 * * *")
    shoot(page, "jobs")
    job.get_by_role("button", name="Run now").click()
    expect(page.locator("#run-status")).to_have_text("ok")  # htmx asked until it ended
    changed = page.locator('[data-file="MEMORY.md"]')
    expect(changed.locator(".diff .add", has_text="boiler was serviced")).to_be_visible()
    assert summary.read_bytes() != before
    run_id = int(page.url.rsplit("/", 1)[1])
    shoot(page, "job-run")
    part = console.context.request.get(page.url, headers={"HX-Request": "true"})
    assert part.text().startswith('<section id="run" data-status="ok"')  # what htmx polls

    page.get_by_role("link", name="← Jobs").click()
    history = page.locator(f'[data-run="{run_id}"]')
    expect(history).to_contain_text("living_summary")
    expect(history).to_contain_text("ok")
    history.get_by_role("link").click()
    page.locator("#undo").click()
    expect(page.get_by_role("status")).to_contain_text("Undone at")
    assert summary.read_bytes() == before  # the file is back, byte for byte
    expect(page.locator("#undo")).to_have_count(0)
    with daemon.client() as api:
        assert api.get(f"/v1/jobs/runs/{run_id}").json()["result"]["metadata"]["undone"]


def test_undo_after_a_hand_edit_is_refused_with_the_reason(
    console: Watched, daemon: DaemonProcess
) -> None:
    with daemon.client() as api:
        assert api.post("/v1/memories", json={"text": "The bins go out on Tuesday"}).is_success
    run_id = ran(daemon, "living_summary")
    summary = daemon.vault / "MEMORY.md"
    edited = summary.read_text(encoding="utf-8") + "\nMy own line, written in Obsidian.\n"
    summary.write_text(edited, encoding="utf-8")
    page = console.page
    page.goto(f"{daemon.url}/jobs/runs/{run_id}")
    expect(page.locator('[data-file="MEMORY.md"]')).to_contain_text("Edited since the run")
    page.locator("#undo").click()
    expect(page.get_by_role("alert")).to_have_text(
        f"MEMORY.md was edited after run {run_id}; nothing was undone, so that edit is kept."
    )
    assert summary.read_text(encoding="utf-8") == edited


def test_a_sessions_transcript(console: Watched, daemon: DaemonProcess) -> None:
    said = [
        ("user", "Ada", "Can you remind me what tea I like?"),
        ("assistant", None, "You prefer green tea in the morning."),
        ("user", "Ada", "Thanks, and book the plumber for Thursday"),
    ]
    with daemon.client() as api:
        for role, sender, text in said:
            logged = api.post(
                "/v1/sessions/telegram:4242/messages",
                json={"text": text, "role": role, "sender": sender},
            )
            assert logged.status_code == 200, logged.text
        session_id = logged.json()["result"]["session"]["id"]
    page = console.page
    page.get_by_role("link", name="Sessions").click()
    row = page.locator(f'[data-session="{session_id}"]')
    expect(row).to_contain_text("telegram")
    expect(row.locator("td").last).to_have_text("3")
    shoot(page, "sessions")
    row.get_by_role("link", name="telegram:4242").click()
    expect(page.get_by_role("heading", name="telegram:4242")).to_be_visible()
    turns = page.locator(".transcript .turn")
    expect(turns).to_have_count(3)
    expect(turns.nth(0)).to_contain_text("Ada")
    expect(turns.nth(1)).to_have_class("turn assistant")
    expect(turns.nth(2)).to_contain_text("book the plumber for Thursday")
    shoot(page, "session")
    missing = page.goto(f"{daemon.url}/sessions/{session_id + 1000}")
    assert missing is not None and missing.status == 404
    expect(page.get_by_role("alert")).to_have_text(f"There is no session {session_id + 1000}.")


def stranger_writes(
    daemon: DaemonProcess, telegram: FakeTelegram, sender: int, name: str
) -> dict[str, Any]:
    """``sender`` writes to the bot; once the daemon has them waiting, their record."""
    telegram.push_message(sender, f"hello, this is {name}", first_name=name, username=name.lower())

    def waiting() -> dict[str, Any] | None:
        with daemon.client() as api:
            found = api.get("/v1/channels/pending", params={"channel": "telegram"})
        return next((s for s in found.json()["result"] if s["sender_id"] == str(sender)), None)

    return wait_for(waiting, f"{name} to wait for pairing")


def decision(daemon: DaemonProcess, sender: int) -> tuple[str, str | None]:
    """A sender's status and who decided it, as state.db (which the CLI reads) holds it."""
    state = StateDB(daemon.vault / ".memvault")
    try:
        (row,) = state.query(
            "SELECT status, decided_by FROM channel_senders WHERE channel = 'telegram'"
            " AND sender_id = ?",
            (str(sender),),
        )
        return str(row["status"]), row["decided_by"]
    finally:
        state.close()


def test_pair_a_waiting_sender_and_block_another_from_the_page(
    console: Watched, daemon: DaemonProcess, telegram: FakeTelegram
) -> None:
    bob = stranger_writes(daemon, telegram, BOB, "Bob")
    stranger_writes(daemon, telegram, EVE, "Eve")
    page = console.page
    page.get_by_role("link", name="People").click()
    expect(page.get_by_role("heading", name="Channels and people")).to_be_visible()
    channel = page.locator('[data-channel="telegram"]')
    expect(channel.locator(".state")).to_have_text("running")
    expect(channel.locator(".last")).to_contain_text("hello, this is")
    waiting = page.locator(f'[data-sender="telegram:{BOB}"]')
    expect(waiting).to_contain_text("Bob")
    expect(waiting).to_contain_text(f"code {bob['code'][:4]}-{bob['code'][4:]}")
    shoot(page, "people")

    waiting.get_by_role("button", name="Approve").click()
    expect(page.get_by_role("status")).to_have_text(f"Approved Bob @bob (id {BOB}) on telegram.")
    expect(page.locator(f'[data-sender="telegram:{BOB}"]')).to_have_count(0)
    assert decision(daemon, BOB) == ("approved", "console")
    listed = invoke(daemon.vault, "channels", "pending", "--json")
    assert listed.exit_code == 0, listed.output
    assert str(BOB) not in {s["sender_id"] for s in json.loads(listed.output)}
    # Let in, Bob became a contact, known on Telegram.
    contact = page.locator('[data-contact="Contacts/Bob.md"]')
    expect(contact).to_contain_text(f"telegram {BOB}")
    assert (daemon.vault / "Contacts/Bob.md").is_file()

    page.locator(f'[data-sender="telegram:{EVE}"]').get_by_role("button", name="Block").click()
    expect(page.get_by_role("status")).to_contain_text(f"Blocked Eve @eve (id {EVE})")
    expect(page.locator(f'[data-sender="telegram:{EVE}"]')).to_have_count(0)
    assert decision(daemon, EVE) == ("blocked", "console")
    assert not (daemon.vault / "Contacts/Eve.md").exists()

    # A second decision on the same sender is the service's refusal, in its sentence.
    again = console.context.request.post(
        f"{daemon.url}/people/telegram/approve",
        form={"csrf": console.csrf(), "sender": "999"},
        headers={"Origin": daemon.url},
    )
    assert again.status == 404 and "999" in again.text()


def test_an_entitys_facts_relations_and_mentions_and_an_insights_evidence(
    console: Watched, daemon: DaemonProcess
) -> None:
    tea = memory_id(daemon.client, TEA)
    insight = daemon.vault / "Insights/Morning drinks.md"
    insight.parent.mkdir(exist_ok=True)
    block = MARKERS.block("## Insight\n\nTea, not coffee, every morning.\n\n## Evidence\n\n- x")
    insight.write_text(
        f"---\ntype: insight\nsources: [{tea}]\n---\n# Morning drinks\n\n{block}\n",
        encoding="utf-8",
    )
    page = console.page
    page.get_by_role("link", name="Knowledge").click()
    expect(page.get_by_role("heading", name="Knowledge", exact=True)).to_be_visible()
    row = page.locator('[data-entity="Contacts/Melanie.md"]')
    expect(row.locator("td").nth(1)).to_have_text("person")
    caroline = page.locator('[data-entity="Contacts/Caroline.md"]')
    expect(caroline.locator("td").nth(2)).to_have_text("1")  # sister_of Anna
    found = page.locator('[data-insight="Insights/Morning drinks.md"]')
    expect(found).to_contain_text("Tea, not coffee, every morning.")
    found.locator("summary").click()
    expect(found.get_by_role("link", name=TEA)).to_have_attribute("href", f"/memories/{tea}")
    shoot(page, "knowledge")

    row.get_by_role("link", name="Melanie").click()
    expect(page.get_by_role("heading", name="Melanie")).to_be_visible()
    facts = page.locator(".entity-facts tbody tr")
    ended = facts.filter(has_text="Ronaldo")
    expect(ended).to_contain_text("no longer holds")
    expect(ended.locator("td").nth(2)).to_have_text("2025-01-02")
    expect(ended.locator("td").nth(3)).to_have_text("2026-03-01")
    expect(facts.filter(has_text="Messi")).to_have_class("current")
    relations = page.locator(".entity-relations tbody tr")
    expect(relations.filter(has_text="friend_of")).to_contain_text("Caroline")
    expect(relations.filter(has_text="works_at").locator("td").nth(3)).to_have_text("2026-10-01")
    expect(page.locator(".mentions")).to_contain_text("bought a kiln")
    shoot(page, "entity")
    page.locator(".entity-relations").get_by_role("link", name="Caroline").click()
    expect(page.locator(".entity-relations")).to_contain_text("sister_of")
    missing = page.goto(f"{daemon.url}/knowledge/Nobody")
    assert missing is not None and missing.status == 404
    expect(page.get_by_role("alert")).to_have_text("No entity called 'Nobody'.")


def test_a_read_token_opens_a_read_only_console(
    browser: Browser, daemon: DaemonProcess, telegram: FakeTelegram
) -> None:
    made = invoke(daemon.vault, "tokens", "create", "viewer", "--scope", "read", "--json")
    assert made.exit_code == 0, made.output
    secret = json.loads(made.output)["token"]
    link = sign_in_link(daemon, secret)
    assert link["scope"] == "read"
    with signed_in(browser, link["url"]) as watched:
        page = watched.page
        expect(page.locator("#health")).to_contain_text("need the admin scope")
        expect(page.get_by_role("link", name="Approvals")).to_have_count(0)
        tea = memory_id(daemon.client, TEA)
        page.goto(f"{daemon.url}/memories/{tea}")
        expect(page.locator("h1.text")).to_have_text(TEA)
        expect(page.get_by_role("link", name="Forget…")).to_have_count(0)
        refused = watched.context.request.post(
            f"{daemon.url}/memories/{tea}/forget",
            form={"csrf": watched.csrf()},
            headers={"Origin": daemon.url},
        )
        assert refused.status == 403 and "read scope" in refused.text()
        assert page.goto(f"{daemon.url}/approvals").status == 403  # type: ignore[union-attr]

        # Jobs and sessions: seen, not run or undone.
        run_id = ran(daemon, "living_summary")
        summary = (daemon.vault / "MEMORY.md").read_bytes()
        page.goto(f"{daemon.url}/jobs")
        expect(page.locator('[data-job="living_summary"]')).to_be_visible()
        expect(page.get_by_role("button", name="Run now")).to_have_count(0)
        page.goto(f"{daemon.url}/jobs/runs/{run_id}")
        expect(page.locator('[data-file="MEMORY.md"]')).to_be_visible()
        expect(page.locator("#undo")).to_have_count(0)
        for change in ("/jobs/living_summary/run", f"/jobs/runs/{run_id}/undo"):
            refused = watched.context.request.post(
                daemon.url + change, form={"csrf": watched.csrf()}, headers={"Origin": daemon.url}
            )
            assert refused.status == 403 and "read scope" in refused.text(), change
        assert (daemon.vault / "MEMORY.md").read_bytes() == summary
        with daemon.client() as api:
            assert api.get("/v1/jobs/living_summary/runs").json()["result"][0]["id"] == run_id
        assert page.goto(f"{daemon.url}/sessions").status == 200  # type: ignore[union-attr]

        # Channels and people: who waits is seen, not let in or shut out; no pairing code shown.
        stranger_writes(daemon, telegram, MALLORY, "Mallory")
        page.goto(f"{daemon.url}/people")
        mallory = page.locator(f'[data-sender="telegram:{MALLORY}"]')
        expect(mallory).to_contain_text("Mallory")
        expect(mallory).not_to_contain_text("code")
        expect(page.get_by_role("button")).to_have_count(1)  # Sign out, nothing else
        for action in ("approve", "block"):
            refused = watched.context.request.post(
                f"{daemon.url}/people/telegram/{action}",
                form={"csrf": watched.csrf(), "sender": str(MALLORY)},
                headers={"Origin": daemon.url},
            )
            assert refused.status == 403 and "read scope" in refused.text(), action
        assert decision(daemon, MALLORY) == ("pending", None)
        page.goto(f"{daemon.url}/knowledge/Melanie")
        expect(page.locator(".entity-facts")).to_contain_text("Messi")
        ended = invoke(daemon.vault, "ui", "--revoke", "--token", secret)
        assert ended.exit_code == 2 and "admin scope" in ended.output  # the owner's to do
        with daemon.client() as api:
            assert api.get(f"/v1/memories/{tea}").status_code == 200

        # A token revoked ends the consoles it opened.
        assert invoke(daemon.vault, "tokens", "revoke", "viewer").exit_code == 0
        gone = page.goto(daemon.url + "/")
        assert gone is not None and gone.status == 401
        expect(page.get_by_role("alert")).to_contain_text("was revoked")


def test_revoke_signs_every_browser_out(console: Watched, daemon: DaemonProcess) -> None:
    page = console.page
    expect(page.get_by_role("heading", name="Today")).to_be_visible()
    unused = sign_in_link(daemon)
    ended = invoke(daemon.vault, "ui", "--revoke")
    assert ended.exit_code == 0 and "Ended" in ended.output
    again = page.reload()
    assert again is not None and again.status == 401
    expect(page.get_by_role("alert")).to_contain_text("not signed in")
    late = page.goto(unused["url"])
    assert late is not None and late.status == 403


def test_a_token_bound_to_an_agent_opens_no_console(daemon: DaemonProcess) -> None:
    made = invoke(
        daemon.vault, "tokens", "create", "scout", "--scope", "write", "--agent", "scout", "--json"
    )
    assert made.exit_code == 0, made.output
    secret = json.loads(made.output)["token"]
    with daemon.client() as api:
        refused = api.post("/v1/console/links", headers={"Authorization": f"Bearer {secret}"})
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "insufficient_scope"
        ended = api.delete("/v1/console/sessions", headers={"Authorization": f"Bearer {secret}"})
        assert ended.status_code == 403


def test_ui_without_a_daemon_says_how_to_start_one(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    printed = invoke(root, "ui", "--no-open")
    assert printed.exit_code == EXIT_VAULT
    assert "No daemon serves" in printed.output and "memvault serve" in printed.output
    assert "Traceback" not in printed.output
