"""Notes.write with the hash a read returned: never replaces what changed since.

The person is a real separate process appending with plain ``open(..., "a")``
(no memvault lock, as an editor or ``echo >>``), while an agent loops
read -> edit -> write-with-hash, rereading on every conflict.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memvault.errors import ConflictError, InvalidInputError
from memvault.runtime import Runtime
from memvault.vault.notes import content_hash
from waiting import WAIT

# A hang guard only: well above the waits a test may spend (two of WAIT at most).
pytestmark = pytest.mark.timeout(3 * WAIT)


def test_the_hash_is_the_sha256_of_the_bytes_crlf_and_bom_kept(runtime: Runtime) -> None:
    path = runtime.vault.root / "Odd.md"
    path.write_bytes("\ufeff# Odd\r\nline\r\n".encode())
    view = runtime.notes.read("Odd")
    assert view.hash == hashlib.sha256(path.read_bytes()).hexdigest() == content_hash(view.text)
    assert view.to_dict()["hash"] == view.hash


def test_a_write_with_a_stale_hash_changes_nothing(runtime: Runtime) -> None:
    runtime.notes.write("Plan.md", "# Plan\nstep one\n")
    read = runtime.notes.read("Plan.md")
    path = runtime.vault.root / "Plan.md"
    path.write_text("# Plan\nstep 1!\n")  # same size, edited in place by a person
    with pytest.raises(ConflictError, match=r"Plan\.md changed since it was read"):
        runtime.notes.write("Plan.md", "# Plan\nstep two\n", expected_hash=read.hash)
    assert path.read_text() == "# Plan\nstep 1!\n"
    # The current hash, upper case and in ETag quotes, is accepted.
    fresh = runtime.notes.read("Plan.md").hash
    runtime.notes.write("Plan.md", "# Plan\nstep two\n", expected_hash=f'"{fresh.upper()}"')
    assert path.read_text() == "# Plan\nstep two\n"
    with pytest.raises(InvalidInputError, match="is not a note hash"):
        runtime.notes.write("Plan.md", "x", expected_hash=fresh[:12])
    path.unlink()
    with pytest.raises(ConflictError, match="is gone since it was read"):
        runtime.notes.write("Plan.md", "x", expected_hash=fresh)
    assert not path.exists()


def _typist(path: Path, lines: int) -> subprocess.Popen[bytes]:
    script = textwrap.dedent(
        f"""
        import time
        for i in range({lines}):
            with open({str(path)!r}, "a") as handle:
                handle.write(f"- typed {{i}}\\n")
            time.sleep(0.004)
        """
    )
    return subprocess.Popen([sys.executable, "-c", script])


def test_an_agent_rewriting_a_note_loses_nothing_a_person_types(runtime: Runtime) -> None:
    lines = 150
    path = runtime.vault.root / "Log.md"
    runtime.notes.write("Log.md", "edits: 0\n")
    typist = _typist(path, lines)
    edits = conflicts = 0
    deadline = time.monotonic() + WAIT
    try:
        while typist.poll() is None or edits < 20:
            assert time.monotonic() < deadline, "the agent made no progress"
            view = runtime.notes.read("Log.md")
            head, _, rest = view.text.partition("\n")
            updated = f"edits: {int(head.split(': ')[1]) + 1}\n{rest}"
            try:
                runtime.notes.write("Log.md", updated, expected_hash=view.hash)
            except ConflictError:
                conflicts += 1
                continue
            edits += 1
    finally:
        typist.wait(timeout=WAIT)
    text = path.read_text()
    assert [i for i in range(lines) if text.count(f"- typed {i}\n") != 1] == []
    assert text.startswith(f"edits: {edits}\n")  # every acknowledged edit is there, once
    assert len(text.splitlines()) == lines + 1
    assert conflicts > 0, "the race was never exercised"
