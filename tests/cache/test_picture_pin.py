"""The pinned current picture (cache/policies/picture.py) on synthetic tokens: the newest version of every region
survives any number of evictions under every evicting policy, bit for bit; a region's older version is ordinary
history (evicted, in the host store); recall never drops the picture to make room; a picture that cannot fit is
refused with the numbers; pinning off is selection exactly as before."""

import numpy as np
import pytest
import torch

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.policies import POLICIES, PictureOverflow, newest_of_each_region, settings_for
from cache.rope import KeyRotator
from cache.store.recall import merge_blocks
from tests.support.synthetic_cache import HEAD_DIM, KV_HEADS, LAYERS
from tests.support.tiny_text_models import llama_config

BUDGET, WINDOW, REGIONS, TEXT, ROUNDS = 24, 4, 6, 3, 40
EVICTING = [name for name, cls in POLICIES.items() if cls.evicts]


def make_cache(**config) -> BoundedCache:
    config = {"policy": "window", "budget": BUDGET, "window": WINDOW, "positions": "original", **config}
    if config["policy"] == "streaming-llm":
        config["policy_settings"] = settings_for("streaming-llm", sinks=2)
    inv_freq = 1.0 / 10000 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM)
    return BoundedCache(llama_config(layers=LAYERS, kv_heads=KV_HEADS), CacheConfig(**config), KeyRotator(inv_freq))


class Feeder:
    """Adds tokens with random keys and values to a cache and remembers what each token was fed."""

    def __init__(self, cache: BoundedCache, seed: int = 0) -> None:
        self.cache = cache
        self.generator = torch.Generator().manual_seed(seed)
        self.fed: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}  # token -> per layer (keys, values) [H, D]
        self.newest: dict[int, int] = {}  # region -> token of its newest version
        self.superseded: set[int] = set()  # tokens of a region's older versions
        self.frames = 0

    def add(self, count: int, regions: list[int] | None = None) -> None:
        """`count` text tokens, or (regions given) one frame holding those regions."""
        cache, first = self.cache, self.cache.tokens_seen
        visual = None
        if regions is not None:
            count = len(regions)
            visual = torch.tensor([[self.frames, r] for r in regions], dtype=torch.long)
            for i, r in enumerate(regions):
                if r in self.newest:
                    self.superseded.add(self.newest[r])
                self.newest[r] = first + i
            self.frames += 1
        cache.stage_positions(torch.arange(cache.next_position, cache.next_position + count)[None], visual=visual)
        for layer_idx, layer in enumerate(cache.layers):
            keys = torch.randn(1, KV_HEADS, count, HEAD_DIM, generator=self.generator)
            values = torch.randn(1, KV_HEADS, count, HEAD_DIM, generator=self.generator)
            cache.update(keys, values, layer_idx)
            # what a recording would leave: attention that differs per layer and head
            layer.attention = torch.rand(layer.attention.shape, generator=self.generator)
            for i in range(count):
                self.fed.setdefault(first + i, []).append((keys[0, :, i], values[0, :, i]))

    def check_picture(self) -> None:
        """Every region's newest version is in every layer and head, with the keys and values it was fed."""
        for layer_idx, layer in enumerate(self.cache.layers):
            for head in range(KV_HEADS):
                held = layer.token_index[0, head].tolist()
                for region, token in self.newest.items():
                    assert token in held, f"region {region}'s newest token {token} left layer {layer_idx} head {head}"
                    at = held.index(token)
                    keys, values = self.fed[token][layer_idx]
                    assert torch.equal(layer.keys[0, head, at], keys[head])
                    assert torch.equal(layer.values[0, head, at], values[head])


def changed_regions(rng: np.random.Generator) -> list[int]:
    """A fixed camera's sparse frame: none, one or two regions changed."""
    return sorted(rng.choice(REGIONS, size=int(rng.integers(0, 3)), replace=False).tolist())


def test_the_newest_version_of_each_region_is_the_picture():
    #                  text  f0 r0..r2     f1 r1      text f2 r0 (two tokens)  f3 r3 (a frame of another grid)
    frame = torch.tensor([-1, 0, 0, 0, 1, -1, 2, 2, 3])
    region = torch.tensor([-1, 0, 1, 2, 1, -1, 0, 0, 3])
    picture = newest_of_each_region(frame, region)
    assert picture.tolist() == [False, False, False, True, True, False, True, True, True]
    assert newest_of_each_region(frame, region, since=2).tolist() == [False] * 6 + [True] * 3
    per_head = torch.stack([frame, frame.flip(0)])[None], torch.stack([region, region.flip(0)])[None]  # [1, 2, n]
    assert newest_of_each_region(*per_head)[0, 1].tolist() == picture.flip(0).tolist()  # each head on its own
    text = torch.full((1, 2, 5), -1)
    assert not newest_of_each_region(text, text).any()


@pytest.mark.parametrize("rerotate", [False, True])
@pytest.mark.parametrize("policy", EVICTING)
def test_every_regions_newest_version_survives_every_eviction(policy, rerotate):
    cache = make_cache(policy=policy, positions="rerotate" if rerotate else "original")
    feeder, rng = Feeder(cache), np.random.default_rng(1)
    feeder.add(0, regions=list(range(REGIONS)))  # a key frame
    for _ in range(ROUNDS):
        feeder.add(TEXT)
        if regions := changed_regions(rng):
            feeder.add(0, regions=regions)
        cache.evict(BUDGET)
        assert all(layer.keys.shape[2] == min(cache.tokens_seen, BUDGET) for layer in cache.layers)
        if not rerotate:  # re-rotation moves keys (values stay): the bit-for-bit check needs original positions
            feeder.check_picture()
        else:
            for layer in cache.layers:
                assert torch.isin(torch.tensor(list(feeder.newest.values())), layer.token_index[0]).all()
    assert cache.evictions >= ROUNDS // 2
    held = {int(t) for layer in cache.layers for t in layer.token_index.flatten()}
    assert len(feeder.superseded - held) > len(feeder.superseded) // 2  # older versions are history: mostly evicted


def test_without_pinning_the_same_stream_loses_the_picture():
    cache = make_cache(pin_picture=False)
    feeder = Feeder(cache)
    feeder.add(0, regions=list(range(REGIONS)))
    for _ in range(ROUNDS // 4):
        feeder.add(TEXT)
        cache.evict(BUDGET)
    with pytest.raises(AssertionError, match="newest token"):
        feeder.check_picture()


def test_a_changed_regions_old_version_is_evicted_and_in_the_host_store():
    cache = make_cache(recall=16, block=4, store_bytes=2**20)
    feeder = Feeder(cache)
    feeder.add(0, regions=list(range(REGIONS)))
    old = feeder.newest[2]
    feeder.add(TEXT)
    feeder.add(0, regions=[2])  # region 2 changed
    new = feeder.newest[2]
    for _ in range(10):
        feeder.add(TEXT)
        cache.evict(BUDGET)
    for layer in cache.layers:
        held = layer.token_index[0]
        assert not torch.isin(torch.tensor([old]), held).any() and torch.isin(torch.tensor([new]), held).all()
    assert any(block.first <= old < block.first + block.tokens for block in cache.store.blocks)
    feeder.check_picture()


def test_recall_never_drops_the_picture_to_make_room():
    """Heads that hold different tokens: recalling a block one head already holds in part makes the other heads
    drop their least attended resident token. It is never one of the picture's."""
    cache = make_cache(budget=64, recall=8, block=4, store_bytes=2**20)
    feeder = Feeder(cache)
    feeder.add(4)  # tokens 0-3: text (block 0)
    feeder.add(0, regions=list(range(REGIONS)))  # tokens 4-9: the picture
    feeder.add(6)  # tokens 10-15
    cache.evict(64)  # archives every token; evicts nothing
    for layer in cache.layers:  # head 0 lost token 1, head 1 token 12 (each head 15 tokens)
        index = torch.tensor([[t for t in range(16) if t != 1], [t for t in range(16) if t != 12]])
        layer.keep(index[None])
        least = torch.zeros(layer.attention.shape, dtype=torch.bool).index_fill(2, torch.tensor([4]), True)
        least[:, 1] = False  # head 0's least attended: its 5th token, 5, the picture's region 1
        layer.attention = torch.where(least, 0.0, 1.0)
    block = next(b for b in cache.store.blocks if b.first == 0)
    assert merge_blocks(cache, [block]) == 4
    feeder.check_picture()
    for layer in cache.layers:
        assert torch.isin(torch.arange(4), layer.token_index[0]).all()  # the block is back in every head


def test_a_picture_larger_than_the_budget_allows_is_refused_with_the_numbers():
    cache = make_cache(budget=12)
    feeder = Feeder(cache)
    feeder.add(0, regions=list(range(10)))
    feeder.add(TEXT)
    with pytest.raises(PictureOverflow, match=r"picture \(10 tokens\).*\(the retrieval window.*: 3\).*keeps 12"):
        cache.evict(12)
    unpinned = make_cache(budget=12, pin_picture=False)
    other = Feeder(unpinned)
    other.add(0, regions=list(range(10)))
    other.add(TEXT)
    unpinned.evict(12)  # without pinning the policy chooses everything, as before
    assert unpinned.get_seq_length() == 12


def test_a_new_frame_grid_leaves_the_old_grids_regions_to_the_policy():
    cache = make_cache()
    feeder = Feeder(cache)
    feeder.add(0, regions=list(range(REGIONS)))  # frame 0: a grid of 6 regions
    cache.new_grid(feeder.frames)
    feeder.newest.clear()
    feeder.add(0, regions=list(range(4)))  # frame 1: a smaller grid of 4
    for _ in range(12):
        feeder.add(TEXT)
        cache.evict(BUDGET)
    feeder.check_picture()
    for layer in cache.layers:
        assert not torch.isin(torch.arange(REGIONS), layer.token_index[0]).any()  # frame 0's tokens are gone
    cache.reset()
    assert cache.picture_since == 0


def test_pin_picture_is_a_bool():
    with pytest.raises(ValueError, match="pin_picture .*--pin-picture.* true or false"):
        CacheConfig(pin_picture="yes")


def test_recalled_tokens_that_overflow_give_way_to_the_picture_and_the_window():
    """Closing an answer evicts to the budget while its recalled tokens are still pinned; where they do not all fit,
    some of them go (they are in the host store), never the picture or the window."""
    cache = make_cache(budget=16, recall=32, block=4, store_bytes=2**20)
    feeder = Feeder(cache)
    feeder.add(0, regions=list(range(REGIONS)))  # tokens 0-5
    feeder.add(20)  # tokens 6-25
    cache.pin(torch.arange(6, 20))  # 14 recalled tokens: with the picture and the window, 24 > 16
    cache.evict(16)
    feeder.check_picture()
    for layer in cache.layers:
        held = layer.token_index[0]
        assert torch.isin(torch.arange(22, 26), held).all(dim=-1).all()  # the window
        assert int(torch.isin(held, torch.arange(6, 20)).sum(dim=-1).min()) == 16 - REGIONS - WINDOW
