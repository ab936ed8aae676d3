from __future__ import annotations

from datetime import date
from textwrap import dedent

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvault.errors import InvalidInputError
from memvault.vault.note import Note, _load_frontmatter

OBSIDIAN_NOTE = dedent(
    """\
    ---
    # A comment before everything
    title: "Quarterly plan"   # keep this comment
    aliases:
      - Q3 plan
      - plan
    custom_key: 'single quoted'
    rating: 4
    created: 2026-11-01
    nested:
      owner: Ada   # the owner
      reviewers: [bob, carol]
    status: draft
    ---
    # Quarterly plan

    Body text with a [[Link]].
    """
)


def test_unchanged_note_renders_byte_identical() -> None:
    for text in [
        OBSIDIAN_NOTE,
        "no frontmatter at all",
        "",
        "---\n---\nempty frontmatter\n",
        "---\nnot closed\n",
        "\ufeff---\r\na: 1\r\n---\r\nbody\r\n",
        "---\n: : not yaml [\n---\nbody",
        "--- \nfence: with trailing space\n...\nbody",
    ]:
        assert Note.parse(text).render() == text


def test_editing_one_field_keeps_every_other_line() -> None:
    note = Note.parse(OBSIDIAN_NOTE)
    note.set("status", "final")
    rendered = note.render()
    before = OBSIDIAN_NOTE.splitlines()
    after = rendered.splitlines()
    assert [line for line in before if not line.startswith("status:")] == [
        line for line in after if not line.startswith("status:")
    ]
    assert "status: final" in after
    assert after.index("status: final") == before.index("status: draft")


def test_new_fields_are_appended_after_existing_ones() -> None:
    note = Note.parse(OBSIDIAN_NOTE)
    note.set("due", date(2026, 12, 1))
    note.set("project", "[[Apollo]]")
    note.set("telegram", "123456")
    lines = note.render().splitlines()
    end = lines.index("---", 1)
    assert lines[end - 3 : end] == [
        "due: 2026-12-01",
        'project: "[[Apollo]]"',
        'telegram: "123456"',
    ]
    reparsed = Note.parse(note.render())
    assert reparsed.get("telegram") == "123456"
    assert reparsed.get("project") == "[[Apollo]]"
    assert reparsed.get("due") == date(2026, 12, 1)


def test_list_edits_keep_the_list_style() -> None:
    note = Note.parse(OBSIDIAN_NOTE)
    note.set("aliases", ["Q3 plan", "plan", "third"])
    assert "  - third\n" in note.render()
    flow = Note.parse("---\ntags: [a, b]\n---\n")
    flow.set("tags", ["a", "b", "c"])
    assert "tags: [a, b, c]" in flow.render()


def test_setting_an_equal_value_changes_nothing() -> None:
    note = Note.parse(OBSIDIAN_NOTE)
    note.set("status", "draft")
    note.set("rating", 4)
    note.set("created", date(2026, 11, 1))
    assert not note.modified
    assert note.render() == OBSIDIAN_NOTE
    note.set("rating", "4")  # a string is not the number 4
    assert note.modified


def test_delete_a_field() -> None:
    note = Note.parse(OBSIDIAN_NOTE)
    note.delete("custom_key")
    assert "custom_key" not in note.render()
    assert "# keep this comment" in note.render()


def test_crlf_and_bom_survive_an_edit() -> None:
    text = "\ufeff---\r\nstatus: todo\r\ntags: []\r\n---\r\n# Task\r\n\r\nBody\r\n"
    note = Note.parse(text)
    assert note.body == "# Task\n\nBody\n"
    note.set("status", "done")
    assert note.render() == "\ufeff---\r\nstatus: done\r\ntags: []\r\n---\r\n# Task\r\n\r\nBody\r\n"


def test_body_edit_keeps_frontmatter_bytes() -> None:
    note = Note.parse(OBSIDIAN_NOTE)
    note.body = note.body + "\nMore.\n"
    assert note.render().startswith(OBSIDIAN_NOTE.split("# Quarterly plan\n\nBody")[0])
    assert note.render().endswith("More.\n")


def test_invalid_yaml_is_reported_and_never_rewritten() -> None:
    text = "---\ntitle: [unclosed\n---\nbody\n"
    note = Note.parse(text)
    assert note.frontmatter_error is not None
    assert "frontmatter line" in note.frontmatter_error
    with pytest.raises(InvalidInputError, match="not valid YAML"):
        note.set("status", "x")
    note.body = "new body\n"
    assert note.render() == "---\ntitle: [unclosed\n---\nnew body\n"


def test_frontmatter_that_is_not_a_mapping() -> None:
    note = Note.parse("---\n- a\n- b\n---\nbody")
    assert note.frontmatter_error is not None
    assert note.body == "body"


def test_note_without_frontmatter_gains_one() -> None:
    note = Note.parse("# Title\n\ntext\n")
    note.set("tags", ["x"])
    assert note.render() == "---\ntags:\n  - x\n---\n# Title\n\ntext\n"


def test_body_offset_counts_frontmatter_lines() -> None:
    assert Note.parse(OBSIDIAN_NOTE).body_offset == OBSIDIAN_NOTE.splitlines().index(
        "# Quarterly plan"
    )
    assert Note.parse("plain").body_offset == 0


_keys = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)
_scalars = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=30),
    st.integers(-(10**6), 10**6),
    st.booleans(),
    st.none(),
    st.dates(min_value=date(1900, 1, 1), max_value=date(2100, 1, 1)),
)
_values = st.one_of(_scalars, st.lists(_scalars, max_size=4))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=8), st.text(max_size=200))
def test_frontmatter_round_trips(frontmatter: dict[str, object], body: str) -> None:
    rendered = Note(frontmatter, body.replace("\r", "")).render()
    parsed = Note.parse(rendered)
    assert parsed.frontmatter_error is None
    assert {k: parsed.get(k) for k in parsed.field_names()} == frontmatter
    assert Note.parse(rendered).render() == rendered


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_keys, _scalars, min_size=2, max_size=8), st.data())
def test_editing_one_field_preserves_the_others(
    frontmatter: dict[str, object], data: st.DataObject
) -> None:
    original = Note(frontmatter, "# Body\n").render()
    # Decorate with comments a person might have typed.
    lines = original.split("\n")
    lines.insert(1, "# top comment")
    commented = "\n".join(lines)
    key = data.draw(st.sampled_from(sorted(frontmatter)))
    new_value = data.draw(_scalars)
    note = Note.parse(commented)
    note.set(key, new_value)
    reparsed = Note.parse(note.render())
    assert reparsed.get(key) == new_value
    assert list(reparsed.field_names()) == list(frontmatter)
    for other in frontmatter:
        if other != key:
            assert reparsed.get(other) == frontmatter[other]
    assert "# top comment" in note.render()


# -- the same frontmatter read again -------------------------------------------------

FRONTMATTERS = [
    "---\ntitle: Plain\ntags: [a, b]\n---\nBody\n",
    "---\n# a comment first\ntitle: 'Quoted'  # and one after\nlist:\n- x\n- y\n---\nBody\n",
    '---\ntitle: Indented\nlist:\n  - x\n  - y\nnested:\n  key: "123456"\n---\n',
    "---\nbase: &b\n  k: v\nother: *b\ncreated: 2026-01-02\n---\n# H\n",
    "---\ntitle: x\nblock: |\n  line one\n  line two\n---\n",
]


@pytest.mark.parametrize("text", FRONTMATTERS)
def test_a_frontmatter_read_again_is_the_notes_own(text: str) -> None:
    """The second parse of the same block (kept from the first) renders each change as a
    parse from nothing does, and what one note changes no other note sees."""
    Note.parse(text)
    again = Note.parse(text)
    _load_frontmatter.cache_clear()
    fresh = Note.parse(text)
    assert again.render() == fresh.render() == text
    for note in (again, fresh):
        note.set("title", "Changed")
        note.set("tags", ["c"])
    assert again.render() == fresh.render()
    assert "Changed" in again.render()
    third = Note.parse(text)
    assert third.render() == text
    assert third.get("title") != "Changed"


def test_a_bad_frontmatter_read_again_is_reported_again() -> None:
    text = "---\ntitle: [unclosed\n---\nBody\n"
    first, again = Note.parse(text), Note.parse(text)
    assert first.frontmatter_error is not None
    assert again.frontmatter_error == first.frontmatter_error
    assert again.render() == text
