"""Tuned weight layouts change strides only: the same values, the same outputs up to float rounding."""

import pytest
import torch

from cache.cpu.layouts import tune_linear_layouts
from tests.support.tiny_text_models import VOCAB, build_pair


def test_tuning_keeps_every_weight_and_the_outputs(monkeypatch):
    _, model, _ = build_pair("llama-gqa")
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    ids = torch.arange(3, 40)[None] % VOCAB
    with torch.inference_mode():
        expected = model(input_ids=ids).logits
    monkeypatch.setattr(
        "cache.cpu.layouts._fastest", lambda weight, rounds: "column" if weight.shape[0] > 64 else "row"
    )
    choices = tune_linear_layouts(model)
    assert choices[(128, 64)] == "column" and choices[(64, 128)] == "row"  # gate/up and down of the tiny Llama
    gate = model.model.layers[0].mlp.gate_proj.weight
    assert gate.stride() == (1, 128)  # column-major now
    assert model.model.layers[0].mlp.down_proj.weight.is_contiguous()
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name])
    with torch.inference_mode():
        torch.testing.assert_close(model(input_ids=ids).logits, expected, atol=1e-5, rtol=0)


def test_weights_under_a_mebibyte_are_not_timed(monkeypatch):
    """A small weight's product takes microseconds in any layout: it gets the kernel when it is built and MKL as
    loaded otherwise, without the thousands of timed products (seconds at every start of a tiny model)."""
    _, model, _ = build_pair("llama-gqa")

    def no_timing(*args):
        raise AssertionError("a small weight was timed")

    monkeypatch.setattr("cache.cpu.layouts._best_seconds", no_timing)
    for ready, expected in ((False, "row"), (True, "kernel")):
        monkeypatch.setattr("cache.cpu.layouts.kernels_ready", lambda ready=ready: ready)
        choices = tune_linear_layouts(model)
        assert choices and set(choices.values()) == {expected}
    monkeypatch.setattr("cache.cpu.layouts.UNTIMED_BYTES", 0)  # the same weights timed when the bound is lowered
    with pytest.raises(AssertionError, match="timed"):
        tune_linear_layouts(model)
