"""The reader's map in docs/development.md names every folder of the source and of the
project, and nothing that is gone: a new folder without its line fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = ("src/memvault", "tests", "bench", "docs", "scripts")


def mapped() -> set[str]:
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    section = text.split("## A reader's map", 1)[1]
    return {m.rstrip("/") for m in re.findall(r"^- `([\w./-]+/)`:", section, re.MULTILINE)}


def folders() -> set[str]:
    package = ROOT / "src" / "memvault"
    inner = {
        f"src/memvault/{p.name}"
        for p in package.iterdir()
        if p.is_dir() and not p.name.startswith(("_", "."))
    }
    return inner | set(TOP)


def test_every_folder_has_a_line_and_every_line_a_folder() -> None:
    lines = mapped()
    assert folders() - lines == set(), "add a line for each to docs/development.md"
    assert lines - folders() == set(), "these lines name folders that are gone"


def test_every_package_says_what_lives_there() -> None:
    for folder in sorted(folders()):
        init = ROOT / folder / "__init__.py"
        if folder.startswith("src/memvault/"):
            assert init.read_text(encoding="utf-8").lstrip().startswith('"""'), folder
