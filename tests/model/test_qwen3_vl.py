"""Qwen3-VL: the frame-group prompt, the positions of transformers' get_rope_index, and DeepStack features that
reach the first decoder layers exactly when a clip is prefilled in chunks onto the bounded cache."""

from __future__ import annotations

import pytest
import torch
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor

from cache.config import CacheConfig
from model.session import SessionConfig, StreamingSession
from tests.support.model_fixtures import random_frames
from tests.support.session_helpers import loaded

NAME = "tiny-qwen3-vl"


def _conversation(adapter):
    clips = [(random_frames(3, 60, 80, seed=1), 0.0, 3.0), (random_frames(4, 70, 50, seed=2), 3.0, 5.0)]
    segments = [adapter.conversation_prefix()]
    for frames, t0, t1 in clips:
        segments.append(adapter.clip_segment(frames, t0, t1))
    segments.append(adapter.question_segment("What moved?"))
    return clips, segments


def test_frame_groups_carry_their_timestamps_as_the_processor_writes_them():
    adapter = loaded(NAME, attention="sdpa").adapter
    frames = random_frames(4, 64, 64)
    text = adapter.tokenizer.decode(adapter.clip_segment(frames, 10.0, 12.0).input_ids[0])
    # 4 frames at 10.0, 10.5, 11.0, 11.5 s -> groups (10.0 + 10.5) / 2 and (11.0 + 11.5) / 2
    assert text.startswith("<|im_start|>user\n<10.2 seconds><|vision_start|><|video_pad|>")
    assert "<|vision_end|><11.2 seconds><|vision_start|>" in text and text.endswith("<|vision_end|><|im_end|>\n")
    stamps = Qwen3VLProcessor._calculate_timestamps(None, [0, 1, 2, 3], video_fps=2.0, merge_size=2)
    assert [10.0 + s for s in stamps] == adapter.group_timestamps(4, 10.0, 12.0)


def test_positions_equal_get_rope_index_over_the_whole_conversation():
    model = loaded(NAME, attention="sdpa")
    adapter = model.adapter
    _, segments = _conversation(adapter)
    inputs = adapter.merge_for_generate(segments)
    expected, _ = model.model.model.get_rope_index(
        inputs["input_ids"], inputs["mm_token_type_ids"], video_grid_thw=inputs["video_grid_thw"]
    )
    ours, start = [], 0
    for segment in segments:
        pos, start = adapter.segment_position_ids(segment, start)
        ours.append(pos)
    assert torch.equal(torch.cat(ours, dim=-1), expected)
    assert start == int(expected.max()) + 1  # decoding continues where generate() does


def test_deepstack_features_change_the_clip_so_they_must_be_fed():
    """Guard: on the tiny model, leaving DeepStack out gives other logits (the checks below would notice)."""
    model = loaded(NAME, attention="sdpa")
    adapter = model.adapter
    _, segments = _conversation(adapter)
    inputs = adapter.merge_for_generate(segments)
    embeds = torch.cat([adapter.segment_embeddings(model.model, s) for s in segments], dim=1)
    with torch.no_grad():
        full = model.model(**inputs).logits[:, -1]
        positions, _ = model.model.model.get_rope_index(
            inputs["input_ids"], inputs["mm_token_type_ids"], video_grid_thw=inputs["video_grid_thw"]
        )
        without = model.model(inputs_embeds=embeds, position_ids=positions).logits[:, -1]
    assert not torch.allclose(full, without, atol=1e-3)


@pytest.mark.parametrize("chunk_size", [8, 16, 4096])
def test_clips_prefilled_in_chunks_give_the_logits_of_one_forward(chunk_size):
    ours = loaded(NAME)
    reference = loaded(NAME, attention="sdpa")
    adapter = reference.adapter
    clips, segments = _conversation(adapter)
    session = StreamingSession(
        ours, CacheConfig(policy="inf-mllm", budget=8192, window=8), SessionConfig(chunk_size=chunk_size)
    )
    for frames, t0, t1 in clips:
        session.ingest_clip(frames, t0, t1)
    turn = session.open_turn("What moved?", segments[-1])
    with torch.no_grad():
        expected = reference.model(**adapter.merge_for_generate(segments)).logits[:, -1]
    torch.testing.assert_close(turn.logits, expected, atol=1e-4, rtol=0)
    session.close_turn(turn)


def test_sparse_clips_feed_the_deepstack_rows_of_their_kept_tokens():
    """Dropping unchanged tokens on Qwen3-VL: the session's question logits equal one plain forward over the same
    sparse sequence whose visual and DeepStack features are the WHOLE clip's tower output at the kept tokens (the
    tower attends within a temporal patch, so encoding only the kept patches must give the same rows)."""
    from transformers.models.qwen3_vl.modeling_qwen3_vl import BaseModelOutputWithDeepstackFeatures

    from model.change import ChangeTracker
    from tests.model.test_session_drop import ON, camera_clip

    reference = loaded(NAME, attention="sdpa")
    adapter, model = reference.adapter, reference.model
    clips = [(camera_clip(i), 4.0 * i, 4.0 * i + 4) for i in range(5)]
    tracker = ChangeTracker(ON)
    segments, features, levels, kept = [adapter.conversation_prefix()], [], [], []
    with torch.no_grad():
        for frames, t0, t1 in clips:
            whole = adapter.clip_segment(frames, t0, t1)
            selection = tracker.select(whole.view, adapter.change_layout(), keyframe=tracker.keyframe_due())
            segments.append(whole if selection.keep.all() else adapter.sparse_clip(whole, selection.keep))
            out = model.get_video_features(
                whole.model_inputs["pixel_values_videos"], whole.model_inputs["video_grid_thw"], return_dict=True
            )
            rows = torch.from_numpy(selection.keep.reshape(-1))  # token order: temporal patch, row, column
            features.append(torch.cat(out.pooler_output)[rows])
            levels.append([torch.cat(level)[rows] for level in out.deepstack_features])
            kept.append(float(selection.keep.mean()))
        segments.append(adapter.question_segment("What moved?"))
        positions, start = [], 0
        for segment in segments:
            pos, start = adapter.segment_position_ids(segment, start)
            positions.append(pos)
        video = BaseModelOutputWithDeepstackFeatures(
            pooler_output=(torch.cat(features),),
            deepstack_features=[(torch.cat([clip[i] for clip in levels]),) for i in range(len(levels[0]))],
        )
        expected = model(
            input_ids=torch.cat([s.input_ids for s in segments], dim=1),
            position_ids=torch.cat(positions, dim=-1),
            mm_encoder_outputs={"video": video},
        ).logits[:, -1]
    assert kept[0] == 1 and kept[1] == 0 and any(0 < k < 1 for k in kept)  # whole, empty and sparse clips
    session = StreamingSession(
        loaded(NAME), CacheConfig(policy="inf-mllm", budget=8192, window=8), SessionConfig(chunk_size=16, change=ON)
    )
    for frames, t0, t1 in clips:
        session.ingest_clip(frames, t0, t1)
    turn = session.open_turn("What moved?", segments[-1])
    torch.testing.assert_close(turn.logits, expected, atol=1e-4, rtol=0)
    session.close_turn(turn)
