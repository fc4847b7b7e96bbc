"""Decode ms/token against context, beside the memory-bandwidth bound measured in the same run.

A decode step has to read every weight once and every cached key and value once, so no decoder beats
bytes-per-token / read bandwidth. For each context length N the cache is filled with N tokens of random
keys/values (prefilling 64K real tokens would take this CPU hours and measure prefill), then two clips of
`--clip-tokens` embeddings are ingested (chunked prefill + eviction: "clip ms" for the first, which also
evicts the N filled tokens, "clip at budget ms" for the second, what each clip of a running stream
costs), a 32-token question is prefilled (its window attention scores every cached token, then the policy
evicts: "TTFT", and the eviction's share of it), and `--decode-tokens` tokens are decoded.

Read bandwidth is measured right before each decode loop, so every row's bound holds for the conditions
of that row, two ways over 1 GiB: a torch sum (the issue's probe: `bound_ms`, `x_bound`) and MKL's
matrix-vector product (`mv_bound_ms`, `x_mv_bound`), which on one core reads about 1.2x faster than the
sum and so gives the tighter bound. (The one-row kernel of `cache.cpu.kernels` read that 16384 x 16384
matrix slower than MKL, so it is no better probe, although it reads the models' narrow matrices faster.)

Variants (columns of the CSV):
- `plain`: transformers' DynamicCache and SDPA (no CPU kernels), the weights as loaded (no eviction: the
  context grows);
- `before`: inf-mllm on the previous path (DynamicLayer storage, torch.cat per step, eager, weights as loaded,
  SDPA attention);
- then the weights get the one-row products `cache.cpu.layouts.tune_linear_layouts` picks, and:
- `full`: the full policy on static storage (grows; decoded eagerly: its shapes change every step);
- `<policy>`: each bounded policy on static storage with the compiled static decode step;
- `inf-mllm eager`: the same without torch.compile (what a build without compile gets);
- `inf-mllm no kernels`: compiled, without the CPU decode kernels of `cache.cpu.kernels` (SDPA attention,
  MKL products with the layouts tuned without the kernels): the previous session's fast path.
The others use those kernels where the CPU has AVX2 (attention, and the products where they won the tuning).

    taskset -c 1 python scripts/bench_decode.py --model reference --contexts 1024 4096 16384 65536
    taskset -c 1 python scripts/bench_decode.py --model qwen2-vl-2b --contexts 1024 4096 16384
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
from transformers import DynamicCache

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.bounded_cache import BoundedCache  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from cache.cpu.kernels import kernels_ready, use_cpu_kernels  # noqa: E402
from cache.cpu.layouts import tune_linear_layouts  # noqa: E402
from cache.forward_args import with_cache  # noqa: E402
from cache.runner import CachedRunner  # noqa: E402
from scripts.bench_cache import build_model as qwen2_decoder  # noqa: E402

QUESTION_TOKENS = 32
VARIANTS = ("plain", "before", "no-kernels", "full", "bounded", "eager")
_BANDWIDTH_PROBE = torch.empty(0)
_MATRIX_PROBE = torch.empty(0)


def build_model(name: str) -> torch.nn.Module:
    """`reference` (SmolLM2-135M, real weights) or `qwen2-vl-2b` (its text decoder's shape, random weights)."""
    if name == "reference":
        from quality.lm import load_text_lm

        return load_text_lm("reference").model
    # Qwen2-VL-2B-Instruct's decoder is bench_cache's "qwen2-1.5b" shape (1-D RoPE instead of M-RoPE: same bytes)
    return qwen2_decoder("qwen2-1.5b", "cpu", torch.float32)


def read_bandwidth() -> tuple[float, float]:
    """Bytes per second read from 1 GiB (median of 9: on the README's machine one read in ten or so comes out
    1.5x faster than the rest): by a torch sum (the issue's probe), and by a
    matrix-vector product over a 16384 x 16384 matrix, which reads faster on one core (several streams at
    once), so its bound is the tighter, more honest one."""
    global _BANDWIDTH_PROBE, _MATRIX_PROBE
    if _BANDWIDTH_PROBE.numel() == 0:
        _BANDWIDTH_PROBE = torch.ones(2**28)
        _MATRIX_PROBE = torch.ones(2**14, 2**14)
    vector = torch.ones(2**14)
    return _median_rate(_BANDWIDTH_PROBE.sum), _median_rate(lambda: torch.mv(_MATRIX_PROBE, vector))


def _median_rate(read) -> float:
    read()  # warm-up
    times = []
    for _ in range(9):
        started = time.perf_counter()
        read()
        times.append(time.perf_counter() - started)
    return 2**30 / statistics.median(times)


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of weights one decode step reads: every parameter once; an untied embedding only by one row."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    embedding = model.get_input_embeddings().weight
    if embedding is not model.get_output_embeddings().weight:
        total -= embedding.numel() * embedding.element_size()
    return total


def kv_bytes_per_token(model: torch.nn.Module) -> int:
    cfg = model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * head_dim * next(model.parameters()).element_size()


def random_kv(model: torch.nn.Module, n: int) -> list[torch.Tensor]:
    cfg = model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return [torch.randn(1, cfg.num_key_value_heads, n, head_dim) for _ in range(2)]


def fill(cache, model: torch.nn.Module, n: int) -> None:
    """n tokens of random keys/values at positions 0..n-1 in every layer (BoundedCache or DynamicCache)."""
    if isinstance(cache, BoundedCache):
        cache.stage_positions(torch.arange(n)[None])
    for layer_idx in range(model.config.num_hidden_layers):
        keys, values = random_kv(model, n)
        cache.update(keys, values, layer_idx)


def timed(fn) -> tuple[object, float]:
    started = time.perf_counter()
    result = fn()
    return result, (time.perf_counter() - started) * 1000


def decode_times(step, first_token: int, tokens: int) -> list[float]:
    token, times = first_token, []
    for _ in range(tokens):
        logits, ms = timed(lambda t=token: step(t))
        token = int(logits.argmax(-1))
        times.append(ms)
    return times


def run_protocol(model, ingest, ask, step, args) -> dict:
    """Two clips (the second at the budget, for an evicting cache), a question (TTFT), then the decode
    steps, with the read bandwidth measured right before them. ingest(embeddings), ask(ids) and
    step(token) return logits."""
    clip = torch.randn(1, args.clip_tokens, model.config.hidden_size) * 0.02
    _, clip_ms = timed(lambda: ingest(clip))
    _, clip_at_budget_ms = timed(lambda: ingest(clip))  # what each clip of a stream at its budget costs
    question = torch.randint(100, model.config.vocab_size - 1, (1, QUESTION_TOKENS))
    logits, ttft_ms = timed(lambda: ask(question))
    bandwidth = read_bandwidth()
    times = decode_times(step, int(logits.argmax(-1)), args.decode_tokens + 1)
    return dict(
        ttft_ms=ttft_ms,
        clip_ms=clip_ms,
        clip_at_budget_ms=clip_at_budget_ms,
        bandwidth=bandwidth,
        first_step_ms=times[0],
        times=times[1:],
    )


def measure_bounded(model, policy: str, storage: str, compile_decode: bool, n: int, args) -> dict:
    config = CacheConfig(policy=policy, budget=args.budget, window=args.window, storage=storage)
    cache = BoundedCache.for_model(model, config)
    runner = CachedRunner(model, cache, chunk_size=args.clip_tokens, compile_decode=compile_decode)
    fill(cache, model, n)
    evict_to = args.budget - args.decode_tokens - 1
    evictions = []

    def ask(question):
        logits = runner.prefill(input_ids=question, evict_to=evict_to)
        evictions.extend(runner.last_evictions)
        return logits

    result = run_protocol(model, lambda clip: runner.prefill(inputs_embeds=clip), ask, runner.decode_step, args)
    return dict(
        result,
        cache_tokens=evictions[-1].tokens_after,  # after the question's eviction, before decoding
        evict_ms=sum(s.evict_ms for s in evictions),
        compiled=runner.decoder.compiled,
    )


def measure_plain(model, n: int, args) -> dict:
    cache = DynamicCache(config=model.config)
    fill(cache, model, n)

    def forward(**inputs):
        return model(**with_cache(model, cache), use_cache=True, logits_to_keep=1, **inputs).logits[:, -1]

    result = run_protocol(
        model,
        lambda clip: forward(inputs_embeds=clip),
        lambda question: forward(input_ids=question),
        lambda token: forward(input_ids=torch.tensor([[token]])),
        args,
    )
    # plain transformers has no budget: its cache keeps growing (cache tokens: after the decode steps), and
    # "clip at budget" is just the second clip
    return dict(result, cache_tokens=cache.get_seq_length(), evict_ms=0.0, compiled=False)


def row(model_name: str, variant: str, context: int, result: dict, weights: int, kv_token: int) -> dict:
    ms = statistics.median(result["times"])
    bytes_read = weights + kv_token * (result["cache_tokens"] + 1)
    sum_rate, mv_rate = result["bandwidth"]
    bound_ms = bytes_read / sum_rate * 1000
    mv_bound_ms = bytes_read / mv_rate * 1000
    return {
        "model": model_name,
        "variant": variant,
        "context_tokens": context,
        "cache_tokens": result["cache_tokens"],
        "decode_ms_per_token": round(ms, 2),
        "bytes_read_per_token": bytes_read,
        "bandwidth_gb_s": round(sum_rate / 1e9, 2),
        "bound_ms": round(bound_ms, 2),
        "x_bound": round(ms / bound_ms, 2),
        "mv_bandwidth_gb_s": round(mv_rate / 1e9, 2),
        "mv_bound_ms": round(mv_bound_ms, 2),
        "x_mv_bound": round(ms / mv_bound_ms, 2),
        "ttft_ms": round(result["ttft_ms"], 1),
        "evict_ms": round(result["evict_ms"], 1),
        "evict_share_of_ttft": round(result["evict_ms"] / result["ttft_ms"], 3),
        "clip_ms": round(result["clip_ms"], 1),
        "clip_at_budget_ms": round(result["clip_at_budget_ms"], 1),
        "first_step_ms": round(result["first_step_ms"], 1),
        "compiled": result["compiled"],
    }


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.2), squeeze=False)
    for ax, model_name in zip(axes[0], models, strict=True):
        mine = [r for r in rows if r["model"] == model_name]
        for variant in dict.fromkeys(r["variant"] for r in mine):
            points = [r for r in mine if r["variant"] == variant]
            x = [r["context_tokens"] for r in points]
            ax.plot(x, [r["decode_ms_per_token"] for r in points], marker="o", label=variant)
        bounded = [r for r in mine if r["variant"] == "inf-mllm"]
        if bounded:
            x = [r["context_tokens"] for r in bounded]
            ax.plot(x, [r["bound_ms"] for r in bounded], "k--", label="bound, sum bandwidth (inf-mllm)")
            ax.plot(x, [r["mv_bound_ms"] for r in bounded], "k:", label="bound, mv bandwidth (inf-mllm)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context tokens seen")
        ax.set_ylabel("decode ms / token")
        ax.set_title(model_name)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["reference", "qwen2-vl-2b"], default="reference")
    parser.add_argument("--contexts", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    parser.add_argument("--policies", nargs="+", default=["inf-mllm", "streaming-llm"], help="bounded policies")
    parser.add_argument("--budget", type=int, default=2048, help="cache budget in tokens")
    parser.add_argument("--window", type=int, default=32, help="retrieval window l in tokens")
    parser.add_argument("--clip-tokens", type=int, default=256, help="embeddings per ingested clip")
    parser.add_argument("--decode-tokens", type=int, default=8, help="tokens timed per measurement (+1 warm-up)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (pin the process with taskset)")
    parser.add_argument("--plain-max", type=int, default=16384, help="largest context for plain / before / full")
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=VARIANTS,
        default=list(VARIANTS),
        help="which rows to run: plain transformers, the previous path, compiled inf-mllm without the CPU kernels,"
        " full, the compiled bounded policies, eager",
    )
    parser.add_argument("--out", type=Path, default=Path("out"), help="folder for decode.csv (appended) and .png")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)

    kernels = kernels_ready()  # built before any row is timed
    print(f"CPU decode kernels: {'on' if kernels else 'off'}", flush=True)
    print(f"loading {args.model} ({args.threads} thread(s)) ...", flush=True)
    model = build_model(args.model)
    weights, kv_token = weight_bytes(model), kv_bytes_per_token(model)
    small = [n for n in args.contexts if n <= args.plain_max]
    wanted = set(args.variants)
    jobs = [(v, n) for v in ("plain", "before") if v in wanted for n in small]
    if "no-kernels" in wanted and kernels:
        jobs += [("tune without kernels", 0)] + [("inf-mllm no kernels", n) for n in args.contexts]
    jobs += [("tune", 0)]
    jobs += [("full", n) for n in small if "full" in wanted]
    jobs += [(p, n) for n in args.contexts for p in args.policies if "bounded" in wanted]
    jobs += [("inf-mllm eager", n) for n in args.contexts if "eager" in wanted]
    rows = []
    with torch.inference_mode():
        for variant, n in tqdm(jobs, desc=args.model, unit="run"):
            if variant == "plain":
                use_cpu_kernels(False)  # stock transformers: its SDPA, not the kernels
                result = measure_plain(model, n, args)
                use_cpu_kernels(True)
            elif variant == "before":
                use_cpu_kernels(False)
                result = measure_bounded(model, "inf-mllm", "dynamic", False, n, args)
                use_cpu_kernels(True)
            elif variant == "tune without kernels":
                use_cpu_kernels(False)
                tune_linear_layouts(model)
                continue
            elif variant == "tune":
                use_cpu_kernels(True)
                tqdm.write(f"one-row products per weight shape: {tune_linear_layouts(model)}")
                continue
            elif variant == "inf-mllm no kernels":
                result = measure_bounded(model, "inf-mllm", "static", True, n, args)
            elif variant == "full":
                result = measure_bounded(model, "full", "static", False, n, args)
            elif variant == "inf-mllm eager":
                result = measure_bounded(model, "inf-mllm", "static", False, n, args)
            else:
                result = measure_bounded(model, variant, "static", True, n, args)
            context = n + 2 * args.clip_tokens + QUESTION_TOKENS  # tokens the stream has seen when decoding starts
            rows.append(row(args.model, variant, context, result, weights, kv_token))
            tqdm.write(str(rows[-1]))
    path = args.out / "decode.csv"
    if path.exists() and path.open().readline().strip() != ",".join(rows[0]):
        kept = path.with_name(f"decode.{int(time.time())}.csv")
        path.rename(kept)  # an older version's columns: keep it, start a new file
        print(f"{path} had other columns; moved it to {kept}")
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        if new:
            writer.writeheader()
        writer.writerows(rows)
    plot(_read(path), args.out / "decode.png")
    print(f"wrote {path} and {args.out / 'decode.png'}")


def _read(path: Path) -> list[dict]:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for key in ("context_tokens", "decode_ms_per_token", "bound_ms", "mv_bound_ms"):
            r[key] = float(r[key])
    return rows


if __name__ == "__main__":
    main()
