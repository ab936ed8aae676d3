"""Who may talk and whom memvault may write to: the access rules on a real state.db."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memvault.channels.access import (
    ALLOWED,
    BLOCKED,
    OWNER,
    REFUSED,
    STRANGER,
    Access,
    SendRefusedError,
    shown_code,
)
from memvault.channels.approvals import parse_reply
from memvault.channels.base import Inbound
from memvault.channels.store import ChannelStore
from memvault.config import ChannelsSettings, TelegramSettings
from memvault.errors import ConflictError, InvalidInputError, NotFoundError
from memvault.memory.state import StateDB
from memvault.vault.store import Vault
from support import MovableClock


def make(vault: Vault, clock: MovableClock, **telegram: object) -> Access:
    settings = ChannelsSettings(telegram=TelegramSettings(owner=["1"], **telegram))  # type: ignore[arg-type]
    return Access(settings, ChannelStore(StateDB(vault.state_dir), clock), clock)


def message(sender: str, clock: MovableClock, n: int = 1) -> Inbound:
    return Inbound(
        channel="telegram",
        message_id=f"{sender}-{n}",
        chat_id=sender,
        sender_id=sender,
        sender_name=f"Person {sender}",
        text="hello",
        sent_at=clock.now(),
    )


def test_the_owner_is_let_in_and_cannot_be_blocked(vault: Vault, clock: MovableClock) -> None:
    access = make(vault, clock)
    assert access.judge(message("1", clock)).kind == OWNER
    with pytest.raises(ConflictError, match="owner's own id"):
        access.block("telegram", "1", by="test")
    access.check_send("telegram", "1")


def test_a_block_beats_an_approval_and_the_allow_list(vault: Vault, clock: MovableClock) -> None:
    access = make(vault, clock, allow=["3"])
    access.judge(message("2", clock))
    access.approve("telegram", "2", by="test")
    assert access.judge(message("2", clock, 2)).kind == ALLOWED
    access.block("telegram", "2", by="test")
    access.block("telegram", "3", by="test")  # before they ever wrote
    assert access.judge(message("2", clock, 3)).kind == BLOCKED
    assert access.judge(message("3", clock)).kind == BLOCKED
    for chat in ("2", "3"):
        with pytest.raises(SendRefusedError, match="blocked"):
            access.check_send("telegram", chat)


def test_allowlist_ignores_approvals_from_another_policy(vault: Vault, clock: MovableClock) -> None:
    access = make(vault, clock, policy="allowlist", allow=["3"])
    access.store.update_sender("telegram", "2", status="approved")
    assert access.judge(message("2", clock)).kind == REFUSED
    assert access.judge(message("3", clock)).kind == ALLOWED
    with pytest.raises(ConflictError, match="allowlist"):
        access.approve("telegram", "2", by="test")
    with pytest.raises(SendRefusedError):
        access.check_send("telegram", "2")
    access.check_send("telegram", "3")


def test_a_pairing_code_expires_after_an_hour(vault: Vault, clock: MovableClock) -> None:
    access = make(vault, clock, policy="pairing")
    verdict = access.judge(message("2", clock))
    assert verdict.kind == STRANGER and verdict.sender is not None
    code = access.pairing_code(verdict.sender)
    assert code is not None and len(code) == 8 and code.isalpha()
    assert access.pairing_code(verdict.sender) is None  # one code at a time
    clock.set(clock.now() + timedelta(minutes=61))
    with pytest.raises(InvalidInputError, match="expired"):
        access.approve("telegram", shown_code(code), by="test")
    fresh = access.pairing_code(verdict.sender)
    assert fresh is not None and fresh != code
    approved = access.approve("telegram", fresh.lower(), by="test")
    assert approved.status == "approved" and approved.code is None
    with pytest.raises(NotFoundError):
        access.approve("telegram", "ABCDEFGH", by="test")


def test_sends_go_only_to_who_is_let_in(vault: Vault, clock: MovableClock) -> None:
    access = make(vault, clock)
    with pytest.raises(SendRefusedError, match="not allowed"):
        access.check_send("telegram", "99")
    opened = make(vault, clock, policy="open")
    opened.check_send("telegram", "99")


def test_only_a_well_formed_reply_is_an_approval() -> None:
    assert parse_reply("/approve 4821 always", None) == parse_reply(
        "/approve@memvault_bot 4821 always", None
    )
    reply = parse_reply("/approve 4821", None)
    assert reply is not None and reply.scope == "once" and reply.decision == "approve"
    denied = parse_reply("/deny 4821", None)
    assert denied is not None and denied.decision == "deny"
    assert parse_reply("please /approve 4821", None) is None
    assert parse_reply("/approve 48210", None) is None  # a sender id, not an approval
    assert parse_reply("/approve", None) is None
    button = parse_reply("", "mv:approve:4821:abcdef0123:always")
    assert button is not None and button.hash_prefix == "abcdef0123" and button.scope == "always"
    assert parse_reply("", "something:else") is None
