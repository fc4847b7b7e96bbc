"""Segment positions and embeddings against the model's own whole-sequence computation."""

import pytest
import torch
from transformers import DynamicCache

from cache.forward_args import with_cache
from tests.support.model_fixtures import ALL_FAMILIES, QWEN_FAMILIES, random_frames, tiny


def _conversation(adapter):
    """prefix, clip, question, answer, two more clips (odd frame count; more temporal patches than
    merged rows), question."""
    return [
        adapter.conversation_prefix(),
        adapter.clip_segment(random_frames(4, 48, 64, seed=1), 0.0, 4.0),
        adapter.question_segment("What is on the table?"),
        adapter.answer_segment(torch.tensor([[40, 41, 42, 43]])),
        adapter.clip_segment(random_frames(5, 100, 30, seed=2), 4.0, 9.0),
        adapter.clip_segment(random_frames(8, 56, 56, seed=3), 9.0, 11.0),
        adapter.question_segment("Who came in?"),
    ]


def _stream_positions(adapter, segments):
    positions, start = [], 0
    for seg in segments:
        pos, start = adapter.segment_position_ids(seg, start)
        assert pos.shape[-1] == seg.num_tokens
        positions.append(pos)
    return torch.cat(positions, dim=-1), start


@pytest.mark.parametrize("family", QWEN_FAMILIES)
def test_qwen_segment_positions_equal_get_rope_index(family):
    model, _, adapter = tiny(family)
    segments = _conversation(adapter)
    merged = adapter.merge_for_generate(segments)
    keys = ("input_ids", "mm_token_type_ids", "video_grid_thw", "second_per_grid_ts")
    ref, _ = model.model.get_rope_index(**{k: merged[k] for k in keys if k in merged})  # [3, 1, N]
    ours, next_start = _stream_positions(adapter, segments)
    assert ours.shape == ref.shape == (3, 1, merged["input_ids"].shape[1])
    torch.testing.assert_close(ours, ref, rtol=0, atol=0)
    assert next_start == int(ref.max()) + 1
    # the vision blocks really are 3-D: the axes differ inside them
    assert not torch.equal(ours[0], ours[1]) and not torch.equal(ours[1], ours[2])


def test_qwen25_temporal_positions_follow_real_time():
    _, _, adapter = tiny("qwen2_5_vl")
    slow = adapter.clip_segment(random_frames(4), 0.0, 8.0)  # 0.5 fps: 4 s per temporal patch
    fast = adapter.clip_segment(random_frames(4), 0.0, 2.0)  # 2 fps: 1 s per temporal patch
    t_slow = adapter.segment_position_ids(slow, 0)[0][0, 0]
    t_fast = adapter.segment_position_ids(fast, 0)[0][0, 0]
    vis = slow.input_ids[0] == adapter.video_token_id
    # tokens_per_second = 2: the second temporal patch sits 8 (slow) or 2 (fast) positions later
    assert t_slow[vis].max() - t_slow[vis].min() == 8
    assert t_fast[vis].max() - t_fast[vis].min() == 2


def test_one_d_positions_count_up():
    _, _, adapter = tiny("smolvlm")
    seg = adapter.question_segment("Hello?")
    pos, nxt = adapter.segment_position_ids(seg, 17)
    assert pos.tolist() == [list(range(17, 17 + seg.num_tokens))]
    assert nxt == 17 + seg.num_tokens


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_segment_embeddings_reproduce_the_full_forward(family):
    """inputs_embeds + positions per segment, whole and prefilled segment by segment into a cache,
    give the logits of the model's own forward over the merged conversation."""
    model, _, adapter = tiny(family)
    segments = _conversation(adapter)
    merged = adapter.merge_for_generate(segments)
    positions, _ = _stream_positions(adapter, segments)
    with torch.no_grad():
        ref = model(**merged).logits  # [1, N, vocab]
        embeds = [adapter.segment_embeddings(model, s) for s in segments]
        assert all(e.shape == (1, s.num_tokens, model.config.text_config.hidden_size) for e, s in
                   zip(embeds, segments, strict=True))  # fmt: skip
        if family != "qwen3_vl":  # Qwen3-VL's clips also need their DeepStack features (chunk_inputs)
            whole = model(inputs_embeds=torch.cat(embeds, dim=1), position_ids=positions).logits
            torch.testing.assert_close(whole, ref, rtol=1e-4, atol=1e-4)

        cache, start, last = DynamicCache(config=model.config), 0, None
        for seg in segments:
            pos, start = adapter.segment_position_ids(seg, start)
            last = _forward_segment(model, adapter, seg, pos, cache) if seg.num_tokens else last
        assert cache.get_seq_length() == merged["input_ids"].shape[1]
        torch.testing.assert_close(last[:, -1], ref[:, -1], rtol=1e-4, atol=1e-4)


def _forward_segment(model, adapter, seg, pos, cache):
    """One segment onto the cache as the session feeds it: its chunk inputs where the family has them
    (Qwen3-VL clips: ids + visual and DeepStack features), else its input embeddings. Logits [1, T, vocab]."""
    chunks = adapter.chunk_inputs(model, seg)
    inputs = chunks(0, seg.num_tokens) if chunks else {"inputs_embeds": adapter.segment_embeddings(model, seg)}
    return model(**inputs, position_ids=pos, **with_cache(model, cache), use_cache=True).logits


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_text_positions_match_segment_positions_of_text(family):
    _, _, adapter = tiny(family)
    seg = adapter.question_segment("Where is the dog?")
    pos, _ = adapter.segment_position_ids(seg, 30)
    torch.testing.assert_close(adapter.text_position_ids(30, seg.num_tokens), pos, rtol=0, atol=0)
    assert adapter.text_position_ids(7).shape == ((3, 1, 1) if family in QWEN_FAMILIES else (1, 1))


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_cached_greedy_decoding_matches_generate(family):
    """Prefill segment by segment, then decode with text_position_ids: the same tokens as generate()."""
    model, _, adapter = tiny(family)
    segments = _conversation(adapter)
    n_new, suppressed = 8, adapter.suppressed_token_ids()
    with torch.no_grad():
        inputs = adapter.merge_for_generate(segments)
        ref = model.generate(**inputs, max_new_tokens=n_new, do_sample=False,
                             suppress_tokens=suppressed)[0, inputs["input_ids"].shape[1] :]  # fmt: skip
        cache, start, ours = DynamicCache(config=model.config), 0, []
        for seg in segments:
            pos, start = adapter.segment_position_ids(seg, start)
            logits = _forward_segment(model, adapter, seg, pos, cache) if seg.num_tokens else None
        for _ in range(n_new):
            logits = logits[0, -1].clone()
            logits[suppressed] = float("-inf")
            token = int(logits.argmax())
            ours.append(token)
            if token in adapter.eos_token_ids():
                break
            step = model.get_input_embeddings()(torch.tensor([[token]]))
            pos = adapter.text_position_ids(start)
            start += 1
            logits = model(inputs_embeds=step, position_ids=pos, **with_cache(model, cache), use_cache=True).logits
    assert ours == ref.tolist() and len(ours) > 1
