"""scripts/bench_batch_states.py: the Qwen3.5-2B state shapes it copies and a short run end to end."""

from __future__ import annotations

import pytest

from scripts.bench_batch_states import CHECKPOINT, main, state_shapes
from scripts.bench_families import full_config
from tests.support.hub_fixture import fixture_dir


def test_the_states_are_the_published_2b_shapes():
    config = full_config(CHECKPOINT, fixture_dir(CHECKPOINT))
    # 18 Gated DeltaNet layers; conv over q, k and v (16 heads of 128 each), kernel 4; recurrent 16 x 128 x 128
    assert state_shapes(config) == (18, (1, 6144, 4), (1, 16, 128, 128))


def test_a_short_run_counts_the_bytes_each_step_moves():
    rows = main(["--streams", "1", "2", "--repeats", "1"])
    per_stream = 18 * (6144 * 4 * 2 + 16 * 128 * 128 * 4)  # bf16 conv + float32 recurrent, per layer
    assert [r["streams"] for r in rows] == [1, 2]
    for r in rows:
        assert r["state_mib_per_stream"] * 2**20 == pytest.approx(per_stream)  # 18.8 MiB, as docs/models.md says
        assert r["moved_mib_per_step"] * 2**20 == pytest.approx(4 * per_stream * r["streams"])
        assert r["copy_ms_per_step"] > 0
