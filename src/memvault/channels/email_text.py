"""Mail as text: what arrived read as the words a person wrote, and a reply written as
a mail.

Reading: the plain-text part (else the HTML part as text, :func:`html_to_text`), the
sender, the date, the attachments (each named by an :class:`AttachmentHandle` to fetch
it again), and :func:`strip_quoted`, which leaves out the quoted history and the
signature. Writing: the HTML alternative of the agent's Markdown, a subject for a new
thread, header-safe text. The email adapter (:mod:`memvault.channels.email`) does the
IMAP and SMTP around it; nothing here talks to a server.
"""

from __future__ import annotations

import email.utils
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from html.parser import HTMLParser

from markdown_it import MarkdownIt

from memvault.channels.base import Attachment, MessageRejectedError, media_kind

SUBJECT_CHARS = 78

ADDRESS = re.compile(r"[^@\s<>\"]+@[^@\s<>\"]+")
REPLY_SUBJECT = re.compile(r"^\s*(re|aw|sv|antw)\s*(\[\d+\])?\s*:", re.IGNORECASE)
_PARSER = BytesParser(policy=policy.default)
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9._@+=-]+")
_FORWARD_SUBJECT = re.compile(r"^\s*(fwd?|wg|tr|rv)\s*:", re.IGNORECASE)
_FORWARD_MARKERS = (
    "---------- forwarded message ---------",
    "begin forwarded message:",
    "-------- original message --------",
)


def parse_mail(raw: bytes) -> EmailMessage:
    """A whole message as the server sent it, parsed (the modern email API)."""
    return _PARSER.parsebytes(raw)


def is_forwarded(subject: str, body: str) -> bool:
    """Whether a mail forwards someone else's (its subject, or a forwarding marker in it)."""
    return bool(_FORWARD_SUBJECT.match(subject)) or any(
        marker in body.lower() for marker in _FORWARD_MARKERS
    )


@dataclass(frozen=True)
class AttachmentHandle:
    """Where an attachment lives: its message (folder, UIDVALIDITY, UID) and its part."""

    folder: str
    validity: int
    uid: int
    index: int

    @property
    def message_key(self) -> tuple[str, int, int]:
        """The message the attachment is in."""
        return (self.folder, self.validity, self.uid)

    def with_index(self, index: int) -> AttachmentHandle:
        """The handle of another part of the same message."""
        return AttachmentHandle(self.folder, self.validity, self.uid, index)

    def __str__(self) -> str:
        return f"{self.validity}:{self.uid}:{self.index}:{self.folder}"

    @classmethod
    def parse(cls, file_id: str) -> AttachmentHandle:
        """The handle an :attr:`Attachment.file_id` names (as ``str()`` wrote it)."""
        try:
            validity, uid, index, folder = file_id.split(":", 3)
            return cls(folder, int(validity), int(uid), int(index))
        except ValueError:
            raise MessageRejectedError(f"{file_id!r} is not an email attachment.") from None


# -- reading mail ------------------------------------------------------------------------------


def stable_id(key: str) -> str:
    """An id for the hub's inbox from a Message-ID (or folder/UIDVALIDITY/UID): readable,
    safe in a file name, and different for different keys."""
    raw = key.strip().strip("<>").strip()
    clean = _UNSAFE_ID.sub("-", raw).strip("-.")[:80]
    if clean != raw:
        clean = f"{clean}-{hashlib.sha1(raw.encode()).hexdigest()[:10]}".lstrip("-")
    return clean


def header(mail: Message, name: str) -> str:
    """A header's text ("" when absent or unreadable)."""
    try:
        value = mail.get(name)
    except Exception:  # a malformed header must not lose the message
        return ""
    return str(value).strip() if value is not None else ""


def sender(mail: Message) -> tuple[str, str]:
    """The From: display name and address (lower case)."""
    name, address = email.utils.parseaddr(header(mail, "From"))
    address = address.strip().lower()
    return name.strip(), address if ADDRESS.fullmatch(address) else ""


def sent_at(mail: Message) -> datetime:
    """When the mail says it was sent (its Date:, in UTC when it names no zone), else now."""
    try:
        sent = email.utils.parsedate_to_datetime(header(mail, "Date"))
    except (TypeError, ValueError, IndexError):
        return datetime.now(UTC)
    return sent if sent.tzinfo is not None else sent.replace(tzinfo=UTC)


def body_text(mail: EmailMessage) -> str:
    """The plain-text part, else the HTML part as text, else ""."""
    body = mail.get_body(preferencelist=("plain", "html"))
    if not isinstance(body, EmailMessage):
        return ""
    text = _part_text(body).replace("\r\n", "\n")  # as the server sent it: CRLF
    if body.get_content_type() == "text/html":
        return html_to_text(text)
    if body.get_param("format", "", header="content-type") == "flowed":
        delsp = str(body.get_param("delsp", "", header="content-type")).lower() == "yes"
        return _unflow(text, delsp=delsp)
    return text


def _part_text(part: EmailMessage) -> str:
    try:
        content = part.get_content()
    except (LookupError, UnicodeError, ValueError):
        content = None
    if isinstance(content, str):
        return content
    return part_bytes(part).decode("utf-8", errors="replace")


def part_bytes(part: Message) -> bytes:
    """A part's content as bytes (an attached message as a whole .eml)."""
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload(0)
        return inner.as_bytes() if isinstance(inner, Message) else b""
    payload = part.get_payload(decode=True)
    return payload if isinstance(payload, bytes) else b""


def _unflow(text: str, *, delsp: bool) -> str:
    """RFC 3676 format=flowed: lines ending in a space go on with the next one."""
    out: list[str] = []
    carry = ""
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if line.startswith(" "):
            line = line[1:]  # space-stuffed
        if line.endswith(" ") and line != "-- ":
            carry += line[:-1] if delsp else line
            continue
        out.append(carry + line)
        carry = ""
    if carry:
        out.append(carry)
    return "\n".join(out)


def leaf_parts(mail: Message) -> Iterator[Message]:
    """Every part that carries content, in order; an attached message is one part."""
    if mail.get_content_type() == "message/rfc822":
        yield mail
    elif mail.is_multipart():
        for part in mail.get_payload():
            if isinstance(part, Message):
                yield from leaf_parts(part)
    else:
        yield mail


def attachments(mail: EmailMessage, handle: AttachmentHandle) -> tuple[Attachment, ...]:
    """The mail's files (not its text), each named by ``handle`` with its part's index."""
    body = mail.get_body(preferencelist=("plain", "html"))
    found: list[Attachment] = []
    for index, part in enumerate(leaf_parts(mail)):
        if part is body:
            continue
        mime = part.get_content_type()
        name = part.get_filename()
        if (
            part.get_content_disposition() != "attachment"
            and not name
            and mime != ("message/rfc822")
        ):
            continue  # the other alternative of the text, or an unnamed inline part
        if mime == "message/rfc822" and not name:
            inner = part.get_payload(0)
            subject = header(inner, "Subject") if isinstance(inner, Message) else ""
            name = f"{subject or 'message'}.eml"
        found.append(
            Attachment(
                kind=media_kind(mime),
                file_id=str(handle.with_index(index)),
                name=name,
                mime=mime,
                size=len(part_bytes(part)),
            )
        )
    return tuple(found)


_ATTRIBUTION = re.compile(
    r"^(on\b.{3,}\bwrote|am\b.{3,}\bschrieb.*|le\b.{3,}\ba écrit|el\b.{3,}\bescribió"
    r"|op\b.{3,}\bschreef.*)\s*:\s*$",
    re.IGNORECASE,
)
_ORIGINAL_MESSAGE = re.compile(
    r"^\s*-{2,}\s*(original message|ursprüngliche nachricht|message d'origine)\s*-{2,}\s*$",
    re.IGNORECASE,
)
_HEADER_FROM = re.compile(r"^\s*\*?(from|von|de)\s*:\*?\s", re.IGNORECASE)
_HEADER_DATE = re.compile(r"^\s*\*?(sent|date|gesendet|datum|envoyé)\s*:", re.IGNORECASE)
_SIGNATURE = re.compile(r"^-- ?$")


def strip_quoted(text: str) -> str:
    """The new words of a reply: without the quoted history ("On ... wrote:", the ``>``
    lines, an Outlook header block and all below it) and the signature after ``-- ``.
    A mail that is nothing but a quote is kept whole."""
    lines = text.replace("\r\n", "\n").split("\n")
    kept: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        joined = f"{line} {lines[index + 1]}" if index + 1 < len(lines) else line
        if _SIGNATURE.match(line) or _ORIGINAL_MESSAGE.match(line):
            break
        if _HEADER_FROM.match(line) and (
            any(_HEADER_DATE.match(following) for following in lines[index + 1 : index + 4])
            or (kept and set(kept[-1].strip()) == {"_"})
        ):
            break  # Outlook's "From: ... Sent: ..." above the whole earlier mail
        if _attribution(line) and _quote_follows(lines, index + 1):
            index += 1
            continue
        wrapped = _attribution(joined) and not line.lstrip().startswith(">")
        if wrapped and _quote_follows(lines, index + 2):
            index += 2  # the attribution wrapped over two lines
            continue
        if line.lstrip().startswith(">"):
            index += 1
            continue
        kept.append(line.rstrip())
        index += 1
    while kept and set(kept[-1].strip()) <= {"_"}:  # Outlook's rule above its header block
        kept.pop()
    result = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return result or text.strip()


def _attribution(line: str) -> bool:
    """Whether ``line`` introduces a quote: "On <date>, <someone> wrote:" (and its German,
    French, Spanish and Dutch forms); it names a date, so it has a digit."""
    text = line.strip()
    return bool(_ATTRIBUTION.match(text)) and any(char.isdigit() for char in text)


def _quote_follows(lines: list[str], start: int) -> bool:
    """Whether the next line with words (if any) is quoted."""
    following = next((line for line in lines[start:] if line.strip()), None)
    return following is None or following.lstrip().startswith(">")


class _HtmlText(HTMLParser):
    """HTML as plain text: blocks on lines of their own, quotes as ``>`` lines, links with
    their address, scripts and styles left out."""

    BLOCKS = frozenset(
        "address article aside blockquote br dd div dl dt footer form h1 h2 h3 h4 h5 h6 "
        "header hr li main nav ol p pre section table tbody td th thead tr ul".split()
    )
    HIDDEN = frozenset(("head", "script", "style", "title", "template"))

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.current: list[str] = []
        self.depth = 0  # blockquotes open
        self.hidden = 0
        self.pre = 0
        self.links: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.HIDDEN:
            self.hidden += 1
        elif tag in self.BLOCKS:
            self.flush(blank=tag in ("p", "blockquote", "table", "ul", "ol"))
            if tag == "blockquote":
                self.depth += 1
            elif tag == "li":
                self.current.append("- ")
            elif tag == "pre":
                self.pre += 1
        elif tag == "a":
            self.links.append(dict(attrs).get("href"))

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self.hidden = max(self.hidden - 1, 0)
        elif tag in self.BLOCKS:
            self.flush(blank=tag in ("p", "blockquote", "table", "ul", "ol"))
            if tag == "blockquote":
                self.depth = max(self.depth - 1, 0)
            elif tag == "pre":
                self.pre = max(self.pre - 1, 0)
        elif tag == "a" and self.links:
            href = self.links.pop()
            shown = "".join(self.current)
            if href and href.startswith(("http:", "https:", "mailto:")) and href not in shown:
                self.current.append(f" ({href.removeprefix('mailto:')})")

    def handle_data(self, data: str) -> None:
        if self.hidden:
            return
        if self.pre:
            first, *rest = data.split("\n")
            self.current.append(first)
            for line in rest:
                self.flush()
                self.current.append(line)
            return
        self.current.append(re.sub(r"\s+", " ", data))

    def flush(self, *, blank: bool = False) -> None:
        text = "".join(self.current)
        self.current = []
        text = text.rstrip() if self.pre else " ".join(text.split())
        prefix = "> " * self.depth
        if text:
            self.lines.append(prefix + text)
        if blank and self.lines and self.lines[-1].strip("> "):
            self.lines.append(prefix.rstrip())

    def text(self) -> str:
        self.flush()
        return re.sub(r"\n{3,}", "\n\n", "\n".join(self.lines)).strip()


def html_to_text(markup: str) -> str:
    """An HTML mail body as the plain text a reader sees."""
    parser = _HtmlText()
    parser.feed(markup)
    parser.close()
    return parser.text()


# -- writing mail ------------------------------------------------------------------------------


def html_document(markdown: str) -> str:
    """The agent's Markdown as an HTML mail body (raw HTML in it is escaped)."""
    body = _MARKDOWN.render(markdown)
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head>'
        f'<body style="font-family: sans-serif">\n{body}</body></html>\n'
    )


def subject_from(plain: str) -> str:
    """A subject for a mail that starts a thread: its first line, shortened."""
    first = next((line.strip() for line in plain.splitlines() if line.strip()), "")
    first = one_line(first)
    if len(first) > SUBJECT_CHARS:
        first = first[: SUBJECT_CHARS - 1].rsplit(" ", 1)[0].rstrip(",.;:") + "…"
    return first or "(no subject)"


def one_line(text: str) -> str:
    """Text fit for a header: one line, no control characters."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())
