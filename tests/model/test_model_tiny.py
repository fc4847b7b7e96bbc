"""Tiny models: they build small and deterministic, follow their family's chat format, and generate."""

import pytest
import torch

from model.tiny import build_tiny
from tests.support.model_fixtures import ALL_FAMILIES, QWEN_FAMILIES, random_frames, tiny

MAX_PARAMS = 300_000


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_tiny_is_small_and_deterministic(family):
    model, processor, _ = tiny(family)
    n_params = sum(p.numel() for p in model.parameters())
    assert 50_000 < n_params < MAX_PARAMS
    assert model.config.text_config.num_hidden_layers == (4 if family == "qwen3_5" else 2)  # the hybrid: 3 + 1
    assert len(processor.tokenizer) <= model.config.text_config.vocab_size

    again, again_proc = build_tiny(family, seed=0)
    other, _ = build_tiny(family, seed=1)
    ref = model.state_dict()
    assert all(torch.equal(ref[k], v) for k, v in again.state_dict().items())
    assert not all(torch.equal(ref[k], v) for k, v in other.state_dict().items())
    assert again_proc.tokenizer.get_vocab() == processor.tokenizer.get_vocab()


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_special_tokens_are_single_tokens(family):
    _, _, adapter = tiny(family)
    for token in adapter.placeholder_tokens() + adapter.stop_tokens():
        ids = adapter.tokenizer(token, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, token
    assert len(set(adapter.suppressed_token_ids())) == len(adapter.placeholder_tokens())
    assert set(adapter.eos_token_ids()) >= {adapter.token_id(t) for t in adapter.stop_tokens()}


def _decode(adapter, *segments) -> str:
    ids = torch.cat([s.input_ids for s in segments], dim=1)[0]
    return adapter.tokenizer.decode(ids, skip_special_tokens=False)


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_prefix_and_question_follow_the_chat_template(family):
    _, _, adapter = tiny(family)
    question = "What is the cat doing?"
    expected = adapter.tokenizer.apply_chat_template(
        [{"role": "user", "content": [{"type": "text", "text": question}]}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert _decode(adapter, adapter.conversation_prefix(), adapter.question_segment(question)) == expected


@pytest.mark.parametrize("family", QWEN_FAMILIES)
def test_qwen_clip_turn_is_a_video_user_turn(family):
    _, _, adapter = tiny(family)
    seg = adapter.clip_segment(random_frames(4), 8.0, 12.0)
    text = _decode(adapter, seg)
    pad = "<|video_pad|>"
    if family in ("qwen3_vl", "qwen3_5"):  # one timestamped block per frame group, as Qwen3VLProcessor expands it
        block = "<|vision_start|>" + pad * (seg.num_visual_tokens // 2) + "<|vision_end|>"
        collapsed = text.replace("<8.5 seconds>" + block + "<10.5 seconds>" + block, "<|vision_start|>" + pad)
        collapsed = collapsed.replace("<|vision_start|>" + pad, "<|vision_start|>" + pad + "<|vision_end|>")
        content = [{"type": "video"}]
    else:
        collapsed = text.replace(pad * seg.num_visual_tokens, pad)
        content = [{"type": "text", "text": "<t=8.0-12.0s>"}, {"type": "video"}]
    expected = adapter.tokenizer.apply_chat_template(
        [{"role": "system", "content": "x"}, {"role": "user", "content": content}], tokenize=False
    )
    assert expected.endswith(collapsed)
    assert seg.num_visual_tokens == int((seg.input_ids == adapter.video_token_id).sum()) > 0


def test_smolvlm_clip_has_fixed_tokens_per_frame():
    _, _, adapter = tiny("smolvlm")
    one = adapter.clip_segment(random_frames(1), 0.0, 1.0)
    three = adapter.clip_segment(random_frames(3, 30, 100), 61.0, 64.0)
    assert one.num_visual_tokens == adapter.tokens_per_frame
    assert three.num_visual_tokens == 3 * adapter.tokens_per_frame
    text = _decode(adapter, three)
    assert text.startswith("User: <t=61.0-64.0s>\nFrame from 01:01:<fake_token_around_image><global-img>")
    assert "Frame from 01:03:" in text and text.endswith("<fake_token_around_image><end_of_utterance>\n")
    assert three.model_inputs["pixel_values"].shape == (1, 3, 3, adapter.side, adapter.side)


def _generate(model, adapter, segments, n=5):
    inputs = adapter.merge_for_generate(segments)
    with torch.no_grad():
        out = model.generate(
            **inputs,
            max_new_tokens=n,
            do_sample=False,
            suppress_tokens=adapter.suppressed_token_ids(),
        )
    new = out[:, inputs["input_ids"].shape[1] :]
    assert 1 <= new.shape[1] <= n
    return new


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_generate_one_and_two_clip_conversations(family):
    model, _, adapter = tiny(family)
    conv = [
        adapter.conversation_prefix(),
        adapter.clip_segment(random_frames(4, seed=1), 0.0, 4.0),
        adapter.question_segment("What happened?"),
    ]
    answer = _generate(model, adapter, conv)
    assert not set(answer[0].tolist()) & set(adapter.suppressed_token_ids())
    stop = set(adapter.eos_token_ids())
    kept = torch.tensor([[t for t in answer[0].tolist() if t not in stop]], dtype=torch.long)
    conv += [
        adapter.answer_segment(kept),
        adapter.clip_segment(random_frames(3, 40, 40, seed=2), 4.0, 7.0),
        adapter.question_segment("And now?"),
    ]
    _generate(model, adapter, conv)
    merged = adapter.merge_for_generate(conv)
    assert merged["input_ids"].shape[1] == sum(s.num_tokens for s in conv)
    if family in QWEN_FAMILIES:
        assert merged["video_grid_thw"].shape == (2, 3)
        assert merged["mm_token_type_ids"].shape == merged["input_ids"].shape
    else:
        assert merged["pixel_values"].shape[:2] == (1, 7)
