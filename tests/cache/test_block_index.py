"""The store's index keeps Quest's bound right through appends, regrowth, oldest-first drops and removals."""

import torch

from cache.store.block_index import BlockIndex


def brute_force_bound(queries, keys):
    """max over query rows, then over the block's keys, of an upper bound: sum_d max(q*min_d, q*max_d)."""
    low, high = keys.amin(dim=2), keys.amax(dim=2)  # [L, H, D]
    per_channel = torch.maximum(queries * low[:, :, None], queries * high[:, :, None])  # [L, H, K, D]
    return per_channel.sum(dim=-1).amax(dim=-1)  # [L, H]


def test_bounds_match_brute_force_and_bound_every_real_logit_after_drops_and_removals():
    gen = torch.Generator().manual_seed(0)
    index, blocks = BlockIndex(), []
    queries = torch.randn(2, 3, 5, 8, generator=gen)
    for step in range(150):  # past the first capacity (64) and a regrowth after drops
        keys = torch.randn(2, 3, 16, 8, generator=gen)
        index.append(keys.amin(dim=2), keys.amax(dim=2))
        blocks.append(keys)
        if step % 3 == 2:
            index.drop_oldest()
            blocks.pop(0)
    index.remove(7)
    blocks.pop(7)
    bounds = index.bounds(queries)
    assert bounds.shape == (len(blocks), 2, 3) == (len(index), 2, 3)
    for i, keys in enumerate(blocks):
        torch.testing.assert_close(bounds[i], brute_force_bound(queries, keys))
        real = torch.einsum("lhkd,lhnd->lhkn", queries, keys).amax(dim=(2, 3))
        assert (real <= bounds[i] + 1e-5).all()  # an upper bound of any key's logit
