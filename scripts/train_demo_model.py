"""Train the demo model (`--model demo`) from scratch on generated scenes, on the CPU, deterministically.

    python scripts/train_demo_model.py                      # the shipped weights: ~35 min on 2 CPU cores
    python scripts/train_demo_model.py --steps 50 --out /tmp/demo   # a quick look

Each training example is one stream conversation exactly as the streaming session builds it (model/adapters):
the system prompt, 1-8 clips of 4 frames at 1 frame/s (half of the examples 1 or 2 clips) from a random generated
stream (capture/scenes.py), and after some clips and always after the last one or two questions with their answers
from the ground truth
(quality/video_qa.py). Like the session, most streams keep only the visual tokens that changed (model/change.py),
at their true M-RoPE positions; some older clips lose a random share of their tokens, as eviction would take them,
but never the current picture (the newest version of each region), which the session pins. Half the streams are
placed as late in a long run: thousands of positions between the system prompt and the first clip, and some clips
tens of clips' positions after the one before, as a bounded cache leaves them after hours of stream (the first
weights, trained on 8 clips from position 0, lost the thing on screen after 180 clips).
The loss is on the answers (and the token that ends them), plus a per-token "seeing" loss: a linear head on the
vision tower's merged tokens (used in training only, never saved) names what lies under each token, a (kind,
colour) or the background, from the generator's own drawing. Without it the tower learnt backgrounds but not the
things on them in 42 minutes (colour now 50%); with it, colour now is right from step 750 on. And a "looking"
loss at the token that answers each question: linear heads (training only too) read which things are in view,
which were seen so far and which the question names from the second-last layer's output there, and which it
names and are in view (or were seen) from the last layer's. The fourth weights, trained without it, named the
thing on screen 78% of the time and answered "Is there ...?" at chance: they never learnt to look for what was
asked. No caption is drawn on a frame: the model must see.

Writes the checkpoint directory (`--out`, read by `load_model` like any other), `training.json` in it (the
config and the first steps' losses, which tests/model/test_demo_model.py reproduces), the loss log as CSV and the
loss curve as PNG.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import math
import multiprocessing
import pickle
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file from anywhere
from capture.scenes import COLOURS, KINDS, Thing, draw_thing, random_stream, render  # noqa: E402
from model.adapters.qwen2_vl import Qwen2VLAdapter  # noqa: E402
from model.change import ChangeConfig, ChangeTracker  # noqa: E402
from model.demo import DEMO_DIR, build_demo  # noqa: E402
from quality.video_qa import NOW_KINDS, PAST_KINDS, Question, matches, sample_question  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RECORDED_STEPS = 5  # losses of the first steps kept in training.json, for the reproducibility test


@dataclass
class TrainConfig:
    seed: int = 0
    steps: int = 2400
    batch: int = 16
    lr: float = 3e-3
    warmup: int = 100
    weight_decay: float = 0.01
    max_clips: int = 8
    short_share: float = 0.5
    clip_seconds: int = 4
    fps: int = 1
    frame: tuple[int, int] = (140, 84)  # what the demo processor makes of a 16:9 frame (width, height)
    drop_unchanged_share: float = 0.8  # streams ingested as the session does by default
    evict_share: float = 0.3  # older clips that lose a random share of their tokens
    ask_share: float = 0.35  # clips followed by questions (the last one always is)
    question_mix: tuple[float, ...] = (0.2, 0.27, 0.07, 0.08, 0.2, 0.09, 0.09)  # NOW_KINDS + PAST_KINDS
    eval_every: int = 250
    seeing_weight: float = 1.0  # the per-token loss that teaches the vision tower what lies under each token
    seeing_thing_weight: float = 5.0  # a token with a thing on it counts this many background tokens (they are rare)
    long_share: float = 0.5  # streams placed as late in a long run: the positions of what was evicted skipped
    long_lead: int = 6000  # at most this many positions between the system prompt and the first clip (as if evicted)
    long_skip_clips: int = 40  # at most this many evicted clips' positions skipped between two clips
    look_weight: float = 1.0  # the looking loss: what is in view, seen so far and named, read at each question
    look_layer: int = 3  # the decoder layer whose output the looking head reads (the last one then compares)


@dataclass
class Example:
    segments: list  # model.adapters.base.Segment, in conversation order
    answer_mask: list  # per segment: [T] bool, tokens whose next-token prediction is trained (None: none)
    kinds: list[str]
    seen: list  # per clip: [N_kept] long, the class of what lies under each kept visual token (0: background)
    skips: list  # per segment: the positions skipped before it (what the session evicted took them)
    looks: list  # per question: [5, THINGS] float: in view, seen so far, named, named and in view, named and seen
    # (the last three NaN for a question that is not a yes/no one)


# what a visual token can show: nothing (the background), a (kind, colour) pair, or a person
THING_CLASSES = ["background"] + [f"{c} {k}" for k in KINDS[:-1] for c in COLOURS] + ["person"]
MERGED_CELL = 28  # pixels of a frame under one merged visual token (patch 14, merged 2x2)


def thing_class(thing) -> int:
    return len(THING_CLASSES) - 1 if thing.kind == "person" else THING_CLASSES.index(f"{thing.colour} {thing.kind}")


# one thing of each class but the background, for asking which classes a yes/no question's name covers
_EXAMPLE_THINGS = [Thing(*c.split()[::-1], 0, 1) for c in THING_CLASSES[1:-1]] + [Thing("person", "red", 0, 1)]


def looks(stream, t: float, question: Question) -> torch.Tensor:
    """[5, classes but the background]: which kinds of thing are in view at `t`, which were seen up to `t`, which
    the question names if it is a yes/no one, and which it names and are in view, and named and were seen (the
    last three NaN for another question): the targets of the looking loss."""
    out = torch.zeros(5, len(THING_CLASSES) - 1)
    for row, things in enumerate((stream.visible(t), stream.things_until(t))):
        for thing in things:
            out[row, thing_class(thing) - 1] = 1.0
    if question.name is None:
        out[2:] = float("nan")
    else:
        out[2] = torch.tensor([float(matches(question.name)(x)) for x in _EXAMPLE_THINGS])
        out[3:] = out[2] * out[:2]
    return out


def token_classes(stream, times, width: int, height: int, group: int = 2) -> np.ndarray:
    """[len(times) // group, H / 28, W / 28] long: per merged visual token, the class of the thing that covers
    most of its cell in the token's frames (at least a tenth of it), else 0: the ground truth of seeing."""
    rows, cols = height // MERGED_CELL, width // MERGED_CELL
    out = np.zeros((len(times) // group, rows, cols), dtype=np.int64)
    for g in range(out.shape[0]):
        best = np.full((rows, cols), 0.1)
        for thing in {x for t in times[g * group : (g + 1) * group] for x in stream.visible(float(t))}:
            mask = np.zeros((height, width, 3), np.uint8)
            for t in times[g * group : (g + 1) * group]:
                if thing.on_screen(float(t)):
                    draw_thing(mask, thing, float(t))
            cover = mask.any(-1)[: rows * MERGED_CELL, : cols * MERGED_CELL]
            cover = cover.reshape(rows, MERGED_CELL, cols, MERGED_CELL).mean(axis=(1, 3))
            out[g][cover > best] = thing_class(thing)
            best = np.maximum(best, cover)
    return out


def make_example(rng: np.random.Generator, adapter: Qwen2VLAdapter, cfg: TrainConfig) -> Example:
    """One stream conversation with its answers (see the module's docstring)."""
    short = rng.random() < cfg.short_share  # one or two clips: cheap steps that teach seeing
    clips = int(rng.integers(1, 3 if short else cfg.max_clips + 1))
    stream = random_stream(rng, clips * cfg.clip_seconds + int(rng.integers(0, 8)))
    offset = float(cfg.clip_seconds * rng.integers(0, 250)) if rng.random() < 0.5 else 0.0
    tracker = ChangeTracker(ChangeConfig()) if rng.random() < cfg.drop_unchanged_share else None
    late = rng.random() < cfg.long_share  # late in a long run: far from the system prompt, clips between evicted
    layout = adapter.change_layout()
    built = []  # per clip: (segment, keep, times, ask)
    for i in range(clips):
        t0 = float(i * cfg.clip_seconds)
        times = t0 + np.arange(cfg.fps * cfg.clip_seconds) / cfg.fps
        frames = np.stack([render(stream, float(t), *cfg.frame) for t in times])
        segment = adapter.clip_segment(frames, t0 + offset, t0 + cfg.clip_seconds + offset)
        grid = segment.model_inputs["video_grid_thw"][0].tolist()
        keep = np.ones((grid[0], grid[1] // 2, grid[2] // 2), dtype=bool)
        if tracker is not None:
            keep = tracker.select(segment.view, layout, keyframe=i == 0).keep
        built.append((segment, keep, times, i == clips - 1 or rng.random() < cfg.ask_share))
    pinned = current_picture([keep for _, keep, _, _ in built])
    segments, masks, kinds, seen, looked = [adapter.conversation_prefix()], [None], [], [], []
    skips = [0]
    kinds_all = NOW_KINDS + PAST_KINDS
    end_ids = adapter.answer_end_ids()
    clip_positions = adapter.segment_position_ids(built[0][0], 0)[1]  # what one whole clip takes
    for i, (segment, keep, times, ask) in enumerate(built):
        if not ask and rng.random() < cfg.evict_share:  # eviction takes a share; the pinned current picture stays
            keep = keep & ((rng.random(keep.shape) < rng.uniform(0.2, 0.9)) | pinned[i])
        if not keep.all():
            segment = adapter.sparse_clip(segment, keep)
        if cfg.seeing_weight and keep.any():  # the seeing loss's labels, made only when it is trained
            classes = token_classes(stream, times, *cfg.frame)
            seen.append(torch.from_numpy(classes.reshape(-1)[keep.reshape(-1)]))
        skip = 0
        if late:
            skip = int(rng.integers(0, cfg.long_lead + 1)) if i == 0 else clip_positions * int(
                rng.integers(0, cfg.long_skip_clips + 1) if rng.random() < 0.5 else 0
            )  # fmt: skip
        segments.append(segment)
        masks.append(None)
        skips.append(skip)
        if not ask:
            continue
        for _ in range(int(rng.integers(1, 3))):
            kind = str(rng.choice(kinds_all, p=cfg.question_mix))
            question = sample_question(rng, stream, float(times[-1]), kind)
            segments.append(adapter.question_segment(question.text))
            masks.append(None)
            answer_ids = adapter.tokenizer(question.answer, add_special_tokens=False, return_tensors="pt")["input_ids"]
            answer = adapter.answer_segment(answer_ids)
            mask = torch.zeros(answer.num_tokens, dtype=torch.bool)
            mask[: answer.num_tokens - end_ids.shape[1] + 1] = True  # the answer and the token that ends it
            segments.append(answer)
            masks.append(mask)
            skips += [0, 0]
            kinds.append(question.kind)
            looked.append(looks(stream, float(times[-1]), question))
    return Example(segments, masks, kinds, seen, skips, looked)


def current_picture(keeps: list[np.ndarray]) -> list[np.ndarray]:
    """Per clip, the kept tokens that are still the newest of their cell after the last clip: the current
    picture, which the session pins (eviction never takes it)."""
    newest = np.full(keeps[0].shape[1:], -1)  # per cell: the (clip, group) that last kept it, flattened
    for c, keep in enumerate(keeps):
        for g in range(keep.shape[0]):
            newest[keep[g]] = c * keep.shape[0] + g
    pinned = []
    for c, keep in enumerate(keeps):
        order = c * keep.shape[0] + np.arange(keep.shape[0])[:, None, None]
        pinned.append(keep & (newest[None] == order))
    return pinned


def batch_inputs(model, adapter: Qwen2VLAdapter, examples: list[Example]):
    """(inputs_embeds [B, T, hidden], position_ids [3, B, T], labels [B, T]; -100 where untrained, right-padded;
    the kept visual features [N, hidden] in the order of their examples' `seen`; asks [Q, 2]: (row, index) of the
    token that predicts each answer's first token, in the order of their examples' `looks`).

    The vision tower runs once over every clip of the batch; each clip's features (its kept tokens only) go to
    its placeholders, and every segment gets the positions the streaming session would give it."""
    clips = [s for e in examples for s in e.segments if "pixel_values_videos" in s.model_inputs]
    features: list[torch.Tensor] = []
    if clips:
        pixels = torch.cat([s.model_inputs["pixel_values_videos"] for s in clips])
        grids = torch.cat([s.model_inputs["video_grid_thw"] for s in clips])
        out = model.get_video_features(pixels, grids, return_dict=True).pooler_output
        for segment, feats in zip(clips, out, strict=True):
            features.append(feats if segment.visual_select is None else feats[segment.visual_select])
    table = model.get_input_embeddings()
    rows, positions, labels, asks = [], [], [], []
    next_feature = iter(features)
    for row, example in enumerate(examples):
        ids = torch.cat([s.input_ids[0] for s in example.segments])
        embeds = table(ids)  # [T, hidden]
        visual = [next(next_feature) for s in example.segments if "pixel_values_videos" in s.model_inputs]
        if visual:
            mask = (ids == adapter.video_token_id).unsqueeze(1)
            embeds = embeds.masked_scatter(mask, torch.cat(visual).to(embeds.dtype))
        pos, start = [], 0
        for segment, skip in zip(example.segments, example.skips, strict=True):
            p, start = adapter.segment_position_ids(segment, start + skip)
            pos.append(p[:, 0])
        target = torch.full_like(ids, -100)
        offset = 0
        for segment, trained in zip(example.segments, example.answer_mask, strict=True):
            if trained is not None:  # predicting token k of the answer happens at the token before it
                where = torch.nonzero(trained).squeeze(1) + offset
                target[where - 1] = ids[where]
                asks.append((row, int(where[0]) - 1))
            offset += segment.num_tokens
        rows.append(embeds)
        positions.append(torch.cat(pos, dim=1))
        labels.append(target)
    length = max(r.shape[0] for r in rows)
    hidden = rows[0].shape[1]
    embeds = torch.zeros(len(rows), length, hidden)
    pos = torch.zeros(3, len(rows), length, dtype=torch.long)
    lab = torch.full((len(rows), length), -100, dtype=torch.long)
    for b, (r, p, t) in enumerate(zip(rows, positions, labels, strict=True)):
        n = r.shape[0]
        embeds[b, :n], lab[b, :n] = r, t
        pos[:, b, :n] = p
        pos[:, b, n:] = p[:, -1:] + 1 + torch.arange(length - n)  # padding after the end: never attended to
    features = torch.cat(features) if features else torch.zeros(0, hidden)
    return embeds, pos, lab, features, torch.tensor(asks, dtype=torch.long).reshape(-1, 2)


@dataclass
class Helpers:
    """The training-only heads (never saved), each None when its weight is 0. `seeing`: a linear head on the
    visual features naming what lies under each token. At the token that predicts an answer, `looking` (on decoder
    layer `look_layer`'s output) names what is in view, what was seen so far and, for a yes/no question, what it
    names; `matching` (on the last layer's, which the answer is read from) what it names and is in view, and what
    it names and was seen."""

    seeing: torch.nn.Linear | None
    looking: torch.nn.Linear | None
    matching: torch.nn.Linear | None
    cfg: TrainConfig


def batch_loss(model, adapter, examples: list[Example], helpers: Helpers | None = None):
    """(mean cross-entropy over trained tokens, their argmax predictions, their labels). With `helpers` plus
    `seeing_weight` times the seeing head's cross-entropy against what lies under each token (a dense signal that
    teaches the tower to tell a thing from its background long before the answers alone would) and `look_weight`
    times the looking head's binary cross-entropy at each question (so that by the last layer the answering token
    holds both what is there and what was asked, and a yes/no is a comparison: the fourth weights, trained on
    answers alone, named the thing 78% of the time and answered "Is there ...?" at chance)."""
    embeds, pos, labels, features, asks = batch_inputs(model, adapter, examples)
    looking = helpers is not None and helpers.looking is not None and asks.shape[0] > 0
    out = model(inputs_embeds=embeds, position_ids=pos, use_cache=False, output_hidden_states=looking)
    trained = labels != -100
    logits = out.logits[trained]
    loss = torch.nn.functional.cross_entropy(logits, labels[trained])
    if helpers is not None and helpers.seeing is not None and features.shape[0]:
        classes = torch.cat([c for e in examples for c in e.seen])
        balance = torch.full((len(THING_CLASSES),), helpers.cfg.seeing_thing_weight)
        balance[0] = 1.0
        seeing = torch.nn.functional.cross_entropy(helpers.seeing(features), classes, weight=balance)
        loss = loss + helpers.cfg.seeing_weight * seeing
    if looking:
        middle = out.hidden_states[helpers.cfg.look_layer][asks[:, 0], asks[:, 1]]
        last = out.hidden_states[-1][asks[:, 0], asks[:, 1]]
        target = torch.stack([x for e in examples for x in e.looks]).reshape(asks.shape[0], -1)
        known = ~target.isnan()
        guess = torch.cat([helpers.looking(middle), helpers.matching(last)], dim=1)
        look = torch.nn.functional.binary_cross_entropy_with_logits(guess[known], target[known])
        loss = loss + helpers.cfg.look_weight * look
    return loss, logits.argmax(-1), labels[trained]


def answer_accuracy(model, adapter, examples: list[Example]) -> dict[str, float]:
    """Share of answers whose every token is the model's greedy choice (teacher forced), per question kind."""
    model.eval()
    with torch.no_grad():
        _, predicted, labels = batch_loss(model, adapter, examples)
    model.train()
    right = (predicted == labels).tolist()
    per_kind: dict[str, list[bool]] = {}
    cursor = 0
    for example in examples:
        for kind, mask in zip(example.kinds, [m for m in example.answer_mask if m is not None], strict=True):
            n = int(mask.sum())
            per_kind.setdefault(kind, []).append(all(right[cursor : cursor + n]))
            cursor += n
    return {k: sum(v) / len(v) for k, v in sorted(per_kind.items())}


def learning_rate(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))


def start(cfg: TrainConfig):
    """The untrained model (train mode), its adapter, the training-only heads and the optimizer, seeded."""
    torch.manual_seed(cfg.seed)
    model, processor = build_demo(cfg.seed)
    model.train()
    adapter = Qwen2VLAdapter(model.config, processor, model.generation_config)
    hidden = model.config.text_config.hidden_size
    seeing = torch.nn.Linear(hidden, len(THING_CLASSES)) if cfg.seeing_weight else None
    looking = torch.nn.Linear(hidden, 3 * (len(THING_CLASSES) - 1)) if cfg.look_weight else None
    matching = torch.nn.Linear(hidden, 2 * (len(THING_CLASSES) - 1)) if cfg.look_weight else None
    named = list(model.named_parameters())
    for prefix, head in (("seeing", seeing), ("looking", looking), ("matching", matching)):
        named += [] if head is None else list(head.named_parameters(prefix))
    decay = [p for n, p in named if p.ndim >= 2 and "embed" not in n]
    other = [p for n, p in named if not (p.ndim >= 2 and "embed" not in n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": other, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.98),
    )
    return model, processor, adapter, Helpers(seeing, looking, matching, cfg), optimizer


_WORKER: dict = {}


def _worker_start(cfg: TrainConfig) -> None:
    torch.set_num_threads(1)
    model, processor = build_demo(cfg.seed)
    _WORKER["adapter"], _WORKER["cfg"] = Qwen2VLAdapter(model.config, processor, model.generation_config), cfg


def make_batch(step: int, adapter: Qwen2VLAdapter, cfg: TrainConfig) -> list[Example]:
    """The batch of step `step`: it depends on the seed and the step only (so a worker process can make it)."""
    rng = np.random.default_rng((cfg.seed, step))
    return [make_example(rng, adapter, cfg) for _ in range(cfg.batch)]


def _pickled_batch(step: int) -> bytes:
    # plain pickle bytes: torch's own tensor sharing between processes (file descriptors) stalls here
    return pickle.dumps(make_batch(step, _WORKER["adapter"], _WORKER["cfg"]))


def batches(cfg: TrainConfig, steps: int, adapter: Qwen2VLAdapter, workers: int, ahead: int = 4):
    """Each step's batch in order; `workers` processes make up to `ahead` batches ahead of the training loop
    (0: inline). Bounded: a faster worker waits instead of piling batches up in memory."""
    if workers == 0:
        yield from (make_batch(step, adapter, cfg) for step in range(steps))
        return
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_worker_start, initargs=(cfg,)) as pool:
        pending = collections.deque(pool.apply_async(_pickled_batch, (step,)) for step in range(min(ahead, steps)))
        for step in range(steps):
            data = pending.popleft().get()
            if step + ahead < steps:
                pending.append(pool.apply_async(_pickled_batch, (step + ahead,)))
            yield pickle.loads(data)


def train_steps(cfg: TrainConfig, steps: int, progress=None, on_step=None, workers: int = 0):
    """Runs the first `steps` steps of `cfg`; returns (model, processor, adapter, losses). The losses do not
    depend on `workers` (processes making the batches ahead)."""
    model, processor, adapter, helpers, optimizer = start(cfg)
    losses = []
    for step, examples in enumerate(batches(cfg, steps, adapter, workers)):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, cfg)
        loss, _, _ = batch_loss(model, adapter, examples, helpers)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for group in optimizer.param_groups for p in group["params"]], 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, float(loss), model, adapter)
        if progress is not None:
            progress(step, float(loss))
    model.eval()
    return model, processor, adapter, losses


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = TrainConfig()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=defaults.steps, help="optimizer steps (default %(default)s)")
    p.add_argument("--batch", type=int, default=defaults.batch, help="conversations per step (default %(default)s)")
    p.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate (default %(default)s)")
    p.add_argument("--seed", type=int, default=defaults.seed, help="seed of weights and data (default %(default)s)")
    p.add_argument("--eval-every", type=int, default=defaults.eval_every, help="steps between held-out checks")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default %(default)s)")
    p.add_argument("--workers", type=int, default=1, help="processes making batches ahead (default %(default)s)")
    p.add_argument("--out", type=Path, default=DEMO_DIR, help="checkpoint directory (default: model/demo_model)")
    p.add_argument("--log", type=Path, default=REPO / "docs/demo_model/train_log.csv", help="loss log (CSV)")
    p.add_argument("--plot", type=Path, default=REPO / "docs/demo_model/train_loss.png", help="loss curve (PNG)")
    args = p.parse_args(argv)
    if min(args.steps, args.batch, args.threads, args.eval_every) < 1 or args.workers < 0:
        p.error(
            "--steps, --batch, --threads and --eval-every must be >= 1 and --workers >= 0, got "
            f"{args.steps}, {args.batch}, {args.threads}, {args.eval_every}, {args.workers}"
        )
    if not (math.isfinite(args.lr) and 0 < args.lr < 1):
        p.error(f"--lr must be in (0, 1), got {args.lr}")
    if args.out.exists() and not args.out.is_dir():
        p.error(f"--out {args.out} is a file; give a directory for the checkpoint")
    return args


def plot(log: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in log]
    loss = np.array([r["loss"] for r in log])
    smooth = np.convolve(loss, np.ones(25) / 25, mode="valid") if len(loss) >= 25 else loss
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, loss, alpha=0.3, label="loss per step")
    ax.plot(steps[len(steps) - len(smooth) :], smooth, label="mean of 25 steps")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy on answer tokens")
    ax.set_title("demo model training (2 CPU cores)")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed, eval_every=args.eval_every)
    eval_rng = np.random.default_rng((cfg.seed, 1 << 40))
    log: list[dict] = []
    began = time.perf_counter()
    held_out: list[Example] = []
    bar = tqdm(total=cfg.steps, desc="training the demo model", unit="step")

    def on_step(step, loss, model, adapter):
        if not held_out:
            held_out.extend(make_example(eval_rng, adapter, cfg) for _ in range(160))
        row = {"step": step, "loss": loss, "lr": learning_rate(step, cfg), "seconds": time.perf_counter() - began}
        if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
            accuracy = answer_accuracy(model, adapter, held_out)
            row.update({f"acc_{k}": v for k, v in accuracy.items()})
            tqdm.write(f"step {step + 1}: loss {loss:.3f}, held-out answers right: " + ", ".join(
                f"{k} {v:.0%}" for k, v in accuracy.items()
            ))  # fmt: skip
        log.append(row)
        bar.set_postfix(loss=f"{loss:.3f}")
        bar.update(1)

    model, processor, _, losses = train_steps(cfg, cfg.steps, on_step=on_step, workers=args.workers)
    bar.close()
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    processor.save_pretrained(args.out)
    record = {"config": asdict(cfg), "first_losses": losses[:RECORDED_STEPS], "seconds": time.perf_counter() - began}
    record["held_out_accuracy"] = {k.removeprefix("acc_"): v for k, v in log[-1].items() if k.startswith("acc_")}
    (args.out / "training.json").write_text(json.dumps(record, indent=1))
    args.log.parent.mkdir(parents=True, exist_ok=True)
    fields = sorted({k for r in log for k in r}, key=lambda k: (k != "step", k))
    with args.log.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(log)
    plot(log, args.plot)
    print(f"wrote {args.out} ({record['seconds'] / 60:.1f} min), {args.log} and {args.plot}")


if __name__ == "__main__":
    main()
