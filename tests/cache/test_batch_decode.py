"""Several streams decoded in one batched step give, per stream, what that stream gives decoded alone.

Each stream has its own cache with its own history (prompts of different lengths over the budget, so every
evicting policy evicted differently; different positions and lengths) and stops after its own number of
tokens, a middle row first, so that finished rows sit out steps inside the batch. Greedy tokens must be equal,
logits equal up to float rounding, and every cache must end as it ends alone.
"""

import pytest
import torch

from cache.batch_decode import BatchDecoder
from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.cpu import kernels as cpu_kernels
from cache.policies import POLICIES
from cache.runner import CachedRunner
from cache.store.recall import recall_for_prompt
from tests.support.policy_behaviours import BEHAVIOURS
from tests.support.reference_lm import reference_lm
from tests.support.tiny_text_models import ARCHITECTURES, VOCAB, build_pair

BUDGET = 48
# per stream: prompt lengths (the last one is the question) and how many tokens it decodes
STREAMS = [([30, 25], 7), ([60, 41, 12], 2), ([20], 5), ([90, 9], 9)]


def _stream(
    model, dims: int, config: CacheConfig, prompts: list[int], seed: int, steps: int, chunk: int = 16, compile=False
):
    """A runner after `prompts` (random ids, prefilled in chunks), the last evicting to leave room for `steps` tokens;
    with recall, the last prompt first brings back what the host store has for it. Returns (runner, logits)."""
    cache = BoundedCache.for_model(model, config)
    runner = CachedRunner(model, cache, position_dims=dims, chunk_size=chunk, compile_decode=compile)
    gen = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        for i, length in enumerate(prompts):
            ids = torch.randint(3, VOCAB, (1, length), generator=gen)
            last = i == len(prompts) - 1
            recalled = recall_for_prompt(runner, input_ids=ids).tokens if last else 0
            logits = runner.prefill(input_ids=ids, evict_to=config.budget - steps + recalled if last else None)
    return runner, logits


def _decode_alone(runner, logits, steps: int) -> tuple[list[int], torch.Tensor]:
    tokens, rows = [], []
    for _ in range(steps):
        tokens.append(int(logits.argmax(-1)))
        logits = runner.decode_step(tokens[-1])
        rows.append(logits)
    return tokens, torch.cat(rows)


def _decode_together(runners, logits, steps: list[int]) -> tuple[list[list[int]], list[torch.Tensor], BatchDecoder]:
    decoder = BatchDecoder(runners)
    tokens: list[list[int]] = [[] for _ in runners]
    rows: list[list[torch.Tensor]] = [[] for _ in runners]
    for step in range(max(steps)):
        feed = [int(lg.argmax(-1)) if step < n else None for lg, n in zip(logits, steps, strict=True)]
        for row, token in enumerate(feed):
            if token is not None:
                tokens[row].append(token)
        out = decoder.step(feed)
        logits = [new if new is not None else old for new, old in zip(out, logits, strict=True)]
        for row, new in enumerate(out):
            if new is not None:
                rows[row].append(new)
    return tokens, [torch.cat(r) for r in rows], decoder


def _check_together_equals_alone(
    model,
    dims: int,
    configs: list[CacheConfig],
    streams=STREAMS,
    tolerance: float = 1e-5,
    chunk: int = 16,
    compile: bool = False,
) -> BatchDecoder:
    """Decodes `streams` alone, then built again from scratch together; compares tokens, logits and caches.
    `tolerance`: on logits and keys (batched products may round otherwise than one row's). `compile`: the
    runners compile their steps, and so the batch decoder compiles its batched step."""

    def build(i: int):
        (prompts, steps), config = streams[i], configs[i]
        return _stream(model, dims, config, prompts, seed=i, steps=steps, chunk=chunk, compile=compile)

    steps = [s for _, s in streams]
    with torch.inference_mode():
        alone = []
        for i in range(len(streams)):
            runner, logits = build(i)
            alone.append((*_decode_alone(runner, logits, steps[i]), runner))
        made = [build(i) for i in range(len(streams))]
        runners = [runner for runner, _ in made]
        tokens, rows, decoder = _decode_together(runners, [lg for _, lg in made], steps)
    for row, (expected_tokens, expected_rows, lone) in enumerate(alone):
        assert tokens[row] == expected_tokens, f"stream {row}"
        torch.testing.assert_close(rows[row], expected_rows, atol=tolerance, rtol=tolerance)
        got, want = runners[row].cache, lone.cache
        assert (got.next_position, got.tokens_seen, got.evictions) == (
            want.next_position,
            want.tokens_seen,
            want.evictions,
        )
        for layer, expected in zip(got.kv_layers, want.kv_layers, strict=True):
            assert torch.equal(layer.token_index, expected.token_index)
            assert torch.equal(layer.positions, expected.positions) and torch.equal(layer.origin, expected.origin)
            torch.testing.assert_close(layer.keys, expected.keys, atol=tolerance, rtol=tolerance)
            torch.testing.assert_close(layer.values, expected.values, atol=tolerance, rtol=tolerance)
        for (_, conv, recurrent), (_, want_conv, want_recurrent) in zip(
            got.save_states(), want.save_states(), strict=True
        ):  # a hybrid's linear-attention states (none elsewhere)
            torch.testing.assert_close(conv, want_conv, atol=tolerance, rtol=tolerance)
            torch.testing.assert_close(recurrent, want_recurrent, atol=tolerance, rtol=tolerance)
    return decoder


@pytest.mark.parametrize("policy", BEHAVIOURS)
@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_batched_steps_equal_each_stream_alone(arch, policy):
    _, model, dims = build_pair(arch)
    config = CacheConfig(policy=policy, budget=BUDGET, window=8)
    decoder = _check_together_equals_alone(model, dims, [config] * len(STREAMS))
    static = POLICIES[policy].evicts and POLICIES[policy].capture != "accumulate"
    # full and h2o decode one after another (still equal); the others batch, the hybrid's linear states too
    assert (decoder.batched_steps > 0) == static


@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_compiled_batched_steps_equal_each_stream_alone(arch):
    """The batched step compiled (one trace per range of rows: the finished middle row shrinks none here, a
    finished last row does) gives what each compiled stream gives alone."""
    _, model, dims = build_pair(arch)
    config = CacheConfig(policy="inf-mllm", budget=BUDGET, window=8)
    decoder = _check_together_equals_alone(model, dims, [config] * len(STREAMS), compile=True)
    assert decoder.compiled and decoder.batched_steps > 0  # compiling worked: the comparison is a real one


@pytest.mark.parametrize("arch", ["qwen2-vl", "qwen3.5"])
def test_streams_of_different_policies_and_recall_decode_together(arch):
    """Recall on (budget + recall slots), policies mixed in one batch: static rows batched, h2o alone (on the hybrid,
    its linear states updated by its own steps between the batched steps of the others)."""
    _, model, dims = build_pair(arch)
    recall = dict(recall=16, block=8, store_bytes=2**22)
    configs = [
        CacheConfig(policy="inf-mllm", budget=BUDGET, window=8, **recall),
        CacheConfig(policy="window", budget=BUDGET, window=8, **recall),
        CacheConfig(policy="h2o", budget=BUDGET, window=8),
        CacheConfig(policy="streaming-llm", budget=BUDGET, window=8, **recall),
    ]
    decoder = _check_together_equals_alone(model, dims, configs)
    assert decoder.batched_steps > 0
    assert any(runner.cache.pinned is not None and runner.cache.pinned.numel() for runner in decoder.runners)


def test_the_sdpa_path_takes_per_row_masks_too():
    _, model, dims = build_pair("llama-gqa")
    config = CacheConfig(policy="snapkv", budget=BUDGET, window=8)
    cpu_kernels.use_cpu_kernels(False)
    try:
        decoder = _check_together_equals_alone(model, dims, [config] * len(STREAMS))
    finally:
        cpu_kernels.use_cpu_kernels(True)
    assert decoder.batched_steps > 0


def test_streams_keep_their_pool_rows_and_a_grown_buffer_is_adopted_again():
    """Between batched steps a stream takes a long prompt (its buffers grow out of the pool): the next batched
    step copies it back into its row, and both streams still decode as they do alone."""
    _, model, dims = build_pair("llama-gqa")
    config = CacheConfig(policy="inf-mllm", budget=BUDGET, window=8)
    long_prompt = torch.randint(3, VOCAB, (1, 300), generator=torch.Generator().manual_seed(9))

    def run(together: bool) -> list[list[int]]:
        made = [_stream(model, dims, config, [40, 20], seed=i, steps=8) for i in range(2)]
        runners, logits = [r for r, _ in made], [lg for _, lg in made]
        decoder = BatchDecoder(runners)
        tokens: list[list[int]] = [[], []]
        with torch.inference_mode():
            for phase in range(2):
                for _ in range(3):
                    feed = [int(lg.argmax(-1)) for lg in logits]
                    for row, token in enumerate(feed):
                        tokens[row].append(token)
                    logits = (
                        decoder.step(feed)
                        if together
                        else [r.decode_step(t) for r, t in zip(runners, feed, strict=True)]
                    )
                if phase == 0:
                    runners[1].chunk_size = 300  # one chunk, longer than the buffers
                    logits[1] = runners[1].prefill(input_ids=long_prompt, evict_to=BUDGET - 8)
                    pool = decoder.pool
                    pool_row = pool and pool.layer_tensors["keys"][0][1, :, : runners[1].decoder.capacity]
                    assert not together or runners[1].cache.layers[0].keys.data_ptr() != pool_row.data_ptr()
        if together:
            assert decoder.batched_steps == 6
            for row, runner in enumerate(runners):
                assert runner.cache.layers[0].keys.data_ptr() == decoder.pool.layer_tensors["keys"][0][row].data_ptr()
        return tokens

    assert run(together=True) == run(together=False)


def test_a_batch_needs_one_model():
    _, llama, _ = build_pair("llama-gqa")
    _, other, _ = build_pair("llama-gqa", seed=1)
    runners = [CachedRunner(m, BoundedCache.for_model(m, CacheConfig(budget=BUDGET, window=8))) for m in (llama, other)]
    with pytest.raises(ValueError, match="same model"):
        BatchDecoder(runners)
    with pytest.raises(ValueError, match="2 streams"):
        BatchDecoder(runners[:1] * 2).step([1])


@pytest.mark.parametrize("policy", ["inf-mllm", "streaming-llm"])
def test_the_reference_lm_decodes_streams_together_as_alone(policy):
    lm = reference_lm()
    config = CacheConfig(policy=policy, budget=96, window=16)
    streams = [([120, 20], 5), ([40, 30], 2), ([200, 12], 6)]  # over the budget by 60, 0 and 120 tokens
    decoder = _check_together_equals_alone(lm.model, lm.position_dims, [config] * 3, streams, 1e-4, chunk=64)
    assert decoder.batched_steps > 0
