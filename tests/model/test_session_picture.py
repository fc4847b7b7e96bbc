"""The pinned current picture (issue 40) in a streaming session on tiny random VLMs, with sparse clips of a fixed
camera (unchanged regions never fed, key frames rare):

- nothing evicted: answers token for token those of plain transformers fed the same sparse sequence, and the
  picture's keys and values are those plain transformers computed;
- a long static stream under heavy eviction (an hour of stream time), for several policies, with recall, watch
  probes and answers: after every clip each region's newest version is in every layer and head, its values bit
  for bit as they entered, and the budget holds; a region that changed leaves its old version to the policy and
  the host store;
- answers together (one batched decode) equal answers alone and keep the picture;
- a budget the picture cannot fit in is refused when the session is built, with the numbers.
"""

import numpy as np
import pytest
import torch
from transformers import DynamicCache

from cache.config import CacheConfig
from cache.policies import StreamingLlmSettings
from model.answer_together import AnsweringTogether
from model.change import ChangeConfig, ChangeTracker
from model.session import SessionConfig, StreamingSession
from tests.model.test_session_drop import ON, PLAN, camera_clip, plain_answer, plain_forward
from tests.support.model_fixtures import smooth_frame
from tests.support.session_helpers import loaded

FAMILY = "tiny-qwen2-vl"
MAX_NEW = 8
RARE = ChangeConfig(keyframe_every=10**6, floor=0.0)  # key frames only at the start: the picture must survive
SCENE = smooth_frame(240, 320, seed=7)


def session(policy: str = "inf-mllm", budget: int = 72, change: ChangeConfig = RARE, **cache) -> StreamingSession:
    config = CacheConfig(policy=policy, budget=budget, window=8, pin_picture=True, **cache)
    return StreamingSession(loaded(FAMILY), config, SessionConfig(max_new_tokens=MAX_NEW, chunk_size=16, change=change))


def still_camera(index: int, moves: frozenset[int] = frozenset()) -> np.ndarray:
    """Two frames of a fixed camera; at clips in `moves` a block stands somewhere new (a few regions change)."""
    clip = np.repeat(SCENE[None], 2, axis=0).copy()
    if index in moves:
        x = 60 * (index % 4)
        clip[:, 20:100, x : x + 70] = (240, 30, 200)
    return clip


class Picture:
    """What the cache must hold, worked out beside the session: each region's newest version (an independent
    change tracker decides what each clip feeds) and the values each of those tokens entered with."""

    def __init__(self, ours: StreamingSession, change: ChangeConfig) -> None:
        self.ours, self.tracker, self.frames = ours, ChangeTracker(change), 0
        self.newest: dict[int, int] = {}  # region -> token rank of its newest version
        self.superseded: set[int] = set()
        self.values: dict[int, list[torch.Tensor]] = {}  # token rank -> [H_kv, D] per attention layer

    def ingest(self, frames: np.ndarray, t_start: float, t_end: float) -> None:
        adapter = self.ours.adapter
        segment = adapter.clip_segment(frames, t_start, t_end)
        selection = self.tracker.select(segment.view, adapter.change_layout(), keyframe=self.tracker.keyframe_due())
        if not selection.keep.all():
            segment = adapter.sparse_clip(segment, selection.keep)
        ids, self.frames = adapter.visual_ids(segment, self.frames)
        self.ours.ingest_clip(frames, t_start, t_end)
        first = self.ours.cache.tokens_seen - segment.num_tokens
        arrived = []
        for i in (ids[:, 0] >= 0).nonzero().squeeze(1).tolist():  # in stream order: a later frame's token wins
            region = int(ids[i, 1])
            if region in self.newest:
                self.superseded.add(self.newest.pop(region))
            self.newest[region] = first + i
            arrived.append(first + i)
        for token in arrived:
            if token in self.newest.values():
                self.values[token] = [
                    layer.values[0, :, self._at(layer, token)].clone() for layer in self.ours.cache.kv_layers
                ]

    @staticmethod
    def _at(layer, token: int) -> int:
        where = (layer.token_index[0, 0] == token).nonzero()
        assert where.numel() == 1, f"token {token} is not in the cache"
        return int(where)

    def check(self) -> None:
        """Each region's newest version in every layer and head, values as they entered; the budget holds."""
        cache = self.ours.cache
        expected = torch.tensor(sorted(self.newest.values()))
        for layer_idx, layer in enumerate(cache.kv_layers):
            assert layer.keys.shape[2] <= cache.config.budget
            for head in range(layer.token_index.shape[1]):
                held = layer.token_index[0, head]
                missing = expected[~torch.isin(expected, held)].tolist()
                assert not missing, f"newest versions {missing} left layer {layer_idx} head {head}"
                for token in expected.tolist():
                    at = int((held == token).nonzero())
                    assert torch.equal(layer.values[0, head, at], self.values[token][layer_idx][head])


def reference_cache(reference, segments) -> DynamicCache:
    """Plain transformers' cache after one forward over the whole sparse sequence (explicit positions)."""
    return plain_forward(reference, segments)[1]


@pytest.mark.parametrize("policy", ["inf-mllm", "h2o", "window"])
def test_nothing_evicted_answers_and_the_pictures_kv_equal_plain_transformers(policy):
    reference = loaded(FAMILY, attention="sdpa")
    adapter = reference.adapter
    ours = session(policy, budget=8192, change=ON)
    picture = Picture(ours, ON)
    conversation = [adapter.conversation_prefix()]
    helper = ChangeTracker(ON)  # the sparse segments again, for plain transformers
    for kind, arg in PLAN:
        if kind == "clip":
            frames = camera_clip(arg)
            seg = adapter.clip_segment(frames, 4.0 * arg, 4.0 * arg + 4)
            sel = helper.select(seg.view, adapter.change_layout(), keyframe=helper.keyframe_due())
            conversation.append(seg if sel.keep.all() else adapter.sparse_clip(seg, sel.keep))
            picture.ingest(frames, 4.0 * arg, 4.0 * arg + 4)
            picture.check()
            continue
        if arg == PLAN[3][1]:  # before the first question: every cached token against plain transformers'
            plain = reference_cache(reference, conversation)
            tokens = torch.tensor(sorted(picture.newest.values()))
            for layer, theirs in zip(ours.cache.kv_layers, plain.layers, strict=True):
                assert layer.token_index[0, 0].equal(torch.arange(theirs.keys.shape[2]))  # nothing evicted
                torch.testing.assert_close(layer.keys[:, :, tokens], theirs.keys[:, :, tokens], atol=1e-5, rtol=1e-5)
                torch.testing.assert_close(
                    layer.values[:, :, tokens], theirs.values[:, :, tokens], atol=1e-5, rtol=1e-5
                )
        conversation.append(adapter.question_segment(arg))
        expected = plain_answer(reference, conversation, MAX_NEW)
        "".join(ours.ask(arg))
        assert ours.last_answer_ids == expected
        conversation.append(adapter.answer_segment(torch.tensor([expected])))
        picture.check()
    assert ours.cache.evictions == 0 and picture.superseded  # regions changed, nothing had to go
    assert ours.cache.get_seq_length() == sum(s.num_tokens for s in conversation)


def test_an_hour_of_static_stream_keeps_every_regions_newest_version():
    """An hour of stream time in 90 clips of 40 s (two frames each: cheap), one key frame at the start, a block
    standing somewhere new now and then; a watch probe and a question every 30 clips. The budget (72) holds the
    picture (12 tokens here) and about two clips' text."""
    ours = session()
    picture = Picture(ours, RARE)
    moves = frozenset({15, 16, 45, 75})
    for i in range(90):
        picture.ingest(still_camera(i, moves), 40.0 * i, 40.0 * i + 40)
        picture.check()
        if i % 30 == 29:
            before = [layer.token_index.clone() for layer in ours.cache.kv_layers]
            ours.check("Is a person in view?")  # a probe: the cache is left as it was
            assert all(layer.token_index.equal(b) for layer, b in zip(ours.cache.kv_layers, before, strict=True))
            "".join(ours.ask("What is on screen now?"))
            picture.check()
    assert ours.cache.evictions >= 90 and len(picture.newest) == 12 and picture.superseded
    assert ours.cache.tokens_seen > 10 * ours.cache.config.budget


@pytest.mark.parametrize("policy", ["inf-mllm", "h2o", "streaming-llm", "window", "strided", "snapkv"])
def test_changed_regions_leave_their_old_version_to_the_policy_and_the_store(policy):
    ours = session(policy, recall=32, block=8, store_bytes=2**22)
    picture = Picture(ours, RARE)
    moves = frozenset({3, 4, 8})
    for i in range(24):
        picture.ingest(still_camera(i, moves), 20.0 * i, 20.0 * i + 20)
        picture.check()
        if i in (10, 20):
            "".join(ours.ask("What changed?"))  # recall may bring old versions back for the answer
            picture.check()
    held = {int(t) for layer in ours.cache.kv_layers for t in layer.token_index.flatten()}
    gone = picture.superseded - held
    assert gone, "no old version of a changed region was evicted"
    stored = ours.cache.store.blocks
    assert all(any(b.first <= t < b.first + b.tokens for b in stored) for t in gone)  # in the host store


def test_answers_together_equal_answers_alone_and_keep_the_picture():
    def make() -> list[tuple[StreamingSession, Picture]]:
        pairs = []
        for moves in (frozenset({2}), frozenset({5, 6})):
            ours = session("inf-mllm", recall=32, block=8, store_bytes=2**22)
            picture = Picture(ours, RARE)
            for i in range(12):
                picture.ingest(still_camera(i, moves), 20.0 * i, 20.0 * i + 20)
            pairs.append((ours, picture))
        return pairs

    alone = make()
    expected = []
    for ours, picture in alone:
        expected.append(("".join(ours.ask("What is on screen?")), ours.last_answer_ids))
        picture.check()
    together = make()
    texts = ["", ""]
    for row, piece in AnsweringTogether([s for s, _ in together]).answer(["What is on screen?"] * 2):
        texts[row] += piece
    assert [(t, s.last_answer_ids) for t, (s, _) in zip(texts, together, strict=True)] == expected
    for (ours, picture), (mine, _) in zip(together, alone, strict=True):
        picture.check()
        assert [layer.token_index.tolist() for layer in ours.cache.kv_layers] == [
            layer.token_index.tolist() for layer in mine.cache.kv_layers
        ]


def test_a_budget_too_small_for_the_picture_is_refused_when_the_session_is_built():
    picture = loaded(FAMILY).adapter.picture_tokens()  # the tiny model's largest frame: 4 x 4 regions
    assert picture == 16
    with pytest.raises(
        ValueError, match=r"budget \(32\) must exceed the current picture \(16 tokens.*--no-pin-picture"
    ):
        session(budget=32)  # 16 + 8 (the answer's headroom) + 8 (the window): nothing left for the policy
    assert session(budget=33).cache.config.pin_picture
    unpinned = CacheConfig(budget=32, window=8, pin_picture=False)
    StreamingSession(loaded(FAMILY), unpinned, SessionConfig(max_new_tokens=MAX_NEW))
    sinks = CacheConfig(policy="streaming-llm", budget=44, window=8, policy_settings=StreamingLlmSettings(sinks=12))
    with pytest.raises(ValueError, match=r"leave 20 tokens of the budget \(44\).*sinks \+ window \(12 \+ 8\)"):
        StreamingSession(loaded(FAMILY), sinks, SessionConfig(max_new_tokens=MAX_NEW))


def test_without_pinning_a_static_stream_loses_its_picture():
    config = CacheConfig(policy="window", budget=72, window=8, pin_picture=False)
    ours = StreamingSession(loaded(FAMILY), config, SessionConfig(max_new_tokens=MAX_NEW, chunk_size=16, change=RARE))
    picture = Picture(ours, RARE)
    picture.ingest(still_camera(0), 0.0, 20.0)
    with pytest.raises(AssertionError, match="left layer"):
        for i in range(1, 8):
            picture.ingest(still_camera(i), 20.0 * i, 20.0 * i + 20)
            picture.check()


def test_another_frame_size_starts_a_new_picture():
    ours = session()
    ours.ingest_clip(still_camera(0), 0.0, 4.0)
    ours.ingest_clip(still_camera(1), 4.0, 8.0)
    assert ours.cache.picture_since == 0
    frames_before = ours.frames
    portrait = np.ascontiguousarray(np.repeat(SCENE.transpose(1, 0, 2)[None], 2, axis=0))  # 320 x 240: another grid
    ours.ingest_clip(portrait, 8.0, 12.0)
    assert ours.cache.picture_since == frames_before
    view = ours.cache.token_view(ours.cache.get_seq_length())
    pinned = ours.cache.picture_of(view.frame, view.region)[0, 0, 0]
    assert (view.frame[0, 0, 0][pinned] >= frames_before).all() and pinned.any()
    ours.reset()
    assert ours.cache.picture_since == 0 and ours.grid is None
