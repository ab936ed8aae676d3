"""The secrets detector and the screen: what counts as a secret, what ordinary text is left
alone, and what redact, refuse and keep do with a text about to be stored."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from memvault.errors import SecretRefusedError
from memvault.privacy.secrets import (
    SecretScreen,
    find_secrets,
    is_card_number,
    marker,
    notice_for,
    noticed,
    redact,
)

FIXTURE_VAULT = Path(__file__).parent.parent / "fixtures" / "public_vault"

# Made-up values in each format (AWS's own documentation example for the AWS key).
AWS = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB = "ghp_" + "aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2bC4"
SLACK = "xoxb-2048-4096-" + "q7Rt9YwE3uI5oP1aS2dF4gH6"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
ANTHROPIC = "sk-ant-api03-" + "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PRIVATE_KEY = dedent(
    """\
    -----BEGIN RSA PRIVATE KEY-----
    MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi7Ld0pYzL+Z8vY3eq1Y0oG0uQv
    Xr4cC9oH1tQbq9n1B5mL2jQe7xqTgkdF3hS2ZQ==
    -----END RSA PRIVATE KEY-----
    """
)
VISA = "4539 1488 0343 6467"  # a valid Luhn digit
NOT_A_CARD = "4539 1488 0343 6468"  # the same with the last digit off


def kinds(text: str) -> list[str]:
    return [found.kind for found in find_secrets(text)]


@pytest.mark.parametrize(
    ("text", "kind", "secret"),
    [
        (f"My AWS key is {AWS} for the backups", "AWS key", AWS),
        (f"the GitHub token {GITHUB}, scope repo", "GitHub token", GITHUB),
        (f"slack bot: {SLACK}", "Slack token", SLACK),
        (f"Stripe live key {STRIPE}.", "Stripe key", STRIPE),
        (f"claude key {ANTHROPIC}", "API key", ANTHROPIC),
        (f"Authorization: Bearer {JWT}", "JSON web token", JWT),
        ("db_password=hunter22", "password", "hunter22"),
        ("The wifi password is Blue-Fish-42.", "password", "Blue-Fish-42"),
        ('api_key: "9fT2kLq8ZpX4"', "API key", "9fT2kLq8ZpX4"),
        ("**Password:** c0rrect-h0rse", "password", "c0rrect-h0rse"),
        ("[password:: Tr0ub4dor&3]", "password", "Tr0ub4dor&3"),
        ("My bank PIN is 4821", "PIN", "4821"),
        (f"card {VISA} exp 12/27", "card number", VISA),
        ("card 4539148803436467, exp 12/27", "card number", "4539148803436467"),
        ("Amex 3714 496353 98431 for travel", "card number", "3714 496353 98431"),
        (f"AWS secret key {AWS_SECRET} in eu-west-1", "secret", AWS_SECRET),
        ("postgres://app:s3cretPw9@db.internal:5432/app", "password in a URL", "s3cretPw9"),
    ],
)
def test_each_kind_is_found_where_it_is(text: str, kind: str, secret: str) -> None:
    found = find_secrets(text)
    assert [(f.kind, text[f.start : f.end]) for f in found] == [(kind, secret)]
    assert redact(text, found) == text.replace(secret, marker(kind))


def test_a_private_key_block_goes_whole_and_the_lines_around_it_stay() -> None:
    text = f"Server notes\n{PRIVATE_KEY}Rotate it in March.\n"
    found = find_secrets(text)
    assert [f.kind for f in found] == ["private key"]
    assert (
        redact(text, found) == "Server notes\n[secret removed: private key]\nRotate it in March.\n"
    )
    # Cut off before its END line, the rest of the text is the key.
    assert redact("x\n" + PRIVATE_KEY[:90], find_secrets("x\n" + PRIVATE_KEY[:90])) == (
        "x\n[secret removed: private key]"
    )


def test_a_jwt_is_taken_with_its_signature() -> None:
    text = f"token {JWT} expires soon"
    assert redact(text, find_secrets(text)) == "token [secret removed: JSON web token] expires soon"


def test_card_numbers_need_a_network_a_length_and_the_luhn_digit() -> None:
    assert is_card_number("4539148803436467")
    assert is_card_number("4111111111111111")  # the test card people type
    assert not is_card_number("4539148803436468")  # Luhn digit wrong
    assert not is_card_number("9539148803436463")  # no network starts with 9
    assert not is_card_number("453914880343646")  # a Visa number is not 15 digits long
    assert kinds(f"card {NOT_A_CARD}") == []
    # Phone numbers, a date run together, an IBAN: not cards.
    assert kinds("call +4915112345678 or 0049 151 1234 5678") == []
    assert kinds("IBAN DE89 3704 0044 0532 0130 00") == []


def test_a_value_named_a_secret_must_look_like_one() -> None:
    for text in (
        "Secretary: Jane Doe",
        "Token: 3 per user per day",
        "password: see [[Passwords]]",
        "password_env = 'MEMVAULT_EMAIL_PASSWORD'",
        "export TELEGRAM_BOT_TOKEN=123456:ABC...",
        "api_key: ${OPENAI_API_KEY}",
        "password: ********",
        "credentials: `.supaclaw.json` then the keychain",
        "The password is changed every month",
        "the pin code is on the fridge",
        "postgresql://user:password@host:5432/dbname",
        "a secret: the surprise party is on Friday",
    ):
        assert kinds(text) == [], text


def test_random_strings_count_only_beside_a_word_naming_a_secret() -> None:
    key = "Zq8Lm3Xv7Tb1Nc5Rw9Ky2Hd6Gf4Js0Pa"
    assert kinds(f"the signing key {key} for staging") == ["key"]
    assert kinds(f"commit message and build {key} output") == []
    # A hash, a UUID or a link's path is not a key, even named one.
    assert kinds("key 3f9a1c2b4d5e6f708192a3b4c5d6e7f8091a2b3c is the commit") == []
    assert kinds("token 550e8400-e29b-41d4-a716-446655440000 of the request") == []
    assert kinds(f"API docs at https://example.com/docs/{key}/index") == []


# Notes people write: ids, links, dates, hashes, numbers that are not secrets.
ORDINARY = dedent(
    """\
    - Prefers dark mode #ui [importance:: 0.8] [created:: 2026-11-22 10:31:05] ^m-3f9a1c2b
    - Ada's birthday is on 1815-12-10 [importance:: 0.6] [source:: telegram:42] ^m-00a1b2c3
    See [[Memory/Preferences#^m-3f9a1c2b]] and [[Projects/Apollo|Apollo]], ![[Pics/photo-1.png]]
    Standup moved to 09:30 on 2026-11-24T09:30:00+01:00; it lasts 15 min.
    Spec draft: https://docs.google.com/document/d/1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms/edit
    Fixed in https://github.com/obsidian-tasks-group/obsidian-tasks/commit/cc0fce3c1326d18e2bdb7020eaf4c52e885da569
    Watch later: https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=42s
    Newsletter https://example.com/read?utm_source=news&id=8f14e45fceea167a5a36dedd4bea2543
    Report at https://s3.eu-central-1.amazonaws.com/my-public-bucket/reports/2026/q3.pdf
    Request id 550e8400-e29b-41d4-a716-446655440000 failed at 14:02
    The key takeaway: ship the smallest thing that works.
    Secret Santa: Alice buys for Bob this year.
    Password reset email arrived, I changed it in the browser.
    I forgot my password again; it is in the password manager.
    My password manager is 1Password and the vault is called Family.
    API key rotation is due on 2026-12-01 for the staging project.
    Keyboard shortcut: Ctrl+Shift+P opens the command palette.
    Commit 3f9a1c2 fixed the race; the full hash is 3f9a1c2b4d5e6f708192a3b4c5d6e7f8091a2b3c.
    Image digest sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
    sha256sum of the backup: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    Call me at +49 151 12345678 or +1 (415) 555-2671 after six.
    Tracking 1Z999AA10123456784, ISBN 978-3-16-148410-0, IBAN DE89 3704 0044 0532 0130 00.
    Upgrade to Python 3.11.6 and memvault v1.5.0 next week; logo colour #ff00aa.
    Meeting ID: 845 2231 9907 at 10:00. Your verification code is 482913.
    The token is read from TELEGRAM_BOT_TOKEN, never stored in the vault.
    Our wifi is called Bluebird-5G; the password is on the router sticker.
    Flight LH2024 departs 2026-12-18 07:45 from gate B12, seat 14C; invoice INV-2026-000431.
    Coordinates 52.520008, 13.404954; running total 12,345,678 steps.
    Bearer of good news: the grant was approved. The credential review is quarterly.
    ```python
    config = {"timeout": 30, "retries": 3}
    ```
    """
)


def test_ordinary_notes_are_left_alone() -> None:
    assert find_secrets(ORDINARY) == []


def test_the_public_vaults_hand_written_notes_hold_no_secret() -> None:
    """Thousands of lines of someone else's Markdown (docs with code, dates, links, ids)."""
    files = sorted(FIXTURE_VAULT.rglob("*.md"))
    lines = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        lines += sum(1 for line in text.splitlines() if line.strip())
        assert find_secrets(text) == [], path
    assert len(files) > 40 and lines > 3000


def test_a_finding_shows_where_and_what_never_the_secret() -> None:
    text = f"line one\npassword=hunter22 and {AWS}\n"
    password, aws = find_secrets(text)
    assert (password.line(text), aws.line(text)) == (2, 2)
    assert aws.masked() == "AKIA… (20 characters)"
    assert "hunter22" not in password.masked()
    assert find_secrets(f"card {VISA}")[0].masked() == "…6467"
    assert "hunter22" not in repr(password) and AWS not in repr(aws)


def test_redact_replaces_and_refuse_raises_and_keep_keeps() -> None:
    text = f"key {AWS} and password=hunter22"
    redacted = "key [secret removed: AWS key] and password=[secret removed: password]"
    with noticed() as removed:
        assert SecretScreen("redact")(text) == redacted
        assert SecretScreen("redact")(redacted) == redacted  # markers are not secrets
    assert removed.kinds == ["AWS key", "password"]
    assert removed.notice() == "Secrets were removed before storing: AWS key, password."
    with pytest.raises(SecretRefusedError) as refused:
        SecretScreen("refuse")(text)
    assert refused.value.code == "secret_refused" and refused.value.http_status == 422
    assert refused.value.exit_code == 2
    assert str(refused.value).startswith("Nothing was stored: the text holds a secret (AWS key")
    assert AWS not in str(refused.value)
    assert SecretScreen("refuse")(text, refuse=False) == redacted  # what was already said
    assert SecretScreen("keep")(text) == text
    assert SecretScreen("refuse")("nothing secret here") == "nothing secret here"


def test_a_secret_the_text_already_held_is_kept() -> None:
    before = f"old key {AWS}\n"
    after = f"old key {AWS}\nnew token {GITHUB}\n"
    assert SecretScreen("refuse")(before, kept=before) == before
    assert SecretScreen("redact")(after, kept=before) == (
        f"old key {AWS}\nnew token [secret removed: GitHub token]\n"
    )


def test_the_owner_is_told_once_per_request() -> None:
    screen = SecretScreen("redact")
    with noticed() as outer:
        screen(f"a {AWS}")
        with noticed() as inner:  # a tool called inside a request: the same collection
            screen(f"b {AWS}")
        assert inner is outer
    assert outer.notice() == "A secret was removed before storing: AWS key."
    assert notice_for([]) is None
    screen(f"c {AWS}")  # outside any request: nothing collects, nothing breaks
