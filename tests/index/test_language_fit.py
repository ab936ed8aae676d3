"""doctor's language check: the writing of a sample of chunks against what the embedder
reads. A vault of Japanese notes with the English-only model is warned about, with the
fix; an English vault is not, nor a Japanese one with the multilingual model; SQLite and
PostgreSQL sample alike."""

# ruff: noqa: RUF001 (text in other scripts and full-width forms, on purpose)

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memvault.gateway.doctor import diagnose
from memvault.index.embedders import LocalEmbedder, OpenAIEmbedder, english_only
from memvault.index.language_fit import mix, verdict, writing_of
from memvault.runtime import Runtime

pytestmark = pytest.mark.both_backends

JAPANESE = [
    "明日の午後三時に歯医者の予約があります。",
    "来週は東京へ出張します。新幹線の切符はもう買いました。",
    "妹の誕生日は六月十二日です。プレゼントは本にする。",
    "iPhoneの充電器を会社に忘れた。",
    "朝はいつも緑茶を飲む。コーヒーは苦手。",
    "大家さんに家賃の振込を確認してもらう。",
]
ENGLISH = [
    "The dentist appointment is tomorrow at three in the afternoon.",
    "Next week I travel to Tokyo for work; the train tickets are booked.",
    "My sister's birthday is on June 12th; the present will be a book.",
    "Left the iPhone charger at the office.",
    "I always drink green tea in the morning, never coffee.",
    "Ask the landlord to confirm the rent transfer.",
]


@pytest.fixture
def embedder() -> LocalEmbedder:
    """The English-only local model, as configured by default (never loaded here)."""
    return LocalEmbedder()


def _fill(write: Callable[[str, str], Path], runtime: Runtime, texts: list[str]) -> None:
    for n, text in enumerate(texts):
        write(f"notes/{n}.md", f"# {n}\n\n{text}\n")
    runtime.index.sync()


def _check(runtime: Runtime) -> dict:  # type: ignore[type-arg]
    found = {c["name"]: c for c in diagnose(runtime).to_dict()["checks"]}
    return dict(found["language_fit"])


def test_japanese_notes_with_the_english_model_are_warned_about(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    _fill(write, runtime, JAPANESE * 2 + ENGLISH[:1])  # and the 7 chunks of a new vault
    check = _check(runtime)
    assert check["status"] == "warning"
    message = check["message"]
    assert message.startswith("Most of your notes are in Japanese (12 of 20 sampled chunks)")
    assert "all-MiniLM-L6-v2 reads English only" in message
    assert 'model = "multilingual-e5-small"' in message and "bge-m3" in message
    assert "memvault index --reembed" in message
    assert check["details"]["writings"] == {"Japanese": 12, "Latin": 8}
    assert not runtime.embedder.loaded, "the check never loads the model"


def test_an_english_vault_is_not_warned_about(
    runtime: Runtime, write: Callable[[str, str], Path]
) -> None:
    _fill(write, runtime, ENGLISH + JAPANESE[:1])
    check = _check(runtime)
    assert check["status"] == "ok", check["message"]
    assert check["details"]["writings"] == {"Latin": 6 + 7, "Japanese": 1}


def test_the_multilingual_model_suits_japanese_notes(
    tmp_path: Path, write: Callable[[str, str], Path], runtime: Runtime
) -> None:
    _fill(write, runtime, JAPANESE)
    runtime.close()
    multilingual = Runtime.open(
        runtime.settings, clock=runtime.clock, embedder=LocalEmbedder("multilingual-e5-small")
    )
    try:
        found = {c["name"]: c for c in diagnose(multilingual).to_dict()["checks"]}
        assert "language_fit" not in found, "a multilingual model has nothing to check"
    finally:
        multilingual.close()


@pytest.mark.sqlite_only
def test_which_models_are_english_only() -> None:
    latin = frozenset({"Latin"})
    assert english_only(LocalEmbedder()) == latin
    assert english_only(LocalEmbedder("multilingual-e5-small")) is None
    assert english_only(OpenAIEmbedder("nomic-embed-text")) == latin
    assert english_only(OpenAIEmbedder("nomic-embed-text:latest")) == latin
    assert english_only(OpenAIEmbedder("bge-m3")) is None
    assert english_only(OpenAIEmbedder("text-embedding-3-small")) is None


@pytest.mark.sqlite_only
@pytest.mark.parametrize(
    ("text", "writing"),
    [
        ("我下周去上海出差，记得带护照。", "Chinese"),
        ("来週は東京へ出張します。", "Japanese"),
        ("東京駅で会う", "Japanese"),  # one kana among Han
        ("부산으로 출장을 갑니다", "Korean"),
        ("Встреча с врачом в четверг", "Cyrillic"),
        ("Meine Schwester wohnt in München.", "Latin"),
        ("iPhone充電器を買った", "Japanese"),
        ("iPhone充电器坏了", "Chinese"),  # 5 CJK characters weigh more than 6 Latin letters
        ("ＦＵＬＬ ｗｉｄｔｈ", "Latin"),
        ("2026-06-12 14:00 ✓ #todo", "Latin"),
        ("12:00 → 13:30 !!", None),
    ],
)
def test_the_writing_of_a_text(text: str, writing: str | None) -> None:
    assert writing_of(text) == writing


@pytest.mark.sqlite_only
def test_a_mix_without_a_majority_is_still_named() -> None:
    korean, japanese = ["부산으로 갑니다", "부산에서 만나요"], ["来週は東京へ"]
    found = mix([*korean, *japanese, "Hello there", "Hi", "Bye", "Again"])
    problem = verdict(found, frozenset({"Latin"}))
    assert problem == "many of your notes are in Korean and Japanese (3 of 7 sampled chunks)"
    assert verdict(mix(["Hello", "World", "来週"]), frozenset({"Latin"})) is not None
    assert verdict(mix(["Hello", "World", "Again", "来週"]), frozenset({"Latin"})) is None
    assert verdict(mix([]), frozenset({"Latin"})) is None
