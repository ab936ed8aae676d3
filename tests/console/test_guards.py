"""The console's guards and layout, in a real browser against a daemon in this process:
every change refused without the session cookie, a foreign ``Host`` refused, signing out,
the session cookie's attributes, the keyboard (a skip link, search, a result, a memory's
controls), and every page at a phone's width in light and in dark.

One daemon serves the module, with a memory or two, a job's run, a session, an agent run
(the fake model) and the entity notes of graph_support, so every page has something to
lay out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx2 as httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from console_support import PHONE, Served, Watched, fits, memory_id, sign_in_link, signed_in
from graph_support import KILN, write_people
from llm_fakes import FakeOpenAI, llm_settings
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import WAIT, wait_for

TEA = "I prefer green tea in the morning, never coffee"
KEY = "The spare key is under the blue flowerpot by the door"
ASKED = "Do I prefer green tea or coffee in the morning?"
SESSION_HOURS = 2


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, llm: FakeOpenAI) -> Iterator[Served]:
    """The daemon of the module: memories, a job's run, two sessions, an agent's run."""
    root = tmp_path_factory.mktemp("guards") / "vault"
    init_vault(Vault(root))
    write_people(root)
    live = Served(
        root,
        {
            "llm": llm_settings(llm, max_retries=0),
            "memory": {"consolidation": "rule", "capture": False},
            "console": {"session_hours": SESSION_HOURS},
        },
    )
    try:
        with live.api() as api:
            for text in (KILN, TEA, KEY):
                assert api.post("/v1/memories", json={"text": text, "tags": ["home"]}).is_success
            llm.reply("## Key memories\n- Green tea, never coffee\n")
            started = api.post("/v1/jobs/living_summary/run")
            assert started.status_code == 202, started.text
            run_id = started.json()["result"]["run_id"]
            wait_for(
                lambda: api.get(f"/v1/jobs/runs/{run_id}").json()["result"]["status"] != "running",
                "the summary's run to end",
            )
            for role, text in (("user", "Book the plumber for Thursday"), ("assistant", "Done.")):
                logged = api.post(
                    "/v1/sessions/telegram:4242/messages",
                    json={"text": text, "role": role, "sender": "Ada" if role == "user" else None},
                )
                assert logged.status_code == 200, logged.text
            llm.reply("", tool_calls=[("recall", {"topic": "tea in the morning"})])
            llm.reply("Green tea, never coffee.")
            answer = api.post("/v1/agent/run", json={"command": ASKED, "session": "guards"})
            assert answer.status_code == 200 and answer.json()["result"]["status"] == "done"
        yield live
    finally:
        live.stop()


@pytest.fixture
def console(browser: Browser, served: Served) -> Iterator[Watched]:
    with signed_in(browser, served.url, served.token) as watched:
        yield watched


def job_runs(served: Served) -> list[dict[str, Any]]:
    with served.api() as api:
        runs: list[dict[str, Any]] = api.get("/v1/jobs/living_summary/runs").json()["result"]
    return runs


def test_without_the_cookie_no_change_is_made_and_no_data_shown(served: Served) -> None:
    tea = memory_id(served.api, TEA)
    (run,) = job_runs(served)
    summary = (served.root / "MEMORY.md").read_bytes()
    origin = {"Origin": served.url}
    changes: list[tuple[str, dict[str, str]]] = [
        ("/approvals/abcd1234", {"decision": "approve", "hash": "0" * 12}),
        (f"/memories/{tea}/edit", {"hash": "0" * 64, "text": "Forged"}),
        (f"/memories/{tea}/forget", {}),
        ("/memories/bulk", {"action": "forget", "id": tea}),
        ("/memories/bulk", {"action": "tag", "id": tea, "tag": "forged"}),
        ("/jobs/living_summary/run", {}),
        (f"/jobs/runs/{run['id']}/undo", {}),
        ("/signout", {}),
        ("/people/telegram/approve", {"sender": "555"}),
        ("/people/telegram/block", {"sender": "555"}),
        ("/outbox/1/retry", {}),
    ]
    with httpx.Client(base_url=served.url, timeout=WAIT) as stranger:
        for path, form in changes:
            # A guessed CSRF token and the console's own origin change nothing either.
            refused = stranger.post(path, data={"csrf": "x" * 43, **form}, headers=origin)
            assert refused.status_code == 401, (path, refused.status_code)
            assert "not signed in" in refused.text, path
            assert "green tea" not in refused.text and tea not in refused.text, path
        asked = stranger.get(f"/memories/{tea}/forget")
        assert asked.status_code == 401 and "green tea" not in asked.text
        assert 'name="csrf"' not in asked.text
    with served.api() as api:
        kept = api.get(f"/v1/memories/{tea}")
        assert kept.status_code == 200 and kept.json()["result"]["text"] == TEA
        assert "forged" not in kept.json()["result"]["tags"]
    assert [r["id"] for r in job_runs(served)] == [run["id"]]  # not run again
    assert not job_runs(served)[0]["metadata"].get("undone")
    assert (served.root / "MEMORY.md").read_bytes() == summary


def test_a_foreign_host_is_refused_before_any_page(console: Watched, served: Served) -> None:
    link = sign_in_link(served.url, served.token)
    code = link["url"].rsplit("code=", 1)[1]
    cookie = {console.cookie()["name"]: console.cookie()["value"]}
    evil = {"Host": "evil.example"}
    tea = memory_id(served.api, TEA)
    with httpx.Client(base_url=served.url, timeout=WAIT, cookies=cookie) as browser_like:
        for path in ("/", f"/signin?code={code}", "/memories?q=green+tea", f"/memories/{tea}"):
            answer = browser_like.get(path, headers=evil)
            assert answer.status_code == 421, path
            assert "green tea" not in answer.text and "set-cookie" not in answer.headers
        forget = browser_like.post(
            f"/memories/{tea}/forget",
            data={"csrf": console.csrf()},
            headers={**evil, "Origin": "http://evil.example"},
        )
        assert forget.status_code == 421
    assert memory_id(served.api, TEA) == tea  # nothing forgotten
    # The refused sign-in did not spend the code: the daemon's own name still signs in.
    with httpx.Client(base_url=served.url, timeout=WAIT) as own:
        assert own.get(f"/signin?code={code}").status_code == 303


def test_sign_out_ends_the_session_and_the_cookie_says_how_long_it_lasts(
    browser: Browser, served: Served
) -> None:
    link = sign_in_link(served.url, served.token)
    with httpx.Client(base_url=served.url, timeout=WAIT) as raw:
        answer = raw.get(link["url"].removeprefix(served.url))
    assert answer.status_code == 303
    header = answer.headers["set-cookie"]
    attributes = {part.strip().split("=")[0].lower(): part for part in header.split(";")[1:]}
    assert "httponly" in attributes and attributes["samesite"].strip().lower() == "samesite=strict"
    assert attributes["path"].strip() == "Path=/"
    assert attributes["max-age"].strip() == f"Max-Age={SESSION_HOURS * 3600}"

    with signed_in(browser, served.url, served.token) as watched:
        cookie = watched.cookie()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
        lasts = cookie["expires"] - datetime.now(UTC).timestamp()
        assert SESSION_HOURS * 3600 - 120 < lasts <= SESSION_HOURS * 3600
        page = watched.page
        expect(page.get_by_role("heading", name="Today")).to_be_visible()
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_role("alert")).to_contain_text("Signed out")
        assert watched.context.cookies() == []  # the browser dropped it
        with httpx.Client(base_url=served.url, timeout=WAIT) as kept:
            kept.cookies.set(cookie["name"], cookie["value"])
            again = kept.get("/memories?q=green+tea")  # the old value opens nothing now
        assert again.status_code == 401 and "green tea" not in again.text
        gone = page.goto(served.url + "/")
        assert gone is not None and gone.status == 401


def focused(page: Page) -> str:
    """The focused element, as a short CSS-like name."""
    name: str = page.evaluate(
        "() => { const e = document.activeElement;"
        " return e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')"
        " + (e.className ? '.' + e.className : '')"
        " + ' ' + (e.textContent || '').trim().slice(0, 40); }"
    )
    return name


def tab_to(page: Page, selector: str, most: int = 60) -> None:
    """Press Tab until the element ``selector`` has the focus (at most ``most`` times)."""
    target = page.locator(selector).first
    expect(target).to_be_attached()
    for _ in range(most):
        page.keyboard.press("Tab")
        if target.evaluate("e => e === document.activeElement"):
            return
    raise AssertionError(f"Tab never reached {selector}; it stopped at {focused(page)}")


def outline_of(page: Page) -> str:
    """The focused element's computed outline."""
    outline: str = page.evaluate(
        "() => { const s = getComputedStyle(document.activeElement);"
        " return s.outlineStyle + ' ' + s.outlineWidth; }"
    )
    return outline


def test_the_keyboard_alone_searches_opens_a_memory_and_reaches_its_controls(
    console: Watched, served: Served
) -> None:
    key = memory_id(served.api, KEY)
    page = console.page
    page.goto(f"{served.url}/jobs")  # a page with no autofocus: Tab from the very start
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    box = skip.bounding_box()
    assert box is not None and box["x"] >= 0 and box["y"] >= 0  # shown once focused
    assert not outline_of(page).startswith("none")
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    page.keyboard.press("Tab")  # past the navigation: the first control of the page
    expect(page.locator('[data-job] button[type="submit"]').first).to_be_focused()

    page.goto(f"{served.url}/memories")
    expect(page.locator("#q")).to_be_focused()  # the search box has the focus at once
    page.keyboard.type("spare key flowerpot")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"q=spare"))  # searched, the address says what
    expect(page.locator(f'.hit[data-memory="{key}"] .why')).to_be_visible()
    expect(page.locator(".hit")).to_have_count(1)
    tab_to(page, f'.hit[data-memory="{key}"] a.title')
    assert not outline_of(page).startswith("none")
    page.keyboard.press("Enter")
    expect(page.locator("h1.text")).to_have_text(KEY)

    for control in ('a[href$="/forget"]', "#edit-text", "#save-edit"):
        tab_to(page, control)
        assert not outline_of(page).startswith("none"), (control, outline_of(page))
    tab_to(page, 'a[href$="/forget"]')
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Forget this memory?")).to_be_visible()
    with served.api() as api:
        assert api.get(f"/v1/memories/{key}").status_code == 200  # asked, not forgotten


def test_every_page_fits_a_phone_in_light_and_dark(console: Watched, served: Served) -> None:
    tea = memory_id(served.api, TEA)
    (job_run,) = job_runs(served)
    with served.api() as api:
        sessions = api.get("/v1/sessions").json()["result"]
    session = next(s for s in sessions if s["key"] == "telegram:4242")
    runs = served.daemon.runtime.runs.list()
    run = next(r for r in runs if r.command == ASKED)
    pages = {
        "/": "Today",
        "/memories?q=green+tea": "Memories",
        f"/memories/{tea}": TEA,
        f"/memories/{tea}/forget": "Forget this memory?",
        "/approvals": "Approvals",
        "/jobs": "Jobs",
        f"/jobs/runs/{job_run['id']}": "living_summary",
        "/people": "Channels and people",
        "/sessions": "Sessions",
        f"/sessions/{session['id']}": "telegram:4242",
        "/runs": "Why did it say that",
        f"/runs/{run.id}": "Why did it say that",
        "/knowledge": "Knowledge",
        "/knowledge/Contacts/Melanie.md": "Melanie",
    }
    page = console.page
    page.set_viewport_size(PHONE)  # type: ignore[arg-type]
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for path, shown in pages.items():
            answer = page.goto(served.url + path)
            assert answer is not None and answer.status == 200, path
            expect(page.locator("#main")).to_contain_text(re.compile(re.escape(shown)))
            assert page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches") == (
                scheme == "dark"
            )
            fits(page, f"{path} ({scheme})")
