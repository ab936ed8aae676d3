"""Ending a process with everything it started, a worker in a session of its own
included (the real OpenClaw CLI starts one: killing the call's process group left it
running, holding the call's pipes)."""

from __future__ import annotations

import subprocess
import sys

from memvault.processes import descendants, kill_tree, process_alive
from waiting import wait_for

# A parent that starts a child in a session of its own (as Node's ``detached`` does),
# which starts a grandchild, each holding our stdout; the parent prints their ids.
FAMILY = """
import os, subprocess, sys, time
child = subprocess.Popen(
    [sys.executable, "-c", "import subprocess, sys, time; "
     "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)']); "
     "print(g.pid, flush=True); time.sleep(3600)"],
    start_new_session=True, stdout=subprocess.PIPE, text=True,
)
grandchild = child.stdout.readline().strip()
print(child.pid, grandchild, flush=True)
time.sleep(3600)
"""


def test_kill_tree_ends_a_detached_child_and_its_own_children() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", FAMILY],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert parent.stdout is not None
    child, grandchild = (int(pid) for pid in parent.stdout.readline().split())
    assert set(descendants(parent.pid)) >= {child, grandchild}
    kill_tree(parent.pid)
    parent.wait()
    # The child was in another session: the parent's group alone would have missed it.
    wait_for(lambda: not process_alive(child), "the detached child to end")
    wait_for(lambda: not process_alive(grandchild), "its own child to end")
    assert parent.stdout.read() == ""  # nobody holds the pipe any more: it reads to its end


def test_descendants_of_a_process_without_children_is_empty() -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"]) as alone:
        try:
            assert descendants(alone.pid) == []
        finally:
            kill_tree(alone.pid)
            alone.wait()
