"""The scores the cache records must equal the attention weights of transformers' eager attention."""

import copy

import pytest
import torch

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.runner import CachedRunner
from tests.support.tiny_text_models import ARCHITECTURES, VOCAB, build_pair

WINDOW = 5


def _eager_attentions(reference: torch.nn.Module, ids: torch.Tensor) -> list[torch.Tensor]:
    eager = copy.deepcopy(reference)
    eager.set_attn_implementation("eager")
    with torch.inference_mode():
        return list(eager(input_ids=ids, output_attentions=True).attentions)  # per layer [B, H_q, T, T]


def _group_mean(weights: torch.Tensor, kv_heads: int) -> torch.Tensor:
    # [B, H_q, ..., N] -> [B, H_kv, ..., N]: mean over the query heads sharing a KV head
    b, hq = weights.shape[:2]
    return weights.reshape(b, kv_heads, hq // kv_heads, *weights.shape[2:]).mean(dim=2)


@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_window_scores_equal_eager_weights(arch):
    reference, bounded, dims = build_pair(arch)
    cache = BoundedCache.for_model(bounded, CacheConfig(policy="inf-mllm", budget=4096, window=WINDOW))
    runner = CachedRunner(bounded, cache, position_dims=dims)
    prefix = torch.randint(3, VOCAB, (1, 23))
    prompt = torch.randint(3, VOCAB, (1, 11))
    runner.prefill(input_ids=prefix)
    runner.prefill(input_ids=prompt)  # prefilled onto a non-empty cache: the masked path
    attentions = _eager_attentions(reference, torch.cat([prefix, prompt], dim=1))
    for layer, weights in zip(cache.kv_layers, attentions, strict=True):  # the hybrid: attention layers only
        expected = _group_mean(weights[:, :, -WINDOW:, :].mean(dim=2), layer.keys.shape[1])
        torch.testing.assert_close(layer.attention, expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_h2o_accumulates_prefill_and_decode_attention(arch):
    reference, bounded, dims = build_pair(arch)
    cache = BoundedCache.for_model(bounded, CacheConfig(policy="h2o", budget=4096, window=WINDOW))
    runner = CachedRunner(bounded, cache, position_dims=dims, chunk_size=8)
    prompt = torch.randint(3, VOCAB, (1, 19))  # three chunks: 8, 6, 5 tokens
    decoded = [7, 9, 11]
    runner.prefill(input_ids=prompt)
    for token in decoded:
        runner.decode_step(token)
    attentions = _eager_attentions(reference, torch.cat([prompt, torch.tensor([decoded])], dim=1))
    for layer, weights in zip(cache.kv_layers, attentions, strict=True):  # the hybrid: attention layers only
        expected = _group_mean(weights.sum(dim=2), layer.keys.shape[1])  # every query row, summed
        torch.testing.assert_close(layer.attention, expected, atol=1e-5, rtol=1e-5)


def test_decode_records_nothing_for_window_policies():
    _, bounded, dims = build_pair("llama-gqa")
    cache = BoundedCache.for_model(bounded, CacheConfig(policy="inf-mllm", budget=4096, window=WINDOW))
    runner = CachedRunner(bounded, cache, position_dims=dims)
    runner.prefill(input_ids=torch.randint(3, VOCAB, (1, 12)))
    window_scores = [layer.attention.clone() for layer in cache.layers]
    runner.decode_step(5)
    for before, layer in zip(window_scores, cache.layers, strict=True):
        assert torch.equal(layer.attention[..., :-1], before)
        assert float(layer.attention[..., -1].abs().max()) == 0.0  # the decoded token got no score
