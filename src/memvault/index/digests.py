"""Digests and insights in a search: a digest stands for its sources.

A digest is an insight the distill job wrote without a model: a title from its sources'
shared words and the sources embedded, no words of its own. It takes no candidate's
slot (``_besides_digests``); its sources join the candidates on their own evidence
(``_digests``) and take its place when they can be shown (``_digests_give_way``). An
insight with words of its own comes after a source of it shown above it
(``_summaries_last``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memvault.index.candidates import Candidate, CandidateSearch, Pool
from memvault.index.chunking import is_digest


class DigestSearch(CandidateSearch):
    """A search's candidates, with digests giving way to their sources."""

    def _summaries_last(self, ranked: list[Candidate], limit: int) -> list[Candidate]:
        """The first ``limit`` of ``ranked``, where an insight drawn from a memory ranked
        above it gives its place to the next result and comes after them.

        An insight restates its sources: once one of them is in the results, the next
        result adds more than the summary does (it still shows when there is room).
        """
        chosen: list[Candidate] = []
        later: list[Candidate] = []
        shown: set[str] = set()
        for c in ranked:
            if len(chosen) >= limit:
                break
            if (
                c.row["kind"] == "insight"
                and shown
                and shown & self._sources_of(int(c.row["note_id"]))
            ):
                later.append(c)
                continue
            chosen.append(c)
            if c.row["memory_id"]:
                shown.add(str(c.row["memory_id"]))
        return (chosen + later)[:limit]

    def _digests(self, candidates: dict[int, Candidate], pool: Pool) -> dict[int, set[int]]:
        """The candidates that are digests (insight notes with ``digest: true``: the distill
        job wrote them without a model, a title from their sources' shared words and the
        sources embedded), each with its sources' chunks, which join the candidates."""
        digest_notes = {int(c.row["note_id"]) for c in candidates.values() if c.digest}
        if not digest_notes:
            return {}
        marks = ",".join("?" * len(digest_notes))
        sources: dict[int, set[int]] = {}
        for r in self.conn.execute(
            "SELECT l.note_id, m.chunk_id FROM links l"
            " JOIN memories m ON m.id = substr(l.subpath, 2)"
            f" WHERE l.note_id IN ({marks}) AND l.subpath LIKE '^m-%'"
            " AND m.chunk_id IS NOT NULL",
            list(digest_notes),
        ):
            sources.setdefault(int(r[0]), set()).add(int(r[1]))
        digests = {
            chunk_id: sources.get(int(c.row["note_id"]), set())
            for chunk_id, c in candidates.items()
            if int(c.row["note_id"]) in digest_notes
        }
        wanted = set().union(*digests.values()) - candidates.keys()
        self._admit(candidates, sorted(wanted), pool)
        return digests

    @staticmethod
    def _digests_give_way(candidates: dict[int, Candidate], digests: dict[int, set[int]]) -> None:
        """Each digest whose sources can be shown leaves them its place.

        A digest has no words of its own (a title from its sources' shared words, their
        embeds): what it matches, its sources match, and they are the answer, each on its
        own evidence. Its score is not passed on: it is the container's (its title, the
        vector of its links, the recency of a note written today), not a source's. A
        digest none of whose sources can be shown (a filter leaves memories out) stays.
        """
        for chunk_id, sources in digests.items():
            if any(s in candidates for s in sources):
                del candidates[chunk_id]

    def _sources_of(self, note_id: int) -> set[str]:
        """The memory ids a note links by block reference."""
        return {
            str(r[0])[1:]
            for r in self.conn.execute(
                "SELECT subpath FROM links WHERE note_id = ? AND subpath LIKE '^m-%'", (note_id,)
            )
        }

    def _besides_digests(
        self, nearest: Callable[[int], list[tuple[int, float]]], n: int
    ) -> list[tuple[int, float]]:
        """The first of ``nearest(m)`` (``(chunk id, cosine)``, best first) up to ``n`` that
        are not digests, and the digests among them.

        A digest stands for its sources (see ``_digests``): it must not take a candidate's
        slot, or distilling would cost a search the memories it would have found.
        """
        want = n
        while True:
            got = nearest(want)
            digests = self._digest_ids([item[0] for item in got])
            if len(got) - len(digests) >= n or len(got) < want:
                break
            want = n + len(digests)
        kept: list[tuple[int, float]] = []
        others = 0
        for item in got:
            if others >= n:
                break
            kept.append(item)
            others += item[0] not in digests
        return kept

    def _digest_ids(self, ids: Sequence[int]) -> set[int]:
        """Which of the chunks ``ids`` belong to digests."""
        rows = self._by_ids(
            "SELECT c.id, c.kind, n.frontmatter FROM chunks c JOIN notes n ON n.id = c.note_id"
            " WHERE c.kind = 'insight' AND c.id IN ({ids})",
            ids,
        )
        return {int(r[0]) for r in rows if is_digest(str(r[1]), r[2])}
