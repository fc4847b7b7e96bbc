"""The second tier: every token reaches the host store; recall puts blocks back in stream order at
consistent positions, so recalling everything reproduces full attention; bounds hold."""

import pytest
import torch
from transformers import DynamicCache

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.forward_args import with_cache
from cache.runner import CachedRunner
from cache.store.recall import recall_for_prompt
from tests.support.tiny_text_models import ARCHITECTURES, VOCAB, build_pair

PROMPT, QUESTION, BUDGET, BLOCK = 150, 10, 48, 16


def stream_then_recall(arch: str, policy: str, positions: str, recall: int, keep_all: bool = False):
    """Streams PROMPT tokens through the cache, recalls for a question, prefills it (evicting to budget -
    4 + recalled, as before an answer). With `keep_all` the prompt goes in one chunk, so every token's KV is
    computed over the whole prompt as full attention does, and the question prefill evicts nothing."""
    reference, bounded, dims = build_pair(arch)
    config = CacheConfig(
        policy=policy, budget=BUDGET, window=8, recall=recall, block=BLOCK, store_bytes=2**24, positions=positions
    )
    cache = BoundedCache.for_model(bounded, config)
    runner = CachedRunner(bounded, cache, position_dims=dims, chunk_size=PROMPT if keep_all else 16)
    gen = torch.Generator().manual_seed(3)
    prompt = torch.randint(3, VOCAB, (1, PROMPT), generator=gen)
    question = torch.randint(3, VOCAB, (1, QUESTION), generator=gen)
    with torch.inference_mode():
        runner.prefill(input_ids=prompt)  # each chunk evicts to the budget
        stats = recall_for_prompt(runner, input_ids=question)
        target = PROMPT + QUESTION if keep_all else BUDGET - 4 + stats.tokens
        logits = runner.prefill(input_ids=question, evict_to=target)
        ref_cache = DynamicCache(config=reference.config)
        whole = torch.cat([prompt, question], dim=1)
        expected = reference(input_ids=whole, **with_cache(reference, ref_cache)).logits[:, -1]
    return cache, stats, logits, expected


@pytest.mark.parametrize("positions", ["rerotate", "original"])
@pytest.mark.parametrize("policy", ["window", "streaming-llm"])
@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_recalling_everything_reproduces_full_attention(arch, policy, positions):
    cache, stats, logits, expected = stream_then_recall(arch, policy, positions, recall=PROMPT, keep_all=True)
    assert cache.store.tokens == PROMPT + QUESTION  # every token reached the store, once
    assert stats.tokens >= PROMPT - BUDGET  # at least everything that had been evicted came back
    assert cache.get_seq_length() == PROMPT + QUESTION
    for layer in cache.kv_layers:  # on the hybrid, recall enters the attention layers only
        assert (layer.token_index[0] == torch.arange(PROMPT + QUESTION)).all()  # stream order, no duplicates
    torch.testing.assert_close(logits, expected, atol=2e-4, rtol=0)


@pytest.mark.parametrize("policy", ["inf-mllm", "h2o", "snapkv", "streaming-llm"])
def test_the_device_cache_stays_within_budget_plus_recall(policy):
    recall = 32
    cache, stats, _, _ = stream_then_recall("llama-gqa", policy, "rerotate", recall=recall)
    assert 0 < stats.tokens <= recall
    assert cache.get_seq_length() <= BUDGET + recall
    for layer in cache.layers:
        index = layer.token_index[0]
        assert (index.diff(dim=-1) > 0).all()  # stream order, no duplicates, in every head
        assert layer.positions[0, :, :, 0].max() < cache.next_position
    cache.unpin()
    cache.evict(BUDGET)  # once the answer is done, the next eviction point cuts back to the budget
    assert cache.get_seq_length() == BUDGET


def test_the_store_drops_its_oldest_blocks_beyond_its_bound():
    _, bounded, dims = build_pair("llama-gqa")
    probe = CacheConfig(policy="window", budget=BUDGET, window=8, recall=16, block=BLOCK, store_bytes=2**24)
    cache = BoundedCache.for_model(bounded, probe)
    runner = CachedRunner(bounded, cache, position_dims=dims, chunk_size=16)
    with torch.inference_mode():
        runner.prefill(input_ids=torch.randint(3, VOCAB, (1, 32)))
    block_bytes = cache.store.blocks[0].nbytes
    config = CacheConfig(policy="window", budget=BUDGET, window=8, recall=16, block=BLOCK, store_bytes=3 * block_bytes)
    cache = BoundedCache.for_model(bounded, config)
    runner = CachedRunner(bounded, cache, position_dims=dims, chunk_size=16)
    with torch.inference_mode():
        runner.prefill(input_ids=torch.randint(3, VOCAB, (1, 160)))
    assert len(cache.store.blocks) == 3 and cache.store.bytes <= 3 * block_bytes
    assert cache.store.dropped_blocks == 7 and cache.store.dropped_tokens == 7 * BLOCK
    assert [b.first for b in cache.store.blocks] == [112, 128, 144]  # the newest ones
