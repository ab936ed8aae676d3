from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from textwrap import dedent

import pytest

from memvault.config import IndexSettings
from memvault.index.index import MemoryIndex
from memvault.runtime import Runtime
from support import HashEmbedder

pytestmark = pytest.mark.both_backends


def _count(index: MemoryIndex, table: str) -> int:
    return int(index.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _paths(index: MemoryIndex) -> set[str]:
    return {str(r[0]) for r in index.conn.execute("SELECT path FROM notes")}


def _keyword(runtime: Runtime, query: str) -> list[str]:
    return [h.path for h in runtime.searcher.search(query, mode="keyword")]


NOTE = dedent(
    """\
    ---
    tags: [project]
    aliases: [Moonshot]
    ---
    # Apollo

    The Apollo program landed on the moon. See [[Gemini]] and ![[diagram.png]].

    ## Crew
    Armstrong, Aldrin and Collins flew Apollo 11.
    """
)


def test_first_sync_indexes_every_note(runtime: Runtime, write: Callable[[str, str], Path]) -> None:
    write("Projects/Apollo.md", NOTE)
    report = runtime.index.sync()
    assert "Projects/Apollo.md" in report.added
    assert "Templates/task.md" not in _paths(runtime.index)  # Templates are not indexed
    row = runtime.index.conn.execute(
        "SELECT title, kind, tags, aliases FROM notes WHERE path = 'Projects/Apollo.md'"
    ).fetchone()
    assert (row["title"], row["kind"]) == ("Apollo", "project")
    assert '"project"' in row["tags"] and "Moonshot" in row["aliases"]
    assert _keyword(runtime, "Armstrong") == ["Projects/Apollo.md"]
    links = runtime.index.conn.execute(
        "SELECT l.target, l.kind FROM links l JOIN notes n ON n.id = l.note_id WHERE n.path = ?",
        ("Projects/Apollo.md",),
    ).fetchall()
    assert {(r["target"], r["kind"]) for r in links} == {
        ("Gemini", "wikilink"),
        ("diagram.png", "embed"),
    }


def test_noop_sync_reads_no_file(runtime: Runtime, write: Callable[[str, str], Path]) -> None:
    write("Projects/Apollo.md", NOTE)
    runtime.index.sync()
    report = runtime.index.sync()
    assert report.touched == 0 and report.unchanged == len(_paths(runtime.index))


def test_an_edit_whose_mtime_was_put_back_is_seen(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    """Same size, mtime put back (rsync -t, sync tools): the inode's ctime still moved."""
    target = write("Projects/Apollo.md", NOTE)
    runtime.index.sync()
    stat = target.stat()
    target.write_text(NOTE.replace("Armstrong", "Armstrunk"))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert target.stat().st_size == stat.st_size and target.stat().st_mtime_ns == stat.st_mtime_ns
    report = runtime.index.sync()
    assert report.changed == ["Projects/Apollo.md"]
    assert _keyword(runtime, "Armstrunk") == ["Projects/Apollo.md"]
    assert _keyword(runtime, "Armstrong") == []


def test_an_index_from_before_ctimes_looks_at_each_file_once(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    """Rows an older memvault wrote have no ctime: one sync hashes them, the next reads none."""
    write("Projects/Apollo.md", NOTE)
    runtime.index.sync()
    runtime.index.conn.execute("UPDATE notes SET ctime_ns = 0")
    first = runtime.index.sync()
    assert first.touched == 0 and first.unchanged == len(_paths(runtime.index))
    assert runtime.index.conn.execute("SELECT min(ctime_ns) FROM notes").fetchone()[0] > 0
    assert runtime.index.sync().unchanged == len(_paths(runtime.index))


def test_edit_is_reindexed_and_unchanged_chunks_keep_their_vectors(
    runtime: Runtime, write: Callable[[str, str], Path], embedder: HashEmbedder
) -> None:
    runtime.index.settings = IndexSettings(chunk_tokens=50, overlap_tokens=0)
    padding = "It was a long programme with many people involved in it. " * 3  # ~170 characters
    sections = [f"## Part {n}\n{padding}\n" for n in range(3)]
    target = write(
        "Projects/Apollo.md", NOTE + "\n".join(sections) + "\n## Later\nSkylab came next.\n"
    )
    runtime.index.sync()
    runtime.index.embed_pending()
    before = {
        str(r["hash"]): int(r["id"])
        for r in runtime.index.conn.execute(
            "SELECT c.id, c.hash FROM chunks c JOIN notes n ON n.id = c.note_id WHERE n.path = ?",
            ("Projects/Apollo.md",),
        )
    }
    target.write_text(target.read_text().replace("Skylab came next.", "Skylab came next, in 1973."))
    report = runtime.index.sync()
    assert report.changed == ["Projects/Apollo.md"]
    assert _keyword(runtime, "1973") == ["Projects/Apollo.md"]
    after = runtime.index.conn.execute(
        "SELECT c.id, c.hash, c.embedded FROM chunks c JOIN notes n ON n.id = c.note_id"
        " WHERE n.path = ?",
        ("Projects/Apollo.md",),
    ).fetchall()
    kept = [r for r in after if str(r["hash"]) in before]
    assert kept and all(int(r["id"]) == before[str(r["hash"])] and r["embedded"] == 1 for r in kept)
    assert runtime.index.pending() == len(after) - len(kept)


def test_move_keeps_chunks_and_vectors(runtime: Runtime, write: Callable[[str, str], Path]) -> None:
    write("Projects/Apollo.md", NOTE)
    write("Index.md", "Read [[Apollo]].\n")
    runtime.index.sync()
    runtime.index.embed_pending()
    ids = {int(r[0]) for r in runtime.index.conn.execute("SELECT id FROM chunks")}
    vectors = runtime.index.vectors.count()
    os.rename(
        runtime.vault.root / "Projects/Apollo.md", runtime.vault.root / "Projects/Saturn V.md"
    )
    report = runtime.index.sync()
    assert report.moved == [("Projects/Apollo.md", "Projects/Saturn V.md")]
    assert report.added == [] and report.deleted == []
    assert {int(r[0]) for r in runtime.index.conn.execute("SELECT id FROM chunks")} == ids
    assert runtime.index.vectors.count() == vectors and runtime.index.pending() == 0
    assert _keyword(runtime, "Armstrong") == ["Projects/Saturn V.md"]
    # The link "[[Apollo]]" no longer resolves; re-resolution noticed.
    resolved = runtime.index.conn.execute(
        "SELECT resolved FROM links WHERE target = 'Apollo'"
    ).fetchone()
    assert resolved["resolved"] is None


def test_delete_removes_every_trace(runtime: Runtime, write: Callable[[str, str], Path]) -> None:
    write("Projects/Apollo.md", NOTE)
    runtime.index.sync()
    runtime.index.embed_pending()
    counts = {t: _count(runtime.index, t) for t in ("chunks", "chunks_fts", "links", "chunk_tags")}
    vectors = runtime.index.vectors.count()
    (runtime.vault.root / "Projects/Apollo.md").unlink()
    report = runtime.index.sync()
    assert report.deleted == ["Projects/Apollo.md"]
    assert "Projects/Apollo.md" not in _paths(runtime.index)
    assert all(_count(runtime.index, t) < counts[t] for t in counts)
    assert runtime.index.vectors.count() < vectors
    assert _keyword(runtime, "Armstrong") == []


def test_writes_through_memvault_update_the_index_at_once(runtime: Runtime) -> None:
    memory = runtime.memories.remember("The wifi password is on the fridge").memory
    assert runtime.index.pending() == 1  # the vector is deferred, never computed on write
    hits = runtime.searcher.search("wifi password", mode="keyword")
    assert [h.id for h in hits] == [memory.id]
    runtime.notes.write("Ideas/Rocket.md", "# Rocket\nA reusable booster.\n")
    assert _keyword(runtime, "booster") == ["Ideas/Rocket.md"]
    runtime.notes.move("Ideas/Rocket", "Ideas/Falcon")
    assert _keyword(runtime, "booster") == ["Ideas/Falcon.md"]
    runtime.notes.delete("Ideas/Falcon")
    assert _keyword(runtime, "booster") == []
    runtime.memories.forget(memory.id)
    assert runtime.searcher.search("wifi password", mode="keyword") == []


def test_appended_memories_refresh_their_neighbours_context(runtime: Runtime) -> None:
    first = runtime.memories.remember("Ada: the picnic was lovely", source="chat:1").memory
    second = runtime.memories.remember("Grace: what games did you play?", source="chat:1").memory
    third = runtime.memories.remember("Ada: charades and a scavenger hunt", source="chat:1").memory
    other = runtime.memories.remember("Unrelated note from the CLI", source="cli").memory

    def context(memory_id: str) -> str:
        row = runtime.index.conn.execute(
            "SELECT context FROM chunks WHERE memory_id = ?", (memory_id,)
        ).fetchone()
        return str(row["context"])

    assert "charades" in context(first.id)  # the window reaches two memories ahead
    assert "picnic" in context(third.id)
    assert "Unrelated" not in context(second.id)  # another source is not a neighbour
    assert context(other.id) == ""
    # The appended-tail path and a full re-index agree.
    tail = {
        r["memory_id"]: (r["context"], r["hash"])
        for r in runtime.index.conn.execute(
            "SELECT memory_id, context, hash FROM chunks WHERE memory_id IS NOT NULL"
        )
    }
    runtime.index.rebuild()
    full = {
        r["memory_id"]: (r["context"], r["hash"])
        for r in runtime.index.conn.execute(
            "SELECT memory_id, context, hash FROM chunks WHERE memory_id IS NOT NULL"
        )
    }
    assert tail == full


def test_the_watcher_seeing_memvaults_own_append_costs_no_reindex(runtime: Runtime) -> None:
    runtime.index.sync()
    runtime.memories.remember("First of the file", source="cli")
    memory = runtime.memories.remember("Appended by the fast path", source="cli").memory
    # What a file watcher reports after that append: the file is current already.
    report = runtime.index.sync_paths([memory.path])
    assert report.touched == 0 and report.unchanged == 1
    assert runtime.index.sync().touched == 0


def test_hand_edited_memory_file_is_reindexed(runtime: Runtime) -> None:
    memory = runtime.memories.remember("Coffee, black").memory
    path = runtime.vault.root / memory.path
    path.write_text(path.read_text().replace("Coffee, black", "Coffee with oat milk"))
    runtime.index.sync()
    assert [h.id for h in runtime.searcher.search("oat milk", mode="keyword")] == [memory.id]
    assert runtime.searcher.search("black", mode="keyword") == []


def test_index_can_be_deleted_and_rebuilt_with_nothing_lost(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    write("Projects/Apollo.md", NOTE)
    runtime.memories.remember("Prefers tea", category="preference", tags=["drinks"])
    runtime.tasks.create("Launch", "Count down from ten", priority="high")
    runtime.index.sync()
    runtime.index.embed_pending()

    def snapshot() -> tuple[object, ...]:
        index = runtime.index
        return (
            sorted(_paths(index)),
            _count(index, "chunks"),
            _count(index, "memories"),
            _count(index, "links"),
            [
                (h.path, h.id, h.start_line)
                for h in runtime.searcher.search("tea launch moon", limit=5)
            ],
        )

    before = snapshot()
    runtime.index.close()
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        (runtime.vault.state_dir / name).unlink(missing_ok=True)
    runtime.index.sync()
    runtime.index.embed_pending()
    assert snapshot() == before


def test_embedder_switch_is_detected_and_explained(
    vault_path: Path, write: Callable[[str, str], Path], runtime: Runtime
) -> None:
    runtime.memories.remember("Prefers tea over coffee")
    runtime.index.embed_pending()
    assert runtime.index.built_with() == "test:hash-64"
    runtime.close()
    from memvault.config import Settings
    from memvault.index.index import IndexMismatchError

    switched = Runtime.open(
        Settings(vault=vault_path, storage=runtime.settings.storage),
        embedder=HashEmbedder(model="hash-32", dim=32),
    )
    problem = switched.index.mismatch()
    assert problem is not None
    assert (
        "test:hash-64" in problem
        and "test:hash-32" in problem
        and "memvault index --reembed" in problem
    )
    assert not switched.index.semantic
    assert [h.snippet for h in switched.searcher.search("tea")] == ["Prefers tea over coffee"]
    switched.memories.remember("Likes quiet mornings")
    with pytest.raises(IndexMismatchError):
        switched.index.embed_pending()
    assert switched.index.reembed() == switched.index.status().chunks
    assert switched.index.mismatch() is None and switched.index.vectors.dimension() == 32
    assert switched.index.semantic
    switched.close()


def test_unreadable_notes_are_skipped_not_fatal(runtime: Runtime) -> None:
    (runtime.vault.root / "Old.md").write_bytes("caf\xe9".encode("latin-1"))
    report = runtime.index.sync()
    assert report.skipped == ["Old.md"]
    assert "Old.md" not in _paths(runtime.index)


def test_links_follow_notes_appearing_moving_and_gaining_aliases(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    def resolved(target: str) -> str | None:
        row = runtime.index.conn.execute(
            "SELECT resolved FROM links WHERE target = ?", (target,)
        ).fetchone()
        return None if row["resolved"] is None else str(row["resolved"])

    write("Index.md", "See [[Zeus]], [[Thunder]] and [[Mars]].\n")
    write("Gods/Mars.md", "# Mars\n")
    runtime.index.sync()
    assert (resolved("Zeus"), resolved("Mars")) == (None, "Gods/Mars.md")
    runtime.notes.write("Gods/Zeus.md", "# Zeus\n")  # appears: the dangling link resolves
    assert resolved("Zeus") == "Gods/Zeus.md"
    runtime.notes.write("Gods/Zeus.md", "---\naliases: [Thunder]\n---\n# Zeus\n")
    assert resolved("Thunder") == "Gods/Zeus.md"  # a new alias resolves links by that name
    os_path = runtime.vault.root
    (os_path / "Gods/Mars.md").rename(os_path / "Gods/Ares.md")
    runtime.index.sync()
    assert resolved("Mars") is None
    write("Mars.md", "# Another Mars\n")
    runtime.index.sync()
    assert resolved("Mars") == "Mars.md"
