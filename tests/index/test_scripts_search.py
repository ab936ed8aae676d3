"""Words in every script, on SQLite and PostgreSQL: a Chinese or Japanese word inside a
longer run, a Korean word with its particle, mixed script, full-width forms and a
one-character query each find their note; and an index written before (whole runs as one
token) is written anew at the next sync."""

# ruff: noqa: RUF001 (full-width forms and CJK punctuation, on purpose)

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memvault.index.keywords import keyword_tables
from memvault.runtime import Runtime
from memvault.vault.store import Vault
from support import MovableClock, reopened

pytestmark = pytest.mark.both_backends

NOTES = {
    "Notes/Trip.md": "# 出差\n\n我下周二要去东京出差，住在新宿的酒店。\n",
    "Notes/Dentist.md": "# 予定\n\n歯医者の予約は来週の火曜日の午後三時です。\n",
    "Notes/Busan.md": "# 여행\n\n다음 달에 부산으로 여행을 갑니다.\n",
    "Notes/Charger.md": "# 购物\n\n买了一个新的iPhone充电器，放在书桌抽屉里。\n",
    "Notes/Cat.md": "# 家\n\n我家的猫叫小白，很喜欢睡觉。\n",
    "Notes/Tea.md": "# 午後\n\n毎日の午後は緑茶\n",
    "Notes/Wifi.md": "# Ｍｅｍｏ\n\nＷｉＦｉのパスワードはＡＢＣ１２３です。\n",
    "Notes/Kyoto.md": "# 旅行\n\n去年秋天在京都看了红叶。\n",
}
FILLER = "# Filler {n}\n\nThe garden hose is by the shed; water the tomatoes {n} times.\n"


@pytest.fixture
def written(runtime: Runtime, write: Callable[[str, str], Path]) -> Runtime:
    for path, text in NOTES.items():
        write(path, text)
    for n in range(6):
        write(f"Notes/Filler {n}.md", FILLER.format(n=n))
    runtime.index.sync()
    runtime.index.embed_pending()
    return runtime


def found(runtime: Runtime, query: str, mode: str = "keyword") -> list[str]:
    """The notes a search finds, best first (keyword search: every match, no floor)."""
    floor = 0.0 if mode == "keyword" else None
    hits = runtime.searcher.search(query, limit=50, mode=mode, min_score=floor)
    return list(dict.fromkeys(h.path for h in hits))


WORDS = [
    ("东京", "Notes/Trip.md"),  # a word inside a run of Han
    ("出差", "Notes/Trip.md"),
    ("新宿的酒店", "Notes/Trip.md"),
    ("予約", "Notes/Dentist.md"),  # Japanese: Kanji between Hiragana
    ("歯医者", "Notes/Dentist.md"),
    ("부산", "Notes/Busan.md"),  # Korean: the word without its particle (부산으로)
    ("여행", "Notes/Busan.md"),
    ("부산에서", "Notes/Busan.md"),  # another particle than the note's
    ("充电器", "Notes/Charger.md"),  # mixed script
    ("iphone", "Notes/Charger.md"),
    ("iPhone充电器", "Notes/Charger.md"),
    ("猫", "Notes/Cat.md"),  # one character, inside a run
    ("茶", "Notes/Tea.md"),  # one character, at the end of a run
    ("wifi abc123", "Notes/Wifi.md"),  # full-width in the note
    ("ＡＢＣ１２３", "Notes/Wifi.md"),  # full-width in the query
    ("パスワード", "Notes/Wifi.md"),
    ('"东京出差"', "Notes/Trip.md"),  # a quoted phrase
]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_word_in_any_script_finds_its_note_first(written: Runtime, mode: str) -> None:
    misses = [
        (q, found(written, q, mode)[:3])
        for q, path in WORDS
        if found(written, q, mode)[:1] != [path]
    ]
    assert not misses


def test_a_cjk_word_is_not_found_through_a_character_it_shares(written: Runtime) -> None:
    """``京都`` (Kyoto) shares 京 with 东京 (Tokyo): the Tokyo note is no match for it."""
    assert found(written, "京都") == ["Notes/Kyoto.md"]
    assert found(written, "东京") == ["Notes/Trip.md"]


def test_english_is_found_as_before_beside_cjk_notes(written: Runtime) -> None:
    assert sorted(found(written, "tomatoes")) == [f"Notes/Filler {n}.md" for n in range(6)]


def _as_written_before(runtime: Runtime) -> None:
    """Make the keyword index look as memvault wrote it before words in every script: each
    column as the note says it, and the schema version before the migration."""
    conn = runtime.index.conn
    rows = conn.execute(
        "SELECT c.id, c.text, c.context, n.title FROM chunks c JOIN notes n ON n.id = c.note_id"
    ).fetchall()
    tables = keyword_tables(runtime.index.dialect)
    for chunk_id, text, context, title in rows:
        for table in tables:
            conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (chunk_id,))
            conn.execute(
                f"INSERT INTO {table}(rowid, text, context, title, tags) VALUES (?,?,?,?,?)",
                (chunk_id, text, context, title, ""),
            )
    if runtime.index.dialect == "sqlite":
        conn.execute("PRAGMA user_version = 5")
    else:
        conn.execute("DELETE FROM memvault_schema WHERE version >= 11")  # 12 after it


def test_an_index_written_before_finds_cjk_words_after_the_next_sync(
    written: Runtime, vault: Vault, clock: MovableClock, storage_settings: object
) -> None:
    vectors = written.index.conn.execute("SELECT id, embedded FROM chunks ORDER BY id").fetchall()
    _as_written_before(written)
    assert found(written, "东京") == []  # a whole run was one token
    assert found(written, "tomatoes")  # English as before
    written.close()
    with reopened(vault.root, clock, storage_settings) as runtime:
        runtime.index.sync()
        for query, path in WORDS:
            assert found(runtime, query)[:1] == [path], query
        assert len(found(runtime, "tomatoes")) == 6
        # Read again, not rebuilt: the same chunks, their vectors kept.
        conn = runtime.index.conn
        assert conn.execute("SELECT id, embedded FROM chunks ORDER BY id").fetchall() == vectors
