"""Generated scenes with ground truth: what a frame shows is what the stream says it shows."""

from __future__ import annotations

import numpy as np

from capture.scenes import BACKGROUNDS, COLOURS, Scene, Stream, Thing, demo_stream, describe, random_stream, render
from capture.synth import SCENES


def share_of(img: np.ndarray, rgb: tuple[int, int, int], tolerance: int = 12) -> float:
    return float((np.abs(img.astype(int) - np.array(rgb)).max(axis=-1) <= tolerance).mean())


def test_a_frame_shows_its_background_and_the_things_on_screen_only():
    thing = Thing("square", "orange", 2.0, 6.0)
    stream = Stream((Scene(0.0, 8.0, "sand", (thing,)),))
    before, during = render(stream, 1.0, 160, 90), render(stream, 3.0, 160, 90)
    assert share_of(before, BACKGROUNDS["sand"]) == 1.0
    assert share_of(during, COLOURS["orange"]) > 0.02
    assert stream.caption(1.0) == "nothing on sand" and stream.caption(3.0) == "an orange square on sand"


def test_a_person_is_drawn_in_their_shirt_and_named_without_it():
    stream = Stream((Scene(0.0, 4.0, "a grey road", (Thing("person", "red", 0.0, 4.0),)),))
    assert share_of(render(stream, 1.0, 160, 90), COLOURS["red"]) > 0.005
    assert stream.caption(1.0) == "a person on a grey road"


def test_captions_count_two_of_a_kind():
    balls = [Thing("ball", "red", 0, 4), Thing("ball", "red", 0, 4), Thing("car", "white", 0, 4)]
    assert describe(balls, "a blue floor") == "two red balls and a white car on a blue floor"


def test_intervals_merge_touching_spans_and_stop_at_until():
    scenes = (
        Scene(0.0, 4.0, "sand", (Thing("ball", "red", 0.0, 4.0),)),
        Scene(4.0, 8.0, "sand", (Thing("ball", "green", 4.0, 8.0),)),
        Scene(8.0, 12.0, "sand"),
        Scene(12.0, 16.0, "sand", (Thing("ball", "red", 13.0, 15.0),)),
    )
    stream = Stream(scenes)
    balls = stream.intervals(lambda x: x.kind == "ball")
    assert balls == [(0.0, 8.0), (13.0, 15.0)]
    assert stream.intervals(lambda x: x.kind == "ball", until=12.0) == [(0.0, 8.0)]
    assert [x.name for x in stream.things_until(12.0)] == ["a red ball", "a green ball"]


def test_random_streams_repeat_for_a_seed_and_cover_their_duration():
    a, b = (random_stream(np.random.default_rng(7), 95.0) for _ in range(2))
    assert a == b
    assert a.scenes[0].start_s == 0.0 and a.duration_s == 95.0
    assert all(x.end_s == y.start_s for x, y in zip(a.scenes, a.scenes[1:], strict=False))
    assert not any(t.colour in s.background for s in a.scenes for t in s.things)  # always visible


def test_the_demo_video_scenes_are_generated_scenes_in_the_same_words():
    stream = demo_stream(50.0)
    assert [stream.caption(10.0 * k + 1) for k in range(5)] == [caption for caption, *_ in SCENES]
