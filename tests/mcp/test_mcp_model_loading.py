"""The MCP server over stdio answers searches while its model loads: keywords, and a notice."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from mcp import Client, StdioServerParameters
from memvault.config import Settings
from memvault.index.index import MODEL_LOADING
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import HashEmbedder
from waiting import WAIT

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound

GATED_SERVER = Path(__file__).parents[1] / "model_gate.py"


@pytest.fixture
def embedded(tmp_path: Path) -> tuple[Path, str]:
    """A vault whose index holds vectors from the stand-in model, and a memory's id."""
    root = tmp_path / "vault"
    init_vault(Vault(root))
    runtime = Runtime.open(Settings(vault=root), embedder=HashEmbedder())
    memory = runtime.memories.remember("The owner's boat is called Halcyon").memory
    runtime.index.sync()
    runtime.index.embed_pending()
    runtime.close()
    return root, memory.id


def test_memory_search_answers_from_keywords_while_the_model_loads(
    embedded: tuple[Path, str], tmp_path: Path
) -> None:
    root, memory_id = embedded
    gate = tmp_path / "model-may-load"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    server = StdioServerParameters(
        command=sys.executable, args=[str(GATED_SERVER), str(root), str(gate)], env=env
    )

    async def body() -> None:
        async with Client(server) as client:
            found = await client.call_tool("memory_search", {"query": "Halcyon"})
            data = found.structured_content
            assert not found.is_error and data is not None
            assert data["notice"] == MODEL_LOADING and data["mode"] == "keyword"
            assert data["results"][0]["id"] == memory_id
            assert data["results"][0]["score"] > 0
            context = (await client.call_tool("get_context", {"query": "Halcyon"})).content[0]
            assert isinstance(context, types.TextContent)
            assert context.text.rstrip().endswith(f"_{MODEL_LOADING}_")

            gate.touch()  # the model loads now
            deadline = time.monotonic() + WAIT
            while True:
                found = await client.call_tool("memory_search", {"query": "boat Halcyon"})
                data = found.structured_content
                assert data is not None
                if "notice" not in data:
                    break
                assert time.monotonic() < deadline, "still keywords only after the model loaded"
                await anyio.sleep(0.05)
            assert "mode" not in data and data["results"][0]["id"] == memory_id

    try:
        anyio.run(body)
    finally:
        gate.touch()  # however the test went, the server's model thread ends
