"""A PostgreSQL server that drops memvault's connections: one request fails with a
sentence, the next works on a new connection."""

from __future__ import annotations

import pytest

from memvault.errors import StorageError
from memvault.runtime import Runtime


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_the_index_reconnects_after_the_server_dropped_its_connection(runtime: Runtime) -> None:
    runtime.memories.remember("The quokka passport is in the blue drawer")
    assert [h.snippet for h in runtime.searcher.search("quokka", mode="keyword")]
    storage = runtime.storage
    assert storage is not None
    pid = runtime.index.conn.raw.info.backend_pid
    with storage.connection() as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(StorageError, match="Lost the connection to PostgreSQL"):
        runtime.searcher.search("quokka", mode="keyword")
    hits = runtime.searcher.search("quokka", mode="keyword")
    assert [h.snippet for h in hits] == ["The quokka passport is in the blue drawer"]
    assert runtime.index.conn.raw.info.backend_pid != pid
