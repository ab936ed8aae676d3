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

Errors, as the hub acts on them: a refused login is fatal (``doctor`` says
why); a dropped connection, a timeout or an SMTP 4xx is transient and
retried; an SMTP 5xx for the recipient or the message rejects that one
message.
"""

from __future__ import annotations

import asyncio
import base64
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
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from html.parser import HTMLParser
from typing import Any, TypeVar

import aioimaplib  # type: ignore[import-untyped]
import aiosmtplib
from markdown_it import MarkdownIt

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
)
from memvault.channels.format import to_plain_text
from memvault.config import EmailSettings

log = logging.getLogger(__name__)

T = TypeVar("T")

# IDLE is renewed this often: servers end it after 30 minutes, and a connection that
# died without a word (a NAT that forgot it) is found out at the renewal.
IDLE_RENEW = 300.0
# What a reply needs of the message it answers is kept in this many state slots.
THREAD_SLOTS = 512
# Raw messages kept in memory for download() right after they arrived.
RECENT_MESSAGES = 4
MAX_REFERENCES = 20
SUBJECT_CHARS = 78

_PARSER = BytesParser(policy=policy.default)
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])
_ADDRESS = re.compile(r"[^@\s<>\"]+@[^@\s<>\"]+")
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9._@+=-]+")
_REPLY_SUBJECT = re.compile(r"^\s*(re|aw|sv|antw)\s*(\[\d+\])?\s*:", re.IGNORECASE)
_FORWARD_SUBJECT = re.compile(r"^\s*(fwd?|wg|tr|rv)\s*:", re.IGNORECASE)
_FORWARD_MARKERS = (
    "---------- forwarded message ---------",
    "begin forwarded message:",
    "-------- original message --------",
)
_UID_STATE = re.compile(r"(\d+):(\d+)")
_TRANSIENT_LOGIN = ("[UNAVAILABLE]", "[SERVERBUG]", "[INUSE]", "[LIMIT]")


class EmailAdapter(Adapter):
    """One mailbox: IMAP folders watched for new mail, replies sent by SMTP."""

    name = "email"

    def __init__(self, settings: EmailSettings, password: str, *, state: AdapterState) -> None:
        self.settings = settings
        self.max_message_length = settings.max_message_length
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
        if not _ADDRESS.fullmatch(recipient):
            raise MessageRejectedError(f"{message.chat_id!r} is not an email address.")
        mail = self._compose(message, recipient)
        await self._smtp_send(mail, recipient)
        return Sent((str(mail["Message-ID"]),))

    async def download(self, attachment: Attachment) -> bytes:
        """The bytes of an attachment, fetched again from its message on the server."""
        self._check_settings()
        handle = _AttachmentHandle.parse(attachment.file_id)
        limit = int(self.settings.max_attachment_mb * 1024 * 1024)
        if attachment.size is not None and attachment.size > limit:
            raise MessageRejectedError(
                f"The attachment {attachment.name or handle.index} is larger than "
                f"max_attachment_mb ({self.settings.max_attachment_mb:g} MB)."
            )
        raw = self._recent.get(handle.message_key)
        if raw is None:
            raw = await self._fetch_again(handle)
        parts = list(_leaf_parts(_PARSER.parsebytes(raw)))
        if handle.index >= len(parts):
            raise MessageRejectedError(f"The message has no attachment {handle.index}.")
        return _part_bytes(parts[handle.index])

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
            mail = _PARSER.parsebytes(raw)
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
        name, address = _sender(mail)
        skip = self._skip_reason(mail, address)
        if skip is not None:
            log.info(
                "an email was skipped",
                extra={"folder": folder, "uid": uid, "reason": skip, "sender": address},
            )
            return None
        header_id = _header(mail, "Message-ID").strip("<> \t")
        platform_id = f"<{header_id}>" if _ADDRESS.fullmatch(header_id) else None
        subject = " ".join(_header(mail, "Subject").split())
        body = _body_text(mail)
        forwarded = bool(_FORWARD_SUBJECT.match(subject)) or any(
            marker in body.lower() for marker in _FORWARD_MARKERS
        )
        text = body.strip() if forwarded else strip_quoted(body)
        if subject and not _REPLY_SUBJECT.match(subject) and not text.startswith("/"):
            text = f"Subject: {subject}\n\n{text}".strip()
        key = platform_id or f"{folder}/{validity}/{uid}"
        handle = _AttachmentHandle(folder, validity, uid, 0)
        return Inbound(
            channel=self.name,
            message_id=stable_id(key),
            chat_id=address,
            sender_id=address,
            sender_name=name or address,
            text=text,
            sent_at=_sent_at(mail),
            reply_to=_header(mail, "In-Reply-To") or None,
            attachments=_attachments(mail, handle),
            forwarded=forwarded,
            platform_message_id=platform_id,
        )

    def _skip_reason(self, mail: EmailMessage, address: str) -> str | None:
        """Why a mail is not for the agent (ours, automatic, a bounce), or None."""
        if not address:
            return "no sender address"
        if address == self.address:
            return "sent from our own address"
        auto = _header(mail, "Auto-Submitted").split(";")[0].strip().lower()
        if auto and auto != "no":
            return f"Auto-Submitted: {auto}"
        precedence = _header(mail, "Precedence").strip().lower()
        if precedence in ("bulk", "list", "junk", "auto_reply"):
            return f"Precedence: {precedence}"
        if mail.get("X-Autoreply") is not None or mail.get("X-Autorespond") is not None:
            return "an automatic reply"
        local_part = address.partition("@")[0]
        if (
            mail.get_content_type() == "multipart/report"
            or local_part in ("mailer-daemon", "postmaster")
            or _header(mail, "Return-Path").strip() == "<>"
        ):
            return "a bounce"
        return None

    def _keep_recent(self, key: tuple[str, int, int], raw: bytes) -> None:
        self._recent[key] = raw
        while len(self._recent) > RECENT_MESSAGES:
            self._recent.popitem(last=False)

    async def _fetch_again(self, handle: _AttachmentHandle) -> bytes:
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
        references = _header(mail, "References").split()
        if not references and _header(mail, "In-Reply-To"):
            references = _header(mail, "In-Reply-To").split()[:1]
        value = {
            "id": message_id,
            "subject": " ".join(_header(mail, "Subject").split())[:300],
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
        reply_to = _one_line(message.reply_to or "")
        thread = self._thread(reply_to) if _ADDRESS.search(reply_to) else None
        if thread is not None:
            original = _one_line(str(thread.get("subject", ""))) or "(no subject)"
            subject = original if _REPLY_SUBJECT.match(original) else f"Re: {original}"
        else:
            subject = _subject_from(plain)
        mail["Subject"] = subject
        mail["Date"] = email.utils.format_datetime(datetime.now(UTC))
        mail["Message-ID"] = email.utils.make_msgid(domain=self._domain())
        if _ADDRESS.search(reply_to):
            references = [str(r) for r in (thread or {}).get("references", [])]
            mail["In-Reply-To"] = reply_to
            mail["References"] = " ".join([*references, reply_to][-MAX_REFERENCES:])
        # RFC 3834: an automatic answer says so, so other robots do not answer it back.
        mail["Auto-Submitted"] = "auto-replied" if _ADDRESS.search(reply_to) else "auto-generated"
        mail.set_content(plain or " ")
        if message.text.strip():
            mail.add_alternative(_html_document(message.text), subtype="html")
        for path in message.media:
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise MessageRejectedError(
                    f"The file {path} cannot be read: {exc.strerror}."
                ) from exc
            mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            maintype, _, subtype = mime.partition("/")
            mail.add_attachment(data, maintype=maintype, subtype=subtype, filename=path.name)
        return mail

    async def _smtp_send(self, mail: EmailMessage, recipient: str) -> None:
        with self._smtp_errors(f"the mail to {recipient}"):
            async with self._smtp() as smtp:
                await self._smtp_login(smtp)
                await smtp.send_message(mail, sender=self.address, recipients=[recipient])

    async def _smtp_check(self) -> None:
        with self._smtp_errors("the login"):
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

    @contextlib.contextmanager
    def _smtp_errors(self, what: str) -> Iterator[None]:
        """aiosmtplib's exceptions as the classes the hub acts on, each one sentence."""
        server = f"The SMTP server {self._smtp_host()}:{self.settings.smtp_port}"
        try:
            yield
        except aiosmtplib.SMTPAuthenticationError as exc:
            if exc.code < 500:
                raise ChannelError(
                    f"{server} could not check the login now: {_reply(exc)}"
                ) from exc
            raise ChannelFatalError(
                f"{server} refused the login for {self.username} ({_reply(exc)}); check the "
                f"username and the password in ${self.settings.password_env}."
            ) from None
        except aiosmtplib.SMTPRecipientsRefused as exc:
            refused = exc.recipients[0] if exc.recipients else None
            if refused is not None and refused.code < 500:
                raise ChannelError(f"{server} deferred {what}: {_reply(refused)}") from exc
            detail = _reply(refused) if refused is not None else "refused"
            raise MessageRejectedError(f"{server} refused {what}: {detail}") from exc
        except aiosmtplib.SMTPConnectResponseError as exc:
            raise ChannelError(f"{server} turned memvault away: {_reply(exc)}") from exc
        except aiosmtplib.SMTPResponseException as exc:
            if exc.code < 500:
                raise ChannelError(f"{server} deferred {what}: {_reply(exc)}") from exc
            raise MessageRejectedError(f"{server} refused {what}: {_reply(exc)}") from exc
        except aiosmtplib.SMTPNotSupported as exc:
            raise ChannelFatalError(
                f"{server} does not support what smtp_security asks for ({exc}); check "
                "smtp_security and smtp_port."
            ) from exc
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            if _certificate_refused(exc):
                raise ChannelFatalError(_certificate_sentence(server, "smtp")) from exc
            raise ChannelError(f"{server} could not be reached for {what}: {exc}") from exc

    # -- connections ---------------------------------------------------------------------

    async def _imap(self) -> _Imap:
        """A logged-in IMAP connection."""
        context = self._tls() if self.settings.imap_security != "none" else None
        return await _Imap.open(
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
        if not _ADDRESS.fullmatch(self.address):
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


class _Imap:
    """One logged-in IMAP connection (aioimaplib), its failures in the hub's classes."""

    def __init__(
        self, settings: EmailSettings, client: Any, lost: asyncio.Event, timeout: float
    ) -> None:
        self._settings = settings
        self._client = client
        self._lost = lost
        self._timeout = timeout
        self._server = f"The IMAP server {settings.imap_host}:{settings.imap_port}"

    @classmethod
    async def open(
        cls,
        settings: EmailSettings,
        username: str,
        password: str,
        context: ssl.SSLContext | None,
        *,
        timeout: float,
    ) -> _Imap:
        """Connect (TLS, STARTTLS or neither, as ``imap_security`` says) and log in."""
        lost = asyncio.Event()
        client = aioimaplib.IMAP4(
            host=settings.imap_host,
            port=settings.imap_port,
            timeout=timeout,
            conn_lost_cb=lambda _exc: lost.set(),
            ssl_context=context if settings.imap_security == "tls" else None,
        )
        imap = cls(settings, client, lost, timeout)
        try:
            await imap._call("the greeting", client.wait_hello_from_server())
            if settings.imap_security == "starttls":
                assert context is not None
                await imap._starttls(context)
            await imap._login(username, password)
        except BaseException:
            imap.close()
            raise
        return imap

    @property
    def can_idle(self) -> bool:
        """Whether the server offers IDLE."""
        return bool(self._client.has_capability("IDLE"))

    async def select(self, folder: str) -> tuple[int, int]:
        """Select ``folder``: its UIDVALIDITY and the UID its next message will have."""
        response = await self._call(f"the folder {folder}", self._client.select(_mailbox(folder)))
        text = _response_text(response)
        if response.result != "OK":
            raise ChannelFatalError(
                f"{self._server} cannot open the folder {folder!r} ({text}); check "
                "channels.email.folders."
            )
        validity = re.search(r"\[UIDVALIDITY (\d+)\]", text)
        next_uid = re.search(r"\[UIDNEXT (\d+)\]", text)
        if validity is None:
            raise ChannelError(f"{self._server} did not say the folder {folder}'s UIDVALIDITY.")
        if next_uid is None:  # required by RFC 3501, but asked for if missing
            found = await self.uids_after(0)
            return int(validity.group(1)), (max(found) + 1 if found else 1)
        return int(validity.group(1)), int(next_uid.group(1))

    async def uids_after(self, last: int) -> list[int]:
        """The UIDs above ``last`` in the selected folder, in order."""
        response = await self._call(
            "the search for new mail",
            self._client.uid_search("UID", f"{last + 1}:*", charset=None),
        )
        self._expect_ok(response, "the search for new mail")
        uids: set[int] = set()
        for line in response.lines[:-1]:
            uids.update(int(token) for token in bytes(line).split() if token.isdigit())
        return sorted(uid for uid in uids if uid > last)  # "n:*" also names the highest UID

    async def fetch(self, uid: int) -> bytes | None:
        """The whole message ``uid`` (None when it was deleted meanwhile); flags unchanged."""
        response = await self._call(
            f"the message {uid}", self._client.uid("fetch", str(uid), "(UID BODY.PEEK[])")
        )
        self._expect_ok(response, f"the message {uid}")
        for line in response.lines:
            if isinstance(line, bytearray):
                return bytes(line)
        return None

    async def idle(self, seconds: float) -> None:
        """Wait in IDLE until the server reports a change, or ``seconds`` passed."""
        queue = self._client.protocol.idle_queue
        while not queue.empty():  # reports from the last IDLE: the search since covered them
            queue.get_nowait()
        idling = await self._call("IDLE", self._client.idle_start(timeout=seconds))
        try:
            pushed = await self._call("IDLE", self._client.wait_server_push(timeout=seconds + 5))
        except ChannelError:
            if self._lost.is_set():
                raise
            pushed = []  # no word in all that time: renew
        goodbye = next((bytes(line) for line in pushed if bytes(line).startswith(b"BYE")), None)
        if goodbye is not None:  # the server is going away (a restart): leave, as it asks
            self.close()
            text = goodbye.decode("utf-8", errors="replace")
            raise ChannelError(f"{self._server} closed the connection: {text}")
        if self._client.has_pending_idle():
            self._client.idle_done()
        response = await self._call("the end of IDLE", asyncio.wait_for(idling, self._timeout))
        self._expect_ok(response, "IDLE")

    async def noop(self) -> None:
        """Let the server report what changed (polling)."""
        self._expect_ok(await self._call("NOOP", self._client.noop()), "NOOP")

    async def logout(self) -> None:
        """Say goodbye politely (a failure does not matter: the connection is closed)."""
        with contextlib.suppress(ChannelError):
            await self._call("LOGOUT", self._client.logout())
        self.close()

    def close(self) -> None:
        """Close the connection at once."""
        connecting = getattr(self._client, "_client_task", None)
        if connecting is not None and not connecting.done():
            connecting.cancel()
        transport = getattr(self._client.protocol, "transport", None)
        if transport is not None:
            transport.close()

    async def _starttls(self, context: ssl.SSLContext) -> None:
        """Upgrade the connection (aioimaplib has no STARTTLS of its own)."""
        protocol = self._client.protocol
        if not self._client.has_capability("STARTTLS"):
            raise ChannelFatalError(
                f"{self._server} does not offer STARTTLS; set imap_security = 'tls' "
                "(port 993) or check imap_port."
            )
        command = aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)
        response = await self._call("STARTTLS", protocol.execute(command))
        self._expect_ok(response, "STARTTLS")
        loop = asyncio.get_running_loop()
        protocol.transport = await self._call(
            "the TLS handshake",
            loop.start_tls(
                protocol.transport,
                protocol,
                context,
                server_hostname=self._settings.imap_host,
                ssl_handshake_timeout=self._timeout,
            ),
        )
        await self._call("the capabilities", protocol.capability())  # asked again over TLS

    async def _login(self, user: str, password: str) -> None:
        if self._client.has_capability("LOGINDISABLED"):
            raise ChannelFatalError(
                f"{self._server} refuses logins on an unencrypted connection; set "
                "imap_security = 'starttls' or 'tls'."
            )
        response = await self._call(
            "the login", self._client.login(aioimaplib.quoted(user), password)
        )
        if response.result == "OK":
            return
        text = _response_text(response)
        if any(code in text for code in _TRANSIENT_LOGIN):
            raise ChannelError(f"{self._server} cannot log in {user} now: {text}")
        raise ChannelFatalError(
            f"{self._server} refused the login for {user} ({text}); check the username and "
            f"the password in ${self._settings.password_env}."
        )

    async def _call(self, what: str, work: Awaitable[T]) -> T:
        """Await one IMAP exchange; a lost connection or a timeout is a ChannelError."""
        task = asyncio.ensure_future(work)
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            await asyncio.wait({task, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            if not task.done():
                task.cancel()
        if not task.done() or task.cancelled():
            raise ChannelError(f"{self._server} closed the connection during {what}.")
        try:
            return task.result()
        except (ChannelError, asyncio.CancelledError):
            raise
        except (TimeoutError, aioimaplib.CommandTimeout) as exc:
            raise ChannelError(f"{self._server} did not answer {what} in time.") from exc
        except (OSError, ssl.SSLError) as exc:
            if _certificate_refused(exc):
                raise ChannelFatalError(_certificate_sentence(self._server, "imap")) from exc
            raise ChannelError(f"{self._server} could not be reached for {what}: {exc}") from exc
        except aioimaplib.AioImapException as exc:
            raise ChannelError(f"{self._server} failed during {what}: {exc}") from exc

    def _expect_ok(self, response: Any, what: str) -> None:
        if response.result != "OK":
            raise ChannelError(f"{self._server} refused {what}: {_response_text(response)}")


@dataclass(frozen=True)
class _AttachmentHandle:
    """Where an attachment lives: its message (folder, UIDVALIDITY, UID) and its part."""

    folder: str
    validity: int
    uid: int
    index: int

    @property
    def message_key(self) -> tuple[str, int, int]:
        return (self.folder, self.validity, self.uid)

    def with_index(self, index: int) -> _AttachmentHandle:
        return _AttachmentHandle(self.folder, self.validity, self.uid, index)

    def __str__(self) -> str:
        return f"{self.validity}:{self.uid}:{self.index}:{self.folder}"

    @classmethod
    def parse(cls, file_id: str) -> _AttachmentHandle:
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


def _header(mail: Message, name: str) -> str:
    """A header's text ("" when absent or unreadable)."""
    try:
        value = mail.get(name)
    except Exception:  # a malformed header must not lose the message
        return ""
    return str(value).strip() if value is not None else ""


def _sender(mail: Message) -> tuple[str, str]:
    """The From: display name and address (lower case)."""
    name, address = email.utils.parseaddr(_header(mail, "From"))
    address = address.strip().lower()
    return name.strip(), address if _ADDRESS.fullmatch(address) else ""


def _sent_at(mail: Message) -> datetime:
    try:
        sent = email.utils.parsedate_to_datetime(_header(mail, "Date"))
    except (TypeError, ValueError, IndexError):
        return datetime.now(UTC)
    return sent if sent.tzinfo is not None else sent.replace(tzinfo=UTC)


def _body_text(mail: EmailMessage) -> str:
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
    return _part_bytes(part).decode("utf-8", errors="replace")


def _part_bytes(part: Message) -> bytes:
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


def _leaf_parts(mail: Message) -> Iterator[Message]:
    """Every part that carries content, in order; an attached message is one part."""
    if mail.get_content_type() == "message/rfc822":
        yield mail
    elif mail.is_multipart():
        for part in mail.get_payload():
            if isinstance(part, Message):
                yield from _leaf_parts(part)
    else:
        yield mail


def _attachments(mail: EmailMessage, handle: _AttachmentHandle) -> tuple[Attachment, ...]:
    body = mail.get_body(preferencelist=("plain", "html"))
    found: list[Attachment] = []
    for index, part in enumerate(_leaf_parts(mail)):
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
            subject = _header(inner, "Subject") if isinstance(inner, Message) else ""
            name = f"{subject or 'message'}.eml"
        found.append(
            Attachment(
                kind=_kind(mime),
                file_id=str(handle.with_index(index)),
                name=name,
                mime=mime,
                size=len(_part_bytes(part)),
            )
        )
    return tuple(found)


def _kind(mime: str) -> str:
    major = mime.partition("/")[0]
    return {"image": "photo", "audio": "audio", "video": "video"}.get(major, "document")


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


def _html_document(markdown: str) -> str:
    """The agent's Markdown as an HTML mail body (raw HTML in it is escaped)."""
    body = _MARKDOWN.render(markdown)
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head>'
        f'<body style="font-family: sans-serif">\n{body}</body></html>\n'
    )


def _subject_from(plain: str) -> str:
    """A subject for a mail that starts a thread: its first line, shortened."""
    first = next((line.strip() for line in plain.splitlines() if line.strip()), "")
    first = _one_line(first)
    if len(first) > SUBJECT_CHARS:
        first = first[: SUBJECT_CHARS - 1].rsplit(" ", 1)[0].rstrip(",.;:") + "…"
    return first or "(no subject)"


def _one_line(text: str) -> str:
    """Text fit for a header: one line, no control characters."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def _mailbox(folder: str) -> str:
    """A folder name as an IMAP argument: modified UTF-7 (RFC 3501), quoted."""
    encoded: list[str] = []
    pending: list[str] = []

    def shift() -> None:
        if pending:
            utf16 = "".join(pending).encode("utf-16-be")
            encoded.append("&" + base64.b64encode(utf16).decode().rstrip("=").replace("/", ","))
            encoded.append("-")
            pending.clear()

    for char in folder:
        if 0x20 <= ord(char) <= 0x7E:
            shift()
            encoded.append("&-" if char == "&" else char)
        else:
            pending.append(char)
    shift()
    return str(aioimaplib.quoted("".join(encoded)))


def _thread_slot(message_id: str) -> str:
    digest = hashlib.sha1(message_id.encode("utf-8", errors="replace")).hexdigest()
    return f"thread.{int(digest[:8], 16) % THREAD_SLOTS}"


def _response_text(response: Any) -> str:
    return " ".join(
        bytes(line).decode("utf-8", errors="replace")
        for line in response.lines
        if isinstance(line, bytes | bytearray)
    ).strip()


def _reply(exc: aiosmtplib.SMTPResponseException) -> str:
    return f"{exc.code} {' '.join(str(exc.message).split())}"


def _certificate_refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(
            seen
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _certificate_sentence(server: str, kind: str) -> str:
    return (
        f"{server}'s TLS certificate is not trusted; if it is self-signed, name it in "
        f"channels.email.ca_file (or check {kind}_host)."
    )


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
