"""A mistake reads the same with and without a daemon (issue 11 item 14).

The README promises that commands served by a daemon print exactly what they
print without one. Every bad input below runs twice through the CLI: once
with ``--direct`` (the files, in this process) and once in client mode (a real
daemon on loopback, found through ``daemon.json``), and both runs must exit
with the same code and print the same sentence. Commands that always work on
the files are in the table too, so they stay the same if they ever go through
the daemon.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_support import invoke, ok_json
from gateway_support import Live, serve
from memvault.config import load_settings
from memvault.gateway.client import read_info
from memvault.runtime import Runtime
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import HashEmbedder
from waiting import WAIT

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound

UNKNOWN = "m-00000000"
# The vault's Telegram channel: its owner, and someone nobody let in.
OWNER = "4242"
STRANGER = "555"
TELEGRAM = f"""
[channels.telegram]
enabled = true
owner = ["{OWNER}"]
base_url = "http://127.0.0.1:9/bot"
"""

CASES: list[tuple[str, ...]] = [
    # remember
    ("remember", "Halcyon", "--importance", "7"),
    ("remember", "Halcyon", "--importance", "-0.5"),
    ("remember", "Halcyon", "--importance", "nan"),
    ("remember", ""),
    ("remember", "   "),
    ("remember", "x" * 10_001),
    ("remember", "Halcyon", "--category", "nonsense"),
    ("remember", "Halcyon", "--tags", "#"),
    ("remember", "a\udcffb"),
    ("remember", "a\x00b"),
    # get, forget, memories
    ("get", UNKNOWN),
    ("get", ""),
    ("get", "x" * 150),
    ("get", "m-0/../x"),
    ("forget", UNKNOWN),
    ("forget", ""),
    ("forget", "--contact", "Nobody", "--yes"),
    ("forget", "--about", "   ", "--yes"),
    ("forget", UNKNOWN, "--about", "boats"),
    ("memory", "access", UNKNOWN),
    ("memories", "--category", "nonsense"),
    ("memories", "--limit", "0"),
    # search, recall, context
    ("search", ""),
    ("search", "   "),
    ("search", "boat", "--limit", "0"),
    ("search", "boat", "--limit", "-3"),
    ("search", "boat", "--kind", "bogus"),
    ("search", "boat", "--since", "yesterday-ish"),
    ("search", "boat", "--until", "2026-13-40"),
    ("search", "boat", "--category", "nonsense"),
    ("search", "boat", "--folder", "../outside"),
    ("search", "boat", "--mmr", "2"),
    ("search", "boat", "--min-score", "-1"),
    ("search", "a\udcffb"),
    ("recall", ""),
    ("recall", "boat", "--category", "nonsense"),
    ("recall", "boat", "--limit", "0"),
    ("context", "--budget", "10"),
    ("context", "--budget", "-5"),
    ("context", "--budget", "300000"),
    ("context", "--query", "a\udcffb"),
    # tools that read go through the daemon
    ("tools", "call", "nonexistent_tool"),
    ("tools", "call", "vault_read", "--args", '{"path": "../outside.md"}'),
    ("tools", "call", "vault_read", "--args", '{"path": "Nowhere.md"}'),
    ("tools", "call", "vault_read", "--args", "{}"),
    ("tools", "call", "memory_get", "--args", f'{{"id": "{UNKNOWN}"}}'),
    ("tools", "call", "memory_search", "--args", '{"query": ""}'),
    ("tools", "call", "memory_search", "--args", '{"query": "boat", "limit": 0}'),
    ("tools", "call", "task_list", "--args", '{"status": "bogus"}'),
    ("tools", "call", "task_list", "--args", '{"due_before": "someday"}'),
    ("tools", "call", "memory_search", "--args", '{"query": "a\\ud800b"}'),
    ("tools", "call", "vault_read", "--args", "[1]"),
    # commands that work on the files either way
    ("task", "add", "Plan", "--due", "not a date"),
    ("task", "add", "Plan", "--priority", "whenever"),
    ("task", "add", ""),
    ("task", "add", "Plan", "--project", "a\udcffb"),
    ("task", "show", "No such task"),
    ("task", "done", "No such task"),
    ("task", "list", "--status", "bogus"),
    ("note", "read", "../outside.md"),
    ("note", "read", "Nowhere.md"),
    ("note", "write", "a\x00.md", "--content", "x"),
    ("contact", "show", "telegram:999"),
    ("contact", "show", "Nobody"),
    ("contact", "add", "Ada", "--id", "nochannel"),
    # channels: send goes through the daemon; deciding on senders and the outbox
    # work on state.db either way
    ("channels", "send", "fax", "owner", "hi"),
    ("channels", "send", "telegram", "owner", ""),
    ("channels", "send", "telegram", "owner", "   "),
    ("channels", "send", "telegram", "", "hi"),
    ("channels", "send", "telegram", "Nobody", "hi"),
    ("channels", "send", "telegram", STRANGER, "hi"),
    ("channels", "pending", "fax"),
    ("channels", "approve", "telegram", "999"),
    ("channels", "block", "telegram", OWNER),
    ("channels", "outbox", "--retry", "999"),
    ("channels", "outbox", "--status", "lost"),
]


def _answer(vault: Path, args: tuple[str, ...], *, direct: bool) -> tuple[int, str, str]:
    result = invoke(vault, *(("--direct",) if direct else ()), *args)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """One daemon for the whole table (its vault holds one memory and one task)."""
    # start_daemon is function-scoped; a module-scoped daemon is built the same way.
    root = tmp_path_factory.mktemp("same-errors") / "vault"
    init_vault(Vault(root))
    with (root / ".memvault/config.toml").open("a", encoding="utf-8") as config:
        config.write(TELEGRAM)  # enabled, never started: nothing is sent (background=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TELEGRAM_BOT_TOKEN", "123456:same-errors")
        # The settings a CLI in direct mode reads too (the same time zone, say).
        runtime = Runtime.open(load_settings(root).settings, embedder=HashEmbedder())
        live = serve(runtime, background=False)
        yield live
        live.stop()


@pytest.fixture(scope="module")
def vault(served: Live) -> Path:
    root = served.vault
    assert read_info(root) is not None, "the daemon announces itself"
    stored = ok_json(root, "remember", "The boat is called Halcyon")
    events = [e for e in served.daemon.bus.since(None) if e.type == "memory_stored"]
    assert [e.payload["id"] for e in events] == [stored["id"]], "client mode reaches the daemon"
    ok_json(root, "--direct", "task", "add", "Renew the certificate")
    return root


@pytest.mark.parametrize("args", CASES, ids=lambda args: " ".join(args)[:60])
def test_a_mistake_reads_the_same_through_the_daemon(vault: Path, args: tuple[str, ...]) -> None:
    direct = _answer(vault, args, direct=True)
    client = _answer(vault, args, direct=False)
    code, stdout, _ = direct
    assert code != 0, f"not a mistake: {args} exits 0"
    assert stdout == "", stdout
    assert client == direct, f"{args}:\n  direct: {direct}\n  daemon: {client}"


def test_what_direct_mode_accepts_the_daemon_accepts(served: Live, vault: Path) -> None:
    """Limits only the HTTP models had (60 tags, a long source) are gone: one rule."""
    many_tags = ",".join(f"t{n}" for n in range(60))
    through_daemon = ok_json(vault, "remember", "Sixty tags", "--tags", many_tags)
    assert through_daemon["created_new"] and len(through_daemon["tags"]) == 60
    stored = [e for e in served.daemon.bus.since(None) if e.type == "memory_stored"]
    assert stored and stored[-1].payload["id"] == through_daemon["id"], "the daemon stored it"
    again = ok_json(vault, "--direct", "remember", "Sixty tags", "--tags", many_tags)
    assert again["consolidation"]["action"] == "noop"
    assert {**again, "consolidation": None} == {
        **through_daemon,
        "created_new": False,
        "consolidation": None,
    }
    long_source = ok_json(vault, "remember", "From far away", "--source", "s" * 300)
    assert long_source["source"] == "s" * 200
    for args in (
        ("context", "--budget", "200000"),
        ("context", "--query", "x" * 5000),
        ("search", "boat " * 1000),
    ):
        assert invoke(vault, *args).stdout == invoke(vault, "--direct", *args).stdout


def test_a_terminal_byte_reads_the_same_through_the_daemon(vault: Path) -> None:
    """Real processes with bytes in argv (what a terminal sends), client and direct mode."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env |= {"MEMVAULT_EMBEDDER__PROVIDER": "none", "MEMVAULT_CLI__AUTOSTART": "false"}
    for args in ([b"remember", b"caf\xe9"], [b"search", b"\xff"], [b"get", b"m-\xfe"]):
        answers = []
        for mode in ([], [b"--direct"]):
            done = subprocess.run(
                [sys.executable, "-m", "memvault", b"--vault", os.fsencode(vault), *mode, *args],
                env=env,
                capture_output=True,
                timeout=WAIT,
            )
            answers.append((done.returncode, done.stdout, done.stderr))
        assert answers[0] == answers[1], args
        code, stdout, stderr = answers[0]
        assert code == 2 and stdout == b"", answers[0]
        assert b"contains a character that is not valid text (the byte 0x" in stderr


def test_http_type_mistakes_read_as_one_sentence(served: Live) -> None:
    """What only HTTP clients can get wrong (types, missing fields) is named as sent."""
    with served.client() as api:
        for method, url, body, message in (
            ("GET", "/v1/search", None, "The query (q) is required."),
            ("GET", "/v1/search?q=boat&limit=many", None, "limit must be a whole number."),
            ("POST", "/v1/memories", {"text": "x", "importance": "high"},
             "importance must be a number."),
            ("POST", "/v1/memories", {"text": "x", "colour": "red"},
             "colour is not a field this route takes."),
            ("POST", "/v1/memories", {}, "text is required."),
            ("POST", "/v1/memories", {"text": "x", "importance": 7},
             "Importance must be between 0 and 1, not 7.0."),
            ("GET", "/v1/memories/search?q=", None, "The search query is empty."),
            ("GET", "/v1/context?budget=10", None,
             "The context budget must be between 50 and 200000 tokens, not 10."),
        ):  # fmt: skip
            response = api.request(method, url, json=body)
            assert response.status_code == 400, response.text
            assert response.json()["error"]["message"] == message, url
