"""An embedding model that takes as long to load as a test wants.

:class:`GatedModel` is :class:`~support.HashEmbedder` (same vectors, same
identity) whose load (``warm()``, or the first ``embed()``) waits until its
gate opens: a stand-in for a real model that needs seconds to load, so a
test can look at what memvault does meanwhile.

Run as a script, it serves MCP over stdio (``memvault mcp``'s server) on a
vault with such a model, the gate opening when a file appears::

    python model_gate.py VAULT GATE_FILE
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from support import HashEmbedder
from waiting import WAIT

# A test that never opens the gate still ends; one that does is never outwaited by it.
GATE_TIMEOUT = 2 * WAIT


class GatedModel(HashEmbedder):
    """HashEmbedder that is not loaded until ``gate`` is set."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        super().__init__()
        self.gate = gate or threading.Event()
        self._loaded = False

    @property
    def loaded(self) -> bool:
        return self._loaded

    def warm(self) -> None:
        self.gate.wait(GATE_TIMEOUT)
        self._loaded = True

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.warm()  # a real model loads on first use
        return super().embed(texts)


def open_when_present(path: Path, gate: threading.Event) -> None:
    """Set ``gate`` once ``path`` exists (the other process's way to release the model)."""
    deadline = time.monotonic() + GATE_TIMEOUT
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    gate.set()


def serve_mcp(vault: Path, gate_file: Path) -> None:
    """The MCP server over stdio on ``vault``, its model loading until ``gate_file`` exists."""
    import anyio

    from memvault.config import load_settings
    from memvault.mcp.server import MemvaultMCP, serve_stdio
    from memvault.runtime import Runtime

    gate = threading.Event()
    threading.Thread(target=open_when_present, args=(gate_file, gate), daemon=True).start()
    runtime = Runtime.open(load_settings(vault).settings, embedder=GatedModel(gate))
    anyio.run(serve_stdio, MemvaultMCP(runtime))


if __name__ == "__main__":
    serve_mcp(Path(sys.argv[1]), Path(sys.argv[2]))
