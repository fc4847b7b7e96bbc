"""What a batched decode step over hybrid (Qwen3.5) streams adds: the copy of each active stream's linear-attention
states into the batch's rows before the forward and back after it (cache/batch_states.py), on Qwen3.5-2B's
published shapes.

    python scripts/bench_batch_states.py                               # 1, 2, 4, 8 streams, CPU
    python scripts/bench_batch_states.py --device cuda --streams 4 8   # on a GPU

The states are those of `BoundedCache`s built from the 2B's config (the hub fixture's, with the published sizes put
back as scripts/bench_families.py does): per linear-attention layer a convolution state [1, C, K] in `--conv-dtype`
(the checkpoints run bf16) and a float32 recurrent state [1, H, Dk, Dv], random values. Timed: `StackedStates.load`
then `.store` of every stream, the copy one batched step adds, median of `--repeats` after a warm-up. Bytes moved
per step: each stream's states read and written twice (in, then back). For scale, the same states read and written
once (what the model's own update does at every step) and the decoder weights a step reads once (bf16).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.batch_states import StackedStates  # noqa: E402
from cache.bounded_cache import BoundedCache  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from model.families import FAMILIES  # noqa: E402
from scripts.bench_families import full_config  # noqa: E402
from tests.support.hub_fixture import fixture_dir  # noqa: E402

CHECKPOINT = "Qwen/Qwen3.5-2B"
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--streams", type=int, nargs="+", default=[1, 2, 4, 8], help="streams in the batched step")
    p.add_argument("--device", default="cpu", help="torch device of the states")
    p.add_argument("--conv-dtype", choices=list(DTYPES), default="bfloat16", help="the convolution states' dtype")
    p.add_argument("--repeats", type=int, default=50, help="timed steps per stream count (median)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    return p.parse_args(argv)


def state_shapes(config) -> tuple[int, tuple[int, int, int], tuple[int, int, int, int]]:
    """(linear-attention layers, conv state [1, C, K], recurrent state [1, H, Dk, Dv]) of a Qwen3.5 text config."""
    text = config.get_text_config()
    layers = sum(kind == "linear_attention" for kind in text.layer_types)
    key_dim = text.linear_num_key_heads * text.linear_key_head_dim
    conv = (1, 2 * key_dim + text.linear_num_value_heads * text.linear_value_head_dim, text.linear_conv_kernel_dim)
    recurrent = (1, text.linear_num_value_heads, text.linear_key_head_dim, text.linear_value_head_dim)
    return layers, conv, recurrent


def caches(config, count: int, conv_dtype: torch.dtype, device: str) -> list[BoundedCache]:
    """`count` caches of `config` whose linear-attention states are there (random values, as after a prefill)."""
    _, conv, recurrent = state_shapes(config)
    made = []
    for _ in range(count):
        cache = BoundedCache(config, CacheConfig(positions="original"))  # no KeyRotator needed
        for layer in cache.state_layers:
            layer.lazy_initialization(conv_states=torch.empty(conv, dtype=conv_dtype, device=device))
            layer.lazy_initialization(recurrent_states=torch.empty(recurrent, dtype=torch.float32, device=device))
            layer.conv_states[0].normal_()
            layer.recurrent_states[0].normal_()
            layer.has_previous_state[0] = True
        made.append(cache)
    return made


def decoder_weight_bytes_bf16(config) -> int:
    """Bytes of the text decoder's and the output layer's weights in bf16 (what a decode step reads once)."""
    with torch.device("meta"):
        model = FAMILIES[config.model_type].model_class(config)
    weights = {id(p): p for p in model.get_decoder().parameters()}
    weights[id(model.get_output_embeddings().weight)] = model.get_output_embeddings().weight
    return 2 * sum(p.numel() for p in weights.values())


def measure(config, streams: int, args: argparse.Namespace) -> dict:
    made = caches(config, streams, DTYPES[args.conv_dtype], args.device)
    stacked = StackedStates(made, like=made[0])
    rows = list(range(streams))

    def step() -> None:
        stacked.load(rows)
        stacked.store(rows)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    step()
    times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    state_bytes = made[0].state_bytes()
    seconds = statistics.median(times)
    return {
        "streams": streams,
        "state_mib_per_stream": state_bytes / 2**20,
        "moved_mib_per_step": 4 * state_bytes * streams / 2**20,
        "copy_ms_per_step": 1000 * seconds,
        "copy_ms_per_stream": 1000 * seconds / streams,
        "copy_gb_per_s": 4 * state_bytes * streams / seconds / 1e9,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    config = full_config(CHECKPOINT, fixture_dir(CHECKPOINT))
    layers, conv, recurrent = state_shapes(config)
    weights = decoder_weight_bytes_bf16(config)
    print(
        f"{CHECKPOINT}: {layers} linear-attention layers, conv {list(conv)} {args.conv_dtype}, recurrent "
        f"{list(recurrent)} float32; decoder weights {weights / 2**30:.2f} GiB in bf16; device {args.device}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    rows = [measure(config, n, args) for n in args.streams]
    print(
        "| streams | states / stream MiB | moved / step MiB | copy ms / step | ms / stream | GB/s | moved / weights |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        share = r["moved_mib_per_step"] * 2**20 / weights
        print(
            f"| {r['streams']} | {r['state_mib_per_stream']:.1f} | {r['moved_mib_per_step']:.0f} | "
            f"{r['copy_ms_per_step']:.2f} | {r['copy_ms_per_stream']:.2f} | {r['copy_gb_per_s']:.1f} | {share:.1%} |"
        )
    return rows


if __name__ == "__main__":
    main()
