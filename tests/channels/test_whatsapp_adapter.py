"""The WhatsApp adapter over real HTTP against a fake Graph API, with webhook bodies signed as
Meta signs them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memvault.channels.base import (
    Button,
    ChannelError,
    ChannelFatalError,
    Inbound,
    MessageRejectedError,
    Outbound,
    RateLimitedError,
)
from memvault.channels.whatsapp import (
    WebhookBodyError,
    WebhookSignatureError,
    WebhookVerificationError,
    WhatsAppAdapter,
)
from memvault.channels.whatsapp_windows import window_verdict
from memvault.config import WhatsAppSettings
from support import TZ, MovableClock
from waiting import WAIT
from whatsapp_fake import (
    FAKE_APP_SECRET,
    FAKE_TOKEN,
    FAKE_VERIFY_TOKEN,
    PHONE_NUMBER_ID,
    FakeWhatsApp,
    wa_id,
)

OWNER = wa_id(1)
FRIEND = wa_id(2)
NEVER_WROTE = wa_id(7)
NOW = datetime(2026, 11, 22, 9, 30, tzinfo=TZ)


class MemoryState:
    """An adapter's state kept in a dict (the hub keeps it in state.db)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    def put(self, name: str, value: str) -> None:
        self.values[name] = value


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock(NOW)


@pytest.fixture
def fake(clock: MovableClock) -> Iterator[FakeWhatsApp]:
    with FakeWhatsApp(now=clock.now) as server:
        server.add_user(OWNER, "Ada")
        server.add_user(FRIEND, "Fred")
        yield server


def settings_for(fake: FakeWhatsApp, **overrides: Any) -> WhatsAppSettings:
    values: dict[str, Any] = {
        "api_base": fake.api_base,
        "phone_number_id": PHONE_NUMBER_ID,
        "owner": [OWNER],
    }
    return WhatsAppSettings(**{**values, **overrides})


def make(
    fake: FakeWhatsApp,
    clock: MovableClock,
    *,
    token: str = FAKE_TOKEN,
    state: MemoryState | None = None,
    **overrides: Any,
) -> WhatsAppAdapter:
    return WhatsAppAdapter(
        settings_for(fake, **overrides),
        token,
        FAKE_APP_SECRET,
        FAKE_VERIFY_TOKEN,
        state=state,
        clock=clock,
    )


def run(
    fake: FakeWhatsApp,
    clock: MovableClock,
    scenario: Callable[[WhatsAppAdapter], Awaitable[None]],
    **options: Any,
) -> None:
    """Run ``scenario`` with an adapter on ``fake``, closed afterwards."""

    async def main() -> None:
        adapter = make(fake, clock, **options)
        try:
            await asyncio.wait_for(scenario(adapter), WAIT)
        finally:
            await adapter.close()

    asyncio.run(main())


@asynccontextmanager
async def running(adapter: WhatsAppAdapter) -> AsyncIterator[list[Inbound]]:
    """The adapter receiving (``start`` running) for the block; what it handed over."""
    received: list[Inbound] = []

    async def keep(message: Inbound) -> None:
        received.append(message)

    task = asyncio.create_task(adapter.start(keep))
    await asyncio.sleep(0)  # start() takes its queue
    try:
        yield received
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def post(
    fake: FakeWhatsApp,
    adapter: WhatsAppAdapter,
    *messages: dict[str, Any],
    statuses: tuple[dict[str, Any], ...] = (),
) -> int:
    """What the route does with Meta's POST: the signed body to the adapter."""
    body = fake.body(*messages, statuses=statuses)
    return await adapter.receive_webhook(body, fake.sign(body))


# -- identity and the subscription check -------------------------------------------------------


def test_identify_names_the_number(fake: FakeWhatsApp, clock: MovableClock) -> None:
    async def scenario(adapter: WhatsAppAdapter) -> None:
        assert await adapter.identify() == "memvault (+1 555-010-0199)"

    run(fake, clock, scenario)
    assert fake.requests == ["phone"]


def test_a_refused_token_is_fatal_and_names_the_variable_not_the_token(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    async def scenario(adapter: WhatsAppAdapter) -> None:
        with pytest.raises(ChannelFatalError) as caught:
            await adapter.identify()
        said = str(caught.value)
        assert "$MY_WA_TOKEN" in said and "error 190" in said and "wrong-token" not in said

    run(fake, clock, scenario, token="wrong-token", token_env="MY_WA_TOKEN")


def test_a_wrong_phone_number_id_is_fatal_and_says_which_setting(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    async def scenario(adapter: WhatsAppAdapter) -> None:
        with pytest.raises(ChannelFatalError, match="phone_number_id"):
            await adapter.identify()

    run(fake, clock, scenario, phone_number_id="999999999999999")


def test_an_unreachable_server_is_a_transient_error(clock: MovableClock) -> None:
    with FakeWhatsApp() as fake:
        settings = settings_for(fake)
    # The server is gone: its port refuses connections now.

    async def main() -> None:
        adapter = WhatsAppAdapter(settings, FAKE_TOKEN, FAKE_APP_SECRET, FAKE_VERIFY_TOKEN)
        with pytest.raises(ChannelError) as caught:
            await adapter.identify()
        assert not isinstance(caught.value, ChannelFatalError) and caught.value.retriable
        await adapter.close()

    asyncio.run(main())


def test_the_subscription_check_echoes_the_challenge_only_for_our_token(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    adapter = make(fake, clock)
    assert adapter.verify_subscription("subscribe", FAKE_VERIFY_TOKEN, "1158201444") == "1158201444"
    with pytest.raises(WebhookVerificationError, match="verify token"):
        adapter.verify_subscription("subscribe", "guessed", "1158201444")
    with pytest.raises(WebhookVerificationError):
        adapter.verify_subscription("unsubscribe", FAKE_VERIFY_TOKEN, "1158201444")
    with pytest.raises(WebhookVerificationError):
        adapter.verify_subscription("subscribe", FAKE_VERIFY_TOKEN, "<script>")


# -- receiving -------------------------------------------------------------------------------


def test_messages_arrive_with_their_sender_name_quote_and_kind(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    plain = fake.text(OWNER, "remember the milk, Grüße 👋")
    quoting = fake.text(OWNER, "this one", reply_to="wamid.earlier")
    forwarded = fake.text(FRIEND, "look at this", forwarded=True)
    place = fake.location(OWNER, 52.52, 13.405, "Alexanderplatz")
    reaction = fake.reaction(OWNER, plain["id"], "👍")  # nothing anyone said: not handed over

    async def scenario(adapter: WhatsAppAdapter) -> None:
        async with running(adapter) as received:
            count = await post(fake, adapter, plain, quoting, forwarded, place, reaction)
        assert count == 4
        first, reply, passed_on, where = received
        assert first.channel == "whatsapp"
        assert first.message_id == plain["id"] == first.platform_message_id
        assert (first.chat_id, first.sender_id, first.chat_type) == (OWNER, OWNER, "private")
        assert first.sender_name == "Ada" and first.text == "remember the milk, Grüße 👋"
        assert first.sent_at == NOW.astimezone(UTC) and first.reply_to is None
        assert reply.reply_to == "wamid.earlier"
        assert passed_on.forwarded and passed_on.sender_name == "Fred"
        assert where.text == "[location] Alexanderplatz (52.52, 13.405)"

    run(fake, clock, scenario)


def test_statuses_and_other_numbers_hand_over_nothing(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    other = FakeWhatsApp(phone_number_id="100000000000001")
    foreign = other.body(other.text(OWNER, "to another number of the same app"))
    delivered = fake.status("wamid.x", OWNER, "delivered")

    async def scenario(adapter: WhatsAppAdapter) -> None:
        async with running(adapter) as received:
            assert await post(fake, adapter, statuses=(delivered,)) == 0
            assert await adapter.receive_webhook(foreign, fake.sign(foreign)) == 0
        assert received == []

    run(fake, clock, scenario)


def test_a_button_tap_arrives_as_an_action(fake: FakeWhatsApp, clock: MovableClock) -> None:
    tap = fake.button_reply(OWNER, "mv:approve:4821:abcd:once", "Approve once", on="wamid.q")

    async def scenario(adapter: WhatsAppAdapter) -> None:
        async with running(adapter) as received:
            await post(fake, adapter, tap)
        (press,) = received
        assert (press.action, press.text) == ("mv:approve:4821:abcd:once",) * 2
        assert press.message_id == press.action_id == tap["id"]
        assert (press.chat_id, press.sender_id, press.reply_to) == (OWNER, OWNER, None)

    run(fake, clock, scenario)


def test_a_body_meta_did_not_sign_is_refused_before_it_is_read(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    body = fake.body(fake.text(OWNER, "/remember forged"))

    async def scenario(adapter: WhatsAppAdapter) -> None:
        async with running(adapter) as received:
            with pytest.raises(WebhookSignatureError, match="no X-Hub-Signature-256"):
                await adapter.receive_webhook(body, None)
            with pytest.raises(WebhookSignatureError, match="does not match"):
                await adapter.receive_webhook(body, fake.sign(body, "another-app-secret"))
            tampered = body.replace(b"forged", b"FORGED")
            with pytest.raises(WebhookSignatureError):
                await adapter.receive_webhook(tampered, fake.sign(body))
            with pytest.raises(WebhookSignatureError):  # the hex alone, without "sha256="
                await adapter.receive_webhook(body, fake.sign(body).removeprefix("sha256="))
            junk = b"{not json"
            with pytest.raises(WebhookBodyError):
                await adapter.receive_webhook(junk, fake.sign(junk))
            other = b'{"object": "page", "entry": []}'
            with pytest.raises(WebhookBodyError, match="whatsapp_business_account"):
                await adapter.receive_webhook(other, fake.sign(other))
        assert received == []

    run(fake, clock, scenario)


def test_a_webhook_before_the_channel_runs_is_refused_for_redelivery(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    async def scenario(adapter: WhatsAppAdapter) -> None:
        with pytest.raises(ChannelError, match="not running"):
            await post(fake, adapter, fake.text(OWNER, "too early"))

    run(fake, clock, scenario)


def test_received_files_download_from_the_address_the_graph_api_names(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    photo = fake.image(OWNER, b"\xff\xd8jpeg bytes", caption="the whiteboard")
    report = fake.document(OWNER, "notes.pdf", b"%PDF-1.7 notes", "application/pdf")
    voice = fake.voice(OWNER, b"OggS voice")

    async def scenario(adapter: WhatsAppAdapter) -> None:
        async with running(adapter) as received:
            await post(fake, adapter, photo, report, voice)
        (image,) = received[0].attachments
        (document,) = received[1].attachments
        (recording,) = received[2].attachments
        assert received[0].text == "the whiteboard"
        assert (image.kind, image.mime, image.file_id) == (
            "photo",
            "image/jpeg",
            photo["image"]["id"],
        )
        assert (document.kind, document.name) == ("document", "notes.pdf")
        assert recording.kind == "voice"
        assert await adapter.download(image) == b"\xff\xd8jpeg bytes"
        assert await adapter.download(document) == b"%PDF-1.7 notes"
        fake.fail("media", 100, details="Object with ID does not exist")
        with pytest.raises(MessageRejectedError, match="error 100"):
            await adapter.download(recording)

    run(fake, clock, scenario)
    assert fake.requests.count("download") == 2


# -- sending ---------------------------------------------------------------------------------


def test_a_reply_is_whatsapp_markup_quoting_the_message_it_answers(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    asked = fake.text(OWNER, "when is the cert renewed?")
    long = "word " * 1000  # 5,000 characters: two messages

    async def scenario(adapter: WhatsAppAdapter) -> None:
        async with running(adapter):
            await post(fake, adapter, asked)
        sent = await adapter.send(
            Outbound(OWNER, "The **cert** is _renewed_ on ~Thursday~ `Friday`.", asked["id"])
        )
        assert len(sent.message_ids) == 1 and sent.message_ids[0].startswith("wamid.")
        parts = await adapter.send(Outbound(OWNER, long, asked["id"]))
        assert len(parts.message_ids) == 2

    run(fake, clock, scenario)
    first, *rest = fake.accepted(OWNER, "text")
    assert first["text"] == "The *cert* is _renewed_ on ~Thursday~ `Friday`."
    assert first["context"] == asked["id"]
    assert [s["context"] for s in rest] == [asked["id"], None]  # only the first part quotes
    assert all(len(s["text"]) <= 4096 for s in rest)


def test_approval_buttons_are_reply_buttons_and_more_become_a_list(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    fake.text(OWNER, "hi")  # the window is open
    three = (
        Button("Approve once", "mv:approve:4821:abcd:once"),
        Button("Always", "mv:approve:4821:abcd:always"),
        Button("Deny", "mv:deny:4821:abcd"),
    )
    many = tuple(Button(f"Option number {n} of many", f"pick:{n}") for n in range(5))

    async def scenario(adapter: WhatsAppAdapter) -> None:
        await adapter.send(
            Outbound(OWNER, "Approval needed: remember 'Ada likes tea'", buttons=three)
        )
        await adapter.send(Outbound(OWNER, "", buttons=many))

    run(fake, clock, scenario)
    buttons, listed = fake.accepted(OWNER, "interactive")
    interactive = buttons["payload"]["interactive"]
    assert interactive["type"] == "button"
    assert interactive["body"]["text"] == "Approval needed: remember 'Ada likes tea'"
    replies = [b["reply"] for b in interactive["action"]["buttons"]]
    assert [(r["title"], r["id"]) for r in replies] == [(b.label, b.data) for b in three]
    assert listed["payload"]["interactive"]["type"] == "list"
    rows = listed["payload"]["interactive"]["action"]["sections"][0]["rows"]
    assert [r["id"] for r in rows] == [f"pick:{n}" for n in range(5)]


def test_files_are_uploaded_and_sent_by_their_media_id(
    fake: FakeWhatsApp, clock: MovableClock, tmp_path: Path
) -> None:
    fake.text(OWNER, "send me the chart")
    chart = tmp_path / "chart.png"
    chart.write_bytes(b"\x89PNG chart")
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF report")

    async def scenario(adapter: WhatsAppAdapter) -> None:
        sent = await adapter.send(Outbound(OWNER, "Here:", media=(chart, report)))
        assert len(sent.message_ids) == 3
        with pytest.raises(MessageRejectedError, match="cannot be read"):
            await adapter.send(Outbound(OWNER, "", media=(tmp_path / "gone.png",)))
        with pytest.raises(MessageRejectedError, match="empty"):
            await adapter.send(Outbound(OWNER, "   "))

    run(fake, clock, scenario)
    text, image, document = fake.accepted(OWNER)
    assert (text["kind"], image["kind"], document["kind"]) == ("text", "image", "document")
    assert fake.uploads[image["payload"]["image"]["id"]] == (
        b"\x89PNG chart",
        "image/png",
        "chart.png",
    )
    uploaded = fake.uploads[document["payload"]["document"]["id"]]
    assert uploaded == (b"%PDF report", "application/pdf", "report.pdf")
    assert document["payload"]["document"]["filename"] == "report.pdf"


def test_typing_marks_the_newest_message_read_and_shows_the_indicator(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    older, newer = fake.text(OWNER, "one"), fake.text(OWNER, "two")

    async def scenario(adapter: WhatsAppAdapter) -> None:
        await adapter.typing(OWNER)  # nothing received yet: nothing to mark
        async with running(adapter):
            await post(fake, adapter, older, newer)
        await adapter.typing(OWNER)
        fake.fail("read", 131000)
        await adapter.typing(OWNER)  # a failure is logged, never raised

    run(fake, clock, scenario)
    assert fake.reads == [{"message_id": newer["id"], "typing": True}]


# -- the 24-hour window ------------------------------------------------------------------------


def test_outside_the_window_the_template_carries_the_text(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    old = fake.text(OWNER, "written yesterday", at=NOW - timedelta(hours=25))

    async def scenario(adapter: WhatsAppAdapter) -> None:
        async with running(adapter):
            await post(fake, adapter, old)  # delivered late: the window closed meanwhile
        await adapter.send(Outbound(OWNER, "**Done.**\nThe cert\tis renewed."))

    run(fake, clock, scenario, template="memvault_reply", template_text=True)
    (sent,) = fake.sent  # no free-form attempt first: the adapter knew
    assert sent["kind"] == "template" and sent["error"] is None
    template = sent["payload"]["template"]
    assert (template["name"], template["language"]) == ("memvault_reply", {"code": "en_US"})
    assert sent["text"] == "*Done.* · The cert is renewed."


def test_a_131047_answer_sends_the_template_instead(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    async def scenario(adapter: WhatsAppAdapter) -> None:
        sent = await adapter.send(Outbound(NEVER_WROTE, "Your parcel arrived."))
        assert len(sent.message_ids) == 1

    run(fake, clock, scenario, template="memvault_reply", template_text=True)
    assert [(s["kind"], s["error"]) for s in fake.sent] == [("text", 131047), ("template", None)]
    assert fake.delivered(NEVER_WROTE) == ["Your parcel arrived."]


def test_without_a_template_a_closed_window_fails_in_one_sentence(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    async def scenario(adapter: WhatsAppAdapter) -> None:
        with pytest.raises(MessageRejectedError) as caught:
            await adapter.send(Outbound(NEVER_WROTE, "hello"))
        said = str(caught.value)
        assert "24-hour" in said and "channels.whatsapp.template" in said
        assert said.endswith(".") and ". " not in said and not caught.value.retriable
        with pytest.raises(MessageRejectedError):  # known closed now: no second attempt
            await adapter.send(Outbound(NEVER_WROTE, "hello again"))

    run(fake, clock, scenario)
    assert [s["error"] for s in fake.sent] == [131047]


def test_a_template_without_a_variable_is_a_nudge_sent_once_per_closed_window(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    state = MemoryState()

    async def scenario(adapter: WhatsAppAdapter) -> None:
        await adapter.send(Outbound(NEVER_WROTE, "first"))
        with pytest.raises(MessageRejectedError, match="sent already"):
            await adapter.send(Outbound(NEVER_WROTE, "second"))
        async with running(adapter):  # they write back: the window opens
            await post(fake, adapter, fake.text(NEVER_WROTE, "what's up?"))
        await adapter.send(Outbound(NEVER_WROTE, "second"))

    run(fake, clock, scenario, template="hello_world", state=state)
    assert [(s["kind"], s["error"]) for s in fake.sent] == [
        ("text", 131047),
        ("template", None),
        ("text", None),
    ]
    assert "windows" in state.values and NEVER_WROTE in state.values["windows"]


def test_a_failed_status_131047_resends_the_text_as_the_template(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    asked = fake.text(OWNER, "ping")

    async def scenario(adapter: WhatsAppAdapter) -> None:
        async with running(adapter):
            await post(fake, adapter, asked)
            sent = await adapter.send(Outbound(OWNER, "pong, later"))
            # Meta accepted it, then could not deliver it (the window closed meanwhile).
            failed = fake.status(sent.message_ids[0], OWNER, "failed", code=131047)
            assert await post(fake, adapter, statuses=(failed,)) == 0
            for _ in range(200):
                if fake.accepted(OWNER, "template"):
                    break
                await asyncio.sleep(0.02)

    run(fake, clock, scenario, template="memvault_reply", template_text=True)
    (template,) = fake.accepted(OWNER, "template")
    assert template["text"] == "pong, later"


def test_the_window_survives_a_restart_in_the_adapters_state(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    state = MemoryState()

    async def scenario(adapter: WhatsAppAdapter) -> None:
        async with running(adapter):
            await post(fake, adapter, fake.text(OWNER, "hello"))

    run(fake, clock, scenario, state=state)
    clock.set(NOW + timedelta(hours=30))

    async def later(adapter: WhatsAppAdapter) -> None:
        with pytest.raises(MessageRejectedError, match="24-hour"):
            await adapter.send(Outbound(OWNER, "too late"))

    run(fake, clock, later, state=state)
    assert fake.sent == []  # the restarted adapter knew the window closed


def test_the_doctor_verdict_names_closed_windows_and_the_template(clock: MovableClock) -> None:
    settings = WhatsAppSettings(phone_number_id=PHONE_NUMBER_ID, owner=["+49 151 00000001"])
    now = NOW.timestamp()
    saved = f'{{"{FRIEND}": {now - 3600}}}'
    status, said, details = window_verdict(settings, saved, now)
    assert status == "warning" and OWNER in said and FRIEND not in said
    assert "channels.whatsapp.template is not set" in said
    assert details["closed"] == [OWNER] and details["open"] == [FRIEND]
    templated = settings.model_copy(update={"template": "memvault_reply"})
    status, said, _ = window_verdict(templated, saved, now)
    assert status == "ok" and "'memvault_reply'" in said and OWNER in said
    opened = f'{{"{FRIEND}": {now - 3600}, "{OWNER}": {now - 60}}}'
    status, said, _ = window_verdict(settings, opened, now)
    assert (status, said) == ("ok", "WhatsApp's 24-hour window is open for 2 chats.")


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [130429, 131056, 80007, 4])
def test_rate_limits_are_waited_out_longer_each_time(
    fake: FakeWhatsApp, clock: MovableClock, code: int
) -> None:
    fake.text(OWNER, "hi")
    fake.fail("messages", code, times=3)

    async def scenario(adapter: WhatsAppAdapter) -> None:
        waits = []
        for _ in range(3):
            with pytest.raises(RateLimitedError) as caught:
                await adapter.send(Outbound(OWNER, "hello"))
            waits.append(caught.value.retry_after)
            assert f"error {code}" in str(caught.value)
        assert waits == [2.0, 4.0, 8.0]
        await adapter.send(Outbound(OWNER, "hello"))  # a success resets the backoff
        fake.fail("messages", code)
        with pytest.raises(RateLimitedError) as caught:
            await adapter.send(Outbound(OWNER, "again"))
        assert caught.value.retry_after == 2.0

    run(fake, clock, scenario)


def test_other_errors_are_one_sentence_with_metas_code(
    fake: FakeWhatsApp, clock: MovableClock
) -> None:
    fake.text(OWNER, "hi")

    async def scenario(adapter: WhatsAppAdapter) -> None:
        fake.fail("messages", 131026)
        with pytest.raises(MessageRejectedError) as caught:
            await adapter.send(Outbound(OWNER, "hello"))
        said = str(caught.value)
        assert "error 131026" in said and "Message Undeliverable" in said
        assert said.endswith(".") and "\n" not in said and "(#" not in said
        fake.fail("messages", 131000)
        with pytest.raises(ChannelError) as transient:
            await adapter.send(Outbound(OWNER, "hello"))
        assert transient.value.retriable and "error 131000" in str(transient.value)
        fake.fail("messages", 190)
        with pytest.raises(ChannelFatalError, match="WHATSAPP_ACCESS_TOKEN"):
            await adapter.send(Outbound(OWNER, "hello"))

    run(fake, clock, scenario)


def test_a_damaged_download_is_refused(fake: FakeWhatsApp, clock: MovableClock) -> None:
    photo = fake.image(OWNER, b"\xff\xd8 the real bytes")
    media_id = photo["image"]["id"]

    async def scenario(adapter: WhatsAppAdapter) -> None:
        async with running(adapter) as received:
            await post(fake, adapter, photo)
        fake.damage(media_id)
        with pytest.raises(ChannelError, match="SHA-256"):
            await adapter.download(received[0].attachments[0])

    run(fake, clock, scenario)
