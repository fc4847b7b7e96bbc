"""The change detector sees colour (model/change.py): a change at equal luma is a change, a global exposure
change still is not, a slow colour drift adds up against the last kept version, and a region that changes and
changes back is caught both times. Synthetic frames: smooth gradients with a little noise and a coloured patch
of 2x2 regions."""

import numpy as np
import pytest

from model.change import LUMA, ChangeConfig, ChangeLayout, ChangeTracker
from tests.support.camera_clips import Light, camera_video

QWEN = ChangeLayout(group=2, region=28)  # Qwen2-VL: a token covers 28x28 px over 2 frames
H, W = 168, 224  # 6 x 8 regions
PATCH = (slice(56, 112), slice(84, 140))  # regions rows 2-3, columns 3-4
# Equal luma by construction (LUMA: 0.299 R + 0.587 G + 0.114 B): 0.299 * 200 + 0.587 * 51 = 89.7
# = 0.587 * 152 + 0.114 * 4 (89.7); a luma-only detector sees 0 difference here, whatever its threshold.
RED = np.array([200, 51, 0], dtype=np.uint8)
GREEN = np.array([0, 152, 4], dtype=np.uint8)


def background() -> np.ndarray:
    """[H, W, 3] uint8: smooth gradients in all three channels (so the tone curve has a range to fit) with a
    fixed noise texture."""
    rng = np.random.default_rng(1)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    img = np.stack([40 + 150 * xx / W, 60 + 120 * yy / H, 200 - 140 * xx / W], axis=-1)
    return np.clip(img + rng.normal(0, 3, img.shape), 0, 255).astype(np.uint8)


def frame(colour: np.ndarray) -> np.ndarray:
    img = background()
    img[PATCH] = colour
    return img


def clip(img: np.ndarray, n: int = 4) -> np.ndarray:
    return np.repeat(img[None], n, axis=0).copy()


def tracker(**kw) -> ChangeTracker:
    return ChangeTracker(ChangeConfig(**{"keyframe_every": 1000, "floor": 0.0, **kw}))


def luma(colour: np.ndarray) -> float:
    return float(colour.astype(np.float32) @ LUMA)


def test_a_red_light_turning_green_at_equal_luma_is_a_change():
    """RED and GREEN have the same luma to 1/1000 of full scale (below every allowed threshold's 0.06 default
    and far below its noise), so the luma-only detector (before colour) scored this region ~0 and dropped it;
    the colour differences (Cr: 0.713 (R - Y)) differ by 0.56 of full scale."""
    assert abs(luma(RED) - luma(GREEN)) < 1e-3
    t = tracker()
    t.select(clip(frame(RED)), QWEN, keyframe=True)
    got = t.select(clip(frame(GREEN)), QWEN, keyframe=False)
    assert got.changed[0, 2:4, 3:5].all() and got.score[0, 2:4, 3:5].min() > 0.3
    assert got.changed_tokens == 4  # the patch's 4 regions, nothing else
    assert got.keep[0, 2:4, 3:5].all()
    assert not got.keep[1].any()  # the second temporal patch is compared with the first one's kept GREEN
    # the new colour is now the reference: the same frames again add nothing
    assert t.select(clip(frame(GREEN)), QWEN, keyframe=False).kept == 0


def test_a_colour_change_in_one_temporal_patch_keeps_only_that_patch():
    t = tracker()
    t.select(clip(frame(RED)), QWEN, keyframe=True)
    frames = clip(frame(RED))
    frames[2:] = frame(GREEN)
    got = t.select(frames, QWEN, keyframe=False)
    assert not got.keep[0].any() and got.keep[1, 2:4, 3:5].all()


@pytest.mark.parametrize("gain", [0.6, 0.8, 1.15, 1.25])
def test_a_global_exposure_change_of_a_coloured_scene_is_not_a_change(gain):
    """Every channel scaled by the same gain (and clipped where it saturates) scales the colour differences
    too: the tone curve fitted on luma, applied to each channel of the reference, predicts them."""
    t = tracker()
    base = frame(RED)
    t.select(clip(base), QWEN, keyframe=True)
    exposed = np.clip(base.astype(np.float32) * gain + 3, 0, 255).astype(np.uint8)
    got = t.select(np.stack([exposed, base, exposed, base]), QWEN, keyframe=False)  # flicker, too
    assert got.changed_tokens == 0 and got.kept == 0
    assert got.score.max() < 0.06


def test_a_slow_colour_drift_is_caught_against_the_last_kept_version():
    """The patch shifts from red towards green at constant luma by 1/12 of the way per clip: each step's Cr
    change (~0.05 of full scale) is below the 0.06 threshold, so only the accumulated drift against the last
    KEPT reference crosses it; after a refresh the creep starts again from the new reference."""
    t = tracker(threshold=0.06)
    t.select(clip(frame(RED)), QWEN, keyframe=True)
    kept_at, scores = [], []
    for step in range(1, 13):
        colour = np.rint(RED + (GREEN.astype(np.float32) - RED) * step / 12).astype(np.uint8)
        assert abs(luma(colour) - luma(RED)) < 2e-3  # the drift is invisible to luma
        got = t.select(clip(frame(colour)), QWEN, keyframe=False)
        scores.append(float(got.score[0, 2:4, 3:5].max()))
        if got.keep[0, 2:4, 3:5].any():
            assert got.keep[0, 2:4, 3:5].all()  # the whole patch is refreshed at once
            kept_at.append(step)
        assert not got.keep[1].any()  # the clip's second temporal patch sees what its first one kept
    assert scores[0] < 0.06  # one step alone is not a change
    assert kept_at and kept_at[0] == 2  # two steps added up cross it
    assert kept_at == list(range(2, 13, 2))  # then every second step, each from the newly kept reference


def test_a_region_that_changes_and_changes_back_is_caught_both_times():
    """The reference is the kept version: after RED -> GREEN was kept, GREEN -> RED is a change against it
    (not against a stale key frame, where RED would look unchanged)."""
    t = tracker()
    t.select(clip(frame(RED)), QWEN, keyframe=True)
    there = t.select(clip(frame(GREEN)), QWEN, keyframe=False)
    assert there.keep[0, 2:4, 3:5].all() and there.changed_tokens == 4
    back = t.select(clip(frame(RED)), QWEN, keyframe=False)
    assert back.keep[0, 2:4, 3:5].all() and back.changed_tokens == 4
    assert t.select(clip(frame(RED)), QWEN, keyframe=False).kept == 0


def test_a_change_and_back_within_one_clip_keeps_both_temporal_patches():
    """Temporal patch 0 ends on GREEN, which becomes the patch's reference once kept; patch 1 is RED again:
    a change against what was kept, though it equals the clip's first frame."""
    t = tracker()
    t.select(clip(frame(RED)), QWEN, keyframe=True)
    frames = np.stack([frame(RED), frame(GREEN), frame(RED), frame(RED)])
    got = t.select(frames, QWEN, keyframe=False)
    assert got.keep[0, 2:4, 3:5].all() and got.keep[1, 2:4, 3:5].all()
    assert got.changed_tokens == 2 * 4


def test_a_dark_region_changing_colour_does_not_count_its_noise():
    """Colour differences are absolute (0..1 of full scale), not normalised by brightness, so a nearly black
    region's noise (whose hue swings wildly) scores as little as its pixel values."""
    t = tracker()
    base = frame(np.array([6, 4, 5], dtype=np.uint8))
    t.select(clip(base), QWEN, keyframe=True)
    noisy = base.copy()
    noisy[PATCH] = np.random.default_rng(2).integers(0, 12, noisy[PATCH].shape, dtype=np.uint8)
    assert t.select(clip(noisy), QWEN, keyframe=False).kept == 0


def test_a_light_on_an_h264_camera_turning_green_at_equal_luma_is_kept_and_nothing_else():
    """The real-camera path (tests/support/camera_clips.py: a photo, noise, exposure drift, flicker, H.264 with
    4:2:0 chroma at 400 kbit/s): a 2x2-region lamp switches from RED to GREEN (equal luma) at 6 s. The clip
    with the switch keeps the lamp's regions in its second temporal patch (frames 6-7); no other clip keeps
    anything, so the codec's chroma noise is not a change."""
    lamp = Light(box=(196, 140, 252, 196), before=tuple(RED), after=tuple(GREEN), switch_s=6.0)  # rows 5-6, cols 7-8
    frames = camera_video(16, light=lamp).frames
    t = tracker()
    kept = []
    for c in range(4):
        got = t.select(frames[4 * c : 4 * c + 4], QWEN, keyframe=c == 0)
        kept.append(got)
    assert kept[1].changed[1, 5:7, 7:9].all() and kept[1].keep[1, 5:7, 7:9].all()
    assert kept[1].changed_tokens == 4 and not kept[1].keep[0].any()
    assert kept[2].kept == 0 and kept[3].kept == 0
