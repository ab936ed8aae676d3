"""Changing memories from the console, in a real browser against a real daemon: a memory's
text edited (never over an edit made meanwhile in Obsidian), the search's filters for
source, dates and trust, and the results chosen and forgotten, moved or tagged together.

The daemon runs in this process (uvicorn in a thread, as ``memvault serve`` builds it, the
console included), so a test can write a memory file between the page's load and its
submit, as Obsidian would.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Page, expect

from console_support import Served as ServedConsole
from console_support import Watched, shoot, signed_in
from memvault.gateway.tokens import Scope
from memvault.vault.layout import init_vault
from memvault.vault.memories import Memory
from memvault.vault.store import Vault


class Served(ServedConsole):
    """The in-process daemon with its console, and memories stored through it."""

    def remember(self, text: str, **options: object) -> Memory:
        stored = self.daemon.runtime.memories.remember(text, **options)  # type: ignore[arg-type]
        return stored.memory


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("memory-changes") / "vault"
    init_vault(Vault(root))
    live = Served(root)
    yield live
    live.stop()


@pytest.fixture
def console(browser: Browser, served: Served) -> Iterator[Watched]:
    with signed_in(browser, served.url, served.token) as watched:
        yield watched


def choose(console: Watched, served: Served, query: str, *memories: Memory) -> Page:
    """The page of the search for ``query``, with ``memories`` chosen in its results."""
    page = console.page
    page.goto(f"{served.url}/memories?{urlencode({'q': query})}")
    for memory in memories:
        page.locator(f'[data-memory="{memory.id}"] .pick').check()
    return page


def test_an_edit_made_in_obsidian_meanwhile_is_shown_beside_the_draft_and_kept(
    console: Watched, served: Served
) -> None:
    car = served.remember("The car is parked on level 3 of the station garage")
    note = served.root / car.path
    page = console.page
    page.goto(f"{served.url}/memories/{car.id}")
    expect(page.locator("#edit-text")).to_have_value(car.text)
    page.locator("#edit-text").fill("The car is parked on level 4 of the station garage")

    # Between the page's load and its submit, the owner changes the line in Obsidian.
    obsidian = note.read_text(encoding="utf-8").replace("on level 3", "on level 5")
    note.write_text(obsidian, encoding="utf-8")
    with page.expect_response(f"{served.url}/memories/{car.id}/edit") as answered:
        page.locator("#save-edit").click()
    assert answered.value.status == 409
    conflict = page.locator("#conflict")
    expect(conflict).to_contain_text("nothing was written")
    expect(page.locator("#theirs")).to_have_text(
        "The car is parked on level 5 of the station garage"
    )
    expect(page.locator("#edit-text")).to_have_value(
        "The car is parked on level 4 of the station garage"
    )
    assert note.read_text(encoding="utf-8") == obsidian  # not a byte overwritten
    shoot(page, "memory-conflict")

    # With both in view, saving again is the owner's decision: now it is written.
    page.locator("#save-edit").click()
    expect(page.locator("h1.text")).to_have_text(
        "The car is parked on level 4 of the station garage"
    )
    expect(page.locator("#conflict")).to_have_count(0)
    now = served.daemon.runtime.memories.get(car.id)
    assert now.text == "The car is parked on level 4 of the station garage"
    assert "on level 5" not in note.read_text(encoding="utf-8")
    expect(page.locator("#history-title + ol")).to_contain_text("update by owner")
    expect(page.locator("#history-title + ol")).to_contain_text("level 5")


def test_a_form_from_another_origin_or_without_its_token_edits_nothing(
    console: Watched, served: Served
) -> None:
    boiler = served.remember("The boiler code is kept in the kitchen drawer")
    page = console.page
    page.goto(f"{served.url}/memories/{boiler.id}")
    stamp = page.locator('input[name="hash"]').get_attribute("value")
    assert stamp
    request = console.context.request
    forged = request.post(
        f"{served.url}/memories/{boiler.id}/edit",
        form={"hash": stamp, "text": "Forged"},
        headers={"Origin": served.url},
    )
    assert forged.status == 403 and "stale" in forged.text()
    elsewhere = request.post(
        f"{served.url}/memories/{boiler.id}/edit",
        form={"csrf": console.csrf(), "hash": stamp, "text": "Forged"},
        headers={"Origin": "http://evil.example"},
    )
    assert elsewhere.status == 403
    assert served.daemon.runtime.memories.get(boiler.id).text == boiler.text


def test_filters_for_source_dates_and_trust_and_each_results_reasons(
    console: Watched, served: Served
) -> None:
    now = served.daemon.runtime.clock.now()
    old = served.remember(
        "The parcel from the bookshop went to the neighbour",
        source="cli",
        created=now - timedelta(days=400),
    )
    chat = served.remember(
        "The parcel for Ada waits at the post office", source="telegram", importance=0.9
    )
    low = served.remember("The parcel courier says to always leave the door open", source="email")
    served.daemon.runtime.memories.update_fields(low.id, trust="low", trust_reason="test")
    page = console.page
    page.goto(f"{served.url}/memories?q=parcel")
    for memory in (old, chat, low):
        expect(page.locator(f'[data-memory="{memory.id}"]')).to_be_visible()
    reasons = page.locator(f'[data-memory="{chat.id}"] .why')
    expect(reasons).to_contain_text("keywords")
    expect(reasons).to_contain_text("importance 0.90")
    expect(page.locator(f'[data-memory="{chat.id}"] .meta')).to_contain_text("from telegram")

    page.locator(".search [name=source]").select_option("telegram")
    expect(page.locator(f'[data-memory="{old.id}"]')).to_have_count(0)
    expect(page.locator(f'[data-memory="{chat.id}"]')).to_be_visible()
    assert "source=telegram" in page.url
    page.locator(".search [name=source]").select_option("")

    page.locator(".search [name=trust]").select_option("low")
    expect(page.locator(f'[data-memory="{chat.id}"]')).to_have_count(0)
    expect(page.locator(f'[data-memory="{low.id}"]')).to_contain_text("trust low")
    page.locator(".search [name=trust]").select_option("")

    page.locator(".search [name=since]").fill((now - timedelta(days=30)).date().isoformat())
    expect(page.locator(f'[data-memory="{old.id}"]')).to_have_count(0)
    expect(page.locator(f'[data-memory="{chat.id}"]')).to_be_visible()
    page.locator(".search [name=since]").fill("")
    page.locator(".search [name=until]").fill((now - timedelta(days=300)).date().isoformat())
    expect(page.locator(f'[data-memory="{chat.id}"]')).to_have_count(0)
    expect(page.locator(f'[data-memory="{old.id}"]')).to_be_visible()
    shoot(page, "memories-filters")

    # The same filters with no words: the newest memories that pass them.
    page.goto(f"{served.url}/memories?source=email&trust=low")
    expect(page.locator(f'[data-memory="{low.id}"]')).to_be_visible()
    expect(page.locator(f'[data-memory="{chat.id}"]')).to_have_count(0)
    bad = page.goto(f"{served.url}/memories?q=parcel&since=soon")
    assert bad is not None and bad.status == 400
    expect(page.get_by_role("alert")).to_have_text("'soon' is not a date; use YYYY-MM-DD.")


def test_choose_results_then_forget_them_after_confirming_and_search_no_longer_finds_them(
    console: Watched, served: Served
) -> None:
    first = served.remember("The old router password was printed on a yellow sticker")
    second = served.remember("The yellow sticker also had the old wifi name")
    kept = served.remember("The new router sits on the yellow shelf")
    page = choose(console, served, "yellow sticker", first, second)
    page.locator("#bulk-forget").click()
    expect(page.get_by_role("heading", name="Forget these 2 memories?")).to_be_visible()
    expect(page.locator(".chosen li")).to_have_count(2)
    assert served.daemon.runtime.memories.get(first.id)  # nothing is gone before the yes
    shoot(page, "memories-bulk-forget")
    page.locator("#confirm-forget").click()
    expect(page.get_by_role("status")).to_have_text("Forgotten everywhere: 2 memories.")
    assert "q=yellow+sticker" in page.url  # back at the search it was made from
    expect(page.locator(f'[data-memory="{first.id}"]')).to_have_count(0)
    expect(page.locator(f'[data-memory="{second.id}"]')).to_have_count(0)
    page.locator("#q").fill("router password yellow sticker wifi")
    expect(page.locator(f'[data-memory="{kept.id}"]')).to_be_visible()
    expect(page.locator(f'[data-memory="{first.id}"]')).to_have_count(0)
    texts = [m.text for m in served.daemon.runtime.memories.list()]
    assert first.text not in texts and second.text not in texts and kept.text in texts
    hits = served.daemon.runtime.searcher.search("yellow sticker", limit=20)
    assert {first.id, second.id}.isdisjoint(h.id for h in hits)


def test_choose_results_then_move_them_to_a_category_and_tag_them(
    console: Watched, served: Served
) -> None:
    tea = served.remember("Oolong tea tastes best at eighty five degrees", category="fact")
    pot = served.remember("The clay teapot is only for oolong tea", category="fact")
    page = choose(console, served, "oolong tea", tea, pot)
    page.get_by_label("Move to").select_option("preference")
    page.locator("#bulk-move").click()
    expect(page.get_by_role("status")).to_have_text("Moved 2 memories to preference.")
    for memory in (tea, pot):
        moved = served.daemon.runtime.memories.get(memory.id)
        assert (moved.category, moved.text) == ("preference", memory.text)
    facts = (served.root / "Memory/Facts.md").read_text(encoding="utf-8")
    assert tea.id not in facts and pot.id not in facts

    page.locator(f'[data-memory="{tea.id}"] .pick').check()
    page.get_by_label("Add", exact=True).fill("#drinks")
    page.locator("#bulk-tag").click()
    expect(page.get_by_role("status")).to_have_text("Tagged 1 memory #drinks.")
    expect(page.locator(f'[data-memory="{tea.id}"] .meta')).to_contain_text("#drinks")
    assert served.daemon.runtime.memories.get(tea.id).tags == ["drinks"]
    assert served.daemon.runtime.memories.get(pot.id).tags == []
    page.goto(f"{served.url}/memories/{tea.id}")
    history = page.locator("#history-title + ol")
    expect(history).to_contain_text("recategorize by owner: fact -> preference")
    expect(history).to_contain_text("tag by owner: added #drinks")

    # A change with nothing chosen, or to no category, is one sentence; nothing moves.
    request = console.context.request
    none = request.post(
        f"{served.url}/memories/bulk",
        form={"csrf": console.csrf(), "action": "category", "category": "decision"},
        headers={"Origin": served.url},
    )
    assert none.status == 400 and "at least one memory" in none.text()
    wrong = request.post(
        f"{served.url}/memories/bulk",
        form={"csrf": console.csrf(), "action": "category", "category": "nope", "id": pot.id},
        headers={"Origin": served.url},
    )
    assert wrong.status == 400 and "Unknown memory category" in wrong.text()
    assert served.daemon.runtime.memories.get(pot.id).category == "preference"


def _drop_line(served: Served, memory: Memory) -> None:
    """Delete the memory's line from its note by hand, as an edit in Obsidian would."""
    note = served.root / memory.path
    lines = note.read_text(encoding="utf-8").splitlines(keepends=True)
    note.write_text("".join(x for x in lines if memory.id not in x), encoding="utf-8")


def test_a_bulk_forget_does_every_other_memory_and_says_which_were_not_and_why(
    console: Watched, served: Served
) -> None:
    gone = served.remember("The attic lamp needs a bulb of forty watts")
    edited = served.remember("The attic ladder folds into the hatch")
    left = served.remember("The attic window sticks in winter")
    page = choose(console, served, "attic", gone, edited, left)
    page.locator("#bulk-forget").click()
    expect(page.locator(".chosen li")).to_have_count(3)

    # Between the confirmation and the yes: one is forgotten elsewhere, another's line is
    # deleted by hand in Obsidian.
    served.daemon.runtime.forgetter.forget(gone.id)
    _drop_line(served, edited)
    with page.expect_response(f"{served.url}/memories/bulk") as answered:
        page.locator("#confirm-forget").click()
    assert answered.value.status == 200
    expect(page.get_by_role("status")).to_have_text("Forgotten everywhere: 1 memory.")
    not_done = page.locator(".not-done li")
    expect(not_done).to_have_count(2)
    for memory in (gone, edited):
        expect(not_done.filter(has_text=memory.id)).to_have_text(
            f"{memory.id} was not forgotten: it is no longer in the vault "
            "(forgotten, or its line changed, meanwhile)."
        )
    texts = [m.text for m in served.daemon.runtime.memories.list()]
    assert left.text not in texts
    shoot(page, "memories-bulk-not-done")
    page.locator("#back-to-search").click()
    expect(page.locator("#q")).to_have_value("attic")
    expect(page.locator(f'[data-memory="{left.id}"]')).to_have_count(0)


def test_a_bulk_move_or_a_confirmation_skips_a_memory_gone_meanwhile(
    console: Watched, served: Served
) -> None:
    kept = served.remember("The spare house key hangs behind the fuse box", category="fact")
    gone = served.remember("The spare car key is in the blue bowl", category="fact")
    page = choose(console, served, "spare key", kept, gone)
    served.daemon.runtime.forgetter.forget(gone.id)
    page.get_by_label("Move to").select_option("preference")
    with page.expect_response(f"{served.url}/memories/bulk") as answered:
        page.locator("#bulk-move").click()
    assert answered.value.status == 200
    expect(page.get_by_role("status")).to_have_text("Moved 1 memory to preference.")
    expect(page.locator(".not-done li")).to_have_text(
        f"{gone.id} was not moved: it is no longer in the vault "
        "(forgotten, or its line changed, meanwhile)."
    )
    assert served.daemon.runtime.memories.get(kept.id).category == "preference"

    # The confirmation of a forget lists those still there and says which are gone.
    other = served.remember("The spare bike key is on the hook", category="fact")
    choose(console, served, "spare key", kept, other)
    _drop_line(served, other)
    page.locator("#bulk-forget").click()
    expect(page.get_by_role("heading", name="Forget this memory?")).to_be_visible()
    expect(page.locator(".chosen li")).to_have_count(1)
    expect(page.locator(".gone li")).to_contain_text(f"{other.id} was not forgotten")
    page.locator("#confirm-forget").click()
    expect(page.get_by_role("status")).to_have_text("Forgotten everywhere: 1 memory.")

    # Nothing left to do: one sentence, nothing changed.
    request = console.context.request
    none = request.post(
        f"{served.url}/memories/bulk",
        form={"csrf": console.csrf(), "action": "tag", "tag": "keys", "id": gone.id},
        headers={"Origin": served.url},
    )
    assert none.status == 409 and "No memory was tagged." in none.text()


def test_a_read_only_console_can_neither_edit_nor_change_in_bulk(
    browser: Browser, served: Served
) -> None:
    _, secret = served.daemon.tokens.create("viewer", [Scope.READ])
    stamp = served.remember("The ladder is kept in the garden shed")
    with signed_in(browser, served.url, secret) as watched:
        page = watched.page
        page.goto(f"{served.url}/memories/{stamp.id}")
        expect(page.locator("h1.text")).to_have_text(stamp.text)
        expect(page.locator("#edit-text")).to_have_count(0)
        page.goto(f"{served.url}/memories?q=ladder+shed")
        expect(page.locator(f'[data-memory="{stamp.id}"]')).to_be_visible()
        expect(page.locator(".pick")).to_have_count(0)
        expect(page.locator("#bulk")).to_have_count(0)
        request = watched.context.request
        for path, form in (
            (f"/memories/{stamp.id}/edit", {"text": "Changed", "hash": "0" * 64}),
            ("/memories/bulk", {"action": "forget", "confirmed": "yes", "id": stamp.id}),
        ):
            refused = request.post(
                served.url + path,
                form={"csrf": watched.csrf(), **form},
                headers={"Origin": served.url},
            )
            assert refused.status == 403 and "read scope" in refused.text(), path
        assert served.daemon.runtime.memories.get(stamp.id).text == stamp.text
