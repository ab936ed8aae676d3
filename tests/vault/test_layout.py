from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from memvault.errors import VaultError
from memvault.vault.layout import init_vault
from memvault.vault.links import LinkResolver
from memvault.vault.markdown import extract_links
from memvault.vault.store import Vault
from support import LAYOUT_FOLDERS, LAYOUT_NOTES


def _snapshot(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "locks" not in p.parts and not p.name.startswith("index.db")
    }


def test_init_creates_the_design_layout(tmp_path: Path) -> None:
    vault = Vault(tmp_path / "brain")
    report = init_vault(vault)
    root = vault.root
    for folder in LAYOUT_FOLDERS:
        assert (root / folder).is_dir(), folder
    for note in LAYOUT_NOTES:
        assert (root / note).is_file(), note
    assert (root / ".memvault/config.toml").is_file()
    assert "Home.md" in report.created and not report.kept


def test_home_links_every_section_and_the_links_resolve(tmp_path: Path) -> None:
    vault = Vault(tmp_path)
    init_vault(vault)
    files = [e.path for e in vault.list(notes_only=False)]
    resolver = LinkResolver(files)
    links = extract_links((tmp_path / "Home.md").read_text())
    unresolved = [link.target for link in links if resolver.resolve(link.target, "Home.md") is None]
    assert unresolved == []
    targets = {resolver.resolve(link.target, "Home.md") for link in links}
    # Home links every other core note, a memory category and every template.
    for expected in [*(n for n in LAYOUT_NOTES if n != "Home.md"), "Memory/Preferences.md"]:
        assert expected in targets, expected


def test_init_is_idempotent_and_never_touches_existing_files(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    (root / "Templates").mkdir(parents=True)
    (root / "Home.md").write_bytes(b"# My own home\r\nno trailing newline")
    (root / "Templates/task.md").write_text("my task template\n")
    (root / ".obsidian").mkdir()
    (root / ".obsidian/app.json").write_text("{}")
    before = _snapshot(root)
    vault = Vault(root)
    first = init_vault(vault)
    assert "Home.md" in first.kept and "Templates/task.md" in first.kept
    after_first = _snapshot(root)
    assert {k: after_first[k] for k in before} == before
    second = init_vault(vault)
    assert second.created == []
    assert _snapshot(root) == after_first


def test_init_refuses_a_file_as_vault(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(VaultError, match="is a file"):
        init_vault(Vault(tmp_path / "file"))
