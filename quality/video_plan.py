"""Long generated streams with planned moments to remember, and the questions asked about them: the video QA
benchmark's streams (scripts/bench_video_qa.py).

A stream of `duration_s` (12 minutes by default) is made of random "common" scenes (three kinds in four colours,
no person) around planned scenes that happen once:
- existence needles: a thing in a rare colour, asked "Did a green square appear?" (yes) `delay` seconds after its
  scene ends, with a rare thing that never appeared asked at the same moment (no);
- an attribute needle: the only one of a fourth kind ("What colour was the car?");
- a count needle: a person crossing 1-3 times ("How many times did a person appear?");
- questions about now, in common scenes ("What is happening now?", "Is there a red ball?").
Every answer comes from the stream's ground truth at the moment it is asked (quality/video_qa.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capture.scenes import BACKGROUNDS, COLOURS, KINDS, Scene, Stream, Thing, random_stream
from quality.video_qa import Question, colour_past, count_past, describe, exists_now, exists_past

DELAYS_S = (60, 180, 600)  # the delays of memory questions after their scene; "now" questions have delay 0
NEEDLE_S = 8.0


@dataclass(frozen=True)
class Probe:
    """A question asked once the stream reached `ask_s` (the newest frame the model saw is at or before it)."""

    ask_s: float
    question: Question
    delay_s: float  # seconds from the end of the scene it is about to the asking; 0 for questions about now


def frame_time(t: float, clip_seconds: float, fps: float) -> float:
    """The time of the newest frame sampled at or before `t` when clips of `clip_seconds` end at multiples of it."""
    clip_end = np.floor(t / clip_seconds + 1e-9) * clip_seconds
    return float(clip_end - 1.0 / fps)


def long_stream(seed: int, duration_s: float = 720.0, clip_seconds: float = 4.0, fps: float = 1.0):
    """(Stream, [Probe] in order of asking) for seed `seed`. Question times fall on clip ends. The stream must be
    long enough for the longest delay (`DELAYS_S`) and the scenes before it: at least 720 s."""
    if duration_s < 720.0:
        raise ValueError(f"a benchmark stream needs at least 720 s for its 10-minute questions, got {duration_s}")
    rng = np.random.default_rng((seed, 4801))
    kinds = [str(k) for k in rng.permutation(KINDS[:-1])]
    colours = [str(c) for c in rng.permutation(list(COLOURS))]
    common_kinds, attribute_kind = kinds[:3], kinds[3]
    common, rare = colours[:4], colours[4:]
    allowed = [(k, c) for k in common_kinds for c in common]
    rare_things = [(k, c) for k in common_kinds for c in rare]
    rng.shuffle(rare_things)
    planned: list[Scene] = []
    asks: list[tuple[float, str, tuple]] = []  # (time after its scene, what, details)

    def place(start: float, kind: str, colour: str) -> Scene:
        background = str(rng.choice([b for b in BACKGROUNDS if colour not in b]))
        return Scene(start, start + NEEDLE_S, background, (Thing(kind, colour, start, start + NEEDLE_S),))

    # scenes to remember start at `first` = 12, 412, 532 s (asked 600, 180, 60 s after they end, from 600 s on):
    # an existence needle at first, the attribute needle at first + 20, persons from first + 40 (one delay each)
    scale = duration_s / 720.0
    firsts = {delay: duration_s - 108.0 * scale - delay for delay in DELAYS_S}
    for i, delay in enumerate(DELAYS_S):
        start = firsts[delay]
        planned.append(place(start, *rare_things[i]))
        asks.append((start + NEEDLE_S + delay, "exists", (rare_things[i], rare_things[3 + i])))
    delay = DELAYS_S[seed % len(DELAYS_S)]
    start = firsts[delay] + 20.0
    planned.append(place(start, attribute_kind, str(rng.choice(common + rare))))
    asks.append((start + NEEDLE_S + delay, "colour", (attribute_kind,)))
    delay = DELAYS_S[(seed + 1) % len(DELAYS_S)]
    starts = [firsts[delay] + 40.0 + 12.0 * j for j in range(int(rng.integers(1, 4)))]
    planned += [place(start, "person", str(rng.choice(list(COLOURS)))) for start in starts]
    asks.append((starts[-1] + NEEDLE_S + delay, "count", ()))
    stream = _compose(rng, duration_s, planned, allowed)
    probes = [_probe(stream, t, what, details, clip_seconds, fps) for t, what, details in asks]
    probes = [p for group in probes for p in group]
    probes += _now_probes(rng, stream, planned, clip_seconds, fps)
    return stream, sorted(probes, key=lambda p: p.ask_s)


def _compose(rng, duration_s: float, planned: list[Scene], allowed) -> Stream:
    """Random common scenes filling the gaps between the planned ones."""
    planned = sorted(planned, key=lambda s: s.start_s)
    for a, b in zip(planned, planned[1:], strict=False):
        if b.start_s < a.end_s:
            raise ValueError(f"planned scenes overlap at {b.start_s} s")
    scenes: list[Scene] = []
    t = 0.0
    for scene in [*planned, None]:
        gap_end = duration_s if scene is None else scene.start_s
        if gap_end > t:
            filler = random_stream(rng, gap_end - t, person_share=0.0, allowed=allowed)
            scenes += [_shift(s, t) for s in filler.scenes]
        if scene is not None:
            scenes.append(scene)
            t = scene.end_s
        else:
            t = duration_s
    return Stream(tuple(scenes), texture_seed=int(rng.integers(1 << 30)), grain=10.0, noise_text=False)


def _shift(scene: Scene, by: float) -> Scene:
    things = tuple(
        Thing(x.kind, x.colour, x.enter_s + by, x.leave_s + by, x.lane, x.phase, x.leftward) for x in scene.things
    )
    return Scene(scene.start_s + by, scene.end_s + by, scene.background, things)


def _probe(stream: Stream, after: float, what: str, details: tuple, clip_seconds: float, fps: float) -> list[Probe]:
    ask = float(np.ceil(after / clip_seconds) * clip_seconds)
    seen = frame_time(ask, clip_seconds, fps)
    delay = after - _last_end(stream, what, details, after)
    if what == "exists":
        shown, never = details
        return [
            Probe(ask, exists_past(_name(*shown), stream, seen), delay),
            Probe(ask, exists_past(_name(*never), stream, seen), delay),
        ]
    if what == "colour":
        return [Probe(ask, colour_past(details[0], stream, seen), delay)]  # one of its kind: one colour
    return [Probe(ask, count_past("a person", stream, seen), delay)]


def _last_end(stream: Stream, what: str, details: tuple, before: float) -> float:
    if what == "exists":
        kind, colour = details[0]
        spans = stream.intervals(lambda x: x.kind == kind and x.colour == colour, until=before)
    elif what == "colour":
        spans = stream.intervals(lambda x: x.kind == details[0], until=before)
    else:
        spans = stream.intervals(lambda x: x.kind == "person", until=before)
    return spans[-1][1]


def _name(kind: str, colour: str) -> str:
    return Thing(kind, colour, 0, 0).name


def _now_probes(rng, stream: Stream, planned: list[Scene], clip_seconds: float, fps: float) -> list[Probe]:
    """Questions about now at about every 90 s, in common scenes that have been on screen for a clip or more."""
    probes = []
    for target in np.arange(60.0, stream.duration_s - 60.0, 90.0):
        for ask in np.ceil(target / clip_seconds) * clip_seconds + np.arange(0, 60, clip_seconds):
            seen = frame_time(float(ask), clip_seconds, fps)
            scene = stream.scene_at(seen)
            if scene not in planned and seen - scene.start_s >= clip_seconds and stream.visible(seen):
                break
        else:
            continue
        ask = float(ask)
        probes.append(Probe(ask, describe(stream, seen), 0.0))
        shown = stream.visible(seen)
        thing = shown[int(rng.integers(len(shown)))]
        name = thing.name if rng.random() < 0.5 else f"a {rng.choice(KINDS[:-1])}"
        probes.append(Probe(ask, exists_now(name, stream, seen), 0.0))
    return probes
