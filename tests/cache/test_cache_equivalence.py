"""With a budget larger than the conversation, every policy must reproduce plain transformers exactly."""

import pytest
import torch
from transformers import DynamicCache

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.forward_args import with_cache
from cache.runner import CachedRunner
from tests.support.policy_behaviours import BEHAVIOURS
from tests.support.tiny_text_models import ARCHITECTURES, VOCAB, build_pair

ROUNDS = 4
ANSWER_TOKENS = 6


@pytest.mark.parametrize("positions", ["rerotate", "original"])
@pytest.mark.parametrize("policy", BEHAVIOURS)
@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_multi_round_logits_equal_plain_dynamic_cache(arch, policy, positions):
    reference, bounded, dims = build_pair(arch)
    config = CacheConfig(policy=policy, budget=4096, window=8, positions=positions)
    cache = BoundedCache.for_model(bounded, config)
    runner = CachedRunner(bounded, cache, position_dims=dims, chunk_size=16)
    ref_cache = DynamicCache(config=reference.config)
    gen = torch.Generator().manual_seed(1)
    steps = 0
    with torch.inference_mode():
        for round_index in range(ROUNDS):
            # prompts of 10..31 tokens: several are prefilled in more than one chunk of 16
            prompt = torch.randint(3, VOCAB, (1, 10 + 7 * round_index), generator=gen)
            expected = reference(input_ids=prompt, **with_cache(reference, ref_cache), use_cache=True).logits[:, -1]
            got = runner.prefill(input_ids=prompt, evict_to=config.budget - ANSWER_TOKENS)
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
            token = int(expected.argmax(-1))
            for _ in range(ANSWER_TOKENS):
                expected = reference(
                    input_ids=torch.tensor([[token]]), **with_cache(reference, ref_cache), use_cache=True
                ).logits[:, -1]
                got = runner.decode_step(token)
                torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
                token = int(expected.argmax(-1))
                steps += 1
    assert steps == ROUNDS * ANSWER_TOKENS
    assert cache.get_seq_length() == ref_cache.get_seq_length()
    assert cache.evictions == 0
