"""Decode latency and KV memory against context length: `full` versus a bounded policy (default inf-mllm).

For each context length N the cache is filled with N tokens of random keys/values (prefilling 16K real
tokens on a laptop CPU would take many minutes and measure prefill, not decode), then a 32-token question
is prefilled for real (its window attention scores the N cached tokens), the policy evicts down to
budget - headroom, and `--decode-tokens` tokens are decoded for real. The model has random weights of a
real shape (Qwen2-0.5B by default), so the timings are those of the real model size.

    python scripts/bench_cache.py                      # CPU: 1K..16K, writes out/bench_cache.{csv,png}
    python scripts/bench_cache.py --device cuda --dtype bfloat16 --shape qwen2-1.5b --contexts 1024 ... 65536
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import Qwen2Config, Qwen2ForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.attention import register_attention  # noqa: E402
from cache.bounded_cache import BoundedCache  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from cache.policies import InfMllmSettings, settings_for  # noqa: E402
from cache.runner import CachedRunner  # noqa: E402

SHAPES = {  # Qwen2 text decoders: hidden, layers, heads, kv heads, intermediate
    "qwen2-0.5b": (896, 24, 14, 2, 4864),
    "qwen2-1.5b": (1536, 28, 12, 2, 8960),
    "small": (256, 4, 4, 2, 512),
}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
QUESTION_TOKENS = 32


def build_model(shape: str, device: str, dtype: torch.dtype) -> Qwen2ForCausalLM:
    hidden, layers, heads, kv_heads, ffn = SHAPES[shape]
    config = Qwen2Config(
        vocab_size=151936,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        intermediate_size=ffn,
        max_position_embeddings=131072,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).to(device=device, dtype=dtype).eval()
    model.set_attn_implementation(register_attention())
    return model


def fill_cache(cache: BoundedCache, model: Qwen2ForCausalLM, n: int) -> None:
    """Puts n tokens of random keys/values at positions 0..n-1 into every layer."""
    cfg = model.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    param = next(model.parameters())
    cache.stage_positions(torch.arange(n)[None], param.device)
    for layer_idx in range(cfg.num_hidden_layers):
        shape = (1, cfg.num_key_value_heads, n, head_dim)
        keys = torch.randn(shape, device=param.device, dtype=param.dtype)
        cache.update(keys, torch.randn_like(keys), layer_idx)


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(model, policy: str, n: int, args) -> dict:
    settings = settings_for(policy, pool=args.pool)  # --pool tunes inf-mllm only
    config = CacheConfig(policy=policy, budget=args.budget, window=args.window, policy_settings=settings)
    cache = BoundedCache.for_model(model, config)
    runner = CachedRunner(model, cache, chunk_size=512)
    fill_cache(cache, model, n)
    question = torch.randint(100, 150000, (1, QUESTION_TOKENS), device=runner.device)
    synchronize(args.device)
    started = time.perf_counter()
    logits = runner.prefill(input_ids=question, evict_to=args.budget - args.decode_tokens)
    synchronize(args.device)
    prefill_ms = (time.perf_counter() - started) * 1000
    evict_ms = sum(s.evict_ms for s in runner.last_evictions)
    step_ms = []
    token = int(logits.argmax(-1))
    for _ in range(args.decode_tokens):
        started = time.perf_counter()
        token = int(runner.decode_step(token).argmax(-1))  # .item() waits for the device
        step_ms.append((time.perf_counter() - started) * 1000)
    return {
        "policy": policy,
        "context_tokens": n + QUESTION_TOKENS,
        "cache_tokens": cache.get_seq_length(),
        "kv_bytes": cache.kv_bytes(),
        "question_prefill_ms": round(prefill_ms, 2),
        "evict_ms": round(evict_ms, 2),
        "decode_ms_per_token": round(statistics.median(step_ms[1:] or step_ms), 2),
    }


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(11, 4))
    for policy in dict.fromkeys(r["policy"] for r in rows):
        mine = [r for r in rows if r["policy"] == policy]
        x = [r["context_tokens"] for r in mine]
        ax_time.plot(x, [r["decode_ms_per_token"] for r in mine], marker="o", label=policy)
        ax_mem.plot(x, [r["kv_bytes"] / 2**20 for r in mine], marker="o", label=policy)
    for ax, label in ((ax_time, "decode ms / token"), (ax_mem, "KV cache MiB")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context tokens seen")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=SHAPES, default="qwen2-0.5b", help="model shape (random weights)")
    parser.add_argument("--contexts", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--policies", nargs="+", default=["full", "inf-mllm"])
    parser.add_argument("--budget", type=int, default=2048, help="cache budget in tokens")
    parser.add_argument("--window", type=int, default=32, help="retrieval window l in tokens")
    parser.add_argument(
        "--pool", type=int, default=InfMllmSettings.pool, help="inf-mllm span pooling (1 = Algorithm 1)"
    )
    parser.add_argument("--decode-tokens", type=int, default=16, help="tokens decoded per measurement")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=DTYPES, default=None, help="default: bfloat16 on GPU, float32 on CPU")
    parser.add_argument("--out", type=Path, default=Path("out"), help="folder for bench_cache.csv and .png")
    args = parser.parse_args()
    dtype = DTYPES[args.dtype] if args.dtype else (torch.bfloat16 if args.device != "cpu" else torch.float32)
    if args.budget <= args.window + args.decode_tokens:
        parser.error("--budget must exceed --window + --decode-tokens")

    print(f"building a random {args.shape} model on {args.device} ({dtype}) ...", flush=True)
    model = build_model(args.shape, args.device, dtype)
    jobs = [(policy, n) for n in args.contexts for policy in args.policies]
    rows = []
    with torch.inference_mode():
        measure(model, args.policies[0], min(args.contexts), args)  # warm-up
        for policy, n in tqdm(jobs, desc="bench_cache", unit="run"):
            rows.append(measure(model, policy, n, args))
            tqdm.write(str(rows[-1]))

    args.out.mkdir(parents=True, exist_ok=True)
    csv_path, png_path = args.out / "bench_cache.csv", args.out / "bench_cache.png"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, png_path, f"{args.shape} (random weights), {args.device}, {dtype}, budget {args.budget}")
    print(f"wrote {csv_path} and {png_path}")


if __name__ == "__main__":
    main()
