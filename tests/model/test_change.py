"""Which regions of a clip changed (model/change.py), on synthetic frames and on a real H.264 fixed camera:
identical frames add nothing, a changed region keeps its tokens, exposure drift and flicker are not motion,
slow drift is caught against the last kept version, key frames come on time."""

import functools
import math

import numpy as np
import pytest

from model.change import ChangeConfig, ChangeLayout, ChangeTracker
from tests.support.camera_clips import OBJECT, camera_video, scene

QWEN = ChangeLayout(group=2, region=28)  # Qwen2-VL: a token covers 28x28 px over 2 frames
FRAMES = ChangeLayout(group=1, region=56, whole_groups=True)


def clip(frame: np.ndarray, n: int = 4) -> np.ndarray:
    return np.repeat(frame[None], n, axis=0).copy()


def tracker(**kw) -> ChangeTracker:
    return ChangeTracker(ChangeConfig(**{"keyframe_every": 1000, **kw}))


@functools.cache
def video(moving: bool) -> object:
    return camera_video(32, moving=(8, 24) if moving else None)


def test_the_first_clip_is_a_key_frame_and_an_identical_clip_adds_nothing():
    t = tracker(floor=0.1)
    first = t.select(clip(scene()), QWEN, keyframe=t.keyframe_due())
    assert first.keyframe and first.keep.all() and first.keep.shape == (2, 12, 16)
    again = t.select(clip(scene()), QWEN, keyframe=t.keyframe_due())
    assert not again.keyframe and again.kept == 0 and again.changed_tokens == 0


def test_a_changed_region_keeps_all_its_tokens_and_the_floor_adds_the_most_changed():
    t = tracker(floor=0.1)
    t.select(clip(scene()), QWEN, keyframe=True)
    frames = clip(scene())
    frames[2:, 56:112, 84:168] = (250, 20, 20)  # tokens rows 2-3, columns 3-5 of the second temporal patch
    got = t.select(frames, QWEN, keyframe=False)
    assert got.keep[0].sum() == 0  # the first temporal patch did not change: no tokens, no tower pass
    assert got.keep[1, 2:4, 3:6].all()
    assert got.changed[1, 2:4, 3:6].all() and got.changed_tokens == 6
    assert got.keep[1].sum() >= math.ceil(0.1 * 12 * 16)  # the floor of a kept temporal patch
    # the change is now the reference: the same frames again add nothing
    assert t.select(clip(frames[-1]), QWEN, keyframe=False).kept == 0


def test_an_object_on_one_frame_of_a_pair_keeps_that_temporal_patch():
    t = tracker(floor=0.0)
    t.select(clip(scene()), QWEN, keyframe=True)
    frames = clip(scene())
    frames[1, 0:28, 0:28] = 0  # only the second frame of the first pair
    got = t.select(frames, QWEN, keyframe=False)
    assert got.keep[0, 0, 0] and got.keep[1].sum() > 0  # the second pair shows it gone again: a change too


@pytest.mark.parametrize("gain", [0.7, 0.85, 1.15, 1.2])
def test_a_global_exposure_change_is_not_motion(gain):
    t = tracker()
    t.select(clip(scene()), QWEN, keyframe=True)
    brighter = np.clip(scene().astype(np.float32) * gain + 5, 0, 255).astype(np.uint8)  # clips where it saturates
    flicker = np.stack([brighter, scene(), brighter, scene()])
    assert t.select(flicker, QWEN, keyframe=False).kept == 0


def test_slow_drift_of_a_region_is_caught_against_the_last_kept_version():
    t = tracker(threshold=0.06, floor=0.0)
    base = scene()
    t.select(clip(base), QWEN, keyframe=True)
    kept_at = []
    for step in range(1, 9):  # a region darkens by 0.025 per clip: each clip alone is below the threshold
        frames = clip(base)
        frames[:, 0:28, 0:28] = np.clip(base[0:28, 0:28].astype(int) - int(6.4 * step), 0, 255)
        got = t.select(frames, QWEN, keyframe=False)
        if got.keep[:, 0, 0].any():
            kept_at.append(step)
    assert kept_at and kept_at[0] >= 2  # not at the first small step, but once it added up
    assert len(kept_at) < 8  # after a refresh the creep starts again from the new reference


def test_key_frames_come_every_n_clips_and_after_reset():
    t = ChangeTracker(ChangeConfig(keyframe_every=3))
    keys = []
    for _ in range(7):
        keys.append(t.select(clip(scene()), QWEN, keyframe=t.keyframe_due()).keyframe)
    assert keys == [True, False, False, True, False, False, True]
    t.reset()
    assert t.keyframe_due()


def test_a_new_frame_size_starts_over_with_a_key_frame():
    t = tracker()
    t.select(clip(scene()), QWEN, keyframe=True)
    smaller = clip(scene()[:168, :224])
    assert t.select(smaller, QWEN, keyframe=False).keyframe


def test_whole_group_layout_keeps_a_frame_whole_or_not_at_all():
    t = tracker()
    t.select(clip(scene(), 3), FRAMES, keyframe=True)
    frames = clip(scene(), 3)
    frames[1, :20, :20] = 255 - frames[1, :20, :20]
    got = t.select(frames, FRAMES, keyframe=False)
    assert got.keep[1].all() and got.keep[2].all()  # frame 2 shows the region back: changed against frame 1
    assert not got.keep[0].any()


def test_a_static_h264_camera_with_noise_drift_and_flicker_drops_almost_everything():
    frames = video(moving=False).frames
    t = tracker()
    kept = total = 0
    for c in range(len(frames) // 4):
        got = t.select(frames[4 * c : 4 * c + 4], QWEN, keyframe=c == 0)
        if c:
            kept, total = kept + got.kept, total + got.keep.size
    assert kept <= 0.05 * total


def test_a_moving_object_keeps_the_tokens_it_covers():
    cam = video(moving=True)
    t = tracker()
    covered = kept = 0
    for c in range(len(cam.frames) // 4):
        got = t.select(cam.frames[4 * c : 4 * c + 4], QWEN, keyframe=c == 0)
        for i, box in enumerate(cam.boxes[4 * c : 4 * c + 4]):
            if box is None:
                continue
            x0, y0, x1, y1 = box  # tokens at least a quarter inside the object's box
            for r in range(12):
                for q in range(16):
                    ox = min(x1, (q + 1) * 28) - max(x0, q * 28)
                    oy = min(y1, (r + 1) * 28) - max(y0, r * 28)
                    if ox > 0 and oy > 0 and ox * oy >= 28 * 28 / 4:
                        covered += 1
                        kept += bool(got.keep[i // 2, r, q])
    assert covered >= 8 * (OBJECT // 28) ** 2  # the object was seen in many frames
    assert kept >= 0.95 * covered


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"threshold": 0}, "(0, 1]"),
        ({"threshold": 1.5}, "(0, 1]"),
        ({"threshold": float("nan")}, "(0, 1]"),
        ({"threshold": "high"}, "(0, 1]"),
        ({"keyframe_every": 0}, ">= 1"),
        ({"keyframe_every": 2.5}, ">= 1"),
        ({"floor": -0.1}, "[0, 1]"),
        ({"floor": 2}, "[0, 1]"),
        ({"drop_unchanged": "yes"}, "true or false"),
    ],
)
def test_bad_settings_name_what_is_allowed(kwargs, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace("[", r"\[")):
        ChangeConfig(**kwargs)
