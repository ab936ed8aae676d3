"""PostgreSQL's keyword index against FTS5 on the same rows: the same BM25 numbers where
the two read text alike, phrases, word counts and their renewal after a write, and the
same words as written and prefixes."""

# ruff: noqa: RUF001 (text in other scripts and full-width forms, on purpose)

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from memvault.index.db import EXACT_TABLE, TOKENIZER, sqlite3
from memvault.index.keyword_backends import keywords_for
from memvault.index.keywords import Form, Fts5Keywords, Keywords, keyword_tables
from memvault.index.pg_keywords import PgKeywords, _Query
from memvault.index.query import parse_query
from memvault.index.ranking import Vocabulary
from memvault.index.scripts import indexed
from memvault.sqlite import transaction
from memvault.storage.dialect import PgConnection
from pg_index_support import index_connection, migrate_index

NOW = datetime(2026, 11, 24, 12, 0)

# (text, context, title, tags): plain words, which Porter and Snowball stem alike.
ROWS = [
    ("the garden needs water every morning", "Garden notes", "Garden", "home"),
    ("tomato plants in the garden grow fast", "Garden notes", "Tomatoes", "garden food"),
    ("bake the rye bread in a hot oven", "Recipes", "Rye bread", "food"),
    ("the oven was too hot for the bread", "Recipes > Bread", "", ""),
    ("meeting with the client about the contract", "Work", "Client", "work"),
    ("contract deadline moved to friday", "Work > Client", "Deadline", "work"),
    ("train ticket to berlin for the meeting", "Travel", "Berlin", "travel work"),
    ("hotel in berlin near the station", "Travel", "", "travel"),
    ("water the tomato plants twice a day in summer", "", "Summer garden", "garden"),
    ("the client signed the contract on friday morning", "Work", "", ""),
    ("coffee and bread for breakfast", "Mornings", "Breakfast", "food home"),
    ("a note about nothing in particular", "", "Misc", ""),
]


@pytest.fixture
def pg_dsn(database: str) -> str:
    """A database migrated to hold the index."""
    return migrate_index(database)


def fill(conn: Any, rows: list[tuple[str, str, str, str]], start: int = 1) -> None:
    """Notes, chunks and keyword rows for ``rows`` (one note per row)."""
    tables = keyword_tables("postgres" if isinstance(conn, PgConnection) else "sqlite")
    with transaction(conn):
        for offset, (text, context, title, tags) in enumerate(rows):
            i = start + offset
            conn.execute(
                "INSERT INTO notes (id, path, title, kind, mtime_ns, size, hash, indexed_at)"
                " VALUES (?, ?, ?, 'note', 0, 0, '', 0)",
                (i, f"Notes/{i}.md", title),
            )
            conn.execute(
                "INSERT INTO chunks (id, note_id, ordinal, kind, start_line, end_line, text,"
                " context, hash) VALUES (?, ?, 0, 'note', 1, 1, ?, ?, '')",
                (i, i, text, context),
            )
            for table in tables:
                conn.execute(
                    f"INSERT INTO {table} (rowid, text, context, title, tags)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (i, text, context, title, tags),
                )


@pytest.fixture
def pair(pg_dsn: str) -> Iterator[tuple[Fts5Keywords, PgKeywords]]:
    """The same rows in SQLite's FTS5 and in PostgreSQL."""
    lite = sqlite3.connect(":memory:", isolation_level=None)
    lite.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, path TEXT, title TEXT, kind TEXT,"
        " mtime_ns INTEGER, size INTEGER, hash TEXT, indexed_at REAL);"
        "CREATE TABLE chunks (id INTEGER PRIMARY KEY, note_id INTEGER, ordinal INTEGER,"
        " kind TEXT, start_line INTEGER, end_line INTEGER, text TEXT, context TEXT, hash TEXT);"
        "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, context, title, tags,"
        f" tokenize = '{TOKENIZER}');"
        f"{EXACT_TABLE};"
    )
    pg = index_connection(pg_dsn)
    fill(lite, ROWS)
    fill(pg, ROWS)
    try:
        yield Fts5Keywords(lite), PgKeywords(pg)
    finally:
        lite.close()
        pg.close()


QUERIES = [
    "garden water",
    "tomato plants summer",
    "hot oven bread",
    "client contract friday",
    "berlin meeting",
    "morning",
    "breakfast food",
    "work",
]


@pytest.mark.parametrize("text", QUERIES)
def test_bm25_is_fts5s_own_and_context_scores(
    pair: tuple[Fts5Keywords, PgKeywords], text: str
) -> None:
    lite, pg = pair
    query = parse_query(text, NOW)
    expected = lite.ranked(query, 50)
    found = pg.ranked(query, 50)
    assert expected, "the corpus should match every query"
    assert {i for i, _, _ in found} == {i for i, _, _ in expected}
    by_id = {i: (own, ctx) for i, own, ctx in found}
    for chunk_id, own, ctx in expected:
        assert by_id[chunk_id] == pytest.approx((own, ctx), rel=1e-9, abs=1e-12)
    # Ordered alike: by the stems' BM25 and the words' as written (and the word being typed).
    assert [i for i, _, _ in found] == [i for i, _, _ in expected]


def test_scores_of_given_chunks_match_fts5(pair: tuple[Fts5Keywords, PgKeywords]) -> None:
    lite, pg = pair
    query = parse_query("bread oven garden", NOW)
    ids = [1, 3, 4, 5, 12]
    expected = lite.scores(query, ids)
    found = pg.scores(query, ids)
    assert set(found) == set(expected) == {1, 3, 4}
    for chunk_id, pair_of in expected.items():
        assert found[chunk_id] == pytest.approx(pair_of, rel=1e-9)


def test_a_limit_keeps_the_best(pair: tuple[Fts5Keywords, PgKeywords]) -> None:
    lite, pg = pair
    query = parse_query("the garden", NOW)
    assert [i for i, _, _ in pg.ranked(query, 3)] == [i for i, _, _ in lite.ranked(query, 3)]


def test_filtered_ranking_runs_sqlites_filter_sql(pair: tuple[Fts5Keywords, PgKeywords]) -> None:
    lite, pg = pair
    query = parse_query("contract meeting berlin", NOW)
    where, params = "n.title <> ? AND c.text LIKE ?", ["Berlin", "%CONTRACT%"]
    expected = lite.ranked_where(query, where, params, 10)
    found = pg.ranked_where(query, where, params, 10)
    assert [i for i, _, _ in found] == [i for i, _, _ in expected]
    assert {i for i, _, _ in found} == {5, 6, 10}
    by_id = {i: (own, ctx) for i, own, ctx in found}
    for chunk_id, own, ctx in expected:
        assert by_id[chunk_id] == pytest.approx((own, ctx), rel=1e-9)


def test_phrases_match_own_words_in_order(pair: tuple[Fts5Keywords, PgKeywords]) -> None:
    lite, pg = pair
    for phrases, expected in [
        ([("tomato", "plants")], {2, 9}),
        ([("plants", "tomato")], set()),
        ([("rye", "bread")], {3}),  # text and title
        ([("tomato", "plants"), ("summer",)], {9}),
        ([("garden", "notes")], set()),  # only in the context
        ([("hot", "for", "the", "bread")], {4}),  # function words count
    ]:
        assert set(lite.phrased(phrases, 10)) == expected, phrases
        assert set(pg.phrased(phrases, 10)) == expected, phrases


def test_tokens_frequencies_and_holders(pair: tuple[Fts5Keywords, PgKeywords]) -> None:
    lite, pg = pair
    assert pg.tokens("Watering the Tomatoes") == lite.tokens("Watering the Tomatoes")
    assert pg.tokens("Watering the Tomatoes") == ["water", "the", "tomato"]
    assert pg.tokens_each(["Gardens", "", "two words"]) == [["garden"], [], ["two", "word"]]
    stems = ["garden", "work", "note", "tomato", "absent"]
    assert pg.document_frequencies(stems) == lite.document_frequencies(stems)
    assert pg.document_frequencies(["note"]) == {"note": 3}  # context only counts too
    among = set(range(1, 13))
    words = ["garden", "work", "notes", "bread"]
    assert pg.holders(words, among) == lite.holders(words, among)
    assert pg.holders(["garden"], {1, 2, 3}) == [{1, 2}]
    assert pg.holders([], among) == lite.holders([], among) == []
    assert pg.text_frequency("contract") == lite.text_frequency("contract") == 3
    assert pg.text_frequency("work") == lite.text_frequency("work") == 0  # tags, context


def test_vocabulary_terms_agree(pair: tuple[Fts5Keywords, PgKeywords]) -> None:
    lite, pg = pair
    words = ("tomatoes", "garden", "gardens", "zeppelin")
    expected = Vocabulary(lite).terms(words)
    found = Vocabulary(pg).terms(words)
    assert found == expected
    assert [t.stem for t in found.terms] == ["tomato", "garden"] and found.absent == 1
    holders = Vocabulary(pg).holders(found, [1, 2, 9])
    assert holders == Vocabulary(lite).holders(expected, [1, 2, 9])
    # The word being typed: "bre" is no word, but the start of "bread" and "breakfast".
    expected = Vocabulary(lite).terms(("oven", "bre"), prefix="bre")
    assert Vocabulary(pg).terms(("oven", "bre"), prefix="bre") == expected
    assert [t.word for t in expected.terms] == ["oven", "bre"] and expected.absent == 0
    among = list(range(1, 13))
    assert Vocabulary(pg).holders(expected, among) == Vocabulary(lite).holders(expected, among)


def test_words_as_written_and_prefixes_agree(pair: tuple[Fts5Keywords, PgKeywords]) -> None:
    lite, pg = pair
    assert pg.exact_tokens("Watering the Tomatoes") == lite.exact_tokens("Watering the Tomatoes")
    assert lite.exact_tokens("Watering the Tomatoes") == ["watering", "the", "tomatoes"]
    forms = [Form("tomato"), Form("tomatoes"), Form("garden"), Form("bre", prefix=True)]
    forms += [Form("gard", prefix=True), Form("zz", prefix=True), Form("notes")]
    counts = lite.form_frequencies(forms)
    assert pg.form_frequencies(forms) == counts
    assert counts[Form("tomato")] == 2 and counts[Form("tomatoes")] == 1  # the title's plural
    assert counts[Form("bre", prefix=True)] == 3 and counts[Form("zz", prefix=True)] == 0
    among = set(range(1, 13))
    assert pg.form_holders(forms, among) == lite.form_holders(forms, among)
    assert lite.form_holders([Form("notes")], among) == [set()]  # the context is not its own
    assert pg.form_holders([], among) == lite.form_holders([], among) == []


@pytest.mark.parametrize("text", ["tomato pla", "the bre", "client contr", "tomatoes"])
def test_the_word_being_typed_ranks_alike(pair: tuple[Fts5Keywords, PgKeywords], text: str) -> None:
    lite, pg = pair
    query = parse_query(text, NOW)
    assert query.prefix is not None
    expected = lite.ranked(query, 50)
    found = pg.ranked(query, 50)
    assert [i for i, _, _ in found] == [i for i, _, _ in expected]
    for (_, own, ctx), (_, own_pg, ctx_pg) in zip(expected, found, strict=True):
        assert (own_pg, ctx_pg) == pytest.approx((own, ctx), rel=1e-9, abs=1e-12)


def test_counts_are_renewed_after_another_connection_writes(pg_dsn: str) -> None:
    reader, writer = index_connection(pg_dsn), index_connection(pg_dsn)
    try:
        fill(writer, ROWS[:4])
        keywords = PgKeywords(reader)
        assert keywords.document_frequencies(["garden"]) == {"garden": 2}
        version = reader.execute("SELECT value FROM meta WHERE key = 'keywords_version'")
        before = version.fetchone()
        fill(writer, ROWS[4:9], start=5)
        after = reader.execute("SELECT value FROM meta WHERE key = 'keywords_version'")
        assert after.fetchone() != before
        assert keywords.document_frequencies(["garden"]) == {"garden": 3}
        with transaction(writer):
            writer.execute("DELETE FROM chunks_fts WHERE rowid IN (1, 2)")
            # Uncommitted: the reader keeps its counts until the writer commits.
            assert keywords.document_frequencies(["garden"]) == {"garden": 3}
        assert keywords.document_frequencies(["garden"]) == {"garden": 1}
        query = parse_query("garden", NOW)
        assert [i for i, _, _ in keywords.ranked(query, 10)] == [9]
    finally:
        reader.close()
        writer.close()


def test_keywords_for_picks_the_backend(pg_dsn: str) -> None:
    lite = sqlite3.connect(":memory:")
    pg = index_connection(pg_dsn)
    try:
        chosen: Keywords = keywords_for(lite, "sqlite")
        assert isinstance(chosen, Fts5Keywords)
        assert isinstance(keywords_for(pg, "postgres"), PgKeywords)
    finally:
        lite.close()
        pg.close()


def test_a_query_without_lexemes_matches_nothing(pair: tuple[Fts5Keywords, PgKeywords]) -> None:
    _, pg = pair
    assert pg.ranked(parse_query("!!! ???", NOW), 10) == []
    assert pg.phrased([("!!", "??")], 10) == []
    quote = parse_query("o'brien \\ back'slash", NOW)
    assert pg.ranked(quote, 10) == []


def test_a_vectors_text_is_read_with_its_escapes() -> None:
    query = _Query({"it's": 1.0, "a\\b": 2.0, "plain": 0.5}, avgdl=10.0, tsquery="")
    own, ctx = query.score(10, "'a\\\\b':1A 'it''s':2A,3A 'other':4A", "'plain':7A")
    norm = 1.2
    assert own == pytest.approx(2.0 * 2.2 / (1 + norm) + 1.0 * 2 * 2.2 / (2 + norm))
    assert ctx == pytest.approx(0.5 * 2.2 / (1 + norm))


# Words in every script (memvault.index.scripts): the rows as the index writes them.
SCRIPT_ROWS = [
    ("我下周二要去东京出差，住在新宿的酒店。", "出差", "东京", "旅行"),
    ("去年秋天在京都看了红叶。", "", "京都", ""),
    ("歯医者の予約は来週の火曜日です。", "予定", "", ""),
    ("다음 달에 부산으로 여행을 갑니다.", "", "", "여행"),
    ("买了一个新的ｉＰｈｏｎｅ充电器。", "", "", ""),
    ("Встреча с Врачом в четверг.", "", "", ""),
    ("the garden needs water every morning", "Garden notes", "Garden", "home"),
]


@pytest.fixture
def script_pair(pg_dsn: str) -> Iterator[tuple[Fts5Keywords, PgKeywords]]:
    """SCRIPT_ROWS, as the index writes them, in SQLite's FTS5 and in PostgreSQL."""
    lite = sqlite3.connect(":memory:", isolation_level=None)
    lite.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, path TEXT, title TEXT, kind TEXT,"
        " mtime_ns INTEGER, size INTEGER, hash TEXT, indexed_at REAL);"
        "CREATE TABLE chunks (id INTEGER PRIMARY KEY, note_id INTEGER, ordinal INTEGER,"
        " kind TEXT, start_line INTEGER, end_line INTEGER, text TEXT, context TEXT, hash TEXT);"
        "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, context, title, tags,"
        f" tokenize = '{TOKENIZER}');"
        f"{EXACT_TABLE};"
    )
    pg = index_connection(pg_dsn)
    rows = [(indexed(a), indexed(b), indexed(c), indexed(d)) for a, b, c, d in SCRIPT_ROWS]
    fill(lite, rows)
    fill(pg, rows)
    try:
        yield Fts5Keywords(lite), PgKeywords(pg)
    finally:
        lite.close()
        pg.close()


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("东京", 1),
        ("京都", 2),
        ("予約", 3),
        ("부산", 4),
        ("iPhone充电器", 5),
        ("врачом", 6),
        ("出差 酒店", 1),
        ("京", 2),
        ("여행", 4),
        ("ＧＡＲＤＥＮ", 7),
    ],
)
def test_words_in_every_script_score_alike_on_both_backends(
    script_pair: tuple[Fts5Keywords, PgKeywords], text: str, first: int
) -> None:
    lite, pg = script_pair
    query = parse_query(text, NOW)
    expected = lite.ranked(query, 50)
    found = pg.ranked(query, 50)
    assert expected and expected[0][0] == first
    assert [i for i, _, _ in found] == [i for i, _, _ in expected]
    by_id = {i: (own, ctx) for i, own, ctx in found}
    for chunk_id, own, ctx in expected:
        assert by_id[chunk_id] == pytest.approx((own, ctx), rel=1e-9, abs=1e-12)
    assert Vocabulary(pg).terms(query.terms) == Vocabulary(lite).terms(query.terms)
    phrase = [query.words]  # the same rows (each backend orders them by its own rank)
    assert set(pg.phrased(phrase, 10)) == set(lite.phrased(phrase, 10))
