"""The email adapter, driving aioimaplib against a real Dovecot and aiosmtplib against a real
aiosmtpd, both on loopback: what arrives, what is skipped, what is remembered, how replies
thread, and how each failure is classed."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import channel_support
from email_servers import PASSWORD, Dovecot, SmtpServer, body, mail
from memvault.channels.base import (
    ChannelError,
    ChannelFatalError,
    Inbound,
    MessageRejectedError,
    Outbound,
)
from memvault.channels.email import EmailAdapter, html_to_text, stable_id, strip_quoted
from memvault.config import EmailSettings
from waiting import WAIT

OWNER = "owner@example.org"


class MemoryState(channel_support.MemoryState):
    """The hub's state.db in memory, read as the email adapter keeps its UIDs."""

    def handled(self, folder: str = "INBOX") -> int:
        """The last UID the adapter handled in ``folder`` (-1 before it looked)."""
        value = self.values.get(f"uid.{folder}")
        return int(value.split(":")[1]) if value else -1


@pytest.fixture(scope="module")
def dovecot() -> Iterator[Dovecot]:
    with Dovecot() as server:
        yield server


@pytest.fixture
def mailbox(dovecot: Dovecot) -> str:
    """A fresh mailbox for each test: the agent's address."""
    return dovecot.new_mailbox()


@pytest.fixture
def smtp(dovecot: Dovecot, mailbox: str) -> Iterator[SmtpServer]:
    with SmtpServer(dovecot.cert, dovecot.key, users={mailbox: PASSWORD}) as server:
        yield server


def settings_for(
    dovecot: Dovecot, mailbox: str, smtp: SmtpServer | None = None, **overrides: Any
) -> EmailSettings:
    values: dict[str, Any] = {
        "address": mailbox,
        "username": mailbox,
        "imap_host": "127.0.0.1",
        "imap_port": dovecot.port,
        "imap_security": "starttls",
        "smtp_host": "127.0.0.1",
        "smtp_port": smtp.port if smtp else 1,
        "smtp_security": "starttls",
        "ca_file": str(dovecot.cert),
        "poll_seconds": 1,
        "password_env": "AGENT_MAIL_PASSWORD",
    }
    return EmailSettings(**{**values, **overrides})


def run(
    settings: EmailSettings,
    scenario: Callable[[EmailAdapter], Awaitable[None]],
    *,
    state: MemoryState | None = None,
    password: str = PASSWORD,
) -> None:
    """Run ``scenario`` with an adapter, closed afterwards."""

    async def main() -> None:
        adapter = EmailAdapter(settings, password, state=state or MemoryState())
        try:
            await scenario(adapter)
        finally:
            await adapter.close()

    asyncio.run(main())


async def until(check: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def receive(
    adapter: EmailAdapter,
    state: MemoryState,
    deliver: Callable[[], list[int]],
    *,
    folder: str = "INBOX",
    resumed: bool = False,
) -> list[Inbound]:
    """Start the adapter, deliver mail once it looked at ``folder`` (at once when it
    ``resumed`` from a saved UID), and collect what it handed over until it handled the
    last UID ``deliver`` returned; then stop it."""
    received: list[Inbound] = []
    before = state.get(f"uid.{folder}")

    async def handler(inbound: Inbound) -> None:
        received.append(inbound)

    def looked() -> bool:  # the first look at a folder saves where it starts reading
        return resumed or state.get(f"uid.{folder}") not in (None, before)

    task = asyncio.create_task(adapter.start(handler))
    try:
        await until(lambda: looked() or task.done(), "the first look")
        if task.done():
            task.result()
        uids = await asyncio.to_thread(deliver)
        await until(lambda: state.handled(folder) >= max(uids) or task.done(), "the mail")
        if task.done():
            task.result()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return received


def appending(
    dovecot: Dovecot, mailbox: str, *messages: bytes, folder: str = "INBOX"
) -> Callable[[], list[int]]:
    """A ``deliver`` that appends ``messages`` to ``folder``."""
    return lambda: [dovecot.append(mailbox, m, folder) for m in messages]


# -- connecting ----------------------------------------------------------------------------------


@pytest.mark.parametrize("security", ["starttls", "tls", "none"])
def test_identify_logs_in_over_each_kind_of_connection(
    dovecot: Dovecot, mailbox: str, security: str
) -> None:
    with SmtpServer(
        dovecot.cert, dovecot.key, security=security, users={mailbox: PASSWORD}
    ) as smtp:
        port = dovecot.tls_port if security == "tls" else dovecot.port
        settings = settings_for(
            dovecot, mailbox, smtp, imap_security=security, imap_port=port, smtp_security=security
        )

        async def scenario(adapter: EmailAdapter) -> None:
            assert await adapter.identify() == mailbox
            await adapter.send(Outbound(OWNER, f"over {security}"))

        run(settings, scenario)
        (sent,) = smtp.to(OWNER)
        assert body(sent).strip() == f"over {security}"
        assert smtp.received[0].login == mailbox


def test_a_refused_imap_login_is_fatal_and_names_the_variable_not_the_password(
    dovecot: Dovecot, mailbox: str, smtp: SmtpServer
) -> None:
    async def scenario(adapter: EmailAdapter) -> None:
        with pytest.raises(ChannelFatalError) as caught:
            await adapter.identify()
        message = str(caught.value)
        assert "$AGENT_MAIL_PASSWORD" in message and "AUTHENTICATIONFAILED" in message
        assert "wrong-secret" not in message
        with pytest.raises(ChannelFatalError):
            await adapter.start(_ignore)

    run(settings_for(dovecot, mailbox, smtp), scenario, password="wrong-secret")


def test_a_refused_smtp_login_is_fatal(dovecot: Dovecot, mailbox: str) -> None:
    with SmtpServer(dovecot.cert, dovecot.key, users={mailbox: "another password"}) as smtp:

        async def scenario(adapter: EmailAdapter) -> None:
            with pytest.raises(ChannelFatalError, match=r"SMTP server .* refused the login"):
                await adapter.identify()
            with pytest.raises(ChannelFatalError, match="AGENT_MAIL_PASSWORD"):
                await adapter.send(Outbound(OWNER, "hello"))

        run(settings_for(dovecot, mailbox, smtp), scenario)
        assert smtp.received == []


def test_an_unreachable_server_is_transient_and_an_unreachable_smtp_does_not_stop_receiving(
    dovecot: Dovecot, mailbox: str
) -> None:
    async def scenario(adapter: EmailAdapter) -> None:
        assert await adapter.identify() == mailbox  # SMTP down: logged, receiving can start
        with pytest.raises(ChannelError) as caught:
            await adapter.send(Outbound(OWNER, "hello"))
        assert not isinstance(caught.value, (ChannelFatalError, MessageRejectedError))

    run(settings_for(dovecot, mailbox, smtp=None), scenario)  # port 1: refused

    closed = settings_for(dovecot, mailbox, imap_port=_closed_port())

    async def nothing_there(adapter: EmailAdapter) -> None:
        with pytest.raises(ChannelError) as caught:
            await adapter.identify()
        assert not isinstance(caught.value, ChannelFatalError)

    run(closed, nothing_there)


def test_a_server_that_never_answers_times_out_as_a_transient_error(
    dovecot: Dovecot, mailbox: str
) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(silent.accept()[0]), daemon=True).start()

    async def scenario(adapter: EmailAdapter) -> None:
        adapter.timeout = 0.5
        with pytest.raises(ChannelError, match="did not answer") as caught:
            await adapter.identify()
        assert not isinstance(caught.value, ChannelFatalError)

    try:
        run(settings_for(dovecot, mailbox, imap_port=silent.getsockname()[1]), scenario)
    finally:
        for connection in accepted:
            connection.close()
        silent.close()


def test_an_untrusted_certificate_is_fatal_and_points_at_ca_file(
    dovecot: Dovecot, mailbox: str
) -> None:
    for security, port in (("starttls", dovecot.port), ("tls", dovecot.tls_port)):
        settings = settings_for(
            dovecot, mailbox, imap_security=security, imap_port=port, ca_file=""
        )

        async def scenario(adapter: EmailAdapter) -> None:
            with pytest.raises(ChannelFatalError, match="ca_file"):
                await adapter.identify()

        run(settings, scenario)


def test_a_password_in_the_clear_is_refused_for_a_remote_server(
    dovecot: Dovecot, mailbox: str
) -> None:
    settings = settings_for(dovecot, mailbox, imap_host="imap.example.org", imap_security="none")

    async def scenario(adapter: EmailAdapter) -> None:
        with pytest.raises(ChannelFatalError, match="in the clear"):
            await adapter.identify()

    run(settings, scenario)


def test_a_missing_folder_is_fatal(dovecot: Dovecot, mailbox: str) -> None:
    async def scenario(adapter: EmailAdapter) -> None:
        with pytest.raises(ChannelFatalError, match=r"'Nowhere'.*folders"):
            await adapter.start(_ignore)

    run(settings_for(dovecot, mailbox, folders=["INBOX", "Nowhere"]), scenario)


# -- receiving -----------------------------------------------------------------------------------


def test_only_new_mail_arrives_and_a_new_adapter_reads_on_where_the_last_stopped(
    dovecot: Dovecot, mailbox: str
) -> None:
    dovecot.append(mailbox, mail(OWNER, mailbox, "old news", subject="old"))
    state = MemoryState()
    settings = settings_for(dovecot, mailbox)

    async def first(adapter: EmailAdapter) -> None:
        got = await receive(
            adapter, state, appending(dovecot, mailbox, mail(OWNER, mailbox, "/tasks"))
        )
        assert [m.text for m in got] == ["/tasks"]

    run(settings, first, state=state)
    assert state.values["uid.INBOX"].endswith(":2")
    # Mail that arrives while nothing watches is read by the next adapter, once.
    dovecot.append(mailbox, mail(OWNER, mailbox, "/status", subject="while away"))

    async def second(adapter: EmailAdapter) -> None:
        got = await receive(
            adapter,
            state,
            appending(dovecot, mailbox, mail(OWNER, mailbox, "/help")),
            resumed=True,
        )
        assert [m.text for m in got] == ["/status", "/help"]

    run(settings, second, state=state)


def test_a_message_arrives_with_its_sender_thread_and_words(dovecot: Dovecot, mailbox: str) -> None:
    state = MemoryState()
    raw = mail(
        "Ada Lovelace <Ada.Lovelace@Example.ORG>",
        mailbox,
        "Please book the dentist for Tuesday.",
        subject="Dentist",
        message_id="<first.1@client.test>",
        in_reply_to="<earlier@client.test>",
    )

    async def scenario(adapter: EmailAdapter) -> None:
        (got,) = await receive(adapter, state, appending(dovecot, mailbox, raw))
        assert got.channel == "email"
        assert (got.chat_id, got.sender_id) == ("ada.lovelace@example.org",) * 2
        assert got.sender_name == "Ada Lovelace"
        assert got.text == "Subject: Dentist\n\nPlease book the dentist for Tuesday."
        assert got.message_id == "first.1@client.test"
        assert got.platform_message_id == "<first.1@client.test>"
        assert got.reply_to == "<earlier@client.test>"
        assert got.sent_at.tzinfo is not None and not got.forwarded
        assert got.chat_type == "private" and got.attachments == ()

    run(settings_for(dovecot, mailbox), scenario, state=state)
    # Read with BODY.PEEK: the message is still unread in the owner's mail client.
    assert "\\Seen" not in dovecot.flags(mailbox)[0]


def test_quoted_history_and_signatures_never_reach_the_agent(
    dovecot: Dovecot, mailbox: str
) -> None:
    plain = (
        "Yes, Tuesday at 10 works.\n\n-- \nAda Lovelace\nAnalytical Engines Ltd\n\n"
        "On Mon, 3 Nov 2025 at 09:12, Agent <agent@example.org> wrote:\n"
        "> Shall I book the dentist?\n> -- \n> agent\n"
    )
    gmail_html = (
        '<div dir="ltr">Make it <b>11</b> instead.</div><br>'
        '<div class="gmail_quote"><div class="gmail_attr">On Mon, Nov 3, 2025 at 9:12 AM '
        "Agent &lt;agent@example.org&gt; wrote:<br></div>"
        '<blockquote class="gmail_quote"><div>Shall I book the dentist?</div>'
        "<blockquote>older words</blockquote></blockquote></div>"
    )
    outlook = (
        "Cancel it please.\n\n________________________________\n"
        "From: Agent <agent@example.org>\nSent: Monday, November 3, 2025 09:12\n"
        "To: Ada\nSubject: Dentist\n\nShall I book the dentist?\n"
    )
    messages = [
        mail(OWNER, mailbox, plain, subject="Re: Dentist"),
        mail(OWNER, mailbox, None, html=gmail_html, subject="Re: Dentist"),
        mail(OWNER, mailbox, outlook, subject="RE: Dentist"),
    ]

    flowed = (  # RFC 3676, as Thunderbird and Apple Mail write it
        f"From: {OWNER}\r\nTo: {mailbox}\r\nSubject: Re: Dentist\r\n"
        "Content-Type: text/plain; charset=utf-8; format=flowed\r\n\r\n"
        "A line the client \r\nwrapped for me.\r\n"
    ).encode()
    forward = (
        "FYI, see below.\n\n---------- Forwarded message ---------\nFrom: Bank\n\n"
        "> Your invoice is due on Friday.\n-- \nThe Bank"
    )
    messages.append(flowed)
    messages.append(mail(OWNER, mailbox, forward, subject="Fwd: invoice"))

    async def scenario(adapter: EmailAdapter) -> None:
        got = await receive(adapter, state, appending(dovecot, mailbox, *messages))
        assert [m.text for m in got[:4]] == [
            "Yes, Tuesday at 10 works.",
            "Make it 11 instead.",
            "Cancel it please.",
            "A line the client wrapped for me.",
        ]
        # A forward is someone else's words, kept whole: never the owner's command.
        assert got[4].forwarded and got[4].text == f"Subject: Fwd: invoice\n\n{forward}"
        assert got[3].message_id != got[4].message_id  # no Message-ID: folder, UIDVALIDITY, UID

    state = MemoryState()
    run(settings_for(dovecot, mailbox), scenario, state=state)


def test_mail_not_for_the_agent_is_skipped_and_never_read_again(
    dovecot: Dovecot, mailbox: str
) -> None:
    skipped = [
        mail(mailbox, OWNER, "a copy of what we sent"),
        mail(OWNER, mailbox, "I am away", headers={"Auto-Submitted": "auto-replied"}),
        mail("news@example.org", mailbox, "Weekly digest", headers={"Precedence": "bulk"}),
        mail("list@example.org", mailbox, "[list] thread", headers={"Precedence": "list"}),
        mail("MAILER-DAEMON@example.org", mailbox, "Undelivered Mail Returned to Sender"),
        mail(OWNER, mailbox, "Out of office", headers={"X-Autoreply": "yes"}),
    ]
    kept = mail(OWNER, mailbox, "a person writes", headers={"Auto-Submitted": "no"})
    state = MemoryState()

    async def scenario(adapter: EmailAdapter) -> None:
        got = await receive(adapter, state, appending(dovecot, mailbox, *skipped, kept))
        assert [m.text for m in got] == ["Subject: Hello\n\na person writes"]

    run(settings_for(dovecot, mailbox), scenario, state=state)
    assert state.handled() == len(skipped) + 1


def test_attachments_arrive_and_download_returns_their_bytes(
    dovecot: Dovecot, mailbox: str
) -> None:
    pdf = b"%PDF-1.7 the contract"
    photo = b"\x89PNG\r\n\x1a\n a photo"
    raw = mail(
        OWNER,
        mailbox,
        "the signed contract and a photo",
        attachments=[("contract.pdf", pdf, "application/pdf"), ("desk.png", photo, "image/png")],
    )
    big = mail(OWNER, mailbox, "too big", attachments=[("big.bin", b"x" * 2048, "application/x")])
    state = MemoryState()

    async def scenario(adapter: EmailAdapter) -> None:
        first, second = await receive(adapter, state, appending(dovecot, mailbox, raw, big))
        document, image = first.attachments
        assert (document.kind, document.name, document.mime) == (
            "document",
            "contract.pdf",
            "application/pdf",
        )
        assert (image.kind, image.name, image.size) == ("photo", "desk.png", len(photo))
        assert await adapter.download(document) == pdf
        assert await adapter.download(image) == photo
        # A new adapter (after a restart) fetches the message again from the server.
        fresh = EmailAdapter(adapter.settings, PASSWORD, state=state)
        assert await fresh.download(document) == pdf
        with pytest.raises(MessageRejectedError, match="max_attachment_mb"):
            await adapter.download(second.attachments[0])

    run(settings_for(dovecot, mailbox, max_attachment_mb=0.001), scenario, state=state)


def test_every_configured_folder_is_watched(dovecot: Dovecot, mailbox: str) -> None:
    dovecot.create_folder(mailbox, "Agent Tasks")
    state = MemoryState()

    def deliver() -> list[int]:
        dovecot.append(mailbox, mail(OWNER, mailbox, "/tasks"))
        return [dovecot.append(mailbox, mail(OWNER, mailbox, "/status"), "Agent Tasks")]

    async def scenario(adapter: EmailAdapter) -> None:
        got = await receive(adapter, state, deliver, folder="Agent Tasks")
        await until(lambda: state.handled("INBOX") >= 1, "the inbox")
        assert "/status" in [m.text for m in got]

    run(settings_for(dovecot, mailbox, folders=["INBOX", "Agent Tasks"]), scenario, state=state)


def test_without_idle_the_folder_is_polled(dovecot: Dovecot, mailbox: str) -> None:
    state = MemoryState()

    async def scenario(adapter: EmailAdapter) -> None:
        got = await receive(
            adapter, state, appending(dovecot, mailbox, mail(OWNER, mailbox, "/help"))
        )
        assert [m.text for m in got] == ["/help"]

    run(settings_for(dovecot, mailbox, idle=False), scenario, state=state)


def test_idle_hands_over_new_mail_at_once(dovecot: Dovecot, mailbox: str) -> None:
    state = MemoryState()
    hour = 3600

    async def scenario(adapter: EmailAdapter) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        got = await receive(
            adapter, state, appending(dovecot, mailbox, mail(OWNER, mailbox, "/help"))
        )
        assert [m.text for m in got] == ["/help"]
        assert loop.time() - started < hour / 2  # polling would have waited the hour

    run(settings_for(dovecot, mailbox, poll_seconds=hour), scenario, state=state)


def test_a_renumbered_folder_starts_again_from_its_newest_message(
    dovecot: Dovecot, mailbox: str
) -> None:
    dovecot.append(mailbox, mail(OWNER, mailbox, "before"))
    dovecot.append(mailbox, mail(OWNER, mailbox, "also before"))
    state = MemoryState()
    state.put("uid.INBOX", "12345:0")  # another UIDVALIDITY: these UIDs mean nothing now

    async def scenario(adapter: EmailAdapter) -> None:
        got = await receive(
            adapter, state, appending(dovecot, mailbox, mail(OWNER, mailbox, "/help"))
        )
        assert [m.text for m in got] == ["/help"]

    run(settings_for(dovecot, mailbox), scenario, state=state)
    assert not state.values["uid.INBOX"].startswith("12345:")


def test_a_dropped_connection_is_transient_and_mail_from_meanwhile_arrives_once() -> None:
    with Dovecot() as own:
        mailbox = own.new_mailbox()
        state = MemoryState()
        settings = settings_for(own, mailbox)
        seen: list[str] = []

        async def handler(inbound: Inbound) -> None:
            seen.append(inbound.text)

        async def scenario(adapter: EmailAdapter) -> None:
            task = asyncio.create_task(adapter.start(handler))
            await until(lambda: state.handled() >= 0, "the first look")
            await asyncio.to_thread(own.append, mailbox, mail(OWNER, mailbox, "/tasks"))
            await until(lambda: seen == ["/tasks"], "the first message")
            await asyncio.to_thread(own.stop)  # mid-IDLE: Dovecot says BYE and goes
            with pytest.raises(ChannelError) as caught:
                await asyncio.wait_for(task, WAIT)
            assert not isinstance(caught.value, ChannelFatalError)
            # While it is down, mail is delivered into the Maildir; the hub restarts start().
            await asyncio.to_thread(own.deliver, mailbox, mail(OWNER, mailbox, "/status"))
            await asyncio.to_thread(own.start)
            task = asyncio.create_task(adapter.start(handler))
            await until(lambda: len(seen) >= 2, "the mail from meanwhile")
            await asyncio.sleep(0.5)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            assert seen == ["/tasks", "/status"]

        run(settings, scenario, state=state)


# -- sending -------------------------------------------------------------------------------------


def test_a_reply_stays_in_the_thread_of_the_mail_it_answers(
    dovecot: Dovecot, mailbox: str, smtp: SmtpServer
) -> None:
    state = MemoryState()
    raw = mail(
        "Ada <ada@example.org>",
        mailbox,
        "When is the cert renewed?",
        subject="TLS cert",
        message_id="<question@client.test>",
        references="<root@client.test> <middle@client.test>",
        in_reply_to="<middle@client.test>",
    )
    settings = settings_for(dovecot, mailbox, smtp)

    async def scenario(adapter: EmailAdapter) -> None:
        (got,) = await receive(adapter, state, appending(dovecot, mailbox, raw))
        sent = await adapter.send(
            Outbound(got.chat_id, "The **cert** is renewed on Friday.", got.platform_message_id)
        )
        assert sent.message_ids and sent.message_ids[0].startswith("<")

    run(settings, scenario, state=state)

    # A new adapter on the same state (after a restart) threads its reply the same way.
    async def after_restart(adapter: EmailAdapter) -> None:
        await adapter.send(Outbound("ada@example.org", "And again.", "<question@client.test>"))

    run(settings, after_restart, state=state)
    first, second = smtp.to("ada@example.org")
    for reply in (first, second):
        assert reply["Subject"] == "Re: TLS cert"
        assert reply["In-Reply-To"] == "<question@client.test>"
        assert reply["References"].split() == [
            "<root@client.test>",
            "<middle@client.test>",
            "<question@client.test>",
        ]
        assert reply["From"] == mailbox and reply["To"] == "ada@example.org"
        assert reply["Auto-Submitted"] == "auto-replied"
    plain, html = body(first), body(first, "html")
    assert plain.strip() == "The cert is renewed on Friday."
    assert "<strong>cert</strong>" in html
    assert smtp.received[0].sender == mailbox


def test_a_new_mail_takes_its_first_line_as_subject_and_carries_the_files(
    dovecot: Dovecot, mailbox: str, smtp: SmtpServer, tmp_path: Path
) -> None:
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF-1.4 report")

    async def scenario(adapter: EmailAdapter) -> None:
        text = "Approval needed: **remember** that Ada likes tea\nReply `/approve ab12 once`."
        await adapter.send(Outbound("Ada@Example.org", text, media=(report,)))
        with pytest.raises(MessageRejectedError, match="cannot be read"):
            await adapter.send(Outbound(OWNER, "missing", media=(tmp_path / "gone.pdf",)))
        with pytest.raises(MessageRejectedError, match="not an email address"):
            await adapter.send(Outbound("4242", "to a Telegram id"))

    run(settings_for(dovecot, mailbox, smtp), scenario)
    (sent,) = smtp.to("ada@example.org")
    assert sent["Subject"] == "Approval needed: remember that Ada likes tea"
    assert sent["In-Reply-To"] is None and sent["Auto-Submitted"] == "auto-generated"
    (attached,) = list(sent.iter_attachments())
    assert attached.get_filename() == "report.pdf"
    assert attached.get_content() == b"%PDF-1.4 report"


def test_smtp_4xx_is_transient_and_a_refused_recipient_is_rejected(
    dovecot: Dovecot, mailbox: str, smtp: SmtpServer
) -> None:
    smtp.defer(1)
    smtp.refuse("nobody@example.org")

    async def scenario(adapter: EmailAdapter) -> None:
        with pytest.raises(ChannelError, match="451") as deferred:
            await adapter.send(Outbound(OWNER, "first try"))
        assert not isinstance(deferred.value, (MessageRejectedError, ChannelFatalError))
        await adapter.send(Outbound(OWNER, "first try"))  # the retry goes through
        with pytest.raises(MessageRejectedError, match="550"):
            await adapter.send(Outbound("nobody@example.org", "hello?"))

    run(settings_for(dovecot, mailbox, smtp), scenario)
    assert len(smtp.to(OWNER)) == 1 and smtp.to("nobody@example.org") == []


def test_raw_html_from_the_agent_is_escaped(
    dovecot: Dovecot, mailbox: str, smtp: SmtpServer
) -> None:
    async def scenario(adapter: EmailAdapter) -> None:
        await adapter.send(Outbound(OWNER, "Look: <script>alert(1)</script> [x](javascript:alert)"))

    run(settings_for(dovecot, mailbox, smtp), scenario)
    (sent,) = smtp.to(OWNER)
    html = body(sent, "html")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in html


# -- the text of a mail --------------------------------------------------------------------------


def test_strip_quoted_keeps_inline_answers_and_a_mail_that_is_only_a_quote() -> None:
    inline = (
        "On 3 Nov 2025, at 09:12, Agent <agent@example.org> wrote:\n"
        "> Tuesday or Wednesday?\n\nWednesday.\n\n> And the time?\n\nTen.\n"
    )
    assert strip_quoted(inline) == "Wednesday.\n\nTen."
    assert strip_quoted("> only a quote\n> nothing new") == "> only a quote\n> nothing new"
    # Words that merely look like an attribution, with no quote under them, stay.
    told = "On second thought, here is what I wrote:\nthe plan"
    assert strip_quoted(told) == told
    german = "Passt.\n\nAm 03.11.2025 um 09:12 schrieb Agent <agent@example.org>:\n> Termin?"
    assert strip_quoted(german) == "Passt."


def test_html_to_text_keeps_structure_and_drops_scripts() -> None:
    html = (
        "<html><head><style>p{color:red}</style><title>t</title></head><body>"
        "<h1>Plan</h1><p>First&nbsp;line<br>second line</p>"
        '<ul><li>one</li><li>two <a href="https://example.org/x">link</a></li></ul>'
        "<script>alert(1)</script><pre>code  kept\n  indented</pre></body></html>"
    )
    assert html_to_text(html) == (
        "Plan\n\nFirst line\nsecond line\n\n- one\n- two link (https://example.org/x)\n\n"
        "code  kept\n  indented"
    )


def test_stable_ids_are_safe_file_names_and_distinct() -> None:
    assert stable_id("<abc.123@mail.example.org>") == "abc.123@mail.example.org"
    odd = stable_id("<../../etc/passwd@evil>")
    assert "/" not in odd and not odd.startswith(".")
    assert odd != stable_id("<..-..-etc-passwd@evil>")
    assert len(stable_id("<" + "x" * 500 + "@host>")) < 100


async def _ignore(inbound: Inbound) -> None:
    return None


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
