"""Every chat becomes memory, end to end: a 200-message conversation with the owner through
a real daemon, the real Telegram library against a fake Bot API and a fake model on
loopback, then questions about it in the way LoCoMo asks them, answered by the turn that
holds the answer (with the local model, as a user runs it)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from channel_support import OWNER, delivered, telegram_config
from gateway_support import StartDaemon, ok
from llm_fakes import FakeOpenAI, llm_settings
from memvault.index.embedders import LocalEmbedder
from memvault.index.local_model import ModelFile
from memvault.tools import ToolContext, default_registry
from telegram_fake import FakeTelegram
from waiting import wait_for

FRIEND = 777

# What the owner tells the agent, each with the agent's answer, and a question about it
# that a person might ask weeks later (words of its own, as LoCoMo's questions are).
FACTS: list[tuple[str, str, str]] = [
    (
        "My sister Clara moved to Porto in March, she works at the harbour museum now.",
        "That sounds like a lovely change for her.",
        "Where does my sister work?",
    ),
    (
        "I finally adopted a dog from the shelter, a grey whippet called Pixel.",
        "Congratulations on Pixel!",
        "What breed is my dog?",
    ),
    (
        "The dentist moved my appointment to Thursday the 12th at 8 in the morning.",
        "Got it, Thursday the 12th at 8.",
        "When do I see the dentist?",
    ),
    (
        "I am learning the cello, my teacher is a retired orchestra player named Ingrid.",
        "Playing the cello is a great thing to pick up.",
        "Who teaches me music?",
    ),
    (
        "We booked a cabin near Tromsø for the second weekend of January to see the aurora.",
        "The northern lights should be wonderful then.",
        "Where are we going to watch the northern lights?",
    ),
    (
        "My blood type is O negative, the clinic told me after the donation.",
        "Good to know; O negative donors are always needed.",
        "What is my blood type?",
    ),
    (
        "Our landlord is raising the rent by 80 euros from February.",
        "That is a noticeable increase.",
        "How much more rent will we pay?",
    ),
    (
        "I switched teams at work, now I lead the payments reliability group.",
        "Congratulations on the new role.",
        "Which group do I lead at my job?",
    ),
    (
        "Tom's birthday is on the 3rd of May, he wants a vinyl copy of Kind of Blue.",
        "A classic choice for Tom.",
        "What gift would Tom like?",
    ),
    (
        "I ran my first half marathon in Lisbon in 1 hour 58 minutes.",
        "Under two hours, well done!",
        "How long did my half marathon take?",
    ),
    (
        "The car failed its inspection because of worn brake pads.",
        "Brake pads are a quick fix at least.",
        "Why did the car fail the inspection?",
    ),
    (
        "I am allergic to penicillin, I found out as a child.",
        "I will keep that in mind.",
        "Which medicine am I allergic to?",
    ),
    (
        "My grandmother's lemon cake recipe uses buttermilk and a whole vanilla pod.",
        "That must be a wonderful cake.",
        "What goes into my grandmother's cake?",
    ),
    (
        "We chose Bergen for the team offsite in June because of the fjord tours.",
        "Bergen in June is a good choice.",
        "Where is the team offsite?",
    ),
    (
        "My favourite podcast lately is a history show about the Hanseatic League.",
        "Medieval trade routes are fascinating.",
        "What is the podcast I like about?",
    ),
    (
        "The plumber said the boiler is eleven years old and should be replaced soon.",
        "Replacing it before winter makes sense.",
        "How old is the boiler?",
    ),
    (
        "Noor from the book club recommended The Left Hand of Darkness.",
        "A great recommendation.",
        "Which book did Noor suggest?",
    ),
    (
        "I planted three apple trees along the back fence, two Braeburn and one Cox.",
        "Apple trees are a lovely project.",
        "What kind of trees did I plant?",
    ),
    (
        "My passport expires in August, I need to renew it before the trip to Japan.",
        "Worth doing early; renewals can take weeks.",
        "When does my passport run out?",
    ),
    (
        "I gave up coffee for green tea, my sleep got much better.",
        "Better sleep is worth it.",
        "What do I drink instead of coffee?",
    ),
]

SMALL_TALK_OPENERS = [
    "Good morning",
    "Quick check in",
    "Back from lunch",
    "Long day today",
    "Rainy again here",
    "Just got home",
    "Evening",
    "Short break now",
]
SMALL_TALK_TOPICS = [
    "the train was late again",
    "I cleaned the kitchen",
    "the neighbours are painting their fence",
    "I watered the balcony plants",
    "the wifi dropped twice",
    "I answered a pile of emails",
    "the bakery had no rye bread",
    "I folded the laundry",
    "traffic was terrible",
    "I listened to some jazz",
]
SMALL_TALK_REPLIES = [
    "Thanks for telling me.",
    "Sounds like a normal day.",
    "Hope the rest of the day is calmer.",
    "Noted.",
    "Enjoy your evening.",
]


def conversation() -> list[tuple[str, str]]:
    """100 messages from the owner with the agent's 100 answers: the facts spread among
    small talk."""
    chatter = [
        (f"{opener}, {topic}.", reply)
        for opener, topic, reply in zip(
            itertools.cycle(SMALL_TALK_OPENERS),
            SMALL_TALK_TOPICS * 8,
            itertools.cycle(SMALL_TALK_REPLIES),
            strict=False,
        )
    ][:80]
    pairs: list[tuple[str, str]] = []
    facts = iter(FACTS)
    for n, chat in enumerate(chatter):
        pairs.append(chat)
        if n % 4 == 3:
            fact, answer, _ = next(facts)
            pairs.append((fact, answer))
    return pairs


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def test_a_200_message_conversation_is_found_turn_by_turn(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI, prepared_model: ModelFile
) -> None:
    pairs = conversation()
    assert len(pairs) == 100
    live = start_daemon(
        settings={
            "channels": {"telegram": telegram_config(tg)},
            "llm": llm_settings(llm),
            "memory": {"consolidation": "rule"},
        },
        embedder=LocalEmbedder(model_cache=prepared_model.cache),
    )
    started = time.perf_counter()
    for said, answer in pairs:
        llm.reply(answer)
        tg.push_message(OWNER, said, first_name="Sam")
    wait_for(lambda: len(delivered(tg, OWNER)) >= len(pairs), "every reply")
    print(f"\n100 messages answered in {time.perf_counter() - started:.1f} s")

    runtime = live.daemon.runtime
    api = live.client()
    turns = runtime.memories.list(category="conversation")
    assert len(turns) == 200
    said_by = {m.text.split(": ", 1)[0] for m in turns}
    assert said_by == {"Sam", runtime.settings.agent.name}

    # Each question is answered by its turn: first among the conversation's 200, and within
    # the top 5 of a default search over the whole vault (notes included).
    fact_turns = {
        fact: next(m.id for m in turns if m.text == f"Sam: {fact}") for fact, _, _ in FACTS
    }
    ranks: dict[str, int | None] = {}
    for fact, _, question in FACTS:
        found = ok(api.get("/v1/search", params={"q": question, "limit": 10}))
        ids = [hit.get("id") for hit in found]
        ranks[question] = ids.index(fact_turns[fact]) + 1 if fact_turns[fact] in ids else None
    at_1 = sum(1 for r in ranks.values() if r == 1)
    at_5 = sum(1 for r in ranks.values() if r is not None and r <= 5)
    print(f"\n{len(FACTS)} questions: hit@1 {at_1}, hit@5 {at_5}, ranks {ranks}")
    assert at_5 >= len(FACTS) - 1, ranks
    assert at_1 >= len(FACTS) * 3 // 4, ranks

    # The agent's own tools find them too: recall and OpenClaw's memory_search.
    registry = default_registry()
    context = ToolContext(runtime=runtime)
    recalled = registry.call("recall", {"query": "Which medicine am I allergic to?"}, context)
    assert "penicillin" in str(recalled.to_dict())
    searched = registry.call("memory_search", {"query": "blood type"}, context)
    assert "O negative" in str(searched.to_dict())


def test_a_contacts_conversation_is_theirs(
    start_daemon: StartDaemon, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    live = start_daemon(
        settings={
            "channels": {"telegram": telegram_config(tg, allow=[str(FRIEND)])},
            "llm": llm_settings(llm),
            "memory": {"consolidation": "rule"},
        }
    )
    runtime = live.daemon.runtime
    runtime.contacts.create("Ada Lovelace", identities={"telegram": str(FRIEND)})
    llm.reply("I will pass it on.")
    tg.push_message(FRIEND, "Tell Sam the harbour tour moved to Sunday.", first_name="Ada")
    wait_for(lambda: delivered(tg, FRIEND), "the reply to Ada")
    turns = wait_for(
        lambda: (
            len(runtime.memories.list(category="conversation")) == 2
            and runtime.memories.list(category="conversation")
        ),
        "both turns kept",
    )
    theirs, reply = sorted(turns, key=lambda m: m.line)  # the file's order: as they came
    assert theirs.text == "Ada: Tell Sam the harbour tour moved to Sunday."
    assert theirs.trust == "low" and theirs.fields["share"] == "Contacts/Ada Lovelace"
    assert theirs.fields["contact"] == "Contacts/Ada Lovelace"
    assert reply.fields["share"] == "Contacts/Ada Lovelace" and reply.trust is None
    # Found by the owner; not by someone else's view.
    api = live.client()
    found = ok(api.get("/v1/search", params={"q": "harbour tour"}))
    assert theirs.id in [hit.get("id") for hit in found]
    other = api.get("/v1/context", params={"as": "group:Family", "q": "harbour tour"})
    assert other.status_code == 200 and "harbour" not in other.text
