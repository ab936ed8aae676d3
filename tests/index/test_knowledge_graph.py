"""The knowledge graph: entity notes in Markdown, typed edges in the index, graph queries."""

from __future__ import annotations

import threading
import time
from datetime import date

import pytest

from memvault.errors import InvalidInputError, NotFoundError
from memvault.index import db as dbmod
from memvault.index.graph import knowledge_graph
from memvault.runtime import Runtime
from memvault.vault.entities import Fact, Relation, parse_entity
from waiting import WAIT, wait_for

MELANIE = """---
type: person
aliases: [Mel]
tags: [entity, family]
---
# Melanie

Met at the pottery class.

## Observations
- [favourite player] Ronaldo [valid_from:: 2025-01-02]
- [hobby] paints landscapes #art
- [ ] a task, not a fact
- [note:: an inline field, not a fact]

## Relations
- friend_of [[Caroline]]
- works at [[Acme]] (since the spring)
- see also this line, which has no link
"""


def write(runtime: Runtime, path: str, text: str) -> None:
    target = runtime.vault.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def test_an_entity_note_reads_its_facts_and_relations() -> None:
    entity = parse_entity("Contacts/Melanie.md", MELANIE)
    assert (entity.name, entity.type, entity.aliases) == ("Melanie", "person", ["Mel"])
    assert [(f.category, f.text, f.tags) for f in entity.facts] == [
        ("favourite player", "Ronaldo", []),
        ("hobby", "paints landscapes #art", ["art"]),
    ]
    assert entity.facts[0].valid_from == date(2025, 1, 2) and entity.facts[0].current()
    assert [(r.type, r.target, r.context) for r in entity.relations] == [
        ("friend_of", "Caroline", ""),
        ("works_at", "Acme", "(since the spring)"),
    ]


def test_a_changed_fact_closes_the_old_one_and_both_stay(runtime: Runtime) -> None:
    write(runtime, "Contacts/Melanie.md", MELANIE)
    entities = runtime.entities
    path = entities.find("mel")  # by alias, any case
    assert path == "Contacts/Melanie.md"
    assert entities.find("Contacts/Melanie.md") == entities.find("contacts/melanie") == path
    new = Fact(
        "favourite player", "Messi", valid_from=date(2026, 3, 1), source="[[Memory/Facts#^m-1]]"
    )
    change = entities.record_fact(path, new, supersedes=True)
    assert (change.action, change.closed) == ("added", ["Ronaldo"])
    text = (runtime.vault.root / path).read_text("utf-8")
    assert (
        "- [favourite player] Ronaldo [valid_from:: 2025-01-02] [valid_until:: 2026-03-01]" in text
    )
    assert (
        "- [favourite player] Messi [valid_from:: 2026-03-01] [source:: [[Memory/Facts#^m-1]]]"
        in text
    )
    assert "Met at the pottery class." in text and "- [ ] a task, not a fact" in text
    entity = entities.get("Melanie")
    held = {f.text: f.current() for f in entity.facts if f.category == "favourite player"}
    assert held == {"Ronaldo": False, "Messi": True}
    on = {f.text for f in entity.facts if f.current(date(2025, 6, 1))}
    assert "Ronaldo" in on and "Messi" not in on
    # The same fact again changes nothing.
    again = entities.record_fact(path, Fact("Favourite Player", "messi."), supersedes=True)
    assert again.action == "unchanged"
    assert (runtime.vault.root / path).read_text("utf-8") == text


def test_a_fact_without_supersede_sits_beside_the_others(runtime: Runtime) -> None:
    write(runtime, "Contacts/Melanie.md", MELANIE)
    change = runtime.entities.record_fact("Contacts/Melanie.md", Fact("hobby", "plays the violin"))
    assert change.closed == []
    hobbies = [
        f.text
        for f in runtime.entities.get("Melanie").facts
        if f.current() and f.category == "hobby"
    ]
    assert hobbies == ["paints landscapes #art", "plays the violin"]


def test_ensure_creates_one_note_per_entity_in_its_folder(runtime: Runtime) -> None:
    assert runtime.entities.ensure("Acme", "organisation") == "Entities/Acme.md"
    assert runtime.entities.ensure("acme") == "Entities/Acme.md"
    assert runtime.entities.ensure("Caroline", "person") == "Contacts/Caroline.md"
    assert (
        parse_entity("Entities/Acme.md", (runtime.vault.root / "Entities/Acme.md").read_text()).type
        == "organisation"
    )
    assert runtime.entities.record_relation("Entities/Acme.md", Relation("Employs", "Melanie"))
    assert not runtime.entities.record_relation("Entities/Acme.md", Relation("employs", "melanie"))
    with pytest.raises(InvalidInputError):
        runtime.entities.ensure("///")
    with pytest.raises(NotFoundError, match="No entity called 'Nobody'"):
        runtime.entities.get("Nobody")


def test_the_index_holds_typed_edges_and_the_graph_walks_them(runtime: Runtime) -> None:
    write(runtime, "Contacts/Melanie.md", MELANIE)
    write(runtime, "Contacts/Caroline.md", "# Caroline\n\n## Relations\n- sister_of [[Anna]]\n")
    write(runtime, "Entities/Anna.md", "---\ntype: person\n---\n# Anna\n")
    write(
        runtime,
        "Entities/Acme.md",
        '---\ntype: organisation\nlocated_in: "[[Berlin]]"\n---\n# Acme\n',
    )
    write(runtime, "Entities/Berlin.md", "---\ntype: place\n---\n# Berlin\n")
    write(runtime, "Notes/Pottery.md", "# Pottery\nWith [[Melanie]] on Tuesdays.\n")
    remembered = runtime.memories.remember("Mel bought a kiln with [[Melanie|her]] savings", "fact")
    runtime.index.sync()
    rows = runtime.index.conn.execute(
        "SELECT l.target, l.relation FROM links l JOIN notes n ON n.id = l.note_id"
        " WHERE n.path = ?",
        ("Contacts/Melanie.md",),
    ).fetchall()
    assert {(r[0], r[1]) for r in rows} == {("Caroline", "friend_of"), ("Acme", "works_at")}

    one = knowledge_graph(runtime.index, "Mel", depth=1)
    assert one.center == "Contacts/Melanie.md"
    edges = {(e.source, e.target, e.relation) for e in one.edges}
    assert ("Contacts/Melanie.md", "Contacts/Caroline.md", "friend_of") in edges
    assert ("Contacts/Melanie.md", "Entities/Acme.md", "works_at") in edges
    assert ("Notes/Pottery.md", "Contacts/Melanie.md", "links_to") in edges
    assert (f"memory:{remembered.memory.id}", "Contacts/Melanie.md", "mentions") in edges
    assert ("Contacts/Melanie.md", "#family", "tagged") in edges
    assert "Entities/Anna.md" not in {n.id for n in one.nodes}  # two hops away

    two = knowledge_graph(runtime.index, "Melanie", depth=2)
    edges2 = {(e.source, e.target, e.relation) for e in two.edges}
    assert ("Contacts/Caroline.md", "Entities/Anna.md", "sister_of") in edges2
    assert ("Entities/Acme.md", "Entities/Berlin.md", "located_in") in edges2
    types = {n.id: n.type for n in two.nodes}
    assert types["Entities/Berlin.md"] == "place" and types["Contacts/Caroline.md"] == "person"

    whole = knowledge_graph(runtime.index)
    ids = {n.id for n in whole.nodes}
    assert {"Contacts/Melanie.md", "Entities/Anna.md", "Entities/Berlin.md"} <= ids
    assert "Notes/Pottery.md" not in ids and not any(i.startswith("memory:") for i in ids)

    with pytest.raises(NotFoundError):
        knowledge_graph(runtime.index, "Nobody")
    with pytest.raises(InvalidInputError):
        knowledge_graph(runtime.index, "Melanie", depth=9)


def test_a_relation_typed_in_obsidian_appears_and_an_ended_one_is_marked(runtime: Runtime) -> None:
    write(runtime, "Contacts/Melanie.md", MELANIE)
    write(runtime, "Entities/Acme.md", "---\ntype: organisation\n---\n# Acme\n")
    runtime.index.sync()
    assert {e.relation for e in knowledge_graph(runtime.index, "Melanie").edges} >= {"works_at"}
    path = runtime.vault.root / "Contacts/Melanie.md"
    # By hand, as in Obsidian: the job ended, and a relation to someone without a note yet.
    text = path.read_text("utf-8").replace(
        "- works at [[Acme]] (since the spring)",
        "- works at [[Acme]] (since the spring) [valid_until:: 2026-10-01]\n- mentor_of [[Dan]]",
    )
    path.write_text(text, encoding="utf-8")
    runtime.index.sync()
    graph = knowledge_graph(runtime.index, "Melanie")
    edges = {(e.target, e.relation): e.current for e in graph.edges}
    assert edges[("Entities/Acme.md", "works_at")] is False
    assert edges[("Dan", "mentor_of")] is True
    assert {n.id: n.type for n in graph.nodes}["Dan"] == "missing"
    current = knowledge_graph(runtime.index, "Melanie", include_ended=False)
    assert ("Entities/Acme.md", "works_at") not in {(e.target, e.relation) for e in current.edges}


@pytest.mark.sqlite_only  # PRAGMA user_version
def test_an_index_from_before_relations_reads_every_note_again(
    runtime: Runtime,
) -> None:
    write(runtime, "Contacts/Melanie.md", MELANIE)
    runtime.index.sync()
    conn = runtime.index.conn
    chunks = conn.execute("SELECT id, embedded FROM chunks ORDER BY id").fetchall()
    # As schema 2 left it: no relation column, the notes known and unchanged.
    for index in ("links_relation", "links_subpath", "notes_indexed", "chunks_lines"):
        conn.execute(f"DROP INDEX {index}")
    conn.execute("ALTER TABLE links DROP COLUMN relation")
    conn.execute("ALTER TABLE links DROP COLUMN valid_until")
    conn.execute("PRAGMA user_version = 2")
    dbmod.migrate(conn)
    assert conn.execute("SELECT count(*) FROM links WHERE relation IS NOT NULL").fetchone()[0] == 0
    runtime.index.sync()
    typed = conn.execute("SELECT relation FROM links WHERE relation IS NOT NULL").fetchall()
    assert sorted(r[0] for r in typed) == ["friend_of", "works_at"]
    # Read again, not rebuilt: the chunks (and their vectors) are the same rows.
    assert conn.execute("SELECT id, embedded FROM chunks ORDER BY id").fetchall() == chunks


def test_hostile_names_and_text_stay_in_the_entity_folder_or_are_refused(
    runtime: Runtime,
) -> None:
    for name in ("../.memvault/token", "a/../../b", ".memvault"):
        path = runtime.entities.ensure(name)
        assert path.startswith("Entities/") and path.count("/") == 1, path
        assert (runtime.vault.root / path).is_file()
    assert not (runtime.vault.root / ".memvault" / "token.md").exists()
    path = runtime.entities.ensure("Anna", "person")
    before = (runtime.vault.root / path).read_bytes()
    for fact in (Fact("job", "nurse \ud800"), Fact("j\udc80b", "nurse")):
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            runtime.entities.record_fact(path, fact)
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        runtime.entities.record_relation(path, Relation("sister_of", "B\ud800b"))
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        runtime.entities.ensure("Ev\ud800e")
    assert (runtime.vault.root / path).read_bytes() == before


def test_facts_recorded_while_a_person_appends_lose_nothing(runtime: Runtime) -> None:
    path = runtime.entities.ensure("Anna", "person")
    file = runtime.vault.root / path
    stop = threading.Event()
    typed: list[str] = []

    def person() -> None:  # `echo >>` in a loop, no lock, as an editor or a sync tool writes
        n = 0
        while not stop.is_set() and n < 400:
            line = f"typed by hand {n}"
            with file.open("a", encoding="utf-8") as handle:
                handle.write(line + "\n")
            typed.append(line)
            n += 1
            time.sleep(0.001)

    writer = threading.Thread(target=person)
    writer.start()
    try:
        wait_for(lambda: typed, "the person to start typing")
        for n in range(30):
            runtime.entities.record_fact(path, Fact(f"fact {n}", f"value {n}"))
    finally:
        stop.set()
        writer.join(timeout=WAIT)
    text = file.read_text("utf-8")
    assert typed and all(line in text for line in typed)
    facts = {f.category for f in runtime.entities.get("Anna").facts}
    assert facts == {f"fact {n}" for n in range(30)}
