"""The session with unchanged visual tokens dropped (issue 30), on the tiny VLMs of every family.

- dropping off: every answer token for token what plain generate() gives on the whole conversation (today's);
- dropping on, nothing evicted: every answer token for token what plain transformers give when the same sparse
  sequence (inputs_embeds + explicit position_ids) is fed whole, for every policy;
- dropping on, with eviction, the host store, recall and batched decoding: answers together equal answers
  alone, recalled tokens come back at their whole-clip positions;
- clip metrics, key frames, a reconnect (whole=True), reset(), and evidence citing the kept frames' times.
"""

import dataclasses

import numpy as np
import pytest
import torch
from transformers import DynamicCache

from cache.config import CacheConfig
from cache.forward_args import with_cache
from model.answer_together import AnsweringTogether
from model.change import ChangeConfig, ChangeTracker
from model.evidence import recalled
from model.session import SessionConfig, StreamingSession
from tests.support.model_fixtures import smooth_frame
from tests.support.policy_behaviours import BEHAVIOURS
from tests.support.session_helpers import generate_answer, loaded

MAX_NEW = 8
FAMILIES = ["tiny-qwen2-vl", "tiny-qwen2.5-vl", "tiny-qwen3.5", "tiny-smolvlm2"]  # tiny-qwen3.5: the hybrid
ON = ChangeConfig(keyframe_every=4, floor=0.1)
OFF = ChangeConfig(drop_unchanged=False)
TIMING = {"ttft_s", "decode_tokens_per_s", "process_rss_bytes", "recall_ms", "evict_ms", "device_mem_bytes"}


def camera_clip(index: int, frames: int = 4) -> np.ndarray:
    """A fixed camera: the same scene, and from clip 2 on a block that moves a step every clip (and appears
    in the second half of clip 2 only)."""
    scene = smooth_frame(240, 320, seed=7)
    clip = np.repeat(scene[None], frames, axis=0).copy()
    if index >= 2:
        x = 40 * (index - 2) % 240
        clip[frames // 2 if index == 2 else 0 :, 60:140, x : x + 80] = (240, 30, 200)
    return clip


PLAN = [("clip", 0), ("clip", 1), ("clip", 2), ("ask", "What is on screen?"), ("clip", 3), ("clip", 4)]
PLAN += [("ask", "And before that?"), ("clip", 5), ("ask", "Say more.")]


def session(family: str, policy: str, change: ChangeConfig, budget: int = 8192, **cache) -> StreamingSession:
    config = CacheConfig(policy=policy, budget=budget, window=8, **cache)
    return StreamingSession(loaded(family), config, SessionConfig(max_new_tokens=MAX_NEW, chunk_size=16, change=change))


def sparse_segments(adapter, change: ChangeConfig, clips: list[tuple[np.ndarray, float, float]]):
    """The clips as the change tracker lets them in (independent of the session under test)."""
    tracker = ChangeTracker(change)
    out = []
    for frames, t0, t1 in clips:
        seg = adapter.clip_segment(frames, t0, t1)
        sel = tracker.select(seg.view, adapter.change_layout(), keyframe=tracker.keyframe_due())
        out.append(seg if sel.keep.all() else adapter.sparse_clip(seg, sel.keep))
    return out


@torch.inference_mode()
def plain_forward(reference, segments) -> tuple[torch.Tensor, DynamicCache, int]:
    """Plain transformers (DynamicCache, sdpa): the whole sequence's embeddings with explicit positions in one
    forward. Returns (the last position's logits, the cache, the next text position)."""
    adapter, model = reference.adapter, reference.model
    embeds, positions, start = [], [], 0
    for seg in segments:
        embeds.append(adapter.segment_embeddings(model, seg))
        pos, start = adapter.segment_position_ids(seg, start)
        positions.append(pos)
    cache = DynamicCache(config=model.config)
    logits = model(
        inputs_embeds=torch.cat(embeds, dim=1), position_ids=torch.cat(positions, dim=-1), **with_cache(model, cache)
    ).logits[:, -1]
    return logits, cache, start


@torch.inference_mode()
def plain_answer(reference, segments, max_new: int) -> list[int]:
    """`plain_forward`, then greedy decoding as the session does it (placeholders suppressed, stopped at end of
    turn)."""
    adapter, model = reference.adapter, reference.model
    logits, cache, start = plain_forward(reference, segments)
    suppressed, stops, ids = adapter.suppressed_token_ids(), set(adapter.eos_token_ids()), []
    while len(ids) < max_new:
        logits[:, suppressed] = float("-inf")
        token = int(logits.argmax(-1))
        if token in stops:
            break
        ids.append(token)
        logits = model(
            input_ids=torch.tensor([[token]]), position_ids=adapter.text_position_ids(start), **with_cache(model, cache)
        ).logits[:, -1]
        start += 1
    return ids


@pytest.mark.parametrize("policy", BEHAVIOURS)
@pytest.mark.parametrize("family", ["tiny-qwen2-vl", "tiny-qwen3.5", "tiny-smolvlm2"])
def test_dropping_off_answers_exactly_as_today(family, policy):
    reference = loaded(family, attention="sdpa")
    adapter = reference.adapter
    ours = session(family, policy, OFF)
    conversation = [adapter.conversation_prefix()]
    for kind, arg in PLAN:
        if kind == "clip":
            metrics = ours.ingest_clip(camera_clip(arg), 4.0 * arg, 4.0 * arg + 4)
            assert metrics.visual_tokens_kept == metrics.visual_tokens and metrics.keyframe
            conversation.append(adapter.clip_segment(camera_clip(arg), 4.0 * arg, 4.0 * arg + 4))
            continue
        conversation.append(adapter.question_segment(arg))
        expected = generate_answer(reference, conversation, MAX_NEW)
        "".join(ours.ask(arg))
        assert ours.last_answer_ids == expected
        conversation.append(adapter.answer_segment(torch.tensor([expected])))
    assert ours.cache.get_seq_length() == sum(s.num_tokens for s in conversation)


@pytest.mark.parametrize("policy", BEHAVIOURS)
@pytest.mark.parametrize("family", FAMILIES)
def test_sparse_clips_answer_as_plain_transformers_fed_the_same_sparse_sequence(family, policy):
    reference = loaded(family, attention="sdpa")
    adapter = reference.adapter
    ours = session(family, policy, ON)
    clips = [(camera_clip(i), 4.0 * i, 4.0 * i + 4) for kind, i in PLAN if kind == "clip"]
    sparse = iter(sparse_segments(adapter, ON, clips))
    conversation, kept = [adapter.conversation_prefix()], []
    for kind, arg in PLAN:
        if kind == "clip":
            metrics = ours.ingest_clip(*clips[arg])
            seg = next(sparse)
            assert metrics.visual_tokens_kept == seg.num_visual_tokens
            assert metrics.prefill_tokens == seg.num_tokens
            kept.append(metrics.visual_tokens_kept / metrics.visual_tokens)
            conversation.append(seg)
            continue
        conversation.append(adapter.question_segment(arg))
        expected = plain_answer(reference, conversation, MAX_NEW)
        "".join(ours.ask(arg))
        assert ours.last_answer_ids == expected
        conversation.append(adapter.answer_segment(torch.tensor([expected])))
    assert kept[0] == 1 and kept[1] == 0 and any(0 < k < 1 for k in kept)  # whole, empty and sparse clips
    assert ours.cache.evictions == 0
    assert ours.cache.get_seq_length() == sum(s.num_tokens for s in conversation)


def _state(s: StreamingSession) -> list:
    cache = s.cache
    return [cache.next_position, cache.tokens_seen, cache.evictions, cache.get_seq_length()] + [
        (layer.token_index.tolist(), layer.positions.tolist()) for layer in cache.kv_layers
    ]


def _linear_states(s: StreamingSession) -> list[torch.Tensor]:
    """The hybrid's linear-attention states, conv and recurrent per layer (none on the other families)."""
    return [t for _, conv, rec in s.cache.save_states() for t in (*conv.values(), *rec.values())]


@pytest.mark.parametrize("family", ["tiny-qwen2-vl", "tiny-qwen3.5", "tiny-smolvlm2"])
def test_sparse_clips_through_eviction_store_recall_and_batched_decoding(family):
    def make():
        sessions = []
        for offset in (0, 3):
            s = session(family, "inf-mllm", ON, budget=160, recall=256, block=16, store_bytes=2**24)
            for i in range(10):
                s.ingest_clip(camera_clip(i + offset), 4.0 * i, 4.0 * i + 4)
            sessions.append(s)
        return sessions

    alone = make()
    expected = []
    for question in ("What happened at the start?", "And then?"):
        texts = ["".join(s.ask(question)) for s in alone]
        expected.append([(t, s.last_answer_ids, _metrics(s)) for t, s in zip(texts, alone, strict=True)])
    together = make()
    group = AnsweringTogether(together)
    got = []
    for question in ("What happened at the start?", "And then?"):
        texts = [""] * len(together)
        for row, piece in group.answer([question] * len(together)):
            texts[row] += piece
        got.append([(t, s.last_answer_ids, _metrics(s)) for t, s in zip(texts, together, strict=True)])
    assert got == expected
    assert [_state(s) for s in together] == [_state(s) for s in alone]
    for ours, theirs in zip(together, alone, strict=True):  # batched products may round otherwise than one row's
        for got, want in zip(_linear_states(ours), _linear_states(theirs), strict=True):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert all(s.cache.evictions > 0 for s in alone)
    assert any(s.last_answer.recalled_tokens > 0 for s in alone) or any(m[2]["recalled_tokens"] for m in expected[0])


def _metrics(s: StreamingSession) -> dict:
    return {k: v for k, v in dataclasses.asdict(s.last_answer).items() if k not in TIMING}


@pytest.mark.parametrize("family", ["tiny-qwen2-vl", "tiny-qwen3.5", "tiny-smolvlm2"])
def test_recalled_tokens_of_sparse_clips_come_back_at_their_whole_clip_positions(family):
    ours = session(family, "window", ON, budget=120, recall=256, block=8, store_bytes=2**24, positions="original")
    adapter = ours.adapter
    origin_of = {}  # token rank -> position it has in the whole sparse sequence
    for i in range(8):
        frames = camera_clip(i)
        first, start = ours.cache.tokens_seen, ours.cache.next_position
        if i == 0:
            prefix = adapter.conversation_prefix().num_tokens
            first, start = first + prefix, start + prefix
        ours.ingest_clip(frames, 4.0 * i, 4.0 * i + 4)
        seg = sparse_segments(adapter, ON, [(camera_clip(j), 4.0 * j, 4.0 * j + 4) for j in range(i + 1)])[-1]
        pos, _ = adapter.segment_position_ids(seg, start)
        for k, column in enumerate(pos.reshape(pos.shape[0], -1).T.tolist()):
            origin_of[first + k] = column
    pieces = ours.ask("What happened at the start?")
    next(pieces)
    layer = ours.cache.kv_layers[0]  # the hybrid: its first attention layer
    pinned = ours.cache.pinned
    assert pinned is not None and pinned.numel() > 0
    index, origin = layer.token_index[0, 0], layer.origin[0, 0]
    checked = 0
    for rank, column in zip(index.tolist(), origin.tolist(), strict=True):
        if rank in origin_of:
            assert column == origin_of[rank], rank
            checked += 1
    assert checked > 0 and torch.isin(pinned, torch.tensor(sorted(origin_of))).any()
    list(pieces)


@pytest.mark.parametrize("family", ["tiny-qwen2-vl", "tiny-smolvlm2"])
def test_clip_metrics_key_frames_reconnects_and_reset(family):
    ours = session(family, "inf-mllm", ChangeConfig(keyframe_every=3, floor=0.0))
    still = camera_clip(0)
    m = [ours.ingest_clip(still, 4.0 * i, 4.0 * i + 4) for i in range(4)]
    assert [x.keyframe for x in m] == [True, False, False, True]
    assert m[0].visual_tokens_kept == m[0].visual_tokens > 0
    assert m[1].visual_tokens_kept == m[1].visual_tokens_changed == 0 and m[1].visual_tokens == m[0].visual_tokens
    assert m[1].prefill_tokens < m[0].prefill_tokens
    again = ours.ingest_clip(still, 16.0, 20.0, whole=True)  # the capture reconnected
    assert again.keyframe and again.visual_tokens_kept == again.visual_tokens
    assert ours.ingest_clip(still, 20.0, 24.0).visual_tokens_kept == 0
    ours.reset()
    assert ours.ingest_clip(still, 0.0, 4.0).keyframe


@pytest.mark.parametrize("family", ["tiny-qwen2-vl", "tiny-smolvlm2"])
def test_evidence_cites_the_times_of_the_frames_whose_tokens_were_kept(family):
    ours = session(family, "inf-mllm", ChangeConfig(keyframe_every=100, floor=0.0))
    ours.ingest_clip(camera_clip(0), 0.0, 4.0)
    first = ours.cache.tokens_seen
    m = ours.ingest_clip(camera_clip(2), 4.0, 8.0)  # the block appears in frames 2 and 3 (of 4, one per second)
    spans = {(e.start, e.end) for e in recalled(ours.clip_index, [(first, ours.cache.tokens_seen)])}
    assert 0 < m.visual_tokens_kept < m.visual_tokens
    # Qwen: the temporal patch of frames 2-3; SmolVLM2: frame 2 (frame 3 equals it, the reference by then)
    assert spans == ({(6.0, 8.0)} if "qwen" in family else {(6.0, 7.0)})
    first = ours.cache.tokens_seen
    nothing = ours.ingest_clip(camera_clip(0), 8.0, 12.0)  # back as the reference was before the block: a change
    assert nothing.visual_tokens_kept > 0
    first = ours.cache.tokens_seen
    assert ours.ingest_clip(camera_clip(0), 12.0, 16.0).visual_tokens_kept == 0
    assert recalled(ours.clip_index, [(first, ours.cache.tokens_seen)]) == []  # no frame kept: nothing to cite
