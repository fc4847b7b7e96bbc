"""Policies score a view of the tokens (cache/policies/view.py): original positions and visual origin that stay
true across any number of evictions. The `strided` policy is the worked example: every k-th older token by
original position, the same sample after 40 evictions, where scoring the i-th cached token would not be."""

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.policies import POLICIES, StridedSettings, TokenView, select_keep
from cache.policies.base import check_choice, check_count, check_number
from cache.policies.strided import Strided
from cache.rope import KeyRotator
from model.change import ChangeConfig
from model.session import SessionConfig, StreamingSession
from tests.support.model_fixtures import random_frames, smooth_frame
from tests.support.session_helpers import loaded
from tests.support.synthetic_cache import HEAD_DIM, KV_HEADS, LAYERS
from tests.support.tiny_text_models import llama_config

BUDGET, WINDOW, STRIDE, CHUNK, ROUNDS = 24, 4, 5, 7, 40
ROOT = Path(__file__).resolve().parents[2]


def strided_expected(total: int, budget: int = BUDGET, window: int = WINDOW, stride: int = STRIDE) -> list[int]:
    """What `strided` keeps of a stream of `total` tokens, decided once over all of them: the window, then the
    older tokens on the stride (newest first), then the newest others, as many as the budget holds."""
    if total <= budget:
        return list(range(total))
    older = sorted(range(total - window), key=lambda p: (p % stride == 0, p), reverse=True)[: budget - window]
    return sorted(older) + list(range(total - window, total))


def view_of(position: torch.Tensor, target: int, window: int = WINDOW) -> TokenView:
    """A view of text tokens at these original positions ([n], in stream order), one layer, head and batch row."""
    n = position.numel()
    position = position.view(1, 1, 1, n)
    none = torch.full_like(position, -1)
    return TokenView(n, target, window, None, position, position[..., None], none, none, position.device)


class CacheIndexStrided(Strided):
    """What the old interface allowed: with no positions given, the i-th cached token stands in for its position."""

    def score(self, view: TokenView) -> torch.Tensor:
        index = torch.arange(view.n).expand_as(view.position)
        return super().score(dataclasses.replace(view, position=index))


def simulate(policy, rounds: int = ROUNDS) -> list[int]:
    """A stream of `rounds` chunks of CHUNK tokens, cut to BUDGET after each; the original positions left."""
    alive = torch.empty(0, dtype=torch.long)
    for r in range(rounds):
        alive = torch.cat([alive, torch.arange(r * CHUNK, (r + 1) * CHUNK)])
        if alive.numel() > BUDGET:
            alive = alive[select_keep(policy, view_of(alive, BUDGET))[0, 0, 0]]
    return alive.tolist()


def test_strided_keeps_the_same_sample_after_many_evictions_and_cache_indices_would_not():
    settings = StridedSettings(stride=STRIDE)
    kept = simulate(Strided(settings))
    assert kept == strided_expected(ROUNDS * CHUNK)
    older = kept[: BUDGET - WINDOW]
    assert all(p % STRIDE == 0 for p in older) and len(older) == BUDGET - WINDOW
    # the old interface: every eviction resamples the survivors by their new index, and the sample decays
    naive = simulate(CacheIndexStrided(settings))
    assert naive != kept
    assert sum(p % STRIDE == 0 for p in naive[: BUDGET - WINDOW]) < (BUDGET - WINDOW) // 2
    total = ROUNDS * CHUNK  # all but token 0 and one other are the newest: plain recency
    assert naive[-(BUDGET - 2) :] == list(range(total - (BUDGET - 2), total))


def _stream_cache(**config) -> BoundedCache:
    config = {"policy": "strided", "budget": BUDGET, "window": WINDOW, **config}
    inv_freq = 1.0 / 10000 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM)
    return BoundedCache(llama_config(layers=LAYERS, kv_heads=KV_HEADS), CacheConfig(**config), KeyRotator(inv_freq))


def _add(cache: BoundedCache, count: int, visual: torch.Tensor | None = None) -> None:
    cache.stage_positions(torch.arange(cache.next_position, cache.next_position + count)[None], visual=visual)
    for layer_idx in range(len(cache.layers)):
        cache.update(torch.randn(1, KV_HEADS, count, HEAD_DIM), torch.randn(1, KV_HEADS, count, HEAD_DIM), layer_idx)


def test_strided_through_the_cache_with_rerotation_keeps_every_kth_original_position():
    cache = _stream_cache(policy_settings=StridedSettings(stride=STRIDE))
    for r in range(ROUNDS):
        _add(cache, CHUNK)
        cache.evict(BUDGET)
        expected = strided_expected((r + 1) * CHUNK)
        for layer in cache.layers:  # re-rotation moved every key, the original positions stay
            assert layer.token_index[0].tolist() == [expected] * KV_HEADS
    assert cache.evictions >= 30
    assert cache.max_position() < BUDGET  # compacted: the stream never leaves the trained range


def _visual_ids(first: int, count: int, frame: int | None) -> torch.Tensor:
    """`count` tokens from stream position `first`: a frame of `count` regions, or text (frame None)."""
    if frame is None:
        return torch.full((count, 2), -1)
    return torch.stack([torch.full((count,), frame), torch.arange(count)], dim=1)


@pytest.mark.parametrize("recall", [0, 64])
def test_the_view_carries_each_tokens_frame_and_region_across_evictions(recall):
    cache = _stream_cache(recall=recall, policy="window" if recall == 0 else "strided")
    origin: dict[int, tuple[int, int]] = {}  # stream position -> (frame, region) of every visual token added
    for r in range(ROUNDS):
        first = cache.tokens_seen
        frame = r if r % 3 else None  # every third chunk is text
        ids = _visual_ids(first, CHUNK, frame)
        origin.update({first + i: (frame, i) for i in range(CHUNK) if frame is not None})
        _add(cache, CHUNK, ids)
        cache.evict(BUDGET)
        view = cache.token_view(BUDGET)
        for position, frame_id, region in zip(
            view.position.flatten().tolist(), view.frame.flatten().tolist(), view.region.flatten().tolist(), strict=True
        ):
            assert (frame_id, region) == origin.get(position, (-1, -1))
        assert view.older == view.n - WINDOW and view.recent.sum() == WINDOW
    cached = {int(p) for layer in cache.layers for p in layer.token_index.flatten()}
    if recall == 0:  # bounded: only the cached tokens keep their ids
        assert set(cache.visual_ids.position.tolist()) == cached & set(origin)
    else:  # the host store holds every token (it may be recalled): their ids stay with them
        assert len(cache.visual_ids) == len(origin)


def test_a_probe_taken_out_again_takes_its_ids_with_it():
    cache = _stream_cache()
    _add(cache, 6, _visual_ids(0, 6, frame=0))
    _add(cache, 3, _visual_ids(6, 3, frame=1))
    cache.drop_newest(3)
    assert cache.visual_ids.position.tolist() == list(range(6))
    _add(cache, 3)  # text now where the dropped frame was
    assert cache.token_view(9).frame[0, 0, 0].tolist() == [0] * 6 + [-1] * 3
    with pytest.raises(ValueError, match="expected \\[T, 2\\]"):
        cache.stage_positions(torch.arange(9, 12)[None], visual=torch.zeros(2, 2, dtype=torch.long))


def test_a_session_tells_the_cache_each_visual_tokens_frame_and_region():
    """Qwen2-VL's M-RoPE origin says where a visual token sits (time, row, column): the frame and region ids the
    model gave the cache agree with it, for whole clips and for clips with unchanged regions left out."""
    ours = StreamingSession(
        loaded("tiny-qwen2-vl"),
        CacheConfig(policy="full", budget=8192, window=8),
        SessionConfig(max_new_tokens=8, chunk_size=16, change=ChangeConfig(keyframe_every=4, floor=0.1)),
    )
    scene = smooth_frame(240, 320, seed=7)
    for i in range(4):
        clip = np.repeat(scene[None], 4, axis=0).copy()
        clip[:, 60:140, 40 * i : 40 * i + 80] = (240, 30, 200)  # a block moving along
        ours.ingest_clip(clip if i else random_frames(4, 240, 320), 4.0 * i, 4.0 * i + 4)
    segment = ours.adapter.clip_segment(random_frames(4, 240, 320), 0, 4)
    groups, rows, cols = segment.model_inputs["video_grid_thw"][0].tolist()
    cols //= ours.adapter.merge_size
    view = ours.cache.token_view(ours.cache.get_seq_length())
    visual = view.visual[0, 0, 0]
    frame, region = view.frame[0, 0, 0][visual], view.region[0, 0, 0][visual]
    t, h, w = view.origin[0, 0, 0][visual].unbind(-1)
    start = t - frame % groups  # where the clip's visual block starts (Qwen2-VL: one time step per temporal patch)
    assert region.equal((h - start) * cols + (w - start))
    assert frame.max() < ours.frames == 4 * groups and frame.diff().ge(0).all()  # numbered along the stream
    assert visual.sum() < 4 * segment.num_visual_tokens  # some regions were left out, and the ids still agree
    assert (view.region[0, 0, 0][~visual] == -1).all()


@pytest.mark.parametrize(
    "kwargs, message",
    [({"stride": 0}, "stride must be >= 1 token"), ({"stride": 2.5}, "stride must be >= 1"), ({"stride": True}, "")],
)
def test_bad_strided_settings_name_what_is_allowed(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StridedSettings(**kwargs)


def test_the_shared_checks_refuse_bools_nan_and_unknown_choices():
    with pytest.raises(ValueError, match="n must be >= 1, got True"):
        check_count("n", True, 1)
    with pytest.raises(ValueError, match="x must be >= 0 .0 = off., got nan"):
        check_number("x", float("nan"), 0, " (0 = off)")
    with pytest.raises(ValueError, match="unknown mode 'c'; allowed: a, b"):
        check_choice("mode", "c", ("a", "b"))
    check_count("n", 3, 1), check_number("x", 0, 0), check_choice("mode", "a", ("a", "b"))


def test_strided_is_registered_with_a_flag():
    assert POLICIES["strided"] is Strided and Strided.settings_class is StridedSettings
    stride = dataclasses.fields(StridedSettings)[0]
    assert stride.name == "stride" and stride.metadata["help"]
    assert StridedSettings(stride=3).describe() == "stride 3"


def _cache_imports(path: Path) -> set[str]:
    """The cache modules `path` imports, TYPE_CHECKING imports included (they make a circle for the reader)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cache"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if (ROOT / Path(*sub.split("."))).with_suffix(".py").exists() else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("cache"))
    return found


def test_no_import_circle_inside_the_cache_and_no_policy_reads_the_cache_config():
    modules = {}
    for path in (ROOT / "cache").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = _cache_imports(path)
    for name, imports in modules.items():
        if name.startswith("cache.policies"):
            assert not {i for i in imports if not i.startswith("cache.policies")}, f"{name} reaches outside policies"
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for nxt in sorted(modules.get(name, ())):
            assert state.get(nxt) != "open", f"import circle: {' -> '.join([*trail, name, nxt])}"
            if nxt not in state:
                visit(nxt, [*trail, name])
        state[name] = "done"

    for name in sorted(modules):
        if name not in state:
            visit(name, [])
