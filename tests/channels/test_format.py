"""Cutting replies to a chat's length limit, and rendering Markdown as Telegram shows it."""

from __future__ import annotations

import re
from textwrap import dedent

from hypothesis import given, settings
from hypothesis import strategies as st

from memvault.channels.format import split_text, to_plain_text, to_telegram_html
from telegram_fake import ApiError, parse_html

# -- split_text --------------------------------------------------------------------------------

_WORDS = st.sampled_from(
    ["word", "snake_case", "**bold**", "`code`", "end.", "Why?", "x" * 30, "-", "1."]
)
_LINES = st.lists(_WORDS, min_size=0, max_size=12).map(" ".join)
_FENCED = st.tuples(st.sampled_from(["", "python", "js"]), st.lists(_LINES, max_size=8)).map(
    lambda block: f"```{block[0]}\n" + "\n".join(block[1]) + "\n```"
)
_MARKDOWN = st.lists(st.one_of(_LINES, _FENCED), max_size=15).flatmap(
    lambda blocks: st.sampled_from(["\n", "\n\n"]).map(lambda sep: sep.join(blocks))
)


def _fences_balanced(part: str) -> bool:
    return len(re.findall(r"^```", part, flags=re.MULTILINE)) % 2 == 0


def _words(text: str) -> list[str]:
    return [w for w in text.split() if not w.startswith("```")]


@settings(max_examples=300, deadline=None)
@given(text=_MARKDOWN, limit=st.integers(min_value=40, max_value=400))
def test_parts_fit_the_limit_and_keep_every_word_and_code_block(text: str, limit: int) -> None:
    parts = split_text(text, limit)

    assert all(0 < len(part) <= limit for part in parts)
    assert all(part.strip() for part in parts)
    assert all(_fences_balanced(part) for part in parts)
    joined_words = [w for part in parts for w in _words(part)]
    assert "".join(joined_words) == "".join(_words(text))  # a hard cut may split one word


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(st.characters(exclude_characters="`~"), max_size=300),
    limit=st.integers(min_value=1, max_value=50),
)
def test_any_text_is_cut_into_nonempty_parts_within_the_limit(text: str, limit: int) -> None:
    parts = split_text(text, limit)

    assert all(0 < len(part) <= limit and part.strip() for part in parts)
    assert "".join("".join(parts).split()) == "".join(text.split())


def test_short_text_is_one_part_and_blank_text_none() -> None:
    assert split_text("Hello there.", 100) == ["Hello there."]
    assert split_text(" \n\n ", 100) == []


def test_cuts_prefer_paragraphs_then_lines_then_sentences_then_spaces() -> None:
    assert split_text("First paragraph.\n\nSecond one here.", 30) == [
        "First paragraph.",
        "Second one here.",
    ]
    assert split_text("line one\nline two\nline three", 20) == ["line one\nline two", "line three"]
    assert split_text("One sentence. Another sentence here.", 25) == [
        "One sentence.",
        "Another sentence here.",
    ]
    assert split_text("aaaa bbbb cccc dddd", 10) == ["aaaa bbbb", "cccc dddd"]
    assert split_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def test_a_cut_inside_a_code_fence_closes_and_reopens_it_with_its_language() -> None:
    code = "\n".join(f"value_{n} = {n} * 2" for n in range(12))
    text = f"Here is the code:\n\n```python\n{code}\n```\n\nThat is all."

    parts = split_text(text, 120)

    assert len(parts) > 2
    assert all(len(part) <= 120 for part in parts)
    inner = [part for part in parts if "value_" in part]
    assert all(p.startswith("```python\n") and p.endswith("\n```") for p in inner)
    assert parts[-1].endswith("That is all.")
    body = [line for p in inner for line in p.split("\n") if line.startswith("value_")]
    assert body == code.split("\n")


def test_the_indentation_of_the_next_line_survives_a_cut() -> None:
    text = "def f():\n    return 1\n\n    indented"
    assert split_text(text, 22) == ["def f():\n    return 1", "    indented"]


# -- to_telegram_html ---------------------------------------------------------------------------


def test_inline_markup_becomes_telegram_tags() -> None:
    html = to_telegram_html("**bold** __also__ *it* _it_ ~~gone~~ `x < y` plain")
    assert html == (
        "<b>bold</b> <b>also</b> <i>it</i> <i>it</i> <s>gone</s> <code>x &lt; y</code> plain"
    )


def test_text_is_escaped_and_source_html_is_never_passed_through() -> None:
    html = to_telegram_html('a & b < c > d <b onclick="x">hi</b>\n\n<div>\nblock\n</div>')
    assert html == (
        'a &amp; b &lt; c &gt; d &lt;b onclick="x"&gt;hi&lt;/b&gt;\n\n'
        "&lt;div&gt;\nblock\n&lt;/div&gt;"
    )


def test_snake_case_and_arithmetic_stay_as_typed() -> None:
    assert to_telegram_html("call snake_case_words with 2*3*4") == (
        "call snake_case_words with 2*3*4"
    )
    assert to_plain_text("2**3**4 is a_b_c") == "2**3**4 is a_b_c"


def test_links_keep_only_safe_schemes() -> None:
    html = to_telegram_html(
        '[site](https://example.org/?a=1&b="2") [mail](mailto:me@example.org) '
        "[file](ftp://example.org/x) ![chart](https://example.org/c.png)"
    )
    assert html == (
        '<a href="https://example.org/?a=1&amp;b=%222%22">site</a> '
        '<a href="mailto:me@example.org">mail</a> '
        "file (ftp://example.org/x) "
        '<a href="https://example.org/c.png">chart</a>'
    )
    assert to_plain_text("[site](https://example.org)") == "site (https://example.org)"


def test_blocks_headings_lists_quotes_tables_and_rules() -> None:
    markdown = dedent(
        """\
        # Plan

        - one
          - nested
        - two

        3. third
        4. fourth

        > quoted
        > text

        | a | b |
        |---|---|
        | 1 | 2 |

        ---
        end"""
    )
    assert to_telegram_html(markdown) == dedent(
        """\
        <b>Plan</b>

        • one
          • nested
        • two

        3. third
        4. fourth

        <blockquote>quoted
        text</blockquote>

        a | b
        1 | 2

        ———

        end"""
    )
    assert to_plain_text(markdown).startswith("Plan\n\n• one\n  • nested\n• two")
    assert "> quoted\n> text" in to_plain_text(markdown)


def test_code_blocks_are_pre_with_the_language_when_given() -> None:
    fenced = to_telegram_html("```python\nif a < b:\n    pass\n```")
    assert fenced == '<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>'
    assert to_telegram_html("```\nplain\n```") == "<pre><code>plain</code></pre>"
    assert to_telegram_html("    indented & code") == "<pre><code>indented &amp; code</code></pre>"
    assert to_plain_text("```python\nif a < b:\n```") == "if a < b:"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab *_~`[]()<>&#>-|\n!:/.\"'1")), max_size=120))
def test_any_markdown_renders_to_html_telegram_accepts(markdown: str) -> None:
    html = to_telegram_html(markdown)
    try:
        parse_html(html)  # the fake server's check of Telegram's HTML subset
    except ApiError as exc:
        raise AssertionError(f"{markdown!r} -> {html!r}: {exc.description}") from exc
