"""Generated scenes with ground truth: what is on screen at every moment, for training and scoring the demo model.

A `Stream` is a list of `Scene`s (a background and the `Thing`s on it, each with the seconds it is on screen).
`render(stream, t, width, height)` draws the frame at stream time `t`; the stream itself answers what is visible
at `t`, what appeared before `t`, and when each thing was on screen. No text of the ground truth is ever drawn:
a model trained on these frames has to see, not read (`noise_text` draws words unrelated to the scene, like the
demo video's caption strip, so that a caption on a real file is not a surprise).

The vocabulary is closed and shared with the questions (quality/video_qa.py): colours, kinds and backgrounds.
The demo video's five scenes (capture/synth.py) are `DEMO_SCENES` here, drawn the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import cv2
import numpy as np

COLOURS = {
    "red": (220, 30, 30),
    "green": (30, 160, 60),
    "yellow": (240, 220, 40),
    "white": (245, 245, 245),
    "purple": (150, 50, 170),
    "orange": (245, 140, 20),
}
BACKGROUNDS = {
    "a blue floor": (40, 60, 160),
    "sand": (210, 190, 120),
    "a dark night sky": (15, 15, 40),
    "a grey road": (110, 110, 110),
    "a green garden": (60, 140, 60),
}
KINDS = ("ball", "square", "triangle", "car", "person")
SKIN = (230, 185, 150)
NUMBER_WORDS = ("no", "one", "two", "three")


@dataclass(frozen=True)
class Thing:
    """One object on screen from `enter_s` to `leave_s` (stream seconds, end excluded). A person's colour is
    their shirt's and is not part of their name."""

    kind: str
    colour: str
    enter_s: float
    leave_s: float
    lane: float = 0.6  # vertical centre of its path, share of the height
    phase: float = 0.0  # where its motion starts, 0..1
    leftward: bool = False

    @property
    def name(self) -> str:
        if self.kind == "person":
            return "a person"
        return f"{'an' if self.colour[0] in 'aeiou' else 'a'} {self.colour} {self.kind}"

    def on_screen(self, t: float) -> bool:
        return self.enter_s <= t < self.leave_s


@dataclass(frozen=True)
class Scene:
    start_s: float
    end_s: float
    background: str
    things: tuple[Thing, ...] = ()


@dataclass(frozen=True)
class Stream:
    """Scenes back to back from 0 s; `texture_seed` None draws flat backgrounds."""

    scenes: tuple[Scene, ...]
    texture_seed: int | None = None
    grain: float = 10.0  # standard deviation of the texture, 8-bit levels (the demo video's, seen at 140x84)
    noise_text: bool = False
    _starts: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_starts", tuple(s.start_s for s in self.scenes))

    @property
    def duration_s(self) -> float:
        return self.scenes[-1].end_s if self.scenes else 0.0

    def scene_at(self, t: float) -> Scene:
        index = max(0, np.searchsorted(self._starts, t, side="right") - 1)
        return self.scenes[min(index, len(self.scenes) - 1)]

    def visible(self, t: float) -> list[Thing]:
        return [thing for thing in self.scene_at(t).things if thing.on_screen(t)]

    def caption(self, t: float) -> str:
        """What is on screen at `t`, in the ground truth's words: "a red ball on a blue floor"."""
        return describe(self.visible(t), self.scene_at(t).background)

    def things_until(self, t: float) -> list[Thing]:
        """Every thing that entered the screen at or before `t`, in order of entry."""
        things = [x for s in self.scenes if s.start_s <= t for x in s.things if x.enter_s <= t]
        return sorted(things, key=lambda x: x.enter_s)

    def intervals(self, matches, until: float | None = None) -> list[tuple[float, float]]:
        """[(begin, end)] seconds when something `matches(thing)` is on screen (touching spans merged)."""
        spans = sorted((x.enter_s, x.leave_s) for s in self.scenes for x in s.things if matches(x))
        merged: list[list[float]] = []
        for begin, end in spans:
            if until is not None and begin > until:
                break
            if merged and begin <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([begin, end])
        return [(b, e) for b, e in merged]


def describe(things: list[Thing], background: str) -> str:
    """ "a red ball on a blue floor", "two balls ..." when two of one kind and colour, "nothing on sand"."""
    if not things:
        return f"nothing on {background}"
    names: list[str] = []
    counted: dict[str, int] = {}
    for thing in things:
        counted[thing.name] = counted.get(thing.name, 0) + 1
    for name, count in counted.items():
        names.append(name if count == 1 else f"{NUMBER_WORDS[count]} {name.split(' ', 1)[1]}s")
    return f"{' and '.join(names)} on {background}"


def demo_stream(duration_s: float = 300.0, scene_seconds: float = 10.0) -> Stream:
    """The demo video's ground truth (capture/synth.py's SCENES, in turn) as a Stream."""
    scenes, start, i = [], 0.0, 0
    while start < duration_s:
        end = min(duration_s, start + scene_seconds)
        background, kind, colour = DEMO_SCENES[i % len(DEMO_SCENES)]
        scenes.append(Scene(start, end, background, (Thing(kind, colour, start, end),)))
        start, i = end, i + 1
    return Stream(tuple(scenes))


# (background, kind, colour) of capture/synth.py's five scenes, in order
DEMO_SCENES = (
    ("a blue floor", "ball", "red"),
    ("sand", "square", "green"),
    ("a dark night sky", "triangle", "yellow"),
    ("a grey road", "car", "white"),
    ("a green garden", "ball", "purple"),
)


def render(stream: Stream, t: float, width: int, height: int) -> np.ndarray:
    """The frame at stream time `t`: [height, width, 3] uint8 RGB."""
    scene = stream.scene_at(t)
    img = np.empty((height, width, 3), np.uint8)
    img[:] = BACKGROUNDS[scene.background]
    if stream.texture_seed is not None:
        grain = _texture(stream.texture_seed, width, height, stream.grain)
        shifted = np.roll(grain, (int(t * 40 * height / 360), int(t * 90 * width / 640)), axis=(0, 1))
        img[:] = np.clip(img.astype(np.int16) + shifted[..., None], 0, 255).astype(np.uint8)
    for thing in scene.things:
        if thing.on_screen(t):
            draw_thing(img, thing, t)
    if stream.noise_text:
        _draw_noise_text(img, t, stream.texture_seed or 0)
    return img


def draw_thing(img: np.ndarray, thing: Thing, t: float) -> None:
    """Draws `thing` where it is at `t`: it crosses the frame during its time on screen; balls bounce."""
    height, width = img.shape[:2]
    size = max(3, min(width, height) // 8)
    span = max(thing.leave_s - thing.enter_s, 1e-6)
    u = (thing.phase + (t - thing.enter_s) / span) % 1.0
    if thing.leftward:
        u = 1.0 - u
    x = int(size * 2 + u * (width - 4 * size))
    y = int(height * thing.lane)
    if thing.kind == "ball":
        y = int(height * thing.lane - abs(math.sin(t * 3.0)) * height * 0.3)
    colour = COLOURS[thing.colour]
    if thing.kind == "ball":
        cv2.circle(img, (x, y), size, colour, -1, cv2.LINE_AA)
    elif thing.kind == "square":
        cv2.rectangle(img, (x - size, y - size), (x + size, y + size), colour, -1)
    elif thing.kind == "triangle":
        pts = np.array([[x, y - size], [x - size, y + size], [x + size, y + size]], np.int32)
        cv2.fillPoly(img, [pts], colour, cv2.LINE_AA)
    elif thing.kind == "car":
        cv2.rectangle(img, (x - 2 * size, y - size // 2), (x + 2 * size, y + size // 2), colour, -1)
        for wx in (x - size, x + size):
            cv2.circle(img, (wx, y + size // 2), size // 2, (20, 20, 20), -1, cv2.LINE_AA)
    else:
        _draw_person(img, x, y, size, colour, t)


def _draw_person(img: np.ndarray, x: int, y: int, size: int, shirt: tuple, t: float) -> None:
    """A walking figure about 3 sizes tall: head, shirt, two swinging legs."""
    step = int(math.sin(t * 4.0) * size * 0.6)
    thick = max(2, size // 2)
    hip, shoulder = (x, y + size // 2), (x, y - size)
    cv2.line(img, shoulder, hip, shirt, thick + 2)
    cv2.line(img, (x - size // 2 - 1, y - size // 2), (x + size // 2 + 1, y - size // 2), shirt, thick)
    for dx in (step, -step):
        cv2.line(img, hip, (x + dx, y + 2 * size), (40, 40, 60), thick)
    cv2.circle(img, (x, y - size - size // 2), max(2, size // 2), SKIN, -1, cv2.LINE_AA)


_TEXTURES: dict[tuple, np.ndarray] = {}


def _texture(seed: int, width: int, height: int, std: float) -> np.ndarray:
    """[height, width] int16 zero-mean blurred grain of standard deviation `std` (kept: a few per process)."""
    key = (seed, width, height, std)
    if key not in _TEXTURES:
        if len(_TEXTURES) > 64:
            _TEXTURES.clear()
        rng = np.random.default_rng(seed)
        noise = rng.integers(0, 256, (height, width), dtype=np.uint8)
        grain = cv2.GaussianBlur(noise, (0, 0), max(0.6, 1.5 * width / 640)).astype(np.float32) - 128
        _TEXTURES[key] = (grain * (std / max(float(grain.std()), 1e-6))).astype(np.int16)
    return _TEXTURES[key]


_NOISE_WORDS = ("the", "camera", "stream", "frame", "t=", "live", "cam", "video", "rec", "00:12")


def _draw_noise_text(img: np.ndarray, t: float, seed: int) -> None:
    """White words unrelated to the scene along the bottom edge (as a caption or a timestamp overlay)."""
    height = img.shape[0]
    rng = np.random.default_rng((seed, int(t // 10)))
    words = " ".join(rng.choice(_NOISE_WORDS, size=4)) + f" {t:5.1f}s"
    scale = max(0.25, height / 720)
    cv2.putText(img, words, (4, height - 4), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), 1)


def random_stream(
    rng: np.random.Generator,
    duration_s: float,
    scene_s: tuple[int, int] = (4, 16),
    person_share: float = 0.2,
    allowed: list[tuple[str, str]] | None = None,
) -> Stream:
    """Random scenes back to back until `duration_s`: 0, 1 or 2 things each (one kind may come twice), some on
    screen for the whole scene, some entering or leaving during it. `allowed`: the (kind, colour) pairs that may
    appear (None: all). Textured or flat backgrounds and noise text at random."""
    scenes, start = [], 0.0
    while start < duration_s:
        length = float(rng.integers(scene_s[0], scene_s[1] + 1))
        end = min(duration_s, start + length)
        background = str(rng.choice(list(BACKGROUNDS)))
        scenes.append(Scene(start, end, background, _random_things(rng, start, end, background, person_share, allowed)))
        start = end
    texture = int(rng.integers(1 << 30)) if rng.random() < 0.6 else None
    grain = float(rng.uniform(3.0, 14.0))
    return Stream(tuple(scenes), texture_seed=texture, grain=grain, noise_text=bool(rng.random() < 0.3))


def _random_things(rng, start, end, background, person_share, allowed) -> tuple[Thing, ...]:
    count = int(rng.choice([0, 1, 2], p=[0.15, 0.6, 0.25]))
    lanes = [0.35, 0.78] if count == 2 else [float(rng.uniform(0.45, 0.7))]
    things: list[Thing] = []
    for i in range(count):
        if i == 1 and rng.random() < 0.3:
            kind, colour = things[0].kind, things[0].colour  # two of a kind
        else:
            kind, colour = _random_kind_colour(rng, background, person_share, allowed)
        enter, leave = start, end
        if end - start >= 4 and rng.random() < 0.4:
            if rng.random() < 0.5:
                enter = float(start + rng.integers(1, int(end - start) - 1))
            else:
                leave = float(end - rng.integers(1, int(end - start) - 1))
        things.append(Thing(kind, colour, enter, leave, lanes[i], float(rng.random()), bool(rng.random() < 0.5)))
    return tuple(things)


def _random_kind_colour(rng, background, person_share, allowed) -> tuple[str, str]:
    while True:
        kind = "person" if rng.random() < person_share else str(rng.choice(KINDS[:-1]))
        colour = str(rng.choice(list(COLOURS)))
        if colour in background:  # a green square in a green garden is hard to see
            continue
        if allowed is None or (kind, colour) in allowed or kind == "person" and ("person", "any") in allowed:
            return kind, colour
