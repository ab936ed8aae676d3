"""memvault's SQL on PostgreSQL: a connection that takes the statements the SQLite stores run.

The index and the state database are written in SQLite's dialect with ``?``
placeholders. Most of it is standard SQL that PostgreSQL runs as it is; the rest is a
short, closed list of differences, each rewritten here once (and cached per statement):

======================================  ==============================================
SQLite                                  PostgreSQL
======================================  ==============================================
``?`` placeholders                      ``%s`` (and a literal ``%`` doubled)
``BEGIN IMMEDIATE``                     ``BEGIN``
``INSERT OR IGNORE INTO``               ``INSERT INTO ... ON CONFLICT DO NOTHING``
``INSERT OR REPLACE INTO t(...)``       ``... ON CONFLICT (t's key) DO UPDATE SET ...``
``cursor.lastrowid`` after an INSERT    ``RETURNING id`` (tables with an id column)
``max(a, b)`` / ``min(a, b)``           ``greatest(a, b)`` / ``least(a, b)``
``json_extract(col, '$.a.b')``          ``(col::jsonb #>> '{a,b}')``
``LIKE`` (case-blind for ASCII)         ``ILIKE``
``x = ? COLLATE NOCASE``                ``lower(x) = lower(?)``
``tag = ?`` on ``chunk_tags`` (NOCASE)  ``tag = lower(?)`` (PostgreSQL stores it lower)
``... NOT INDEXED``                     nothing (a SQLite planner hint)
``x IN (?, ?, ...)``                    ``x = ANY(?)``, the values one array (below)
``x NOT IN (?, ?, ...)``                ``x <> ALL(?)``
======================================  ==============================================

A list of placeholders is sent as one array, so a statement reads the same for any
number of values: PostgreSQL plans it once (psycopg prepares a statement run five times)
where each length of a list was a new statement, planned every time, with a parameter
per value to bind (a search's candidate rows, 150 ids: 1.9 ms against 3.2 ms on
loopback). A list whose values are not all of one type is sent as it was written.

Errors arrive as :mod:`sqlite3`'s classes (a broken constraint is an
``IntegrityError``), so the stores' handlers hold on both; a lost connection is a
:class:`~memvault.errors.StorageError`. PostgreSQL aborts a transaction at its first
error where SQLite carries on; a connection made with ``savepoints=True`` (the state's)
runs each write inside a transaction under a savepoint, so a caught error leaves the
rest of the transaction standing, as it does in SQLite.

Rows read like :class:`sqlite3.Row`: by position, by column name, and ``keys()``.
What cannot be said the same way on both (full-text search, vectors, the planner's
pragmas) is not here: it lives in the backend's own classes.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import psycopg
from psycopg import pq
from psycopg.rows import RowMaker

from memvault.errors import StorageError

# The tables whose key is an ``id`` column the database assigns (``lastrowid``).
IDENTITY_TABLES = frozenset(
    {
        "notes",
        "chunks",
        "sessions",
        "messages",
        "channel_inbox",
        "channel_outbox",
        "channel_approvals",
        "job_runs",
        "memory_changes",
        "memory_reviews",
        "api_tokens",
        "memory_reads",
        "agent_runs",
    }
)
# The conflict target of ``INSERT OR REPLACE`` / ``INSERT OR IGNORE`` per table.
KEYS: dict[str, tuple[str, ...]] = {
    "meta": ("key",),
    "memories": ("id",),
    "memory_recalls": ("memory_id",),
    "reminders_sent": ("key",),
    "channel_senders": ("channel", "sender_id"),
    "imports": ("kind", "item_hash"),
    "location_samples": ("id",),
}

_INSERT = re.compile(
    r"^\s*INSERT\s+(?:OR\s+(IGNORE|REPLACE)\s+)?INTO\s+(\w+)\s*\(([^)]*)\)", re.IGNORECASE
)
_JSON_EXTRACT = re.compile(r"json_extract\(\s*([\w.]+)\s*,\s*'\$\.([\w.]+)'\s*\)", re.IGNORECASE)
_NOCASE_EQUALS = re.compile(r"([\w.]+)\s*=\s*\?\s+COLLATE\s+NOCASE", re.IGNORECASE)
_TAG_COMPARE = re.compile(r"\b((?:\w+\.)?tag)\s+(=|LIKE)\s+\?", re.IGNORECASE)
_LIKE = re.compile(r"\bLIKE\b", re.IGNORECASE)
_MAX_MIN = re.compile(r"\b(max|min)\(", re.IGNORECASE)
_IN_LIST = re.compile(r"\b(NOT\s+)?IN\s*\(\s*\?(?:\s*,\s*\?)*\s*\)", re.IGNORECASE)


class Row(tuple[Any, ...]):
    """One row: ``row[0]``, ``row["name"]`` and ``row.keys()``, as :class:`sqlite3.Row`."""

    __slots__ = ()
    _names: ClassVar[tuple[str, ...]] = ()
    _at: ClassVar[dict[str, int]] = {}  # each statement's class has its own

    # A search reads some thousands of values by name: one dict lookup each.
    def __getitem__(self, key: Any, _item: Any = tuple.__getitem__) -> Any:
        if key.__class__ is str:
            try:
                return _item(self, self._at[key])
            except KeyError:
                raise IndexError(f"No item with that key: {key}") from None
        return _item(self, key)

    def keys(self) -> list[str]:
        """The column names, in order."""
        return list(self._names)


@functools.lru_cache(maxsize=512)
def _row_kind(names: tuple[str, ...]) -> type[Row]:
    """The row class of a statement's columns (made once per set of names)."""
    at = {name: i for i, name in reversed(list(enumerate(names)))}  # the first of a name
    return type("Row", (Row,), {"_names": names, "_at": at, "__slots__": ()})


def _row_factory(cursor: psycopg.Cursor[Any]) -> RowMaker[Row]:
    kind = _row_kind(tuple(c.name for c in cursor.description or ()))

    def make(values: Sequence[Any]) -> Row:
        row: Row = kind(values)
        return row

    return make


@functools.lru_cache(maxsize=1024)
def translate(sql: str, *, returning: bool = True) -> str:
    """The PostgreSQL form of one SQLite statement (see the module's table), each list of
    placeholders as it is written."""
    return _placeholders(_rewritten(sql, returning=returning))


@dataclass(frozen=True)
class Statement:
    """A statement's PostgreSQL form with its lists of placeholders as arrays (``text``),
    where those lists' parameters are (``lists``: first and count), and ``plain``, the
    form with them as written (for values of mixed types)."""

    text: str
    lists: tuple[tuple[int, int], ...]
    plain: str

    def values(self, params: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        """The statement and its parameters, each list packed in one array when its values
        are of one type."""
        if not self.lists or not all(_one_type(params[a : a + n]) for a, n in self.lists):
            return self.plain, tuple(params)
        out: list[Any] = []
        at = 0
        for first, count in self.lists:
            out.extend(params[at:first])
            out.append(list(params[first : first + count]))
            at = first + count
        out.extend(params[at:])
        return self.text, tuple(out)


def _one_type(values: Sequence[Any]) -> bool:
    """Whether psycopg can send ``values`` as one array: ints or strings, not mixed."""
    kinds = {type(v) for v in values if v is not None}
    return len(kinds) == 1 and kinds <= {int, str}


@functools.lru_cache(maxsize=4096)
def arrayed(sql: str) -> Statement:
    """:func:`translate`'s form of ``sql`` with its lists of placeholders as arrays."""
    text = _rewritten(sql, returning=True)
    lists: list[tuple[int, int]] = []
    parts: list[str] = []
    at = 0
    for found in _IN_LIST.finditer(text):
        before, quoted = _marks(text[: found.start()])
        if quoted:
            continue
        lists.append((before, found.group(0).count("?")))
        parts += [text[at : found.start()], "<> ALL(?)" if found.group(1) else "= ANY(?)"]
        at = found.end()
    parts.append(text[at:])
    return Statement(_placeholders("".join(parts)), tuple(lists), _placeholders(text))


def _marks(text: str) -> tuple[int, bool]:
    """The ``?`` placeholders in ``text`` outside quoted literals, and whether it ends
    inside one."""
    count, quoted = 0, False
    for char, quoted in _scanned(text):
        count += char == "?" and not quoted
    return count, quoted


def _rewritten(sql: str, *, returning: bool) -> str:
    """Every rewrite of the module's table but the placeholders'."""
    text = sql.strip()
    if re.match(r"BEGIN\s+IMMEDIATE$", text, re.IGNORECASE):
        return "BEGIN"
    text = text.replace(" NOT INDEXED", "")
    text = _JSON_EXTRACT.sub(
        lambda m: f"({m.group(1)}::jsonb #>> '{{{m.group(2).replace('.', ',')}}}')", text
    )
    text = _NOCASE_EQUALS.sub(r"lower(\1) = lower(?)", text)
    if "chunk_tags" in text or re.search(r"\bt\.tag\b", text):
        text = _TAG_COMPARE.sub(r"\1 \2 lower(?)", text)
    text = _LIKE.sub("ILIKE", text)
    text = _scalar_extremes(text)
    insert = _INSERT.match(text)
    if insert:
        text = _insert(text, insert, returning=returning)
    return text


def _insert(text: str, found: re.Match[str], *, returning: bool) -> str:
    verb, table, columns = found.group(1), found.group(2).lower(), found.group(3)
    text = f"INSERT INTO {found.group(2)} ({columns}){text[found.end() :]}"
    if verb is not None and verb.upper() == "IGNORE":
        text += " ON CONFLICT DO NOTHING"
    elif verb is not None:
        key = KEYS[table]
        names = [c.strip() for c in columns.split(",")]
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in names if c not in key)
        text += f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
    if returning and table in IDENTITY_TABLES and "RETURNING" not in text.upper():
        text += " RETURNING id"
    return text


def _scalar_extremes(text: str) -> str:
    """``max(a, b)`` (two arguments: SQLite's scalar form) as ``greatest(a, b)``."""
    out: list[str] = []
    at = 0
    for found in _MAX_MIN.finditer(text):
        if found.start() < at:
            continue
        depth, top_comma, end = 1, False, found.end()
        while end < len(text) and depth:
            char = text[end]
            depth += {"(": 1, ")": -1}.get(char, 0)
            top_comma |= char == "," and depth == 1
            end += 1
        if top_comma:
            name = "greatest" if found.group(1).lower() == "max" else "least"
            inner = _scalar_extremes(text[found.end() : end - 1])
            out.append(f"{text[at : found.start()]}{name}({inner})")
            at = end
    out.append(text[at:])
    return "".join(out)


def _placeholders(text: str) -> str:
    """``?`` as ``%s`` and ``%`` as ``%%``, outside quoted literals."""
    out = {"?": "%s", "%": "%%"}
    inside = {"%": "%%"}
    return "".join((inside if quoted else out).get(c, c) for c, quoted in _scanned(text))


def _scanned(text: str) -> Iterator[tuple[str, bool]]:
    """Each character of ``text`` and whether, once it is read, the text stands inside a
    quoted literal or name (an opening quote is inside, a closing one is not)."""
    quote: str | None = None
    for char in text:
        if quote is None and char in "'\"":
            quote = char
        elif char == quote:
            quote = None
        yield char, quote is not None


class Cursor:
    """What ``execute`` returns: the rows, ``lastrowid`` and ``rowcount``."""

    def __init__(self, cursor: psycopg.Cursor[Row], lastrowid: int | None = None) -> None:
        self._cursor = cursor
        self.lastrowid = lastrowid
        self.rowcount = cursor.rowcount

    def fetchone(self) -> Row | None:
        return self._cursor.fetchone() if self._cursor.description else None

    def fetchall(self) -> list[Row]:
        return self._cursor.fetchall() if self._cursor.description else []

    def __iter__(self) -> Iterator[Row]:
        return iter(self.fetchall())


class PgConnection:
    """A psycopg connection (autocommit; transactions are explicit, as with SQLite) that
    runs memvault's SQLite statements through :func:`arrayed` (``executemany`` through
    :func:`translate`)."""

    def __init__(self, raw: psycopg.Connection[Any], *, savepoints: bool = False) -> None:
        self.raw: psycopg.Connection[Row] = raw
        self.raw.row_factory = _row_factory
        self._savepoints = savepoints

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Cursor:
        statement, values = arrayed(sql).values(tuple(params or ()))
        query = statement.encode()
        guarded = self._savepoints and self.in_transaction and not _reads(statement)
        with _as_sqlite_errors():
            if guarded:
                with self.raw.transaction():
                    cursor = self.raw.execute(query, values)
            else:
                cursor = self.raw.execute(query, values)
        lastrowid = None
        if statement.endswith(" RETURNING id") and "RETURNING" not in sql.upper():
            row = cursor.fetchone()
            lastrowid = int(row[0]) if row is not None else None
        return Cursor(cursor, lastrowid)

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> Cursor:
        statement = translate(sql, returning=False)
        rows = [tuple(p) for p in seq]
        with _as_sqlite_errors(), self.raw.cursor() as cursor:
            if self._savepoints and self.in_transaction:
                with self.raw.transaction():
                    cursor.executemany(statement.encode(), rows)
            else:
                cursor.executemany(statement.encode(), rows)
            return Cursor(cursor)

    @property
    def in_transaction(self) -> bool:
        """True inside an explicit transaction, and always on a pooled connection (not in
        autocommit: psycopg opens its transaction, so a nested one is a savepoint)."""
        idle = self.raw.info.transaction_status == pq.TransactionStatus.IDLE
        return not self.raw.autocommit or not idle

    @property
    def closed(self) -> bool:
        return self.raw.closed

    def close(self) -> None:
        self.raw.close()


_UNGUARDED = frozenset({"SELECT", "WITH", "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"})


def _reads(statement: str) -> bool:
    """Whether a statement needs no savepoint (it reads, or steers the transaction)."""
    return statement.split(None, 1)[0].upper() in _UNGUARDED


@contextlib.contextmanager
def _as_sqlite_errors() -> Iterator[None]:
    """psycopg's errors as sqlite3's (what the stores catch), a lost connection as a
    StorageError."""
    try:
        yield
    except psycopg.errors.IntegrityError as exc:
        raise sqlite3.IntegrityError(_first_line(exc)) from exc
    except psycopg.OperationalError as exc:
        state = exc.sqlstate or ""
        if not state or state.startswith("08") or state in {"57P01", "57P02", "57P03"}:
            raise StorageError(f"Lost the connection to PostgreSQL ({_first_line(exc)}).") from exc
        raise sqlite3.OperationalError(_first_line(exc)) from exc
    except psycopg.Error as exc:
        raise sqlite3.DatabaseError(_first_line(exc)) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
