"""The index's vectors: computed after the write, in batches, so a write never waits
for a model.

Keyword rows are written at once; :meth:`Embeddings.embed_pending` then computes the
vectors of the chunks still waiting for one (the lock released while the model works),
``reembed`` replaces every vector with the configured embedder's, and ``embed_query``
gives a search its query's vector or says why there is none (no embedder, vectors of
another embedder, a model still loading). The embedder the vectors were made with is
recorded: another one's vectors are never mixed in (:class:`IndexMismatchError`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from memvault.errors import InvalidInputError, MemvaultError
from memvault.index.chunking import MEMORY_EMBED, is_digest
from memvault.index.connection import IndexConnection, Progress, locked
from memvault.index.db import Connection
from memvault.index.embedders import EmbeddingError, normalize_rows
from memvault.sqlite import get_meta, set_meta, transaction

log = logging.getLogger(__name__)

MODEL_LOADING = (
    "The embedding model is still loading; these results come from keywords only "
    "(search again in a moment for meaning too)."
)


class IndexMismatchError(MemvaultError):
    """The index's vectors were made by another embedder than the configured one."""

    code = "embedder_changed"
    exit_code = 6
    http_status = 409


K = TypeVar("K")


def show_embeds(conn: Connection, texts: Mapping[K, str]) -> dict[K, str]:
    """``texts`` with each embedded memory (``![[Memory/Facts#^m-1]]``: an entity's
    mentions, an insight's evidence) shown as Obsidian shows it, by its text."""
    wanted = {m.group(1) for text in texts.values() for m in MEMORY_EMBED.finditer(text)}
    if not wanted:
        return dict(texts)
    said = {
        str(r[0]): " ".join(str(r[1]).split())
        for r in conn.execute(
            f"SELECT id, text FROM memories WHERE id IN ({','.join('?' * len(wanted))})",
            sorted(wanted),
        )
    }
    return {
        key: MEMORY_EMBED.sub(lambda m: said.get(m.group(1), m.group(0)), text)
        for key, text in texts.items()
    }


class Embeddings(IndexConnection):
    """The vectors of the index's chunks, and of queries, from the configured embedder."""

    _warm_lock: threading.Lock
    _warming: threading.Thread | None
    _last_query: tuple[str, np.ndarray[Any, np.dtype[np.float32]]] | None

    # -- embedder bookkeeping --------------------------------------------------------

    @locked
    def built_with(self) -> str | None:
        """The embedder identity the stored vectors were made with."""
        return get_meta(self.conn, "embedder")

    @locked
    def mismatch(self) -> str | None:
        """A sentence explaining a change of embedder, or None when vectors are usable."""
        if not self.embedder.enabled:
            return None
        built = self.built_with()
        if built is None or built == self.embedder.identity:
            return None
        return (
            f"The index's vectors were made with {built}, but the configured embedder is "
            f"{self.embedder.identity}; run `memvault index --reembed` to re-embed "
            "(keyword search works meanwhile)."
        )

    @property
    def semantic(self) -> bool:
        """Whether vector search can be used now."""
        with self.lock:
            return self.embedder.enabled and self.mismatch() is None and self.vectors.exists()

    # -- embeddings ------------------------------------------------------------------

    @locked
    def pending(self) -> int:
        """How many chunks wait for a vector."""
        return int(
            self.conn.execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchone()[0]
        )

    def embed_pending(
        self, *, limit: int | None = None, batch: int = 128, progress: Progress | None = None
    ) -> int:
        """Compute vectors for chunks that have none; returns how many were stored.

        The lock is released while the model works, so searches are not held up.
        """
        if not self.embedder.enabled:
            return 0
        with self.lock:
            problem = self.mismatch()
            if problem:
                raise IndexMismatchError(problem)
            waiting = self.pending()
        total = waiting if limit is None else min(limit, waiting)
        done = 0
        while done < total:
            with self.lock:
                rows = self.conn.execute(
                    "SELECT c.id, c.text, c.context, c.hash, c.kind,"
                    " CASE WHEN c.kind = 'insight' THEN n.frontmatter END AS frontmatter"
                    " FROM chunks c JOIN notes n ON n.id = c.note_id WHERE c.embedded = 0"
                    " ORDER BY c.id LIMIT ?",
                    (min(batch, total - done),),
                ).fetchall()
                if not rows:
                    break
                texts = self._embeddable(rows)
            vectors = self._embed_rows(texts)
            with self.lock:
                self._store_vectors(rows, vectors)
            done += len(rows)
            if progress is not None:
                progress(done, total, "embedding")
        return done

    def _store_vectors(self, rows: Sequence[Any], vectors: np.ndarray[Any, Any]) -> None:
        """Keep the vectors of chunks whose content did not change while they were computed."""
        with transaction(self.conn):
            if not self.vectors.exists():
                self.vectors.create(vectors.shape[1])
                set_meta(self.conn, "embedder", self.embedder.identity)
            current = {
                int(r["id"]): str(r["hash"])
                for r in self.conn.execute(
                    f"SELECT id, hash FROM chunks WHERE id IN ({','.join('?' * len(rows))})",
                    [int(r["id"]) for r in rows],
                )
            }
            keep = [i for i, r in enumerate(rows) if current.get(int(r["id"])) == str(r["hash"])]
            ids = [int(rows[i]["id"]) for i in keep]
            self.vectors.put(ids, vectors[keep])
            self.conn.executemany(
                "UPDATE chunks SET embedded = 1 WHERE id = ?", [(i,) for i in ids]
            )

    def _embeddable(self, rows: Sequence[Any]) -> list[tuple[str, str]]:
        """Each chunk's text and context as its vector should mean them.

        A digest (see ``is_digest``) is its text with its embedded memories shown by their
        text, as Obsidian shows them, and no context: it means what its sources say, not
        its links' or its fields' ids, hashes and dates.
        """
        texts = [(str(r["text"]), str(r["context"] or "")) for r in rows]
        digests = {
            i: texts[i][0]
            for i, r in enumerate(rows)
            if is_digest(str(r["kind"]), r["frontmatter"])
        }
        for i, shown in show_embeds(self.conn, digests).items():
            texts[i] = (shown, "")
        return texts

    def _embed_rows(
        self, texts: Sequence[tuple[str, str]]
    ) -> np.ndarray[Any, np.dtype[np.float32]]:
        """One vector per chunk: its text, plus its context when it has one."""
        own = self.embedder.embed([text for text, _ in texts])
        with_context = [i for i, (_, context) in enumerate(texts) if context]
        if with_context:
            context = self.embedder.embed([texts[i][1] for i in with_context])
            own = own.copy()
            own[with_context] = own[with_context] + context
        return normalize_rows(own)

    def reembed(self, progress: Progress | None = None) -> int:
        """Replace every vector with one from the configured embedder.

        The embedder is tried first: if it cannot answer, the old vectors stay.
        """
        if not self.embedder.enabled:
            raise InvalidInputError("No embedder is configured (embedder.provider = 'none').")
        self.embedder.embed(["memvault checks the embedder before re-embedding"])
        with self.lock, transaction(self.conn):
            self.vectors.drop()
            self.conn.execute("DELETE FROM meta WHERE key = 'embedder'")
            self.conn.execute("UPDATE chunks SET embedded = 0")
        return self.embed_pending(progress=progress)

    def embed_query(
        self, text: str, *, wait: bool = True
    ) -> tuple[np.ndarray[Any, np.dtype[np.float32]] | None, str | None]:
        """The query's vector, or None and why vector search cannot be used now.

        With ``wait=False`` a model that is not loaded yet is not waited for:
        it starts loading in the background and the search goes on with
        keywords (a long-running process answers at once, and fully later).
        The reason is None when there is nothing to explain (no embedder is
        configured, or nothing is embedded yet).
        """
        if not self.embedder.enabled:
            return None, None
        problem = self.mismatch()
        if problem is not None:
            return None, f"Keyword search only: {problem}"
        if not self.vectors.exists():  # nothing embedded yet (what ``semantic`` adds)
            return None, None
        if not wait and not self.embedder.loaded:
            self.warm_in_background()
            return None, MODEL_LOADING
        last = self._last_query
        if last is not None and last[0] == text:
            return last[1].copy(), None
        try:
            vector: np.ndarray[Any, np.dtype[np.float32]] = self.embedder.embed_query([text])[0]
            self._last_query = (text, vector.copy())
            return vector, None
        except EmbeddingError as exc:
            log.warning("query embedding failed; keyword search only", extra={"error": str(exc)})
            return None, f"Keyword search only: the embedder failed ({exc.message})"

    def warm_in_background(self) -> None:
        """Start loading the embedding model in a thread of its own (once)."""
        with self._warm_lock:
            if self._warming is not None or self.embedder.loaded:
                return
            self._warming = threading.Thread(
                target=self._warm, name="memvault-model-load", daemon=True
            )
            self._warming.start()

    def _warm(self) -> None:
        try:
            self.embedder.warm()
        except MemvaultError as exc:
            log.warning("the embedding model could not be loaded", extra={"error": exc.message})
        finally:
            with self._warm_lock:
                self._warming = None
