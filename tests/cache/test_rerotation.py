"""After eviction, continuing on the cache must equal a fresh run on the kept tokens.

With one decoder layer a cached key/value depends only on its own token and position, so the kept cache
after eviction is exactly what a fresh run on the kept tokens would build: at compact positions 0..K-1
in "rerotate" mode, at their original positions in "original" mode. (With more layers the kept tokens'
states also carry what they saw of evicted tokens, so no fresh run can match.) One KV head makes
per-head policies choose one token set, which a fresh run can reproduce.
"""

import pytest
import torch
from transformers import DynamicCache

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.forward_args import with_cache
from cache.policies import settings_for
from cache.runner import CachedRunner
from tests.support.tiny_text_models import ARCHITECTURES, VOCAB, build_pair


def _kept_original_indices(reference, cache: BoundedCache, prompt: torch.Tensor) -> torch.Tensor:
    """Which prompt tokens the cache still holds. With one layer a value depends only on its token, and the
    prompt's tokens are distinct, so each cached value identifies its token."""
    with torch.inference_mode():
        ref_cache = DynamicCache(config=reference.config)
        reference(input_ids=prompt, **with_cache(reference, ref_cache))
    all_values = ref_cache.layers[0].values[0, 0]  # [T, D]
    kept_values = cache.layers[0].values[0, 0]  # [K, D]
    return torch.cdist(kept_values, all_values).argmin(dim=1)


def _positions(values: torch.Tensor, dims: int) -> torch.Tensor:
    pos = values[None]
    return pos if dims == 1 else pos[None].expand(dims, 1, -1)


@pytest.mark.parametrize("mode", ["rerotate", "original"])
@pytest.mark.parametrize("policy", ["streaming-llm", "inf-mllm", "h2o"])
@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_continuation_equals_fresh_run_on_kept_tokens(arch, policy, mode):
    reference, bounded, dims = build_pair(arch, layers=1, kv_heads=1)
    settings = settings_for(policy, sinks=2, bias=1e-3)  # each policy takes what applies to it
    prompt = (torch.randperm(VOCAB - 3)[:70] + 3)[None]  # distinct tokens
    follow_up = torch.randint(3, VOCAB, (1, 7))

    cache = BoundedCache.for_model(
        bounded, CacheConfig(policy=policy, positions=mode, budget=40, window=8, policy_settings=settings)
    )
    runner = CachedRunner(bounded, cache, position_dims=dims, chunk_size=16)
    runner.prefill(input_ids=prompt, evict_to=30)
    kept = _kept_original_indices(reference, cache, prompt)
    assert cache.get_seq_length() == 30 and kept.unique().numel() == 30
    got = [runner.prefill(input_ids=follow_up)]
    got += [runner.decode_step(t) for t in (4, 5, 6)]

    fresh_ids = torch.cat([prompt[:, kept], follow_up, torch.tensor([[4, 5, 6]])], dim=1)
    if mode == "rerotate":
        fresh_pos = torch.arange(fresh_ids.shape[1])
    else:
        tail = torch.arange(70, 70 + follow_up.shape[1] + 3)
        fresh_pos = torch.cat([kept, tail])
    with torch.inference_mode():
        logits = reference(
            input_ids=fresh_ids,
            position_ids=_positions(fresh_pos, dims),
            **with_cache(reference, DynamicCache(config=reference.config)),
        ).logits[0]
    expected = logits[[30 + 6, 30 + 7, 30 + 8, 30 + 9]]
    torch.testing.assert_close(torch.cat(got), expected, atol=1e-5, rtol=1e-4)
    if mode == "rerotate":
        assert cache.next_position == fresh_ids.shape[1]  # compact: the stream never leaves 0..budget
