"""Stemming by language, on SQLite and PostgreSQL: a German, French, Spanish or Russian
word finds its note in another inflection; German ``Ende`` and English ``end`` no longer
find each other's notes; English notes are written and found as before; a note in two
languages; and an index written before is written anew at the next sync."""

# ruff: noqa: RUF001 (Cyrillic text, on purpose)

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memvault.index.keywords import keyword_tables
from memvault.index.scripts import indexed
from memvault.runtime import Runtime
from memvault.storage.pg_schema import EXACT_SQL
from memvault.vault.store import Vault
from support import MovableClock, reopened

pytestmark = pytest.mark.both_backends

NOTES = {
    "Notes/Sister.md": "# Familie\n\nMeine Schwester wohnt in Hamburg und arbeitet bei der Bahn.\n",
    "Notes/Holidays.md": (
        "# Schule\n\nDas Ende der Ferien ist am Montag, dann beginnt die Schule.\n"
    ),
    "Notes/Road.md": "# Walk\n\nThe end of the road is near the old mill by the river.\n",
    "Notes/Horses.md": "# Ferme\n\nLe cheval de ma voisine est dans le pré derrière la maison.\n",
    "Notes/Sisters.md": "# Familia\n\nMis hermanas viven en Sevilla con sus hijos.\n",
    "Notes/Moscow.md": "# Семья\n\nМоя сестра живёт в Москве с мужем.\n",
    "Notes/Both.md": (
        "# Trip\n\nWe fly to Munich on Friday and stay for the whole week.\n\n"
        "Die Tante holt uns mit dem Auto am Flughafen ab.\n"
    ),
}
GARDEN = "# Garden {n}\n\nThe garden hose is by the shed; water the tomatoes {n} times.\n"
ENGLISH = {f"Notes/Garden {n}.md": GARDEN.format(n=n) for n in range(4)}


@pytest.fixture
def written(runtime: Runtime, write: Callable[[str, str], Path]) -> Runtime:
    for path, text in {**NOTES, **ENGLISH}.items():
        write(path, text)
    runtime.index.sync()
    runtime.index.embed_pending()
    return runtime


def found(runtime: Runtime, query: str) -> list[str]:
    """The notes a keyword search finds, best first (every match, no floor)."""
    hits = runtime.searcher.search(query, limit=50, mode="keyword", min_score=0.0)
    return list(dict.fromkeys(h.path for h in hits))


INFLECTED = [
    ("Schwestern", "Notes/Sister.md"),  # German plural of the note's Schwester
    ("Wo wohnen meine Schwestern?", "Notes/Sister.md"),
    ("Ferien", "Notes/Holidays.md"),
    ("chevaux", "Notes/Horses.md"),  # French plural of cheval
    ("voisines", "Notes/Horses.md"),
    ("hermana", "Notes/Sisters.md"),  # Spanish singular of hermanas
    ("сестры", "Notes/Moscow.md"),  # Russian genitive of сестра
    ("сестрой", "Notes/Moscow.md"),
    ("Tanten", "Notes/Both.md"),  # the German half of a note in two languages
    ("flying to Munich", "Notes/Both.md"),  # its English half
]


def test_another_inflection_finds_its_note(written: Runtime) -> None:
    misses = [
        (q, found(written, q)[:3]) for q, path in INFLECTED if found(written, q)[:1] != [path]
    ]
    assert not misses


def test_german_ende_and_english_end_each_find_their_own_language_first(
    written: Runtime,
) -> None:
    for query, own in (
        ("Wann ist das Ende der Ferien?", "Notes/Holidays.md"),
        ("the end of the road", "Notes/Road.md"),
        ("Wann enden die Ferien?", "Notes/Holidays.md"),
    ):
        assert found(written, query)[:1] == [own], query
    # One word left, and it is being typed ("end" also starts "Ende"): both notes hold it.
    assert sorted(found(written, "where does it end?")) == ["Notes/Holidays.md", "Notes/Road.md"]
    # German "Ende" is no longer stored as English "end": the English note alone holds
    # "end" as English stems it (the German note is found through German's own stem).
    assert "Notes/Road.md" not in found(written, "Ferienende")


def test_a_name_in_a_note_of_another_language_is_found_by_a_query_in_english(
    written: Runtime,
) -> None:
    """The query's language never narrows where its words are found: names have none."""
    assert found(written, "What do you know about the Ferien?")[:1] == ["Notes/Holidays.md"]


def test_a_bare_word_is_looked_up_in_every_language_held(written: Runtime) -> None:
    """No function word tells the language of ``end``: English first, German too."""
    assert found(written, "end") == ["Notes/Road.md", "Notes/Holidays.md"]


def test_english_is_written_and_found_as_before(written: Runtime) -> None:
    conn = written.index.conn
    rows = conn.execute(
        "SELECT f.text, c.text FROM chunks_fts f JOIN chunks c ON c.id = f.rowid"
        " JOIN notes n ON n.id = c.note_id WHERE n.path LIKE 'Notes/Garden%'"
    ).fetchall()
    assert rows and all(stored == indexed(text) for stored, text in rows)
    assert found(written, "tomatoes") == sorted(ENGLISH)
    assert found(written, "the garden hoses") == sorted(ENGLISH)


def _as_written_before(runtime: Runtime) -> None:
    """Make the keyword index look as memvault wrote it before stemming by language: every
    row as written (English stems), no languages table, the schema version before."""
    conn = runtime.index.conn
    dialect = runtime.index.dialect
    if dialect == "sqlite":
        conn.execute("DROP TABLE keyword_languages")
    else:
        conn.execute("DROP TABLE keyword_languages")
        conn.execute(
            "ALTER TABLE chunks_fts DROP COLUMN own_exact, DROP COLUMN ctx_exact,"
            " DROP COLUMN written"
        )
        conn.execute(EXACT_SQL)
    rows = conn.execute(
        "SELECT c.id, c.text, c.context, n.title FROM chunks c JOIN notes n ON n.id = c.note_id"
        " WHERE c.id IN (SELECT rowid FROM chunks_fts)"
    ).fetchall()
    for chunk_id, text, context, title in rows:
        values = (chunk_id, indexed(text), indexed(context), indexed(title), "")
        for table in keyword_tables(dialect):
            conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (chunk_id,))
            conn.execute(
                f"INSERT INTO {table}(rowid, text, context, title, tags) VALUES (?,?,?,?,?)",
                values,
            )
    if dialect == "sqlite":
        conn.execute("PRAGMA user_version = 6")
    else:
        conn.execute("DELETE FROM memvault_schema WHERE version >= 12")  # and those after


def test_an_index_written_before_stems_by_language_after_the_next_sync(
    written: Runtime, vault: Vault, clock: MovableClock, storage_settings: object
) -> None:
    vectors = written.index.conn.execute("SELECT id, embedded FROM chunks ORDER BY id").fetchall()
    _as_written_before(written)
    written.close()
    with reopened(vault.root, clock, storage_settings) as runtime:
        runtime.index.sync()
        for query, path in INFLECTED:
            assert found(runtime, query)[:1] == [path], query
        assert found(runtime, "tomatoes") == sorted(ENGLISH)
        # Read again, not rebuilt: the same chunks, their vectors kept.
        conn = runtime.index.conn
        assert conn.execute("SELECT id, embedded FROM chunks ORDER BY id").fetchall() == vectors
