"""The extractive session summary: key points, decisions and names, with no model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from textwrap import dedent

from hypothesis import given, settings
from hypothesis import strategies as st

from memvault.memory.summary import Digest, Turn, extractive_summary

TRIP = [
    Turn("system", "You are a helpful travel assistant. Always answer in English."),
    Turn("user", "Hi there!"),
    Turn("assistant", "Hello! How can I help you today?"),
    Turn(
        "user",
        "I'm planning a trip to Lisbon with Maria on 12 March. "
        "We want to stay four nights near the old town.",
    ),
    Turn(
        "assistant",
        "Lisbon in March is lovely. The Alfama district is close to the old town and has "
        "several small hotels with river views, e.g. Memmo Alfama and Hotel Convento do Salvador.",
    ),
    Turn("tool", '{"results": [{"name": "Hotel Berlin", "price": 120}]}'),
    Turn(
        "user",
        "Maria prefers somewhere quiet, so let's book the Memmo Alfama hotel for four nights.",
    ),
    Turn(
        "assistant",
        dedent(
            """\
            Sure. The room at **Memmo Alfama** costs about 150.50 euros per night, \
            breakfast included.

            - Check-in is at 3 p.m. on 12 March
            - Check-out is on Monday
            """
        ),
    ),
    Turn("user", "Thanks, that's perfect!"),
    Turn("assistant", "You're welcome! Have a great trip."),
]

DEBUGGING = [
    Turn(
        "user",
        "The API server keeps crashing under load with `database is locked` errors from SQLite.",
    ),
    Turn(
        "assistant",
        "SQLite only allows one writer at a time, so concurrent requests from the Gunicorn "
        "workers block each other. See https://sqlite.org/wal.html for the details.",
    ),
    Turn(
        "tool",
        'Traceback (most recent call last):\n  File "app.py", line 3\n'
        "sqlite3.OperationalError: database is locked",
    ),
    Turn(
        "assistant",
        dedent(
            """\
            You could enable **WAL mode**, or move to a server database such as PostgreSQL \
            that handles many concurrent writers.

            ```python
            engine = create_engine("postgresql://app@db/prod")
            ```
            """
        ),
    ),
    Turn(
        "user",
        "Ok. We decided to switch the database to PostgreSQL next sprint and keep SQLite "
        "only for the tests.",
    ),
    Turn(
        "assistant",
        "Good choice. I'll draft the migration plan for Friday with Dr. Okafor from the "
        "platform team.",
    ),
    Turn("user", "Sounds good, thanks."),
]

SMALL_TALK = [
    Turn("user", "Hello!"),
    Turn("assistant", "Hi! How can I help you today?"),
    Turn("user", "Nothing really, just wanted to say thanks."),
    Turn("assistant", "You're welcome! Have a great day."),
    Turn("user", "Thanks, bye!"),
]

PLEASANTRIES = {"hi there!", "hello!", "sure.", "thanks, that's perfect!", "good choice."}


def _position(turns: list[Turn], sentence: str) -> int:
    """Where a (Markdown-free) sentence was said, as an offset into the conversation."""
    spoken = " ".join(" ".join(t.text.replace("**", "").split()) for t in turns)
    position = spoken.find(sentence.rstrip("."))
    assert position >= 0, sentence
    return position


def test_a_trip_plan_keeps_the_plan_the_decision_and_the_names() -> None:
    digest = extractive_summary(TRIP)

    assert digest.decisions == [
        "Maria prefers somewhere quiet, so let's book the Memmo Alfama hotel for four nights."
    ]
    assert "I'm planning a trip to Lisbon with Maria on 12 March." in digest.key_points
    assert not set(digest.key_points) & set(digest.decisions), "a decision is listed once"
    assert not {p.lower() for p in digest.key_points} & PLEASANTRIES
    positions = [_position(TRIP, p) for p in digest.key_points]
    assert positions == sorted(positions), "key points come in conversation order"

    assert {"Lisbon", "Maria", "Memmo Alfama", "Hotel Convento do Salvador"} <= set(digest.entities)
    for not_a_name in ("Hi", "Hello", "How", "Sure", "Thanks", "March", "Monday", "I", "Check"):
        assert not_a_name not in digest.entities
    assert digest.entities[0] == "Memmo Alfama", "the most mentioned name comes first"


def test_a_debugging_session_records_the_switch_to_postgresql() -> None:
    digest = extractive_summary(DEBUGGING)

    assert digest.decisions == [
        "We decided to switch the database to PostgreSQL next sprint and keep SQLite only "
        "for the tests.",
        "I'll draft the migration plan for Friday with Dr. Okafor from the platform team.",
    ]
    assert not any(d.startswith("You could") for d in digest.decisions), "a suggestion"
    assert digest.entities[:2] == ["SQLite", "PostgreSQL"]
    assert "Dr. Okafor" in digest.entities and "Friday" not in digest.entities
    assert "Good choice." not in digest.key_points
    summary = digest.text()
    for machinery in ("https", "sqlite.org", "create_engine", "**", "`", "Traceback"):
        assert machinery not in summary
    assert "database is locked" in summary, "inline code keeps its words"


def test_tool_and_system_turns_are_ignored() -> None:
    digest = extractive_summary(TRIP)
    spoken = [t for t in TRIP if t.role in ("user", "assistant")]
    assert digest == extractive_summary(spoken)
    summary = digest.text(10_000)
    for hidden in ("Always answer", "English", "Hotel Berlin", "results"):
        assert hidden not in summary
    only_machinery = [Turn("system", "We decided to always use Rust."), Turn("tool", "Berlin")]
    assert extractive_summary(only_machinery) == Digest([], [], [])


def test_small_talk_says_nothing() -> None:
    digest = extractive_summary(SMALL_TALK)
    assert digest == Digest(key_points=[], decisions=[], entities=[])
    assert digest.text() == ""


def test_nothing_in_nothing_out() -> None:
    for turns in ([], [Turn("user", "")], [Turn("user", "   \n\n ```\ncode\n```")]):
        assert extractive_summary(turns) == Digest([], [], [])
    assert Digest([], [], []).text() == ""


def test_a_word_capitalised_only_by_its_place_is_no_name() -> None:
    turns = [
        Turn("user", "Monday works for me. Sure, the review can wait until then."),
        Turn("assistant", "Thanks. Priya from Bank of America joins the review on Monday."),
        Turn("user", "Reviews run long, so book the big room at the POSTGRESQL meetup venue."),
        Turn("assistant", "Booked. Priya prefers the PostgreSQL venue anyway; ping @priya_k."),
        Turn("user", "Tag the notes with #q3-review and ask Priya about PostgreSQL first."),
    ]
    entities = extractive_summary(turns).entities
    assert entities[:2] == ["Priya", "PostgreSQL"], "case variants merge, the usual one shows"
    assert {"Bank of America", "@priya_k", "#q3-review"} <= set(entities)
    for not_a_name in ("Monday", "Sure", "Thanks", "Reviews", "Booked", "Tag", "POSTGRESQL"):
        assert not_a_name not in entities


def test_sentences_split_at_ends_bullets_and_lines_but_not_at_abbreviations() -> None:
    turns = [
        Turn(
            "user",
            dedent(
                """\
                ## Plan
                We decided to keep Python 3.5 for the legacy worker, e.g. the billing job, \
                until Dr. Okafor signs off. Is that fine?
                - Let's move the cron jobs to Kubernetes
                - Remember that staging stays on Debian!
                From now on deploys happen
                on Tuesdays only.
                """
            ),
        )
    ]
    assert extractive_summary(turns, max_decisions=5).decisions == [
        "We decided to keep Python 3.5 for the legacy worker, e.g. the billing job, until "
        "Dr. Okafor signs off.",
        "Let's move the cron jobs to Kubernetes.",
        "Remember that staging stays on Debian!",
        "From now on deploys happen on Tuesdays only.",
    ]


def test_markdown_is_read_as_plain_text() -> None:
    turns = [
        Turn(
            "user",
            "Read the [migration guide](https://example.com/guide) and the *release notes* "
            "before we upgrade the Grafana dashboards to version 11 on the staging cluster.",
        ),
        Turn("assistant", "> The Grafana dashboards upgrade to version 11 needs a new plugin."),
    ]
    points = extractive_summary(turns).key_points
    assert points[0] == (
        "Read the migration guide and the release notes before we upgrade the Grafana "
        "dashboards to version 11 on the staging cluster."
    )


def test_a_repeated_point_is_kept_once() -> None:
    turns = [
        Turn("user", "The nightly backup to the Hetzner storage box failed again last night."),
        Turn("assistant", "The nightly backup to the Hetzner storage box failed last night."),
        Turn("user", "Disk usage on the database host reached 93 percent this morning."),
    ]
    points = extractive_summary(turns).key_points
    assert len([p for p in points if "nightly backup" in p]) == 1
    assert "Disk usage on the database host reached 93 percent this morning." in points


def test_limits_are_respected() -> None:
    digest = extractive_summary(TRIP, max_points=1, max_decisions=0, max_entities=2)
    assert len(digest.key_points) <= 1 and digest.decisions == []
    assert digest.entities == ["Memmo Alfama", "Lisbon"]
    assert extractive_summary(TRIP, max_points=0, max_decisions=0, max_entities=0).text() == ""


def test_text_is_one_line_in_three_parts() -> None:
    summary = extractive_summary(DEBUGGING).text()
    assert "\n" not in summary
    assert summary.startswith("Key points: The API server keeps crashing")
    assert " Decisions: We decided to switch the database to PostgreSQL" in summary
    assert summary.endswith(" Mentioned: SQLite, PostgreSQL, API, Gunicorn, WAL, Dr. Okafor.")
    assert Digest([], ["Use uv."], ["Astral"]).text() == "Decisions: Use uv. Mentioned: Astral."


def _words(text: str) -> set[str]:
    return {w.strip(".,;:!?…") for w in text.split()}


def test_text_fits_any_budget_and_never_cuts_a_word() -> None:
    for turns in (TRIP, DEBUGGING):
        digest = extractive_summary(turns)
        full = digest.text(100_000)
        whole_words = _words(full)
        for budget in range(len(full) + 2):
            summary = digest.text(budget)
            assert len(summary) <= budget
            assert _words(summary) <= whole_words | {""}, (budget, summary)
        assert digest.text(len(full)) == full


def test_a_key_point_too_long_for_the_budget_is_shortened_at_a_word() -> None:
    digest = Digest(
        key_points=["The quarterly report for the Rotterdam office is due on Friday afternoon."],
        decisions=[],
        entities=["Rotterdam"],
    )
    assert digest.text(41) == "Key points: The quarterly report for the…"
    assert digest.text(40) == "Key points: The quarterly report for…"
    assert digest.text(14) == ""
    assert digest.text(0) == ""


def test_unicode_names() -> None:
    turns = [
        Turn("user", "Zoë is flying in from São Paulo on Friday for the Łódź workshop."),
        Turn("assistant", "I'll book a car for Zoë at São Paulo's airport connection in Munich."),
        Turn("user", "Great. Zoë wants the Ærø ferry tickets sorted by Thursday too."),
    ]
    digest = extractive_summary(turns)
    assert digest.entities[:2] == ["Zoë", "São Paulo"]
    assert {"Łódź", "Munich", "Ærø"} <= set(digest.entities)
    assert "Great" not in digest.entities
    assert digest.decisions == [
        "I'll book a car for Zoë at São Paulo's airport connection in Munich."
    ]


def test_the_same_conversation_gives_the_same_summary_in_any_process() -> None:
    assert extractive_summary(TRIP) == extractive_summary(list(TRIP))
    script = (
        "import json, sys\n"
        "from memvault.memory.summary import Turn, extractive_summary\n"
        "turns = [Turn(r, t) for r, t in json.loads(sys.stdin.read())]\n"
        "print(extractive_summary(turns).text())\n"
    )
    payload = json.dumps([[t.role, t.text] for t in TRIP + DEBUGGING])
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            input=payload,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert outputs == {extractive_summary(TRIP + DEBUGGING).text() + "\n"}


_ROLES = st.sampled_from(["user", "assistant", "tool", "system", "other"])
_CHATTY = st.text(
    alphabet=st.sampled_from(list("aeiouLMSPZé Ø. ,!?\n-*#@`[]()_:'\u20193…")), max_size=120
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.builds(Turn, _ROLES, st.one_of(st.text(max_size=200), _CHATTY)), max_size=6),
    st.integers(min_value=-5, max_value=400),
)
def test_any_text_gives_a_summary_within_budget(turns: list[Turn], budget: int) -> None:
    digest = extractive_summary(turns)
    summary = digest.text(budget)
    assert len(summary) <= max(budget, 0)
    assert "\n" not in summary
