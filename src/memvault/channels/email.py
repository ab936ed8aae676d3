"""Email: IMAP in (IDLE where the server offers it, polling otherwise), SMTP out.

Receiving. One watcher per folder in ``folders`` holds an IMAP connection
(aioimaplib) on its folder. It asks for the UIDs above the last one it
handled, hands each message to the hub's handler and only then remembers
that UID, with the folder's UIDVALIDITY, in the adapter's state: a crash
redelivers (the hub drops the duplicate by its Message-ID), a restart
resumes. A first start, or a folder the server renumbered (its UIDVALIDITY
changed), begins at the newest message, so old mail is never replayed.
Between checks a watcher waits in IDLE, renewed every few minutes, or
sleeps ``poll_seconds``. Messages are read with ``BODY.PEEK``: the mailbox's
flags are left as they were.

What the agent sees is the plain-text part (else the HTML part as text)
without its quoted history (an "On ... wrote:" line and the ``>`` lines,
an Outlook header block) and without the signature after ``-- ``. Mail from
our own address, automatic replies (``Auto-Submitted``, ``Precedence:
bulk``/``list``) and bounces are skipped. A sender is their address in
lower case: it is the chat, the sender id and what ``owner`` and ``allow``
list.

Sending. Replies go out by SMTP (aiosmtplib) as plain text with an HTML
alternative rendered from the agent's Markdown, in the thread of the
message they answer: ``In-Reply-To``, ``References`` and a "Re:" subject.
What a reply needs of the message it answers is kept in the adapter's
state by Message-ID, in a fixed number of slots, so it survives a restart
and never grows.

Reading and writing the mail itself (no server involved) is
:mod:`memvault.channels.email_text`; the IMAP connection is
:mod:`memvault.channels.email_imap`.

Errors, as the hub acts on them: a refused login is fatal (``doctor`` says
why); a dropped connection, a timeout or an SMTP 4xx is transient and
retried; an SMTP 5xx for the recipient or the message rejects that one
message.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import ipaddress
import json
import logging
import mimetypes
import re
import ssl
from collections import OrderedDict
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

import aiosmtplib

from memvault.channels.base import (
    Adapter,
    AdapterState,
    Attachment,
    ChannelError,
    ChannelFatalError,
    Inbound,
    InboundHandler,
    MessageRejectedError,
    Outbound,
    Sent,
    read_media,
    without_cause,
)
from memvault.channels.email_imap import (
    ImapConnection,
    certificate_refused,
    certificate_sentence,
)
from memvault.channels.email_text import (
    ADDRESS,
    REPLY_SUBJECT,
    AttachmentHandle,
    attachments,
    body_text,
    header,
    html_document,
    html_to_text,
    is_forwarded,
    leaf_parts,
    one_line,
    parse_mail,
    part_bytes,
    sender,
    sent_at,
    stable_id,
    strip_quoted,
    subject_from,
)
from memvault.channels.format import to_plain_text
from memvault.config import EmailSettings

# What tests and other modules import from here; the mail text lives in email_text.
__all__ = ["EmailAdapter", "html_to_text", "stable_id", "strip_quoted"]

log = logging.getLogger(__name__)

# IDLE is renewed this often: servers end it after 30 minutes, and a connection that
# died without a word (a NAT that forgot it) is found out at the renewal.
IDLE_RENEW = 300.0
# What a reply needs of the message it answers is kept in this many state slots.
THREAD_SLOTS = 512
# Raw messages kept in memory for download() right after they arrived.
RECENT_MESSAGES = 4
MAX_REFERENCES = 20

_UID_STATE = re.compile(r"(\d+):(\d+)")


class EmailAdapter(Adapter):
    """One mailbox: IMAP folders watched for new mail, replies sent by SMTP."""

    name = "email"
    settings: EmailSettings

    def __init__(self, settings: EmailSettings, password: str, *, state: AdapterState) -> None:
        super().__init__(settings)
        self.address = (settings.address or settings.username).strip().lower()
        self.username = settings.username or self.address
        self.timeout = 20.0  # seconds for one IMAP command or SMTP exchange
        self._password = password
        self._state = state
        self._recent: OrderedDict[tuple[str, int, int], bytes] = OrderedDict()

    # -- the adapter protocol ------------------------------------------------------------

    async def identify(self) -> str:
        """The mailbox's address, once the IMAP server took the login (ChannelFatalError
        when it refused it) and the SMTP server did too (when it can be reached)."""
        self._check_settings()
        imap = await self._imap()
        await imap.logout()
        try:
            await self._smtp_check()
        except ChannelFatalError:
            raise
        except ChannelError as exc:  # sending retries on its own; receiving can start
            log.warning("the SMTP server cannot be reached", extra={"error": exc.message})
        return self.address

    async def start(self, handler: InboundHandler) -> None:
        """Watch every folder until cancelled; a message's UID is remembered only after
        ``handler`` returned."""
        self._check_settings()
        if not self.settings.folders:
            raise ChannelFatalError("channels.email.folders is empty; name INBOX at least.")
        watchers = [
            asyncio.create_task(self._watch(folder, handler), name=f"email:{folder}")
            for folder in self.settings.folders
        ]
        try:
            done, _ = await asyncio.wait(watchers, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # the first watcher's failure is the adapter's
        finally:
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)

    async def send(self, message: Outbound) -> Sent:
        """Send one mail to ``chat_id``, in the thread of ``reply_to`` when it names a
        message we received."""
        self._check_settings()
        recipient = message.chat_id.strip().lower()
        if not ADDRESS.fullmatch(recipient):
            raise MessageRejectedError(f"{message.chat_id!r} is not an email address.")
        mail = self._compose(message, recipient)
        await self._smtp_send(mail, recipient)
        return Sent((str(mail["Message-ID"]),))

    async def download(self, attachment: Attachment) -> bytes:
        """The bytes of an attachment, fetched again from its message on the server."""
        self._check_settings()
        handle = AttachmentHandle.parse(attachment.file_id)
        limit = int(self.settings.max_attachment_mb * 1024 * 1024)
        if attachment.size is not None and attachment.size > limit:
            raise MessageRejectedError(
                f"The attachment {attachment.name or handle.index} is larger than "
                f"max_attachment_mb ({self.settings.max_attachment_mb:g} MB)."
            )
        raw = self._recent.get(handle.message_key)
        if raw is None:
            raw = await self._fetch_again(handle)
        parts = list(leaf_parts(parse_mail(raw)))
        if handle.index >= len(parts):
            raise MessageRejectedError(f"The message has no attachment {handle.index}.")
        return part_bytes(parts[handle.index])

    # -- receiving -----------------------------------------------------------------------

    async def _watch(self, folder: str, handler: InboundHandler) -> None:
        """Hand over one folder's new mail, then wait for more, until cancelled."""
        imap = await self._imap()
        try:
            validity, next_uid = await imap.select(folder)
            last = self._start_after(folder, validity, next_uid)
            idle = self.settings.idle and imap.can_idle
            while True:
                for uid in await imap.uids_after(last):
                    raw = await imap.fetch(uid)
                    if raw is not None:
                        await self._deliver(folder, validity, uid, raw, handler)
                    last = uid
                    self._state.put(f"uid.{folder}", f"{validity}:{uid}")
                if idle:
                    await imap.idle(IDLE_RENEW)
                else:
                    await asyncio.sleep(self.settings.poll_seconds)
                    await imap.noop()
        finally:
            imap.close()

    def _start_after(self, folder: str, validity: int, next_uid: int) -> int:
        """The UID to read on from: the one handled last, or (first start, or a folder
        the server renumbered) the newest one now, so old mail is not replayed."""
        saved = _UID_STATE.fullmatch(self._state.get(f"uid.{folder}") or "")
        if saved and int(saved.group(1)) == validity:
            return int(saved.group(2))
        if saved:
            log.warning(
                "the IMAP server renumbered a folder; reading on from its newest message",
                extra={"folder": folder, "uidvalidity": validity},
            )
        newest = max(next_uid - 1, 0)
        self._state.put(f"uid.{folder}", f"{validity}:{newest}")
        return newest

    async def _deliver(
        self, folder: str, validity: int, uid: int, raw: bytes, handler: InboundHandler
    ) -> None:
        """Parse one message and hand it over, unless it is to be skipped."""
        try:
            mail = parse_mail(raw)
            inbound = self._inbound(mail, folder, validity, uid)
        except Exception:  # one unreadable message must not stop the mailbox
            log.exception("an email could not be read", extra={"folder": folder, "uid": uid})
            return
        if inbound is None:
            return
        if inbound.attachments:
            self._keep_recent((folder, validity, uid), raw)
        if inbound.platform_message_id:
            self._remember_thread(inbound.platform_message_id, mail)
        await handler(inbound)

    def _inbound(self, mail: EmailMessage, folder: str, validity: int, uid: int) -> Inbound | None:
        """The mail as an :class:`Inbound`, or None when it is not for the agent."""
        name, address = sender(mail)
        skip = self._skip_reason(mail, address)
        if skip is not None:
            log.info(
                "an email was skipped",
                extra={"folder": folder, "uid": uid, "reason": skip, "sender": address},
            )
            return None
        header_id = header(mail, "Message-ID").strip("<> \t")
        platform_id = f"<{header_id}>" if ADDRESS.fullmatch(header_id) else None
        subject = " ".join(header(mail, "Subject").split())
        body = body_text(mail)
        forwarded = is_forwarded(subject, body)
        text = body.strip() if forwarded else strip_quoted(body)
        if subject and not REPLY_SUBJECT.match(subject) and not text.startswith("/"):
            text = f"Subject: {subject}\n\n{text}".strip()
        key = platform_id or f"{folder}/{validity}/{uid}"
        handle = AttachmentHandle(folder, validity, uid, 0)
        return Inbound(
            channel=self.name,
            message_id=stable_id(key),
            chat_id=address,
            sender_id=address,
            sender_name=name or address,
            text=text,
            sent_at=sent_at(mail),
            reply_to=header(mail, "In-Reply-To") or None,
            attachments=attachments(mail, handle),
            forwarded=forwarded,
            platform_message_id=platform_id,
        )

    def _skip_reason(self, mail: EmailMessage, address: str) -> str | None:
        """Why a mail is not for the agent (ours, automatic, a bounce), or None."""
        if not address:
            return "no sender address"
        if address == self.address:
            return "sent from our own address"
        auto = header(mail, "Auto-Submitted").split(";")[0].strip().lower()
        if auto and auto != "no":
            return f"Auto-Submitted: {auto}"
        precedence = header(mail, "Precedence").strip().lower()
        if precedence in ("bulk", "list", "junk", "auto_reply"):
            return f"Precedence: {precedence}"
        if mail.get("X-Autoreply") is not None or mail.get("X-Autorespond") is not None:
            return "an automatic reply"
        local_part = address.partition("@")[0]
        if (
            mail.get_content_type() == "multipart/report"
            or local_part in ("mailer-daemon", "postmaster")
            or header(mail, "Return-Path").strip() == "<>"
        ):
            return "a bounce"
        return None

    def _keep_recent(self, key: tuple[str, int, int], raw: bytes) -> None:
        self._recent[key] = raw
        while len(self._recent) > RECENT_MESSAGES:
            self._recent.popitem(last=False)

    async def _fetch_again(self, handle: AttachmentHandle) -> bytes:
        imap = await self._imap()
        try:
            validity, _ = await imap.select(handle.folder)
            if validity != handle.validity:
                raise MessageRejectedError(
                    f"The folder {handle.folder} was renumbered on the server; the message "
                    "with this attachment can no longer be found."
                )
            raw = await imap.fetch(handle.uid)
            if raw is None:
                raise MessageRejectedError("The message with this attachment was deleted.")
            await imap.logout()
            return raw
        finally:
            imap.close()

    # -- threads ---------------------------------------------------------------------------

    def _remember_thread(self, message_id: str, mail: EmailMessage) -> None:
        """Keep what a reply to ``message_id`` needs: its subject and references."""
        references = header(mail, "References").split()
        if not references and header(mail, "In-Reply-To"):
            references = header(mail, "In-Reply-To").split()[:1]
        value = {
            "id": message_id,
            "subject": " ".join(header(mail, "Subject").split())[:300],
            "references": references[-(MAX_REFERENCES - 1) :],
        }
        self._state.put(_thread_slot(message_id), json.dumps(value))

    def _thread(self, message_id: str) -> dict[str, Any] | None:
        saved = self._state.get(_thread_slot(message_id))
        if not saved:
            return None
        with contextlib.suppress(ValueError):
            value = json.loads(saved)
            if isinstance(value, dict) and value.get("id") == message_id:
                return value
        return None

    # -- sending -----------------------------------------------------------------------------

    def _compose(self, message: Outbound, recipient: str) -> EmailMessage:
        """The mail: plain text and HTML from the Markdown, threaded, with the media."""
        plain = to_plain_text(message.text)
        mail = EmailMessage()
        mail["From"] = self.address
        mail["To"] = recipient
        reply_to = one_line(message.reply_to or "")
        thread = self._thread(reply_to) if ADDRESS.search(reply_to) else None
        if thread is not None:
            original = one_line(str(thread.get("subject", ""))) or "(no subject)"
            subject = original if REPLY_SUBJECT.match(original) else f"Re: {original}"
        else:
            subject = subject_from(plain)
        mail["Subject"] = subject
        mail["Date"] = email.utils.format_datetime(datetime.now(UTC))
        mail["Message-ID"] = email.utils.make_msgid(domain=self._domain())
        if ADDRESS.search(reply_to):
            references = [str(r) for r in (thread or {}).get("references", [])]
            mail["In-Reply-To"] = reply_to
            mail["References"] = " ".join([*references, reply_to][-MAX_REFERENCES:])
        # RFC 3834: an automatic answer says so, so other robots do not answer it back.
        mail["Auto-Submitted"] = "auto-replied" if ADDRESS.search(reply_to) else "auto-generated"
        mail.set_content(plain or " ")
        if message.text.strip():
            mail.add_alternative(html_document(message.text), subtype="html")
        for path in message.media:
            data = read_media(path)
            mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            maintype, _, subtype = mime.partition("/")
            mail.add_attachment(data, maintype=maintype, subtype=subtype, filename=path.name)
        return mail

    async def _smtp_send(self, mail: EmailMessage, recipient: str) -> None:
        with self.errors(f"the mail to {recipient}"):
            async with self._smtp() as smtp:
                await self._smtp_login(smtp)
                await smtp.send_message(mail, sender=self.address, recipients=[recipient])

    async def _smtp_check(self) -> None:
        with self.errors("the login"):
            async with self._smtp() as smtp:
                await self._smtp_login(smtp)

    def _smtp(self) -> aiosmtplib.SMTP:
        security = self.settings.smtp_security
        return aiosmtplib.SMTP(
            hostname=self._smtp_host(),
            port=self.settings.smtp_port,
            use_tls=security == "tls",
            start_tls=security == "starttls",
            tls_context=self._tls() if security != "none" else None,
            local_hostname=self._domain(),
            timeout=self.timeout,
        )

    async def _smtp_login(self, smtp: aiosmtplib.SMTP) -> None:
        if smtp.is_ehlo_or_helo_needed:  # after STARTTLS the server is asked again
            await smtp.ehlo()
        if self.username and self._password and smtp.supports_extension("auth"):
            await smtp.login(self.username, self._password)

    def _classify(self, exc: Exception, what: str) -> ChannelError | None:
        """The SMTP server's answers and failures (aiosmtplib's exceptions) as the classes
        the hub acts on, each one sentence; the IMAP connection maps its own
        (:meth:`ImapConnection._call`)."""
        server = f"The SMTP server {self._smtp_host()}:{self.settings.smtp_port}"
        if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
            if exc.code < 500:
                return ChannelError(f"{server} could not check the login now: {_reply(exc)}")
            return without_cause(
                ChannelFatalError(
                    f"{server} refused the login for {self.username} ({_reply(exc)}); check "
                    f"the username and the password in ${self.settings.password_env}."
                )
            )
        if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
            refused = exc.recipients[0] if exc.recipients else None
            if refused is not None and refused.code < 500:
                return ChannelError(f"{server} deferred {what}: {_reply(refused)}")
            detail = _reply(refused) if refused is not None else "refused"
            return MessageRejectedError(f"{server} refused {what}: {detail}")
        if isinstance(exc, aiosmtplib.SMTPConnectResponseError):
            return ChannelError(f"{server} turned memvault away: {_reply(exc)}")
        if isinstance(exc, aiosmtplib.SMTPResponseException):
            if exc.code < 500:
                return ChannelError(f"{server} deferred {what}: {_reply(exc)}")
            return MessageRejectedError(f"{server} refused {what}: {_reply(exc)}")
        if isinstance(exc, aiosmtplib.SMTPNotSupported):
            return ChannelFatalError(
                f"{server} does not support what smtp_security asks for ({exc}); check "
                "smtp_security and smtp_port."
            )
        if isinstance(exc, aiosmtplib.SMTPException | OSError | TimeoutError):
            if certificate_refused(exc):
                return ChannelFatalError(certificate_sentence(server, "smtp"))
            return ChannelError(f"{server} could not be reached for {what}: {exc}")
        return None

    # -- connections ---------------------------------------------------------------------

    async def _imap(self) -> ImapConnection:
        """A logged-in IMAP connection."""
        context = self._tls() if self.settings.imap_security != "none" else None
        return await ImapConnection.open(
            self.settings, self.username, self._password, context, timeout=self.timeout
        )

    def _tls(self) -> ssl.SSLContext:
        """The system's CAs, and ``ca_file`` besides (a self-signed server)."""
        context = ssl.create_default_context()
        if self.settings.ca_file:
            try:
                context.load_verify_locations(cafile=self.settings.ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ChannelFatalError(
                    f"channels.email.ca_file {self.settings.ca_file} cannot be read: {exc}."
                ) from exc
        return context

    def _check_settings(self) -> None:
        """Settings that cannot work, or would send the password in the clear to another
        machine, stop the channel with the reason."""
        if not self.settings.imap_host:
            raise ChannelFatalError("channels.email.imap_host is empty; name the IMAP server.")
        if not ADDRESS.fullmatch(self.address):
            raise ChannelFatalError(
                "channels.email.address (or username) must be the mailbox's address."
            )
        for kind, host, security in (
            ("imap", self.settings.imap_host, self.settings.imap_security),
            ("smtp", self._smtp_host(), self.settings.smtp_security),
        ):
            if security == "none" and not _is_loopback(host):
                raise ChannelFatalError(
                    f"channels.email.{kind}_security = 'none' sends the password in the clear; "
                    f"it is allowed only for a server on this machine, not {host}."
                )

    def _smtp_host(self) -> str:
        return self.settings.smtp_host or self.settings.imap_host

    def _domain(self) -> str:
        return self.address.rpartition("@")[2] or "localhost"


def _thread_slot(message_id: str) -> str:
    digest = hashlib.sha1(message_id.encode("utf-8", errors="replace")).hexdigest()
    return f"thread.{int(digest[:8], 16) % THREAD_SLOTS}"


def _reply(exc: aiosmtplib.SMTPResponseException) -> str:
    return f"{exc.code} {' '.join(str(exc.message).split())}"


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
