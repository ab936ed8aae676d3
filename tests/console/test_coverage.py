"""What the console shows that no other browser test looked at: the search's kind and tag
filters, a memory's source and who read it, what the token budget left out of a run's
context, a channel's error, the outbox and its Retry, a job's next run, on/off and
failures in a row, and a session list's times.

One daemon, in this process, serves the module: the fake model with a small context
budget, the fake Telegram (its owner set) and a Discord channel with no token, which
cannot start.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from channel_support import OWNER, delivered, telegram_config
from console_support import DESKTOP, PHONE, Served, Watched, fits, sign_in_link, signed_in
from graph_support import write_people
from llm_fakes import FakeOpenAI, llm_settings
from memvault.errors import MemvaultError
from memvault.gateway.tokens import Scope
from memvault.jobs import Job, JobContext, Schedule
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from telegram_fake import FakeTelegram
from waiting import wait_for

GARDEN = "Tell me about the allotment garden"
POTTERY = "The pottery class meets on Wednesday evenings"
NO_DISCORD_TOKEN = "MEMVAULT_TEST_DISCORD_TOKEN_UNSET"


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, tg: FakeTelegram, llm: FakeOpenAI
) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("coverage") / "vault"
    init_vault(Vault(root))
    write_people(root)
    live = Served(
        root,
        {
            "llm": llm_settings(llm, max_retries=0),
            "agent": {"context_budget": 60},
            # The scripted replies are the agent's: storing must not take one.
            "memory": {"consolidation": "rule", "capture": False},
            "channels": {
                "telegram": telegram_config(tg),
                "discord": {"enabled": True, "token_env": NO_DISCORD_TOKEN},
            },
        },
    )
    yield live
    live.stop()


def stored(served: Served, text: str, **fields: Any) -> dict[str, Any]:
    with served.api() as api:
        answer = api.post("/v1/memories", json={"text": text, **fields})
    assert answer.status_code == 200, answer.text
    memory: dict[str, Any] = answer.json()["result"]
    return memory


@pytest.fixture
def console(browser: Browser, served: Served) -> Iterator[Watched]:
    with signed_in(browser, served.url, served.token) as watched:
        yield watched


def read_only(browser: Browser, served: Served, name: str) -> Any:
    """A console opened with a new read token called ``name``."""
    _, secret = served.daemon.tokens.create(name, [Scope.READ])
    return signed_in(browser, sign_in_link(served.url, secret)["url"])


def test_the_kind_and_tag_filters_narrow_the_results(console: Watched, served: Served) -> None:
    plain = stored(served, "The shed key hangs behind the garden door")
    tagged = stored(served, "The garden hose is in the shed by the door", tags=["garden"])
    pottery = stored(served, POTTERY, category="fact")
    page = console.page
    page.goto(f"{served.url}/memories")
    page.locator("#q").fill("shed door garden")
    results = page.locator("#results")
    expect(results.locator(f'[data-memory="{plain["id"]}"]')).to_be_visible()
    expect(results.locator(f'[data-memory="{tagged["id"]}"]')).to_be_visible()
    page.get_by_label("Tag").fill("#garden")
    expect(results.locator(f'[data-memory="{plain["id"]}"]')).to_have_count(0)
    expect(results.locator(f'[data-memory="{tagged["id"]}"]')).to_be_visible()
    assert "tag=" in page.url

    page.get_by_label("Tag").fill("")
    page.locator("#q").fill("pottery class")
    expect(results.locator(f'[data-memory="{pottery["id"]}"]')).to_be_visible()
    contact = results.locator(".hit", has_text="Contacts/Melanie.md")
    expect(contact).to_have_count(0)  # a memory search shows memories only
    page.get_by_label("Kind").select_option("contact")
    expect(contact).to_be_visible()
    expect(contact.locator(".meta")).to_contain_text("contact")
    expect(results.locator(f'[data-memory="{pottery["id"]}"]')).to_have_count(0)
    page.get_by_label("Kind").select_option("all")
    expect(contact).to_be_visible()
    expect(results.locator(f'[data-memory="{pottery["id"]}"]')).to_be_visible()


def test_a_memorys_page_shows_its_source_and_who_read_it(
    console: Watched, served: Served, llm: FakeOpenAI
) -> None:
    boiler = stored(served, "The boiler was serviced in October", source="phone")
    page = console.page
    page.goto(f"{served.url}/memories/{boiler['id']}")
    source = page.locator(".facts div", has=page.locator("dt", has_text="Source"))
    expect(source.locator("dd")).to_have_text("phone")
    reads = page.locator('section[aria-labelledby="reads-title"]')
    expect(reads).not_to_contain_text("dashboard")

    # A read token's search reads it; so does an agent's run that recalls it.
    _, secret = served.daemon.tokens.create("dashboard", [Scope.READ])
    with served.api(secret) as api:
        hits = api.get("/v1/search", params={"q": "boiler serviced", "keyword": True})
        assert boiler["id"] in [h["id"] for h in hits.json()["result"]]
    llm.reply("", tool_calls=[("recall", {"topic": "boiler serviced"})])
    llm.reply("In October.")
    with served.api() as api:
        ran = api.post("/v1/agent/run", json={"command": "When was the boiler serviced?"})
        assert ran.status_code == 200 and ran.json()["result"]["status"] == "done", ran.text
    page.reload()
    listed = reads.locator("li")
    expect(listed.filter(has_text="dashboard")).to_contain_text("http · search")
    expect(listed.filter(has_text="agent")).not_to_have_count(0)


def test_what_the_budget_left_out_is_shown_on_the_runs_page(
    console: Watched, served: Served, llm: FakeOpenAI
) -> None:
    for n in range(12):
        stored(served, f"Fact number {n} about the allotment garden plots", category="fact")
    llm.reply("Noted.")
    with served.api() as api:
        ran = api.post("/v1/agent/run", json={"command": GARDEN, "session": "budget"})
        assert ran.status_code == 200 and ran.json()["result"]["status"] == "done", ran.text
    run = next(r for r in served.daemon.runtime.runs.list() if r.command == GARDEN)
    record = served.daemon.runtime.runs.get(run.id or 0)
    cut = [s for s in record.context["sections"] if s["left_out_count"]]
    assert cut, record.context  # the budget did leave lines out
    page = console.page
    page.goto(f"{served.url}/runs/{run.id}")
    for section in cut:
        shown = page.locator(f'.context-section[data-section="{section["title"]}"]')
        left_out = shown.locator("details.left-out")
        expect(left_out.locator("summary")).to_have_text(
            f"{section['left_out_count']} left out for the token budget"
        )
        expect(left_out.locator("pre")).not_to_be_visible()  # folded until asked for
        left_out.locator("summary").click()
        expect(left_out.locator("pre")).to_be_visible()
        expect(left_out.locator("pre")).to_contain_text(section["left_out"][0])
    hidden = [hit for hit in record.recalled if not hit["shown"]]
    assert hidden, record.recalled  # a recalled memory the budget left out
    for hit in hidden:
        row = page.locator(f'.recalled [data-recalled="{hit["id"]}"]')
        expect(row.locator(".warn")).to_have_text("left out for the budget")
    for hit in record.recalled:
        if hit["shown"] and hit.get("id"):
            expect(page.locator(f'.recalled [data-recalled="{hit["id"]}"] .warn')).to_have_count(0)
    on_a_phone(page, f"/runs/{run.id} with what was left out unfolded")


def on_a_phone(page: Page, where: str) -> None:
    """The page as it is now fits a phone's width in light and in dark; then back to a
    desktop's width in light."""
    page.set_viewport_size(PHONE)  # type: ignore[arg-type]
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        fits(page, f"{where} ({scheme})")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]


def failed_row(served: Served, text: str) -> int:
    """The id of the outbox row of ``text``, once it has failed."""
    store = served.daemon.hub.store

    def found() -> int | None:
        rows = [r for r in store.outbox(limit=200) if r.text == text]
        return rows[0].id if rows and rows[0].status == "failed" else None

    outbox_id = wait_for(found, f"the message {text!r} to fail")
    assert outbox_id is not None
    return outbox_id


def test_a_channels_error_and_a_failed_message_retried_from_the_page(
    browser: Browser, console: Watched, served: Served, tg: FakeTelegram
) -> None:
    text = "Your parcel arrives tomorrow"
    tg.fail("sendMessage", 400, description="Bad Request: chat not found")
    with served.api() as api:
        payload = {"conversation_hint": "owner", "text": text}
        sent = api.post(
            "/v1/send",
            json={"adapter": "telegram", "action": "send_message", "payload": payload},
        )
        assert sent.is_success, sent.text
    outbox_id = failed_row(served, text)

    page = console.page
    page.goto(f"{served.url}/people")
    discord = page.locator('[data-channel="discord"]')
    expect(discord.locator(".state")).not_to_have_text("running")
    expect(discord.locator(".error")).to_contain_text(NO_DISCORD_TOKEN)
    row = page.locator(f'[data-outbox="{outbox_id}"]')
    expect(row).to_contain_text("failed")
    expect(row).to_contain_text("Telegram refused the message to chat")
    expect(row).to_contain_text(text)
    on_a_phone(page, "/people with a channel's error and the outbox")

    # A read-only console sees the row, not the button, and its POST is refused.
    with read_only(browser, served, "outbox-viewer") as viewer:
        viewer.page.goto(f"{served.url}/people")
        seen = viewer.page.locator(f'[data-outbox="{outbox_id}"]')
        expect(seen).to_contain_text("failed")
        expect(seen.get_by_role("button", name="Retry")).to_have_count(0)
        refused = viewer.context.request.post(
            f"{served.url}/outbox/{outbox_id}/retry",
            form={"csrf": viewer.csrf()},
            headers={"Origin": served.url},
        )
        assert refused.status == 403 and "read scope" in refused.text()
    queued = served.daemon.hub.store.queued(outbox_id)
    assert queued is not None and queued.status == "failed"
    assert text not in delivered(tg, OWNER)

    row.get_by_role("button", name="Retry").click()
    expect(page.get_by_role("status")).to_have_text(f"Outbox message {outbox_id} is queued again.")
    wait_for(lambda: text in delivered(tg, OWNER), "the retried message to reach Telegram")
    page.reload()
    expect(page.locator(f'[data-outbox="{outbox_id}"]')).to_have_count(0)  # sent, not listed


def test_a_jobs_card_shows_its_next_run_on_or_off_and_failures_in_a_row(
    console: Watched, served: Served
) -> None:
    def flaky(ctx: JobContext) -> str:
        raise MemvaultError("The flaky job could not reach its server.")

    served.daemon.jobs.add(Job("flaky", Schedule(cron="0 4 * * *"), flaky, description="fails"))
    served.daemon.jobs.add(
        Job("resting", Schedule(every_seconds=3600), flaky, enabled=False, description="off")
    )
    with served.api() as api:
        for _ in range(2):
            started = api.post("/v1/jobs/flaky/run")
            assert started.status_code == 202, started.text
            run_id = started.json()["result"]["run_id"]
            wait_for(
                lambda: (
                    api.get(f"/v1/jobs/runs/{run_id}").json()["result"]["status"]  # noqa: B023
                    != "running"
                ),
                "the flaky job's run to end",
            )
        jobs = {j["name"]: j for j in api.get("/v1/jobs").json()["result"]}
    assert jobs["flaky"]["failures_in_a_row"] == 2 and jobs["flaky"]["next_run"]
    page = console.page
    page.goto(f"{served.url}/jobs")
    card = page.locator('[data-job="flaky"]')
    expect(card.locator(".meta")).to_contain_text("on")
    expect(card.locator(".bad")).to_have_text("failed 2 times in a row")
    next_run = jobs["flaky"]["next_run"][:16].replace("T", " ")
    expect(card).to_contain_text(f"next: {next_run}")
    expect(card.locator(".meta a.status-failed")).to_have_text("failed")
    resting = page.locator('[data-job="resting"]')
    expect(resting.locator(".meta span").first).to_have_text("off")
    shown = jobs["resting"]["next_run"]
    expect(resting).to_contain_text(
        f"next: {shown[:16].replace('T', ' ')}" if shown else "next: not scheduled"
    )
    expect(resting).not_to_contain_text("in a row")
    living = page.locator('[data-job="living_summary"]')
    expect(living.locator(".meta span").first).to_have_text(
        "on" if jobs["living_summary"]["enabled"] else "off"
    )
    on_a_phone(page, "/jobs with a failing job")
    page.goto(f"{served.url}/")  # Today, with a failing job and a channel down
    expect(page.get_by_role("heading", name="Today")).to_be_visible()
    on_a_phone(page, "/ with a failing job and a channel down")


def test_the_sessions_list_shows_when_each_started_and_last_spoke(
    console: Watched, served: Served
) -> None:
    with served.api() as api:
        for text in ("Is the plumber coming?", "And at what time?"):
            logged = api.post(
                "/v1/sessions/telegram:777/messages",
                json={"text": text, "role": "user", "sender": "Ada"},
            )
            assert logged.status_code == 200, logged.text
        listed = api.get("/v1/sessions").json()["result"]
    session = next(s for s in listed if s["key"] == "telegram:777")
    assert session["started_at"] and session["last_message_at"]
    page = console.page
    page.goto(f"{served.url}/sessions")
    row = page.locator(f'[data-session="{session["id"]}"]')
    cells = row.locator("td")
    expect(cells.nth(2)).to_have_text(session["started_at"][:16].replace("T", " "))
    expect(cells.nth(3)).to_have_text(session["last_message_at"][:16].replace("T", " "))
    expect(cells.nth(4)).to_have_text("2")
