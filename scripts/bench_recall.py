"""What searching the host store costs as the stream grows: one question's ranking against the store size.

The store is filled with random keys and values of the model's shape (ranking cost depends on sizes, not
values), then a 12-token question's queries rank it: stage 1 (Quest bounds over every block), stage 2
(attention mass over the best 512 blocks' keys), and reading back the 8 blocks that a 256-token recall
brings. Beside it, the same question's prefill on the real model over a budget + recall cache: the time
recall adds to, and the yardstick for "cheap".

    python scripts/bench_recall.py --tokens 2560 10240 25600 102400
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.bounded_cache import BoundedCache  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from cache.rope import KeyRotator  # noqa: E402
from cache.runner import CachedRunner  # noqa: E402
from cache.store.host_store import HostStore  # noqa: E402
from cache.store.kv_quant import QUANT_MODES  # noqa: E402
from quality import report  # noqa: E402
from quality.lm import REFERENCE, load_text_lm  # noqa: E402

QUESTION = 12


def _median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1e3)
    return sorted(times)[len(times) // 2]


def question_prefill_ms(lm, budget: int, recall: int, repeats: int) -> float:
    """A QUESTION-token prefill over a cache of budget + recall tokens (what the answer's TTFT starts with)."""
    config = CacheConfig(policy="window", budget=budget + recall, window=32)
    cache = BoundedCache.for_model(lm.model, config)
    runner = CachedRunner(lm.model, cache, lm.position_dims, chunk_size=1024)
    gen = torch.Generator().manual_seed(0)
    vocab = lm.model.config.vocab_size
    with torch.inference_mode():
        runner.prefill(input_ids=torch.randint(0, vocab, (1, budget + recall), generator=gen))

        def one():
            runner.prefill(input_ids=torch.randint(0, vocab, (1, QUESTION), generator=gen))
            cache.drop_newest(QUESTION)

        return _median_ms(one, repeats)


def ranking_ms(model_config, rotator, tokens: int, quant: str, recall: int, block: int, repeats: int) -> dict:
    layers, kv_heads = model_config.num_hidden_layers, model_config.num_key_value_heads
    q_heads = model_config.num_attention_heads
    dim = model_config.hidden_size // q_heads
    store = HostStore(2**40, block, rotator, quant=quant)
    gen = torch.Generator().manual_seed(1)
    for first in range(0, tokens, 256):
        count = min(256, tokens - first)
        keys = [torch.randn(kv_heads, count, dim, generator=gen) for _ in range(layers)]
        values = [torch.randn(kv_heads, count, dim, generator=gen) for _ in range(layers)]
        positions = torch.arange(first, first + count).view(-1, 1)
        store.archive(keys, values, positions, positions, first)
    queries = torch.randn(layers, q_heads, QUESTION, dim, generator=gen)
    query_positions = torch.arange(tokens, tokens + QUESTION)
    bounds_ms = _median_ms(lambda: store.bounds(queries, query_positions), repeats)
    ranked: list = []
    rank_ms = _median_ms(lambda: ranked.__setitem__(slice(None), store.rank(queries, query_positions)), repeats)
    best = ranked[: recall // block]
    read_ms = _median_ms(lambda: [store.load(b, torch.float32) for b in best], repeats)
    return {
        "store_tokens": store.tokens,
        "store_mib": round(store.bytes / 2**20, 1),
        "blocks": len(store.blocks),
        "bounds_ms": round(bounds_ms, 1),
        "rank_ms": round(rank_ms, 1),
        "read_back_ms": round(read_ms, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=REFERENCE)
    parser.add_argument("--tokens", type=int, nargs="+", default=[2560, 10240, 25600, 102400])
    parser.add_argument("--budget", type=int, default=512)
    parser.add_argument("--recall", type=int, default=256)
    parser.add_argument("--block", type=int, default=CacheConfig.block)
    parser.add_argument("--store-quant", choices=list(QUANT_MODES), default="none")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("out/recall_cost"))
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    lm = load_text_lm(args.model)
    rotator = KeyRotator.from_model(lm.model)
    prefill = question_prefill_ms(lm, args.budget, args.recall, args.repeats)
    rows = []
    for tokens in tqdm(args.tokens, desc="store sizes", unit="size"):
        row = ranking_ms(lm.model.config, rotator, tokens, args.store_quant, args.recall, args.block, args.repeats)
        rows.append({**row, "question_prefill_ms": round(prefill, 1), "rank_share": round(row["rank_ms"] / prefill, 2)})
    args.out.mkdir(parents=True, exist_ok=True)
    report.write_csv(rows, args.out / "recall_cost.csv")
    machine = f"{platform.machine()}, {torch.get_num_threads()} threads, store {args.store_quant}"
    print(f"\n{lm.name} on {machine}; a {QUESTION}-token question's prefill over {args.budget + args.recall} "
          f"cached tokens: {prefill:.0f} ms")  # fmt: skip
    print("| store tokens | MiB | blocks | stage 1 ms | stage 1 + 2 ms | read back 8 blocks ms | x question prefill |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['store_tokens']:,} | {r['store_mib']:,} | {r['blocks']:,} | {r['bounds_ms']} | {r['rank_ms']} | "
              f"{r['read_back_ms']} | {r['rank_share']} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
