"""``memvault ask`` and ``memvault chat`` through the real CLI and the real SDKs.

The model is a fake OpenAI or Anthropic server on loopback (:mod:`llm_fakes`).
``ask`` runs in-process where its output is all that matters, and as a
process where streaming or the terminal matter; ``chat`` runs as a process
whose controlling terminal is a pseudo-terminal, so prompts, approval
questions, Ctrl-C and Ctrl-D behave as they do for a person at a keyboard.
"""

from __future__ import annotations

import codecs
import fcntl
import json
import os
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from cli_support import EXIT_CONFIG, EXIT_INVALID, fail, invoke, ok, ok_json
from llm_fakes import (
    FAKE_KEY,
    FAKE_KEY_ENV,
    FakeAnthropic,
    FakeLLMServer,
    FakeOpenAI,
    llm_settings,
)
from memvault.agent.sessions import SUMMARY_PROMPT
from memvault.llm.untrusted import UNTRUSTED
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from waiting import WAIT, wait_for

pytestmark = pytest.mark.timeout(3 * WAIT)  # a hang guard: every wait has its own bound
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# The child makes the pseudo-terminal its controlling terminal (so Ctrl-C becomes SIGINT,
# as in a shell), then becomes the command.
# Ctrl-C as from a terminal: SIGINT's default handling, whatever the test's worker left
# ignored or blocked (a clean-clone run showed Ctrl-C ignored in these children; the test
# that leaves it so in its worker is not found yet).
AS_FROM_A_TERMINAL = (
    "import signal; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT]); "
)
ADOPT_TERMINAL = (
    "import fcntl, os, sys, termios; "
    + AS_FROM_A_TERMINAL
    + "fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def _memvault() -> list[str]:
    """The console script next to this interpreter, else ``python -m memvault``."""
    script = Path(sys.executable).with_name("memvault")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memvault"]


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    return root


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def llm_env(fake: FakeLLMServer, **extra: str) -> dict[str, str]:
    """``MEMVAULT_*`` variables pointing the agent at ``fake`` (as :func:`llm_settings` does)."""
    settings = llm_settings(fake)
    env = {
        "MEMVAULT_LLM__PROVIDER": settings.provider,
        "MEMVAULT_LLM__MODEL": str(settings.model),
        "MEMVAULT_LLM__BASE_URL": str(settings.base_url),
        "MEMVAULT_LLM__API_KEY_ENV": FAKE_KEY_ENV,
        "MEMVAULT_LLM__RETRY_BASE_SECONDS": str(settings.retry_base_seconds),
        "MEMVAULT_LLM__TIMEOUT": str(WAIT),
        "MEMVAULT_AGENT__SUMMARY": "extractive",
        FAKE_KEY_ENV: FAKE_KEY,
    }
    env.update({f"MEMVAULT_{key.upper()}": value for key, value in extra.items()})
    return env


def held(text: str, until: threading.Event) -> Callable[[dict[str, Any]], str]:
    """A reply (for ``reply_with``) the model sends only once ``until`` is set: a model that
    is still thinking for as long as the test needs it to."""

    def answer(_request: dict[str, Any]) -> str:
        until.wait(WAIT)
        return text

    return answer


def memory_texts(vault: Path) -> list[str]:
    return [m["text"] for m in ok_json(vault, "memories")]


def tool_messages(request: dict[str, Any]) -> list[str]:
    """The tool results an OpenAI-format request sends back to the model."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


# -- memvault ask ------------------------------------------------------------------------------


@pytest.mark.parametrize("server", [FakeOpenAI, FakeAnthropic])
def test_ask_streams_the_answer_and_runs_approved_tools(
    vault: Path, server: type[FakeLLMServer]
) -> None:
    with server() as model:
        model.reply("Let me note that.", tool_calls=[("remember", {"fact": "The boat is Halcyon"})])
        model.reply("Noted: your boat is called Halcyon.")
        result = ok(vault, "ask", "My boat is called Halcyon", "--yes", env=llm_env(model))
        assert len(model.requests) == 2
        # The command and the tool definitions reached the model.
        first = json.dumps(model.requests[0])
        assert "My boat is called Halcyon" in first and "remember" in first
    # Text before a tool call and the answer after it do not run together.
    assert result.stdout == "Let me note that.\nNoted: your boat is called Halcyon.\n"
    assert '-> remember {"fact": "The boat is Halcyon"}' in result.stderr
    assert "done · 2 model calls · 1 tool call" in result.stderr
    assert "The boat is Halcyon" in memory_texts(vault)
    assert "The boat is Halcyon" in (vault / "Memory/Facts.md").read_text()


def test_ask_without_a_terminal_refuses_writes_and_tells_the_model(
    vault: Path, fake: FakeOpenAI
) -> None:
    fake.reply("", tool_calls=[("remember", {"fact": "The cat is called Tom"})])
    fake.reply("I could not store that without your approval.")
    result = ok(vault, "ask", "Remember my cat Tom", env=llm_env(fake))
    assert result.stdout == "I could not store that without your approval.\n"
    assert "!! remember: Error: The owner did not approve remember" in result.stderr
    assert "[approval]" not in result.output, "nobody to ask: no question"
    refusal = tool_messages(fake.requests[1])
    assert len(refusal) == 1 and "did not approve remember" in refusal[0]
    assert "tier 2" in refusal[0]
    assert memory_texts(vault) == []


def test_ask_json_prints_the_run_result(vault: Path, fake: FakeOpenAI) -> None:
    fake.reply("", tool_calls=[("task_create", {"title": "Renew the boat insurance"})])
    fake.reply("Created the task.", usage=(120, 7))
    run = ok_json(vault, "ask", "Remind me to renew the boat insurance", "--yes",
                  env=llm_env(fake))  # fmt: skip
    assert run["status"] == "done"
    assert run["answer"] == "Created the task."
    assert run["iterations"] == 2
    assert run["session"] == "cli" and run["model"] == "fake-model"
    assert run["tool_calls"] == [{"name": "task_create", "ok": True, "code": None}]
    assert run["usage"]["input_tokens"] > 120 and run["usage"]["output_tokens"] >= 7
    assert run["error"] is None
    tasks = ok_json(vault, "task", "list")
    assert [t["title"] for t in tasks] == ["Renew the boat insurance"]


def test_ask_with_a_failing_model(vault: Path, fake: FakeOpenAI) -> None:
    fake.fail(500, times=2)
    env = llm_env(fake, llm__max_retries="0")
    result = invoke(vault, "ask", "What is on today?", env=env)
    assert result.exit_code == 1
    assert result.stdout == ""
    first = result.stderr.splitlines()[0]
    assert first.startswith("Failed: The model 'fake-model' at ")
    assert "500" in first and first.endswith(".")
    assert len(fake.requests) == 1, "no retries were configured"
    issues = (vault / "Known Issues.md").read_text()
    assert '"What is on today?" failed' in issues

    run = json.loads(invoke(vault, "ask", "And tomorrow?", "--json", env=env).stdout)
    assert run["status"] == "failed" and "500" in run["error"]


def test_ask_without_a_model_says_how_to_configure_one(vault: Path) -> None:
    message = fail(vault, "ask", "Hello", code=EXIT_CONFIG)
    assert message == "Error: No language model is configured."
    hint = invoke(vault, "ask", "Hello").stderr
    assert "[llm]" in hint and "MEMVAULT_LLM__PROVIDER" in hint


def test_ask_with_an_empty_command(vault: Path, fake: FakeOpenAI) -> None:
    message = fail(vault, "ask", "   ", code=EXIT_INVALID, env=llm_env(fake))
    assert "command is empty" in message
    assert fake.requests == []


def test_ask_streams_before_the_run_ends(vault: Path, fake: FakeOpenAI) -> None:
    """The answer reaches a pipe as the model writes it, not when the process exits."""
    fake.reply("Looking that up.", tool_calls=[("memory_search", {"query": "boat"})])
    first_words_seen = threading.Event()
    fake.reply_with(held("Nothing about boats yet.", first_words_seen))
    process = subprocess.Popen(
        [*_memvault(), "ask", "What do you know about boats?"],
        env=process_env(vault, fake),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        first = _read_until(process.stdout.fileno(), b"Looking that up.")
        assert process.poll() is None, "the first words arrived while the run went on"
        first_words_seen.set()
        out, err = process.communicate(timeout=WAIT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err.decode()
    assert (first + out).decode() == "Looking that up.\nNothing about boats yet.\n"


def _read_until(fd: int, wanted: bytes) -> bytes:
    seen = b""
    deadline = time.monotonic() + WAIT
    while wanted not in seen:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            pytest.fail(f"timed out waiting for {wanted!r}; got {seen!r}")
        chunk = os.read(fd, 4096)
        if not chunk:
            pytest.fail(f"the output ended before {wanted!r}; got {seen!r}")
        seen += chunk
    return seen


# -- a terminal --------------------------------------------------------------------------------


def process_env(vault: Path, fake: FakeLLMServer, **extra: str) -> dict[str, str]:
    """This process's environment without its ``MEMVAULT_*``, plus the vault and the model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env.update(
        {
            "MEMVAULT_VAULT": str(vault),
            "MEMVAULT_EMBEDDER__PROVIDER": "none",
            "TERM": "dumb",
            "COLUMNS": "120",
            "LINES": "40",
        }
    )
    env.update(llm_env(fake, **extra))
    return env


class Terminal:
    """A ``memvault`` process on a pseudo-terminal that is its controlling terminal."""

    def __init__(
        self, args: list[str], env: Mapping[str, str], *, stdout: int | None = None
    ) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.process = subprocess.Popen(
            [sys.executable, "-c", ADOPT_TERMINAL, *_memvault(), *args],
            stdin=slave,
            stdout=slave if stdout is None else stdout,
            stderr=slave,
            env=dict(env),
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.transcript = ""  # everything shown so far, ANSI codes stripped
        self._unread = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._closed = False

    def expect(self, text: str, timeout: float = WAIT) -> str:
        """Wait for ``text``; what was shown up to and including it."""
        deadline = time.monotonic() + timeout
        while text not in self._unread:
            if not self._read(deadline):
                pytest.fail(f"{text!r} did not appear; the terminal shows:\n{self.transcript}")
        end = self._unread.index(text) + len(text)
        shown, self._unread = self._unread[:end], self._unread[end:]
        return shown

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def line(self, text: str) -> str:
        """Type a line and press Enter; what was shown until the next prompt."""
        self.send(text + "\r")
        return self.expect("you > ")

    def wait_blocked(self, timeout: float = WAIT) -> None:
        """Wait until the process sleeps in a system call (reading the keyboard, the model).

        A Ctrl-C that lands just before a blocking read is only acted on once
        the read returns (CPython handles signals between bytecodes), so a test
        sends it once the process has been asleep for a moment (Linux /proc).
        """
        stat = Path(f"/proc/{self.process.pid}/stat")
        if not stat.exists():
            return
        deadline = time.monotonic() + timeout
        asleep = 0
        while asleep < 5:
            state = stat.read_text().rpartition(")")[2].split()[0]
            asleep = asleep + 1 if state == "S" else 0
            if time.monotonic() > deadline:
                pytest.fail(f"the process never waited; it is in state {state}")
            time.sleep(0.01)

    def wait(self, timeout: float = WAIT) -> int:
        """Wait for the process to exit (reading what it still shows); its exit status."""
        deadline = time.monotonic() + timeout
        while self._read(deadline):
            pass
        try:
            return self.process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"memvault did not exit; the terminal shows:\n{self.transcript}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if not self._closed:
            os.close(self.master)
            self._closed = True

    def _read(self, deadline: float) -> bool:
        """Read what the process shows; False at the deadline or when the terminal closed."""
        ready, _, _ = select.select([self.master], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        try:
            data = os.read(self.master, 4096)
        except OSError:  # EIO: every process on the terminal has exited
            data = b""
        if not data:
            return False
        text = ANSI.sub("", self._decoder.decode(data)).replace("\r\n", "\n").replace("\r", "")
        self.transcript += text
        self._unread += text
        return True


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.close()


def chat(terminals: list[Terminal], vault: Path, fake: FakeLLMServer, **extra: str) -> Terminal:
    terminal = Terminal(["chat"], process_env(vault, fake, **extra))
    terminals.append(terminal)
    banner = terminal.expect("you > ")
    assert "memvault chat · openai fake-model · session cli" in banner
    assert "/remember TEXT" in banner
    return terminal


# -- memvault chat -----------------------------------------------------------------------------


def test_chat_session(vault: Path, fake: FakeOpenAI, terminals: list[Terminal]) -> None:
    term = chat(terminals, vault, fake, agent__summary="llm")

    # A tier-2 call: the owner is asked at the terminal and approves.
    fake.reply("", tool_calls=[("remember", {"fact": "The boat is called Halcyon"})])
    fake.reply("Stored: your boat is Halcyon.")
    term.send("My boat is called Halcyon\r")
    question = term.expect("[y/N] ")
    assert "[approval] Allow remember: remember 'The boat is called Halcyon'?" in question
    assert "(approves file writes for this session)" in question
    shown = term.line("y")
    assert "agent > Stored: your boat is Halcyon.\n" in shown
    assert "(done · 2 model calls · 1 tool call" in shown
    assert json.loads(tool_messages(fake.requests[1])[0])["stored"] is True

    # Another file write in the same session is not asked again.
    fake.reply("", tool_calls=[("task_create", {"title": "Fix the bilge pump"})])
    fake.reply("Added the task.")
    shown = term.line("Add a task to fix the bilge pump")
    assert "[approval]" not in shown
    assert '-> task_create {"title": "Fix the bilge pump"}' in shown
    assert "agent > Added the task." in shown

    # Slash commands work on the vault directly, without the model.
    requests = len(fake.requests)
    assert "Remembered (^m-" in term.line("/remember I take my coffee black")
    recalled = term.line("/recall coffee")
    assert "- I take my coffee black" in recalled
    tasks = term.line("/tasks")
    assert "Fix the bilge pump" in tasks and "Title" in tasks
    assert "Commands: /new" in term.line("/help")
    assert "Unknown command /frobnicate" in term.line("/frobnicate")
    assert len(fake.requests) == requests

    # /new ends the session with the model's summary, which lands in today's journal.
    fake.reply("The owner named the boat Halcyon and asked for a bilge pump task.")
    shown = term.line("/new")
    assert "Session cli ended: The owner named the boat Halcyon" in shown
    assert "New session." in shown
    summary_request = fake.requests[-1]
    assert summary_request["messages"][0]["content"] == f"{SUMMARY_PROMPT}\n\n{UNTRUSTED}"
    assert "My boat is called Halcyon" in summary_request["messages"][1]["content"]

    # A new session asks again; a refusal goes back to the model and nothing is stored.
    fake.reply("", tool_calls=[("remember", {"fact": "The dog is called Rex"})])
    fake.reply("Alright, I will not store it.")
    term.send("My dog is called Rex\r")
    term.expect("[y/N] ")
    shown = term.line("n")
    assert "!! remember: Error: The owner did not approve remember" in shown
    assert "agent > Alright, I will not store it." in shown
    assert "did not approve" in tool_messages(fake.requests[-1])[0]

    fake.reply("The owner did not want the dog remembered.")
    term.send("/quit\r")
    assert term.wait() == 0
    assert "Session cli ended: The owner did not want the dog remembered." in term.transcript
    assert "Traceback" not in term.transcript

    memories = memory_texts(vault)
    assert "The boat is called Halcyon" in memories
    assert "I take my coffee black" in memories
    assert not any("Rex" in text for text in memories)
    journal = ok_json(vault, "journal", "show")["sections"]["Sessions"]
    assert any("The owner named the boat Halcyon" in entry for entry in journal)
    assert any("did not want the dog remembered" in entry for entry in journal)
    assert fake.pending == 0


def test_chat_ctrl_c_cancels_the_answer_then_quits_at_the_prompt(
    vault: Path, fake: FakeOpenAI, terminals: list[Terminal]
) -> None:
    term = chat(terminals, vault, fake)
    # The answer is held until the chat has ended: a prompt that waited for it never comes.
    answer_may_come = threading.Event()
    fake.reply_with(held("This answer comes too late.", answer_may_come))
    term.send("Take your time\r")
    term.expect("agent > ")
    wait_for(lambda: len(fake.requests) == 1, "the model to be asked")  # it is thinking
    term.wait_blocked()
    term.send("\x03")
    shown = term.expect("you > ")
    assert "Cancelled." in shown and "(cancelled" in shown
    assert "too late" not in shown

    # The chat goes on; Ctrl-C at the prompt ends it cleanly, with the session's summary.
    fake.reply("Here now.")
    assert "agent > Here now." in term.line("Are you there?")
    term.wait_blocked()
    term.send("\x03")
    assert term.wait() == 0
    answer_may_come.set()
    assert "Session cli ended: " in term.transcript
    assert "Interrupted" not in term.transcript and "Traceback" not in term.transcript
    assert term.transcript.endswith("\n"), "the shell's prompt starts on a new line"


def test_chat_ctrl_c_before_the_answer_starts_cancels_only_that_command(
    vault: Path, fake: FakeOpenAI, terminals: list[Terminal]
) -> None:
    """Ctrl-C while an idle session is summarised (before the run proper) keeps the chat."""
    term = chat(terminals, vault, fake, agent__summary="llm", agent__session_idle_minutes="0.00001")
    fake.reply("Hello!")
    assert "agent > Hello!" in term.line("Hi there")
    summary_may_come = threading.Event()  # summarising the idle session is slow
    fake.reply_with(held("The owner said hello.", summary_may_come))
    term.send("Tell me more\r")
    wait_for(lambda: len(fake.requests) == 2, "the idle session's summary to be asked for")
    assert fake.requests[1]["messages"][0]["content"] == f"{SUMMARY_PROMPT}\n\n{UNTRUSTED}"
    term.wait_blocked()
    term.send("\x03")
    assert "Cancelled." in term.expect("you > ")
    fake.reply("The owner said hello.")
    term.send("/quit\r")
    assert term.wait() == 0
    summary_may_come.set()
    assert "Session cli ended: The owner said hello." in term.transcript
    assert "Interrupted" not in term.transcript and "Traceback" not in term.transcript


def test_chat_reports_a_command_that_cannot_run_and_goes_on(
    vault: Path, fake: FakeOpenAI, terminals: list[Terminal]
) -> None:
    """A summary that cannot be written is said, not hidden, and the chat goes on."""
    term = chat(
        terminals,
        vault,
        fake,
        agent__summary="llm",
        agent__session_idle_minutes="0.00001",
        llm__max_retries="0",
    )
    fake.reply("Hello!")
    assert "agent > Hello!" in term.line("Hi there")
    fake.fail(503)  # the idle session's summary cannot be written; the command still runs
    fake.reply("Nothing more to tell.")
    shown = term.line("Tell me more")
    assert "could not end the idle session: The model 'fake-model' at " in shown
    assert "agent > Nothing more to tell." in shown
    fake.fail(503)  # the summary on quit cannot be written either: said, not hidden
    term.send("/quit\r")
    assert term.wait() == 0
    assert "Error: The model 'fake-model' at " in term.transcript
    assert "Traceback" not in term.transcript


def test_chat_ctrl_c_at_the_approval_question_then_ctrl_d(
    vault: Path, fake: FakeOpenAI, terminals: list[Terminal]
) -> None:
    term = chat(terminals, vault, fake)
    assert "Nothing relevant." in term.line("/recall sailing")
    fake.reply("", tool_calls=[("remember", {"fact": "I sail on Sundays"})])
    term.send("I sail on Sundays\r")
    term.expect("[y/N] ")
    term.wait_blocked()
    term.send("\x03")
    shown = term.expect("you > ")
    assert "Cancelled." in shown and "(cancelled · 1 model call" in shown
    assert len(fake.requests) == 1, "the model was not asked again"
    term.send("\x04")
    assert term.wait() == 0
    assert "Session cli ended: " in term.transcript
    assert "Traceback" not in term.transcript
    assert memory_texts(vault) == []


def test_chat_from_a_pipe_refuses_writes_and_ends_at_eof(vault: Path, fake: FakeOpenAI) -> None:
    """Without a terminal nobody can approve: the model is told, the chat ends with its input."""
    fake.reply("", tool_calls=[("remember", {"fact": "The car is blue"})])
    fake.reply("I could not store it.")
    result = ok(vault, "chat", stdin="/remember I like tea\nMy car is blue\n", env=llm_env(fake))
    assert "Remembered (^m-" in result.stdout
    assert "agent > I could not store it." in result.stdout
    assert "[approval]" not in result.output
    assert "did not approve remember" in tool_messages(fake.requests[1])[0]
    assert "Session cli ended: " in result.stderr
    assert memory_texts(vault) == ["I like tea"]


def test_chat_with_a_bad_session_key_stops_at_once(vault: Path, fake: FakeOpenAI) -> None:
    message = fail(vault, "chat", "--session", " ", stdin="hello\n", code=EXIT_INVALID,
                   env=llm_env(fake))  # fmt: skip
    assert "session key is empty" in message
    assert fake.requests == []


def test_ask_json_asks_at_the_terminal_and_keeps_stdout_clean(
    vault: Path, fake: FakeOpenAI, terminals: list[Terminal], tmp_path: Path
) -> None:
    """With a terminal, ``ask`` asks for approval there: on stderr, never into ``--json``."""
    fake.reply("", tool_calls=[("remember", {"fact": "The mooring is in Kiel"})])
    fake.reply("Stored.")
    out = tmp_path / "run.json"
    with out.open("wb") as sink:
        term = Terminal(
            ["ask", "Remember the mooring is in Kiel", "--json"],
            process_env(vault, fake),
            stdout=sink.fileno(),
        )
        terminals.append(term)
        term.expect("[approval] Allow remember: remember 'The mooring is in Kiel'?")
        term.expect("[y/N] ")
        term.send("y\r")
        assert term.wait() == 0
    run = json.loads(out.read_text())
    assert run["status"] == "done" and run["answer"] == "Stored."
    assert run["tool_calls"] == [{"name": "remember", "ok": True, "code": None}]
    assert "The mooring is in Kiel" in memory_texts(vault)


def test_the_agents_own_conversation_is_kept_and_found(vault: Path, fake: FakeOpenAI) -> None:
    fake.reply("Your locker at the pool is number 214.")
    ok(vault, "ask", "My locker at the pool is 214, keep that in mind", env=llm_env(fake))
    said = ok_json(vault, "memories", "--category", "conversation")
    assert [m["text"] for m in said] == [
        "the owner: My locker at the pool is 214, keep that in mind",
        "memvault: Your locker at the pool is number 214.",
    ]
    assert {m["source"] for m in said} == {"cli"}
    assert all(m["path"].startswith("Memory/Conversations/") for m in said)
    found = ok_json(vault, "search", "pool locker")
    assert {said[0]["id"], said[1]["id"]} <= {hit["id"] for hit in found}
    # Switched off, the next run's words stay in the session alone.
    fake.reply("Noted.")
    env = {**llm_env(fake), "MEMVAULT_MEMORY__CAPTURE": "false"}
    ok(vault, "ask", "The gym is closed on Mondays", env=env)
    assert len(ok_json(vault, "memories", "--category", "conversation")) == 2
