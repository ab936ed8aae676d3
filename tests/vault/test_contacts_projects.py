from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from memvault.errors import ConflictError, InvalidInputError, NotFoundError
from memvault.runtime import Runtime
from memvault.vault.note import Note
from support import TZ


def test_contact_create_with_identities(runtime: Runtime) -> None:
    contact = runtime.contacts.create(
        "Ada Lovelace",
        relationship="colleague",
        email="ada@example.org",
        phone="+44 20 7946 0000",
        notes="Met at the analytical engine demo.",
        aliases=["Ada", "Countess"],
        identities={"telegram": "123456", "signal": "+442079460000"},
    )
    assert contact.path == "Contacts/Ada Lovelace.md"
    text = (runtime.vault.root / contact.path).read_text()
    assert 'telegram: "123456"' in text
    note = Note.parse(text)
    assert note.get("email") == "ada@example.org"
    assert note.get("aliases") == ["Ada", "Countess"]
    assert contact.identities == {"telegram": "123456", "signal": "+442079460000"}
    assert contact.notes == "Met at the analytical engine demo."
    assert contact.interactions == ["2026-11-22: Contact created"]


def test_find_by_name_alias_or_identity(runtime: Runtime) -> None:
    runtime.contacts.create("Ada Lovelace", aliases=["Countess"], identities={"telegram": "123456"})
    runtime.contacts.create("Charles Babbage", email="charles@example.org")
    assert runtime.contacts.get("ada lovelace").name == "Ada Lovelace"
    assert runtime.contacts.get("Countess").name == "Ada Lovelace"
    assert runtime.contacts.get("telegram:123456").name == "Ada Lovelace"
    assert runtime.contacts.get("email:Charles@example.org").name == "Charles Babbage"
    found = runtime.contacts.find_by_identity("telegram", "123456")
    assert found is not None and found.name == "Ada Lovelace"
    assert runtime.contacts.find_by_identity("telegram", "999") is None
    with pytest.raises(NotFoundError):
        runtime.contacts.get("telegram:999")


def test_log_adds_dated_interactions(runtime: Runtime) -> None:
    runtime.contacts.create("Ada Lovelace")
    runtime.contacts.log("Ada Lovelace", "Called about the\nnew engine")
    updated = runtime.contacts.log("Ada", "Lunch", when=datetime(2026, 12, 1, 12, 0, tzinfo=TZ))
    assert updated.interactions[-2:] == [
        "2026-11-22: Called about the new engine",
        "2026-12-01: Lunch",
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": " "}, "needs a name"),
        ({"name": "X", "email": "not-an-email"}, "not an email"),
        ({"name": "X", "phone": "call me maybe"}, "not a phone"),
        ({"name": "X", "identities": {"carrier-pigeon": "1"}}, "Unknown channel"),
    ],
)
def test_contact_validation(runtime: Runtime, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        runtime.contacts.create(**kwargs)  # type: ignore[arg-type]
    assert list((runtime.vault.root / "Contacts").iterdir()) == []


def test_duplicate_names_and_identities_are_refused(runtime: Runtime) -> None:
    runtime.contacts.create("Ada Lovelace", identities={"telegram": "1"})
    with pytest.raises(ConflictError, match="already exists"):
        runtime.contacts.create("ada lovelace")
    with pytest.raises(ConflictError, match="already belongs to Ada Lovelace"):
        runtime.contacts.create("Impostor", identities={"telegram": "1"})


def test_set_identity(runtime: Runtime) -> None:
    runtime.contacts.create("Ada Lovelace")
    assert runtime.contacts.set_identity("Ada Lovelace", "discord", "ada#1815").identities == {
        "discord": "ada#1815"
    }
    assert runtime.contacts.set_identity("Ada Lovelace", "discord", "").identities == {}


def test_contacts_written_by_hand_are_read(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    write(
        "Contacts/Grace Hopper.md",
        "---\naliases: Amazing Grace\ntelegram: 42\n---\n# Grace\n\n"
        "## Interactions\n- 2026-01-01: met\n",
    )
    grace = runtime.contacts.get("amazing grace")
    assert grace.identities == {"telegram": "42"}
    assert grace.interactions == ["2026-01-01: met"]
    assert runtime.contacts.get("telegram:42").name == "Grace Hopper"


def test_a_lookup_by_identity_sees_edits_by_hand(runtime: Runtime) -> None:
    """Lookups by channel id remember each contact's frontmatter; an edit, a new note or
    a deleted one is seen at the next lookup all the same."""
    contacts = runtime.contacts
    ada = contacts.create("Ada", identities={"telegram": "111"})
    assert contacts.find_by_identity("telegram", "111") == contacts.get(ada.path)
    path = runtime.vault.root / ada.path
    path.write_text(path.read_text().replace('telegram: "111"', 'telegram: "222"'))
    assert contacts.find_by_identity("telegram", "111") is None
    found = contacts.find_by_identity("telegram", "222")
    assert found is not None and found.name == "Ada"
    (runtime.vault.root / "Contacts/Bob.md").write_text("---\ntelegram: 333\n---\n# Bob\n")
    bob = contacts.find_by_identity("telegram", "333")
    assert bob is not None and bob.name == "Bob"
    path.unlink()
    assert contacts.find_by_identity("telegram", "222") is None


def test_projects_link_tasks_both_ways(runtime: Runtime) -> None:
    project = runtime.projects.create("Apollo", "Land on the moon.", tags=["space"])
    assert project.path == "Projects/Apollo.md"
    task = runtime.tasks.create("Build the rocket", project="apollo")
    assert task.project == "Apollo"  # canonical name of the existing project
    assert runtime.projects.get("Apollo").tasks == ["Build the rocket"]
    runtime.tasks.create("Train the crew")
    linked = runtime.projects.link_task("Apollo", "Train the crew")
    assert linked.tasks == ["Build the rocket", "Train the crew"]
    assert runtime.tasks.get("Train the crew").project == "Apollo"
    runtime.projects.link_task("Apollo", "Train the crew")  # idempotent
    assert runtime.projects.get("Apollo").tasks == ["Build the rocket", "Train the crew"]
    assert [t.title for t in runtime.tasks.list(project="Apollo")] == [
        "Build the rocket",
        "Train the crew",
    ]


def test_project_validation_and_listing(runtime: Runtime) -> None:
    runtime.projects.create("Apollo")
    runtime.projects.create("Gemini", status="done")
    with pytest.raises(ConflictError, match="already exists"):
        runtime.projects.create("apollo")
    with pytest.raises(InvalidInputError, match="Unknown project status"):
        runtime.projects.create("Mercury", status="vibing")
    assert [p.name for p in runtime.projects.list()] == ["Apollo", "Gemini"]
    assert [p.name for p in runtime.projects.list(status="done")] == ["Gemini"]


def test_task_for_a_missing_project_keeps_the_link(runtime: Runtime) -> None:
    task = runtime.tasks.create("Someday", project="Not Yet")
    assert task.project == "Not Yet"
    assert 'project: "[[Not Yet]]"' in (runtime.vault.root / task.path).read_text()
