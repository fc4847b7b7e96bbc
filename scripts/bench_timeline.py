"""The timeline on the reference LM: do answers cite the right moment, and do timeline notes reach past both KV
tiers? A text stream (a book in timed clips of 256 tokens, 4 s each) with a planted fact ("The X of Y is Z.")
at a known clip, beyond the budget from the end (5x and 20x the budget).

Citation (inf-mllm, budget 512, recall 256, a store that holds everything): the question's cue recalls from
the store and is prefilled; its evidence (model/evidence.py) is scored: is the planted clip cited at all
(recall or attention), and is it the clip the question attended to most? And with a timeline holding one
earlier answer per sample (the fact) among distractors, is `history`'s first hit (search of the question's
words) the planted answer?

Reach: the fact evicted from both KV tiers (inf-mllm, budget 512, no host store) but present in the timeline
as an earlier answer: needle accuracy (the answer's tokens are the greedy continuation) with timeline notes
in front of the cue, without them, and under full attention (the whole stream kept: the ceiling).
Writes out/bench_timeline.csv.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.bounded_cache import BoundedCache  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from cache.runner import CachedRunner  # noqa: E402
from cache.store.recall import recall_for_prompt  # noqa: E402
from model.evidence import ClipIndex, attended, recalled  # noqa: E402
from quality.lm import load_text_lm  # noqa: E402
from quality.needle import benchmark_sample  # noqa: E402
from quality.reference import load_text  # noqa: E402
from scripts.bench_streams import write_csv  # noqa: E402
from timeline import TimelineConfig, TimelineReader, TimelineWriter  # noqa: E402
from timeline.notes import TimelineNotes  # noqa: E402

CLIP_TOKENS, CLIP_SECONDS, HEADROOM = 256, 4.0, 64


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--budget", type=int, default=512)
    p.add_argument("--factors", type=int, nargs="+", default=[5, 20], help="stream length / budget")
    p.add_argument("--samples", type=int, default=4, help="needles per factor")
    p.add_argument("--text", default="paradise-lost")
    p.add_argument("--out", type=Path, default=Path("out"))
    return p.parse_args(argv)


def stream_into(runner: CachedRunner, context: list[int]) -> ClipIndex:
    """The context in clips that each evict, each clip timed [4k, 4k + 4) s; their index for the evidence."""
    index = ClipIndex()
    for k, start in enumerate(range(0, len(context), CLIP_TOKENS)):
        first = runner.cache.tokens_seen
        runner.prefill(input_ids=torch.tensor([context[start : start + CLIP_TOKENS]]))
        index.add(first, runner.cache.tokens_seen, k * CLIP_SECONDS, (k + 1) * CLIP_SECONDS)
    return index


def exact_answer(runner: CachedRunner, prompt: list[int], answer: list[int], evict_to: int | None) -> bool:
    """Whether greedy decoding after `prompt` gives exactly `answer`."""
    logits = runner.prefill(input_ids=torch.tensor([prompt]), evict_to=evict_to)
    for i, token in enumerate(answer):
        if int(logits.argmax(-1)) != token:
            return False
        if i + 1 < len(answer):
            logits = runner.decode_step(token)
    return True


def citation(lm, sample, budget: int) -> dict:
    config = CacheConfig(policy="inf-mllm", budget=budget, recall=256, store_bytes=2**30)
    runner = CachedRunner(lm.model, BoundedCache.for_model(lm.model, config), chunk_size=CLIP_TOKENS)
    index = stream_into(runner, sample.context_ids)
    planted = (sample.needle_start // CLIP_TOKENS) * CLIP_SECONDS
    cue = torch.tensor([sample.cue_ids])
    stats = recall_for_prompt(runner, input_ids=cue)
    runner.prefill(input_ids=cue, evict_to=budget - HEADROOM + stats.tokens)
    recall = recalled(index, list(stats.spans))
    attention = attended(index, runner.cache.kv_layers, top=3)
    return {
        "cited": any(e.start == planted for e in recall + attention),
        "recalled": any(e.start == planted for e in recall),
        "top_attention": bool(attention) and attention[0].start == planted,
    }


def timeline_with(samples, lm, folder: Path) -> Path:
    """A timeline holding one earlier answer per sample (its fact), stream `s`, written through the real writer."""
    path = folder / "timeline.sqlite"
    writer = TimelineWriter(TimelineConfig(path))
    writer.start()
    now = time.time() - 3600
    for k, sample in enumerate(samples):
        head = sample.needle.split(" is ")[0]
        writer(
            {"type": "answer", "t_wall": now + k, "stream": "s", "round": k + 1, "stream_time": 4.0 * (k + 1),
             "question": f"What is {head[0].lower() + head[1:]}?", "answer": sample.needle, "auto": False}
        )  # fmt: skip
    writer.close()
    return path


def reach(lm, sample, budget: int, notes: TimelineNotes, reader: TimelineReader, row_id: int) -> dict:
    cue_text = lm.tokenizer.decode(sample.cue_ids)
    question = cue_text.replace("Remember:", "").strip()
    prompt, cited = notes.prompt(question, "s")
    noted = lm.encode("\n" + prompt.rsplit("\n\n", 1)[0] + "\n") + sample.cue_ids if cited else sample.cue_ids
    results = {"history_first_hit": bool(found := reader.search(question, limit=1)) and found[0].id == row_id}
    for name, prompt_ids, policy in (("notes_on", noted, "inf-mllm"), ("notes_off", sample.cue_ids, "inf-mllm"),
                                     ("full_attention", sample.cue_ids, "full")):  # fmt: skip
        config = CacheConfig(policy=policy, budget=budget, recall=0)
        runner = CachedRunner(lm.model, BoundedCache.for_model(lm.model, config), chunk_size=CLIP_TOKENS)
        stream_into(runner, sample.context_ids)
        evict_to = budget - HEADROOM if policy != "full" else None
        results[name] = exact_answer(runner, prompt_ids, sample.answer_ids, evict_to)
    return results


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    lm = load_text_lm("reference")
    text = load_text(args.text)
    rows = []
    with tqdm(total=len(args.factors) * args.samples, desc="timeline", unit="needle") as bar, torch.inference_mode():
        for factor in args.factors:
            samples = [benchmark_sample(lm, text, factor * args.budget, i, args.budget) for i in range(args.samples)]
            with tempfile.TemporaryDirectory() as folder:
                path = timeline_with(samples, lm, Path(folder))
                notes, reader = TimelineNotes(path, limit=3), TimelineReader(path)
                for k, sample in enumerate(samples):
                    row = {"factor": factor, "sample": k, "needle": sample.needle}
                    row |= citation(lm, sample, args.budget)
                    row |= reach(lm, sample, args.budget, notes, reader, row_id=k + 1)
                    rows.append(row)
                    tqdm.write(str(row))
                    bar.update(1)
                notes.close()
                reader.close()
    write_csv(rows, args.out / "bench_timeline.csv")
    keys = ("cited", "recalled", "top_attention", "history_first_hit", "notes_on", "notes_off", "full_attention")
    for factor in args.factors:
        mine = [r for r in rows if r["factor"] == factor]
        print(f"{factor}x budget: " + ", ".join(f"{k} {statistics.mean(r[k] for r in mine):.2f}" for k in keys))


if __name__ == "__main__":
    main()
