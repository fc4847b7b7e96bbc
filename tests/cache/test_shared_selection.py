"""`CacheConfig.selection="shared"`: an attention-scored policy keeps one set of tokens for every layer and KV head,
chosen by their mean score, through evictions, the pinned picture and recall; "per-head" (the default) lets each
choose on its own. On synthetic tokens with made-up attention, without a model."""

import numpy as np
import pytest
import torch

from cache.config import CacheConfig
from cache.policies import POLICIES, TokenView, select_keep
from cache.store.recall import merge_blocks
from tests.cache.test_picture_pin import BUDGET, REGIONS, TEXT, Feeder, changed_regions, make_cache
from tests.support.synthetic_cache import KV_HEADS, LAYERS, filled_cache, kept_indices

ATTENTION_SCORED = [name for name, cls in POLICIES.items() if cls.per_head]


def test_the_shared_set_is_the_top_of_the_mean_score_over_layers_and_heads():
    rng = np.random.default_rng(3)
    n, window, budget = 120, 8, 40
    scores = rng.dirichlet(np.ones(n), size=(LAYERS, KV_HEADS))  # each layer and head attends elsewhere
    cache = filled_cache(n, scores, policy="inf-mllm", budget=budget, window=window, bias=0.0, pool=1,
                         selection="shared")  # fmt: skip
    cache.evict(budget)
    kept = kept_indices(cache)
    mean = scores.mean(axis=(0, 1))[: n - window]
    expected = np.sort(np.concatenate([np.argsort(-mean, kind="stable")[: budget - window], np.arange(n - window, n)]))
    for layer in range(LAYERS):
        for head in range(KV_HEADS):
            np.testing.assert_array_equal(kept[layer, head], expected)


def test_per_head_selection_of_the_same_scores_differs_between_heads():
    # the contrast that makes the test above mean something: the default lets heads disagree
    rng = np.random.default_rng(3)
    scores = rng.dirichlet(np.ones(120), size=(LAYERS, KV_HEADS))
    cache = filled_cache(120, scores, policy="inf-mllm", budget=40, window=8, bias=0.0, pool=1)
    cache.evict(40)
    kept = kept_indices(cache)
    assert not np.array_equal(kept[0, 0], kept[0, 1]) and not np.array_equal(kept[0, 0], kept[1, 0])


@pytest.mark.parametrize("policy", ATTENTION_SCORED)
def test_every_layer_and_head_holds_the_same_tokens_through_evictions_and_recall(policy):
    cache = make_cache(policy=policy, selection="shared", recall=8, block=4, store_bytes=2**20)
    feeder, rng = Feeder(cache), np.random.default_rng(5)  # the feeder's attention differs per layer and head
    feeder.add(0, regions=list(range(REGIONS)))
    for round_ in range(30):
        feeder.add(TEXT)
        if regions := changed_regions(rng):
            feeder.add(0, regions=regions)
        cache.evict(BUDGET)
        if round_ == 15:  # an old block comes back for an answer, then competes again
            missing = [b for b in cache.store.blocks if not torch.isin(b.first, cache.layers[0].token_index).any()]
            assert merge_blocks(cache, missing[:1]) == 4
            cache.unpin()
        held = torch.stack([layer.token_index for layer in cache.layers])  # [L, 1, H, K]
        assert bool((held == held[:1, :, :1]).all()), f"layers or heads disagree after round {round_}"
        feeder.check_picture()
    assert cache.evictions >= 15


def test_a_shared_selection_of_tokens_that_differ_by_head_is_a_bug_and_says_so():
    position = torch.stack([torch.arange(10), torch.arange(10, 20)]).view(1, 1, 2, 10)
    none = torch.full_like(position, -1)
    attention = torch.rand(1, 1, 2, 10)
    view = TokenView(10, 6, 2, attention, position, position[..., None], none, none, position.device)
    policy = POLICIES["snapkv"]()
    assert select_keep(policy, view).shape == (1, 1, 2, 6)  # per head: fine
    with pytest.raises(RuntimeError, match="same tokens"):
        select_keep(policy, view, shared=True)


def test_an_unknown_selection_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="per-head, shared"):
        CacheConfig(selection="both")
