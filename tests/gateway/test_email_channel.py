"""The email channel end to end: a real daemon, the real IMAP and SMTP libraries, Debian's
Dovecot and aiosmtpd on loopback, and a fake model. The owner's mail is answered once, in
its thread; strangers are held; failures are retried or reported; a restart neither
replays nor drops."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from email.message import EmailMessage
from typing import Any

import pytest

from channel_support import APPROVAL_TIMEOUT
from email_servers import PASSWORD, Dovecot, SmtpServer, body, email_section, mail
from gateway_support import Live, StartDaemon
from llm_fakes import FakeOpenAI, llm_settings
from memvault.errors import NotFoundError
from waiting import WAIT, wait_for

OWNER = "owner@example.org"
STRANGER = "eve@example.net"


@pytest.fixture(scope="module")
def dovecot() -> Iterator[Dovecot]:
    with Dovecot() as server:
        yield server


@pytest.fixture
def mailbox(dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh mailbox for the agent; its password in $MEMVAULT_EMAIL_PASSWORD."""
    monkeypatch.setenv("MEMVAULT_EMAIL_PASSWORD", PASSWORD)
    return dovecot.new_mailbox()


@pytest.fixture
def smtp(dovecot: Dovecot, mailbox: str) -> Iterator[SmtpServer]:
    with SmtpServer(dovecot.cert, dovecot.key, users={mailbox: PASSWORD}) as server:
        yield server


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def channels(
    dovecot: Dovecot,
    mailbox: str,
    smtp: SmtpServer,
    llm: FakeOpenAI | None = None,
    **email: Any,
) -> dict[str, Any]:
    """Settings with ``[channels.email]`` on the test's servers (STARTTLS both ways)."""
    # Addresses are compared in lower case.
    section = email_section(dovecot, mailbox, smtp, owner=["Owner@Example.org"], **email)
    out: dict[str, Any] = {"channels": {"approval_timeout": APPROVAL_TIMEOUT, "email": section}}
    if llm is not None:
        out["llm"] = llm_settings(llm)
    return out


def running(live: Live) -> None:
    """Wait until the channel watches its mailbox (mail from before it is not read)."""
    status = live.daemon.hub.statuses["email"]
    wait_for(lambda: status.state == "running", "the channel running")
    state = live.daemon.state
    wait_for(lambda: state.get_meta("channels.email.uid.INBOX"), "the first look at INBOX")


def texts(smtp: SmtpServer, address: str) -> list[str]:
    """The plain text of each mail delivered to ``address``."""
    return [_plain(message) for message in smtp.to(address)]


def inbox_status(live: Live) -> list[str]:
    rows = live.daemon.state.query("SELECT status FROM channel_inbox ORDER BY id")
    return [str(r["status"]) for r in rows]


def _plain(message: EmailMessage) -> str:
    return body(message).strip()


def test_an_owner_mail_runs_the_agent_and_one_reply_comes_back_in_its_thread(
    start_daemon: StartDaemon, dovecot: Dovecot, mailbox: str, smtp: SmtpServer, llm: FakeOpenAI
) -> None:
    llm.reply("The **cert** is renewed on Friday.")
    live = start_daemon(settings=channels(dovecot, mailbox, smtp, llm))
    running(live)
    question = mail(
        "Ada Owner <Owner@Example.org>",
        mailbox,
        "When is the cert renewed?\n\nOn Mon, 3 Nov 2025 at 09:12, Agent wrote:\n> Hello!\n",
        subject="Re: TLS",
        message_id="<q1@client.test>",
        references="<hello@agent.test>",
    )
    dovecot.append(mailbox, question)

    (reply,) = wait_for(lambda: smtp.to(OWNER), "the reply")
    assert _plain(reply) == "The cert is renewed on Friday."
    assert reply["Subject"] == "Re: TLS" and reply["In-Reply-To"] == "<q1@client.test>"
    assert reply["References"].split() == ["<hello@agent.test>", "<q1@client.test>"]
    assert reply["From"] == mailbox
    # The model saw the new words only, once, with the session's channel.
    users = [m for m in llm.requests[0]["messages"] if m["role"] == "user"]
    assert [m["content"] for m in users] == ["When is the cert renewed?"]
    assert "over email" in llm.requests[0]["messages"][0]["content"]
    session = live.daemon.sessions.get(f"email:{OWNER}")
    said = [(m.role, m.text) for m in live.daemon.sessions.messages(session.id)]
    assert said == [
        ("user", "When is the cert renewed?"),
        ("assistant", "The **cert** is renewed on Friday."),
    ]
    assert wait_for(lambda: inbox_status(live) == ["done"], "the inbox row done")
    time.sleep(1.5)  # another IDLE round: still one reply, one model call
    assert len(smtp.to(OWNER)) == 1 and len(llm.requests) == 1


def test_commands_answer_without_a_model_and_attachments_are_saved(
    start_daemon: StartDaemon, dovecot: Dovecot, mailbox: str, smtp: SmtpServer
) -> None:
    live = start_daemon(settings=channels(dovecot, mailbox, smtp))
    live.daemon.runtime.tasks.create("Renew the TLS certificate", priority="high")
    running(live)
    dovecot.append(mailbox, mail(OWNER, mailbox, "/tasks", subject="tasks please"))
    wait_for(lambda: smtp.to(OWNER), "the answer to /tasks")
    contract = b"%PDF-1.7 the signed contract"
    dovecot.append(
        mailbox,
        mail(
            OWNER,
            mailbox,
            "the contract",
            subject="Contract",
            attachments=[("contract.pdf", contract, "application/pdf")],
        ),
    )
    wait_for(lambda: len(smtp.to(OWNER)) == 2, "the answer to the contract")
    tasks, plain = texts(smtp, OWNER)
    assert "Renew the TLS certificate" in tasks
    assert "No language model is configured" in plain
    saved = [p for p in (live.vault / "Attachments" / "email").rglob("*") if p.is_file()]
    assert [p.read_bytes() for p in saved] == [contract] and saved[0].name.endswith(".pdf")
    journal = "\n".join(live.daemon.runtime.journal.sections()["Commands Received"])
    assert "email owner@example.org: Subject: Contract" in journal
    assert "![[Attachments/email/" in journal
    # A send from a tool or the CLI ("owner") goes out at once, starting a thread.
    sent = live.daemon.hub.send("email", "owner", "Are you there?\n\nIt is **late**.", wait=WAIT)
    assert sent["status"] == "sent"
    latest = smtp.to(OWNER)[-1]
    assert latest["Subject"] == "Are you there?" and latest["In-Reply-To"] is None


def test_a_stranger_gets_nothing_under_quiet_and_the_owner_hears_once(
    start_daemon: StartDaemon, dovecot: Dovecot, mailbox: str, smtp: SmtpServer, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(dovecot, mailbox, smtp, llm))
    running(live)
    dovecot.append(mailbox, mail(f"Eve <{STRANGER}>", mailbox, "hi, who is this?"))
    dovecot.append(mailbox, mail(f"Eve <{STRANGER}>", mailbox, "hello??"))
    (notice,) = wait_for(lambda: texts(smtp, OWNER), "the owner's notice")
    wait_for(lambda: inbox_status(live) == ["held", "held"], "both held")
    time.sleep(1.0)
    assert smtp.to(STRANGER) == [] and len(smtp.to(OWNER)) == 1
    assert f"Eve (id {STRANGER})" in notice and f"/approve {STRANGER}" in notice
    assert llm.requests == []


def test_pairing_mails_the_stranger_a_code_the_owner_approves_by_mail(
    start_daemon: StartDaemon, dovecot: Dovecot, mailbox: str, smtp: SmtpServer, llm: FakeOpenAI
) -> None:
    live = start_daemon(settings=channels(dovecot, mailbox, smtp, llm, policy="pairing"))
    running(live)
    dovecot.append(mailbox, mail(f"Eve <{STRANGER}>", mailbox, "hi", subject="Hello there"))
    (code_mail,) = wait_for(lambda: smtp.to(STRANGER), "the pairing code")
    (notice,) = wait_for(lambda: smtp.to(OWNER), "the owner's notice")
    sender = live.daemon.hub.store.sender("email", STRANGER)
    assert sender is not None and sender.code
    shown = f"{sender.code[:4]}-{sender.code[4:]}"
    assert shown in _plain(code_mail) and code_mail["Subject"].startswith("Hello! I am")
    # The owner answers the notice by mail, quoting it as mail clients do.
    quoted = "\n".join(f"> {line}" for line in _plain(notice).splitlines())
    answer = f"/approve {shown}\n\nOn Mon, 3 Nov 2025 at 10:00, Agent wrote:\n{quoted}\n"
    dovecot.append(mailbox, mail(OWNER, mailbox, answer, subject=f"Re: {notice['Subject']}"))
    wait_for(lambda: len(smtp.to(OWNER)) == 2, "the approval's answer")
    assert texts(smtp, OWNER)[1].startswith("Approved Eve")
    approved = live.daemon.hub.store.sender("email", STRANGER)
    assert approved is not None and approved.status == "approved"
    llm.reply("Hello Eve.")
    dovecot.append(mailbox, mail(f"Eve <{STRANGER}>", mailbox, "can we talk now?"))
    wait_for(lambda: len(smtp.to(STRANGER)) == 2, "Eve's answer")
    assert texts(smtp, STRANGER)[1] == "Hello Eve."


def test_a_reply_that_failed_is_retried_and_a_refused_recipient_is_not(
    start_daemon: StartDaemon, dovecot: Dovecot, mailbox: str, smtp: SmtpServer, clock: Any
) -> None:
    live = start_daemon(settings=channels(dovecot, mailbox, smtp))
    running(live)
    smtp.defer(2)  # 451 for the first two tries
    dovecot.append(mailbox, mail(OWNER, mailbox, "/status"))
    hub = live.daemon.hub
    row = wait_for(lambda: [r for r in hub.store.outbox() if r.last_error], "a failed try")[0]
    assert row.status == "pending" and "451" in str(row.last_error)
    deadline = time.monotonic() + WAIT
    while not smtp.to(OWNER):
        assert time.monotonic() < deadline, "the reply was never retried"
        clock.set(clock.now() + timedelta(hours=1))
        time.sleep(0.3)
    # Delivered before the outbox row is marked sent: wait for the mark.
    sent = wait_for(lambda: hub.store.outbox(status="sent"), "the row marked sent")
    assert sent[0].attempts == 3
    # A 5xx for the recipient is final: one try, marked failed, never sent again.
    smtp.refuse(OWNER)
    dovecot.append(mailbox, mail(OWNER, mailbox, "/help"))
    failed = wait_for(lambda: hub.store.outbox(status="failed"), "the refused reply")
    assert failed[0].attempts == 1 and "550" in str(failed[0].last_error)
    clock.set(clock.now() + timedelta(hours=1))
    time.sleep(1.0)
    assert len(smtp.to(OWNER)) == 1 and len(hub.store.outbox(status="failed")) == 1


def test_a_dropped_imap_connection_is_retried_and_nothing_is_missed_or_doubled(
    start_daemon: StartDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMVAULT_EMAIL_PASSWORD", PASSWORD)
    with Dovecot() as own:
        mailbox = own.new_mailbox()
        with SmtpServer(own.cert, own.key, users={mailbox: PASSWORD}) as smtp:
            live = start_daemon(settings=channels(own, mailbox, smtp))
            running(live)
            own.append(mailbox, mail(OWNER, mailbox, "/help"))
            wait_for(lambda: smtp.to(OWNER), "the first answer")
            status = live.daemon.hub.statuses["email"]
            own.stop()  # mid-IDLE: the connection drops
            wait_for(lambda: status.state == "backoff", "the backoff")
            own.deliver(mailbox, mail(OWNER, mailbox, "/status"))  # arrives meanwhile
            own.start()
            wait_for(lambda: len(smtp.to(OWNER)) == 2, "the answer after the reconnect")
            time.sleep(1.5)
            help_text, status_text = texts(smtp, OWNER)
            assert "Commands:" in help_text and "open tasks" in status_text
            assert inbox_status(live) == ["done", "done"]
            assert status.state == "running" and status.restarts >= 1


def test_a_restart_neither_replays_nor_drops(
    start_daemon: StartDaemon, dovecot: Dovecot, mailbox: str, smtp: SmtpServer
) -> None:
    settings = channels(dovecot, mailbox, smtp)
    dovecot.append(mailbox, mail(OWNER, mailbox, "/help", subject="before memvault"))
    first = start_daemon(settings=settings)
    running(first)
    dovecot.append(mailbox, mail(OWNER, mailbox, "/tasks"))
    wait_for(lambda: smtp.to(OWNER), "the first answer")
    wait_for(lambda: inbox_status(first) == ["done"], "the first row done")
    first.stop()
    dovecot.append(mailbox, mail(OWNER, mailbox, "/status", subject="while it was down"))

    second = start_daemon(first.vault, settings=settings)
    wait_for(lambda: len(smtp.to(OWNER)) == 2, "the answer to the mail from meanwhile")
    time.sleep(1.5)
    tasks, status = texts(smtp, OWNER)
    assert tasks == "No open tasks." and "open tasks" in status
    assert inbox_status(second) == ["done", "done"]  # the mail from before memvault: never


def test_a_refused_login_stops_the_channel_and_doctor_says_why(
    start_daemon: StartDaemon,
    dovecot: Dovecot,
    mailbox: str,
    smtp: SmtpServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMVAULT_EMAIL_PASSWORD", "not the password")
    live = start_daemon(settings=channels(dovecot, mailbox, smtp))
    status = live.daemon.hub.statuses["email"]
    wait_for(lambda: status.state == "failed", "the failure")
    checks = {c.name: c for c in live.daemon.doctor().checks}
    assert checks["channel_email"].status == "error"
    assert "refused the login" in checks["channel_email"].message
    assert "MEMVAULT_EMAIL_PASSWORD" in checks["channel_email"].message
    assert "not the password" not in checks["channel_email"].message
    with pytest.raises(NotFoundError):
        live.daemon.sessions.get(f"email:{OWNER}")
