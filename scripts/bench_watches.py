"""Yes/no watches: what a check costs against a full answer, and whether p_yes separates on the reference LM.

    python scripts/bench_watches.py                        # cost on the reference LM, separation on a book
    python scripts/bench_watches.py --part cost --model qwen2-vl-2b

Cost: a stream's cache filled to the budget; a check (one forward of the yes/no question, taken out again:
`CachedRunner.peek`) against a full answer (question prefill + `--answer-tokens` decoded tokens), and a
256-token clip at the budget. Checks per second this device sustains beside real-time ingestion of one
stream of `--clip-seconds` clips: the time the clips leave free, divided by a check's time.

Separation: a text stream (timed clips of a book, `--clip-tokens` each) in which a planted sentence appears
in clips [a, b) (the thing is in view for that stretch); the watch asks about it after every clip. Checks
before a are labelled no, those in [a, b) yes (after b the sentence is only a memory: left out). ROC AUC of
p_yes over those checks, per policy, beside full attention, over `--samples` books/offsets/sentences.
Writes out/bench_watches_cost.csv and out/bench_watches_separation.csv.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.bounded_cache import BoundedCache  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from cache.cpu.layouts import tune_linear_layouts  # noqa: E402
from cache.runner import CachedRunner  # noqa: E402
from model.verdict import YesNo, check_question, yes_probability  # noqa: E402
from scripts.bench_streams import median_ms, write_csv  # noqa: E402

PLANTS = [  # (sentence shown in the stretch, the watch's question)
    ("A red bicycle is leaning against the garden gate.", "Is there a red bicycle at the gate?"),
    ("A man in a yellow raincoat is standing at the front door.", "Is a man in a yellow raincoat at the door?"),
    ("Smoke is rising from the kitchen window.", "Is there smoke coming from the kitchen?"),
    ("A white delivery van is parked in the driveway.", "Is a delivery van parked in the driveway?"),
]
BOOKS = ["paradise-lost", "hamlet", "king-lear", "britannica"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--part", choices=["cost", "separation"], nargs="+", default=["cost", "separation"])
    p.add_argument("--model", choices=["reference", "qwen2-vl-2b"], default="reference", help="cost part's model")
    p.add_argument("--budget", type=int, default=2048, help="cost part: tokens in the cache")
    p.add_argument("--answer-tokens", type=int, default=32, help="cost part: tokens of the full answer")
    p.add_argument("--clip-seconds", type=float, default=4.0, help="cost part: stream seconds a clip covers")
    p.add_argument("--repeats", type=int, default=7, help="cost part: timings per figure (median)")
    p.add_argument("--policies", nargs="+", default=["full", "inf-mllm", "window"], help="separation part")
    p.add_argument("--sep-budget", type=int, default=512, help="separation part: cache budget")
    p.add_argument("--clip-tokens", type=int, default=128, help="separation part: tokens per clip")
    p.add_argument("--clips", type=int, default=40, help="separation part: clips per stream")
    p.add_argument("--stretch", type=int, nargs=2, default=[24, 32], help="separation part: clips [a, b) planted")
    p.add_argument("--samples", type=int, default=4, help="separation part: streams (book, offset, sentence)")
    p.add_argument("--out", type=Path, default=Path("out"), help="folder for the CSVs")
    return p.parse_args(argv)


def chat_ids(tokenizer, question: str) -> torch.Tensor:
    """The question as a user turn followed by the assistant header: [1, T]."""
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )["input_ids"]
    return ids


# -- cost ------------------------------------------------------------------------------------------------


def cost_part(args) -> None:
    from scripts.bench_decode import build_model

    model = build_model(args.model)
    tune_linear_layouts(model)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    cache = BoundedCache.for_model(model, CacheConfig(budget=args.budget, recall=0))
    runner = CachedRunner(model, cache)
    with torch.inference_mode():
        runner.prefill(input_ids=torch.randint(100, vocab - 1, (1, args.budget + 256), generator=gen))
    question = torch.randint(100, vocab - 1, (1, 40), generator=gen)  # a yes/no question in a chat turn

    def check():
        runner.peek(input_ids=question)

    def answer():
        logits = runner.prefill(input_ids=question, evict_to=args.budget - args.answer_tokens)
        for _ in range(args.answer_tokens - 1):
            logits = runner.decode_step(int(logits.argmax(-1)))

    def clip():
        runner.prefill(input_ids=torch.randint(100, vocab - 1, (1, 256), generator=gen))

    with torch.inference_mode():
        check_ms = median_ms(check, args.repeats)
        answer_ms = median_ms(answer, max(3, args.repeats // 2))
        clip_ms = median_ms(clip, max(3, args.repeats // 2))
    free_s = max(args.clip_seconds - clip_ms / 1000, 0.0)
    row = {
        "model": args.model,
        "budget": args.budget,
        "threads": torch.get_num_threads(),
        "check_ms": round(check_ms, 1),
        "answer_ms": round(answer_ms, 1),
        "answer_tokens": args.answer_tokens,
        "check_vs_answer": round(check_ms / answer_ms, 3),
        "clip_256_ms": round(clip_ms, 1),
        "checks_per_s_beside_one_stream": round(free_s / args.clip_seconds / (check_ms / 1000), 2),
    }
    print(row)
    write_csv([row], args.out / f"bench_watches_cost_{args.model}.csv")


# -- separation ------------------------------------------------------------------------------------------


def separation_part(args) -> None:
    from quality.lm import load_text_lm
    from quality.reference import load_text

    lm = load_text_lm("reference")
    tokens = YesNo.of(lm.tokenizer)
    a, b = args.stretch
    rows = []
    with tqdm(total=args.samples * len(args.policies), desc="separation", unit="stream") as bar:
        for sample in range(args.samples):
            sentence, question = PLANTS[sample % len(PLANTS)]
            book = lm.encode(load_text(BOOKS[sample % len(BOOKS)]))
            offset = 2000 + 7919 * sample % max(len(book) - args.clips * args.clip_tokens - 2000, 1)
            planted = lm.encode(" " + sentence + " ")
            check = chat_ids(lm.tokenizer, check_question(question))
            for policy in args.policies:
                config = CacheConfig(policy=policy, budget=args.sep_budget, window=32, recall=0)
                runner = CachedRunner(lm.model, BoundedCache.for_model(lm.model, config))
                for k in range(args.clips):
                    start = offset + k * args.clip_tokens
                    clip = book[start : start + args.clip_tokens]
                    if a <= k < b:
                        middle = len(clip) // 2
                        clip = clip[:middle] + planted + clip[middle:]
                    with torch.inference_mode():
                        runner.prefill(input_ids=torch.tensor([clip]))
                        if k >= 2 and k < b:
                            p_yes = yes_probability(runner.peek(input_ids=check), tokens)
                            rows.append(
                                {"sample": sample, "policy": policy, "clip": k, "yes": int(k >= a), "p_yes": p_yes}
                            )
                bar.update(1)
    write_csv(rows, args.out / "bench_watches_checks.csv")
    summary = []
    for policy in args.policies:
        mine = [r for r in rows if r["policy"] == policy]
        per_sample = [roc_auc([r for r in mine if r["sample"] == s]) for s in range(args.samples)]
        summary.append(
            {
                "policy": policy,
                "budget": args.sep_budget,
                "stream_tokens": args.clips * args.clip_tokens,
                "auc_pooled": round(roc_auc(mine), 3),
                "auc_per_sample": " ".join(f"{x:.2f}" for x in per_sample),
                "mean_p_yes_yes": round(statistics.mean(r["p_yes"] for r in mine if r["yes"]), 3),
                "mean_p_yes_no": round(statistics.mean(r["p_yes"] for r in mine if not r["yes"]), 3),
            }
        )
        print(summary[-1])
    write_csv(summary, args.out / "bench_watches_separation.csv")


def roc_auc(rows: list[dict]) -> float:
    """P(p_yes of a yes check > p_yes of a no check), ties counted half (the Mann-Whitney statistic)."""
    yes = [r["p_yes"] for r in rows if r["yes"]]
    no = [r["p_yes"] for r in rows if not r["yes"]]
    wins = sum((y > n) + 0.5 * (y == n) for y in yes for n in no)
    return wins / (len(yes) * len(no))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if "cost" in args.part:
        cost_part(args)
    if "separation" in args.part:
        separation_part(args)


if __name__ == "__main__":
    main()
