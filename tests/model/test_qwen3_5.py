"""Qwen3.5, the hybrid family: Qwen3-VL's positions, and a bounded cache whose attention layers evict while the
linear-attention (Gated DeltaNet) layers carry their fixed-size recurrent and convolution states exactly."""

from __future__ import annotations

import pytest
import torch
from transformers.cache_utils import LinearAttentionLayer

from app.admission import KvShape
from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from model.session import SessionConfig, StreamingSession
from tests.support.model_fixtures import random_frames
from tests.support.session_helpers import generate_answer, loaded

NAME = "tiny-qwen3.5"
CLIPS = [(random_frames(3, 60, 80, seed=1), 0.0, 3.0), (random_frames(4, 70, 50, seed=2), 3.0, 5.0)]


def _conversation(adapter, question: str = "What moved?"):
    segments = [adapter.conversation_prefix()]
    segments += [adapter.clip_segment(frames, t0, t1) for frames, t0, t1 in CLIPS]
    return segments + [adapter.question_segment(question)]


def _states(cache: BoundedCache) -> list[torch.Tensor]:
    """Every linear-attention layer's convolution and recurrent state, copied."""
    return [t.clone() for layer in cache.state_layers for t in (layer.conv_states[0], layer.recurrent_states[0])]


def test_the_tiny_model_is_hybrid_and_the_cache_bounds_only_its_attention_layers():
    model = loaded(NAME).model
    assert model.config.text_config.layer_types == ["linear_attention"] * 3 + ["full_attention"]
    cache = BoundedCache.for_model(model, CacheConfig(policy="inf-mllm", budget=64, window=8))
    assert cache.kv_layer_ids == [3]
    assert all(type(layer) is LinearAttentionLayer for layer in cache.layers[:3])
    assert cache.state_layers == cache.layers[:3] and cache.kv_layers == [cache.layers[3]]


@pytest.mark.parametrize("chunk_size", [8, 16, 4096])
def test_clips_prefilled_in_chunks_give_the_logits_of_one_forward(chunk_size):
    """The recurrent and convolution states carry over clip and chunk boundaries as in one whole forward."""
    ours, reference = loaded(NAME), loaded(NAME, attention="sdpa")
    segments = _conversation(reference.adapter)
    session = StreamingSession(
        ours, CacheConfig(policy="inf-mllm", budget=8192, window=8), SessionConfig(chunk_size=chunk_size)
    )
    for frames, t0, t1 in CLIPS:
        session.ingest_clip(frames, t0, t1)
    turn = session.open_turn("What moved?", segments[-1])
    with torch.no_grad():
        expected = reference.model(**reference.adapter.merge_for_generate(segments)).logits[:, -1]
    torch.testing.assert_close(turn.logits, expected, atol=1e-4, rtol=0)
    session.close_turn(turn)


def test_under_eviction_only_the_attention_layers_lose_tokens():
    """The tiny model's linear layers (0-2) come before its attention layer (3), so what they see does not depend
    on eviction: an evicting session must end with the very states of one that keeps everything, while its one
    attention layer holds at most the budget, and its KV bytes count that layer alone."""
    model = loaded(NAME)
    sessions = {
        budget: StreamingSession(
            model,
            CacheConfig(policy="inf-mllm", budget=budget, window=8),
            SessionConfig(max_new_tokens=8, chunk_size=16),
        )
        for budget in (48, 8192)
    }
    for i in range(4):
        frames = random_frames(4, seed=10 + i)
        for session in sessions.values():
            session.ingest_clip(frames, 4.0 * i, 4.0 * i + 4)
    bounded, full = sessions[48].cache, sessions[8192].cache
    assert bounded.evictions > 0 and full.evictions == 0
    assert bounded.get_seq_length() <= 48 < full.get_seq_length()
    for mine, theirs in zip(_states(bounded), _states(full), strict=True):
        assert torch.equal(mine, theirs)
    text = model.model.config.text_config
    per_token = text.num_key_value_heads * text.head_dim * 2 * 4  # keys + values, float32, one attention layer
    assert bounded.kv_bytes() == bounded.get_seq_length() * per_token
    assert full.kv_bytes() == full.get_seq_length() * per_token
    assert bounded.state_bytes() == full.state_bytes() > 0  # fixed size, however long the stream
    shape = KvShape.of_model(model.model, position_dims=3)  # the admission arithmetic agrees with what is held
    assert (shape.layers, shape.state_bytes) == (1, bounded.state_bytes())


def test_a_watch_probe_leaves_the_states_and_the_next_answer_as_they_were():
    model = loaded(NAME)
    config = CacheConfig(policy="inf-mllm", budget=8192, window=8)
    probed, plain = (StreamingSession(model, config, SessionConfig(max_new_tokens=8)) for _ in range(2))
    for session in (probed, plain):
        for frames, t0, t1 in CLIPS:
            session.ingest_clip(frames, t0, t1)
    before = _states(probed.cache)
    probed.check("Is there a person?")
    for mine, theirs in zip(_states(probed.cache), before, strict=True):
        assert torch.equal(mine, theirs)
    assert "".join(probed.ask("What moved?")) == "".join(plain.ask("What moved?"))
    assert probed.last_answer_ids == plain.last_answer_ids


def test_without_restoring_the_states_a_probe_would_change_them():
    """Guard for the test above: a probe's forward does move the linear-attention states."""
    model = loaded(NAME)
    session = StreamingSession(model, CacheConfig(policy="inf-mllm", budget=8192, window=8), SessionConfig())
    frames, t0, t1 = CLIPS[0]
    session.ingest_clip(frames, t0, t1)
    cache = session.cache
    before = _states(cache)
    cache.restore_states = lambda saved: None  # this session's cache only: the probe's undo left out
    session.check("Is there a person?")
    assert any(not torch.equal(mine, theirs) for mine, theirs in zip(_states(cache), before, strict=True))


def test_answers_equal_generate_with_a_budget_above_the_stream():
    """Greedy answers through the bounded cache (chunked prefill, static decode) = plain generate()."""
    ours, reference = loaded(NAME), loaded(NAME, attention="sdpa")
    adapter = reference.adapter
    session = StreamingSession(
        ours, CacheConfig(policy="inf-mllm", budget=8192, window=8), SessionConfig(max_new_tokens=10, chunk_size=16)
    )
    conversation = [adapter.conversation_prefix()]
    for (frames, t0, t1), question in zip(CLIPS, ["What is on screen?", "And now?"], strict=True):
        session.ingest_clip(frames, t0, t1)
        conversation += [adapter.clip_segment(frames, t0, t1), adapter.question_segment(question)]
        expected = generate_answer(reference, conversation, 10)
        "".join(session.ask(question))
        assert session.last_answer_ids == expected
        conversation.append(adapter.answer_segment(torch.tensor([expected])))


def test_rerotation_moves_partial_rope_keys_as_the_model_would_place_them():
    """Qwen3.5 rotates the leading part of each head only (here half, a quarter on the checkpoints): moving a cached
    key by delta must equal the model's own RoPE at the new position, with the position-free rest untouched."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import apply_rotary_pos_emb

    from cache.rope import KeyRotator

    model = loaded(NAME).model
    rotary = model.model.language_model.rotary_emb
    keys = torch.randn(1, 2, 5, 16)
    old = torch.tensor([3, 9, 14, 20, 31])
    delta = torch.tensor([-2, -7, 0, -11, -30])

    def placed(positions):
        cos, sin = rotary(keys, positions.view(1, 1, -1).expand(3, 1, -1))
        return apply_rotary_pos_emb(keys, keys, cos, sin)[1]

    moved = KeyRotator.from_model(model).rotate(placed(old), delta.expand(1, 2, -1))
    torch.testing.assert_close(moved, placed(old + delta), atol=1e-5, rtol=0)
    assert torch.equal(moved[..., 8:], keys[..., 8:])


def test_admission_of_a_model_without_linear_layers_counts_every_layer_and_no_state():
    from tests.support.model_fixtures import tiny

    model = tiny("qwen2_vl")[0]  # its text config has layer_types, all full attention
    shape = KvShape.of_model(model, position_dims=3)
    assert (shape.layers, shape.state_bytes) == (model.config.text_config.num_hidden_layers, 0)
