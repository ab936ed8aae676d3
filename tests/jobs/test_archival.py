"""The archival job on a seeded vault: what it retires, what it leaves, and undo."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memvault.config import ArchivalJob
from memvault.index.filters import SearchFilters
from memvault.jobs import Job, JobEngine, JobRun, Schedule, archival
from memvault.runtime import Runtime
from memvault.vault.memories import Memory
from support import TZ, HashEmbedder, MovableClock

pytestmark = pytest.mark.both_backends

NOW = datetime(2026, 11, 22, 9, 30, tzinfo=TZ)
LONG_AGO = NOW - timedelta(days=400)


@pytest.fixture(autouse=True)
def recalls_recorded_for_long(runtime: Runtime) -> None:
    """A vault whose searches have been recorded for longer than any recall window."""
    runtime.recalls.begin(LONG_AGO - timedelta(days=1))


def remember(
    runtime: Runtime, clock: MovableClock, text: str, *, when: datetime, **kwargs: object
) -> Memory:
    clock.set(when)
    try:
        return runtime.memories.remember(text, **kwargs).memory  # type: ignore[arg-type]
    finally:
        clock.set(NOW)


def engine(runtime: Runtime, clock: MovableClock, **settings: object) -> JobEngine:
    job = Job(
        "archival",
        Schedule(cron="0 4 * * 0"),
        archival.run,
        settings=ArchivalJob(enabled=True, **settings),  # type: ignore[arg-type]
    )
    return JobEngine(runtime.state, clock, [job], runtime=runtime)


def archived_ids(runtime: Runtime) -> set[str]:
    return {m.id for m in runtime.memories.all() if m.archived}


def found(runtime: Runtime, query: str, *, include_archived: bool = False) -> set[str]:
    filters = SearchFilters(include_archived=include_archived)
    hits = runtime.searcher.search(query, filters=filters, mode="keyword")
    return {h.id for h in hits if h.id}


def test_only_the_old_unimportant_unused_memory_is_archived(
    runtime: Runtime, clock: MovableClock
) -> None:
    stale = remember(runtime, clock, "Parked at level three once", importance=0.1, when=LONG_AGO)
    remember(runtime, clock, "Recent trivia about lunch", importance=0.1, when=NOW)
    remember(runtime, clock, "Allergic to penicillin", importance=0.9, when=LONG_AGO)

    run = engine(runtime, clock).run_now("archival")

    assert run.status == "ok", run.error
    assert archived_ids(runtime) == {stale.id}
    assert run.metadata["archived"]["memories"] == [stale.id]
    line = runtime.vault.read_text(stale.path)
    assert f"[archived:: 2026-11-22] ^{stale.id}" in line
    assert "archived 1 memory" in run.output


def test_recent_memory_is_kept(runtime: Runtime, clock: MovableClock) -> None:
    young = remember(
        runtime, clock, "Tried oat milk", importance=0.1, when=NOW - timedelta(days=179)
    )
    engine(runtime, clock, older_than_days=180).run_now("archival")
    assert young.id not in archived_ids(runtime)
    # The same memory a day past the limit goes.
    clock.set(NOW + timedelta(days=2))
    engine(runtime, clock, older_than_days=180).run_now("archival")
    assert young.id in archived_ids(runtime)


def test_important_memory_is_kept(runtime: Runtime, clock: MovableClock) -> None:
    kept = remember(runtime, clock, "Passport expires in May", importance=0.31, when=LONG_AGO)
    gone = remember(runtime, clock, "Bought blue socks", importance=0.3, when=LONG_AGO)
    engine(runtime, clock, max_importance=0.3).run_now("archival")
    assert archived_ids(runtime) == {gone.id}
    assert kept.id not in archived_ids(runtime)


def test_memory_a_note_links_to_is_kept(
    runtime: Runtime, clock: MovableClock, write: object
) -> None:
    linked = remember(runtime, clock, "Met Ana at the harbour", importance=0.1, when=LONG_AGO)
    other = remember(runtime, clock, "Harbour cafe closed", importance=0.1, when=LONG_AGO)
    note = linked.path.removesuffix(".md")
    write("Notes/Trip.md", f"# Trip\n\nSee [[{note}#^{linked.id}|how we met]].\n")  # type: ignore[operator]

    engine(runtime, clock).run_now("archival")

    assert archived_ids(runtime) == {other.id}


def test_a_mention_listed_by_the_knowledge_graph_does_not_keep_a_memory(
    runtime: Runtime, clock: MovableClock, write: object
) -> None:
    mentioned = remember(runtime, clock, "Ana fixed the bike", importance=0.1, when=LONG_AGO)
    kept = remember(runtime, clock, "Ana moved to Porto", importance=0.1, when=LONG_AGO)
    note = mentioned.path.removesuffix(".md")
    # The job's Mentions block lists both; the owner linked one of them by hand, below it.
    write(  # type: ignore[operator]
        "Contacts/Ana.md",
        "---\ntags: [friend]\n---\n# Ana\n\n## Mentions\n\n<!-- memvault:mentions -->\n"
        f"- ![[{note}#^{mentioned.id}]]\n- ![[{note}#^{kept.id}]]\n<!-- /memvault:mentions -->\n"
        f"\nShe moved: [[{note}#^{kept.id}|Porto]].\n",
    )

    engine(runtime, clock).run_now("archival")

    assert archived_ids(runtime) == {mentioned.id}


def test_recently_recalled_memory_is_kept(runtime: Runtime, clock: MovableClock) -> None:
    recalled = remember(
        runtime, clock, "Wifi password is on the fridge", importance=0.1, when=LONG_AGO
    )
    forgotten = remember(runtime, clock, "Fridge light flickers", importance=0.1, when=LONG_AGO)
    clock.set(NOW - timedelta(days=10))  # a search ten days ago returned it
    assert recalled.id in found(runtime, "wifi password")
    clock.set(NOW)

    engine(runtime, clock, recall_window_days=60).run_now("archival")

    assert archived_ids(runtime) == {forgotten.id}
    # Once the recall is older than the window, it no longer protects the memory.
    clock.set(NOW + timedelta(days=55))
    engine(runtime, clock, recall_window_days=60).run_now("archival")
    assert recalled.id in archived_ids(runtime)


def test_pinned_memory_is_never_archived(runtime: Runtime, clock: MovableClock) -> None:
    tagged = remember(
        runtime, clock, "Speaks Portuguese", importance=0.0, tags=["core"], when=LONG_AGO
    )
    preference = remember(
        runtime, clock, "Likes window seats", importance=0.0, category="preference", when=LONG_AGO
    )
    engine(runtime, clock).run_now("archival")
    assert archived_ids(runtime) == set()
    assert {tagged.id, preference.id} <= {m.id for m in runtime.memories.all()}


def test_archived_memory_leaves_default_search(runtime: Runtime, clock: MovableClock) -> None:
    stale = remember(runtime, clock, "Gym locker number 4711", importance=0.1, when=LONG_AGO)
    assert found(runtime, "locker 4711") == {stale.id}
    clock.set(NOW + timedelta(days=100))  # past the recall window of that search

    engine(runtime, clock).run_now("archival")

    assert found(runtime, "locker 4711") == set()
    assert found(runtime, "locker 4711", include_archived=True) == {stale.id}
    assert stale.id not in {m.id for m in runtime.memories.list()}
    assert stale.id in {m.id for m in runtime.memories.list(include_archived=True)}


def close_task(runtime: Runtime, clock: MovableClock, title: str, *, when: datetime) -> str:
    clock.set(when)
    try:
        runtime.tasks.create(title)
        return runtime.tasks.complete(title).path
    finally:
        clock.set(NOW)


def test_long_finished_task_moves_and_links_follow(
    runtime: Runtime, clock: MovableClock, write: object
) -> None:
    old = close_task(runtime, clock, "File tax return", when=NOW - timedelta(days=120))
    recent = close_task(runtime, clock, "Renew library card", when=NOW - timedelta(days=30))
    runtime.tasks.create("Still open")
    write("Notes/Admin.md", "# Admin\n\nDone: [[Tasks/completed/File tax return]].\n")  # type: ignore[operator]

    run = engine(runtime, clock, tasks_done_days=90).run_now("archival")

    assert run.status == "ok", run.error
    vault = runtime.vault
    assert not vault.exists(old)
    moved = "Tasks/Archive/File tax return.md"
    assert vault.exists(moved)
    assert "archived: 2026-11-22" in vault.read_text(moved)
    assert vault.exists(recent)
    assert vault.exists("Tasks/active/Still open.md")
    # The path link would no longer resolve: it is rewritten to the shortest one that does.
    assert "Done: [[File tax return]]." in vault.read_text("Notes/Admin.md")
    assert run.metadata["archived"]["tasks"] == [
        {"title": "File tax return", "from": old, "to": moved}
    ]
    assert [t.title for t in runtime.tasks.list(include_closed=True)] == [
        "Still open",
        "Renew library card",
    ]


def test_undo_restores_every_file(runtime: Runtime, clock: MovableClock, write: object) -> None:
    stale = remember(runtime, clock, "Old umbrella brand", importance=0.1, when=LONG_AGO)
    old = close_task(runtime, clock, "Return parcel", when=NOW - timedelta(days=200))
    write("Notes/Errands.md", "# Errands\n\n[[Tasks/completed/Return parcel]]\n")  # type: ignore[operator]
    vault = runtime.vault
    before = {path: vault.read_text(path) for path in (stale.path, old, "Notes/Errands.md")}
    jobs = engine(runtime, clock)
    run: JobRun = jobs.run_now("archival")
    assert archived_ids(runtime) == {stale.id}

    restored = jobs.undo(run.id)

    assert set(restored) >= {stale.path, old, "Tasks/Archive/Return parcel.md", "Notes/Errands.md"}
    assert {path: vault.read_text(path) for path in before} == before
    assert not vault.exists("Tasks/Archive/Return parcel.md")
    assert archived_ids(runtime) == set()
    assert found(runtime, "umbrella brand") == {stale.id}


def test_nothing_to_archive_says_so(runtime: Runtime, clock: MovableClock) -> None:
    remember(runtime, clock, "Fresh thought", importance=0.1, when=NOW)
    run = engine(runtime, clock).run_now("archival")
    assert (run.status, run.output) == ("ok", "nothing to archive")
    assert "changes" not in run.metadata


def test_task_folder_inside_the_task_folders_is_refused(
    runtime: Runtime, clock: MovableClock
) -> None:
    run = engine(runtime, clock, tasks_folder="Tasks/completed").run_now("archival")
    assert run.status == "failed"
    assert run.error is not None and "tasks_folder" in run.error


@pytest.mark.parametrize("text", ["2026-11-20", "2026-11-22"])
def test_unarchive_since_brings_back_items_archived_that_day_or_later(
    runtime: Runtime, clock: MovableClock, text: str
) -> None:
    stale = remember(runtime, clock, "Ancient bus timetable", importance=0.1, when=LONG_AGO)
    close_task(runtime, clock, "Sell bike", when=NOW - timedelta(days=300))
    engine(runtime, clock).run_now("archival")
    archive = archival.Archive(runtime, "Tasks/Archive")

    back = archive.unarchive_since(datetime.fromisoformat(text).date())

    assert back.memories == [stale.id]
    assert back.tasks == [
        {
            "title": "Sell bike",
            "from": "Tasks/Archive/Sell bike.md",
            "to": "Tasks/completed/Sell bike.md",
        }
    ]
    assert "archived" not in runtime.vault.read_text("Tasks/completed/Sell bike.md")
    assert archived_ids(runtime) == set()


def test_memories_wait_until_recalls_cover_the_window(tmp_path: Path, clock: MovableClock) -> None:
    """Just after upgrading, "not recalled lately" is unknown: no memory is archived yet."""
    from memvault.config import Settings
    from memvault.vault.layout import init_vault
    from memvault.vault.store import Vault

    init_vault(Vault(tmp_path / "fresh"))
    settings = Settings(vault=tmp_path / "fresh", timezone="Europe/Berlin")
    fresh = Runtime.open(settings, clock=clock, embedder=HashEmbedder())
    try:
        stale = remember(fresh, clock, "Old note about paint", importance=0.1, when=LONG_AGO)
        old = close_task(fresh, clock, "Paint fence", when=NOW - timedelta(days=200))

        run = engine(fresh, clock, recall_window_days=60).run_now("archival")

        assert run.status == "ok", run.error
        assert archived_ids(fresh) == set()
        assert "memories wait: recalls are recorded since 2026-11-22" in run.output
        assert not fresh.vault.exists(old)  # tasks do not depend on recalls
        clock.set(NOW + timedelta(days=61))
        engine(fresh, clock, recall_window_days=60).run_now("archival")
        assert archived_ids(fresh) == {stale.id}
    finally:
        fresh.close()
