"""OpenClaw's past conversations, read from its state folder (``~/.openclaw``).

OpenClaw keeps each agent's sessions in ``agents/<agentId>/agent/openclaw-agent.sqlite``:
``session_nodes`` names each session (``agent:main:telegram:direct:123``) and its
current transcript, ``transcript_events`` holds the transcript's entries in order, as
JSON (``event_json``) or, above a kilobyte, as a zstd frame (``event_zstd``). Older
installs, and the archives a reset leaves, keep one JSON line per entry in
``agents/<agentId>/sessions/*.jsonl`` (the first line a ``session`` header). Both hold
the same entries: ``{"type": "message", "id", "timestamp", "message": {"role",
"content"}}``, where ``content`` is text or a list of blocks (``{"type": "text"}`` ...).

Only what was said is read: the user's and the assistant's text. Tool calls, tool
results, thinking, model changes and compactions are left out. The database is opened
read-only and never changed; a running OpenClaw may keep using it.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memvault.sqlite import read_only_uri

AGENT_DB = "agent/openclaw-agent.sqlite"
SAID_ROLES = ("user", "assistant")


@dataclass(frozen=True)
class Said:
    """One message of an OpenClaw conversation."""

    event_id: str
    role: str  # user or assistant
    text: str
    when: datetime


@dataclass
class Transcript:
    """One OpenClaw session's conversation."""

    agent: str
    key: str  # OpenClaw's session key (``agent:main:telegram:direct:123``)
    where: str  # the file it was read from, for problems and the ledger
    messages: list[Said] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    title: str = ""


@dataclass(frozen=True)
class Peer:
    """Whom an OpenClaw session is with, from its key."""

    channel: str | None  # telegram, discord ...; None for the agent's own sessions
    chat_id: str  # the peer or group id ("" for the agent's own)
    group: bool


def state_folder(path: Path) -> Path | None:
    """The OpenClaw state folder ``path`` is, or holds, or is the workspace of."""
    for candidate in (path, path.parent):
        if (candidate / "agents").is_dir():
            return candidate
    return None


def peer_of(key: str) -> Peer:
    """Whom a session is with: ``agent:main:telegram:direct:123`` is the peer 123 on
    Telegram; ``...:group:-100...`` or ``...:channel:...`` a group; ``agent:main:main``
    (and any key naming no chat) the agent's own session."""
    parts = key.split(":")
    rest = parts[2:] if len(parts) > 2 and parts[0] == "agent" else parts
    kinds = {"direct": False, "dm": False, "group": True, "channel": True, "room": True}
    for at, part in enumerate(rest):
        if part in kinds and at + 1 < len(rest) and at > 0:
            return Peer(rest[0].casefold(), ":".join(rest[at + 1 :]), kinds[part])
    return Peer(None, "", False)


def transcripts(folder: Path) -> Iterator[Transcript]:
    """Every conversation under an OpenClaw state folder: each agent's database first,
    then the JSONL files of sessions the database does not hold."""
    agents = folder / "agents"
    for agent_dir in sorted(p for p in agents.iterdir() if p.is_dir()):
        seen: set[str] = set()
        database = agent_dir / AGENT_DB
        if database.is_file():
            for transcript in _from_database(agent_dir.name, database):
                seen.add(transcript.key)
                yield transcript
        sessions = agent_dir / "sessions"
        if sessions.is_dir():
            for file in sorted(sessions.glob("*.jsonl")):
                transcript = _from_jsonl(agent_dir.name, file, _keys_by_file(sessions))
                if transcript.key not in seen and (transcript.messages or transcript.problems):
                    yield transcript


def _from_database(agent: str, path: Path) -> Iterator[Transcript]:
    where = str(path)
    try:
        conn = sqlite3.connect(read_only_uri(path), uri=True)
    except sqlite3.Error as exc:
        yield Transcript(agent, f"agent:{agent}", where, problems=[f"{where}: {exc}"])
        return
    try:
        try:
            nodes = conn.execute(
                "SELECT session_key, current_session_id, display_name, label "
                "FROM session_nodes ORDER BY created_at, session_key"
            ).fetchall()
        except sqlite3.Error as exc:
            yield Transcript(
                agent,
                f"agent:{agent}",
                where,
                problems=[f"{where}: not an OpenClaw agent database this version reads ({exc})."],
            )
            return
        for key, session_id, display, label in nodes:
            transcript = Transcript(agent, str(key), where, title=str(display or label or ""))
            rows = conn.execute(
                "SELECT seq, event_json, event_zstd, event_utf8_bytes, created_at "
                "FROM transcript_events WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
            for seq, text, packed, size, created in rows:
                at = f"{where} session {key} entry {seq}"
                try:
                    raw = text if text is not None else _unpack(packed, size)
                    entry = json.loads(raw)
                except (ValueError, TypeError) as exc:
                    transcript.problems.append(f"{at}: could not be read ({exc}).")
                    continue
                when = _from_millis(created) or datetime.fromtimestamp(0, UTC)
                said = _said(entry, fallback=when, seq=seq)
                if said is not None:
                    transcript.messages.append(said)
            yield transcript
    finally:
        conn.close()


def _unpack(packed: bytes, size: int | None) -> str:
    """One zstd frame, at most its stated size (4 MiB when none is stated), as text."""
    if sys.version_info >= (3, 14):
        from compression import zstd
    else:
        from backports import zstd

    decompressor = zstd.ZstdDecompressor()
    try:
        data = decompressor.decompress(packed, max_length=int(size or 0) or 2**22)
    except zstd.ZstdError as exc:
        raise ValueError(str(exc)) from exc
    if not decompressor.eof:
        raise ValueError("the frame is longer than its stated size, or cut short")
    return data.decode("utf-8")


def _keys_by_file(sessions: Path) -> dict[str, str]:
    """Session keys by transcript file name, from a legacy ``sessions.json`` store."""
    store = sessions / "sessions.json"
    try:
        data = json.loads(store.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    out: dict[str, str] = {}
    if isinstance(data, dict):
        for key, entry in data.items():
            if isinstance(entry, dict) and entry.get("sessionId"):
                out[f"{entry['sessionId']}.jsonl"] = str(key)
    return out


def _from_jsonl(agent: str, file: Path, keys: dict[str, str]) -> Transcript:
    name = file.name
    key = keys.get(name) or f"agent:{agent}:{file.stem}"
    transcript = Transcript(agent, key, str(file))
    try:
        lines = file.read_text("utf-8", errors="replace").splitlines()
    except OSError as exc:
        transcript.problems.append(f"{file}: {exc.strerror or exc}.")
        return transcript
    fallback = datetime.fromtimestamp(file.stat().st_mtime, UTC)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            transcript.problems.append(f"{file} line {number}: not JSON, skipped.")
            continue
        said = _said(entry, fallback=fallback, seq=number)
        if said is not None:
            transcript.messages.append(said)
    return transcript


def _said(entry: Any, *, fallback: datetime, seq: int) -> Said | None:
    """The message an entry holds, or None (not a message, or nothing said)."""
    if not isinstance(entry, dict) or entry.get("type") != "message":
        return None
    message = entry.get("message")
    if not isinstance(message, dict) or message.get("role") not in SAID_ROLES:
        return None
    text = _text(message.get("content"))
    if not text:
        return None
    when = _moment(entry.get("timestamp")) or _from_millis(message.get("timestamp")) or fallback
    return Said(str(entry.get("id") or seq), str(message["role"]), text, when)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        return "\n".join(p for p in parts if p.strip()).strip()
    return ""


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _from_millis(value: Any) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return datetime.fromtimestamp(value / 1000, UTC)
