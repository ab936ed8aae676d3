"""``memvault graph show`` and ``memvault graph facts``: on the files, and through a daemon."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cli_support import EXIT_INVALID, EXIT_NOT_FOUND, fail, invoke, ok, ok_json
from gateway_support import StartDaemon
from graph_support import KILN, write_people
from memvault.gateway.client import read_info
from memvault.vault.store import Vault
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound


@pytest.fixture
def people(vault: Vault) -> Path:
    """A vault with the entity notes and a memory linking Melanie."""
    write_people(vault.root)
    ok(vault.root, "remember", KILN)
    return vault.root


def lines(result_stdout: str) -> list[str]:
    return [line.strip() for line in result_stdout.splitlines()]


def test_show_draws_the_centre_and_each_edge_with_ended_ones_marked(people: Path) -> None:
    shown = lines(ok(people, "graph", "show", "Mel").stdout)
    assert shown[0] == "Melanie (person), Contacts/Melanie.md: what lies within 1 hop."
    assert "Melanie —friend_of→ Caroline" in shown
    assert "Melanie —works_at→ Acme  (ended)" in shown
    assert "Melanie —mentor_of→ Dan (no note yet)" in shown
    assert f'memory "{KILN}" —mentions→ Melanie' in shown
    assert "Melanie —tagged→ #family" in shown
    # Typed relations come before plain links and tags.
    assert shown.index("Melanie —mentor_of→ Dan (no note yet)") < shown.index(
        "Melanie —tagged→ #family"
    )
    assert not any("Anna" in line for line in shown)  # two hops away
    assert shown[-1].endswith("edges.")

    current = ok(people, "graph", "show", "Melanie", "--current", "--depth", "2").stdout
    assert "works_at" not in current and "Caroline —sister_of→ Anna" in current

    whole = lines(ok(people, "graph", "show").stdout)
    assert whole[0] == "Knowledge graph of the vault: 4 entities."
    assert "Caroline —sister_of→ Anna" in whole and not any("memory" in x for x in whole)


def test_show_json_is_the_graph(people: Path) -> None:
    graph = ok_json(people, "graph", "show", "Melanie", "--depth", "2")
    assert graph["center"] == "Contacts/Melanie.md" and graph["truncated"] is False
    found = {(e["source"], e["target"], e["relation"], e["current"]) for e in graph["edges"]}
    assert ("Contacts/Caroline.md", "Entities/Anna.md", "sister_of", True) in found
    assert ("Contacts/Melanie.md", "Entities/Acme.md", "works_at", False) in found
    small = ok_json(people, "graph", "show", "--max-nodes", "2")
    assert len(small["nodes"]) == 2 and small["truncated"] is True
    assert "raise --max-nodes" in ok(people, "graph", "show", "--max-nodes", "2").stdout


def test_facts_today_with_history_and_on_a_day(people: Path) -> None:
    today = ok(people, "graph", "facts", "mel").stdout
    assert today.startswith("Melanie (person, also Mel): Contacts/Melanie.md\n")
    assert "facts that hold today" in today
    assert "Messi" in today and "Ronaldo" not in today
    assert "Melanie —friend_of→ Caroline" in today and "Acme" not in today

    history = ok(people, "graph", "facts", "Melanie", "--history").stdout
    assert "Ronaldo" in history and "Messi" in history and "ended" in history
    assert "Melanie —works_at→ Acme  (ended)" in history

    on = ok_json(people, "graph", "facts", "Melanie", "--as-of", "2025-06-01")
    assert on["as_of"] == "2025-06-01"
    assert [f["text"] for f in on["facts"] if f["category"] == "favourite player"] == ["Ronaldo"]
    later = ok_json(people, "graph", "facts", "Melanie", "--as-of", "2026-06-01")
    assert [f["text"] for f in later["facts"] if f["category"] == "favourite player"] == ["Messi"]
    empty = ok(people, "graph", "facts", "Anna").stdout
    assert "No facts that hold today." in empty


def test_mistakes_are_one_sentence(people: Path) -> None:
    assert (
        fail(people, "graph", "facts", "Nobody", code=EXIT_NOT_FOUND)
        == "Error: No entity called 'Nobody'."
    )
    assert (
        fail(people, "graph", "show", "Nobody", code=EXIT_NOT_FOUND)
        == "Error: No entity or note called 'Nobody'."
    )
    assert (
        fail(people, "graph", "show", "Mel", "--depth", "7", code=EXIT_INVALID)
        == "Error: The depth must be between 0 and 5."
    )
    assert "is not a date" in fail(
        people, "graph", "facts", "Mel", "--as-of", "June", code=EXIT_INVALID
    )
    assert "not both" in fail(
        people,
        "graph",
        "facts",
        "Mel",
        "--as-of",
        "2025-06-01",
        "--history",
        code=EXIT_INVALID,
    )
    assert "max_nodes" in fail(people, "graph", "show", "--max-nodes", "0", code=EXIT_INVALID)


ASKED: list[tuple[str, ...]] = [
    ("graph", "show", "Mel"),
    ("graph", "show", "Melanie", "--depth", "2", "--current"),
    ("graph", "show"),
    ("graph", "show", "--max-nodes", "3", "--json"),
    ("graph", "show", "Mel", "--json"),
    ("graph", "facts", "Mel"),
    ("graph", "facts", "Contacts/Melanie", "--history", "--json"),
    ("graph", "facts", "Melanie", "--as-of", "2025-06-01"),
    # mistakes
    ("graph", "facts", "Nobody"),
    ("graph", "facts", "What? #1"),
    ("graph", "show", "Nobody"),
    ("graph", "show", "Mel", "--depth", "-1"),
    ("graph", "show", "--max-nodes", "9999"),
    ("graph", "facts", "Mel", "--as-of", "2025-13-01"),
    ("graph", "facts", "Mel", "--as-of", "2025-06-01", "--history"),
]


def test_through_a_daemon_the_answers_and_mistakes_are_the_same(
    people: Path, start_daemon: StartDaemon, caplog: pytest.LogCaptureFixture
) -> None:
    live = start_daemon(people)
    assert read_info(people) is not None, "the daemon announces itself"
    # A direct answer reads the index the daemon keeps: once it has read the whole vault.
    wait_for(live.daemon.watching.is_set, "the daemon to index the vault and watch it")
    caplog.set_level(logging.INFO, logger="memvault.gateway.access")
    for args in ASKED:
        direct = invoke(people, "--direct", *args)
        served = invoke(people, *args)
        assert (served.exit_code, served.stdout, served.stderr) == (
            direct.exit_code,
            direct.stdout,
            direct.stderr,
        ), args
    asked = [(vars(r)["path"], vars(r)["status"]) for r in caplog.records if "path" in vars(r)]
    assert ("/v1/graph", 200) in asked
    assert ("/v1/graph/entities/Mel/facts", 200) in asked
    assert ("/v1/graph/entities/Contacts/Melanie/facts", 200) in asked
    assert ("/v1/graph/entities/What? #1/facts", 404) in asked
    assert ("/v1/graph/entities/Nobody/facts", 404) in asked
    assert sum(1 for path, _ in asked if path.startswith("/v1/graph")) == len(ASKED)
