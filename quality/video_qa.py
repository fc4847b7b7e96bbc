"""Questions about a generated stream with their answers from its ground truth (capture/scenes.py), and scoring.

Kinds, each asked at stream time `t` (the newest frame the model has seen):
    describe       "What is happening now?"             -> "a yellow triangle on a dark night sky"
    exists_now     "Is there a person?"                 -> "yes" / "no"
    colour_now     "What colour is the car?"            -> "white"
    count_now      "How many balls are there?"          -> "2"
    exists_past    "Did a green square appear?"         -> "yes" / "no"   (anything up to t, now included)
    colour_past    "What colour was the car?"           -> "white"        (asked when every car so far had one colour)
    count_past     "How many times did a ball appear?"  -> "2"            (times on screen, touching spans merged)
Answers use the ground truth's own words, so a trained model's answer is scored by exact match after
normalisation (case, punctuation, spaces).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from capture.scenes import COLOURS, KINDS, Stream, Thing

DESCRIBE = ("What is happening now?", "What is on screen?", "What do you see?", "Describe the scene.")
YES_NO_SUFFIX = " Answer yes or no."
NOW_KINDS = ("describe", "exists_now", "colour_now", "count_now")
PAST_KINDS = ("exists_past", "colour_past", "count_past")


@dataclass(frozen=True)
class Question:
    text: str
    answer: str
    kind: str
    name: str | None = None  # what a yes/no question asks after ("a red ball"); None for the others


def every_name() -> list[str]:
    """Every name a yes/no question may ask about: "a person", "a ball", "a red ball", ..."""
    names = ["a person"] + [f"a {k}" for k in KINDS[:-1]]
    return names + [Thing(k, c, 0, 0).name for k in KINDS[:-1] for c in COLOURS]


def matches(name: str):
    """A predicate on things: is this thing what `name` ("a ball", "a red ball", "a person") names?"""
    words = name.split()[1:]
    if len(words) == 1:
        return lambda thing: thing.kind == words[0]
    return lambda thing: thing.kind == words[1] and thing.colour == words[0]


def plural(kind: str) -> str:
    return "people" if kind == "person" else kind + "s"


def describe(stream: Stream, t: float, rng: np.random.Generator | None = None) -> Question:
    text = DESCRIBE[0] if rng is None else str(rng.choice(DESCRIBE))
    return Question(text, stream.caption(t), "describe")


def exists_now(name: str, stream: Stream, t: float, suffix: bool = False) -> Question:
    seen = any(matches(name)(x) for x in stream.visible(t))
    text = f"Is there {name}?" + (YES_NO_SUFFIX if suffix else "")
    return Question(text, "yes" if seen else "no", "exists_now", name)


def exists_past(name: str, stream: Stream, t: float, suffix: bool = False) -> Question:
    seen = any(matches(name)(x) for x in stream.things_until(t))
    text = f"Did {name} appear?" + (YES_NO_SUFFIX if suffix else "")
    return Question(text, "yes" if seen else "no", "exists_past", name)


def colour_now(kind: str, stream: Stream, t: float) -> Question | None:
    seen = [x for x in stream.visible(t) if x.kind == kind]
    if len({x.colour for x in seen}) != 1:
        return None
    return Question(f"What colour is the {kind}?", seen[0].colour, "colour_now")


def colour_past(kind: str, stream: Stream, t: float) -> Question | None:
    seen = [x for x in stream.things_until(t) if x.kind == kind]
    if len({x.colour for x in seen}) != 1:
        return None
    return Question(f"What colour was the {kind}?", seen[0].colour, "colour_past")


def count_now(kind: str, stream: Stream, t: float) -> Question:
    count = sum(x.kind == kind for x in stream.visible(t))
    return Question(f"How many {plural(kind)} are there?", str(count), "count_now")


def count_past(name: str, stream: Stream, t: float) -> Question:
    count = len(stream.intervals(matches(name), until=t))
    return Question(f"How many times did {name} appear?", str(count), "count_past")


# How often a generated stream shows no person, as odds: P(person) / P(no person) at a training question
# (quality: measured on 4,000 streams of the training's lengths: 17% now, 24% so far).
PERSON_ODDS = {"exists_now": 0.2, "exists_past": 0.3}
PERSON_QUESTIONS = 0.3  # the share of yes/no questions that may be about a person


HARD_SHARE = 0.5  # of the "no" names of a kind or a colour and kind: a near miss where there is one (below)


def near_misses(absent: list[str], shown: list[Thing], earlier: list[Thing]) -> list[str]:
    """The names in `absent` that only a model that looks closely answers "no" to: one that shares its kind or its
    colour with a thing shown ("a purple ball" beside a red ball, "a red square" beside a red ball), or names a
    thing seen earlier that is gone now. (Drawn from every absent name, 18 in 23 colour-and-kind "no"s differed from
    the thing shown in kind, so the fifth weights answered by kind alone: "a red ball" and "a purple ball" got the
    same p_yes; and none was about what had just left, so a watch stayed on after its thing had gone.)"""
    gone = {x.name for x in earlier} | {f"a {x.kind}" for x in earlier}
    things = [x for x in shown if x.kind != "person"]

    def near(name: str) -> bool:
        words = name.split()[1:]
        if len(words) == 1:
            return False
        return any(words[1] == x.kind or words[0] == x.colour for x in things)

    return [n for n in absent if n in gone or near(n)]


def yes_no_name(
    rng: np.random.Generator, shown: list[Thing], person_odds: float, earlier: Sequence[Thing] = ()
) -> str | None:
    """A name for "Is there ...?" / "Did ... appear?" whose wording never gives the answer away: for each form of
    name (a person; a kind, "a ball"; a colour and kind, "a red ball") "yes" and "no" come about equally often.

    A kind or a colour-and-kind is asked only where some of its names are shown and some are not, one of each
    side at even odds. "A person" is asked in a share of the draws: always when a person is shown, and when none
    is, at `person_odds` (how rare a person is), so that over many streams it is as often "no" as "yes".
    Half the "no" names are near misses (`near_misses`; `earlier`: things seen before and gone now) where any
    exist. None: nothing to ask fairly.
    (Drawing names without this taught the second and third weights to answer from the wording: a bare kind
    was "yes" 78% of the time and a colour-and-kind 38%, and they said so whatever the picture showed.)"""
    things = [x for x in shown if x.kind != "person"]
    choices = {}  # form -> (names shown, names not shown), both non-empty
    for form, names in (("kind", [f"a {k}" for k in KINDS[:-1]]), ("thing", every_name()[len(KINDS) :])):
        present = [n for n in names if any(matches(n)(x) for x in things)]
        absent = [n for n in names if n not in present]
        if present and absent:
            choices[form] = (present, absent)
    if rng.random() < PERSON_QUESTIONS and (any(x.kind == "person" for x in shown) or rng.random() < person_odds):
        return "a person"
    if not choices:
        return None
    present, absent = choices[str(rng.choice(list(choices)))]
    if rng.random() < 0.5:
        return str(rng.choice(present))
    hard = near_misses(absent, shown, list(earlier))
    return str(rng.choice(hard if hard and rng.random() < HARD_SHARE else absent))


def sample_question(rng: np.random.Generator, stream: Stream, t: float, kind: str) -> Question:
    """A question of `kind` about the stream at `t`, yes/no ones half yes and half no where possible."""
    shown = stream.visible(t) if kind.endswith("now") else stream.things_until(t)
    if kind == "describe":
        return describe(stream, t, rng)
    if kind in ("exists_now", "exists_past"):
        ask = exists_now if kind == "exists_now" else exists_past
        earlier = [x for x in stream.things_until(t) if x not in shown] if kind == "exists_now" else []
        name = yes_no_name(rng, shown, PERSON_ODDS[kind], earlier)
        if name is None:  # nothing shown and no question about a person drawn: no yes/no question is fair
            return describe(stream, t, rng)
        return ask(name, stream, t, suffix=bool(rng.random() < 0.5))
    kinds = [x.kind for x in shown if x.kind != "person"] if kind.startswith("colour") else list(KINDS)
    if kind.startswith("colour"):
        ask = colour_now if kind == "colour_now" else colour_past
        for candidate in rng.permutation(kinds) if kinds else []:
            if (question := ask(str(candidate), stream, t)) is not None:
                return question
        return describe(stream, t, rng)  # nothing with one colour to ask about
    if kind == "count_now":
        picks = [x.kind for x in shown] if shown and rng.random() < 0.7 else list(KINDS)
        return count_now(str(rng.choice(picks)), stream, t)
    names = [x.name for x in shown] + [f"a {x.kind}" for x in shown if x.kind != "person"]
    name = str(rng.choice(names)) if names and rng.random() < 0.8 else str(rng.choice(every_name()))
    return count_past(name, stream, t)


def normalise(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]+", " ", text.lower()).split())


def correct(answer: str, question: Question) -> bool:
    """Exact match after normalisation; a yes/no question looks at the first word only."""
    got, want = normalise(answer), normalise(question.answer)
    if want in ("yes", "no"):
        return got.split(" ", 1)[0] == want if got else False
    return got == want
