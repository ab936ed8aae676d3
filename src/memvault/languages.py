"""The languages memvault tells apart in text: their function words and letters.

The keyword index stems a chunk by its language (:mod:`memvault.index.stemming`)
and a query drops its language's function words. The language is guessed
cheaply, with no model: Cyrillic is Russian; a Latin text is the language whose
function words it holds most (every language says "the", "and", "of" in every
sentence), with a few letters only one language writes as evidence too.
English, a tie, too little evidence, or any other script: no language but
English (or none).
"""

# ruff: noqa: RUF001 (letters of other alphabets, on purpose)

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"\w+")
# Addresses, file and module names (``github.io``, ``x.com``): no language's words.
_ADDRESS = re.compile(r"\S*(?:://|\w\.\w)\S*")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_LATIN = re.compile(r"[a-zA-Z\u00c0-\u024f]")
# Letters of Cyrillic alphabets other than Russian's: Ukrainian, Belarusian, Serbian,
# Macedonian (their text is not Russian; it stays on the Porter path).
_NOT_RUSSIAN = re.compile(
    r"[\u0404\u0406\u0407\u0490\u0454\u0456\u0457\u0491\u045e\u0458\u045a\u0459\u045f\u0452\u045b]"
)
# A Latin text is another language than English from this many clues on (a function
# word of the language, or a letter of its own); a query, from one.
CHUNK_CLUES = 2.0
QUERY_CLUES = 1.0


@dataclass(frozen=True)
class Language:
    """A language the keyword index stems by its own rules."""

    code: str
    snowball: str  # snowballstemmer's name of its algorithm
    stop_words: frozenset[str]
    letters: str = ""  # letters only this language (of those here) writes


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


ENGLISH_STOP_WORDS = _words(
    """a an the is are was were be been being am do does did doing of to in on at for with by
    from and or but not no nor what when where who whom whose which why how has have had having
    i you he she it we they me him her them my your his its our their mine yours hers ours
    theirs this that these those as if than then so such there here about into over under
    after before up down out off again further once can will would should could may might must
    shall just also very too any some own same other each few more most both all only until
    while during through between against above below s t don"""
)

# The commonest function words of each language (from the Snowball project's stop lists,
# shortened to the words that mark a language: none of them is common in English text).
LANGUAGES: dict[str, Language] = {
    language.code: language
    for language in (
        Language(
            "de",
            "german",
            _words(
                """der die das den dem des ein eine einen einem einer eines und oder aber
                ist sind war waren wird werden wurde hat haben hatte nicht kein keine mit
                von zu zum zur in im ins an am auf aus bei nach vor für über unter wie wenn weil
                dass ich du er sie es wir ihr mein meine meinen meinem dein sein seine
                ihre unser uns mich mir dich sich auch noch schon nur sehr doch
                wann wo wer was warum morgen heute um bis dann"""
            ),
            "äöüß",
        ),
        Language(
            "fr",
            "french",
            _words(
                """le la les un une des du de et ou mais est sont était été être avoir a
                as avons ont avait pas ne se en ce cette ces il elle ils elles je tu nous vous
                mon ma mes ton ta tes son sa ses notre nos votre vos leur leurs au aux
                avec pour dans sur chez par qui que quoi quand où comment pourquoi très
                aussi plus moins demain aujourd hui"""
            ),
            "çœèêùîâëà",
        ),
        Language(
            "es",
            "spanish",
            _words(
                """el la los las un una unos unas a de del al y o pero es son era fue está
                están estaba ser estar ha han había no se lo mi mis tu tus su sus
                nuestro nuestra con para por en sobre entre que qué cuando cuándo donde
                dónde cómo muy también más menos mañana hoy yo él ella nosotros"""
            ),
            "ñ¿¡áíóú",
        ),
        Language(
            "it",
            "italian",
            _words(
                """il lo la i gli un uno una di del della dei delle e o ma è sono era
                erano essere ha hanno aveva non che chi con nel nella sul sulla
                mio mia miei tuo tua suo sua nostro quando dove come perché molto
                anche più domani oggi io tu lui lei noi voi"""
            ),
        ),
        Language(
            "pt",
            "portuguese",
            _words(
                """o a as um uma uns umas de do da dos das no na nos nas e ou mas é são
                era foi está estão ser estar tem têm tinha não com para por em que
                quando onde como muito também mais menos amanhã hoje eu ele ela nós
                meu minha seu sua"""
            ),
            "ãõ",
        ),
        Language(
            "nl",
            "dutch",
            _words(
                """de het een en of maar is zijn was waren wordt worden werd heeft hebben
                had niet geen met van voor naar bij uit over onder als wanneer omdat
                dat ik jij je hij zij wij we mijn jouw zijn haar ons onze ook nog al
                alleen zeer erg morgen vandaag waar wie wat waarom"""
            ),
        ),
        Language(
            "ru",
            "russian",
            _words(
                """и в во не что он на я с со как а то все она так его но да ты к у же
                вы за бы по только ее мне было вот от меня еще нет о из ему теперь когда
                даже ну вдруг ли если уже или ни быть был него до вас нибудь опять уж
                вам ведь там потом себя ничего ей может они тут где есть надо ней для
                мы тебя их чем была сам чтоб без будто чего раз тоже себе под будет
                завтра сегодня мой моя мои"""
            ),
        ),
    )
}
# The function words of the languages here that English does not use, ASCII only: the
# keyword rows the migrations to stemming by language read again are those holding one
# of them or a letter beyond ASCII (the others are English, or too little of anything).
RESTEMMED_WORDS = sorted(
    {w for lang in LANGUAGES.values() for w in lang.stop_words if w.isascii()} - ENGLISH_STOP_WORDS
)


_LATIN_LANGUAGES = tuple(language for language in LANGUAGES.values() if language.code != "ru")


def stop_words(language: str | None) -> frozenset[str]:
    """The function words a query in ``language`` drops (English: ``None`` or ``en``)."""
    known = LANGUAGES.get(language or "")
    return ENGLISH_STOP_WORDS if known is None else known.stop_words


def language_of(
    text: str, clues: float = CHUNK_CLUES, among: frozenset[str] | None = None
) -> str | None:
    """The language of ``text`` as far as its script and function words tell: ``en``, a
    code of :data:`LANGUAGES` (of those ``among``, when given), or None (too little
    evidence, a tie, another script).

    Another language than English needs ``clues`` (its function words and letters) and
    more than twice as many as English has: "dinner at La Casa de Pepe" stays English.
    """
    cyrillic = len(_CYRILLIC.findall(text))
    latin = len(_LATIN.findall(text))
    if cyrillic > latin:
        russian = not _NOT_RUSSIAN.search(text) and (among is None or "ru" in among)
        return "ru" if russian else None
    if not latin:
        return None
    candidates = [
        language for language in _LATIN_LANGUAGES if among is None or language.code in among
    ]
    counts: dict[str, float] = {}
    lowered = _ADDRESS.sub(" ", text.lower())
    for word in _NAME.findall(lowered):
        if len(word) < 2 or not word.isalpha():
            continue  # "a", "e", "y", "o" are words of several languages; au_tz a name
        if word in ENGLISH_STOP_WORDS:
            counts["en"] = counts.get("en", 0.0) + 1
        for language in candidates:
            if word in language.stop_words:
                counts[language.code] = counts.get(language.code, 0.0) + 1
    for language in candidates:
        if language.letters and any(letter in lowered for letter in language.letters):
            counts[language.code] = counts.get(language.code, 0.0) + 1
    english = counts.pop("en", 0.0)
    ranked = sorted(counts.items(), key=lambda item: -item[1])[:2]
    if not ranked or ranked[0][1] < clues or ranked[0][1] <= 2 * english:
        return "en" if english else None
    if len(ranked) > 1 and ranked[1][1] == ranked[0][1]:
        return None  # a tie: no language is clear
    return ranked[0][0]
