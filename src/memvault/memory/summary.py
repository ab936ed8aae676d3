"""An extractive summary of a conversation, for when no language model is configured.

When a session ends without an LLM, memvault still notes what the conversation
was about: one line in the day's journal, shown to the agent at the start of the
next run as "last session". This module picks that line out of the conversation
itself, with classic, explainable heuristics and nothing but the standard
library, so the same conversation always gives the same summary.

- Only ``user`` and ``assistant`` turns count; ``tool`` and ``system`` turns are
  machinery, not conversation. Code blocks, URLs and Markdown syntax are
  stripped before anything is scored.
- Key points: each sentence scores the sum of the normalised conversation-wide
  frequencies of its content words, boosted for the user's own words and for
  names and numbers, penalised for being very short, very long, a question or a
  pleasantry. The best ones that do not repeat each other are kept, in the order
  they were said.
- Decisions: sentences that state a decision, agreement, commitment or
  preference ("let's", "we decided", "from now on" ...), never questions.
- Entities: capitalised names (and @handles, #tags), where a word capitalised
  only because it starts a sentence does not count, ranked by mentions.

Turning a message into plain sentences lives in :mod:`memvault.memory.sentences`;
this module scores them and picks the digest.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

from memvault.memory.sentences import TITLES, plain_segments, split_sentences

__all__ = ["Digest", "Turn", "extractive_summary"]

SPOKEN_ROLES = frozenset({"user", "assistant"})

# Scoring weights, multiplied into a sentence's content-word score.
USER_BOOST = 1.25
ENTITY_BOOST = 1.2
NUMBER_BOOST = 1.15
SHORT_PENALTY = 0.5  # fewer than SHORT_CONTENT_WORDS content words
LONG_PENALTY = 0.6  # more than LONG_WORDS words
QUESTION_PENALTY = 0.5
SHORT_CONTENT_WORDS = 4
LONG_WORDS = 40
# A candidate this similar (content-word Jaccard) to a chosen sentence repeats it.
MAX_OVERLAP = 0.5
# A key point needs this share of the best sentence's score: no filler to fill the slots.
MIN_RELATIVE_SCORE = 0.25
# A key point or decision says something about at least this many content words.
MIN_CONTENT_WORDS = 2

_STOPWORDS = frozenset(
    """
    a about above after again against all almost along already also although always am
    among an and another any anybody anyone anything anyway anywhere are aren't around as
    at be became because become been before being below beside besides between both but
    by can can't cannot could couldn't did didn't do does doesn't doing don't done down
    during each either else enough etc even ever every everybody everyone everything
    few for from further get gets getting got had hadn't has hasn't have haven't having he
    he'd he'll he's her here here's hers herself him himself his how how's however i i'd
    i'll i'm i've if in into is isn't it it'd it'll it's its itself just least less let
    let's like likely made make many may maybe me might mine more most much must mustn't
    my myself neither no nobody none nor not nothing now of off often on once one only
    onto or other others otherwise our ours ourselves out over own perhaps please quite
    rather really same say says shall shan't she she'd she'll she's should shouldn't since
    so some somebody someone something sometimes somewhere still such than that that's the
    their theirs them themselves then there there's these they they'd they'll they're
    they've thing things this those though through thus to too toward towards under
    unless until up upon us very via was wasn't we we'd we'll we're we've were weren't what
    what's whatever when when's whenever where where's whether which while who who's whom
    whose why why's will with within without won't would wouldn't yes yet you you'd you'll
    you're you've your yours yourself yourselves
    """.split()
)

# Words of small talk: a sentence made only of these (and stopwords) says nothing.
_PLEASANTRIES = frozenset(
    """
    afternoon ah alright amazing anytime appreciate appreciated assist assistance awesome
    brilliant bye care cheer cheers chat cool course day definitely evening excellent
    fantastic fine glad good goodbye goodnight great happy hear hello help helpful hey hi
    hmm hope howdy later lol lovely meet morning need needs nice night np ok okay oh perfect
    pleasure problem question questions right see sorry sound sounds sure super talk thank
    thanks thx today ty understand understood want wanted welcome wonderful wow yeah yep
    yup know
    """.split()
)

_CALENDAR = frozenset(
    """
    monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs
    fri sat sun january february march april may june july august september october
    november december jan feb mar apr jun jul aug sep sept oct nov dec
    """.split()
)

# Common words that open sentences (imperatives, adverbs, replies): capitalised
# there, they are no names.
_COMMON_STARTERS = frozenset(
    """
    absolutely accept actually add additionally adjust afterwards agreed allow also apply
    archive arrange ask assume avoid basically begin book bring build buy call cancel
    certainly change check choose clean clear close collect come compare confirm consider
    continue copy correct create cut decided definitely delete deploy describe disable do
    done double download drop edit email enable ensure exactly except explain export
    feel fill finally find finish first firstly fix fixed follow forget fortunately
    found generally get give go good great guess handle hold honestly hopefully ideally
    import include indeed install instead interesting invite join just keep kill label
    later leave let like list load lock log look looks luckily make mark maybe meanwhile
    mention merge move name naturally never next nope note notice obviously of open order
    overall pack pay pick ping plan post prepare print probably publish pull push put quick
    quickly read really rebuild reboot record reduce refresh remember remind remove rename
    reply report request reserve reset restart restore retry return review rewrite right
    run save schedule second seems sell send set setup share ship show sign simply skip
    sort speaking start step still stop submit suppose surely switch sync tag take tell
    test then therefore third thus track try turn undo unfortunately update upgrade upload
    use usually verify wait watch well write
    """.split()
)

# All-caps chat words that are no names.
_GENERIC_CAPS = frozenset(
    "afaik am asap btw eta faq fyi imho imo lol nb ok pm ps tbd tl todo".split()
)

# Lower-case particles inside a name: "Bank of America", "Rio de Janeiro".
_PARTICLES = frozenset("of de da do dos das van von der den del della di du la le".split())

_DECISION = re.compile(
    r"\b(?:decided|decide|decision|agreed|agree|let['\u2019]?s|let us|we['\u2019]ll|we will|"
    r"i['\u2019]ll|"
    r"i will|will use|going to|gonna|chose|choose|chosen|settled on|settle on|prefers?|"
    r"preferred|from now on|always|never|remember that|remember to|plan is|the plan|"
    r"switch to|switching to|switched to|move to|moving to|go with|going with|"
    r"stick with|opt for|opted for)\b",
    re.IGNORECASE,
)

_CLOSERS = "\"')]\u201d\u2019"
_DASHES = "-\u2013\u2014"

# A suggestion is no decision: "you could move to ...".
_HEDGE = re.compile(
    r"\b(?:could|might|maybe|perhaps|possibly|alternatively|consider|considering)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)*")
_NAME_TOKEN = re.compile(r"[^\W_](?:[\w'\u2019.&-]*[^\W_])?")
_HANDLE_OR_TAG = re.compile(r"(?<![\w@#&])(?:@[A-Za-z0-9_](?:[\w.-]*\w)?|#[^\W\d_][\w/-]*)")
_POSSESSIVE = re.compile(r"['\u2019]s$")
_DIGIT = re.compile(r"\d")
# Between two words of one name: spaces only.
_NAME_GAP = re.compile(r"[ \t]+")
_TITLE_GAP = re.compile(r"\.[ \t]+")
# What may stand before a word that starts a clause: ``Note: Check ...``, ``"Sure ...``.
_CLAUSE_START = re.compile(r"(?:[:;(\[\"\u201c\u2018\u2014\u2013]|\s-)\s*$")


@dataclass(frozen=True)
class Turn:
    """One message of a conversation: who spoke (``user``, ``assistant``, ``tool``,
    ``system``) and what they said."""

    role: str
    text: str


@dataclass(frozen=True)
class Digest:
    """What a conversation was about, picked out of its own sentences."""

    key_points: list[str]
    """The most informative sentences, in conversation order."""
    decisions: list[str]
    """Sentences stating a decision, agreement, commitment or preference."""
    entities: list[str]
    """Named people, places, products and projects (and @handles, #tags), most
    mentioned first."""

    def text(self, max_chars: int = 600) -> str:
        """The digest as one line of at most ``max_chars`` characters.

        ``Key points: ... Decisions: ... Mentioned: A, B, C.``, leaving out empty
        parts. Whole items are dropped to fit, never cut mid-word; only when no
        key point fits whole is the first one shortened at a word boundary and
        marked with "…". Empty when there is nothing to say.
        """
        points = [line for line in map(_one_line, self.key_points) if line]
        decisions = [line for line in map(_one_line, self.decisions) if line]
        entities = [line for line in map(_one_line, self.entities) if line]
        chosen: dict[str, set[int]] = {"point": set(), "decision": set(), "entity": set()}
        shortened = ""

        def render() -> str:
            kept_points = [points[i] for i in sorted(chosen["point"])]
            if shortened:
                kept_points = [shortened]
            kept_decisions = [decisions[i] for i in sorted(chosen["decision"])]
            kept_entities = [entities[i] for i in sorted(chosen["entity"])]
            parts = []
            if kept_points:
                parts.append("Key points: " + " ".join(kept_points))
            if kept_decisions:
                parts.append("Decisions: " + " ".join(kept_decisions))
            if kept_entities:
                parts.append("Mentioned: " + ", ".join(kept_entities) + ".")
            return " ".join(parts)

        def fits(kind: str, index: int) -> bool:
            chosen[kind].add(index)
            if len(render()) <= max_chars:
                return True
            chosen[kind].discard(index)
            return False

        # Sentences take turns, so one long key point cannot crowd out every decision.
        for kind, index in _alternate(len(points), len(decisions)):
            fits(kind, index)
        if points and not chosen["point"]:
            shortened = "…"  # stands in for the shortened point while measuring the room
            room = max_chars - len(render())
            words = _shorten(points[0], room)
            shortened = words + "…" if words else ""
        for index in range(len(entities)):
            if not fits("entity", index):
                break
        return render()


def extractive_summary(
    turns: Sequence[Turn],
    *,
    max_points: int = 3,
    max_decisions: int = 3,
    max_entities: int = 8,
) -> Digest:
    """Summarise a conversation without a model: key points, decisions and names.

    Deterministic: the same turns always give the same digest.
    """
    sentences = _sentences(turns)
    if not sentences:
        return Digest(key_points=[], decisions=[], entities=[])
    entities, mentions = _entities(sentences)
    scores = _scores(sentences, mentions)

    decisions = _pick([s for s in sentences if s.is_decision], scores, max_decisions, [])
    chosen = {s.index for s in decisions}
    floor = max(scores) * MIN_RELATIVE_SCORE
    point_candidates = [
        s
        for s in sentences
        if s.index not in chosen
        and len(s.stems) >= MIN_CONTENT_WORDS
        and scores[s.index] > 0
        and scores[s.index] >= floor
    ]
    points = _pick(point_candidates, scores, max_points, decisions)
    return Digest(
        key_points=[s.display for s in points],
        decisions=[s.display for s in decisions],
        entities=entities[: max(max_entities, 0)],
    )


@dataclass(frozen=True)
class _Sentence:
    index: int
    text: str
    from_user: bool
    stems: frozenset[str]
    content_words: int
    words: int

    @property
    def is_question(self) -> bool:
        return self.text.rstrip(_CLOSERS).endswith("?")

    @property
    def is_pleasantry(self) -> bool:
        return all(stem in _PLEASANTRY_STEMS for stem in self.stems)

    @property
    def is_decision(self) -> bool:
        return (
            not self.is_question
            and not self.is_pleasantry
            and len(self.stems) >= MIN_CONTENT_WORDS
            and _DECISION.search(self.text) is not None
            and _HEDGE.search(self.text) is None
        )

    @property
    def display(self) -> str:
        """The sentence as it is shown: ending in punctuation."""
        if self.text[-1] in ".!?…" + _CLOSERS:
            return self.text
        return self.text.rstrip(",;: " + _DASHES) + "."


def _sentences(turns: Sequence[Turn]) -> list[_Sentence]:
    sentences: list[_Sentence] = []
    for turn in turns:
        if turn.role not in SPOKEN_ROLES:
            continue
        for segment in plain_segments(turn.text):
            for text in split_sentences(segment):
                words = [_normal(w) for w in _WORD.findall(text)]
                if not words:
                    continue
                content = [w for w in words if w not in _STOPWORDS and len(w) > 1]
                sentences.append(
                    _Sentence(
                        index=len(sentences),
                        text=text,
                        from_user=turn.role == "user",
                        stems=frozenset(_stem(w) for w in content),
                        content_words=len(content),
                        words=len(words),
                    )
                )
    return sentences


def _normal(word: str) -> str:
    return word.replace("\u2019", "'").lower()


def _stem(word: str) -> str:
    """A light suffix stemmer: enough for "booking", "booked" and "books" to meet."""
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        word = _undouble(word[:-3])
    elif len(word) > 4 and word.endswith("ed"):
        word = _undouble(word[:-2])
    elif word.endswith(("sses", "ches", "shes", "xes", "zes")):
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


def _undouble(word: str) -> str:
    if len(word) >= 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        return word[:-1]
    return word


_PLEASANTRY_STEMS = frozenset(_stem(w) for w in _PLEASANTRIES) | _PLEASANTRIES


def _scores(sentences: list[_Sentence], mentions: list[set[str]]) -> list[float]:
    frequency = Counter(stem for s in sentences for stem in s.stems)
    top = max(frequency.values(), default=0)
    scores: list[float] = []
    for sentence in sentences:
        if top == 0 or sentence.is_pleasantry:
            scores.append(0.0)
            continue
        score = sum(frequency[stem] / top for stem in sentence.stems)
        if sentence.from_user:
            score *= USER_BOOST
        if mentions[sentence.index]:
            score *= ENTITY_BOOST
        if _DIGIT.search(sentence.text) or any(
            _normal(w) in _CALENDAR for w in _WORD.findall(sentence.text)
        ):
            score *= NUMBER_BOOST
        if sentence.content_words < SHORT_CONTENT_WORDS:
            score *= SHORT_PENALTY
        if sentence.words > LONG_WORDS:
            score *= LONG_PENALTY
        if sentence.is_question:
            score *= QUESTION_PENALTY
        scores.append(score)
    return scores


def _pick(
    candidates: list[_Sentence], scores: list[float], limit: int, taken: list[_Sentence]
) -> list[_Sentence]:
    """The best ``limit`` candidates that repeat neither each other nor ``taken``, in
    conversation order."""
    chosen: list[_Sentence] = []
    for sentence in sorted(candidates, key=lambda s: (-scores[s.index], s.index)):
        if len(chosen) >= limit:
            break
        if all(_jaccard(sentence.stems, other.stems) <= MAX_OVERLAP for other in chosen + taken):
            chosen.append(sentence)
    return sorted(chosen, key=lambda s: s.index)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0


@dataclass(frozen=True)
class _Token:
    text: str
    start: int
    end: int
    clause_start: bool

    @property
    def capitalised(self) -> bool:
        return self.text[0].isupper()

    @property
    def lower(self) -> str:
        return _normal(self.text)


def _entities(sentences: list[_Sentence]) -> tuple[list[str], list[set[str]]]:
    """Names ranked by mentions (then first mention), and the names each sentence
    mentions (case-folded)."""
    tokenised = [_tokens(s.text) for s in sentences]
    # What the conversation itself tells about a word: seen capitalised
    # mid-sentence (a name), or seen in lower case (a common word).
    named = {
        t.text.casefold() for ts in tokenised for t in ts if t.capitalised and not t.clause_start
    }
    lower = {t.lower for ts in tokenised for t in ts if t.text[0].islower()}
    lower |= {_stem(w) for w in lower}

    def common(token: _Token) -> bool:
        # "Check-in" is as common as "check".
        word = token.lower.split("-")[0]
        return (
            word in _STOPWORDS
            or word in _PLEASANTRIES
            or word in _CALENDAR
            or word in _COMMON_STARTERS
            or word in lower
            or _stem(word) in lower
            or (len(word) > 4 and word.endswith(("ing", "ed", "ly")))
        )

    counts: Counter[str] = Counter()
    forms: dict[str, Counter[str]] = {}
    first: dict[str, tuple[int, int]] = {}
    mentions: list[set[str]] = []
    for sentence, tokens in zip(sentences, tokenised, strict=True):
        found: list[tuple[str, int]] = []
        for run in _runs(sentence.text, tokens):
            if run[0].clause_start and run[0].text.casefold() not in named and common(run[0]):
                run = run[1:]
            name = _name(run)
            if name:
                found.append((name, run[0].start))
        found.extend((m.group(), m.start()) for m in _HANDLE_OR_TAG.finditer(sentence.text))
        keys: set[str] = set()
        for name, position in found:
            key = name.casefold()
            counts[key] += 1
            forms.setdefault(key, Counter())[name] += 1
            first.setdefault(key, (sentence.index, position))
            keys.add(key)
        mentions.append(keys)
    ranked = sorted(counts, key=lambda k: (-counts[k], first[k]))
    names = [_best_form(forms[key]) for key in ranked]
    return names, mentions


def _best_form(forms: Counter[str]) -> str:
    """The spelling used most; the first one seen on a tie (a Counter keeps insertion
    order, and ``max`` returns the first of equals)."""
    return max(forms, key=lambda form: forms[form])


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    previous_end = 0
    for match in _NAME_TOKEN.finditer(text):
        start = match.start()
        if start > 0 and text[start - 1] in "@#":
            previous_end = match.end()
            continue
        gap = text[previous_end:start]
        clause_start = not tokens or _CLAUSE_START.search(gap) is not None
        word = _POSSESSIVE.sub("", match.group())
        tokens.append(_Token(word, start, start + len(word), clause_start))
        previous_end = match.end()
    return tokens


def _runs(text: str, tokens: list[_Token]) -> Iterator[list[_Token]]:
    """Runs of capitalised words, joined by spaces and lower-case particles."""
    run: list[_Token] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.capitalised and run and _joined(text, run[-1], token):
            run.append(token)
        elif (
            run
            and token.lower in _PARTICLES
            and i + 1 < len(tokens)
            and tokens[i + 1].capitalised
            and _joined(text, run[-1], token)
            and _joined(text, token, tokens[i + 1])
        ):
            run.extend((token, tokens[i + 1]))
            i += 1
        else:
            if run:
                yield run
            run = [token] if token.capitalised else []
        i += 1
    if run:
        yield run


def _joined(text: str, left: _Token, right: _Token) -> bool:
    gap = text[left.end : right.start]
    if _NAME_GAP.fullmatch(gap):
        return True
    return left.lower in TITLES and _TITLE_GAP.fullmatch(gap) is not None


def _name(run: list[_Token]) -> str:
    """The name a run spells, without stopwords or particles at its edges; "" when
    what is left is no name."""
    while run and (run[0].lower in _STOPWORDS or run[0].lower in _PARTICLES):
        run = run[1:]
    while run and (run[-1].lower in _STOPWORDS or run[-1].lower in _PARTICLES):
        run = run[:-1]
    if not run:
        return ""
    if len(run) == 1:
        word = run[0].lower
        if (
            len(word) < 2
            or word in _CALENDAR
            or word in _PLEASANTRIES
            or word in _GENERIC_CAPS
            or word in TITLES
        ):
            return ""
        return run[0].text
    parts = [run[0].text]
    for left, right in pairwise(run):
        parts.append(
            (". " if left.lower in TITLES and right.start - left.end > 1 else " ") + right.text
        )
    return "".join(parts)


def _alternate(points: int, decisions: int) -> Iterator[tuple[str, int]]:
    for i in range(max(points, decisions)):
        if i < points:
            yield "point", i
        if i < decisions:
            yield "decision", i


def _shorten(sentence: str, room: int) -> str:
    """The longest run of whole words of ``sentence`` within ``room`` characters."""
    if room <= 0:
        return ""
    cut = sentence[: room + 1].rfind(" ")
    if cut <= 0:
        return ""
    return sentence[:cut].rstrip(" ,;:.!?" + _DASHES)


def _one_line(text: str) -> str:
    return " ".join(text.split())
