"""A stand-in ``openclaw`` for the bridge's tests, and a home for the real one.

``message read`` needs a live platform, so the stand-in answers it from recorded
conversations; ``message send`` records what it was asked (and adds the bot's own
message to the conversation, as the platform would show it on the next read); every
other command (``--version``, ``channels list|status``) and every call a test asks it
to pass on (``real``) runs the real OpenClaw 2026.9.6 on Node 24 with a temporary HOME.
A send can also be checked by the real CLI first (``check_sends``): it runs the same
arguments with ``--dry-run``, and what it refuses fails the send as it would.

Where the recorded shapes come from (openclaw@2026.9.6, under node_modules/openclaw):

- Every ``message <action> --json`` prints ``{action, channel, dryRun, handledBy,
  messageId?, payload}`` (``buildMessageCliJson``, dist/message-BIMFENyh.mjs); a
  failure prints ``{ok: false, error: {type: "cli_error", message}}``, writes
  ``[openclaw] Reason: ...`` to standard error and exits 1 (dist/failure-output-*.mjs;
  the messages below are the real CLI's, seen on this machine).
- A read's payload is ``{ok: true, messages: [...], hasMore}``, the platform's own
  messages each with OpenClaw's ``timestampMs`` / ``timestampUtc`` (docs/date-time.md,
  ``withNormalizedTimestamp`` in dist/date-time-*.mjs). Discord's (the default here)
  are Discord API message objects, newest first, as
  extensions/discord/src/actions/runtime.messaging.messages.ts returns them
  (``readMessages``: ``{ok: true, messages: messages.map(normalizeMessage)}``); tests
  may record other platforms' messages as they are (Slack's, Matrix's, Telegram's).
- A send's payload is the real ``--dry-run`` payload ``{channel, to, via, mediaUrl}``
  with ``result.messageId`` and a top-level ``messageId``, where
  ``resolveMessageActionMessageId`` (dist/message-action-contracts-*.mjs) reads it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memvault.config import OpenClawBridgeSettings
from openclaw_support import NODE, OPENCLAW_MJS, fresh_home, home_env, require_openclaw
from waiting import WAIT

# ``channels.openclaw.timeout`` for the tests: a call may run the real CLI, whose cold Node
# start took 11-17 s on a loaded 2-core machine. WAIT or the product's default, whichever is
# larger, and at most the 600 s the setting allows.
CLI_TIMEOUT = min(max(WAIT, OpenClawBridgeSettings.model_fields["timeout"].default), 600.0)

BOT_ID = "990000000000000001"
BOT_NAME = "memvault-bot"

# What the real CLI answered on this machine (no gateway, or one without credentials).
UNREACHABLE = (
    "Gateway not reachable at ws://127.0.0.1:18789 (ECONNREFUSED).\n"
    "Start it with `openclaw gateway run` or check `openclaw gateway status`.\n"
    "Gateway target: ws://127.0.0.1:18789"
)
NO_CREDENTIALS = (
    "gateway message.action requires credentials before opening a websocket\n"
    "Fix: configure gateway.auth token/password, pair this device, or pass --token/--password."
)

_SCRIPT = r'''#!{python}
"""A stand-in openclaw (tests/openclaw_bridge_fake.py writes it)."""
import fcntl, json, os, sys, time
from datetime import datetime, timezone

STATE = {state!r}
NODE, MJS, ENV = {node!r}, {mjs!r}, {env!r}


def real(argv):
    os.execve(NODE, [NODE, MJS, *argv], {{**os.environ, **ENV}})


def options(argv):
    found = {{}}
    rest = list(argv)
    while rest:
        word = rest.pop(0)
        if not word.startswith("--"):
            continue
        name, eq, value = word[2:].partition("=")
        if not eq:
            value = rest.pop(0) if rest and not rest[0].startswith("--") else True
        found.setdefault(name, []).append(value)
    return {{k: v if k == "media" else v[-1] for k, v in found.items()}}


def fail(message):
    error = {{"type": "cli_error", "message": message}}
    print(json.dumps({{"ok": False, "error": error}}, indent=2))
    for line in ("The CLI command failed.", "Reason: " + message.splitlines()[0]):
        print("[openclaw] " + line, file=sys.stderr)
    sys.exit(1)


def main(argv):
    verb = " ".join(argv[:2])
    answered = verb in ("message read", "message send")  # the rest is the real CLI's
    with open(STATE + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(STATE) as file:
            state = json.load(file)
        faults = state["faults"].get(verb) or []
        fault = faults.pop(0) if faults else None
        answer = None
        if answered:
            state["calls"].append(argv)
            answer = None if fault else act(state, verb, options(argv[2:]), argv)
        with open(STATE + ".new", "w") as file:
            json.dump(state, file)
        os.replace(STATE + ".new", STATE)
    if not answered and fault is None:
        real(argv)
    if fault == "timeout":
        time.sleep(60)
    if fault == "real":
        real(argv)
    if fault:
        fail(fault)
    print(json.dumps(answer, indent=2))


def act(state, verb, opts, argv):
    channel, target = opts.get("channel"), opts.get("target")
    key = f"{{channel}} {{target}}"
    messages = state["conversations"].setdefault(key, [])
    if verb == "message read":
        after = opts.get("after")
        if after:
            messages = [m for m in messages if int(m["id"]) > int(after)]
        limit = int(opts.get("limit", 50))
        shown = messages[:limit] if after else messages[-limit:]
        payload = {{"ok": True, "messages": list(reversed(shown)), "hasMore": False}}
        return {{"action": "read", "channel": channel, "dryRun": False,
                "handledBy": "plugin", "payload": payload}}
    if state["check_sends"]:
        import subprocess
        done = subprocess.run([NODE, MJS, *argv, "--dry-run"], capture_output=True,
                              text=True, env={{**os.environ, **ENV}})
        if done.returncode:
            sys.stdout.write(done.stdout)
            sys.stderr.write(done.stderr)
            sys.exit(done.returncode)
    state["next_id"] += 1
    sent_id = str(state["next_id"])
    record = {{"channel": channel, "target": target, "message": opts.get("message"),
              "reply_to": opts.get("reply-to"), "media": opts.get("media", []), "id": sent_id}}
    state["sent"].append(record)
    now = datetime.now(timezone.utc)
    messages.append({{"id": sent_id, "type": 0, "content": record["message"] or "",
                     "author": {{"id": {bot_id!r}, "username": {bot_name!r}, "bot": True}},
                     "attachments": [], "timestamp": now.isoformat(),
                     "timestampMs": int(now.timestamp() * 1000),
                     "timestampUtc": now.strftime("%Y-%m-%dT%H:%M:%S.000Z")}})
    payload = {{"channel": channel, "to": f"{{channel}}:{{target}}", "via": "direct",
               "mediaUrl": (record["media"] or [None])[0],
               "result": {{"channel": channel, "messageId": sent_id}}}}
    return {{"action": "send", "channel": channel, "dryRun": False, "handledBy": "core",
            "messageId": sent_id, "payload": payload}}


main(sys.argv[1:])
'''


def real_home(root: Path) -> Path:
    """A fresh OpenClaw home (``openclaw setup --baseline``), as a new user has it."""
    require_openclaw()
    wrapper = root / "bin" / "openclaw-real"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\nexec "{NODE}" "{OPENCLAW_MJS}" "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    home = root / "home"
    fresh_home(wrapper, home)
    return home


class FakeOpenClaw:
    """The stand-in ``openclaw`` in ``folder``; the real one runs with ``home``."""

    def __init__(self, folder: Path, home: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.state_path = folder / "state.json"
        self._write(
            {
                "conversations": {},
                "faults": {},
                "calls": [],
                "sent": [],
                "next_id": 1_200_000_000_000_000_000,
                "check_sends": False,
            }
        )
        env = {k: v for k, v in home_env(home).items() if k in ("HOME", "TMPDIR", "NO_COLOR")}
        self.command = folder / "openclaw"
        self.command.write_text(
            _SCRIPT.format(
                python=sys.executable,
                state=str(self.state_path),
                node=str(NODE),
                mjs=str(OPENCLAW_MJS),
                env=env,
                bot_id=BOT_ID,
                bot_name=BOT_NAME,
            ),
            encoding="utf-8",
        )
        self.command.chmod(0o755)

    # -- what the platform shows ---------------------------------------------------------

    def say(
        self,
        channel: str,
        target: str,
        text: str,
        *,
        author: str = "42",
        name: str = "Ada",
        bot: bool = False,
        minutes_ago: float = 0,
        attachments: list[dict[str, Any]] | None = None,
        reply_to: str | None = None,
    ) -> str:
        """A message on Discord (its API's shape) in ``channel``/``target``; its id."""
        with self._state() as state:
            state["next_id"] += 1
            message_id = str(state["next_id"])
        moment = datetime.now(UTC) - timedelta(minutes=minutes_ago)
        author_object: dict[str, Any] = {"id": author, "username": name.lower()}
        author_object.update(global_name=name, **({"bot": True} if bot else {}))
        message: dict[str, Any] = {
            "id": message_id,
            "type": 0,
            "content": text,
            "channel_id": target.removeprefix("channel:"),
            "author": author_object,
            "attachments": attachments or [],
            "embeds": [],
            "mentions": [],
            "timestamp": moment.isoformat(),
            "edited_timestamp": None,
            "timestampMs": int(moment.timestamp() * 1000),
            "timestampUtc": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment:%f}"[:3] + "Z",
        }
        if reply_to:
            message["message_reference"] = {"message_id": reply_to}
        self.record(channel, target, [message])
        return message_id

    def record(self, channel: str, target: str, messages: list[dict[str, Any]]) -> None:
        """Messages as another platform's read returns them, oldest first."""
        with self._state() as state:
            state["conversations"].setdefault(f"{channel} {target}", []).extend(messages)

    def fail(self, verb: str, fault: str, times: int = 1) -> None:
        """The next ``times`` calls of ``verb`` (``message read``, ``message send``, or one
        the real CLI answers, such as ``channels status``) fail: ``timeout`` (no answer),
        ``real`` (the real CLI answers), or exit 1 saying ``fault``."""
        with self._state() as state:
            state["faults"].setdefault(verb, []).extend([fault] * times)

    def check_sends(self) -> None:
        """Have the real CLI check every send's arguments (``--dry-run``) first."""
        with self._state() as state:
            state["check_sends"] = True

    # -- what it was asked ---------------------------------------------------------------

    @property
    def sent(self) -> list[dict[str, Any]]:
        """Every send it made: channel, target, message, reply_to, media, id."""
        return list(self._read()["sent"])

    @property
    def calls(self) -> list[list[str]]:
        """The arguments of every ``message read`` and ``message send``."""
        return list(self._read()["calls"])

    def reads(self) -> list[list[str]]:
        return [c for c in self.calls if c[:2] == ["message", "read"]]

    def _read(self) -> dict[str, Any]:
        return dict(json.loads(self.state_path.read_text(encoding="utf-8")))

    @contextlib.contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        """The state to change, under the lock the stand-in takes too."""
        with open(f"{self.state_path}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self._read()
            yield state
            self._write(state)

    def _write(self, state: dict[str, Any]) -> None:
        staged = Path(f"{self.state_path}.new")
        staged.write_text(json.dumps(state), encoding="utf-8")
        staged.replace(self.state_path)
