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
    return Question(f"Is there {name}?" + (YES_NO_SUFFIX if suffix else ""), "yes" if seen else "no", "exists_now")


def exists_past(name: str, stream: Stream, t: float, suffix: bool = False) -> Question:
    seen = any(matches(name)(x) for x in stream.things_until(t))
    return Question(f"Did {name} appear?" + (YES_NO_SUFFIX if suffix else ""), "yes" if seen else "no", "exists_past")


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


def sample_question(rng: np.random.Generator, stream: Stream, t: float, kind: str) -> Question:
    """A question of `kind` about the stream at `t`, yes/no ones half yes and half no where possible."""
    shown = stream.visible(t) if kind.endswith("now") else stream.things_until(t)
    if kind == "describe":
        return describe(stream, t, rng)
    if kind in ("exists_now", "exists_past"):
        ask = exists_now if kind == "exists_now" else exists_past
        names = [x.name for x in shown] + [f"a {x.kind}" for x in shown if x.kind != "person"]
        if names and rng.random() < 0.5:
            name = str(rng.choice(names))
        else:
            name = str(rng.choice(every_name()))
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
