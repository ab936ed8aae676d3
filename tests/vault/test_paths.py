from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvault.errors import UnsafePathError
from memvault.vault.paths import ensure_note_suffix, normalize_relpath, safe_filename
from memvault.vault.store import Vault


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("Projects/Apollo.md", "Projects/Apollo.md"),
        ("  Projects//Apollo.md ", "Projects/Apollo.md"),
        ("./Journal/2026-11-22.md", "Journal/2026-11-22.md"),
        ("Contacts/Zoë Ångström.md", "Contacts/Zoë Ångström.md"),
        ("Notes v1.2", "Notes v1.2"),
    ],
)
def test_clean_paths_are_accepted(raw: str, clean: str) -> None:
    assert normalize_relpath(raw) == clean


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("/etc/passwd", "absolute"),
        ("~/notes.md", "absolute"),
        ("C:/Users/x.md", "absolute"),
        ("C:\\Users\\x.md", "absolute"),
        ("\\\\server\\share", "absolute"),
        ("../outside.md", "'..'"),
        ("Projects/../../outside.md", "'..'"),
        (".memvault/token", "hidden"),
        ("Notes/.obsidian/app.json", "hidden"),
        ("a:b.md", "invalid on common filesystems"),
        ("what?.md", "invalid on common filesystems"),
        ("tab\there.md", "invalid on common filesystems"),
        ("back\\slash.md", "invalid on common filesystems"),
        ("trailing dot.", "ends with a space or a dot"),
        ("Projects/trailing space /x.md", "ends with a space or a dot"),
        ("CON.md", "reserved on Windows"),
        ("Notes/lpt1", "reserved on Windows"),
        ("x" * 300 + ".md", "longer than 255 bytes"),
        ("", "empty"),
        ("   ", "empty"),
        ("nul\x00byte.md", "NUL"),
    ],
)
def test_unsafe_paths_are_refused_with_a_reason(raw: str, reason: str) -> None:
    with pytest.raises(UnsafePathError) as caught:
        normalize_relpath(raw)
    assert reason in str(caught.value)


def test_root_is_only_allowed_for_listings() -> None:
    assert normalize_relpath("", allow_root=True) == ""
    assert normalize_relpath("./", allow_root=True) == ""
    with pytest.raises(UnsafePathError):
        normalize_relpath("./")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80))
def test_any_string_is_either_refused_or_stays_inside_the_vault(
    tmp_path_factory: pytest.TempPathFactory, raw: str
) -> None:
    root = tmp_path_factory.getbasetemp() / "prop-vault"
    root.mkdir(exist_ok=True)
    vault = Vault(root)
    try:
        resolved = vault.resolve(raw)
    except UnsafePathError:
        return
    real_root = os.path.realpath(root)
    assert os.path.commonpath([real_root, os.path.realpath(resolved)]) == real_root
    assert resolved != root
    clean = normalize_relpath(raw)
    assert ".." not in clean.split("/")
    assert not any(part.startswith(".") for part in clean.split("/"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "..", ".", "", "c d", "é"]), min_size=1, max_size=6))
def test_dotdot_anywhere_is_refused(parts: list[str]) -> None:
    raw = "/".join(parts)
    if ".." in parts:
        with pytest.raises(UnsafePathError):
            normalize_relpath(raw)


def test_symlink_leaving_the_vault_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    root = tmp_path / "vault"
    root.mkdir()
    (root / "Escape").symlink_to(outside, target_is_directory=True)
    (root / "inside.md").write_text("ok")
    (root / "Alias.md").symlink_to(root / "inside.md")
    vault = Vault(root)
    with pytest.raises(UnsafePathError, match="outside the vault"):
        vault.read_text("Escape/secret.md")
    with pytest.raises(UnsafePathError, match="outside the vault"):
        vault.write_text("Escape/new.md", "x")
    assert not (outside / "new.md").exists()
    assert vault.read_text("Alias.md") == "ok"  # a link that stays inside is fine


def test_note_suffix_is_added_only_when_missing() -> None:
    assert ensure_note_suffix("Projects/Apollo") == "Projects/Apollo.md"
    assert ensure_note_suffix("Projects/Apollo.md") == "Projects/Apollo.md"
    assert ensure_note_suffix("Dr. Smith") == "Dr. Smith.md"
    assert ensure_note_suffix("Notes v1.2") == "Notes v1.2.md"
    assert ensure_note_suffix("attachments/diagram.png") == "attachments/diagram.png"


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ("Fix login bug", "Fix login bug"),
        ("Meeting: Q3 plan?", "Meeting - Q3 plan"),
        ("Bob / Alice", "Bob - Alice"),
        ("[[Weird]] #tag ^id | pipe", "Weird tag id - pipe"),
        ("~draft", "draft"),
        ("  spaces   everywhere  ", "spaces everywhere"),
        ("CON", "CON_"),
        ("ends with dot.", "ends with dot"),
    ],
)
def test_safe_filename_keeps_titles_readable(title: str, name: str) -> None:
    assert safe_filename(title) == name
    normalize_relpath(f"Tasks/active/{safe_filename(title)}.md")  # always valid


@given(st.text(min_size=1, max_size=300))
def test_safe_filename_is_always_a_valid_name_or_refused(title: str) -> None:
    try:
        name = safe_filename(title)
    except UnsafePathError:
        return
    assert normalize_relpath(f"Tasks/{name}.md") == f"Tasks/{name}.md"
    assert not set(name) & set('#^[]|<>:"/\\?*')
