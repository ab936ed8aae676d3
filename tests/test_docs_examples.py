"""Every shell example in the documentation runs (issue 34, item 4): no example can rot.

Each fenced ```sh block in ``docs/`` and README.md runs against a temporary vault: ``HOME`` in a
temporary folder, ``MEMVAULT_VAULT`` its ``~/memvault`` (made with ``memvault init``
first), ``.venv/bin/memvault`` and plain ``memvault`` both this checkout's, the embedder
``none`` and no daemon started in the background. A page's blocks run in one shell, in
order (a later block may use what an earlier one made), under ``set -euo pipefail``: a
command that fails fails the page, naming the block and the command.

A comment on the lines just before a block says how it runs:

- ``<!-- docs-test: skip REASON -->``: not run (it needs a channel, a model, the
  network, a daemon or this machine's services); every skipped block is reported
  with its reason (``pytest -rs``).
- ``<!-- docs-test: omit TEXT: REASON -->``: the block's lines containing TEXT are
  left out (a command that runs until Ctrl-C), the rest runs; reported like a skip.
- ``<!-- docs-test: setup`` ... ``-->``: the shell lines between run first, in the same
  shell (the note an example reads, say); a reader does not see them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
VENV_BIN = REPO / ".venv" / "bin"

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<kind>skip|omit|setup)\b(?P<rest>.*?)(-->)?\s*$")


@dataclass
class Block:
    """One fenced ```sh block of a page and what its marker says."""

    page: str
    line: int  # 1-based line of the opening fence
    code: str
    skip: str | None = None  # the reason it is not run
    omit: list[tuple[str, str]] = field(default_factory=list)  # (text, reason)
    setup: str = ""

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def _markers(lines: list[str], fence_index: int) -> list[tuple[str, str]]:
    """The docs-test comments just above a fence, top first (blank lines between are allowed)."""
    found: list[tuple[str, str]] = []
    i = fence_index - 1
    while True:
        while i >= 0 and not lines[i].strip():
            i -= 1
        if i < 0 or not lines[i].strip().endswith("-->"):
            return found
        end = i
        while i >= 0 and "<!--" not in lines[i]:
            i -= 1
        first = MARKER.match(lines[i]) if i >= 0 else None
        if first is None:
            return found
        if i == end:  # one line: <!-- docs-test: kind rest -->
            found.insert(0, (first["kind"], first["rest"].strip()))
        else:
            body = [first["rest"], *lines[i + 1 : end], lines[end].rsplit("-->", 1)[0]]
            found.insert(0, (first["kind"], "\n".join(body).strip()))
        i -= 1


def blocks_of(path: Path) -> list[Block]:
    """The ```sh blocks of one page, in order, with their markers."""
    lines = path.read_text(encoding="utf-8").split("\n")
    page = path.relative_to(DOCS).as_posix() if path.is_relative_to(DOCS) else path.name
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        words = opening["info"].strip().split()
        j = i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""
        ):
            j += 1
        if words and words[0] == "sh":
            body = [
                line[len(indent) :] if line.startswith(indent) else line
                for line in lines[i + 1 : j]
            ]
            block = Block(page, i + 1, "\n".join(body))
            for kind, rest in _markers(lines, i):
                if kind == "skip":
                    assert rest, f"{block.name}: a skip marker gives its reason"
                    block.skip = rest
                elif kind == "omit":
                    text, _, reason = rest.partition(":")
                    assert text.strip() and reason.strip(), f"{block.name}: omit TEXT: REASON"
                    block.omit.append((text.strip(), reason.strip()))
                else:
                    block.setup = rest
            found.append(block)
        i = j + 1
    return found


def pages() -> list[Path]:
    """The documentation's pages and README.md, which shows the first commands."""
    return [*sorted(DOCS.rglob("*.md")), REPO / "README.md"]


def _name(path: Path) -> str:
    return path.relative_to(DOCS).as_posix() if path.is_relative_to(DOCS) else path.name


def test_the_runner_finds_the_examples() -> None:
    """The runner reads the pages (a parser that finds nothing would pass vacuously)."""
    every = [block for page in pages() for block in blocks_of(page)]
    assert len(every) >= 15
    assert any("memvault remember" in block.code and not block.skip for block in every)
    assert all(block.skip for block in every if "memvault serve\n" in block.code + "\n")


def _script(blocks: list[Block]) -> str:
    """One shell script for a page's runnable blocks, each announced before it runs."""
    parts = [
        "set -euo pipefail",
        "trap 'echo \"docs-test: failed: $BASH_COMMAND\" >&2' ERR",
        'memvault init "$MEMVAULT_VAULT" >/dev/null',
    ]
    for block in blocks:
        if block.skip:
            continue
        code = [
            line
            for line in block.code.split("\n")
            if not any(text in line for text, _ in block.omit)
        ]
        parts.append(f"echo 'docs-test: block {block.name}' >&2")
        if block.setup:
            parts.append(block.setup)
        parts.extend(code)
    return "\n".join(parts) + "\n"


def _runnable_pages() -> list[Path]:
    return [page for page in pages() if any(not block.skip for block in blocks_of(page))]


@pytest.mark.slow  # real CLI processes, a few seconds a page: started first
@pytest.mark.parametrize("doc", _runnable_pages(), ids=_name)
def test_the_page_s_shell_examples_run(doc: Path, tmp_path: Path) -> None:
    """The page's unmarked blocks, in one shell against a new vault, succeed."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / ".venv").symlink_to(REPO / ".venv")  # `.venv/bin/memvault` as in a checkout
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MEMVAULT_") or key == "MEMVAULT_MODEL_CACHE"
    }
    env.update(
        HOME=str(home),
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_RUNTIME_DIR=str(tmp_path / "run"),
        MEMVAULT_VAULT=str(home / "memvault"),
        MEMVAULT_EMBEDDER__PROVIDER="none",
        MEMVAULT_CLI__AUTOSTART="false",
        COLUMNS="200",
    )
    done = subprocess.run(
        ["bash", "-c", _script(blocks_of(doc))],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        ran = re.findall(r"^docs-test: block (\S+)$", done.stderr, flags=re.MULTILINE)
        pytest.fail(
            f"{ran[-1] if ran else doc.name}: exit {done.returncode}\n"
            f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )


def _left_out() -> list[tuple[str, str]]:
    """(where, why) of every skipped block and omitted line."""
    left: list[tuple[str, str]] = []
    for page in pages():
        for block in blocks_of(page):
            if block.skip:
                left.append((block.name, block.skip))
            left += [(f"{block.name} '{text}'", why) for text, why in block.omit]
    return left


@pytest.mark.parametrize(("where", "why"), _left_out(), ids=[w for w, _ in _left_out()])
def test_the_marked_examples_are_listed(where: str, why: str) -> None:
    """Each block a marker keeps from running shows as skipped, with its reason."""
    pytest.skip(f"{where}: {why}")


def test_the_readme_s_links_reach_files() -> None:
    """README.md is not part of the site (``mkdocs build --strict`` checks the pages'
    links): each of its relative links names a file or folder of the checkout."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [target for target in targets if "://" not in target]
    assert local, "the README links into the docs"
    missing = [target for target in local if not (REPO / target).exists()]
    assert not missing, f"README.md links to {missing}"


def _reference() -> Any:
    """scripts/docs_reference.py, the generator of the site's reference pages."""
    spec = importlib.util.spec_from_file_location(
        "docs_reference", REPO / "scripts" / "docs_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fields(model: type[BaseModel]) -> Iterator[tuple[str, type[BaseModel]]]:
    """(name, model) of every setting of ``model`` and of the sections inside it, also
    those in a dict or list of them."""
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from _fields(kind)  # a section: its heading, then its rows
            continue
        yield name, model
        for inner in typing.get_args(kind):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                yield from _fields(inner)


def test_the_configuration_reference_has_every_setting() -> None:
    """Each setting of every section (a contact's privacy, an OpenClaw listener too) has
    its row with its description, so the generated page cannot leave one out."""
    from memvault.config import Settings

    page = _reference().config_page()
    rows = set(re.findall(r"^\| `(\w+)` \|", page, flags=re.MULTILINE))
    fields = list(_fields(Settings))
    assert len(fields) > 200
    missing = sorted({f"{model.__name__}.{name}" for name, model in fields if name not in rows})
    assert not missing, f"the configuration reference misses {missing}"
    assert '## `[privacy.contacts."NAME"]`' in page
    assert "## `[[channels.openclaw.listeners]]`" in page
    assert "| `port` | int | `8765` | `MEMVAULT_SERVER__PORT` |" in page  # type, default, variable


def test_the_cli_reference_has_every_command() -> None:
    """Every command and sub-command of ``memvault`` has its heading on the CLI page."""
    page = _reference().cli_page()
    for command in (
        "memvault init",
        "memvault remember",
        "memvault task add",
        "memvault service install",
        "memvault storage migrate",
    ):
        assert f"`{command}`" in page, command
