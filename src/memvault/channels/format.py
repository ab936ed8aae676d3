"""Replies as a chat shows them: Markdown cut to a length limit, and rendered for Telegram.

A model writes Markdown; a chat takes messages of limited length, and
Telegram renders only a small HTML subset (``parse_mode="HTML"``).

- :func:`split_text` cuts at the most natural place that fits: a paragraph
  break, else a line break, else a sentence end or a space, else anywhere.
  A code block cut in two is closed at the end of one part and reopened,
  with its language, at the start of the next, so both parts still render.
- :func:`to_telegram_html` parses with markdown-it-py and writes each node as
  Telegram's subset has it (headings become bold lines, lists bullet lines);
  everything else in the text, raw HTML included, is escaped, never passed
  through. :func:`to_plain_text` writes the same structure without tags,
  for when Telegram refuses the HTML. Both are a :class:`Renderer`, whose
  hooks another platform overrides for its own markup (Slack's mrkdwn).
"""

from __future__ import annotations

import html
import re

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_SENTENCE_END = re.compile(r"[.!?][)\"'»]*(?=\s)")
_LINK_SCHEMES = ("http:", "https:", "mailto:", "tg:")

_markdown = MarkdownIt("commonmark").enable(["strikethrough", "table"])


# -- splitting ---------------------------------------------------------------------------------


def split_text(text: str, limit: int) -> list[str]:
    """``text`` in parts of at most ``limit`` characters, cut where a reader would pause."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    parts: list[str] = []
    rest = text
    fence: str | None = None  # the opening line of the code block ``rest`` starts inside
    while rest.strip():
        head = "" if fence is None else fence + "\n"
        if len(head) + len(rest) <= limit:
            parts.append(head + rest)
            break
        budget = limit - len(head)
        tail = ""
        while True:  # a closing fence takes room, which may move the cut to another block
            cut = _cut(rest, budget - len(tail))
            inside = _open_fence(rest[:cut], fence, limit)
            closing = "" if inside is None else "\n" + _marker(inside)
            if len(closing) <= len(tail):
                break
            tail = closing
        part = rest[:cut].rstrip()
        rest = _after_cut(rest[cut:])
        if not part.strip():  # a run of blanks longer than the limit
            rest = rest.lstrip()
            continue
        parts.append(head + part + closing)
        if inside is not None and _closes(rest.split("\n", 1)[0], inside):
            rest, inside = _after_cut(rest.partition("\n")[2]), None  # closed already
        fence = inside
    return parts


def _cut(text: str, budget: int) -> int:
    """Where to cut ``text`` so the part before holds at most ``budget`` characters."""
    window = text[: budget + 1]  # a break just past the budget still leaves a part that fits
    start = len(window) - len(window.lstrip())  # a cut before this would leave an empty part
    for separator in ("\n\n", "\n"):
        at = window.rfind(separator, 0, budget + 1)
        if at > start:
            return at
    ends = [m.end() for m in _SENTENCE_END.finditer(window, start) if m.end() <= budget]
    if ends:
        return ends[-1]
    spaces = [i for i in range(start + 1, len(window)) if window[i].isspace()]
    return spaces[-1] if spaces else budget


def _after_cut(text: str) -> str:
    """``text`` without the blanks at its start, except the indentation of its first line."""
    stripped = text.lstrip()
    blanks = text[: len(text) - len(stripped)]
    return blanks.rpartition("\n")[2] + stripped if "\n" in blanks else stripped


def _open_fence(text: str, fence: str | None, limit: int) -> str | None:
    """The opening line of the code block still open at the end of ``text``, if any."""
    for line in text.split("\n"):
        if fence is None:
            match = _FENCE.fullmatch(line)
            opening = line.rstrip()
            # A block whose markers would fill half a part is left to be cut as text.
            if match and "`" not in match[2] and 2 * len(opening) + 2 <= limit // 2:
                fence = opening
        elif _closes(line, fence):
            fence = None
    return fence


def _marker(fence: str) -> str:
    match = _FENCE.fullmatch(fence)
    return match[1] if match else "```"


def _closes(line: str, fence: str) -> bool:
    match = _FENCE.fullmatch(line)
    marker = _marker(fence)
    return bool(
        match and not match[2].strip() and match[1][0] == marker[0] and len(match[1]) >= len(marker)
    )


# -- rendering ---------------------------------------------------------------------------------


def to_telegram_html(markdown: str) -> str:
    """``markdown`` in the HTML subset Telegram renders (``parse_mode="HTML"``)."""
    return TelegramRenderer(tags=True).render(markdown)


def to_plain_text(markdown: str) -> str:
    """``markdown`` laid out as :func:`to_telegram_html` does, without markup or escaping."""
    return TelegramRenderer(tags=False).render(markdown)


class Renderer:
    """Writes a markdown-it syntax tree as a chat's markup: the structure (headings as
    bold lines, bullet lines, quotes, tables as ``a | b`` rows) is shared; a platform
    says how it marks each thing by overriding the hooks after :meth:`items`."""

    indent = "  "  # a list item's continuation lines
    link_schemes: tuple[str, ...] = _LINK_SCHEMES

    def render(self, markdown: str) -> str:
        return self.block(SyntaxTreeNode(_markdown.parse(markdown)))

    def block(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind == "inline":
            return self.inline(node.children)
        if kind == "heading":
            return self.style("strong", self.blocks(node.children, ""))
        if kind in ("bullet_list", "ordered_list"):
            return self.items(node)
        if kind == "blockquote":
            return self.quote(self.blocks(node.children, "\n\n"))
        if kind in ("fence", "code_block"):
            language = node.info.split(maxsplit=1)[0] if node.info.strip() else ""
            return self.code_block(node.content.removesuffix("\n"), language)
        if kind == "hr":
            return "———"
        if kind == "tr":
            return " | ".join(self.block(cell) for cell in node.children)
        if kind in ("table", "thead", "tbody"):
            return self.blocks(node.children, "\n")
        if kind == "html_block":
            return self.text(node.content.rstrip("\n"))
        # root, paragraph, list_item, th, td: their children, one paragraph apart
        return self.blocks(node.children, "\n\n")

    def blocks(self, nodes: list[SyntaxTreeNode], separator: str) -> str:
        return separator.join(part for part in map(self.block, nodes) if part)

    def items(self, node: SyntaxTreeNode) -> str:
        start = int(str(node.attrs.get("start", 1)))
        lines = []
        for number, item in enumerate(node.children, start):
            marker = "•" if node.type == "bullet_list" else f"{number}."
            body = self.blocks(item.children, "\n").split("\n")
            lines.append(f"{marker} {body[0]}".rstrip())
            lines.extend(f"{self.indent}{line}" if line else "" for line in body[1:])
        return "\n".join(lines)

    def inline(self, nodes: list[SyntaxTreeNode]) -> str:
        return "".join(self.span(node) for node in nodes)

    def span(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind in ("text", "html_inline"):
            return self.text(node.content)
        if kind in ("softbreak", "hardbreak"):
            return "\n"
        if kind == "code_inline":
            return self.code(node.content)
        if kind in ("link", "image"):
            href = str(node.attrs.get("href" if kind == "link" else "src", ""))
            return self.link(href, self.inline(node.children))
        inner = self.inline(node.children)
        if kind in ("em", "strong") and _intraword(node):
            return node.markup + inner + node.markup  # 2*3*4 is arithmetic, not emphasis
        return self.style(kind, inner) if kind in ("strong", "em", "s") else inner

    # -- the hooks: plain text by default ----------------------------------------------------

    def text(self, text: str) -> str:
        return text

    def style(self, kind: str, inner: str) -> str:
        """``inner`` marked as ``strong``, ``em`` or ``s`` (strikethrough)."""
        return inner

    def code(self, content: str) -> str:
        return self.text(content)

    def code_block(self, content: str, language: str) -> str:
        return self.text(content)

    def quote(self, inner: str) -> str:
        return "\n".join(f"> {line}".rstrip() for line in inner.split("\n"))

    def link(self, href: str, label: str) -> str:
        shown = self.text(_markdown.normalizeLinkText(href))
        label = label or self.text(href)
        return label if label == shown else f"{label} ({shown})"


class StarMarkup(Renderer):
    """The emphasis Slack's mrkdwn and WhatsApp's markup share: ``*bold*``, ``_italic_``,
    ``~strike~`` (an empty span left unmarked, which both would show as stray marks)."""

    def style(self, kind: str, inner: str) -> str:
        marker = {"strong": "*", "em": "_", "s": "~"}[kind]
        return f"{marker}{inner}{marker}" if inner.strip() else inner


class TelegramRenderer(Renderer):
    """Telegram's HTML subset (``tags``), or the same layout as plain text."""

    def __init__(self, *, tags: bool) -> None:
        self.tags = tags

    def text(self, text: str) -> str:
        return html.escape(text, quote=False) if self.tags else text

    def style(self, kind: str, inner: str) -> str:
        return self._wrap({"strong": "b", "em": "i", "s": "s"}[kind], inner)

    def code(self, content: str) -> str:
        return self._wrap("code", self.text(content))

    def code_block(self, content: str, language: str) -> str:
        code = self.text(content)
        if not self.tags:
            return code
        attribute = f' class="language-{self._attribute(language)}"' if language else ""
        return f"<pre><code{attribute}>{code}</code></pre>"

    def quote(self, inner: str) -> str:
        return f"<blockquote>{inner}</blockquote>" if self.tags else super().quote(inner)

    def link(self, href: str, label: str) -> str:
        if self.tags and href.lower().startswith(self.link_schemes):
            return f'<a href="{self._attribute(href)}">{label or self.text(href)}</a>'
        return super().link(href, label)

    def _wrap(self, tag: str, inner: str) -> str:
        return f"<{tag}>{inner}</{tag}>" if self.tags and inner else inner

    def _attribute(self, value: str) -> str:
        return html.escape(value, quote=True)


def _intraword(node: SyntaxTreeNode) -> bool:
    """Whether ``*emphasis*`` sits inside a word or number, letters or digits on both sides."""
    before, after = node.previous_sibling, node.next_sibling
    return (
        node.markup.startswith("*")
        and before is not None
        and before.type == "text"
        and before.content[-1:].isalnum()
        and after is not None
        and after.type == "text"
        and after.content[:1].isalnum()
    )
