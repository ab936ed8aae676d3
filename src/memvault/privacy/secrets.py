"""Secrets stay out: keys, tokens, passwords and card numbers are kept out of what is stored.

The method, stated before the code:

1. **Detectors.** The token formats are `detect-secrets`' plugins, run in
   this process on the text itself (never on files, never verified over the
   network): AWS, GitHub, GitLab, Slack, Stripe, OpenAI, SendGrid, Twilio,
   Telegram, Discord, PyPI, npm, Mailchimp, Square and Azure keys, JSON web
   tokens, private key blocks and passwords in URLs. What it lacks is added
   the same way (subclasses of its ``RegexBasedDetector``): today's OpenAI
   and Anthropic keys, GitHub's fine-grained tokens, Google API keys, and
   card numbers, which count only with a valid Luhn check digit (python-stdnum)
   and a card network's prefix and length.
2. **Context, not entropy alone.** Its keyword and high-entropy plugins are
   made for source code and flag ordinary prose ("Secretary: Jane", a git
   hash, a Google Docs link). Here a value counts only beside a word that
   names a secret: ``password: hunter2``, ``api_key=…``, "my token is …"
   (the value must look like one: a digit, a symbol, inner capitals, or 16+
   characters; placeholders and wikilinks do not count), or, for random
   looking strings, within 30 characters after such a word, 20+ characters
   long with the entropy of a key (hex: 32+ characters). A hash, a UUID or
   an id standing alone in a note is left alone.
3. **Screening** (:class:`SecretScreen`, ``[privacy] secrets``): *redact*
   replaces each secret by ``[secret removed: KIND]`` before the text reaches
   the vault, the index or state.db; *refuse* raises
   :class:`~memvault.errors.SecretRefusedError` and nothing is stored;
   *keep* stores the text as it is. A secret the text already held before
   (``kept``: a note being rewritten) is let through: nothing already
   written is changed without the owner asking (``memvault privacy scan``).
4. **Telling once.** What was removed during a request is collected by
   :func:`noticed`; the surface (CLI, HTTP, MCP, a tool result, a channel
   reply) says it in one sentence (:func:`notice_for`).

`detect-secrets` costs a quarter of a second to import, so it is imported
on the first text that could hold a secret at all (a run of 16 characters
without a space, a word that names a secret, 13 digits, or a URL with a
password); short ordinary text never loads it.
"""

from __future__ import annotations

import contextlib
import math
import re
import string
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Literal

from memvault.errors import SecretRefusedError

if TYPE_CHECKING:
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.high_entropy_strings import (
        Base64HighEntropyString as Base64Entropy,
    )
    from detect_secrets.plugins.high_entropy_strings import HexHighEntropyString as HexEntropy

Mode = Literal["redact", "refuse", "keep"]
MARKER = "[secret removed: {kind}]"
CARD = "card number"
_URL_PASSWORD = "password in a URL"


# -- words that name a secret -----------------------------------------------------------

# (pattern, kind): the first that matches names the value's kind.
_KEYWORDS: tuple[tuple[str, str], ...] = (
    (r"pass(?:word|wd|phrase|code)?|pwd|pw|contrase[ñn]a|mot de passe|passwort", "password"),
    (r"pin(?:[ _-]?code)?", "PIN"),
    (r"(?:client|app|consumer|shared)[ _-]?secret|secret[ _-]?key|secret", "secret"),
    (r"(?:private|access|secret)[ _-]?key|api[ _-]?key|apikey|auth[ _-]?key", "API key"),
    (r"(?:signing|encryption|master|license|licence|deploy)[ _-]?key", "key"),
    (r"(?:access|auth|api|bearer|refresh|session)[ _-]?token|token|bearer", "token"),
    (r"credentials?", "secret"),
)
_KEYWORD = "|".join(f"(?:{pattern})" for pattern, _ in _KEYWORDS)
# ``password: x``, ``api_key = "x"``, ``**PIN:** x``, ``[password:: x]``, "my password is x".
_ASSIGNED = re.compile(
    rf"(?<![A-Za-z0-9])(?P<key>{_KEYWORD})(?:[_-][A-Za-z0-9_-]{{0,20}})?"
    r"[\"'`\]*_]{0,3}[ \t]*(?:::?|:=|=>|==?|[ \t]is(?:[ \t]*:)?)[ \t*_]*"
    r"(?:(?P<quote>[\"'`])(?P<quoted>[^\"'`\n]{1,200})(?P=quote)|(?P<bare>[^\s\"'`]{1,200}))",
    re.IGNORECASE,
)
# What could hold a secret at all (a long token, a card's digits, a URL's password, a word
# naming a secret); text without any of these never loads the detectors.
_MAYBE = re.compile(rf"\S{{16,}}|(?:\d[ -]?){{12,}}\d|://\S*:\S*@|{_KEYWORD}", re.IGNORECASE)
# A random-looking string shortly after a word that names a secret ("AWS secret key X").
_NAMED_NEAR = re.compile(rf"(?<![A-Za-z0-9])(?:{_KEYWORD})(?![A-Za-z])", re.IGNORECASE)
_NEAR_CHARS = 30
_TOKEN = re.compile(r"(?<![\w/.:@-])[A-Za-z0-9+/_=-]{20,}(?![\w/@])")
_HEX = set(string.hexdigits)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
# Values that only stand for a secret kept elsewhere: a link, a path or file name, a variable
# or an environment variable's name, an elided example ("123456:ABC..."), a mask, "none".
_PLACEHOLDER = re.compile(
    r"^(?:\[\[.*|\[secret removed.*|https?://.*|\$\{?\w+\}?|\{\{.*\}\}|<[^>]*>|%\w|"
    r"(?-i:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)|(?:~|\.{1,2})?/.*|"
    r"\.?[\w-]+(?:\.[\w-]+)*\.(?:json|ya?ml|toml|env|txt|pem|key|ini|cfg|conf|kdbx)|"
    r".*(?:\.\.\.|…)|….*|[*x•.?-]+|"
    r"(?:none|null|nil|n/?a|tbd|todo|redacted|hidden|empty|unset|changeme|secret|"
    r"pass(?:word|wd)?|pwd|pw)\W*)$",
    re.IGNORECASE,
)
_TRAILING = ".,;:!?)]}>"

# -- card numbers ------------------------------------------------------------------------

# A card number as written: digits alone, or in groups of four (Amex/Diners: 4-6-5 / 4-6-4).
_CARD = re.compile(
    r"(?<![\d.,/:+-])(?:\d{13,19}|\d{4}([ -])\d{4}\1\d{4}\1\d{1,7}(?:\1\d{1,4})?"
    r"|\d{4}([ -])\d{6}\2\d{4,5})(?![\d/:]|[.,-]\d)"
)
# Card networks by prefix, with the lengths their numbers have.
_NETWORKS: tuple[tuple[tuple[int, int], tuple[int, ...]], ...] = (
    ((4, 4), (16, 19)),  # Visa (its 13-digit numbers are long retired)
    ((51, 55), (16,)),  # Mastercard
    ((2221, 2720), (16,)),  # Mastercard 2-series
    ((34, 34), (15,)),  # American Express
    ((37, 37), (15,)),
    ((300, 305), (14, 16, 17, 18, 19)),  # Diners Club
    ((36, 36), (14, 16, 17, 18, 19)),
    ((38, 39), (16, 17, 18, 19)),
    ((6011, 6011), (16, 17, 18, 19)),  # Discover
    ((644, 649), (16, 17, 18, 19)),
    ((65, 65), (16, 17, 18, 19)),
    ((3528, 3589), (16, 17, 18, 19)),  # JCB
    ((62, 62), (16, 17, 18, 19)),  # UnionPay
)


def is_card_number(digits: str) -> bool:
    """Whether ``digits`` is a payment card number: a network's prefix and length, and a
    valid Luhn check digit (so most long numbers in a note, orders and phones, are not)."""
    if not digits.isdigit() or not 13 <= len(digits) <= 19:
        return False
    known = any(
        low <= int(digits[: len(str(low))]) <= high and len(digits) in lengths
        for (low, high), lengths in _NETWORKS
    )
    if not known:
        return False
    from stdnum import luhn

    return bool(luhn.is_valid(digits))


# -- findings ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One secret in a text: its kind ("AWS key"), where it is, and (never shown) its value."""

    kind: str
    start: int
    end: int
    value: str = field(repr=False)

    def line(self, text: str) -> int:
        """The 1-based line of ``text`` the secret starts on."""
        return text.count("\n", 0, self.start) + 1

    def masked(self) -> str:
        """A preview that does not give the secret away: a card's last four digits, a long
        token's first four characters (its type: AKIA, ghp_, xoxb), else nothing."""
        size = f"({len(self.value)} characters)"
        if self.kind == CARD:
            return "…" + re.sub(r"\D", "", self.value)[-4:]
        if self.kind == "private key":
            return "-----BEGIN … PRIVATE KEY----- …"
        if len(self.value) >= 20:
            return f"{self.value[:4]}… {size}"
        return f"… {size}"


def marker(kind: str) -> str:
    """What replaces a secret of ``kind`` in stored text."""
    return MARKER.format(kind=kind)


def redact(text: str, findings: Sequence[Finding]) -> str:
    """``text`` with each finding replaced by its marker."""
    out: list[str] = []
    at = 0
    for found in sorted(findings, key=lambda f: f.start):
        if found.start < at:
            continue  # overlaps one already replaced
        out.append(text[at : found.start])
        out.append(marker(found.kind))
        at = found.end
    out.append(text[at:])
    return "".join(out)


def kinds_of(findings: Iterable[Finding]) -> list[str]:
    """The kinds found, each once, in the order first found."""
    return list(dict.fromkeys(f.kind for f in findings))


def find_secrets(text: str) -> list[Finding]:
    """Every secret in ``text``, in order, none overlapping another."""
    if not text or _MAYBE.search(text) is None:
        return []
    found: list[Finding] = [*_private_keys(text), *_by_plugins(text)]
    offset = 0
    for line in text.splitlines(keepends=True):
        if _NAMED_NEAR.search(line) is not None:  # only a line naming a secret has these
            found.extend(_assigned(line, offset))
            found.extend(_random_near_a_name(line, offset))
        offset += len(line)
    return _merged(found)


def _by_plugins(text: str) -> Iterator[Finding]:
    """The token formats, each pattern run once over the whole text (none spans lines)."""
    for plugin, kind in _detectors():
        for pattern in plugin.denylist:
            for match in pattern.finditer(text):
                # The plugin's own checks (a JWT's parts are JSON, a card's Luhn digit ...).
                if not any(True for _ in plugin.analyze_string(match.group(0))):
                    continue
                start, end = _secret_span(match, text)
                value = text[start:end]
                if end > start and not (kind == _URL_PASSWORD and _PLACEHOLDER.match(value)):
                    yield Finding(kind, start, end, value)


def _secret_span(match: re.Match[str], line: str) -> tuple[int, int]:
    """Where the secret is: the first group that matched (a URL's password, a key named by
    its variable), else the whole match stretched to the end of its token (a JWT's
    signature, which the plugin's lazy pattern leaves out)."""
    for number in range(1, (match.re.groups or 0) + 1):
        # A group of a few characters is a separator (a card's), not the secret.
        if match.group(number) and len(match.group(number)) > 3:
            return match.span(number)
    start, end = match.span()
    while end < len(line) and (line[end].isalnum() or line[end] in "_-+/="):
        end += 1
    while end > start and line[end - 1] in _TRAILING:
        end -= 1
    return start, end


def _kind_of(keyword: str) -> str:
    for pattern, kind in _KEYWORDS:
        if re.fullmatch(pattern, keyword, re.IGNORECASE):
            return kind
    return "secret"


def _assigned(line: str, offset: int) -> Iterator[Finding]:
    """Values given to a word that names a secret, when they look like one."""
    for match in _ASSIGNED.finditer(line):
        if (match.group("quoted") or match.group("bare") or "").startswith("[secret"):
            continue  # already a marker
        kind = _kind_of(match.group("key"))
        if match.group("quoted") is not None:
            value, start = match.group("quoted"), match.start("quoted")
        else:
            value, start = match.group("bare").rstrip(_TRAILING), match.start("bare")
            if _PLACEHOLDER.match(match.group("bare")):
                continue  # "123456:ABC..." before its dots are taken for punctuation
        if _looks_secret(value, kind):
            yield Finding(kind, offset + start, offset + start + len(value), value)


def _looks_secret(value: str, kind: str) -> bool:
    """Whether a value given to a secret's name is one (not a word, a placeholder or a link)."""
    value = value.strip()
    if _PLACEHOLDER.match(value):
        return False
    if kind == "PIN":
        return value.isdigit() and 4 <= len(value) <= 8
    if len(value) < 6:
        return False
    if " " in value:
        return False  # words: prose, or a passphrase no pattern tells from prose
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    inner_capital = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    return has_digit or has_symbol or inner_capital or len(value) >= 16


def _random_near_a_name(line: str, offset: int) -> Iterator[Finding]:
    """A key-like string (20+ characters of high entropy) shortly after a secret's name."""
    names = [(m.end(), _kind_of(m.group(0))) for m in _NAMED_NEAR.finditer(line)]
    if not names:
        return
    for match in _TOKEN.finditer(line):
        value = match.group(0).rstrip(_TRAILING + "=")
        before = [kind for end, kind in names if 0 <= match.start() - end <= _NEAR_CHARS]
        if before and _random_looking(value):
            start = match.start()
            yield Finding(before[-1], offset + start, offset + start + len(value), value)


def _random_looking(value: str) -> bool:
    """Shannon entropy as detect-secrets measures it, with limits for short strings: base64
    20+ characters, three kinds of character and at least 85% of the most a string of its
    length can have; hex 32+ characters above detect-secrets' own limit (3.0)."""
    if _UUID.fullmatch(value):
        return False  # an id, not a key; one given to a secret's name is still caught
    hex_plugin, base64_plugin = _entropy_plugins()
    if set(value) <= _HEX:
        return len(value) >= 32 and hex_plugin.calculate_shannon_entropy(value) > 3.0
    classes = sum(any(test(c) for c in value) for test in (str.isupper, str.islower, str.isdigit))
    ceiling = math.log2(min(len(value), 64))
    return classes == 3 and base64_plugin.calculate_shannon_entropy(value) >= 0.85 * ceiling


def _private_keys(text: str) -> Iterator[Finding]:
    """Whole private key blocks, from BEGIN to END (or the end of the text)."""
    if "PRIVATE KEY" not in text and "PuTTY-User-Key-File" not in text:
        return
    for match in _KEY_BLOCK.finditer(text):
        yield Finding("private key", match.start(), match.end(), match.group(0))


_KEY_BLOCK = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"
    r"|PuTTY-User-Key-File-\d:[\s\S]*?(?:Private-MAC:[^\n]*|\Z)"
)


def _merged(found: list[Finding]) -> list[Finding]:
    """Findings in order; one inside or across another is taken into the first."""
    out: list[Finding] = []
    for item in sorted(found, key=lambda f: (f.start, -(f.end - f.start))):
        if out and item.start < out[-1].end:
            last = out[-1]
            if item.end > last.end:
                out[-1] = Finding(last.kind, last.start, item.end, last.value + "…")
            continue
        out.append(item)
    return out


# -- the detectors, made on first use ------------------------------------------------------


@cache
def _detectors() -> tuple[tuple[RegexBasedDetector, str], ...]:
    """detect-secrets' token plugins (and ours, built on its base class), with the kind each
    finds as a person names it."""
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.discord import DiscordBotTokenDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.mailchimp import MailchimpDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
    from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
    from detect_secrets.plugins.twilio import TwilioKeyDetector

    class ProviderKeys(RegexBasedDetector):
        """Key formats detect-secrets 1.5 does not know yet."""

        secret_type = "Provider API key"
        denylist = (
            re.compile(r"sk-ant-(?:api|admin)\d\d-[A-Za-z0-9_-]{20,}"),  # Anthropic
            re.compile(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),  # OpenAI
            re.compile(r"github_pat_[A-Za-z0-9_]{22,}"),  # GitHub fine-grained
            re.compile(r"AIza[0-9A-Za-z_-]{35}"),  # Google
            re.compile(r"xapp-\d-[A-Z0-9]+-\d+-[a-f0-9]+"),  # Slack app-level
        )

    class CardNumbers(RegexBasedDetector):
        """Payment card numbers with a valid Luhn digit (:func:`is_card_number`)."""

        secret_type = "Card number"
        denylist = (_CARD,)

        def analyze_string(self, string: str) -> Iterator[str]:  # type: ignore[override]
            for match in _CARD.finditer(string):
                if is_card_number(re.sub(r"\D", "", match.group(0))):
                    yield match.group(0)

    return (
        (AWSKeyDetector(), "AWS key"),
        (GitHubTokenDetector(), "GitHub token"),
        (GitLabTokenDetector(), "GitLab token"),
        (SlackDetector(), "Slack token"),
        (StripeDetector(), "Stripe key"),
        (OpenAIDetector(), "OpenAI key"),
        (ProviderKeys(), "API key"),
        (SendGridDetector(), "SendGrid key"),
        (TwilioKeyDetector(), "Twilio key"),
        (TelegramBotTokenDetector(), "Telegram bot token"),
        (DiscordBotTokenDetector(), "Discord bot token"),
        (PypiTokenDetector(), "PyPI token"),
        (NpmDetector(), "npm token"),
        (MailchimpDetector(), "Mailchimp key"),
        (SquareOAuthDetector(), "Square key"),
        (AzureStorageKeyDetector(), "Azure storage key"),
        (JwtTokenDetector(), "JSON web token"),
        (BasicAuthDetector(), _URL_PASSWORD),
        (CardNumbers(), CARD),
    )


@cache
def _entropy_plugins() -> tuple[HexEntropy, Base64Entropy]:
    from detect_secrets.plugins.high_entropy_strings import (
        Base64HighEntropyString,
        HexHighEntropyString,
    )

    return HexHighEntropyString(), Base64HighEntropyString()


# -- telling the owner once --------------------------------------------------------------


@dataclass
class Removed:
    """The kinds of secret removed while a request ran (:func:`noticed`)."""

    kinds: list[str] = field(default_factory=list)

    def add(self, kinds: Iterable[str]) -> None:
        """Note kinds removed (each is named once)."""
        for kind in kinds:
            if kind not in self.kinds:
                self.kinds.append(kind)

    def notice(self) -> str | None:
        """The one sentence to tell the owner, or None when nothing was removed."""
        return notice_for(self.kinds)

    def field(self) -> dict[str, list[str]]:
        """``{"secrets_removed": kinds}`` for a surface's answer; empty when none was."""
        return {"secrets_removed": list(self.kinds)} if self.kinds else {}


_REMOVED: ContextVar[Removed | None] = ContextVar("memvault_secrets_removed", default=None)


@contextlib.contextmanager
def noticed() -> Iterator[Removed]:
    """Collect what the screen removes while the block runs, so the surface can say it once.

    Nested blocks share the outer collection (a tool called by an HTTP route is one request).
    """
    outer = _REMOVED.get()
    if outer is not None:
        yield outer
        return
    removed = Removed()
    token = _REMOVED.set(removed)
    try:
        yield removed
    finally:
        _REMOVED.reset(token)


def notice_for(kinds: Sequence[str]) -> str | None:
    """ "A secret was removed before storing: AWS key." (None for no kinds)."""
    if not kinds:
        return None
    if len(kinds) == 1:
        return f"A secret was removed before storing: {kinds[0]}."
    return f"Secrets were removed before storing: {', '.join(kinds)}."


def joined(*notices: str | None) -> str | None:
    """Several notices as one text (those that are None left out)."""
    said = [n for n in notices if n]
    return " ".join(said) if said else None


# -- the screen --------------------------------------------------------------------------


class SecretScreen:
    """``[privacy] secrets`` applied to text about to be stored (wired by the runtime into
    the memories, the notes and the sessions; see the module docstring).

    Called as ``screen(text, kept=old_text, refuse=True)``; returns what may be stored.
    """

    def __init__(self, mode: Mode = "redact") -> None:
        self.mode = mode

    def __call__(self, text: str, *, kept: str = "", refuse: bool = True) -> str:
        """``text`` as it may be stored; SecretRefusedError when it may not be.

        Secrets ``kept`` already holds pass (they were there before). ``refuse``
        False redacts even in refuse mode: for what was already said (an
        assistant's reply), refusing the record would protect nothing.
        """
        screened, kinds = self.screened(text, kept=kept, refuse=refuse)
        removed = _REMOVED.get()
        if kinds and removed is not None:
            removed.add(kinds)
        return screened

    def screened(self, text: str, *, kept: str = "", refuse: bool = True) -> tuple[str, list[str]]:
        """As a call, and the kinds removed (for a caller that reports them itself, such as
        an import), without telling :func:`noticed`."""
        if self.mode == "keep":
            return text, []
        found = find_secrets(text)
        if kept and found:
            found = [f for f in found if f.value not in kept]
        if not found:
            return text, []
        kinds = kinds_of(found)
        if self.mode == "refuse" and refuse:
            raise SecretRefusedError(
                f"Nothing was stored: the text holds a secret ({', '.join(kinds)}).",
                hint='Remove it and try again, or set [privacy] secrets = "redact" to store '
                "it with a marker instead.",
                kinds=kinds,
            )
        return redact(text, found), kinds

    def for_memory(self, text: str, source: str | None) -> tuple[str, dict[str, str]]:
        """The screen as :meth:`memvault.vault.memories.Memories.screen` calls it: the text to
        store, and no fields of its own."""
        return self(text), {}
