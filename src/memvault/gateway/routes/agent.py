"""The agent over HTTP: ``POST /v1/agent/run``.

One command of one session. The answer is the run's result, or, with
``"stream": true``, a Server-Sent Events stream of the run as it happens:
``event: step`` for each step (model call, tool call, tool result, ...),
``event: text`` for each piece of the answer, and a last ``event: done``
carrying the result. A client that disconnects cancels the run.

Tier-2 tool calls need ``tools.mode = "autonomous"`` or the owner's approval
token in ``X-Memvault-Approval``; tier-3 calls always need the token. A
refused call is reported to the model, which tells the owner.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import threading
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from memvault.agent.loop import RunResult, Step
from memvault.errors import MemvaultError
from memvault.gateway.errors import from_memvault
from memvault.gateway.routes import COMMON_ERRORS, DaemonDep, errors
from memvault.gateway.schemas import AgentRun, AgentRunBody, Envelope
from memvault.gateway.security import matches

router = APIRouter(prefix="/v1", tags=["agent"])

_END = object()


def _frame(kind: str, data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


@router.post(
    "/agent/run",
    response_model=Envelope[AgentRun],
    responses={
        200: {
            "description": "The run's result; with stream=true a text/event-stream of "
            "`step`, `text` and a final `done` (or `error`) event.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **errors(*COMMON_ERRORS),
    },
)
async def run_agent(
    body: AgentRunBody,
    daemon: DaemonDep,
    approval: Annotated[
        str | None,
        Header(
            alias="X-Memvault-Approval",
            description="The owner's approval token: lets tier 2 and 3 tool calls through.",
        ),
    ] = None,
) -> Any:
    """Run the agent once: memory in, tools through the tier policy, outcome written back."""
    daemon.agent()  # no model configured: a clear 503 before anything starts
    approved = matches(approval, daemon.approval_token)
    run = functools.partial(
        daemon.run_agent,
        body.command,
        session=body.session,
        channel=body.channel,
        sender=body.sender,
        approved=approved,
    )
    if not body.stream:
        result: RunResult = await run_in_threadpool(run)
        return {"ok": True, "result": result.to_dict()}

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    cancel = threading.Event()

    def put(item: Any) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def work() -> None:
        try:
            result = run(
                on_text=lambda text: put(("text", {"text": text})),
                on_step=lambda step: put(("step", _step(step))),
                cancel=cancel,
            )
            put(("done", result.to_dict()))
        except MemvaultError as exc:
            error = from_memvault(exc)
            put(("error", {"code": error.code, "message": error.message}))
        except Exception as exc:  # a bug: the stream still ends with an error event
            put(("error", {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}))
        finally:
            put(_END)

    async def stream() -> AsyncIterator[str]:
        # In this request's context: a named token's agent is recorded on what the run stores.
        worker = threading.Thread(
            target=contextvars.copy_context().run,
            args=(work,),
            name="memvault-agent-run",
            daemon=True,
        )
        worker.start()
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    return
                kind, data = item
                yield _frame(kind, data)
        finally:
            cancel.set()  # the client went away: the run stops at its next step

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _step(step: Step) -> dict[str, Any]:
    return {"kind": step.kind, **step.data}
