"""Audiences through real surfaces: a real daemon, the channels' real client libraries and
their fakes on loopback, and a fake model whose requests show what the agent was given.

A contact the owner let in asks about the owner's private memory: the model's request
holds none of it and offers no vault tool. A group sees only what is shared with it. The
owner sees everything.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from channel_support import APPROVAL_TIMEOUT, OWNER, delivered, telegram_config
from email_servers import PASSWORD, Dovecot, SmtpServer, email_section, mail
from gateway_support import StartDaemon
from llm_fakes import FakeOpenAI, llm_settings
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from slack_fake import APP_TOKEN, BOT_TOKEN, FakeSlack
from telegram_fake import FakeTelegram
from waiting import wait_for

FRIEND = 777
GROUP = -100
DOCTOR = "Dr Weiss said the biopsy results come back on Friday"
SALARY = "My salary is 7400 a month"
ROOM = "The guest room is ready with the blue quilt"
DINNER = "Family dinner is at grandma's on Sunday at 6"
# What only the owner's memory holds (the questions may name the topic, never these).
PRIVATE = ("Weiss", "7400", "come back on Friday")
# The owner's tools that read the vault: none may be offered to anyone else.
OWNER_TOOLS = {"vault_read", "vault_search", "memory_search", "memory_get", "get_context"}


def prepared_vault(tmp_path: Path, identities: dict[str, str]) -> Path:
    """A vault with the owner's private memories, one shared with Ada, one with the family."""
    root = tmp_path / "vault"
    init_vault(Vault(root))
    front = "".join(f"{key}: '{value}'\n" for key, value in identities.items())
    (root / "Contacts" / "Ada Lovelace.md").write_text(
        f"---\n{front}---\n# Ada Lovelace\n\nMet at the book club.\n"
    )
    (root / "Memory" / "Facts.md").write_text(
        "# Facts\n\n"
        f"- {DOCTOR} #core [importance:: 0.9] ^m-00000001\n"
        f"- {SALARY} ^m-00000002\n"
        f"- {ROOM} #share/ada-lovelace ^m-00000003\n"
        f"- {DINNER} #share/family ^m-00000004\n"
    )
    return root


def asks_for_everything(llm: FakeOpenAI) -> None:
    """The model tries to read the owner's memory three ways, then answers."""
    llm.reply(
        "",
        tool_calls=[
            ("vault_read", {"path": "Memory/Facts.md"}),
            ("memory_search", {"query": "biopsy doctor"}),
            ("recall", {"topic": "biopsy results doctor salary guest room"}),
        ],
    )
    llm.reply("Here is what I can tell you.")


def offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


def everything_sent(requests: list[dict[str, Any]]) -> str:
    return json.dumps(requests, ensure_ascii=False)


def assert_narrowed(llm: FakeOpenAI, shared: str) -> None:
    """Every request of the run: no private memory, only the audience's tools, and the
    shared memory there."""
    assert len(llm.requests) == 2
    sent = everything_sent(llm.requests)
    for word in PRIVATE:
        assert word not in sent
    assert shared in sent
    for request in llm.requests:
        assert offered(request) == {"recall", "remember"}
    tools = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert len(tools) == 3
    assert tools[0]["content"].startswith("Error:") and "vault_read" in tools[0]["content"]
    assert tools[1]["content"].startswith("Error:") and "memory_search" in tools[1]["content"]
    assert json.loads(tools[2]["content"])["topic"]  # recall answered, from the view


# -- Telegram ------------------------------------------------------------------------------


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def telegram_settings(tg: FakeTelegram, llm: FakeOpenAI) -> dict[str, Any]:
    return {
        "channels": {
            "approval_timeout": APPROVAL_TIMEOUT,
            "telegram": telegram_config(
                tg, policy="allowlist", allow=[str(FRIEND)], groups={str(GROUP): "family"}
            ),
        },
        "llm": llm_settings(llm),
        "memory": {"consolidation": "rule"},
    }


def test_a_contact_on_telegram_gets_only_what_is_shared_with_them(
    tmp_path: Path, start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    root = prepared_vault(tmp_path, {"telegram": str(FRIEND)})
    live = start_daemon(root, settings=telegram_settings(tg, llm))
    asks_for_everything(llm)
    tg.push_message(FRIEND, "What did the doctor say about the biopsy? And the guest room?")
    assert wait_for(lambda: delivered(tg, FRIEND), "Ada's answer") == [
        "Here is what I can tell you."
    ]
    assert_narrowed(llm, ROOM)
    system = llm.requests[0]["messages"][0]["content"]
    assert "You are talking with Ada Lovelace" in system
    assert "Met at the book club" in system  # her own note
    # Who read what: her agent's context read the memory shared with her, as hers.
    reads = live.daemon.runtime.reads.of("m-00000003")
    assert any(r.path == "context" and r.audience == "contact:Contacts/Ada Lovelace" for r in reads)
    assert live.daemon.runtime.reads.of("m-00000001") == []  # the doctor's: never read


def test_the_owner_sees_everything_and_a_group_only_its_share(
    tmp_path: Path, start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    root = prepared_vault(tmp_path, {"telegram": str(FRIEND)})
    start_daemon(root, settings=telegram_settings(tg, llm))
    llm.reply("Friday.")
    tg.push_message(OWNER, "When do the biopsy results come back?")
    wait_for(lambda: delivered(tg, OWNER), "the owner's answer")
    system = llm.requests[0]["messages"][0]["content"]
    assert DOCTOR in system and "You are talking with" not in system
    assert offered(llm.requests[0]) >= OWNER_TOOLS

    # The owner writes in the family group: everyone there reads the answer.
    llm.requests.clear()
    asks_for_everything(llm)
    tg.push_message(GROUP, "When is dinner? And the biopsy?", sender_id=OWNER)
    wait_for(lambda: delivered(tg, GROUP), "the group's answer")
    assert_narrowed(llm, DINNER)
    assert ROOM not in everything_sent(llm.requests)  # Ada's share is not the group's
    # The owner's memory commands are not answered where the group reads them.
    tg.push_message(GROUP, "/recall biopsy", sender_id=OWNER)
    answers = wait_for(lambda: len(delivered(tg, GROUP)) == 2 and delivered(tg, GROUP), "answer")
    assert answers[1].startswith("Ask me that in a private chat") and "Weiss" not in answers[1]


def test_what_a_contact_asks_to_remember_goes_to_their_own_note(
    tmp_path: Path, start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    root = prepared_vault(tmp_path, {"telegram": str(FRIEND)})
    live = start_daemon(root, settings=telegram_settings(tg, llm))
    before = (root / "Memory" / "Facts.md").read_text()
    llm.reply("", tool_calls=[("remember", {"fact": "Ada's train arrives at 9 #share/family"})])
    llm.reply("Noted.")
    tg.push_message(FRIEND, "Remember that my train arrives at 9")
    wait_for(lambda: delivered(tg, FRIEND), "Ada's answer")
    note = (root / "Contacts" / "Ada Lovelace.md").read_text()
    assert "train arrives at 9" in note and "[trust:: low]" in note
    assert "#share/family" not in note  # her words cannot widen who sees her note
    assert (root / "Memory" / "Facts.md").read_text() == before
    assert not any("train" in m.text for m in live.daemon.runtime.memories.list())


# -- Slack ---------------------------------------------------------------------------------

SLACK_OWNER = "U0OWNER"
SLACK_ADA = "U0ADA"


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_user(SLACK_OWNER, "grace", display_name="Grace")
        fake.add_user(SLACK_ADA, "ada", display_name="Ada")
        monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
        monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
        yield fake


def test_a_contact_on_slack_gets_only_what_is_shared_with_them(
    tmp_path: Path, start_daemon: StartDaemon, slack: FakeSlack, llm: FakeOpenAI
) -> None:
    root = prepared_vault(tmp_path, {"slack": SLACK_ADA})
    section = {
        "enabled": True,
        "owner": [SLACK_OWNER],
        "base_url": slack.base_url,
        "policy": "allowlist",
        "allow": [SLACK_ADA],
    }
    settings = {
        "channels": {"approval_timeout": APPROVAL_TIMEOUT, "slack": section},
        "llm": llm_settings(llm),
    }
    live = start_daemon(root, settings=settings)
    wait_for(lambda: live.daemon.hub.statuses["slack"].state == "running", "slack running")
    slack.wait_connected(slack.sockets_opened or 1)
    asks_for_everything(llm)
    dm = slack.dm(SLACK_ADA)
    slack.push_message(dm, SLACK_ADA, "What did the doctor say? And the guest room?")
    wait_for(lambda: slack.posted(dm), "Ada's answer")
    assert_narrowed(llm, ROOM)


# -- Email ---------------------------------------------------------------------------------

EMAIL_OWNER = "owner@example.org"
EMAIL_ADA = "ada@example.net"


@pytest.fixture(scope="module")
def dovecot() -> Iterator[Dovecot]:
    with Dovecot() as server:
        yield server


def test_a_contact_by_email_gets_only_what_is_shared_with_them(
    tmp_path: Path,
    start_daemon: StartDaemon,
    dovecot: Dovecot,
    llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMVAULT_EMAIL_PASSWORD", PASSWORD)
    mailbox = dovecot.new_mailbox()
    root = prepared_vault(tmp_path, {"email": EMAIL_ADA})
    with SmtpServer(dovecot.cert, dovecot.key, users={mailbox: PASSWORD}) as smtp:
        section = email_section(
            dovecot, mailbox, smtp, owner=[EMAIL_OWNER], policy="allowlist", allow=[EMAIL_ADA]
        )
        settings = {
            "channels": {"approval_timeout": APPROVAL_TIMEOUT, "email": section},
            "llm": llm_settings(llm),
        }
        live = start_daemon(root, settings=settings)
        status = live.daemon.hub.statuses["email"]
        wait_for(lambda: status.state == "running", "the channel running")
        wait_for(lambda: live.daemon.state.get_meta("channels.email.uid.INBOX"), "INBOX seen")
        asks_for_everything(llm)
        dovecot.append(
            mailbox,
            mail(f"Ada <{EMAIL_ADA}>", mailbox, "What did the doctor say? And the guest room?"),
        )
        wait_for(lambda: smtp.to(EMAIL_ADA), "Ada's answer")
    assert_narrowed(llm, ROOM)
