"""The peer library on the same samples: NVIDIA kvpress 0.5.5 (SnapKV and StreamingLLM presses) on the
reference model, question-aware needles exactly as scripts/bench_quality.py builds them.

kvpress needs transformers < 5.3, so it runs in its own virtual environment:

    bash scripts/setup_kvpress.sh                                   # .venv-kvpress (kvpress 0.5.5, transformers 5.2)
    .venv-kvpress/bin/python scripts/kvpress_side_by_side.py        # writes out/quality/kvpress.{csv,md}

kvpress compresses once, at prefill: the whole prompt (text + cue) is prefilled under the press, which
keeps `budget - 16` tokens per KV head (the same count our question-aware protocol keeps), then the answer
is teacher-forced on the compressed cache at the original positions (kvpress does not re-rotate). It has
no streaming mode, so the stream protocol has no kvpress column.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.forward_args import with_cache  # noqa: E402
from quality import report  # noqa: E402
from quality.needle import ANSWER_HEADROOM, benchmark_sample  # noqa: E402
from quality.reference import load_text, require_reference  # noqa: E402


class Encoder:
    """The part of quality.lm.TextLM that building samples needs."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False).input_ids


def score(model, press, prompt: list[int], answer: list[int]) -> tuple[bool, float]:
    from transformers import DynamicCache

    cache = DynamicCache()
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        if press is None:
            out = model(input_ids=ids, **with_cache(model, cache), use_cache=True, logits_to_keep=1)
        else:
            with press(model):
                out = model(input_ids=ids, **with_cache(model, cache), use_cache=True, logits_to_keep=1)
        logits, exact, total = out.logits[0, -1], True, 0.0
        for i, token in enumerate(answer):
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            total += float(logprobs[token])
            exact = exact and int(logprobs.argmax()) == token
            if i + 1 < len(answer):
                position = torch.tensor([[len(prompt) + i]])
                out = model(input_ids=torch.tensor([[token]]), position_ids=position, **with_cache(model, cache))
                logits = out.logits[0, -1]
    return exact, total / len(answer)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", default="paradise-lost")
    parser.add_argument("--contexts", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--budget", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("out/quality"))
    args = parser.parse_args(argv)
    import kvpress
    import transformers
    from kvpress import SnapKVPress, StreamingLLMPress
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = require_reference()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa").eval()
    print(f"kvpress {kvpress.__version__ if hasattr(kvpress, '__version__') else '?'}, "
          f"transformers {transformers.__version__}, {folder.name}")  # fmt: skip
    encoder, text = Encoder(tokenizer), load_text(args.text)
    rows = []
    jobs = [(c, i) for c in args.contexts for i in range(args.samples)]
    for context, index in tqdm(jobs, desc="kvpress", unit="sample"):
        sample = benchmark_sample(encoder, text, context, index, args.budget, args.seed)
        prompt = sample.context_ids + sample.cue_ids
        ratio = 1 - (args.budget - ANSWER_HEADROOM) / len(prompt)
        presses = {
            "kvpress full (no press)": None,
            "kvpress snapkv": SnapKVPress(compression_ratio=ratio, window_size=32, kernel_size=7),  # as ours
            "kvpress streaming-llm": StreamingLLMPress(compression_ratio=ratio),
        }
        for name, press in presses.items():
            exact, logprob = score(model, press, prompt, sample.answer_ids)
            rows.append({"protocol": "question-aware", "policy": name, "context_tokens": context, "sample": index,
                         "exact": int(exact), "logprob": round(logprob, 4)})  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    report.write_csv(rows, args.out / "kvpress.csv")
    table = report.needle_table(report.summarize_needles(rows), "question-aware", args.budget)
    (args.out / "kvpress.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
