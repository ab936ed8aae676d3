"""The protocol-token filter: HEARTBEAT_OK and NO_REPLY never reach a person, however the
model wraps, punctuates or streams them; a person's own words are left alone."""

from __future__ import annotations

import pytest

from memvault.protocol_tokens import (
    PROTOCOL_TOKENS,
    StreamFilter,
    is_only_protocol,
    strip_protocol_tokens,
)

ONLY_TOKEN = [
    "HEARTBEAT_OK",
    "NO_REPLY",
    "heartbeat_ok",
    "Heartbeat_Ok",
    "**HEARTBEAT_OK**",
    "***HEARTBEAT_OK***",
    "`HEARTBEAT_OK`",
    "_HEARTBEAT_OK_",
    "~~NO_REPLY~~",
    "HEARTBEAT_OK.",
    "HEARTBEAT_OK!",
    "HEARTBEAT_OK…",
    "HEARTBEAT_OK...",
    "**HEARTBEAT_OK.**",
    "> HEARTBEAT_OK",
    "```\nHEARTBEAT_OK\n```",
    "```text\nHEARTBEAT_OK\n```",
    "\n\n  HEARTBEAT_OK  \n",
    "\u200bHEARTBEAT_OK\u200b",
    "\u00a0HEARTBEAT_OK\u00a0",
    "\ufeff**HEARTBEAT_OK**\u2060",
    "(HEARTBEAT_OK)",
    "- HEARTBEAT_OK",
    "HEARTBEAT_OK\nNO_REPLY",
]


@pytest.mark.parametrize("text", ONLY_TOKEN)
def test_a_token_however_wrapped_leaves_nothing(text: str) -> None:
    assert strip_protocol_tokens(text) == ""
    assert is_only_protocol(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Your passport expires Friday HEARTBEAT_OK.", "Your passport expires Friday."),
        ("Your passport expires Friday. HEARTBEAT_OK", "Your passport expires Friday."),
        ("Your passport expires Friday.\n\n**HEARTBEAT_OK**", "Your passport expires Friday."),
        ("HEARTBEAT_OK\n\nCall Bob back.", "Call Bob back."),
        ("HEARTBEAT_OK Call Bob back.", "Call Bob back."),
        ("Done HEARTBEAT_OK and more", "Done and more"),
        ("- milk\n- > HEARTBEAT_OK\n- eggs", "- milk\n- eggs"),
        ("Two things:\n\n```\nNO_REPLY\n```\n\nBye.", "Two things:\n\nBye."),
        ("  indented\n  HEARTBEAT_OK tail", "  indented\n  tail"),
        ("👍 HEARTBEAT_OK", "👍"),
    ],
)
def test_a_token_beside_real_text_goes_and_the_text_stays(text: str, expected: str) -> None:
    assert strip_protocol_tokens(text) == expected
    assert not is_only_protocol(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "The heartbeat ok check ran.",  # prose: only the token with its underscore counts
        "heartbeat-ok",
        "MY_HEARTBEAT_OK",
        "HEARTBEAT_OKAY",
        "NO_REPLY_YET",
        "a_NO_REPLY",
        "**bold** and `code`\n\n> quoted\n",
        "...",
        "  spaced  \n\n\n\nout  ",
    ],
)
def test_text_without_a_token_is_returned_unchanged(text: str) -> None:
    assert strip_protocol_tokens(text) == text
    assert not is_only_protocol(text)


def _stream(pieces: list[str]) -> tuple[list[str], str]:
    tokens = StreamFilter()
    shown = [tokens.feed(piece) for piece in pieces]
    shown.append(tokens.flush())
    return shown, "".join(shown)


@pytest.mark.parametrize(
    "pieces",
    [
        ["HEART", "BEAT", "_OK"],
        list("HEARTBEAT_OK"),
        ["**HEART", "BEAT_OK**"],
        ["*", "*", "HEARTBEAT", "_", "OK", "*", "*", "."],
        ["> ", "HEARTBEAT_OK"],
        ["NO_", "REPLY"],
        ["\u200b", "HEARTBEAT_OK", "!"],
        ["hEaRt", "BeAt_oK"],
    ],
)
def test_a_streamed_token_is_never_emitted(pieces: list[str]) -> None:
    shown, joined = _stream(pieces)
    assert joined.strip(" \n>*") == ""
    for token in PROTOCOL_TOKENS:
        assert token not in joined.upper()
        # Not even a piece of it leaks before the stream shows what it is.
        assert not any(token[:3] in piece.upper() for piece in shown)


def test_a_stream_keeps_real_text_and_its_order() -> None:
    pieces = ["Your passport ", "expires Friday ", "HEARTBE", "AT_OK."]
    shown, joined = _stream(pieces)
    assert joined == "Your passport expires Friday."
    assert shown[0] == "Your passport"  # the space waits: a token might follow it


def test_a_stream_releases_what_was_held_once_it_is_no_token() -> None:
    assert _stream(["HEARTBEAT_OK", "AY then"])[1] == "HEARTBEAT_OKAY then"
    assert _stream(["Say ", "No", " way"])[1] == "Say No way"
    assert _stream(["Hello ", "world"])[1] == "Hello world"
    # Text that cannot start a token is shown at once.
    tokens = StreamFilter()
    assert tokens.feed("Dear Ada,") == "Dear Ada,"
    assert tokens.feed(" with") == " with"
    assert tokens.flush() == ""
    assert not tokens.removed


def test_a_stream_that_is_only_a_token_marks_it_removed() -> None:
    tokens = StreamFilter()
    assert tokens.feed("HEARTBEAT_OK") == ""
    assert tokens.flush() == ""
    assert tokens.removed
