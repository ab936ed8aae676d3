"""One-time codes and sessions of the console, on a clock the test moves."""

from __future__ import annotations

import pytest

from memvault.console.signin import SignInRefusedError, SignIns
from memvault.gateway.tokens import OWNER, Principal, Scope


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def signins(clock: Clock) -> SignIns:
    return SignIns(link_seconds=300, session_seconds=3600, clock=clock)


def test_a_code_opens_one_session_once() -> None:
    clock = Clock()
    book = signins(clock)
    link = book.link(OWNER)
    cookie, session = book.exchange(link.code)
    assert session.principal == OWNER
    assert book.session(cookie) == session
    with pytest.raises(SignInRefusedError, match="already used"):
        book.exchange(link.code)


def test_a_wrong_or_expired_code_is_refused() -> None:
    clock = Clock()
    book = signins(clock)
    with pytest.raises(SignInRefusedError):
        book.exchange("not-a-code")
    with pytest.raises(SignInRefusedError):
        book.exchange("")
    link = book.link(OWNER)
    clock.now += 301
    with pytest.raises(SignInRefusedError, match="expired"):
        book.exchange(link.code)


def test_a_session_ends_when_it_expires_or_is_revoked() -> None:
    clock = Clock()
    book = signins(clock)
    reader = Principal("viewer", Scope.READ)
    cookie, session = book.exchange(book.link(reader).code)
    assert session.principal == reader
    clock.now += 3599
    assert book.session(cookie) is not None
    clock.now += 2
    assert book.session(cookie) is None

    other, _ = book.exchange(book.link(OWNER).code)
    unused = book.link(OWNER)
    assert book.end_all() == 1
    assert book.session(other) is None
    with pytest.raises(SignInRefusedError):
        book.exchange(unused.code)


def test_the_csrf_token_is_the_sessions_own() -> None:
    book = signins(Clock())
    _, first = book.exchange(book.link(OWNER).code)
    _, second = book.exchange(book.link(OWNER).code)
    assert first.csrf_matches(first.csrf)
    assert not first.csrf_matches(second.csrf)
    assert not first.csrf_matches(None)
    assert not first.csrf_matches("")
