"""What marks a forgotten memory in other text, and how that text is scrubbed of it: a line
a job wrote goes when it cites, copies or names the memory; a person's words only when
they cite or copy it."""

from __future__ import annotations

from textwrap import dedent

from memvault.memory.outcomes import one_line
from memvault.privacy.traces import (
    Trace,
    distinctive_words,
    prose_of,
    scrub_blocks,
    scrub_items,
)

FACT = "The zorblax key hides under the blue flowerpot by the garden door"
OTHERS = [
    "The spare house key hides under the blue flowerpot by the garden shed",
    "Ada Lovelace drinks green tea every morning",
]


def trace() -> Trace:
    words = distinctive_words(FACT, OTHERS, kept_names=["Ada Lovelace"])
    return Trace(frozenset({"m-1a2b3c4d"}), (FACT,), frozenset(words))


def test_a_memorys_own_words_are_those_no_other_memory_uses() -> None:
    assert distinctive_words(FACT, OTHERS) == {"zorblax", "door"}
    assert distinctive_words("Ada Lovelace keeps 4417 in the attic", OTHERS, ["Ada Lovelace"]) == {
        "4417",
        "keeps",
        "attic",
    }
    assert distinctive_words("It is on 12 May", []) == set()  # short words, small numbers


def test_a_copy_is_found_whole_or_cut_short() -> None:
    found = trace()
    assert found.copies(f"telegram Owner: /remember {FACT.upper()}")
    assert found.copies(f"- 2026-11-20: telegram: {one_line(FACT, 40)}")
    assert not found.copies(one_line(OTHERS[0], 40))
    assert not found.copies("The zorblax key")  # a few words are not a copy
    assert found.cites("Remembered (fact, m-1a2b3c4d).")
    assert found.cites("![[Memory/Facts#^m-1a2b3c4d]]")
    assert not found.cites("m-1a2b3c4dd and xm-1a2b3c4d")


def test_a_derived_line_goes_when_it_names_the_memory_and_prose_loses_a_sentence() -> None:
    found = trace()
    text = dedent("""\
        # Friday

        <!-- memvault:daily-summary -->
        ## Summary

        The owner told where the Zorblaxes are. Tea as ever.

        **Remembered**
        - The spare house key hides under the blue flowerpot (fact)
        - Where the zorblax key is (fact)
        <!-- /memvault:daily-summary -->

        - My own line about the zorblax, outside the block
        """)
    out, removed = scrub_blocks(text, found.strong)
    assert out == dedent("""\
        # Friday

        <!-- memvault:daily-summary -->
        ## Summary

        Tea as ever.

        **Remembered**
        - The spare house key hides under the blue flowerpot (fact)
        <!-- /memvault:daily-summary -->

        - My own line about the zorblax, outside the block
        """)
    assert len(removed) == 2
    # Outside the blocks, a person's line goes only when it copies or cites the memory.
    same, kept = scrub_items(out, found.exact)
    assert same == out and kept == []
    gone, cut = scrub_items(out + f"- /remember {FACT}\n", found.exact)
    assert gone == out and cut == [f"- /remember {FACT}"]


def test_a_summary_loses_only_its_sentences_about_it() -> None:
    found = trace()
    assert prose_of("Met Ada. The zorblax moved. Rain.", found.strong) == "Met Ada. Rain."
    assert prose_of("The zorblax moved.", found.strong) is None
    assert prose_of("Nothing here.", found.strong) == "Nothing here."


def test_redacting_keeps_the_shape_of_a_log_line() -> None:
    found = trace()
    assert (
        found.redact("wrote Insights/Zorblax and keys.md for m-1a2b3c4d")
        == "wrote Insights/[forgotten] and keys.md for [forgotten]"
    )
