"""Protocol tokens never reach a person, on any outbound path of a real daemon: the agent's
reply over Telegram, the answer streamed over HTTP, and a message a tool sends. The model
is the fake OpenAI server; Telegram is the fake Bot API; both on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from channel_support import OWNER, delivered, telegram_config
from gateway_support import Live, StartDaemon, ok, sse_frames
from llm_fakes import FakeOpenAI, llm_settings
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for

APPROVAL = "X-Memvault-Approval"
# What models answer when nothing needs the owner: the bare token, wrapped, punctuated.
TOKEN_ONLY = ["HEARTBEAT_OK", "**HEARTBEAT_OK**", "HEARTBEAT_OK.", "`NO_REPLY`"]
STREAMED = ["HEART", "BEAT", "_OK"]


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def live(start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI) -> Live:
    settings = {
        "channels": {"telegram": telegram_config(tg)},
        "llm": llm_settings(llm, max_retries=0, timeout=WAIT).model_dump(),
    }
    started = start_daemon(settings=settings)
    wait_for(lambda: started.daemon.hub.statuses["telegram"].state == "running", "telegram to run")
    return started


def _no_token(text: str) -> bool:
    upper = text.upper()
    return "HEARTBEAT_OK" not in upper and "NO_REPLY" not in upper


def test_a_token_answer_reaches_no_chat_and_a_real_one_arrives_without_it(
    live: Live, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    for text in TOKEN_ONLY:
        llm.reply(text)
    llm.reply(pieces=STREAMED)
    llm.reply(pieces=["Your passport ", "expires Friday ", "HEARTBE", "AT_OK."])
    for number in range(len(TOKEN_ONLY) + 2):
        tg.push_message(OWNER, f"check {number}", first_name="Ada")

    # One conversation is answered in order: once the last reply is there, all were made.
    reply = wait_for(lambda: delivered(tg, OWNER), "the real reply")
    assert reply == ["Your passport expires Friday."]
    assert len(llm.requests) == len(TOKEN_ONLY) + 2
    rows = live.daemon.state.query("SELECT status FROM channel_inbox ORDER BY id")
    assert [r["status"] for r in rows] == ["done"] * (len(TOKEN_ONLY) + 2)
    outbox = live.daemon.state.query("SELECT text FROM channel_outbox")
    assert [r["text"] for r in outbox] == ["Your passport expires Friday."]
    # A suppressed reply is no turn of the conversation: only the owner's words and the
    # one real answer are logged, and the model is not shown the token as history.
    session = live.daemon.sessions.get(f"telegram:{OWNER}")
    logged = [(m.role, m.text) for m in live.daemon.sessions.messages(session.id)]
    assert [t for role, t in logged if role == "assistant"] == ["Your passport expires Friday."]
    assert all(_no_token(text) for _, text in logged)
    # Nothing else reached Telegram: no placeholder for the empty answers either.
    assert [
        s["method"]
        for s in tg.sent
        if s["method"].startswith("send") and "Action" not in s["method"]
    ] == ["sendMessage"]


@pytest.mark.parametrize(
    ("pieces", "answer"),
    [
        (STREAMED, ""),
        (["**HEARTBEAT", "_OK**"], ""),
        (["HEARTBEAT_OK", "."], ""),
        (
            ["Your passport ", "expires Friday ", "HEARTBE", "AT_OK."],
            "Your passport expires Friday.",
        ),
    ],
)
def test_the_http_stream_never_carries_a_token(
    live: Live, llm: FakeOpenAI, pieces: list[str], answer: str
) -> None:
    llm.reply(pieces=pieces)
    with (
        live.client() as api,
        api.stream(
            "POST", "/v1/agent/run", json={"command": "Anything?", "stream": True}
        ) as response,
    ):
        assert response.status_code == 200
        frames = sse_frames(response)
    texts = [d["text"] for kind, d in frames if kind == "text"]
    assert all(_no_token(text) and "HEART" not in text for text in texts), texts
    assert "".join(texts).strip() == answer
    done = frames[-1]
    assert done[0] == "done" and done[1]["status"] == "done"
    assert done[1]["answer"] == answer
    assert _no_token(json.dumps(frames))


def test_a_plain_run_answers_without_the_token(live: Live, llm: FakeOpenAI) -> None:
    llm.reply("HEARTBEAT_OK.")
    llm.reply("Renew the cert. NO_REPLY")
    with live.client() as api:
        silent = ok(api.post("/v1/agent/run", json={"command": "Anything?"}))
        spoken = ok(api.post("/v1/agent/run", json={"command": "And now?"}))
    assert silent["status"] == "done" and silent["answer"] == ""
    assert spoken["answer"] == "Renew the cert."


def test_a_tool_sent_token_is_suppressed_and_real_text_goes_without_it(
    live: Live, tg: FakeTelegram
) -> None:
    headers = {APPROVAL: live.daemon.approval_token}
    with live.client() as api:
        for text in ["HEARTBEAT_OK", "**HEARTBEAT_OK.**"]:
            result = ok(
                api.post(
                    "/v1/tools/send_channel_message",
                    json={"conversation_hint": "owner", "text": text},
                    headers=headers,
                ),
                notice=None,
            )["result"]
            assert result["status"] == "suppressed" and result["sent"] is False
            assert result["outbox_ids"] == [] and result["error"] is None
        # The same through /v1/send, whose answer is typed: suppressed is a status, not a 500.
        sent = ok(
            api.post(
                "/v1/send",
                json={
                    "adapter": "telegram",
                    "payload": {"conversation_hint": "owner", "text": "NO_REPLY"},
                },
            )
        )
        assert sent["status"] == "suppressed"
        real = ok(
            api.post(
                "/v1/tools/send_channel_message",
                json={"conversation_hint": "owner", "text": "Call Bob back today HEARTBEAT_OK"},
                headers=headers,
            ),
            notice=None,
        )["result"]
    assert real["status"] == "sent"
    assert delivered(tg, OWNER) == ["Call Bob back today"]
    assert live.daemon.state.query("SELECT COUNT(*) AS n FROM channel_outbox")[0]["n"] == 1
