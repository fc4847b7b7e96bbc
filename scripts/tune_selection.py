"""The measurements behind inf-mllm's defaults: question-aware needle retrieval for a grid of selections
(pooling mode and size, attention bias) on the reference model, beside full attention and snapkv.

Tune on texts the benchmark does not use by default (king-lear, hamlet); check the chosen default on
paradise-lost with scripts/bench_quality.py. One prefill per sample serves the whole grid.

    python scripts/tune_selection.py --text king-lear --context 2048 --seed 100      # budget 1/4 of the context
    python scripts/tune_selection.py --text king-lear --context 4096 --seed 100      # 1/8
    python scripts/tune_selection.py --text hamlet --context 8192 --seed 200          # 1/16, the trained context
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.config import CacheConfig  # noqa: E402
from cache.policies import InfMllmSettings  # noqa: E402
from quality import report  # noqa: E402
from quality.lm import load_text_lm  # noqa: E402
from quality.needle import make_samples, question_aware  # noqa: E402
from quality.reference import TEXTS, ReferenceMissing, load_text  # noqa: E402

SELECTIONS = [("max", 1), ("max", 3), ("max", 7), ("max", 15), ("max", 31), ("avg", 7), ("avg", 15)]
SELECTIONS += [("span", 4), ("span", 8), ("span", 16)]


def grid(budget: int, biases: list[float]) -> dict[str, CacheConfig]:
    configs = {"full": CacheConfig(policy="full", budget=budget), "snapkv": CacheConfig(policy="snapkv", budget=budget)}
    for bias in biases:
        for mode, size in SELECTIONS:
            name = f"inf-mllm b={bias:g} {'none (Algorithm 1)' if size == 1 else f'{mode} {size}'}"
            settings = InfMllmSettings(bias=bias, pool=size, pool_mode=mode)
            configs[name] = CacheConfig(policy="inf-mllm", budget=budget, policy_settings=settings)
    return configs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", choices=TEXTS, default="king-lear")
    parser.add_argument("--context", type=int, default=2048, help="context tokens per sample")
    parser.add_argument("--budget", type=int, default=512)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--seed", type=int, default=100, help="sample i uses seed + i")
    parser.add_argument("--biases", type=float, nargs="+", default=[1e-3, 0.0, 1e-2, 0.1])
    parser.add_argument("--out", type=Path, default=Path("out/quality/tune"))
    args = parser.parse_args(argv)
    try:
        lm = load_text_lm()
        text = load_text(args.text)
    except ReferenceMissing as e:
        print(f"tune_selection: {e}", file=sys.stderr)
        return 2
    configs = grid(args.budget, args.biases)
    rows = []
    for i in tqdm(range(args.samples), desc=f"{args.text} {args.context} tok", unit="sample"):
        sample = make_samples(lm, text, args.context, 1, seed=args.seed + i, min_distance=args.budget)[0]
        for name, result in question_aware(lm, sample, configs).items():
            rows.append({"policy": name, "context_tokens": args.context, "sample": i, "protocol": "question-aware",
                         "exact": int(result.exact), "logprob": round(result.logprob, 4)})  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"tune_{args.text}_{args.context}"
    report.write_csv(rows, args.out / f"{stem}.csv")
    summary = report.summarize_needles(rows)
    table = report.needle_table(summary, "question-aware", args.budget)
    (args.out / f"{stem}.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
