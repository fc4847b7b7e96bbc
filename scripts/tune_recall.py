"""How well does the host store's index find a needle? Ranks of the needle's block under several ways of
reducing Quest's per-(block, layer, head) bounds to one choice, shared by all layers or made per layer.

Each sample's text is streamed in clips through a recall-enabled cache (the stream protocol of
quality/needle.py), the cue is run as a probe, and the store's blocks are ranked. A needle is "hit" when a
block holding its answer tokens ranks within the top `recall / block` blocks that recall would bring back.
No decoding: this isolates the index from the answer. Texts default to ones the quality benchmark does not use.

    python scripts/tune_recall.py --text hamlet --contexts 2048 5120 --samples 8
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.bounded_cache import BoundedCache  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from cache.runner import CachedRunner  # noqa: E402
from quality import report  # noqa: E402
from quality.lm import REFERENCE, load_text_lm  # noqa: E402
from quality.needle import benchmark_sample  # noqa: E402
from quality.reference import TEXTS, load_text  # noqa: E402


def standardised(scores: torch.Tensor) -> torch.Tensor:
    return (scores - scores.mean(dim=0)) / (scores.std(dim=0) + 1e-6)


def _top_mean(z: torch.Tensor, share: float) -> torch.Tensor:
    flat = z.flatten(1)
    return flat.topk(max(1, int(flat.shape[1] * share)), dim=1).values.mean(dim=1)


# Each maps the bounds [NB, L, H] to one score per block.
SHARED = {
    "z-mean": lambda s: standardised(s).mean(dim=(1, 2)),
    "raw-mean": lambda s: s.mean(dim=(1, 2)),
    "z-max-head": lambda s: standardised(s).amax(dim=2).mean(dim=1),
    "z-top10%": lambda s: _top_mean(standardised(s), 0.10),
    "z-top25%": lambda s: _top_mean(standardised(s), 0.25),
    "z-late-half": lambda s: standardised(s)[:, s.shape[1] // 2 :].mean(dim=(1, 2)),
    "z-early-half": lambda s: standardised(s)[:, : s.shape[1] // 2].mean(dim=(1, 2)),
}


def exact_scores(cache, blocks, queries, positions) -> dict[str, torch.Tensor]:
    """Scores from the stored keys themselves (what a second, exact stage over a shortlist would compute):
    the best logit in the block, and the softmax mass the block gets over the whole store, RoPE undone."""
    store = cache.store
    keys = torch.cat([store.load(b, torch.float32)[0] for b in blocks], dim=2)  # [L, H, N, D]
    stored_pos = torch.cat([b.positions[:, 0] for b in blocks])
    layers, kv_heads, n, dim = keys.shape
    plain_keys = store.rotator.rotate(keys, -stored_pos.view(1, 1, n).expand(layers, kv_heads, n))
    q_heads, rows = queries.shape[1], queries.shape[2]
    q = store.rotator.rotate(queries.float(), -positions.view(1, 1, rows).expand(layers, q_heads, rows))
    q = q.view(layers, kv_heads, (q_heads // kv_heads) * rows, dim)
    logits = torch.einsum("lhkd,lhnd->lhkn", q, plain_keys) / dim**0.5  # [L, H, K, N]
    owner = torch.cat([torch.full((b.tokens,), i) for i, b in enumerate(blocks)])
    nb = len(blocks)

    def per_block(x, reduce):  # [..., N] -> [..., NB]
        out = torch.full((*x.shape[:-1], nb), -torch.inf if reduce == "amax" else 0.0)
        return out.scatter_reduce(-1, owner.expand_as(x), x, reduce=reduce, include_self=reduce != "amax")

    best = per_block(logits, "amax").amax(dim=2)  # [L, H, NB]
    mass = per_block(logits.softmax(dim=-1), "sum")  # [L, H, K, NB]
    last = per_block(logits.view(layers, kv_heads, -1, rows, n)[:, :, :, -1].softmax(dim=-1), "sum")
    return {
        "exact-max z-mean": standardised(best.permute(2, 0, 1)).mean(dim=(1, 2)),
        "exact-mass mean": mass.mean(dim=(0, 1, 2)),
        "exact-mass last row": last.mean(dim=(0, 1, 2)),
        "exact-mass max-head": mass.mean(dim=2).amax(dim=1).mean(dim=0),
    }


def needle_ranks(lm, sample, config: CacheConfig, clip: int) -> dict:
    """Streams the sample, probes with the cue; the best rank of a block holding the answer, per variant."""
    cache = BoundedCache.for_model(lm.model, config)
    runner = CachedRunner(lm.model, cache, lm.position_dims, chunk_size=clip)
    context = sample.context_ids
    for start in range(0, len(context), clip):
        runner.prefill(input_ids=torch.tensor([context[start : start + clip]]))
    cache.archive_new()
    queries, positions = runner.probe(input_ids=torch.tensor([sample.cue_ids]))
    blocks = list(cache.store.blocks)
    # the needle is newline + head + answer + "." + newline from needle_start; the cue ends with the head
    head = len(sample.cue_ids) - len(lm.encode("\n") + lm.encode("Remember:") + lm.encode("\n"))
    answer_at = sample.needle_start + len(lm.encode("\n")) + head
    answer = range(answer_at, answer_at + len(sample.answer_ids))
    targets = torch.tensor([any(b.first <= i < b.first + b.tokens for i in answer) for b in blocks])
    bounds = cache.store.bounds(queries, positions)  # [NB, L, H]
    ranks = {}
    for name, reduce in SHARED.items():
        order = reduce(bounds).argsort(descending=True)
        ranks[name] = int(targets[order].nonzero()[0])
    for name, score in exact_scores(cache, blocks, queries, positions).items():
        ranks[name] = int(targets[score.argsort(descending=True)].nonzero()[0])
    z_mean = SHARED["z-mean"](bounds)
    for shortlist in (32, 64):
        keep = z_mean.argsort(descending=True)[:shortlist].sort().values
        sub = [blocks[i] for i in keep.tolist()]
        score = exact_scores(cache, sub, queries, positions)["exact-mass mean"]
        order = keep[score.argsort(descending=True)]
        hit = targets[order].nonzero()
        ranks[f"z-mean top {shortlist}, then exact mass"] = int(hit[0]) if len(hit) else len(blocks)
    per_layer = [int(targets[bounds[:, layer].mean(dim=1).argsort(descending=True)].nonzero()[0])
                 for layer in range(bounds.shape[1])]  # fmt: skip
    return {"blocks": len(blocks), **ranks, "per-layer": per_layer}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=REFERENCE)
    parser.add_argument("--text", choices=TEXTS, default="hamlet")
    parser.add_argument("--contexts", type=int, nargs="+", default=[2048, 5120])
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--budget", type=int, default=512)
    parser.add_argument("--recall", type=int, default=256)
    parser.add_argument("--block", type=int, default=CacheConfig.block)
    parser.add_argument("--policy", default="inf-mllm")
    parser.add_argument("--clip", type=int, default=256)
    parser.add_argument("--seed", type=int, default=500, help="500: not the benchmark's samples (seed 0)")
    parser.add_argument("--out", type=Path, default=Path("out/tune_recall"))
    args = parser.parse_args(argv)
    lm = load_text_lm(args.model)
    text = load_text(args.text)
    config = CacheConfig(policy=args.policy, budget=args.budget, recall=args.recall, block=args.block)
    chosen = args.recall // args.block
    rows, layer_hits = [], []
    jobs = [(n, i) for n in args.contexts for i in range(args.samples)]
    for context, index in tqdm(jobs, desc="needles", unit="sample"):
        sample = benchmark_sample(lm, text, context, index, args.budget, args.seed)
        ranks = needle_ranks(lm, sample, config, args.clip)
        per_layer = ranks.pop("per-layer")
        layer_hits.append([r < chosen for r in per_layer])
        rows.append({"context_tokens": context, "sample": index, **ranks,
                     "per-layer hit share": round(sum(r < chosen for r in per_layer) / len(per_layer), 3)})  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    report.write_csv(rows, args.out / "ranks.csv")
    print(f"\nneedle block hit in the top {chosen} (recall {args.recall} / block {args.block}), {args.text}:")
    print("| ranking | " + " | ".join(f"{n} tokens" for n in args.contexts) + " |")
    print("| --- |" + " --- |" * len(args.contexts))
    for name in [n for n in rows[0] if n not in ("context_tokens", "sample", "blocks")]:
        cells = []
        for n in args.contexts:
            mine = [r for r in rows if r["context_tokens"] == n]
            if name != "per-layer hit share":
                cells.append(f"{sum(r[name] < chosen for r in mine)}/{len(mine)} (median rank "
                             f"{sorted(r[name] for r in mine)[len(mine) // 2]})")  # fmt: skip
            else:
                cells.append(f"{sum(r[name] for r in mine) / len(mine):.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    by_layer = torch.tensor(layer_hits, dtype=torch.float).mean(dim=0)
    print("per-layer hit rate by layer:", " ".join(f"{v:.2f}" for v in by_layer.tolist()))
    print(f"wrote {args.out}/ranks.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
