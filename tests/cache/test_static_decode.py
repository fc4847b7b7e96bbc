"""The static cache and the static (optionally compiled) decode step give what the dynamic path gives.

A stream of prompts that makes every policy evict, answered token by token, run twice on the same weights:
once on `storage="dynamic"` (transformers' DynamicLayer, concatenated per step) and once on the preallocated
`storage="static"` buffers with static-shape decode steps. Logits and what stays in the cache must agree.
"""

import logging

import pytest
import torch

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.decode import StaticDecoder
from cache.policies import POLICIES
from cache.runner import CachedRunner
from cache.static_layer import StaticBoundedLayer
from tests.support.policy_behaviours import BEHAVIOURS
from tests.support.tiny_text_models import ARCHITECTURES, VOCAB, build_pair

BUDGET = 48
ANSWER_TOKENS = 5


def _converse(model, dims: int, config: CacheConfig, compile_decode: bool = False, rounds: int = 3):
    """Prompts of 20..34 tokens (chunks of 16, evicting to the budget), each answered greedily.

    Returns (every logits row, the runner, how many decode steps went through the static path)."""
    cache = BoundedCache.for_model(model, config)
    runner = CachedRunner(model, cache, position_dims=dims, chunk_size=16, compile_decode=compile_decode)
    gen = torch.Generator().manual_seed(3)
    rows, static_steps = [], 0
    with torch.inference_mode():
        for round_index in range(rounds):
            prompt = torch.randint(3, VOCAB, (1, 20 + 7 * round_index), generator=gen)
            logits = runner.prefill(input_ids=prompt, evict_to=BUDGET - ANSWER_TOKENS)
            rows.append(logits)
            for _ in range(ANSWER_TOKENS):
                static_steps += runner.decoder.can_step()
                logits = runner.decode_step(int(logits.argmax(-1)))
                rows.append(logits)
    return torch.cat(rows), runner, static_steps


@pytest.mark.parametrize("positions", ["rerotate", "original"])
@pytest.mark.parametrize("policy", BEHAVIOURS)
@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_static_storage_and_decode_equal_the_dynamic_path(arch, policy, positions):
    _, model, dims = build_pair(arch)
    configs = {
        s: CacheConfig(policy=policy, budget=BUDGET, window=8, positions=positions, storage=s)
        for s in ("dynamic", "static")
    }
    dynamic, dyn_runner, dyn_static_steps = _converse(model, dims, configs["dynamic"])
    static, runner, static_steps = _converse(model, dims, configs["static"])
    torch.testing.assert_close(static, dynamic, atol=1e-5, rtol=0)
    assert dyn_static_steps == 0
    uses_static_steps = POLICIES[policy].evicts and POLICIES[policy].capture != "accumulate"
    assert static_steps == (3 * ANSWER_TOKENS if uses_static_steps else 0)
    states = zip(runner.cache.save_states(), dyn_runner.cache.save_states(), strict=True)
    for (_, conv, rec), (_, conv_d, rec_d) in states:
        for got, expected in ((conv, conv_d), (rec, rec_d)):  # the hybrid's linear states: same on both paths
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    for got, expected in zip(runner.cache.kv_layers, dyn_runner.cache.kv_layers, strict=True):
        assert isinstance(got, StaticBoundedLayer)
        assert torch.equal(got.token_index, expected.token_index)
        assert torch.equal(got.positions, expected.positions)
        torch.testing.assert_close(got.keys, expected.keys, atol=1e-5, rtol=0)
        torch.testing.assert_close(got.attention, expected.attention, atol=1e-5, rtol=0)
    assert runner.cache.next_position == dyn_runner.cache.next_position


def test_decode_steps_write_in_place_without_reallocating():
    _, model, dims = build_pair("llama-gqa")
    cache = BoundedCache.for_model(model, CacheConfig(policy="inf-mllm", budget=BUDGET, window=8))
    runner = CachedRunner(model, cache, position_dims=dims, chunk_size=16)
    with torch.inference_mode():
        token = int(runner.prefill(input_ids=torch.randint(3, VOCAB, (1, 40)), evict_to=BUDGET - 8).argmax(-1))
        token = int(runner.decode_step(token).argmax(-1))  # the first step sizes the buffers to the decoder's capacity
        layer = cache.layers[0]
        pointers = {name: buffer.data_ptr() for name, buffer in layer._buffers.items()}
        for step in range(7):
            assert runner.decoder.can_step()
            token = int(runner.decode_step(token).argmax(-1))
            assert layer.length == BUDGET - 8 + step + 2
        assert {name: buffer.data_ptr() for name, buffer in layer._buffers.items()} == pointers
        assert layer.capacity == runner.decoder.capacity >= runner.decoder.span


def test_assigning_views_copies_and_grows_in_place():
    layer = StaticBoundedLayer(capacity=4)
    keys = torch.arange(2 * 3 * 6 * 2, dtype=torch.float32).view(2, 3, 6, 2)
    layer.keys = keys  # more than the capacity: grows (rounded up)
    assert layer.capacity >= 6 and torch.equal(layer.keys, keys)
    buffer = layer._buffers["keys"]
    layer.keys = layer.keys[:, :, :4]  # a prefix view: only the end moves
    assert layer.length == 4 and layer._buffers["keys"] is buffer
    layer.keys = layer.keys[:, :, 1:3]  # another part of the same buffer: copied safely
    torch.testing.assert_close(layer.keys, keys[:, :, 1:3])
    with torch.inference_mode():  # the buffers are inference tensors, written as the cache does while recording
        layer.keys += 1  # in place on the prefix view
    torch.testing.assert_close(layer.keys, keys[:, :, 1:3] + 1)
    assert layer._buffers["keys"] is buffer


def _decode(model, dims, compile_decode: bool, tokens: int = 4) -> tuple[torch.Tensor, StaticDecoder]:
    config = CacheConfig(policy="inf-mllm", budget=BUDGET, window=8)
    cache = BoundedCache.for_model(model, config)
    runner = CachedRunner(model, cache, position_dims=dims, chunk_size=16, compile_decode=compile_decode)
    rows = []
    with torch.inference_mode():
        logits = runner.prefill(input_ids=torch.arange(3, 63)[None] % VOCAB, evict_to=BUDGET - tokens)
        for _ in range(tokens):
            assert runner.decoder.can_step()
            logits = runner.decode_step(int(logits.argmax(-1)))
            rows.append(logits)
    return torch.cat(rows), runner.decoder


@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_compiled_decode_step_equals_the_eager_one(arch):
    _, model, dims = build_pair(arch)
    eager, _ = _decode(model, dims, compile_decode=False)
    compiled, decoder = _decode(model, dims, compile_decode=True)
    assert decoder.compiled  # compiling worked here, so the comparison is a real one
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=0)


def test_decoding_falls_back_to_eager_without_torch_compile(monkeypatch, caplog):
    _, model, dims = build_pair("llama-gqa")
    eager, _ = _decode(model, dims, compile_decode=False)
    monkeypatch.delattr(torch, "compile")  # an old torch
    with caplog.at_level(logging.WARNING, logger="cache.decode"):
        got, decoder = _decode(model, dims, compile_decode=True)
    assert not decoder.compiled
    assert "no torch.compile" in caplog.text
    torch.testing.assert_close(got, eager, atol=0, rtol=0)


def test_decoding_falls_back_to_eager_when_compiling_fails(monkeypatch, caplog):
    _, model, dims = build_pair("llama-gqa")
    eager, _ = _decode(model, dims, compile_decode=False)
    calls = []

    def broken_compile(fn, **kwargs):  # a build whose backend fails at the first call (no triton, no compiler)
        def run(*args):
            calls.append(1)
            raise RuntimeError("backend compiler failed")

        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    with caplog.at_level(logging.WARNING, logger="cache.decode"):
        got, decoder = _decode(model, dims, compile_decode=True)
    assert calls == [1] and not decoder.compiled
    assert "decoding eagerly" in caplog.text
    torch.testing.assert_close(got, eager, atol=0, rtol=0)


def test_a_long_prompt_grows_the_buffers_and_decoding_cuts_them_back():
    _, model, dims = build_pair("llama-gqa")
    cache = BoundedCache.for_model(model, CacheConfig(policy="streaming-llm", budget=BUDGET, window=8))
    runner = CachedRunner(model, cache, position_dims=dims, chunk_size=16)
    with torch.inference_mode():
        logits = runner.prefill(input_ids=torch.randint(3, VOCAB, (1, 40)))
        token = int(runner.decode_step(int(logits.argmax(-1))).argmax(-1))
        shapes = [b.shape for b in cache.layers[0]._buffers.values()]
        runner.chunk_size = 600  # one long chunk: the buffers must grow past the decoder's capacity
        logits = runner.prefill(input_ids=torch.randint(3, VOCAB, (1, 600)), evict_to=BUDGET - 4)
        assert cache.layers[0].capacity > runner.decoder.capacity
        runner.decode_step(int(logits.argmax(-1)))
    assert [b.shape for b in cache.layers[0]._buffers.values()] == shapes  # the same shapes as before
    assert token >= 0
