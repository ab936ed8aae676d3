"""A model per purpose ([llm], [llm.jobs], [llm.replies]) through the real surfaces.

Two fake OpenAI-compatible servers on loopback: ``main`` is [llm] (the owner's own
runs), ``small`` serves both [llm.jobs] and [llm.replies] under two model names, as a
small local server would. Each request is recognised by the server it reached and the
model it named. A real daemon answers a Telegram message (the fake Bot API) and runs a
job; ``memvault ask`` runs at the terminal; ``doctor`` says which model serves what.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from channel_support import OWNER, delivered, telegram_config
from cli_support import EXIT_CONFIG, fail, ok_json
from gateway_support import StartDaemon, ok
from llm_fakes import FAKE_KEY, FAKE_KEY_ENV, FakeOpenAI
from memvault.vault.layout import init_vault
from memvault.vault.store import Vault
from support import TZ, MovableClock, daytime_zone
from telegram_fake import FakeTelegram
from waiting import WAIT, wait_for


@pytest.fixture
def main() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def small() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def purposes_config(main: FakeOpenAI, small: FakeOpenAI) -> str:
    """The vault's config.toml: [llm] on ``main``; jobs and replies on ``small``."""
    return f"""
[llm]
provider = "openai"
model = "big-model"
base_url = "{main.url}"
api_key_env = "{FAKE_KEY_ENV}"
timeout = {WAIT}
max_retries = 0

[llm.jobs]
model = "small-jobs"
base_url = "{small.url}"

[llm.replies]
model = "small-replies"
base_url = "{small.url}"

[memory]
consolidation = "rule"

[agent]
summary = "extractive"
"""


def vault_with(tmp_path: Path, config: str) -> Path:
    root = tmp_path / "vault"
    init_vault(Vault(root))
    config = f'timezone = "{daytime_zone()}"\n{config}'
    (root / ".memvault" / "config.toml").write_text(config, encoding="utf-8")
    return root


def models(fake: FakeOpenAI) -> list[str]:
    return [str(request["model"]) for request in fake.requests]


def job_run(api: httpx.Client, name: str) -> dict[str, Any]:
    started = ok(api.post(f"/v1/jobs/{name}/run"), status=202)

    def ended() -> dict[str, Any] | None:
        run: dict[str, Any] = ok(api.get(f"/v1/jobs/runs/{started['run_id']}"))
        return run if run["status"] != "running" else None

    return wait_for(ended, f"the {name} run to finish")


def today_after_three() -> datetime:
    """Now, or 03:30 today when earlier: the daily note of a run before 03:00 is the day
    before's, and the Telegram messages (dated by the fake, now) are today's."""
    moment = datetime.now(TZ)
    return moment if moment.time() >= time(3) else moment.replace(hour=3, minute=30)


def test_replies_jobs_and_the_owners_runs_each_reach_their_model(
    tmp_path: Path,
    start_daemon: StartDaemon,
    tg: FakeTelegram,
    clock: MovableClock,
    main: FakeOpenAI,
    small: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(FAKE_KEY_ENV, FAKE_KEY)
    clock.set(today_after_three())
    root = vault_with(tmp_path, purposes_config(main, small))
    live = start_daemon(root, settings={"channels": {"telegram": telegram_config(tg)}})

    # A channel message: the agent answers on the replies model.
    small.reply("The cert is renewed on Friday.")
    tg.push_message(OWNER, "When is the cert renewed?")
    assert wait_for(lambda: delivered(tg, OWNER), "the reply") == ["The cert is renewed on Friday."]
    assert models(small) == ["small-replies"]
    assert "When is the cert renewed?" in str(small.requests[0]["messages"])

    # A job that asks a model (the daily note's prose): the jobs model.
    small.reply("A quiet day: one question about the certificate.")
    with live.client() as api:
        run = job_run(api, "daily_note")
        assert run["status"] == "ok", run["error"]
        assert "by the model" in run["output"]
        assert models(small) == ["small-replies", "small-jobs"]

        # The owner's own run over the API, and at the terminal: the default model.
        main.reply("Yes, I am here.")
        answer = ok(api.post("/v1/agent/run", json={"command": "Are you there?"}))
        assert answer["model"] == "big-model"
        main.reply("Friday, as the reply said.")
        asked = ok_json(root, "ask", "When is the cert renewed?", env={FAKE_KEY_ENV: FAKE_KEY})
        assert asked["answer"] == "Friday, as the reply said." and asked["model"] == "big-model"
        assert models(main) == ["big-model", "big-model"]
        assert len(small.requests) == 2, "nothing else went to the small server"

        # Doctor names the model of each purpose, with each one's health.
        checks = {c["name"]: c for c in ok(api.get("/v1/doctor"))["checks"]}
    llm = checks["llm"]
    assert llm["status"] == "ok"
    assert llm["message"] == (
        f"Language model: openai big-model at {main.url} for default; "
        f"openai small-jobs at {small.url} for jobs; "
        f"openai small-replies at {small.url} for replies."
    )
    purposes = llm["details"]["purposes"]
    assert {p: purposes[p]["model"] for p in purposes} == {
        "default": "big-model",
        "jobs": "small-jobs",
        "replies": "small-replies",
    }
    assert all(purposes[p]["healthy"] for p in purposes)
    assert purposes["replies"]["last_success_at"] is not None


def test_the_cli_runs_jobs_on_the_jobs_model_and_doctor_says_so(
    tmp_path: Path, main: FakeOpenAI, small: FakeOpenAI
) -> None:
    """No daemon: ``memvault jobs run`` builds its engine on [llm.jobs], ``ask`` on [llm]."""
    config = purposes_config(main, small)
    root = vault_with(tmp_path, config.replace('model = "small-replies"\n', ""))
    env = {FAKE_KEY_ENV: FAKE_KEY}
    ok_json(root, "task", "add", "Renew the passport", env=env)  # something happened today
    small.reply("The passport task was added.")
    ok_json(root, "jobs", "run", "daily_note", env=env)
    assert models(small) == ["small-jobs"] and main.requests == []

    main.reply("Noted.")
    assert ok_json(root, "ask", "Hello", env=env)["model"] == "big-model"
    assert models(main) == ["big-model"]

    report = ok_json(root, "doctor", env=env)
    (llm,) = [c for c in report["checks"] if c["name"] == "llm"]
    # [llm.replies] names only a server: the replies model is [llm]'s, on that server.
    assert llm["message"] == (
        f"Language model: openai big-model at {main.url} for default; "
        f"openai small-jobs at {small.url} for jobs; "
        f"openai big-model at {small.url} for replies."
    )


def test_jobs_without_a_model_keep_the_default_for_the_owner(tmp_path: Path) -> None:
    """``[llm.jobs] provider = "none"``: background work stays off the model."""
    with FakeOpenAI() as main:
        url = main.url
        config = f"""
[llm]
provider = "openai"
model = "big-model"
base_url = "{url}"
api_key_env = "{FAKE_KEY_ENV}"

[llm.jobs]
provider = "none"
"""
        root = vault_with(tmp_path, config)
        env = {FAKE_KEY_ENV: FAKE_KEY}
        ok_json(root, "task", "add", "Renew the passport", env=env)
        ok_json(root, "jobs", "run", "daily_note", env=env)
        assert main.requests == []
        note = next((root / "Journal").glob("*.md")).read_text(encoding="utf-8")
        assert "Created [[Renew the passport]]" in note
        report = ok_json(root, "doctor", env=env)
    (llm,) = [c for c in report["checks"] if c["name"] == "llm"]
    assert llm["message"] == (
        f"Language model: openai big-model at {url} for default and replies; none for jobs."
    )


def test_a_purpose_on_another_provider_must_name_its_model(tmp_path: Path) -> None:
    root = vault_with(
        tmp_path,
        '[llm]\nprovider = "openai"\nmodel = "gpt-4o-mini"\n\n'
        '[llm.replies]\nprovider = "anthropic"\n',
    )
    message = fail(root, "config", "show", code=EXIT_CONFIG)
    config = root / ".memvault" / "config.toml"
    assert message == (
        f"Error: Invalid setting 'llm' from config.toml ({config}): llm.replies.provider is "
        "'anthropic', not [llm]'s 'openai', so llm.replies.model must name its model."
    )
