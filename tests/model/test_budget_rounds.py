"""80 rounds of prompt + answer (each past the budget after the third): the cache never exceeds its budget, and
positions stay in range."""

import pytest
import torch

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.runner import CachedRunner
from tests.support.tiny_text_models import VOCAB, build_pair

ROUNDS, BUDGET, WINDOW, ANSWER = 80, 96, 8, 6


def _run_rounds(arch: str, policy: str, positions: str = "rerotate"):
    _, bounded, dims = build_pair(arch)
    cache = BoundedCache.for_model(
        bounded, CacheConfig(policy=policy, budget=BUDGET, window=WINDOW, positions=positions)
    )
    runner = CachedRunner(bounded, cache, position_dims=dims, chunk_size=32)
    gen = torch.Generator().manual_seed(0)
    after_eviction, during_answer, max_positions = [], [], []
    for _ in range(ROUNDS):
        length = int(torch.randint(5, 60, (1,), generator=gen))
        logits = runner.prefill(input_ids=torch.randint(3, VOCAB, (1, length), generator=gen), evict_to=BUDGET - ANSWER)
        after_eviction.extend(s.tokens_after for s in runner.last_evictions)
        for _ in range(ANSWER):
            logits = runner.decode_step(int(logits.argmax(-1)))
            during_answer.append(max(layer.keys.shape[2] for layer in cache.layers))
        max_positions.append(cache.max_position())
    return cache, after_eviction, during_answer, max_positions


@pytest.mark.parametrize(
    "arch, policy",
    [
        ("llama-gqa", "inf-mllm"),
        ("llama-gqa", "h2o"),
        ("llama-gqa", "streaming-llm"),
        ("llama-gqa", "window"),
        ("qwen2-vl", "inf-mllm"),
    ],
)
def test_cache_stays_within_budget(arch, policy):
    cache, after_eviction, during_answer, max_positions = _run_rounds(arch, policy)
    assert len(after_eviction) >= ROUNDS  # at least one eviction point per round
    assert max(after_eviction) <= BUDGET
    assert max(during_answer) <= BUDGET  # the answer fits in the headroom left at the question
    assert len({layer.keys.shape[2] for layer in cache.layers}) == 1  # all layers evict together
    assert cache.evictions >= ROUNDS - 5  # nearly every round had to evict
    # compact positions: text-only streams never go past the budget, however long they run
    assert max(max_positions) < BUDGET


def test_original_positions_grow_and_full_cache_grows():
    _, _, _, positions = _run_rounds("llama-gqa", "inf-mllm", positions="original")
    assert positions[-1] > 20 * BUDGET  # the stream's true length: positions keep growing
    cache, _, during_answer, _ = _run_rounds("llama-gqa", "full")
    assert cache.get_seq_length() > 20 * BUDGET and cache.evictions == 0
