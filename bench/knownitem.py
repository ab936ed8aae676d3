"""Known-item search on real notes that are not LoCoMo.

The test a person runs first on a search box: look for something that is in
exactly one note and see whether that note comes first. Each corpus is a vault
of real text built through memvault's real ingestion (files, ``sync``, the
local model):

- ``reference``: the Python Language Reference shipped with the interpreter
  (``pydoc_data.topics``), one note per section: long notes.
- ``docstrings``: the docstrings of the public functions, classes and methods
  of a fixed list of stdlib modules, one note each: short notes, like memories.
- ``obsidian``: the Obsidian Tasks documentation (tests/fixtures/public_vault),
  one note per ``##`` section: Markdown as people write it.
- ``readmes``: the READMEs of the packages installed with memvault (their
  long descriptions, Markdown or reST), one note per section (~1,750 notes):
  prose no one here wrote, full of words that share a stem with a commoner one.

Query classes, each with exactly one right note:

- ``rare``: a word (5+ letters, no function word) that is in one note only, both
  by its surface form (lower case, split on anything not a letter or digit) and
  by the index's own tokenizer (an FTS5 match over the built index); on
  ``readmes`` by its surface form alone, as a person reads it (letters only):
  a word whose stem a commoner word shares (``statue``, ``status``), or that
  stands only at the start of a longer token (``xoauth`` in ``XOAUTH2``), counts;
- ``identifier``: the same for names, numbers and codes, as written
  (``PYTHONHASHSEED``, ``co_argcount``, ``0x1F``);
- ``phrase``: four consecutive words of a line whose 4-gram is in no other note;
- ``quoted``: the same phrases in double quotes;
- ``paraphrase``: questions written by hand that avoid the note's own rare
  words (``knownitem_queries.json``);
- ``absent``: questions no note answers (same file), for the relevance floor.

A note's rank is the rank of its first chunk among the results, counting
distinct notes. Per class and mode (hybrid, keyword, vector): top-1, top-5,
MRR (rank <= 20, else 0) and "found", the share whose note is returned at all
(``LIMIT`` chunks asked for); for absent queries, the share that return nothing
and the mean number of hits of the first ten. The bar (DESIGN.md): hybrid >=
max(keyword, vector) on every class, and top-1 >= 0.95 for rare words, names
and quoted phrases.

    python bench/knownitem.py [--quick] [--corpus NAME]... [--cache [DIR]] [--misses N] [--json]

The queries depend on the text and the index's tokenizer, never on ranking,
so they stay the same while the ranking changes. To iterate on ranking from
Python (with the cache, a vault builds in seconds)::

    embedder = CachedEmbedder(LocalEmbedder(), DEFAULT_CACHE)
    runtime, queries = build("docstrings", Path(tmp), embedder, search=SearchSettings(...))
    print(render_corpus("docstrings", evaluate(runtime, queries)))
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import itertools
import json
import random
import re
import sqlite3
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import backends
import numpy as np

from memvault.clock import Clock
from memvault.config import SearchSettings, Settings
from memvault.index.db import TOKENIZER
from memvault.index.embedders import BaseEmbedder, Embedder, LocalEmbedder, Vectors
from memvault.index.query import STOPWORDS
from memvault.runtime import Runtime
from memvault.vault.markdown import headings, title_of
from memvault.vault.note import Note

UTC = ZoneInfo("UTC")
SEED = 11
CORPORA = ("reference", "docstrings", "obsidian", "readmes")
# Corpora whose generated queries are read off the text as a person reads it (see
# ``generated_queries``): the others' are confirmed by the index's own stemmer.
SURFACE = frozenset({"readmes"})
FOLDERS = {
    "reference": "Reference",
    "docstrings": "Docs",
    "obsidian": "Plugin",
    "readmes": "Readme",
}
MODES = ("hybrid", "keyword", "vector")
ANSWERABLE = ("rare", "identifier", "phrase", "quoted", "paraphrase")
LIMIT = 60  # chunks asked for: about 20 distinct notes or more
MRR_DEPTH = 20
SHOWN = 10  # hits a person sees by default, for the absent queries
# Top-1 the fused search must reach (DESIGN.md: "a rare word, a quoted phrase ... >= 95%").
FIRST_BAR = {"rare": 0.95, "identifier": 0.95, "quoted": 0.95}
# Queries per generated class; ``quoted`` reuses the phrases.
COUNTS = {"rare": 100, "identifier": 50, "phrase": 100}
QUICK_COUNTS = {"rare": 40, "identifier": 20, "phrase": 40}
HAND_WRITTEN = Path(__file__).with_name("knownitem_queries.json")
PUBLIC_VAULT = Path(__file__).resolve().parents[1] / "tests/fixtures/public_vault"
DEFAULT_CACHE = Path("/tmp/memvault-bench-cache")

DOC_MODULES = (
    "os os.path shutil json re datetime collections itertools functools pathlib subprocess "
    "string textwrap statistics random math heapq bisect csv zipfile tarfile gzip hashlib "
    "base64 urllib.parse http.client socket threading queue logging argparse tempfile glob "
    "fnmatch difflib calendar time uuid secrets contextlib dataclasses enum copy pprint shlex"
).split()
QUICK_DOC_MODULES = (
    "shutil json re itertools functools textwrap statistics heapq bisect csv gzip base64 "
    "urllib.parse queue tempfile glob fnmatch difflib uuid secrets"
).split()

_TOKEN = re.compile(r"[^\W_]+")  # FTS5 unicode61: letters and digits, lower-cased
_LETTERS = re.compile(r"[^\W\d_]+")  # a word as a person reads it: letters only
# The index's tokenizer without its stemmer: the ground truth of surface-form queries.
EXACT_TOKENIZER = "unicode61 remove_diacritics 2"
_RAW = re.compile(r"\w+")  # a name as written, underscores included
_UNDERLINE = re.compile(r"([*=\-~^])\1+")
_ATX = re.compile(r"^( {0,3})#")
_UNSAFE = re.compile(r'[\\/:*?"<>|#^\[\]`]+')


@dataclass(frozen=True)
class Query:
    """One search and the note that answers it (None: no note does)."""

    text: str
    kind: str
    target: str | None


# -- corpora ---------------------------------------------------------------------------


def _slug(title: str) -> str:
    """A file name from a heading: no characters a path or Obsidian link trips on."""
    return " ".join(_UNSAFE.sub(" ", title).split())[:80].strip() or "Untitled"


def _escaped(body: str) -> str:
    """Body lines that would read as Markdown headings (a ``# comment`` in code) escaped."""
    return "\n".join(_ATX.sub(r"\1\\#", line) for line in body.split("\n"))


def _add(notes: dict[str, str], folder: str, title: str, body: str, *, plain: bool) -> None:
    """Add a note ``# title`` + body under a file name unique in its folder.

    ``plain``: the body is not Markdown, so a line like ``# comment`` is escaped.
    """
    stem = _slug(title)
    path = f"{folder}/{stem}.md"
    n = 2
    while path in notes:
        path = f"{folder}/{stem} {n}.md"
        n += 1
    body = _escaped(body.strip()) if plain else body.strip()
    notes[path] = f"# {title}\n\n{body}\n"


def _rest_sections(text: str) -> list[tuple[str, str]]:
    """(title, body) of each section of reST-like text with underlined headings."""
    lines = text.split("\n")
    starts = [
        i
        for i in range(len(lines) - 1)
        if lines[i].strip()
        and not lines[i][0].isspace()
        and _UNDERLINE.fullmatch(lines[i + 1])
        and len(lines[i + 1]) == len(lines[i])
    ]
    out = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        out.append((lines[start].strip(), "\n".join(lines[start + 2 : end])))
    return out


def reference_notes() -> dict[str, str]:
    """The Language Reference, one note per section (``Reference/<topic>/<section>.md``).

    Topics overlap (``specialnames`` holds ``customization``); a section whose
    text was already seen is left out, and so are sections with no text of their own.
    """
    from pydoc_data.topics import topics

    notes: dict[str, str] = {}
    seen: set[str] = set()
    for topic in sorted(topics):
        for title, body in _rest_sections(topics[topic]):
            key = " ".join(body.split())
            if len(key) < 80 or key in seen:
                continue
            seen.add(key)
            _add(notes, f"{FOLDERS['reference']}/{topic}", title, body, plain=True)
    return notes


def _public_objects(module: Any) -> Iterable[tuple[str, Any]]:
    """(name, object) of a module's public functions and classes, and those classes' methods."""
    declared = getattr(module, "__all__", None)
    names = declared or [n for n in dir(module) if not n.startswith("_")]
    for name in sorted(set(names)):
        obj = getattr(module, name, None)
        if name.startswith("_") or not (inspect.isroutine(obj) or inspect.isclass(obj)):
            continue
        if not declared and getattr(obj, "__module__", None) != module.__name__:
            continue  # imported from elsewhere (uuid's ``Enum``, ``bytes_``)
        yield name, obj
        if inspect.isclass(obj) and str(getattr(obj, "__module__", "")).startswith(
            module.__name__.split(".")[0]
        ):
            for attr, value in sorted(vars(obj).items()):
                if attr.startswith("_"):
                    continue
                if isinstance(value, classmethod | staticmethod):
                    value = value.__func__
                if inspect.isroutine(value) or isinstance(value, property):
                    yield f"{name}.{attr}", value


def docstring_notes(modules: Sequence[str] = DOC_MODULES) -> dict[str, str]:
    """One note per public docstring (``Docs/<module>/<name>.md``), no empty or repeated ones."""
    notes: dict[str, str] = {}
    seen: set[str] = set()
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name, obj in _public_objects(module):
            doc = obj.__doc__
            if not isinstance(doc, str) or len(doc.strip()) < 20:
                continue
            doc = inspect.cleandoc(doc)
            if doc in seen:
                continue
            seen.add(doc)
            title = f"{module_name}.{name}"
            _add(notes, f"{FOLDERS['docstrings']}/{module_name}", title, doc, plain=True)
    return notes


def obsidian_notes(root: Path = PUBLIC_VAULT) -> dict[str, str]:
    """The Obsidian Tasks docs, one note per ``##`` section (``Plugin/<page>/<section>.md``)."""
    notes: dict[str, str] = {}
    for file in sorted(root.rglob("*.md")):
        relative = file.relative_to(root)
        if relative.parts[0].startswith(("_", ".")):
            continue  # the docs' own templates
        body = Note.parse(file.read_text(encoding="utf-8")).body
        page = title_of(body, file.stem)
        lines = body.split("\n")
        cuts = [h.line - 1 for h in headings(body) if h.level <= 2]
        bounds = [0, *[c for c in cuts if c > 0], len(lines)]
        folder = (
            FOLDERS["obsidian"] + "/" + "/".join(_slug(p) for p in relative.with_suffix("").parts)
        )
        for start, end in itertools.pairwise(bounds):
            part = lines[start:end]
            heading = re.match(r"^#{1,2}\s+(.*)$", part[0]) if part else None
            section = heading.group(1).strip() if heading else ""
            text = "\n".join(part[1:] if heading else part)
            if len(" ".join(text.split())) < 80:
                continue
            title = page if not section or section == page else f"{page}: {section}"
            _add(notes, folder, title, text, plain=False)
    return notes


_MD_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_MD_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_RULE = re.compile(r"""([=\-~^*+#"'`:.])\1{2,}\s*""")


def _readme_sections(text: str, markdown: bool) -> list[tuple[str, str]]:
    """(heading, body) of each section of a README, the text before the first heading
    first (heading ""). Markdown: ATX and setext headings outside code fences; reST (and
    plain text): a line underlined (and maybe overlined) with one punctuation mark."""
    lines = text.replace("\r\n", "\n").split("\n")
    cuts: list[tuple[int, str, int]] = []  # (first line, heading, first line of the body)
    fenced = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if markdown and _MD_FENCE.match(line):
            fenced = not fenced
        elif not fenced and markdown and (atx := _MD_HEADING.match(line)) and atx.group(2):
            cuts.append((i, atx.group(2).strip(), i + 1))
        elif (
            not fenced
            and i + 1 < len(lines)
            and line.strip()
            and not line[0].isspace()
            and _RULE.fullmatch(lines[i + 1])
            and len(lines[i + 1].rstrip()) >= len(line.rstrip())
            and (not markdown or lines[i + 1][0] in "=-")
        ):
            over = i > 0 and not markdown and lines[i - 1][:1] == lines[i + 1][:1]
            over = over and bool(_RULE.fullmatch(lines[i - 1]))
            cuts.append((i - 1 if over else i, line.strip(), i + 2))
            i += 2
            continue
        i += 1
    first = cuts[0][0] if cuts else len(lines)
    out = [("", "\n".join(lines[:first]))]
    ends = [start for start, _, _ in cuts[1:]] + [len(lines)]
    for (_, heading, body), end in zip(cuts, ends, strict=False):
        out.append((heading, "\n".join(lines[body:end])))
    return out


def _description(dist: importlib.metadata.Distribution) -> tuple[str, bool]:
    """A distribution's long description and whether it is Markdown."""
    meta = dist.metadata
    text = meta.get_payload() or ""  # type: ignore[attr-defined]
    if not text.strip():
        # Metadata 1.x keeps it in a header, continuation lines indented (``        |``).
        header = meta.get("Description") or ""
        text = re.sub(r"\n {8}\|?", "\n", header)
    kind = (meta.get("Description-Content-Type") or "").lower()
    if "markdown" in kind:
        return text, True
    if "rst" in kind:
        return text, False
    return text, bool(re.search(r"^ {0,3}#{1,6} \S|^```", text, re.M))


def readme_notes(*, quick: bool = False) -> dict[str, str]:
    """The READMEs of the installed packages (their long descriptions), one note per
    section (``Readme/<package>/<heading>.md``).

    Packages in name order, each once; memvault's own README is left out (it changes with
    the code). Sections with little text (under 80 characters) or text already seen are
    left out. ``quick``: every third package.
    """
    notes: dict[str, str] = {}
    seen_text: set[str] = set()
    dists: dict[str, importlib.metadata.Distribution] = {}
    for dist in importlib.metadata.distributions():
        name = re.sub(r"[-_.]+", "-", (dist.metadata["Name"] or "").lower())
        if name and name != "memvault":
            dists.setdefault(name, dist)
    names = sorted(dists)
    for number, name in enumerate(names):
        if quick and number % 3:
            continue
        dist = dists[name]
        text, markdown = _description(dist)
        package = str(dist.metadata["Name"])
        folder = f"{FOLDERS['readmes']}/{_slug(package)}"
        for heading, body in _readme_sections(text, markdown):
            key = " ".join(body.split())
            if len(key) < 80 or key in seen_text:
                continue
            seen_text.add(key)
            title = f"{package}: {heading}" if heading else package
            _add(notes, folder, title, body, plain=not markdown)
    return notes


def corpus_notes(corpus: str, *, quick: bool = False) -> dict[str, str]:
    """The notes of a corpus, path to Markdown text, in a fixed order."""
    if corpus == "reference":
        return reference_notes()
    if corpus == "docstrings":
        return docstring_notes(QUICK_DOC_MODULES if quick else DOC_MODULES)
    if corpus == "obsidian":
        return obsidian_notes()
    if corpus == "readmes":
        return readme_notes(quick=quick)
    raise ValueError(f"Unknown corpus {corpus!r}; use one of {', '.join(CORPORA)}.")


# -- queries ---------------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    """Words as FTS5's unicode61 tokenizer sees them (before stemming)."""
    return [t.lower() for t in _TOKEN.findall(text)]


def _is_identifier(raw: str) -> bool:
    """A name, number or code rather than a word: digits, underscores or inner capitals."""
    if len(raw) < 4 or not _TOKEN.search(raw):
        return False
    return any(c.isdigit() for c in raw) or "_" in raw or any(c.isupper() for c in raw[1:])


def _content_id(raw: str) -> bool:
    return any(t not in STOPWORDS for t in tokens(raw))


def _is_word(raw: str) -> bool:
    return (
        len(raw) >= 5
        and raw.isalpha()
        and (raw.islower() or raw.istitle())
        and raw.lower() not in STOPWORDS
    )


class _Index:
    """Which notes of the built index an FTS5 expression matches: the ground truth.

    The index's rows are copied into an FTS5 table in memory with the index's tokenizer
    (``stemmed``) or without its stemmer, so both backends are asked exactly the same
    queries, whatever keyword tables the index itself keeps.
    """

    def __init__(self, runtime: Runtime, *, stemmed: bool = True) -> None:
        self.conn = _fts5_copy(runtime, TOKENIZER if stemmed else EXACT_TOKENIZER)

    def notes(self, words: Sequence[str]) -> set[str]:
        phrase = '"' + " ".join(words) + '"'
        rows = self.conn.execute(
            "SELECT DISTINCT n.path FROM chunks_fts f JOIN chunks c ON c.id = f.rowid"
            " JOIN notes n ON n.id = c.note_id WHERE chunks_fts MATCH ?",
            (phrase,),
        ).fetchall()
        return {str(r[0]) for r in rows}

    def only(self, words: Sequence[str], path: str) -> bool:
        return bool(words) and self.notes(words) == {path}

    def paths(self) -> set[str]:
        """The notes with a chunk in the keyword index."""
        rows = self.conn.execute(
            "SELECT DISTINCT n.path FROM chunks_fts f JOIN chunks c ON c.id = f.rowid"
            " JOIN notes n ON n.id = c.note_id"
        ).fetchall()
        return {str(r[0]) for r in rows}


def _fts5_copy(runtime: Runtime, tokenizer: str = TOKENIZER) -> sqlite3.Connection:
    """The index's notes, chunks and keyword rows in an in-memory SQLite with FTS5."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, path TEXT)")
    conn.execute("CREATE TABLE chunks (id INTEGER PRIMARY KEY, note_id INTEGER)")
    conn.execute(
        "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, context, title, tags,"
        f" tokenize = '{tokenizer}')"
    )
    source = runtime.index.conn
    conn.executemany(
        "INSERT INTO notes VALUES (?, ?)", source.execute("SELECT id, path FROM notes")
    )
    conn.executemany(
        "INSERT INTO chunks VALUES (?, ?)", source.execute("SELECT id, note_id FROM chunks")
    )
    conn.executemany(
        "INSERT INTO chunks_fts(rowid, text, context, title, tags) VALUES (?, ?, ?, ?, ?)",
        source.execute("SELECT rowid, text, context, title, tags FROM chunks_fts"),
    )
    return conn


def _phrases(body: str) -> Iterable[list[str]]:
    """Runs of four plain words (letters only, single spaces) on one line."""
    for line in body.split("\n"):
        run: list[str] = []
        for piece in line.split(" "):
            if piece.isascii() and piece.isalpha():
                run.append(piece)
                if len(run) >= 4:
                    yield run[-4:]
            else:
                run = []


def _content(words: Sequence[str]) -> bool:
    return sum(w.lower() not in STOPWORDS and len(w) >= 3 for w in words) >= 2


def generated_queries(
    runtime: Runtime,
    notes: Mapping[str, str],
    counts: Mapping[str, int],
    seed: int = SEED,
    *,
    surface: bool = False,
) -> list[Query]:
    """Rare words, identifiers and phrases of single notes, sampled with a fixed seed.

    Uniqueness is counted over every Markdown file of the vault (the layout's
    own notes too) and confirmed on the built index, so the index must be synced.
    ``surface``: as a person reads the text, not as the index's tokenizer does: a rare
    word is a run of letters in one note only, even where the stemmer merges it with
    a common word (``statue``, ``status``) or it stands inside a longer token
    (``xoauth`` in ``XOAUTH2``); identifiers and phrases are confirmed without the stemmer.
    """
    vault = runtime.vault.root
    everything = {
        str(p.relative_to(vault)): p.read_text(encoding="utf-8")
        for p in sorted(vault.rglob("*.md"))
        if ".memvault" not in p.parts
    }
    word_df: Counter[str] = Counter()
    raw_df: Counter[str] = Counter()
    gram_df: Counter[tuple[str, ...]] = Counter()
    for text in everything.values():
        words = tokens(text)
        word_df.update(set(words))
        if surface:
            word_df.update({"\x00" + w.lower() for w in _LETTERS.findall(text)})
        raw_df.update({r.lower() for r in _RAW.findall(text)})
        gram_df.update(set(zip(words, words[1:], words[2:], words[3:], strict=False)))

    candidates: dict[str, dict[str, list[str]]] = {k: {} for k in ("rare", "identifier", "phrase")}
    for path, text in notes.items():
        raws = sorted(set(_RAW.findall(text)))
        if surface:
            letters = {w for w in _LETTERS.findall(text) if _is_word(w)}
            rare = {w.lower() for w in letters if word_df["\x00" + w.lower()] == 1}
        else:
            rare = {r.lower() for r in raws if _is_word(r) and word_df[r.lower()] == 1}
        candidates["rare"][path] = sorted(rare)
        candidates["identifier"][path] = [
            r for r in raws if _is_identifier(r) and raw_df[r.lower()] == 1 and _content_id(r)
        ]
        body = text.split("\n", 1)[1] if "\n" in text else ""
        grams = {
            " ".join(run)
            for run in _phrases(body)
            if _content(run) and gram_df[tuple(w.lower() for w in run)] == 1
        }
        candidates["phrase"][path] = sorted(grams)

    index = _Index(runtime, stemmed=not surface)
    indexed = index.paths()
    rng = random.Random(seed)
    queries: list[Query] = []
    for kind in ("rare", "identifier", "phrase"):
        if surface and kind == "rare":
            # Counted on letters above; the index need not hold it as a token of its own.
            valid: Callable[[str, str], bool] = lambda q, p: p in indexed  # noqa: E731
        else:
            valid = lambda q, p: index.only(tokens(q), p)  # noqa: E731
        chosen = _sample(candidates[kind], counts[kind], rng, valid)
        queries += [Query(text, kind, path) for text, path in chosen]
        if kind == "phrase":
            queries += [Query(f'"{text}"', "quoted", path) for text, path in chosen]
    return queries


def _sample(
    by_note: Mapping[str, list[str]], n: int, rng: random.Random, valid: Callable[[str, str], bool]
) -> list[tuple[str, str]]:
    """Up to ``n`` (query, note) pairs, one per note, notes and candidates in random order."""
    paths = sorted(p for p, items in by_note.items() if items)
    rng.shuffle(paths)
    out = []
    for path in paths:
        items = list(by_note[path])
        rng.shuffle(items)
        for item in items[:5]:
            if valid(item, path):
                out.append((item, path))
                break
        if len(out) == n:
            break
    return out


def hand_written(
    corpus: str, paths: Iterable[str], *, known: Iterable[str] | None = None
) -> list[Query]:
    """The paraphrases of ``corpus`` and the absent queries, from ``knownitem_queries.json``.

    Every target must be a note of ``known`` (default: ``paths``), or this
    fails: a renamed note must not quietly shrink the benchmark. Targets
    outside ``paths`` (a quick run's subset) are dropped.
    """
    data = json.loads(HAND_WRITTEN.read_text(encoding="utf-8"))
    unknown = sorted({item["corpus"] for item in data["paraphrase"]} - set(CORPORA))
    if unknown:
        raise SystemExit(f"{HAND_WRITTEN.name}: unknown corpus {', '.join(unknown)}")
    present = set(paths)
    allowed = set(known) if known is not None else present
    queries = []
    missing = []
    for item in data["paraphrase"]:
        if item["corpus"] != corpus:
            continue
        if item["target"] not in allowed:
            missing.append(item["target"])
        elif item["target"] in present:
            queries.append(Query(item["query"], "paraphrase", item["target"]))
    if missing:
        raise SystemExit(
            f"{HAND_WRITTEN.name}: {len(missing)} paraphrase target(s) of corpus {corpus!r} "
            f"are not notes of it: {', '.join(sorted(missing))}"
        )
    queries += [Query(text, "absent", None) for text in data["absent"]]
    return queries


# -- the embedding cache ---------------------------------------------------------------


class CachedEmbedder(BaseEmbedder):
    """Another embedder with every vector it makes kept on disk, keyed by sha1 of the text.

    It has the wrapped embedder's provider, model and identity, so an index
    takes its vectors for the wrapped model's. For development runs only:
    before the first use, a short and a long probe text are embedded afresh
    and compared with their cached vectors; if the model's output changed
    under the same name, the cache is emptied.
    """

    _PROBES = (
        "where did I put the spare keys",
        " ".join(["the quick brown fox jumps over the lazy dog"] * 40),
    )

    def __init__(self, inner: Embedder, directory: Path) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / (re.sub(r"[^\w.-]+", "-", inner.identity) + ".sqlite")
        self.conn = sqlite3.connect(self.path)
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)"
        )
        self.hits = 0
        self.misses = 0
        self._checked = False

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)  # anything else the wrapped embedder offers

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def enabled(self) -> bool:
        return self.inner.enabled

    @property
    def loaded(self) -> bool:
        return self.inner.loaded

    def dimension(self) -> int:
        return self.inner.dimension()

    def warm(self) -> None:
        self.inner.warm()

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def _check(self) -> None:
        self._checked = True
        fresh = self.inner.embed(list(self._PROBES))
        keys = [self._key("\x00probe\x00" + p) for p in self._PROBES]
        stored = self._get(keys)
        if len(stored) == len(keys) and all(
            float(np.abs(stored[k] - v).max()) < 1e-4 for k, v in zip(keys, fresh, strict=True)
        ):
            return
        if stored:
            print(f"embedding cache {self.path}: the model changed, emptying it", file=sys.stderr)
        with self.conn:
            self.conn.execute("DELETE FROM vectors")
        self._put(keys, fresh)

    def _get(self, keys: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        for start in range(0, len(keys), 500):
            batch = keys[start : start + 500]
            rows = self.conn.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(batch))})",
                batch,
            ).fetchall()
            found.update({k: np.frombuffer(v, dtype=np.float32) for k, v in rows})
        return found

    def _put(self, keys: Sequence[str], vectors: Vectors) -> None:
        with self.conn:
            self.conn.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                [
                    (k, np.asarray(v, dtype=np.float32).tobytes())
                    for k, v in zip(keys, vectors, strict=True)
                ],
            )

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not self._checked:
            self._check()
        keys = [self._key(t) for t in texts]
        found = self._get(sorted(set(keys)))
        todo = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        self.hits += len(texts) - sum(k not in found for k in keys)
        self.misses += sum(k not in found for k in keys)
        if todo:
            fresh = self.inner.embed([t for _, t in todo])
            self._put([k for k, _ in todo], fresh)
            found.update({k: v for (k, _), v in zip(todo, fresh, strict=True)})
        return np.stack([found[k] for k in keys]).astype(np.float32)

    def close(self) -> None:
        """Release the cache file."""
        self.conn.close()


# -- building and evaluating -----------------------------------------------------------


def build(
    corpus: str,
    root: Path,
    embedder: Embedder,
    *,
    quick: bool = False,
    seed: int = SEED,
    search: SearchSettings | None = None,
    timings: dict[str, float] | None = None,
) -> tuple[Runtime, list[Query]]:
    """A vault of ``corpus`` at ``root`` (an empty folder), indexed and embedded, and its queries.

    ``search`` replaces the default search settings (weights to try). The
    caller closes the runtime. ``timings`` (if given) gets each step's seconds added.
    """
    timings = timings if timings is not None else {}
    started = time.perf_counter()
    notes = corpus_notes(corpus, quick=quick)
    known = corpus_notes(corpus) if quick and corpus == "docstrings" else notes
    settings = Settings(
        vault=root, timezone="UTC", search=search or SearchSettings(), storage=backends.storage()
    )
    runtime = Runtime.open(settings, clock=Clock(UTC), embedder=embedder, create=True)
    for path, text in notes.items():
        file = root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")
    runtime.index.sync()
    timings["ingest"] = timings.get("ingest", 0.0) + time.perf_counter() - started
    started = time.perf_counter()
    counts = QUICK_COUNTS if quick else COUNTS
    queries = generated_queries(runtime, notes, counts, seed, surface=corpus in SURFACE)
    queries += hand_written(corpus, notes, known=known)
    timings["queries"] = timings.get("queries", 0.0) + time.perf_counter() - started
    started = time.perf_counter()
    runtime.index.embed_pending()
    timings["embed"] = timings.get("embed", 0.0) + time.perf_counter() - started
    return runtime, queries


def _ranked_notes(paths: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(paths))


def evaluate(
    runtime: Runtime, queries: Sequence[Query], modes: Sequence[str] = MODES, *, limit: int = LIMIT
) -> dict[str, Any]:
    """Metrics per class and mode, and every query's outcome (``rows``)."""
    rows: list[dict[str, Any]] = []
    seconds: dict[str, float] = defaultdict(float)
    for query in queries:
        row: dict[str, Any] = {**asdict(query), "rank": {}, "hits": {}, "first": {}}
        for mode in modes:
            started = time.perf_counter()
            # The inputs are measured as retrievers (no floor); hybrid as a person gets it.
            floor = None if mode == "hybrid" else 0.0
            results = runtime.searcher.search(query.text, limit=limit, mode=mode, min_score=floor)
            seconds[mode] += time.perf_counter() - started
            if results.mode != mode:
                raise RuntimeError(
                    f"asked for {mode} search, got {results.mode}: {results.notice or 'no reason'}"
                )
            ranked = _ranked_notes(hit.path for hit in results)
            position = ranked.index(query.target) + 1 if query.target in ranked else None
            row["rank"][mode] = position
            row["hits"][mode] = len(results)
            row["first"][mode] = ranked[0] if ranked else None
        rows.append(row)
    return {
        "classes": summarize(rows, modes),
        "seconds_per_query": {m: round(seconds[m] / max(len(queries), 1), 4) for m in modes},
        "rows": rows,
    }


def summarize(rows: Sequence[Mapping[str, Any]], modes: Sequence[str]) -> dict[str, Any]:
    """Per class and mode: top-1, top-5, MRR, found and n (absent: empty, mean hits and n)."""
    out: dict[str, Any] = {}
    kinds = [k for k in (*ANSWERABLE, "absent") if any(r["kind"] == k for r in rows)]
    for kind in kinds:
        group = [r for r in rows if r["kind"] == kind]
        n = len(group)
        out[kind] = {}
        for mode in modes:
            if kind == "absent":
                out[kind][mode] = {
                    "empty": sum(r["hits"][mode] == 0 for r in group) / n,
                    "mean_hits": sum(min(r["hits"][mode], SHOWN) for r in group) / n,
                    "n": n,
                }
                continue
            ranks = [r["rank"][mode] for r in group]
            out[kind][mode] = {
                "top1": sum(r == 1 for r in ranks) / n,
                "top5": sum(r is not None and r <= 5 for r in ranks) / n,
                "mrr": sum(1 / r for r in ranks if r is not None and r <= MRR_DEPTH) / n,
                "found": sum(r is not None for r in ranks) / n,
                "n": n,
            }
    return out


def verdicts(classes: Mapping[str, Any]) -> list[tuple[str, bool, str]]:
    """(class, passed, one line) for each answerable class the metrics hold."""
    out = []
    for kind in ANSWERABLE:
        modes = classes.get(kind)
        if not modes or "hybrid" not in modes:
            continue
        parts = []
        passed = True
        others = [m for m in ("keyword", "vector") if m in modes]
        for metric, label in (("top1", "top-1"), ("mrr", "MRR")):
            hybrid = modes["hybrid"][metric]
            if others:
                best = max(others, key=lambda m: modes[m][metric])
                ok = hybrid >= modes[best][metric] - 1e-9
                passed &= ok
                sign = ">=" if ok else "<"
                parts.append(
                    f"{label} {hybrid:.2f} {sign} {best} {modes[best][metric]:.2f}"
                    f" {'pass' if ok else 'FAIL'}"
                )
        if kind in FIRST_BAR:
            ok = modes["hybrid"]["top1"] >= FIRST_BAR[kind]
            passed &= ok
            parts.append(f"top-1 >= {FIRST_BAR[kind]} {'pass' if ok else 'FAIL'}")
        out.append((kind, passed, f"{kind}: " + "; ".join(parts)))
    return out


# -- running and reporting -------------------------------------------------------------


def run(
    corpora: Sequence[str] | None = None,
    *,
    quick: bool = False,
    cache: Path | None = None,
    quiet: bool = False,
    seed: int = SEED,
) -> dict[str, Any]:
    """Build and evaluate each corpus; one result dict (``render`` makes it Markdown)."""
    corpora = list(corpora or CORPORA)
    started = time.perf_counter()
    local = LocalEmbedder()
    embedder: Embedder = CachedEmbedder(local, cache) if cache else local
    result: dict[str, Any] = {"corpora": {}}
    for name in corpora:
        timings: dict[str, float] = {}
        with tempfile.TemporaryDirectory(prefix=f"knownitem-{name}-") as tmp:
            runtime, queries = build(
                name, Path(tmp), embedder, quick=quick, seed=seed, timings=timings
            )
            notes, chunks = _size(runtime, FOLDERS[name])
            begun = time.perf_counter()
            metrics = evaluate(runtime, queries)
            timings["search"] = time.perf_counter() - begun
            runtime.close()
        metrics.update(
            notes=notes,
            chunks=chunks,
            queries=dict(Counter(q.kind for q in queries)),
            seconds={k: round(v, 1) for k, v in timings.items()},
        )
        result["corpora"][name] = metrics
        if not quiet:
            print(
                f"  {name}: {notes} notes, {chunks} chunks, {len(queries)} queries, "
                f"{sum(timings.values()):.0f} s",
                file=sys.stderr,
            )
    result["_meta"] = {
        "quick": quick,
        "seed": seed,
        "cache": str(cache) if cache else None,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if isinstance(embedder, CachedEmbedder):
        result["_meta"]["cache_hits"] = embedder.hits
        result["_meta"]["cache_misses"] = embedder.misses
        embedder.close()
    return result


def _size(runtime: Runtime, folder: str) -> tuple[int, int]:
    """Notes and chunks of the corpus (the layout's own notes not counted)."""
    row = runtime.index.conn.execute(
        "SELECT count(DISTINCT n.id), count(c.id) FROM notes n JOIN chunks c ON c.note_id = n.id"
        " WHERE n.path LIKE ?",
        (folder + "/%",),
    ).fetchone()
    return int(row[0]), int(row[1])


def _cell(metrics: Mapping[str, float]) -> str:
    if "empty" in metrics:
        return f"empty {metrics['empty']:.2f} · {metrics['mean_hits']:.1f} hits"
    return f"{metrics['top1']:.2f} · {metrics['top5']:.2f} · {metrics['mrr']:.2f}"


def render_corpus(name: str, metrics: Mapping[str, Any]) -> str:
    """One corpus: a table (rows: classes; columns: modes) and a verdict per class."""
    classes = metrics["classes"]
    modes = [m for m in MODES if any(m in c for c in classes.values())]
    head = f"**{name}**"
    if "notes" in metrics:
        head += f": {metrics['notes']:,} notes, {metrics['chunks']:,} chunks"
    lines = [
        head,
        "",
        "| class | n | " + " | ".join(modes) + " | found " + " / ".join(m[0] for m in modes) + " |",
        "|---|---:|" + "---|" * len(modes) + "---|",
    ]
    for kind, by_mode in classes.items():
        n = next(iter(by_mode.values()))["n"]
        found = " / ".join(f"{by_mode[m]['found']:.2f}" for m in modes) if kind != "absent" else ""
        lines.append(
            f"| {kind} | {n} | " + " | ".join(_cell(by_mode[m]) for m in modes) + f" | {found} |"
        )
    lines.append("")
    for _, _, line in verdicts(classes):
        lines.append(f"- {line}")
    return "\n".join(lines)


def render(result: Mapping[str, Any]) -> str:
    """Every corpus, then one line: does fused search meet the bar everywhere?"""
    parts = [
        "Cells: top-1 · top-5 · MRR@20 (absent: share with no result · mean hits of the first "
        f"{SHOWN}); found: the right note among the {LIMIT} chunks returned. Bar: hybrid >= "
        "max(keyword, vector) on top-1 and MRR for every class; top-1 >= "
        + ", ".join(f"{v} for {k}" for k, v in FIRST_BAR.items())
        + ".",
        "",
    ]
    behind = []
    for name, metrics in result["corpora"].items():
        parts.append(render_corpus(name, metrics))
        parts.append("")
        behind += [f"{name}/{kind}" for kind, ok, _ in verdicts(metrics["classes"]) if not ok]
    # The bar is judged on every corpus's queries of a class together: a class holds 17 to
    # 100 queries per corpus, and one query moves a small one by 0.06.
    rows = [row for m in result["corpora"].values() for row in m["rows"]]
    pooled = {"classes": summarize(rows, MODES)}
    if len(result["corpora"]) > 1:
        parts.append(render_corpus("all corpora together", pooled))
        parts.append("")
    failed = [kind for kind, ok, _ in verdicts(pooled["classes"]) if not ok]
    meta = result["_meta"]
    timing = ", ".join(
        f"{name} {sum(m['seconds'].values()):.0f} s" for name, m in result["corpora"].items()
    )
    parts.append(
        f"{'Quick run' if meta['quick'] else 'Full run'}: {meta['seconds']:.0f} s ({timing})"
        + (f"; embedding cache {meta['cache']}" if meta.get("cache") else "")
        + "."
    )
    parts.append("Bar met on every class." if not failed else f"Bar not met: {', '.join(failed)}.")
    if behind:
        parts.append(f"Below the bar within one corpus: {', '.join(behind)}.")
    return "\n".join(parts)


def misses(result: Mapping[str, Any], per_class: int = 5) -> str:
    """Queries hybrid search got wrong (the right note not first), with the other modes' ranks."""
    lines = []
    for name, metrics in result["corpora"].items():
        for kind in ANSWERABLE:
            wrong = [r for r in metrics["rows"] if r["kind"] == kind and r["rank"]["hybrid"] != 1]
            if not wrong:
                continue
            lines.append(f"{name}/{kind}: {len(wrong)} misses")
            for r in wrong[:per_class]:
                ranks = ", ".join(f"{m} {r['rank'][m] or '-'}" for m in r["rank"])
                lines.append(f"  {r['text']!r} -> {r['target']} ({ranks})")
                lines.append(f"      hybrid first: {r['first']['hybrid']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer queries, fewer docstrings")
    parser.add_argument("--corpus", action="append", choices=CORPORA, help="only this corpus")
    parser.add_argument(
        "--cache",
        type=Path,
        nargs="?",
        const=DEFAULT_CACHE,
        help=f"keep vectors on disk between runs (default folder {DEFAULT_CACHE})",
    )
    parser.add_argument("--misses", type=int, default=0, metavar="N", help="show N misses a class")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = run(args.corpus, quick=args.quick, cache=args.cache, quiet=args.json)
    if args.json:
        print(json.dumps(result))
        return 0
    print(render(result))
    if args.misses:
        print()
        print(misses(result, args.misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
