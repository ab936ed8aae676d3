from __future__ import annotations

from textwrap import dedent

import pytest

from memvault.errors import InvalidInputError
from memvault.vault.markdown import (
    aliases,
    append_to_section,
    block_ids,
    extract_links,
    frontmatter_tags,
    headings,
    inline_tags,
    normalize_tag,
    note_tags,
    replace_section,
    section_text,
)

TRICKY = dedent(
    """\
    # Heading with #not-a-tag

    See [[Note]], [[Folder/Other Note|the other one]] and [[Note#Section]].
    Block ref [[Note#^abc123]] and an embed ![[diagram.png]] and ![[Note#Section|shown]].
    Same-note link [[#Local heading]]. Table cell [[Tabled\\|alias]].
    A [markdown link](Projects/Apollo.md) and [encoded](My%20Note.md#Part) and [web](https://example.org/#frag).
    Text #tag1 and #nested/tag-2, not#this, not #123, (#paren) and #ünïcode.
    URL https://example.org/page#anchor is not a tag.

    ```python
    # comment #notatag [[NotALink]]
    x = "[[AlsoNot]]"
    ```

    Inline `[[CodeLink]] #codetag` stays code.
    %% hidden [[CommentLink]] #commenttag %%
    <!-- [[HtmlComment]] -->

    ~~~
    [[TildeFence]]
    ~~~
    Last line ^block-1
    """
)


def test_wikilinks_embeds_and_markdown_links() -> None:
    links = extract_links(TRICKY)
    seen = [(link.target, link.subpath, link.alias, link.embed, link.kind) for link in links]
    assert seen == [
        ("Note", None, None, False, "wikilink"),
        ("Folder/Other Note", None, "the other one", False, "wikilink"),
        ("Note", "Section", None, False, "wikilink"),
        ("Note", "^abc123", None, False, "wikilink"),
        ("diagram.png", None, None, True, "wikilink"),
        ("Note", "Section", "shown", True, "wikilink"),
        ("", "Local heading", None, False, "wikilink"),
        ("Tabled", None, "alias", False, "wikilink"),
        ("Projects/Apollo.md", None, "markdown link", False, "markdown"),
        ("My Note.md", "Part", "encoded", False, "markdown"),
    ]
    assert links[3].is_block_ref
    assert [link.line for link in links[:3]] == [3, 3, 3]
    assert links[4].line == 4


def test_no_links_from_code_or_comments() -> None:
    targets = {link.target for link in extract_links(TRICKY)}
    assert not targets & {
        "NotALink",
        "AlsoNot",
        "CodeLink",
        "CommentLink",
        "HtmlComment",
        "TildeFence",
    }


def test_inline_tags_skip_code_headings_urls_and_numbers() -> None:
    assert inline_tags(TRICKY) == ["tag1", "nested/tag-2", "ünïcode"]


def test_frontmatter_tags_as_list_or_string() -> None:
    assert frontmatter_tags({"tags": ["a", "#b", "a"]}) == ["a", "b"]
    assert frontmatter_tags({"tags": "a, b c"}) == ["a", "b", "c"]
    assert frontmatter_tags({"tag": "solo"}) == ["solo"]
    assert frontmatter_tags({"tags": None}) == []
    assert frontmatter_tags({"tags": ["2026"]}) == []  # purely numeric is not a tag


def test_note_tags_merge_case_insensitively() -> None:
    assert note_tags({"tags": ["Project"]}, "text #project and #other") == ["Project", "other"]


def test_aliases_as_list_or_string() -> None:
    assert aliases({"aliases": ["Bob", "Robert"]}) == ["Bob", "Robert"]
    assert aliases({"aliases": "Bob, Robert"}) == ["Bob", "Robert"]
    assert aliases({"alias": "Bobby"}) == ["Bobby"]
    assert aliases({}) == []


def test_headings_and_block_ids() -> None:
    found = headings(TRICKY)
    assert [(h.level, h.text) for h in found] == [(1, "Heading with #not-a-tag")]
    assert [(b.id, b.line) for b in block_ids(TRICKY)] == [("block-1", 22)]
    assert [h.text for h in headings("## Closed ##\n#nospace\n   ### Indented")] == [
        "Closed",
        "Indented",
    ]


@pytest.mark.parametrize("tag", ["ok", "#ok", "with space", "a/b", "x-1", "ünï"])
def test_normalize_tag_accepts(tag: str) -> None:
    assert not normalize_tag(tag).startswith("#")


@pytest.mark.parametrize("tag", ["", "#", "123", "bad,comma", "no#hash", "[x]"])
def test_normalize_tag_refuses(tag: str) -> None:
    with pytest.raises(InvalidInputError):
        normalize_tag(tag)


JOURNAL = dedent(
    """\
    # Day

    ## Actions Taken
    - 09:00 first

    ## Commands Received

    ## Follow-ups
    - [ ]
    """
)


def test_append_to_section_keeps_order_and_spacing() -> None:
    body = append_to_section(JOURNAL, "actions taken", "- 10:00 second")
    assert section_text(body, "Actions Taken") == "- 09:00 first\n- 10:00 second"
    body = append_to_section(body, "Commands Received", "- 11:00 command")
    assert "## Commands Received\n- 11:00 command\n\n## Follow-ups" in body
    body = append_to_section(body, "Follow-ups", "- call Ada")
    assert section_text(body, "Follow-ups") == "- call Ada"  # placeholder replaced


def test_append_to_missing_section_creates_it_at_the_end() -> None:
    body = append_to_section(JOURNAL, "Sessions", "- summary")
    assert body.endswith("\n\n## Sessions\n- summary\n")


def test_sections_ignore_headings_inside_code() -> None:
    body = "## Notes\n```\n## Not a heading\n```\ntext\n## Next\n"
    assert section_text(body, "Notes") == "```\n## Not a heading\n```\ntext"


def test_replace_section() -> None:
    body = replace_section(JOURNAL, "Actions Taken", "- replaced")
    assert section_text(body, "Actions Taken") == "- replaced"
    assert "## Commands Received" in body
    assert section_text(replace_section("# T\n", "Description", "new"), "Description") == "new"
