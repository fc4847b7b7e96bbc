"""Frame preprocessing (numpy + PIL) against transformers' own PIL image processors, and input checks."""

import copy

import numpy as np
import pytest

from model.adapters import Qwen2VLAdapter, SmolVLM2Adapter
from model.processor import VisionTextProcessor
from tests.support.model_fixtures import ALL_FAMILIES, QWEN_FAMILIES, random_frames, smooth_frame, tiny


def _qwen_image(processor, frame):
    out = processor.image_processor(images=frame, return_tensors="np")
    return out["pixel_values"], tuple(out["image_grid_thw"][0])


@pytest.mark.parametrize("family", QWEN_FAMILIES)
@pytest.mark.parametrize(("height", "width"), [(90, 120), (200, 60), (56, 56)])
def test_qwen_two_equal_frames_match_the_image_processor(family, height, width):
    _, processor, adapter = tiny(family)
    frame = smooth_frame(height, width)
    pixels, (t, h, w) = adapter.video_pixels(np.stack([frame, frame]))
    ref_pixels, (rt, rh, rw) = _qwen_image(processor, frame)
    assert (t, h, w) == (1, rh, rw) and rt == 1
    np.testing.assert_allclose(pixels, ref_pixels, rtol=0, atol=1e-6)


def test_qwen_temporal_patches_hold_consecutive_frames():
    _, processor, adapter = tiny("qwen2_vl")
    a, b = smooth_frame(seed=1), smooth_frame(seed=2)
    pixels, _ = adapter.video_pixels(np.stack([a, b]))
    p = adapter.patch_size
    ours = pixels.reshape(-1, 3, 2, p, p)
    ref_a = _qwen_image(processor, a)[0].reshape(-1, 3, 2, p, p)
    ref_b = _qwen_image(processor, b)[0].reshape(-1, 3, 2, p, p)
    np.testing.assert_allclose(ours[:, :, 0], ref_a[:, :, 0], atol=1e-6)
    np.testing.assert_allclose(ours[:, :, 1], ref_b[:, :, 1], atol=1e-6)
    assert not np.allclose(ours[:, :, 0], ours[:, :, 1])


def test_qwen_odd_frame_count_repeats_the_last_frame():
    _, _, adapter = tiny("qwen2_vl")
    frames = random_frames(3)
    odd, grid = adapter.video_pixels(frames)
    padded, grid_padded = adapter.video_pixels(np.concatenate([frames, frames[-1:]]))
    assert grid == grid_padded and grid[0] == 2
    np.testing.assert_array_equal(odd, padded)
    seg = adapter.clip_segment(frames, 0.0, 3.0)
    assert seg.num_visual_tokens == 2 * grid[1] * grid[2] // 4
    assert seg.model_inputs["video_grid_thw"].tolist() == [list(grid)]


@pytest.mark.parametrize("family", QWEN_FAMILIES)
@pytest.mark.parametrize(("width", "height"), [(1280, 720), (640, 480), (1920, 960), (720, 1280), (600, 600)])
def test_qwen_frames_fitted_to_the_capture_box_keep_the_tokens_of_the_source(family, width, height):
    """The capture fits frames into `frame_size()` (aspect kept, never upscaled) before the processor resizes them
    within its pixel budget: for frames up to 2:1 the box must not cost a token the source would have had (a square
    of the budget cut a 16:9 frame to 448x252, 144 tokens of 2 frames at Qwen2-VL's cap instead of 252)."""
    _, _, adapter = tiny(family)
    box_w, box_h = adapter.frame_size()
    scale = min(box_w / width, box_h / height, 1.0)
    fitted = (round(height * scale), round(width * scale))
    _, direct = adapter.video_pixels(random_frames(2, height, width))
    _, through_box = adapter.video_pixels(random_frames(2, *fitted))
    assert through_box[1] * through_box[2] >= direct[1] * direct[2]  # (more where smart_resize's floor cut the source)
    assert through_box[1] * through_box[2] * adapter.patch_size**2 <= adapter.max_pixels


def test_qwen_frame_size_follows_the_checkpoints_pixel_budget():
    _, processor, adapter = tiny("qwen2_vl")
    assert adapter.max_pixels == 112 * 112 and adapter.frame_size() == (140, 140)
    # a checkpoint that says nothing about video sizes: transformers' defaults, capped for streaming at 448x448
    bare = VisionTextProcessor(processor.tokenizer, processor.image_processor, {})
    model, _, _ = tiny("qwen2_vl")
    assert Qwen2VLAdapter(model.config, bare).frame_size() == (616, 616)


@pytest.mark.parametrize(("height", "width"), [(48, 64), (100, 30), (64, 64)])
def test_smolvlm_frames_match_the_image_processor(height, width):
    _, processor, adapter = tiny("smolvlm")
    frames = np.stack([smooth_frame(height, width, seed=s) for s in range(2)])
    ours = adapter.frame_pixels(frames)
    assert ours.shape == (2, 3, adapter.side, adapter.side)
    for i, frame in enumerate(frames):
        ref = processor.image_processor(
            images=[frame],
            do_image_splitting=False,
            size={"longest_edge": adapter.video_longest_edge},
            return_tensors="np",
        )["pixel_values"]
        assert ref.shape == (1, 1, 3, adapter.side, adapter.side)
        np.testing.assert_allclose(ours[i], ref[0, 0], rtol=0, atol=1e-6)


BAD_CLIPS = [
    (np.zeros((0, 48, 64, 3), np.uint8), "empty"),
    (np.zeros((2, 48, 64, 3), np.float32), "uint8"),
    (np.zeros((48, 64, 3), np.uint8), "shape"),
    (np.zeros((2, 48, 64, 4), np.uint8), "shape"),
    (np.zeros((2, 1, 64, 3), np.uint8), "small"),
    ([[0]], "numpy"),
]


@pytest.mark.parametrize("family", ALL_FAMILIES)
@pytest.mark.parametrize(("frames", "message"), BAD_CLIPS)
def test_bad_clips_raise_value_error(family, frames, message):
    _, _, adapter = tiny(family)
    with pytest.raises(ValueError, match=message):
        adapter.clip_segment(frames, 0.0, 1.0)


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_bad_times_and_questions_raise_value_error(family):
    _, _, adapter = tiny(family)
    with pytest.raises(ValueError, match="t_start"):
        adapter.clip_segment(random_frames(2), 5.0, 4.0)
    with pytest.raises(ValueError, match="t_start"):
        adapter.clip_segment(random_frames(2), float("nan"), 4.0)
    for question in ["", "   \n", None]:
        with pytest.raises(ValueError, match="question"):
            adapter.question_segment(question)


@pytest.mark.parametrize(
    ("side", "patch", "scale", "tokens"),
    [(512, 16, 4, 64), (384, 14, 3, 81), (64, 8, 2, 16)],  # SmolVLM2-256M/500M, SmolVLM2-2.2B, tiny
)
def test_smolvlm_tokens_per_frame_for_real_geometries(side, patch, scale, tokens):
    model, processor, _ = tiny("smolvlm")
    config = copy.deepcopy(model.config)
    config.vision_config.patch_size, config.vision_config.image_size, config.scale_factor = patch, side, scale
    image_processor = copy.deepcopy(processor.image_processor)
    image_processor.max_image_size = {"longest_edge": side}
    bundle = VisionTextProcessor(processor.tokenizer, image_processor, {})
    adapter = SmolVLM2Adapter(config, bundle)
    assert adapter.tokens_per_frame == tokens
    assert adapter.frame_size() == (side, side)
