"""One logged-in IMAP connection (aioimaplib) for the email adapter, its failures in
the hub's classes.

:class:`ImapConnection` connects with TLS, STARTTLS or neither (as ``imap_security``
says), logs in, selects a folder, lists the UIDs above one, fetches a message without
touching its flags, and waits in IDLE. Every exchange is bounded: a connection that
died, a server that does not answer or a refused certificate is a
:class:`~memvault.channels.base.ChannelError` (a refused login a
:class:`~memvault.channels.base.ChannelFatalError`), never a hang.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import ssl
from collections.abc import Awaitable
from typing import Any, TypeVar

import aioimaplib  # type: ignore[import-untyped]

from memvault.channels.base import ChannelError, ChannelFatalError
from memvault.config import EmailSettings

T = TypeVar("T")

_TRANSIENT_LOGIN = ("[UNAVAILABLE]", "[SERVERBUG]", "[INUSE]", "[LIMIT]")


class ImapConnection:
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
    ) -> ImapConnection:
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
            if certificate_refused(exc):
                raise ChannelFatalError(certificate_sentence(self._server, "imap")) from exc
            raise ChannelError(f"{self._server} could not be reached for {what}: {exc}") from exc
        except aioimaplib.AioImapException as exc:
            raise ChannelError(f"{self._server} failed during {what}: {exc}") from exc

    def _expect_ok(self, response: Any, what: str) -> None:
        if response.result != "OK":
            raise ChannelError(f"{self._server} refused {what}: {_response_text(response)}")


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


def _response_text(response: Any) -> str:
    return " ".join(
        bytes(line).decode("utf-8", errors="replace")
        for line in response.lines
        if isinstance(line, bytes | bytearray)
    ).strip()


def certificate_refused(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a TLS certificate the system does not trust."""
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


def certificate_sentence(server: str, kind: str) -> str:
    """The sentence for an untrusted certificate of ``server`` (``kind``: imap or smtp)."""
    return (
        f"{server}'s TLS certificate is not trusted; if it is self-signed, name it in "
        f"channels.email.ca_file (or check {kind}_host)."
    )
