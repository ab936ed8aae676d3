"""The index database: ``<vault>/.memvault/index.db``, SQLite in WAL mode.

Everything here is derived from the vault and can be rebuilt. The schema is
versioned with ``PRAGMA user_version``; migrations run in order inside one
transaction each. sqlite-vec is loaded into every connection; where the
interpreter's own sqlite3 cannot load extensions, or is older than the
keyword index needs (``SQLITE_NEEDED``), the bundled ``pysqlite3`` build is
used instead.
"""

from __future__ import annotations

import sqlite3 as _stdlib_sqlite3
from pathlib import Path
from types import ModuleType
from typing import Any

import sqlite_vec

from memvault import sqlite as sql
from memvault.errors import VaultError
from memvault.index.stemming import KeywordRow
from memvault.locations import private_file, private_state_dir

# The oldest SQLite the index runs on: FTS5's contentless_delete (3.43; ``chunks_exact``).
SQLITE_NEEDED = (3, 43, 0)


def _driver() -> ModuleType:
    """A DB-API sqlite3 module that can load extensions, of SQLite ``SQLITE_NEEDED`` or newer."""
    probe = _stdlib_sqlite3.connect(":memory:")
    try:
        recent = _stdlib_sqlite3.sqlite_version_info >= SQLITE_NEEDED
        if hasattr(probe, "enable_load_extension") and recent:
            return _stdlib_sqlite3
    finally:
        probe.close()
    try:
        from pysqlite3 import dbapi2
    except ImportError as exc:  # pragma: no cover - depends on the platform
        raise VaultError(
            f"This Python's sqlite3 (SQLite {_stdlib_sqlite3.sqlite_version}) cannot load "
            "extensions or is older than "
            + ".".join(map(str, SQLITE_NEEDED))
            + ", and pysqlite3 is not installed; install memvault with its dependencies."
        ) from exc
    module: ModuleType = dbapi2
    return module


sqlite3: Any = _driver()
Connection = Any  # the driver's Connection class; both drivers share the DB-API surface
DatabaseError: type[Exception] = sqlite3.DatabaseError
IntegrityError: type[Exception] = sqlite3.IntegrityError

# The keyword index's tokenizer; queries are tokenised with the same one (ranking.Vocabulary).
TOKENIZER = "porter unicode61 remove_diacritics 2"
# The same without the stemmer: the words as written (``chunks_exact``), so that a rare
# word comes before the common word it shares a stem with ("statue", "status").
EXACT_TOKENIZER = "unicode61 remove_diacritics 2"
# ``chunks_exact``: the keyword index's rows again, unstemmed. Contentless (the text is in
# ``chunks_fts``), so it costs only its index; its rows are deleted as ``chunks_fts``'s are.
# No prefix index: at 100k chunks one for 3 characters made a search no faster and the
# index 19% larger, its writes 60% slower (see the notes of issue 31).
EXACT_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_exact USING fts5(text, context, title, tags,"
    " content = '', contentless_delete = 1, tokenize = '" + EXACT_TOKENIZER + "')"
)

# A keyword row (``f``) holding a character beyond ASCII: more bytes than characters.
_NOT_ASCII = (
    "length(CAST(f.text || f.context || f.title || f.tags AS BLOB))"
    " <> length(f.text || f.context || f.title || f.tags)"
)

_MIGRATIONS: dict[int, str] = {
    1: sql.META_TABLE
    + """;
    CREATE TABLE notes (
        id INTEGER PRIMARY KEY,
        path TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        kind TEXT NOT NULL,
        frontmatter TEXT NOT NULL DEFAULT '{}',
        tags TEXT NOT NULL DEFAULT '[]',
        aliases TEXT NOT NULL DEFAULT '[]',
        mtime_ns INTEGER NOT NULL,
        size INTEGER NOT NULL,
        hash TEXT NOT NULL,
        created REAL,
        indexed_at REAL NOT NULL
    );
    CREATE INDEX notes_hash ON notes(hash);
    CREATE INDEX notes_kind ON notes(kind);
    CREATE TABLE chunks (
        id INTEGER PRIMARY KEY,
        note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
        ordinal INTEGER NOT NULL,
        kind TEXT NOT NULL,
        start_line INTEGER NOT NULL,
        end_line INTEGER NOT NULL,
        heading TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL,
        context TEXT NOT NULL DEFAULT '',
        grp TEXT NOT NULL DEFAULT '',
        memory_id TEXT,
        category TEXT,
        importance REAL NOT NULL DEFAULT 0.5,
        created REAL,
        archived INTEGER NOT NULL DEFAULT 0,
        hash TEXT NOT NULL,
        embedded INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX chunks_note ON chunks(note_id, ordinal);
    CREATE INDEX chunks_pending ON chunks(embedded) WHERE embedded = 0;
    CREATE INDEX chunks_memory ON chunks(memory_id) WHERE memory_id IS NOT NULL;
    CREATE INDEX chunks_kind ON chunks(kind, created);
    CREATE TABLE chunk_tags (
        chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
        tag TEXT NOT NULL COLLATE NOCASE,
        PRIMARY KEY (chunk_id, tag)
    ) WITHOUT ROWID;
    CREATE INDEX chunk_tags_tag ON chunk_tags(tag);
    CREATE TABLE links (
        note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
        target TEXT NOT NULL,
        subpath TEXT,
        alias TEXT,
        kind TEXT NOT NULL,
        line INTEGER NOT NULL,
        target_key TEXT NOT NULL DEFAULT '',
        resolved TEXT
    );
    CREATE INDEX links_note ON links(note_id);
    CREATE INDEX links_resolved ON links(resolved);
    CREATE INDEX links_target_key ON links(target_key);
    CREATE TABLE memories (
        id TEXT PRIMARY KEY,
        note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
        chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
        category TEXT NOT NULL,
        importance REAL NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        created REAL,
        source TEXT,
        archived INTEGER NOT NULL DEFAULT 0,
        text TEXT NOT NULL,
        norm TEXT NOT NULL
    );
    CREATE INDEX memories_norm ON memories(norm);
    CREATE INDEX memories_note ON memories(note_id);
    CREATE VIRTUAL TABLE chunks_fts USING fts5(
        text, context, title, tags,
        tokenize = '"""
    + TOKENIZER
    + """'
    );
    """,
    # The inode change time: an edit whose mtime was put back (rsync -t) still changes it.
    2: "ALTER TABLE notes ADD COLUMN ctime_ns INTEGER NOT NULL DEFAULT 0",
    # A link's relation type (the knowledge graph's typed edges: ``- works_at [[Acme]]`` under
    # a Relations heading, or the frontmatter property holding the link) and, for a relation
    # that ended, its ``valid_until`` date. Every note is read again at the next sync to fill
    # them in; unchanged chunks keep their vectors. Search through the graph looks links up by
    # block reference, a link's memory by its line, and asks when the notes last changed.
    3: "ALTER TABLE links ADD COLUMN relation TEXT;"
    " ALTER TABLE links ADD COLUMN valid_until TEXT;"
    " CREATE INDEX links_relation ON links(relation) WHERE relation IS NOT NULL;"
    " CREATE INDEX links_subpath ON links(subpath);"
    " CREATE INDEX notes_indexed ON notes(indexed_at);"
    " CREATE INDEX chunks_lines ON chunks(note_id, start_line);"
    " UPDATE notes SET hash = '', mtime_ns = 0",
    # A digest's chunks leave the keyword index (its words are its sources': see
    # MemoryIndex._store_chunks) and mean what their embedded memories say (see
    # MemoryIndex._embeddable): insights are read and embedded again.
    4: "UPDATE notes SET hash = '', mtime_ns = 0 WHERE kind = 'insight';"
    " UPDATE chunks SET embedded = 0 WHERE kind = 'insight'",
    # The words as written beside their stems (see EXACT_TABLE), filled from the stemmed rows
    # (emptied first: an index put back to an older version may hold it already).
    5: EXACT_TABLE + "; INSERT INTO chunks_exact (chunks_exact) VALUES ('delete-all')"
    "; INSERT INTO chunks_exact (rowid, text, context, title, tags)"
    " SELECT rowid, text, context, title, tags FROM chunks_fts",
    # Words in every script (memvault.index.scripts: CJK runs as bigrams, NFKC): the rows
    # whose words are not all ASCII leave the keyword index and their notes are read again
    # at the next sync, which writes them anew (the chunks and their vectors are kept).
    6: "UPDATE notes SET hash = '', mtime_ns = 0 WHERE id IN (SELECT c.note_id FROM chunks c"
    " JOIN chunks_fts f ON f.rowid = c.id WHERE " + _NOT_ASCII + ")"
    "; DELETE FROM chunks_exact WHERE rowid IN (SELECT rowid FROM chunks_fts f WHERE "
    + _NOT_ASCII
    + "); DELETE FROM chunks_fts WHERE rowid IN (SELECT rowid FROM chunks_fts f WHERE "
    + _NOT_ASCII
    + ")",
    # Stemming by language (memvault.index.stemming): the languages the index holds; each
    # keyword row holding another language is written anew: an ASCII row's stems in place
    # (its words as written are the row's own: the exact view keeps them), a row beyond
    # ASCII (written as NFKC and bigrams) by reading its note again at the next sync.
    7: "CREATE TABLE IF NOT EXISTS keyword_languages (language TEXT PRIMARY KEY) WITHOUT ROWID"
    "; CREATE TEMP TABLE restem AS SELECT rowid AS id, NOT (" + _NOT_ASCII + ") AS plain,"
    " memvault_languages(f.text, f.context, f.title, f.tags) AS languages FROM chunks_fts f"
    " WHERE languages <> ''"
    "; UPDATE notes SET hash = '', mtime_ns = 0 WHERE id IN (SELECT note_id FROM chunks"
    " WHERE id IN (SELECT id FROM temp.restem WHERE NOT plain))"
    "; DELETE FROM chunks_exact WHERE rowid IN (SELECT id FROM temp.restem WHERE NOT plain)"
    "; DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM temp.restem WHERE NOT plain)"
    "; UPDATE chunks_fts SET"
    + ",".join(
        f" {column} = memvault_stemmed(text, context, title, tags, {i})"
        for i, column in enumerate(("text", "context", "title", "tags"))
    )
    + " WHERE rowid IN (SELECT id FROM temp.restem WHERE plain)"
    "; INSERT OR IGNORE INTO keyword_languages SELECT j.value FROM temp.restem r,"
    " json_each('[\"' || replace(r.languages, ' ', '\",\"') || '\"]') j WHERE r.plain"
    "; DROP TABLE temp.restem",
}
SCHEMA_VERSION = max(_MIGRATIONS)


def connect(path: Path) -> Connection:
    """Open (creating if needed) the index database and bring its schema up to date.

    Where it cannot be written (a read-only vault) the index is a copy in
    memory: searches still answer, and nothing is saved.
    """
    if not sql.can_write(path):
        return _copy_in_memory(path)
    try:
        private_state_dir(path.parent)
        private_file(path)  # before SQLite creates it 0644; its -wal and -shm follow its mode
        # Autocommit mode: transactions are explicit (see transaction()).
        conn = sqlite3.connect(
            str(path), timeout=30.0, check_same_thread=False, isolation_level=None
        )
    except (OSError, sqlite3.Error) as exc:
        raise VaultError(f"Cannot open the index at {path}: {exc}.") from exc
    conn.row_factory = sqlite3.Row
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA busy_timeout = 30000")
    migrate(conn)
    return conn


def _copy_in_memory(path: Path) -> Connection:
    """The index at ``path`` copied into memory (empty when it is missing or unreadable)."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    if path.exists():
        try:
            source = sqlite3.connect(sql.read_only_uri(path), uri=True)
            try:
                source.backup(conn)
            finally:
                source.close()
        except sqlite3.Error:
            conn.close()  # damaged or unreadable: the sync fills an empty one instead
            conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute("PRAGMA foreign_keys = ON")
    migrate(conn)
    return conn


def migrate(conn: Connection) -> None:
    """Bring the index's schema up to date."""
    # What migration 7 asks of a keyword row as written before stemming by language.
    conn.create_function("memvault_languages", 4, _languages, deterministic=True)
    conn.create_function("memvault_stemmed", 5, _stemmed, deterministic=True)
    sql.migrate(
        conn,
        _MIGRATIONS,
        newer="The index was written by a newer memvault (schema {version}); "
        "upgrade memvault or rebuild it with `memvault index --rebuild`.",
    )


def _languages(text: str, context: str, title: str, tags: str) -> str:
    """The languages other than English a keyword row holds, by code ('' for none)."""
    return " ".join(sorted(KeywordRow.of(text, context, title, tags).languages))


def _stemmed(text: str, context: str, title: str, tags: str, column: int) -> str:
    """A keyword row's ``column`` in the stemmed view (the row's own words as written)."""
    return KeywordRow.of(text, context, title, tags).stemmed[column]
