"""Real mail servers on loopback for the email channel's tests.

- :class:`Dovecot`: Debian's Dovecot IMAP server (``apt-get install dovecot-imapd``) run in
  the foreground (``dovecot -F -c``) from a config of its own in a temporary folder: free
  loopback ports for plain/STARTTLS and for TLS, a self-signed certificate made with
  ``openssl``, a passwd-file of users, Maildirs. It needs neither systemd nor /etc. Run as
  root it drops privileges as a packaged Dovecot does (``dovenull``, ``dovecot``) and keeps
  the mail as ``nobody``; run as anyone else, everything runs as that user.
- :class:`SmtpServer`: aiosmtpd (a real SMTP server) with STARTTLS, TLS or neither and
  AUTH, which keeps every mail it accepted and can refuse or defer recipients.
- :func:`mail`: a message as a mail client writes it.
"""

from __future__ import annotations

import contextlib
import getpass
import grp
import imaplib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, make_msgid
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from waiting import WAIT

PASSWORD = "correct horse battery staple"
NOBODY = 65534  # the mail's owner when Dovecot runs as root (it refuses root for mail)


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def dovecot_binary() -> str:
    """Dovecot's path; the test fails (not skips) without it: CI must run these tests."""
    found = shutil.which("dovecot") or shutil.which("dovecot", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise RuntimeError("Dovecot is not installed: apt-get install -y dovecot-imapd")
    return found


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost: (cert.pem, key.pem)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    key.chmod(0o644)  # read by Dovecot's config process, whoever runs it
    return cert, key


class Dovecot:
    """A Dovecot of our own on two free loopback ports; start/stop/restart keep the ports,
    the users and the mail."""

    def __init__(self, mailboxes: int = 40) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="memvault-dovecot-"))
        self.root.chmod(0o755)  # Dovecot's unprivileged processes reach their files here
        self.port = free_port()  # plain, and STARTTLS
        self.tls_port = free_port()
        self.cert, self.key = make_certificate(self.root)
        self._free = [f"agent-{n}@example.org" for n in range(mailboxes)]
        self.users = self.root / "users"
        self.users.write_text("".join(f"{a}:{{PLAIN}}{PASSWORD}::::::\n" for a in self._free))
        self.users.chmod(0o644)
        self.mail_root = self.root / "mail"
        self.mail_root.mkdir()
        self.as_root = os.geteuid() == 0
        self.mail_uid = NOBODY if self.as_root else os.geteuid()
        self.mail_gid = NOBODY if self.as_root else os.getegid()
        self._chown(self.mail_root)
        self.config = self.root / "dovecot.conf"
        self.config.write_text(self._config())
        self.log = self.root / "dovecot.log"
        self.process: subprocess.Popen[bytes] | None = None

    def _config(self) -> str:
        me, my_group = getpass.getuser(), grp.getgrgid(os.getegid()).gr_name
        login_user, internal_user = ("dovenull", "dovecot") if self.as_root else (me, me)
        internal_group = "dovecot" if self.as_root else my_group
        return f"""
base_dir = {self.root}/run
state_dir = {self.root}/state
log_path = {self.root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = yes
ssl_cert = <{self.cert}
ssl_key = <{self.key}
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
default_login_user = {login_user}
default_internal_user = {internal_user}
default_internal_group = {internal_group}
mailbox_idle_check_interval = 1 secs
mail_location = maildir:{self.mail_root}/%d/%n
passdb {{
  driver = passwd-file
  args = scheme=PLAIN {self.users}
}}
userdb {{
  driver = passwd-file
  args = {self.users}
  default_fields = uid={self.mail_uid} gid={self.mail_gid} home={self.mail_root}/%d/%n
}}
# No growing delay after a refused login (tests refuse some on purpose): without its
# socket, the auth process keeps no penalties.
service anvil {{
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.tls_port}
    ssl = yes
  }}
}}
"""

    # -- the daemon ------------------------------------------------------------------------

    def start(self) -> Dovecot:
        """Run ``dovecot -F -c <conf>`` and wait until it takes connections."""
        assert self.process is None, "already running"
        self.process = subprocess.Popen(
            [dovecot_binary(), "-F", "-c", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stop() ends its children too
        )
        deadline = time.monotonic() + WAIT
        while True:
            try:
                # A slow greeting is waited for; a refused connection is tried again.
                left = max(deadline - time.monotonic(), 0.1)
                with imaplib.IMAP4("127.0.0.1", self.port, timeout=left):
                    return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Dovecot did not start: {self.tail()}") from None
                time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server (its connections are cut) and wait until it is gone."""
        if self.process is None:
            return
        # Every process at once, as a machine going down: left to the master, an IMAP
        # process in IDLE would wait ten seconds before it says BYE.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Dovecot:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def tail(self) -> str:
        """The end of Dovecot's log, for a failure's message."""
        try:
            return self.log.read_text()[-2000:]
        except OSError:
            return "(no log)"

    # -- users and mail ----------------------------------------------------------------------

    def new_mailbox(self) -> str:
        """An address no test used yet, logging in with :data:`PASSWORD`.

        Users are written before Dovecot starts: it rereads a changed passwd-file only
        now and then, and meanwhile refuses the new user (and then delays the next login).
        """
        if not self._free:
            raise RuntimeError("all the test mailboxes are taken; make more")
        return self._free.pop(0)

    def client(self, address: str, password: str = PASSWORD) -> imaplib.IMAP4:
        """A logged-in imaplib connection (the test's own, not the adapter's)."""
        client = imaplib.IMAP4("127.0.0.1", self.port, timeout=WAIT)
        client.login(address, password)
        return client

    def append(self, address: str, message: bytes, folder: str = "INBOX") -> int:
        """Put a message in a folder over IMAP (as a mail server delivers it); its UID."""
        client = self.client(address)
        try:
            status, data = client.append(_quoted(folder), None, None, message)
            assert status == "OK", data
            text = data[0].decode() if data and data[0] else ""
            return int(text.split("APPENDUID ")[1].split()[1].rstrip("]"))
        finally:
            client.logout()

    def create_folder(self, address: str, folder: str) -> None:
        client = self.client(address)
        try:
            status, data = client.create(_quoted(folder))
            assert status == "OK", data
        finally:
            client.logout()

    def delete_folder(self, address: str, folder: str) -> None:
        client = self.client(address)
        try:
            status, data = client.delete(_quoted(folder))
            assert status == "OK", data
        finally:
            client.logout()

    def deliver(self, address: str, message: bytes) -> None:
        """Drop a message into the INBOX's Maildir, as a local delivery agent does (works
        while Dovecot is stopped)."""
        local, _, domain = address.partition("@")
        maildir = self.mail_root / domain / local
        for sub in ("", "tmp", "new", "cur"):
            (maildir / sub).mkdir(parents=True, exist_ok=True)
            self._chown(maildir / sub)
        self._chown(self.mail_root / domain)
        name = f"{time.time_ns()}.P{os.getpid()}.memvault-test"
        staged = maildir / "tmp" / name
        staged.write_bytes(message)
        self._chown(staged)
        staged.rename(maildir / "new" / name)

    def flags(self, address: str, folder: str = "INBOX") -> list[str]:
        """Each message's flags, in UID order."""
        client = self.client(address)
        try:
            client.select(_quoted(folder), readonly=True)
            status, data = client.uid("FETCH", "1:*", "(FLAGS)")
            assert status == "OK", data
            return [item.decode() for item in data if isinstance(item, bytes)]
        finally:
            client.logout()

    def _chown(self, path: Path) -> None:
        if self.as_root:
            os.chown(path, self.mail_uid, self.mail_gid)


def _quoted(folder: str) -> str:
    """A folder name as imaplib must be given it (it does not quote names itself)."""
    return '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- SMTP ------------------------------------------------------------------------------------


@dataclass
class Received:
    """One mail the SMTP server accepted."""

    sender: str
    recipients: list[str]
    message: EmailMessage
    login: str | None


@dataclass
class _Handler:
    """aiosmtpd's hooks: keep what is sent; refuse or defer recipients when told to."""

    received: list[Received] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # address -> "550 5.1.1 ..."
    deferrals: list[str] = field(default_factory=list)  # the next RCPTs answered with these
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_RCPT(  # noqa: N802 (aiosmtpd's name)
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        with self.lock:
            if self.deferrals:
                return self.deferrals.pop(0)
        if address.lower() in self.refused:
            return self.refused[address.lower()]
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(  # noqa: N802 (aiosmtpd's name)
        self, server: SMTP, session: Session, envelope: Envelope
    ) -> str:
        content = envelope.original_content or b""
        message = BytesParser(policy=policy.default).parsebytes(content)
        assert isinstance(message, EmailMessage)
        login = session.auth_data.login.decode() if session.auth_data else None
        with self.lock:
            self.received.append(
                Received(str(envelope.mail_from), list(envelope.rcpt_tos), message, login)
            )
        return "250 Message accepted for delivery"


class SmtpServer:
    """aiosmtpd on a free loopback port with ``security`` (starttls | tls | none), asking
    for ``users``' logins when it offers TLS."""

    def __init__(
        self,
        cert: Path,
        key: Path,
        *,
        security: str = "starttls",
        users: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.security = security
        self.users = users or {}
        self.handler = _Handler()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        # aiosmtpd sees TLS only after STARTTLS: with implicit TLS (or none) AUTH is offered
        # without it, and then not required (aiosmtpd warns about requiring it).
        options: dict[str, Any] = {
            "authenticator": self._authenticate,
            "auth_required": bool(self.users) and security == "starttls",
            "auth_require_tls": security == "starttls",
        }
        if security == "starttls":
            options.update(tls_context=context, require_starttls=True)
        elif security == "tls":
            options.update(ssl_context=context)
        self.controller = Controller(
            self.handler, hostname="127.0.0.1", port=self.port, ready_timeout=WAIT, **options
        )

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        ok = (
            isinstance(data, LoginPassword)
            and self.users.get(data.login.decode()) == data.password.decode()
        )
        return AuthResult(success=ok, handled=False, auth_data=data if ok else None)

    @property
    def received(self) -> list[Received]:
        with self.handler.lock:
            return list(self.handler.received)

    def to(self, address: str) -> list[EmailMessage]:
        """The mails delivered to ``address``."""
        return [r.message for r in self.received if address in r.recipients]

    def refuse(self, address: str, reply: str = "550 5.1.1 No such user here") -> None:
        self.handler.refused[address.lower()] = reply

    def defer(self, times: int = 1, reply: str = "451 4.3.0 Try again later") -> None:
        with self.handler.lock:
            self.handler.deferrals.extend([reply] * times)

    def __enter__(self) -> SmtpServer:
        self.controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.controller.stop()


# -- messages --------------------------------------------------------------------------------


def mail(
    sender: str,
    to: str,
    text: str | None = "hello",
    *,
    subject: str = "Hello",
    html: str | None = None,
    message_id: str | None = None,
    in_reply_to: str | None = None,
    references: str | None = None,
    headers: dict[str, str] | None = None,
    attachments: Sequence[tuple[str, bytes, str]] = (),
    sent_at: datetime | None = None,
) -> bytes:
    """A message as a mail client writes it (``text`` and/or ``html``, attachments as
    ``(name, bytes, mime)``)."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = format_datetime(sent_at or datetime.now(UTC))
    message["Message-ID"] = message_id or make_msgid(domain="client.test")
    if in_reply_to:
        message["In-Reply-To"] = in_reply_to
    if references:
        message["References"] = references
    for name, value in (headers or {}).items():
        message[name] = value
    if text is not None:
        message.set_content(text)
        if html is not None:
            message.add_alternative(html, subtype="html")
    elif html is not None:
        message.set_content(html, subtype="html")
    for name, data, mime in attachments:
        maintype, _, subtype = mime.partition("/")
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return message.as_bytes()


def body(message: EmailMessage, kind: str = "plain") -> str:
    """The text of a mail's ``plain`` or ``html`` part."""
    part = message.get_body((kind,))
    assert part is not None, f"no {kind} part"
    return str(part.get_content())


def email_section(dovecot: Dovecot, mailbox: str, smtp: SmtpServer, **extra: Any) -> dict[str, Any]:
    """``[channels.email]`` enabled on the test's servers (STARTTLS both ways), ``mailbox``
    the agent's own, polled every second; ``extra`` adds or overrides keys."""
    return {
        "enabled": True,
        "owner": ["owner@example.org"],
        "address": mailbox,
        "imap_host": "127.0.0.1",
        "imap_port": dovecot.port,
        "imap_security": "starttls",
        "smtp_host": "127.0.0.1",
        "smtp_port": smtp.port,
        "smtp_security": "starttls",
        "username": mailbox,
        "ca_file": str(dovecot.cert),
        "poll_seconds": 1,
        **extra,
    }
