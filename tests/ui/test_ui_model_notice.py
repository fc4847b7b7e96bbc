"""The page says what its model can be trusted with: random weights (`tiny`), generated scenes only (`demo`)."""

from __future__ import annotations

from ui.render import PageInfo, settings_markdown

BASE = dict(family="qwen2_vl", device="cpu", dtype="float32", policy="inf-mllm", budget=2048, window=32,
            memory_backend="psutil", memory_label="RSS")  # fmt: skip


def test_tiny_is_flagged_as_random_and_demo_as_knowing_generated_scenes_only():
    tiny = settings_markdown(PageInfo(model="tiny", random_weights=True, **BASE))
    demo = settings_markdown(PageInfo(model="demo", demo_weights=True, **BASE))
    real = settings_markdown(PageInfo(model="Qwen/Qwen2-VL-2B-Instruct", **BASE))
    assert "gibberish" in tiny and "generated scenes" not in tiny
    assert "generated scenes only" in demo and "real camera" in demo and "gibberish" not in demo
    assert "gibberish" not in real and "generated scenes" not in real
