"""WhatsApp through Meta's Business Cloud API: a signed webhook in, the Graph API out.

WhatsApp cannot be polled: Meta POSTs every message to the app's webhook URL,
signed with the app secret (``X-Hub-Signature-256: sha256=<HMAC-SHA256 of the
raw body>``). The daemon serves that URL (:mod:`memvault.gateway.routes.whatsapp`)
and hands each body to :meth:`WhatsAppAdapter.receive_webhook`, which checks the
signature before it reads anything, and passes the messages to
:meth:`WhatsAppAdapter.start`, running on the hub's loop, which awaits the hub's
handler for each. The route answers 200 only after that: what Meta was told it
delivered is stored. A webhook that failed is delivered again (Meta retries for
days) with the same message ids (``wamid.…``), which the hub's inbox stores once.
The same URL answers Meta's subscription check (``GET ?hub.mode=subscribe
&hub.verify_token=…&hub.challenge=…``: the challenge, when the token is ours).

Replies go to ``POST /{version}/{phone_number_id}/messages`` with the access
token: text (the agent's Markdown in WhatsApp's ``*bold*`` / ``_italic_``
markup) quoting the message it answers (``context.message_id``), files uploaded
first (``POST /{phone_number_id}/media``) and sent by their media id, and
approval buttons as interactive reply buttons, whose taps come back as
``interactive.button_reply`` messages carrying the button's id (the hub's
approval flow reads it, as it reads LINE's postbacks). While the agent writes,
the message it answers is marked read and the chat shows "typing…".

Free text reaches a person only within 24 hours of their last message (the
customer service window, :mod:`memvault.channels.whatsapp_windows`). The adapter notes
when each chat last wrote (in the hub's state, so doctor sees it too); outside the
window, or when Meta answers 131047 (re-engagement, synchronously or in a ``failed``
status webhook), the configured template is sent instead (``[channels.whatsapp]
template``), carrying the text when the template has a ``{{1}}`` body variable
(``template_text``), else once per closed window as a nudge to write back.
Meta's JSON both ways is read and written in :mod:`memvault.channels.whatsapp_wire`.
Without a template such a message fails in one sentence saying so. Graph API
errors are mapped once, in :meth:`WhatsAppAdapter._classed`: 190 (the token)
stops the channel, 130429 / 131056 / 80007 / 4 (throughput and rate limits) are
waited out with a doubling backoff (Meta sends no ``Retry-After``), the rest are
one sentence with Meta's code.

Why httpx and not pywa (4.5.0, the best-kept WhatsApp library on PyPI; it
installs here, pure Python over httpx): its client hard-codes the Graph host
(``GraphAPI.__init__`` overwrites the session's ``base_url`` with
``https://graph.facebook.com/v…``), so a proxy or a test server is reached only
by patching it after construction; its webhook side is a handler-and-filter
framework with its own in-memory de-duplication that wants to own the route,
while the daemon owns the route, checks the signature itself (a few lines of
``hmac``) and de-duplicates durably in the hub's inbox. What memvault uses is
eight documented endpoints, so the house's httpx (as for Signal and the
OpenClaw bridge) against them is smaller and easier to test than a 28,000-line
dependency.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import hmac
import json
import logging
import mimetypes
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx

from memvault.channels import whatsapp_windows as window
from memvault.channels import whatsapp_wire as wire
from memvault.channels.base import (
    Adapter,
    AdapterState,
    Attachment,
    ChannelError,
    ChannelFatalError,
    Inbound,
    InboundHandler,
    LoopBound,
    MessageRejectedError,
    Outbound,
    RateLimitedError,
    RateLimitStreak,
    Sent,
    json_object,
    json_objects,
    make_room,
    read_media,
    token_refused,
)
from memvault.channels.format import split_text
from memvault.channels.webhook import WebhookBodyError, WebhookInbox, WebhookSignatureError
from memvault.clock import Clock
from memvault.config import WhatsAppSettings
from memvault.errors import ConfigError, MemvaultError

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = 20.0
DOWNLOAD_TIMEOUT = 120.0
TEXT_LIMIT = 4096
_REMEMBERED = 1000  # chats, read-receipt ids and sent texts kept at most

# Graph API error codes (developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes).
BAD_TOKEN = 190
REENGAGEMENT = 131047
THROTTLED = {
    4: "the app's request limit",
    80007: "the business account's rate limit",
    130429: "the phone number's throughput",
    131056: "too many messages to this person in a short time",
}
TRANSIENT = {1, 2, 131000, 131016, 133004}

_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{1,128}")


class WebhookVerificationError(MemvaultError):
    """Meta's subscription check with another verify token (or not Meta's at all)."""

    code = "verification_failed"
    http_status = 403


class _ReEngagementError(MessageRejectedError):
    """Meta's 131047: the chat's 24-hour window is closed; a template may still go."""


@dataclass(frozen=True)
class _Upload:
    kind: str  # image | video | audio | document
    media_id: str
    name: str


class WhatsAppAdapter(Adapter):
    """One WhatsApp Business phone number on the Cloud API."""

    name = wire.CHANNEL
    settings: WhatsAppSettings

    def __init__(
        self,
        settings: WhatsAppSettings,
        token: str,
        secret: str,
        verify_token: str,
        *,
        state: AdapterState | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not settings.phone_number_id.strip():
            raise ConfigError(
                "channels.whatsapp.phone_number_id is empty; copy the phone number's id "
                "from WhatsApp Manager (API Setup) into it."
            )
        super().__init__(settings, text_limit=TEXT_LIMIT)
        self._token = token
        self._secret = secret.encode()
        self._verify_token = verify_token
        self._state = state
        self._now: Callable[[], float] = (
            (lambda: clock.now().timestamp()) if clock is not None else time.time
        )
        self._phone = settings.phone_number_id.strip()
        self._http_client = LoopBound(self._open_http, httpx.AsyncClient.aclose)
        self._inbox: WebhookInbox[Inbound] = WebhookInbox("WhatsApp", "Meta")
        self._windows: dict[str, float] | None = None  # chat -> its last message (epoch s)
        self._nudged: dict[str, float] = {}  # chat -> when the template went (no text)
        self._latest: dict[str, str] = {}  # chat -> its newest message id (read, typing)
        self._sent_texts: dict[str, tuple[str, str]] = {}  # message id -> (chat, text)
        self._repairs: set[concurrent.futures.Future[None]] = set()
        self._rate_limits = RateLimitStreak()  # Meta sends no Retry-After

    # -- the platform --------------------------------------------------------------------

    async def identify(self) -> str:
        """The number's verified name and display number (``memvault (+1 555-0100)``)."""
        try:
            info = await self._graph(
                "GET",
                f"/{self._phone}",
                "the phone number's details",
                params={"fields": "verified_name,display_phone_number"},
            )
        except MessageRejectedError as exc:  # a wrong id, a token without the number
            raise ChannelFatalError(
                f"{exc.message.rstrip('.')}; check channels.whatsapp.phone_number_id and "
                f"that the token in ${self.settings.token_env} may use that number."
            ) from exc
        name = str(info.get("verified_name") or "WhatsApp")
        number = info.get("display_phone_number")
        return f"{name} ({number})" if number else name

    async def start(self, handler: InboundHandler) -> None:
        """Hand what the webhook receives to ``handler``, in order, until cancelled."""

        async def take(message: Inbound) -> None:
            self._heard(message)  # Meta has it: its window is open either way
            await handler(message)

        await self._inbox.serve(take, after=self._save_windows)

    def verify_subscription(
        self, mode: str | None, token: str | None, challenge: str | None
    ) -> str:
        """Meta's subscription check: the challenge to echo when the verify token is ours.

        Raises :class:`WebhookVerificationError` otherwise (403).
        """
        if mode != "subscribe" or not token or not challenge:
            raise WebhookVerificationError(
                "This is not Meta's subscription check (hub.mode=subscribe with "
                "hub.verify_token and hub.challenge)."
            )
        if not hmac.compare_digest(token.encode(), self._verify_token.encode()):
            log.warning(
                "a webhook subscription check with another verify token was refused; if "
                f"Meta sent it, type the token in ${self.settings.verify_token_env} into the "
                "app's webhook settings",
                extra={"channel": self.name},
            )
            raise WebhookVerificationError(
                "The hub.verify_token is not this channel's verify token; type the same "
                "token into the app's webhook settings."
            )
        if not _CHALLENGE.fullmatch(challenge):
            raise WebhookVerificationError("The hub.challenge is not a challenge Meta sends.")
        return challenge

    async def receive_webhook(self, body: bytes, signature: str | None) -> int:
        """Check and read one webhook body Meta posted, and return once the hub stored its
        messages (how many). Callable from any thread's loop: the daemon's HTTP server.

        Raises :class:`WebhookSignatureError` when Meta did not sign it,
        :class:`WebhookBodyError` when it is not Meta's JSON, and :class:`ChannelError`
        when the channel does not run or storing failed (Meta delivers it again).
        """
        self._check_signature(body, signature)
        messages, failures = self._read(body)
        loop = self._inbox.running_loop()
        if failures and loop is not None:
            repair = asyncio.run_coroutine_threadsafe(self._after_failures(failures), loop)
            self._repairs.add(repair)
            repair.add_done_callback(self._repaired)
        if not messages:
            return 0  # delivery and read statuses: nothing anyone said
        await self._inbox.hand_over(messages)
        return len(messages)

    async def send(self, message: Outbound) -> Sent:
        """Send the message as free text within the chat's 24-hour window, else as the
        configured template; files are uploaded and sent by id, buttons become reply
        buttons."""
        chat = wire.wa_id(message.chat_id)
        if not message.text.strip() and not message.media and not message.buttons:
            raise MessageRejectedError("There is nothing to send to WhatsApp: the text is empty.")
        if self._window(chat) is False:
            return await self._templated(chat, message)
        try:
            return await self._free_form(chat, message)
        except _ReEngagementError:
            log.info("whatsapp: the window is closed; sending the template", extra={"chat": chat})
            self._close_window(chat)
            await self._save_windows()
            return await self._templated(chat, message)

    async def typing(self, chat_id: str) -> None:
        """Mark the chat's newest message read and show "typing…" (up to 25 s, or until
        the reply); a failure is logged."""
        message_id = self._latest.get(wire.wa_id(chat_id))
        if message_id is None:
            return  # nothing received from this chat: nothing to mark
        payload = {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": message_id,
            "typing_indicator": {"type": "text"},
        }
        with self.quietly("whatsapp typing indicator failed"):
            await self._graph(
                "POST", f"/{self._phone}/messages", "the typing indicator", json=payload
            )

    async def download(self, attachment: Attachment) -> bytes:
        """The bytes of a received image, video, voice message or file: its URL from the
        Graph API, then the file from there with the same token."""
        what = f"the file {attachment.name or attachment.file_id}"
        meta = await self._graph("GET", f"/{attachment.file_id}", what)
        url = meta.get("url")
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise ChannelError(f"WhatsApp named no address for {what}.")
        with self.errors(what):
            response = await self._http().get(url, timeout=DOWNLOAD_TIMEOUT)
        if response.status_code >= 400:
            raise self._classed(response.status_code, wire.json_of(response), what)
        data = response.content
        expected = meta.get("sha256")
        if isinstance(expected, str) and hashlib.sha256(data).hexdigest() != expected.lower():
            raise ChannelError(f"{what.capitalize()} arrived damaged (its SHA-256 differs).")
        return data

    async def close(self) -> None:
        """Close the HTTP connections; calling it again does nothing."""
        await self._http_client.close()

    # -- receiving -----------------------------------------------------------------------

    def _check_signature(self, body: bytes, signature: str | None) -> None:
        if not signature:
            raise WebhookSignatureError(
                "The request has no X-Hub-Signature-256 header; only Meta posts to this webhook."
            )
        expected = "sha256=" + hmac.new(self._secret, body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(signature.strip().lower().encode(), expected.encode()):
            log.warning(
                "a webhook with a wrong signature was refused; if Meta sent it, check "
                f"${self.settings.secret_env} (the app secret)",
                extra={"channel": self.name},
            )
            raise WebhookSignatureError(
                "The X-Hub-Signature-256 does not match the body; only Meta, signing with "
                "this app's secret, posts to this webhook."
            )

    def _read(self, body: bytes) -> tuple[list[Inbound], list[wire.Failure]]:
        """The messages and the failed deliveries of a signed webhook body."""
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, ValueError) as exc:
            raise WebhookBodyError("The webhook body is not JSON.") from exc
        if not isinstance(payload, dict) or payload.get("object") != "whatsapp_business_account":
            raise WebhookBodyError(
                "The webhook body is not the JSON Meta sends "
                '(object "whatsapp_business_account", entry).'
            )
        messages: list[Inbound] = []
        failures: list[wire.Failure] = []
        for value in wire.message_values(payload):
            number = str((json_object(value.get("metadata"))).get("phone_number_id", ""))
            if number != self._phone:
                log.info("whatsapp: a webhook for another number", extra={"number": number})
                continue
            names = {
                str(c.get("wa_id")): str(json_object(c.get("profile")).get("name") or "")
                for c in json_objects(value.get("contacts"))
            }
            for item in json_objects(value.get("messages")):
                found = wire.inbound(item, names)
                if found is not None:
                    messages.append(found)
            failures += [f for f in map(wire.failure, json_objects(value.get("statuses"))) if f]
        return messages, failures

    def _repaired(self, repair: concurrent.futures.Future[None]) -> None:
        self._repairs.discard(repair)
        if not repair.cancelled() and repair.exception() is not None:
            log.error("whatsapp: acting on a failed status failed", exc_info=repair.exception())

    def _heard(self, message: Inbound) -> None:
        """Note a chat's message: its window opens, and it is the one read receipts name."""
        windows = self._loaded_windows()
        written = message.sent_at.timestamp()
        if written > windows.get(message.chat_id, -1.0):
            windows.pop(message.chat_id, None)  # newest last, for trimming
            windows[message.chat_id] = written
        self._latest.pop(message.chat_id, None)
        make_room(self._latest, _REMEMBERED)
        self._latest[message.chat_id] = message.message_id

    async def _after_failures(self, failures: list[wire.Failure]) -> None:
        """On the hub's loop: what a ``failed`` status says. A 131047 closes the window
        and, with a template, sends the lost text again as the template."""
        for failure in failures:
            if failure.code != REENGAGEMENT:
                log.warning(
                    "whatsapp could not deliver a message",
                    extra={"chat": failure.chat_id, "code": failure.code, "error": failure.said},
                )
                continue
            self._close_window(failure.chat_id)
            await self._save_windows()
            sent = self._sent_texts.pop(failure.message_id, None)
            if sent is None:
                continue
            try:
                await self._templated(failure.chat_id, Outbound(failure.chat_id, sent[1]))
            except ChannelError as exc:
                log.warning(
                    "whatsapp: a message outside the 24-hour window was not delivered",
                    extra={"chat": failure.chat_id, "error": exc.message},
                )

    # -- the 24-hour window --------------------------------------------------------------

    def _loaded_windows(self) -> dict[str, float]:
        if self._windows is None:
            saved = self._state.get(window.WINDOWS_KEY) if self._state is not None else None
            self._windows = window.load_windows(saved)
        return self._windows

    async def _save_windows(self) -> None:
        """Keep the windows in the hub's state (written off the loop, read on it)."""
        windows = self._loaded_windows()
        while len(windows) > _REMEMBERED:
            del windows[min(windows, key=windows.__getitem__)]
        if self._state is None:
            return
        try:
            await asyncio.to_thread(
                self._state.put, window.WINDOWS_KEY, json.dumps(windows, sort_keys=True)
            )
        except Exception:  # the windows are advice: never a reason to refuse a message
            log.warning("whatsapp: the 24-hour windows could not be saved", exc_info=True)

    def _window(self, chat: str) -> bool | None:
        """Whether the chat's window is open; None when it never wrote (as far as
        memvault knows: Meta says so with 131047)."""
        last = self._loaded_windows().get(chat)
        return None if last is None else window.is_open(last, self._now())

    def _close_window(self, chat: str) -> None:
        """Meta says the window is closed: whatever memvault thought it knew."""
        windows = self._loaded_windows()
        if window.is_open(windows.get(chat), self._now()) is not False:
            windows[chat] = 0.0  # "has not written within 24 hours", when is unknown

    # -- sending -------------------------------------------------------------------------

    async def _free_form(self, chat: str, message: Outbound) -> Sent:
        """Text, files and buttons, within the window."""
        uploads = [await self._upload(path) for path in message.media]
        texts = self._texts(message.text, last_limit=wire.BODY_LIMIT if message.buttons else None)
        body = texts.pop() if message.buttons and texts else ""
        context = message.reply_to if wire.is_wamid(message.reply_to) else None
        ids: list[str] = []
        for text in texts:
            payload = {"type": "text", "text": {"body": text, "preview_url": False}}
            sent = await self._message(chat, payload, f"the message to {chat}", context)
            self._keep_text(sent, chat, text)
            ids.append(sent)
            context = None  # the first part quotes the message it answers
        for upload in uploads:
            media: dict[str, str] = {"id": upload.media_id}
            if upload.kind == "document":
                media["filename"] = upload.name
            payload = {"type": upload.kind, upload.kind: media}
            ids.append(await self._message(chat, payload, f"the file {upload.name}", context))
            context = None
        if message.buttons:
            payload = {
                "type": "interactive",
                "interactive": wire.interactive(body, message.buttons),
            }
            ids.append(await self._message(chat, payload, f"the buttons to {chat}", context))
        return Sent(tuple(ids))

    async def _templated(self, chat: str, message: Outbound) -> Sent:
        """The configured template instead of free text: the window is closed."""
        name = self.settings.template.strip()
        if not name:
            raise MessageRejectedError(
                f"WhatsApp's 24-hour customer service window with {chat} is closed, so only "
                "a template may be sent, and channels.whatsapp.template is not set; set it "
                f"to an approved template, or wait until {chat} writes again."
            )
        template: dict[str, Any] = {
            "name": name,
            "language": {"code": self.settings.template_language},
        }
        if self.settings.template_text:
            text = wire.template_text(self._render(message.text), message.media)
            template["components"] = [
                {"type": "body", "parameters": [{"type": "text", "text": text}]}
            ]
        else:
            nudged = self._nudged.get(chat)
            last = self._loaded_windows().get(chat, 0.0)
            if nudged is not None and nudged >= last:
                raise MessageRejectedError(
                    f"WhatsApp's 24-hour window with {chat} is closed and the template "
                    f"{name!r} was sent already; {chat} has not written since, so this "
                    "message cannot be delivered."
                )
        sent = await self._message(
            chat, {"type": "template", "template": template}, f"the template {name!r} to {chat}"
        )
        if not self.settings.template_text:
            make_room(self._nudged, _REMEMBERED)
            self._nudged[chat] = self._now()
        return Sent((sent,))

    async def _message(
        self, chat: str, payload: dict[str, Any], what: str, context: str | None = None
    ) -> str:
        """POST one message; the id Meta gave it."""
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": chat,
            **payload,
        }
        if context:
            body["context"] = {"message_id": context}
        answer = await self._graph("POST", f"/{self._phone}/messages", what, json=body)
        sent = [m for m in json_objects(answer.get("messages")) if m.get("id")]
        if not sent:
            raise ChannelError(f"WhatsApp answered {what} without a message id.")
        return str(sent[0]["id"])

    async def _upload(self, path: Path) -> _Upload:
        """Upload one file to the number's media store; its id to send it by."""
        data = await asyncio.to_thread(read_media, path)
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        kind = wire.kind_of(mime, len(data))
        if kind == "document" and len(data) > wire.DOCUMENT_LIMIT:
            raise MessageRejectedError(
                f"The file {path.name} is larger than WhatsApp's 100 MB limit for documents."
            )
        if kind == "document" and mime.startswith("text/"):
            mime = "text/plain"  # the one text type WhatsApp takes
        answer = await self._graph(
            "POST",
            f"/{self._phone}/media",
            f"the upload of {path.name}",
            data={"messaging_product": "whatsapp", "type": mime},
            files={"file": (path.name, data, mime)},
        )
        media_id = answer.get("id")
        if not media_id:
            raise ChannelError(f"WhatsApp answered the upload of {path.name} without an id.")
        return _Upload(kind, str(media_id), path.name)

    def _texts(self, markdown: str, *, last_limit: int | None) -> list[str]:
        """The text as WhatsApp messages, each within its limit (the last within
        ``last_limit``: an interactive body)."""
        text = self._render(markdown) if markdown.strip() else ""
        if not text:
            return [_CHOOSE] if last_limit is not None else []
        parts = split_text(text, TEXT_LIMIT)
        if last_limit is not None and len(parts[-1]) > last_limit:
            parts[-1:] = split_text(parts[-1], last_limit)
        return parts

    @staticmethod
    def _render(markdown: str) -> str:
        return wire.WhatsAppMarkup().render(markdown).strip()

    def _keep_text(self, message_id: str, chat: str, text: str) -> None:
        """A free-form text sent: kept while Meta may still report it failed (131047)."""
        make_room(self._sent_texts, _REMEMBERED)
        self._sent_texts[message_id] = (chat, text)

    # -- errors and the client -----------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        """The HTTP client on the running loop (opened on first use there)."""
        return self._http_client.get()

    def _open_http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=f"{self.settings.api_base.rstrip('/')}/{self.settings.api_version}",
            headers={"Authorization": f"Bearer {self._token}"},
            timeout=REQUEST_TIMEOUT,
        )

    async def _graph(self, method: str, path: str, what: str, **options: Any) -> dict[str, Any]:
        """One Graph API call; its JSON, or the error as the class the hub acts on."""
        with self.errors(what):
            response = await self._http().request(method, path, **options)
        data = wire.json_of(response)
        if response.status_code >= 400 or "error" in data:
            raise self._classed(response.status_code, data, what)
        self._rate_limits.reset()
        return data

    def _classify(self, exc: Exception, what: str) -> ChannelError | None:
        """A Graph API request that got no answer; an answer's error is :meth:`_classed`."""
        if isinstance(exc, httpx.HTTPError):
            return ChannelError(f"WhatsApp could not be reached for {what}: {_reason(exc)}.")
        return None

    def _classed(self, status: int, data: dict[str, Any], what: str) -> ChannelError:
        """A Graph API error (``{"error": {"message", "code", "error_data": {"details"}}}``)
        as one sentence of the class the hub acts on."""
        error = json_object(data.get("error"))
        try:
            code = int(error.get("code") or 0)
        except (TypeError, ValueError):
            code = 0
        said = wire.said(error, status)
        if code == BAD_TOKEN or status == 401:
            return token_refused(
                "WhatsApp",
                "access token",
                f"error {code or status}: {said}",
                self.settings.token_env,
            )
        if code == REENGAGEMENT:
            return _ReEngagementError(
                f"WhatsApp refused {what}: the 24-hour customer service window is closed "
                f"(error {code})."
            )
        if code in THROTTLED or status == 429:
            wait = self._rate_limits.next_wait()
            reason = THROTTLED.get(code, "a rate limit")
            return RateLimitedError(
                f"WhatsApp asked memvault to slow down ({reason}, error {code or status}); "
                f"trying again in {wait:g} s.",
                retry_after=wait,
            )
        if code in TRANSIENT or status >= 500:
            return ChannelError(f"WhatsApp failed on {what} (error {code or status}): {said}.")
        return MessageRejectedError(f"WhatsApp refused {what} (error {code or status}): {said}.")


# -- helpers -----------------------------------------------------------------------------------

_CHOOSE = "Choose one:"


def _reason(exc: Exception) -> str:
    return str(exc).rstrip(".") or type(exc).__name__
